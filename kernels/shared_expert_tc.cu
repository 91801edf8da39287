// shared_expert_tc (docs/ops/shared_expert.md): the SwiGLU MLP on bf16 weights
// on the tensor cores, forward y and backward dX (weights frozen),
// batch-invariant.
//
// Numeric profile: "mma16-h100" (oracles/src/profile/shared_expert.rs)
//   every dot product (z = x w1^T, y = h w2^T, dh = dy w2, dX = dz w1):
//        a chain of mma.sync.m16n8k16.f32.bf16.bf16.f32 steps from +0.0 over
//        K in blocks of 16, ascending (step s takes k = 16 s .. 16 s + 15;
//        past K both operands are zeros, which a step ignores), each step's
//        f32 result the next one's accumulator (oracles/src/mma.rs). dX is
//        one chain over all 2F, the gate block first.
//   bf16 roundings, sigmoid and the SwiGLU epilogues: as "serial" (the code
//        of kernels/shared_expert.cu, repeated below).
// No split-K, no atomics: each output's whole chain runs in one warp, in
// the same order whatever T, the tile it falls in or the grid. The chain
// depends only on the output's row of A and column of B, so the kernels are
// batch-invariant by construction, and the tile shape could change with T
// without changing a bit.
//
// ---------------------------------------------------------------------------
// Design: a block of 256 threads (8 warps, 2 x 4) computes a 128 x 128 tile;
// each warp 64 x 32 of it, as 4 x 4 mma tiles of 16 x 8. K advances by 32
// (two mma steps) through BP_TC_STAGES buffers of shared memory, the copies
// of the next stages in flight while one computes: cp.async copies 16 bytes
// when the source is 16-byte aligned and whole, otherwise the thread loads
// the 8 values one by one with zeros past the edges (odd H, offsets 1..3,
// odd row strides: slower, the same bits). Fragments come from shared
// memory by ldmatrix (.trans for the K x N operands).
//
// Launch contract: kernels/shared_expert.cu's, so that the one subject
// (src/subject/cuda/shared_expert.rs) launches either, except for shared
// memory: BP_TC_SMEM bytes of dynamic shared memory (the function's limit
// raised to it first). Block (256, 1, 1), grid.y = ceil(M / 128); the gate/up
// kernels take grid.x = ceil(F / 64) (gate units j0 = 64 blockIdx.x ..
// j0 + 63 and their up units), the GEMMs grid.x = ceil(N / 128).
//   se_gate_up_fwd(x, x_off, x_ld, w1, T, H, F, h)
//   se_gate_up_bwd(x, x_off, x_ld, w1, dh, T, H, F, dz)
//   se_gemm_nk_bf16(a, a_off, a_ld, b, M, N, K, out)   b[n*K + k]
//   se_gemm_kn_bf16(a, a_off, a_ld, b, M, N, K, out)   b[k*N + n]
//   se_gemm_kn_f32(a, a_off, a_ld, b, M, N, K, out)    b[k*N + n], f32 out
// ---------------------------------------------------------------------------

#include "common.cuh"
#include "expf.cuh"

#define BP_SE_THREADS 256
#define BP_SE_BM 128
#define BP_SE_BN 128
// K per shared-memory stage: two mma steps.
#define BP_TC_BK 32
// Row pitches in bf16: 80 bytes for [row][k] tiles and 272 for [k][n]
// tiles, so that the 8 rows one ldmatrix reads fall in distinct banks.
#define BP_TC_PITCH (BP_TC_BK + 8)
#define BP_TC_KN_PITCH (BP_SE_BN + 8)
#ifndef BP_TC_MIN_BLOCKS
#define BP_TC_MIN_BLOCKS 2
#endif
// Shared-memory stages of K, and the dynamic shared memory they take (the
// subject passes BP_TC_SMEM; keep the two in step: 4 x 20480).
#define BP_TC_STAGES 4
#define BP_TC_SMEM 81920

namespace bp {
namespace tc {

typedef unsigned short bf16_t;

// As kernels/shared_expert.cu.
__device__ __forceinline__ float bf16_value(bf16_t v) { return __uint_as_float((unsigned)v << 16); }

__device__ __forceinline__ bf16_t bf16_rne(float x) {
    const unsigned b = __float_as_uint(x);
    if (x != x) return (bf16_t)((b >> 16) | 0x0040u);
    return (bf16_t)((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}

__device__ __forceinline__ float sigmoid(float g, const double* pow2) {
    return div(1.0f, add(1.0f, exp_cr(-g, pow2)));
}

enum BMode { B_NK = 0, B_KN = 1, B_GATE_UP = 2 };

struct Tiles {
    bf16_t a[BP_TC_STAGES][BP_SE_BM * BP_TC_PITCH];
    // [n][k] with pitch BP_TC_PITCH, or (B_KN) [k][n] with BP_TC_KN_PITCH.
    bf16_t b[BP_TC_STAGES][BP_SE_BN * BP_TC_PITCH];
};
static_assert(BP_TC_BK * BP_TC_KN_PITCH <= BP_SE_BN * BP_TC_PITCH, "a K x N tile fits the B buffer");
static_assert(sizeof(Tiles) == BP_TC_SMEM, "BP_TC_SMEM is the tiles' size");

__device__ __forceinline__ unsigned smem(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }

// 8 consecutive bf16 from src into dst (16-byte aligned): `valid` of them
// in range (the rest zeros). One cp.async when all 8 are in range and src is
// 16-byte aligned; else plain loads and one 16-byte store.
__device__ __forceinline__ void load8(bf16_t* dst, const bf16_t* src, int valid, bool aligned) {
    if (valid == 8 && aligned) {
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem(dst)), "l"(src));
    } else {
        unsigned w[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const unsigned lo = 2 * e < valid ? src[2 * e] : 0u;
            const unsigned hi = 2 * e + 1 < valid ? src[2 * e + 1] : 0u;
            w[e] = lo | hi << 16;
        }
        *reinterpret_cast<uint4*>(dst) = make_uint4(w[0], w[1], w[2], w[3]);
    }
}

__device__ __forceinline__ int clamp8(int n) { return n < 0 ? 0 : (n > 8 ? 8 : n); }

__device__ __forceinline__ void ldsm_x4(unsigned (&r)[4], const bf16_t* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem(p)));
}

__device__ __forceinline__ void ldsm_x4_trans(unsigned (&r)[4], const bf16_t* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem(p)));
}

// d = c + a b over one k block of 16: the step the profile chains.
__device__ __forceinline__ void mma16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// The first tile row of a warp's pair p (0, 1) of 8-column mma tiles. For
// GATE_UP, pair 0 holds the warp's 16 gate units and pair 1 the same units'
// up values (tile rows 64 + ...), so one thread has g and u of a unit.
template <int MODE>
__device__ __forceinline__ int pair_base(int wn, int p) {
    return MODE == B_GATE_UP ? p * 64 + wn * 16 : wn * 32 + p * 16;
}

// One block's 128 x 128 tile: acc[mi][nf][e] is the chain of the output at
// tile row wm*64 + mi*16 + lane/4 + 8 (e/2) and the column of mma tile nf
// (pair nf/2, pair_base + 8 (nf%2)) + 2 (lane%4) + e%2.
//   A: element (m, k) at a[m*lda + k] (a already offset), m < M.
//   B: by MODE; n0 the tile's first column (GATE_UP: j0, N = F).
template <int MODE>
__device__ __forceinline__ void tile_mma(Tiles& sh, const bf16_t* __restrict__ a, long long lda, int M, int m0,
                                         const bf16_t* __restrict__ b, long long ldb, int N, int n0, int K,
                                         float (&acc)[4][4][4]) {
    const int tid = threadIdx.x;
    const int lane = tid & 31, warp = tid >> 5;
    const int wm = warp >> 2, wn = warp & 3;
#pragma unroll
    for (int mi = 0; mi < 4; ++mi)
#pragma unroll
        for (int nf = 0; nf < 4; ++nf)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[mi][nf][e] = 0.0f;

    const bool a_aligned = ((reinterpret_cast<unsigned long long>(a) & 15) == 0) && (lda % 8 == 0);
    const bool b_aligned = ((reinterpret_cast<unsigned long long>(b) & 15) == 0) && (ldb % 8 == 0);

    // Each thread copies 2 chunks of 8 of A and 2 of B per stage.
    auto load = [&](int buf, int k0) {
#pragma unroll
        for (int q = 0; q < 2; ++q) {
            const int c = tid + q * BP_SE_THREADS;
            const int r = c >> 2, kc = (c & 3) * 8;
            const int m = m0 + r, k = k0 + kc;
            load8(&sh.a[buf][r * BP_TC_PITCH + kc], a + (long long)m * lda + k, m < M ? clamp8(K - k) : 0,
                  a_aligned);
        }
#pragma unroll
        for (int q = 0; q < 2; ++q) {
            const int c = tid + q * BP_SE_THREADS;
            if (MODE == B_KN) {
                const int kr = c >> 4, nc = (c & 15) * 8;
                const int k = k0 + kr, n = n0 + nc;
                load8(&sh.b[buf][kr * BP_TC_KN_PITCH + nc], b + (long long)k * ldb + n, k < K ? clamp8(N - n) : 0,
                      b_aligned);
            } else {
                const int r = c >> 2, kc = (c & 3) * 8;
                const int k = k0 + kc;
                int row, in;
                if (MODE == B_GATE_UP) {
                    const int unit = n0 + (r & 63);
                    in = unit < N;
                    row = r < 64 ? unit : N + unit;
                } else {
                    row = n0 + r;
                    in = row < N;
                }
                load8(&sh.b[buf][r * BP_TC_PITCH + kc], b + (long long)row * ldb + k, in ? clamp8(K - k) : 0,
                      b_aligned);
            }
        }
    };

    // Two mma steps, k blocks kk = 0 and 16 of the stage, in that order.
    auto compute = [&](int buf) {
#pragma unroll
        for (int kk = 0; kk < BP_TC_BK; kk += 16) {
            unsigned af[4][4];
#pragma unroll
            for (int mi = 0; mi < 4; ++mi) {
                const int row = wm * 64 + mi * 16 + (lane & 15);
                ldsm_x4(af[mi], &sh.a[buf][row * BP_TC_PITCH + kk + (lane >> 4) * 8]);
            }
            unsigned bf[4][2];
#pragma unroll
            for (int p = 0; p < 2; ++p) {
                unsigned r[4];
                const int base = pair_base<MODE>(wn, p);
                if (MODE == B_KN) {
                    const int k = kk + (lane & 7) + ((lane >> 3) & 1) * 8;
                    ldsm_x4_trans(r, &sh.b[buf][k * BP_TC_KN_PITCH + base + (lane >> 4) * 8]);
                } else {
                    const int n = base + (lane & 7) + (lane >> 4) * 8;
                    ldsm_x4(r, &sh.b[buf][n * BP_TC_PITCH + kk + ((lane >> 3) & 1) * 8]);
                }
                bf[2 * p][0] = r[0];
                bf[2 * p][1] = r[1];
                bf[2 * p + 1][0] = r[2];
                bf[2 * p + 1][1] = r[3];
            }
#pragma unroll
            for (int mi = 0; mi < 4; ++mi)
#pragma unroll
                for (int nf = 0; nf < 4; ++nf) mma16(acc[mi][nf], af[mi], bf[nf][0], bf[nf][1]);
        }
    };

    // One commit group per stage of K, empty past the end, so that waiting
    // for all but the newest STAGES - 2 groups always means "stage s is in".
    const int stages = (K + BP_TC_BK - 1) / BP_TC_BK;
#pragma unroll
    for (int s = 0; s < BP_TC_STAGES - 1; ++s) {
        if (s < stages) load(s, s * BP_TC_BK);
        asm volatile("cp.async.commit_group;\n" ::);
    }
    for (int s = 0; s < stages; ++s) {
        asm volatile("cp.async.wait_group %0;\n" ::"n"(BP_TC_STAGES - 2));
        // Stage s is in for every thread; every thread is done with stage
        // s - 1, whose buffer the load below overwrites.
        __syncthreads();
        const int next = s + BP_TC_STAGES - 1;
        if (next < stages) load(next % BP_TC_STAGES, next * BP_TC_BK);
        asm volatile("cp.async.commit_group;\n" ::);
        compute(s % BP_TC_STAGES);
    }
    // The epilogue may reuse nothing of the tiles, but every copy is done.
    asm volatile("cp.async.wait_group 0;\n" ::);
}

// The tile row and column (within the tile) of acc[mi][nf][e].
__device__ __forceinline__ int out_row(int mi, int e) {
    const int lane = threadIdx.x & 31, wm = threadIdx.x >> 7;
    return wm * 64 + mi * 16 + (lane >> 2) + (e >> 1) * 8;
}
template <int MODE>
__device__ __forceinline__ int out_col(int nf, int e) {
    const int lane = threadIdx.x & 31, wn = (threadIdx.x >> 5) & 3;
    return pair_base<MODE>(wn, nf >> 1) + (nf & 1) * 8 + (lane & 3) * 2 + (e & 1);
}

}  // namespace tc
}  // namespace bp

using namespace bp;
using namespace bp::tc;

extern "C" __global__ void __launch_bounds__(BP_SE_THREADS, BP_TC_MIN_BLOCKS)
    se_gate_up_fwd(const bf16_t* __restrict__ x, int x_off, long long x_ld, const bf16_t* __restrict__ w1, int T,
                   int H, int F, bf16_t* __restrict__ h) {
    extern __shared__ __align__(16) unsigned char bp_tc_smem[];
    Tiles& sh = *reinterpret_cast<Tiles*>(bp_tc_smem);
    __shared__ double pow2[BP_EXP_TABLE];
    exp_table_load(pow2);  // tile_mma's barriers order it before any read
    const int m0 = blockIdx.y * BP_SE_BM;
    const int j0 = blockIdx.x * 64;
    float acc[4][4][4];
    tile_mma<B_GATE_UP>(sh, x + x_off, x_ld, T, m0, w1, H, F, j0, H, acc);
    // Tiles nf = 0, 1 hold gate values, nf + 2 the up values of the same units.
#pragma unroll
    for (int mi = 0; mi < 4; ++mi)
#pragma unroll
        for (int nf = 0; nf < 2; ++nf)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int t = m0 + out_row(mi, e), j = j0 + out_col<B_GATE_UP>(nf, e);
                if (t >= T || j >= F) continue;
                const float g = acc[mi][nf][e], u = acc[mi][nf + 2][e];
                const float sig = sigmoid(g, pow2);
                h[(long long)t * F + j] = bf16_rne(mul(mul(g, sig), u));
            }
}

extern "C" __global__ void __launch_bounds__(BP_SE_THREADS, BP_TC_MIN_BLOCKS)
    se_gate_up_bwd(const bf16_t* __restrict__ x, int x_off, long long x_ld, const bf16_t* __restrict__ w1,
                   const bf16_t* __restrict__ dh, int T, int H, int F, bf16_t* __restrict__ dz) {
    extern __shared__ __align__(16) unsigned char bp_tc_smem[];
    Tiles& sh = *reinterpret_cast<Tiles*>(bp_tc_smem);
    __shared__ double pow2[BP_EXP_TABLE];
    exp_table_load(pow2);
    const int m0 = blockIdx.y * BP_SE_BM;
    const int j0 = blockIdx.x * 64;
    float acc[4][4][4];
    tile_mma<B_GATE_UP>(sh, x + x_off, x_ld, T, m0, w1, H, F, j0, H, acc);
#pragma unroll
    for (int mi = 0; mi < 4; ++mi)
#pragma unroll
        for (int nf = 0; nf < 2; ++nf)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int t = m0 + out_row(mi, e), j = j0 + out_col<B_GATE_UP>(nf, e);
                if (t >= T || j >= F) continue;
                const float g = acc[mi][nf][e], u = acc[mi][nf + 2][e];
                const float d = bf16_value(dh[(long long)t * F + j]);
                const float sig = sigmoid(g, pow2);
                const float silu = mul(g, sig);
                const float dsilu = mul(sig, add(1.0f, mul(g, __fsub_rn(1.0f, sig))));
                const float dgate = mul(mul(d, u), dsilu);
                const float dup = mul(d, silu);
                bf16_t* row = dz + (long long)t * 2 * F;
                row[j] = bf16_rne(dgate);
                row[F + j] = bf16_rne(dup);
            }
}

#define BP_TC_GEMM(NAME, MODE, OUT_T, CONVERT)                                                                   \
    extern "C" __global__ void __launch_bounds__(BP_SE_THREADS, BP_TC_MIN_BLOCKS)                                \
        NAME(const bf16_t* __restrict__ a, int a_off, long long a_ld, const bf16_t* __restrict__ b, int M, int N, \
             int K, OUT_T* __restrict__ out) {                                                                   \
        extern __shared__ __align__(16) unsigned char bp_tc_smem[];                                              \
        Tiles& sh = *reinterpret_cast<Tiles*>(bp_tc_smem);                                                       \
        const int m0 = blockIdx.y * BP_SE_BM;                                                                    \
        const int n0 = blockIdx.x * BP_SE_BN;                                                                    \
        float acc[4][4][4];                                                                                      \
        tile_mma<MODE>(sh, a + a_off, a_ld, M, m0, b, (MODE) == B_KN ? (long long)N : (long long)K, N, n0, K,    \
                       acc);                                                                                     \
        _Pragma("unroll") for (int mi = 0; mi < 4; ++mi) {                                                       \
            _Pragma("unroll") for (int nf = 0; nf < 4; ++nf) {                                                   \
                _Pragma("unroll") for (int e = 0; e < 4; ++e) {                                                  \
                    const int m = m0 + out_row(mi, e), n = n0 + out_col<MODE>(nf, e);                            \
                    if (m < M && n < N) out[(long long)m * N + n] = CONVERT(acc[mi][nf][e]);                     \
                }                                                                                                \
            }                                                                                                    \
        }                                                                                                        \
    }

#define BP_TC_AS_IS(v) (v)
BP_TC_GEMM(se_gemm_nk_bf16, B_NK, bf16_t, bf16_rne)
BP_TC_GEMM(se_gemm_kn_bf16, B_KN, bf16_t, bf16_rne)
BP_TC_GEMM(se_gemm_kn_f32, B_KN, float, BP_TC_AS_IS)
