// shared_expert (docs/ops/shared_expert.md): the SwiGLU MLP on bf16 weights,
// forward y and backward dX (weights frozen), strict profile.
//
// Numeric profile: "serial" (oracles/src/profile/shared_expert.rs)
//   every dot product (z = x w1^T, y = h w2^T, dh = dy w2, dX = dz w1):
//        Serial over its inner index ascending, from +0.0: acc = acc + a*b,
//        the product and the sum each rounded (__fmul_rn, __fadd_rn; the
//        module is compiled with --fmad=false anyway). dX is one chain over
//        all 2F indices, the gate block (0..F-1) first.
//   bf16 roundings (h, y, dh, dz): round to nearest even from f32, NaN stays
//        NaN (quieted, sign kept), overflow to inf, subnormals kept.
//   sigmoid(g) = 1 / (1 + exp(-g)): exp correctly rounded (bp::exp_cr,
//        expf.cuh), then the add, then the division, each rounded.
//   h = bf16((g * sig) * u); silu = g * sig; dsilu = sig * (1 + g * (1 -
//        sig)); dgate = (dh * u) * dsilu; dup = dh * silu; dz = bf16(...).
// No split-K, no atomics, no workspace reduction: every output element is
// the same serial loop over its whole inner dimension in one thread, whatever
// T, the tile it falls in or the grid, so the kernels are batch-invariant by
// construction (row t of every output reads row t of x and dy only).
//
// ---------------------------------------------------------------------------
// Design: register-tiled SIMT GEMMs. A block of BP_SE_THREADS = 256 threads
// computes a 128 x 128 tile of outputs; each thread owns 8 x 8 of them (rows
// ty*4+i and 64+ty*4+i, columns tx*4+j and 64+tx*4+j) and accumulates each
// over K in ascending order. K advances in steps of BP_SE_BK = 16: the bf16
// operands of the next step are loaded from global memory into registers
// while the current step computes from shared memory (f32, converted once on
// the way in; two buffers, one barrier a step). The last, partial step runs
// only over the indices k < K: nothing is ever added for a k past the end
// (an added 0 * b would turn an accumulator of -0.0 into +0.0, or 0 * inf
// into NaN). Rows and columns past M and N are computed on zeros and never
// stored.
//
// Launch contract (src/subject/cuda/shared_expert.rs follows it; anything
// else is undefined). bf16 buffers are unsigned short (the upper half of the
// f32 bits). All kernels: block (256, 1, 1), no dynamic shared memory,
// grid.y = ceil(M / 128) (M = T), grid.x as below. 1 <= T, H, F; every size
// below 2^31; row offsets are computed in 64 bits.
//
// se_gate_up_fwd(x, x_off, x_ld, w1, T, H, F, h)
//   grid.x = ceil(F / 64); block x takes the gate columns j0..j0+63 (w1 rows
//   j) and the up columns of the same j (w1 rows F + j), j0 = 64 blockIdx.x,
//   so that the SwiGLU epilogue has g and u of each (t, j) in one thread.
//   Reads x[x_off + t*x_ld + k] (k < H), w1[r*H + k]. Writes h[t*F + j].
// se_gate_up_bwd(x, x_off, x_ld, w1, dh, T, H, F, dz)
//   As se_gate_up_fwd (z recomputed from x); reads dh[t*F + j] (bf16, from
//   se_gemm_kn_bf16 on dy and w2); writes dz[t*2F + j] (the gate gradient)
//   and dz[t*2F + F + j] (the up gradient).
// se_gemm_nk_bf16(a, a_off, a_ld, b, M, N, K, out)
//   out[m*N + n] = bf16(sum_k a[a_off + m*a_ld + k] * b[n*K + k]):
//   y = bf16(h w2^T) with a = h (T x F), b = w2 (H x F), N = H, K = F.
//   grid.x = ceil(N / 128).
// se_gemm_kn_bf16(a, a_off, a_ld, b, M, N, K, out)
//   out[m*N + n] = bf16(sum_k a[a_off + m*a_ld + k] * b[k*N + n]):
//   dh = bf16(dy w2) with a = dy (T x H, the case's layout), b = w2, N = F,
//   K = H. grid.x = ceil(N / 128).
// se_gemm_kn_f32(a, a_off, a_ld, b, M, N, K, out)
//   As se_gemm_kn_bf16 with an f32 output, unrounded: dX = dz w1 with a = dz
//   (T x 2F), b = w1 (2F x H), N = H, K = 2F.
// ---------------------------------------------------------------------------

#include "common.cuh"
#include "expf.cuh"

#define BP_SE_THREADS 256
#define BP_SE_BM 128
#define BP_SE_BN 128
// Launch-shape knobs (BITPARITY_NVRTC_EXTRA=-DBP_SE_BK=8, say): neither
// changes a bit of any output (every k still runs in ascending order in one
// thread); they only trade shared memory, registers and residency.
#ifndef BP_SE_BK
#define BP_SE_BK 16
#endif
#ifndef BP_SE_MIN_BLOCKS
#define BP_SE_MIN_BLOCKS 2
#endif
// Row pitch of the shared tiles, in floats: 16-byte aligned rows (float4
// reads), and a store pattern with at most two-way bank conflicts.
#define BP_SE_PITCH (BP_SE_BM + 4)

namespace bp {
namespace se {

typedef unsigned short bf16_t;

// A bf16 as the f32 it is exactly.
__device__ __forceinline__ float bf16_value(bf16_t v) { return __uint_as_float((unsigned)v << 16); }

// RN-even of an f32 to bf16: NaN stays NaN (quiet bit set, sign kept: a NaN
// whose payload lies only in the low half would otherwise become inf), a
// finite value past the largest bf16 rounds to inf, subnormals are rounded
// like any other value (no flush).
__device__ __forceinline__ bf16_t bf16_rne(float x) {
    const unsigned b = __float_as_uint(x);
    if (x != x) return (bf16_t)((b >> 16) | 0x0040u);
    return (bf16_t)((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}

// sigmoid as docs/ops/router.md#the-sigmoid: 1 / (1 + exp(-g)), each operation rounded.
__device__ __forceinline__ float sigmoid(float g, const double* pow2) {
    return div(1.0f, add(1.0f, exp_cr(-g, pow2)));
}

// How operand B is stored: NK, element (n, k) at b[n*ldb + k] (k
// contiguous); KN, element (n, k) at b[k*ldb + n] (n contiguous); GATE_UP,
// NK on w1 with tile column c < 64 the gate row j0 + c and c >= 64 the up row
// F + j0 + c - 64.
enum BMode { B_NK = 0, B_KN = 1, B_GATE_UP = 2 };

struct Tiles {
    float a[2][BP_SE_BK][BP_SE_PITCH];
    float b[2][BP_SE_BK][BP_SE_PITCH];
};

// One block's 128 x 128 tile of dot products: acc[i][j] for the thread's
// rows rows(i) and columns cols(j) (see below), each Serial over k < K
// ascending from +0.0.
//   A: element (m, k) at a[m*lda + k] (a already offset), m < M.
//   B: by MODE; n0 the tile's first column (for GATE_UP: j0), N the number of
//      columns (GATE_UP: F, the number of j).
template <int MODE>
__device__ __forceinline__ void tile_dot(Tiles& sh, const bf16_t* __restrict__ a, long long lda, int M, int m0,
                                         const bf16_t* __restrict__ b, long long ldb, int N, int n0, int K,
                                         float (&acc)[8][8]) {
    const int tid = threadIdx.x;
    const int ty = tid >> 4, tx = tid & 15;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;
    }
    // Loader roles. A (and NK / GATE_UP B): BK consecutive threads read one
    // row's BK k; the thread's rows are lr + RS q, q < LOADS. KN B: 128
    // consecutive threads read one k's 128 n; the thread's k are kn_k + 2 q.
    constexpr int RS = BP_SE_THREADS / BP_SE_BK;            // rows per pass
    constexpr int LOADS = BP_SE_BM * BP_SE_BK / BP_SE_THREADS;  // values per thread
    constexpr int HALF = 64 / RS;                           // passes over the gate half
    static_assert(BP_SE_BK == 8 || BP_SE_BK == 16, "BP_SE_BK is 8 or 16");
    const int lk = tid % BP_SE_BK;
    const int lr = tid / BP_SE_BK;
    const int kn_n = tid & 127;
    const int kn_k = tid >> 7;

    // The thread's load rows: A rows m0 + lr + RS q; B rows (NK) n0 + lr +
    // RS q, or (GATE_UP) j0 + lr + RS (q mod HALF), gate rows for q < HALF
    // and up rows after. As bases, one step and a mask of the rows in range
    // (a row out of range loads 0), to keep registers for the accumulators.
    const bf16_t* a_base = a + (long long)(m0 + lr) * lda;
    const long long a_step = RS * lda;
    unsigned a_in = 0, b_in = 0;
#pragma unroll
    for (int q = 0; q < LOADS; ++q) a_in |= (unsigned)(m0 + lr + RS * q < M) << q;
    const bf16_t* b_lo = b;  // rows of q < HALF
    const bf16_t* b_hi = b;  // rows of q >= HALF
    const long long b_step = RS * ldb;
    if (MODE == B_NK) {
        b_lo = b + (long long)(n0 + lr) * ldb;
        b_hi = b_lo + 64 * ldb;
#pragma unroll
        for (int q = 0; q < LOADS; ++q) b_in |= (unsigned)(n0 + lr + RS * q < N) << q;
    } else if (MODE == B_GATE_UP) {
        b_lo = b + (long long)(n0 + lr) * ldb;
        b_hi = b + ((long long)N + n0 + lr) * ldb;
#pragma unroll
        for (int q = 0; q < LOADS; ++q) b_in |= (unsigned)(n0 + lr + RS * (q % HALF) < N) << q;
    }
    const bool kn_in = (n0 + kn_n) < N;

    unsigned short ra[LOADS], rb[LOADS];
    auto load = [&](int k0) {
        const int k = k0 + lk;
        const bool k_in = k < K;
#pragma unroll
        for (int q = 0; q < LOADS; ++q) ra[q] = (k_in && ((a_in >> q) & 1u)) ? a_base[q * a_step + k] : (bf16_t)0;
        if (MODE == B_KN) {
#pragma unroll
            for (int q = 0; q < LOADS; ++q) {
                const int kk = k0 + kn_k + 2 * q;
                rb[q] = (kn_in && kk < K) ? b[(long long)kk * ldb + n0 + kn_n] : (bf16_t)0;
            }
        } else {
#pragma unroll
            for (int q = 0; q < LOADS; ++q) {
                const bf16_t* base = q < HALF ? b_lo : b_hi;
                rb[q] = (k_in && ((b_in >> q) & 1u)) ? base[(q % HALF) * b_step + k] : (bf16_t)0;
            }
        }
    };
    auto store = [&](int buf) {
#pragma unroll
        for (int q = 0; q < LOADS; ++q) sh.a[buf][lk][lr + RS * q] = bf16_value(ra[q]);
        if (MODE == B_KN) {
#pragma unroll
            for (int q = 0; q < LOADS; ++q) sh.b[buf][kn_k + 2 * q][kn_n] = bf16_value(rb[q]);
        } else {
#pragma unroll
            for (int q = 0; q < LOADS; ++q) sh.b[buf][lk][lr + RS * q] = bf16_value(rb[q]);
        }
    };
    // One k: the thread's 8 rows and 8 columns from shared memory, then 64
    // products and sums, each rounded.
    auto step = [&](int buf, int kk) {
        const float4 a0 = *reinterpret_cast<const float4*>(&sh.a[buf][kk][ty * 4]);
        const float4 a1 = *reinterpret_cast<const float4*>(&sh.a[buf][kk][64 + ty * 4]);
        const float4 b0 = *reinterpret_cast<const float4*>(&sh.b[buf][kk][tx * 4]);
        const float4 b1 = *reinterpret_cast<const float4*>(&sh.b[buf][kk][64 + tx * 4]);
        const float av[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
        const float bv[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
        for (int i = 0; i < 8; ++i) {
#pragma unroll
            for (int j = 0; j < 8; ++j) acc[i][j] = add(acc[i][j], mul(av[i], bv[j]));
        }
    };

    const int steps = (K + BP_SE_BK - 1) / BP_SE_BK;
    load(0);
    store(0);
    __syncthreads();
    for (int s = 0; s < steps; ++s) {
        const int buf = s & 1;
        const int k0 = s * BP_SE_BK;
        if (s + 1 < steps) load(k0 + BP_SE_BK);
        if (k0 + BP_SE_BK <= K) {
#pragma unroll
            for (int kk = 0; kk < BP_SE_BK; ++kk) step(buf, kk);
        } else {
            const int nk = K - k0;
#pragma unroll 1
            for (int kk = 0; kk < nk; ++kk) step(buf, kk);
        }
        if (s + 1 < steps) store(buf ^ 1);
        __syncthreads();
    }
}

// The thread's output coordinates within the tile.
__device__ __forceinline__ int tile_row(int i) { return (i < 4 ? 0 : 64) + (threadIdx.x >> 4) * 4 + (i & 3); }
__device__ __forceinline__ int tile_col(int j) { return (j < 4 ? 0 : 64) + (threadIdx.x & 15) * 4 + (j & 3); }

}  // namespace se
}  // namespace bp

using namespace bp;
using namespace bp::se;

extern "C" __global__ void __launch_bounds__(BP_SE_THREADS, BP_SE_MIN_BLOCKS)
    se_gate_up_fwd(const bf16_t* __restrict__ x, int x_off, long long x_ld, const bf16_t* __restrict__ w1, int T,
                   int H, int F, bf16_t* __restrict__ h) {
    __shared__ __align__(16) Tiles sh;
    __shared__ double pow2[BP_EXP_TABLE];
    exp_table_load(pow2);  // the barriers of tile_dot order it before any read
    const int m0 = blockIdx.y * BP_SE_BM;
    const int j0 = blockIdx.x * 64;
    float acc[8][8];
    tile_dot<B_GATE_UP>(sh, x + x_off, x_ld, T, m0, w1, H, F, j0, H, acc);
    // Columns j < 4 of the thread are gate values, j + 4 the up values of
    // the same unit.
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int t = m0 + tile_row(i);
        if (t >= T) continue;
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            const int j = j0 + (threadIdx.x & 15) * 4 + c;
            if (j >= F) continue;
            const float g = acc[i][c], u = acc[i][4 + c];
            const float sig = sigmoid(g, pow2);
            h[(long long)t * F + j] = bf16_rne(mul(mul(g, sig), u));
        }
    }
}

extern "C" __global__ void __launch_bounds__(BP_SE_THREADS, BP_SE_MIN_BLOCKS)
    se_gate_up_bwd(const bf16_t* __restrict__ x, int x_off, long long x_ld, const bf16_t* __restrict__ w1,
                   const bf16_t* __restrict__ dh, int T, int H, int F, bf16_t* __restrict__ dz) {
    __shared__ __align__(16) Tiles sh;
    __shared__ double pow2[BP_EXP_TABLE];
    exp_table_load(pow2);
    const int m0 = blockIdx.y * BP_SE_BM;
    const int j0 = blockIdx.x * 64;
    float acc[8][8];
    tile_dot<B_GATE_UP>(sh, x + x_off, x_ld, T, m0, w1, H, F, j0, H, acc);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int t = m0 + tile_row(i);
        if (t >= T) continue;
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            const int j = j0 + (threadIdx.x & 15) * 4 + c;
            if (j >= F) continue;
            const float g = acc[i][c], u = acc[i][4 + c];
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
}

#define BP_SE_GEMM(NAME, MODE, OUT_T, CONVERT)                                                                  \
    extern "C" __global__ void __launch_bounds__(BP_SE_THREADS, BP_SE_MIN_BLOCKS)                                              \
        NAME(const bf16_t* __restrict__ a, int a_off, long long a_ld, const bf16_t* __restrict__ b, int M, int N, \
             int K, OUT_T* __restrict__ out) {                                                                   \
        __shared__ __align__(16) Tiles sh;                                                                       \
        const int m0 = blockIdx.y * BP_SE_BM;                                                                    \
        const int n0 = blockIdx.x * BP_SE_BN;                                                                    \
        float acc[8][8];                                                                                         \
        tile_dot<MODE>(sh, a + a_off, a_ld, M, m0, b, (MODE) == B_KN ? (long long)N : (long long)K, N, n0, K,    \
                       acc);                                                                                     \
        _Pragma("unroll") for (int i = 0; i < 8; ++i) {                                                          \
            const int m = m0 + tile_row(i);                                                                      \
            if (m >= M) continue;                                                                                \
            _Pragma("unroll") for (int j = 0; j < 8; ++j) {                                                      \
                const int n = n0 + tile_col(j);                                                                  \
                if (n < N) out[(long long)m * N + n] = CONVERT(acc[i][j]);                                       \
            }                                                                                                    \
        }                                                                                                        \
    }

#define BP_SE_AS_IS(v) (v)
BP_SE_GEMM(se_gemm_nk_bf16, B_NK, bf16_t, bf16_rne)
BP_SE_GEMM(se_gemm_kn_bf16, B_KN, bf16_t, bf16_rne)
BP_SE_GEMM(se_gemm_kn_f32, B_KN, float, BP_SE_AS_IS)
