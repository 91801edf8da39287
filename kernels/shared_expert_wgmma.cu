// shared_expert_wgmma (docs/ops/shared_expert.md): the SwiGLU MLP on bf16
// weights on Hopper's warpgroup tensor-core MMA (wgmma), forward y and backward
// dX (weights frozen), batch-invariant.
//
// Numeric profile: "mma16-h100" (oracles/src/profile/shared_expert.rs)
//   every dot product (z = x w1^T, y = h w2^T, dh = dy w2, dX = dz w1):
//        a chain of tensor-core steps from +0.0 over K in blocks of 16,
//        ascending (step s takes k = 16 s .. 16 s + 15; past K both operands
//        are zeros, which a step ignores), each step's f32 result the next
//        one's accumulator (oracles/src/mma.rs). dX is one chain over all
//        2F, the gate block first. The step is wgmma's k16 step, which
//        bitparity-mma-check confirms gives mma.sync's bits on the H200
//        (docs/mma.md).
//   bf16 roundings, sigmoid and the SwiGLU epilogues: as "serial"
//        (swiglu.cuh).
// No split-K, no atomics: each output's whole chain runs in one warpgroup's
// accumulator, in the same order whatever T, the tile it falls in or the
// grid. The chain depends only on the output's row of A and column of B, so
// the kernels are batch-invariant by construction.
//
// Compiled for sm_90a (wgmma is an arch-specific feature of sm_90).
//
// ---------------------------------------------------------------------------
// Design: a block of 384 threads: warpgroup 2 copies the operands into
// shared memory, warpgroups 0 and 1 compute (warp specialisation; setmaxnreg
// moves the copier's registers to them). The computing warpgroups take a
// BM x BN tile: 128 x 256, warpgroup w the rows 64 w .. 64 w + 63, all 256
// columns, with wgmma.m64n256k16; or (the `_m64` kernels, where those tiles
// would finish later) 64 x 128, all 64 rows and the columns 64 w .. 64 w +
// 63, with wgmma.m64n64k16; or (the dh GEMM's `_n64` kernel) 64 x 64,
// warpgroup 0 alone with wgmma.m64n64k16 (two m64n32k16 chains would read
// A from shared memory twice a step), warpgroup 1 joining only the
// epilogue (gemm_kn_dz_shared). A and B come from shared memory. K
// advances by 64 (four steps) through Shape::STAGES buffers (4 of 48 KiB,
// 8 of 24 KiB or 8 of 16 KiB), handed between the
// warpgroups by two mbarriers per stage ("full": copied; "empty": the steps
// on it done). The blocks are persistent: one per
// multiprocessor (or per tile, where there are fewer tiles), each walking
// the tiles blockIdx.x, blockIdx.x + gridDim.x, ..., so that the copier
// fills the next tile's stages while the computing warpgroups run this
// tile's epilogue. Which tile a launch takes and which block runs it change
// no bit: an output's chain is the same.
// Copies: where both operands' rows are 16-byte aligned (the host then
// passes tensor maps and tma = 1), one thread of the copier loads each
// stage with TMA (cp.async.bulk.tensor: boxes of 64 columns, the 128-byte
// swizzle, zeros outside the matrix), completing on the stage's full
// barrier. Otherwise (odd H or F, offsets 1..3, odd row strides) its 128
// threads copy with cp.async, 16 bytes where the source is 16-byte aligned
// and whole, else the 8 values one by one with zeros past the edges (slower,
// the same bits), STAGES - 2 stages in flight per thread.
// Shared memory: rows of 64 bf16 (128 bytes) with the 128-byte swizzle (the
// 16-byte chunk c of row r at chunk c ^ (r mod 8)), every tile 1024-byte
// aligned. A and the [n][k] operands are K-major (a row per m or n); the
// [k][n] operand is MN-major: blocks of 64 columns (BN / 64 of them), a row
// per k, read with wgmma's transpose of B.
// Epilogues: straight from the accumulators to global memory, two adjacent
// outputs a store where the row length is even and the buffer aligned
// (aligned_to, below); the dz epilogue is a loop (gemm_kn_dz says why).
// Launches: each kernel lets the next one in the stream start early
// (programmatic dependent launch, src/subject/cuda/launch.rs): its copier
// requests its first tile's first EARLY_STAGES stages of B before it waits
// for the kernel before to complete, every other thread waits first.
//
// The forward keeps z (g and u, f32) for the backward, as autograd does: the
// backward runs 6 T H F FLOPs, not 10 (z is not recomputed from x).
//
// Launch contract: kernels/shared_expert.cu's, so that the one subject
// (src/subject/cuda/shared_expert.rs) launches either, except that the
// forward's gate/up kernel also writes z (T x 2F f32, row t = [g, u]) and
// the backward's dh GEMM (se_gemm_kn_dz) turns dh into dz with z, so that
// there is no se_gate_up_bwd; and BP_WG_SMEM bytes of dynamic shared memory
// (the function's limit raised to it first). Block (384, 1, 1); grid
// (blocks, 1, 1), any number of blocks (the kernels loop over the tiles).
// Each may be launched to overlap the kernel before it (programmatic
// dependent launch): it reads B before it waits for that kernel, so B (the
// weights) must not be what that kernel writes.
// The gate/up kernel's tiles: ceil(F / (BN / 2)) along N (gate units j0 ..
// j0 + BN / 2 - 1 and their up units), the GEMMs' ceil(N / BN); ceil(M /
// BM) along M. BM x BN = 128 x 256; each entry point below also exists as
// NAME_m64, with 64 x 128, and se_gemm_kn_dz as se_gemm_kn_dz_n64, with
// 64 x 64. Every entry point takes three more parameters
// last: the tensor maps of A (at its offset: rows M, columns K, boxes of BM
// rows) and B (GATE_UP: w1's 2F rows, boxes of 32; NK: N rows, boxes of BN;
// KN: K rows of N columns, boxes of 64), and tma (1: copy through them).
//   se_gate_up_fwd(x, x_off, x_ld, w1, T, H, F, h, z)
//   se_gemm_nk_bf16(a, a_off, a_ld, b, M, N, K, out)   b[n*K + k]
//   se_gemm_kn_dz(a, a_off, a_ld, b, z, M, N, K, dz)   b[k*N + n]; N = F:
//        dh = bf16(a b), dz = bf16([dgate, dup]) from dh and z
//   se_gemm_kn_f32(a, a_off, a_ld, b, M, N, K, out)    b[k*N + n], f32 out
// ---------------------------------------------------------------------------

#include "common.cuh"
#include "expf.cuh"
#include "swiglu.cuh"

#if !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "shared_expert_wgmma.cu needs sm_90a (wgmma)"
#endif

#define BP_SE_THREADS 384
#define BP_SE_BM 128
#define BP_SE_BN 256
// K per stage: four wgmma steps, one 128-byte row of bf16.
#define BP_WG_BK 64
// 64 rows (or, [k][n], 64 columns) of a tile: 8 KiB.
#define BP_WG_BLOCK_BYTES 8192
// The stages, and 1024 bytes to align them (the swizzle's atoms): the
// subject passes BP_WG_SMEM; keep the two in step.
#define BP_WG_SMEM 197632

namespace bp {
namespace wg {

using swiglu::bf16_t;

enum BMode { B_NK = 0, B_KN = 1, B_GATE_UP = 2 };

__device__ __forceinline__ unsigned smem(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }

// The byte offset of the 16-byte chunk c (0..7) of row r of a tile of
// 128-byte rows under the 128-byte swizzle.
__device__ __forceinline__ unsigned swz(int r, int c) { return (unsigned)(r * 128 + ((c ^ (r & 7)) << 4)); }

// 8 consecutive bf16 from src into dst (16-byte aligned): `valid` of them
// in range (the rest zeros). One cp.async when all 8 are in range and src is
// 16-byte aligned; else plain loads and one 16-byte store. (The same as
// shared_expert_tc.cu's, which keeps its own copy for its mutants' ids.)
__device__ __forceinline__ void load8(unsigned char* dst, const bf16_t* src, int valid, bool aligned) {
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

// A shared-memory matrix descriptor with the 128-byte swizzle: start
// address, leading and stride byte offsets (each in units of 16 bytes).
__device__ __forceinline__ unsigned long long desc(unsigned addr, unsigned lbo, unsigned sbo) {
    return (unsigned long long)((addr & 0x3ffff) >> 4) | ((unsigned long long)(lbo >> 4) << 16) |
           ((unsigned long long)(sbo >> 4) << 32) | (1ull << 62);
}

// d = a b + d over one k block of 16 for a warpgroup's 64 x 256 (or, below,
// 64 x 64) outputs: the step the profile chains. TB: B is MN-major
// (transposed).
template <int TB>
__device__ __forceinline__ void wgmma16(float (&d)[128], unsigned long long da, unsigned long long db) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p, 1, 1, 0, %130;\n"
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
          "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
          "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
          "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
          "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
          "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
          "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
          "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
          "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(da), "l"(db), "n"(TB)
        : "memory");
}
template <int TB>
__device__ __forceinline__ void wgmma16(float (&d)[32], unsigned long long da, unsigned long long db) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, %34;\n"
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "l"(da), "l"(db), "n"(TB)
        : "memory");
}

// The tiles: BM x BN outputs (128 x 256, 64 x 128 or 64 x 64). The
// computing warpgroups split a tile of 128 rows by rows (warpgroup w the
// rows WG_M0 w .. WG_M0 w + 63, all columns) and one of 64 rows by columns
// (all rows, the columns WG_N0 w .. WG_N0 w + WG_N - 1), or of 64 x 64 not
// at all (MMA_WGS); a warpgroup's 64 x WG_N outputs over its 128 threads,
// ACC each. A stage's bytes (A's BM x 64, then B's BN x 64) and how many
// stages the shared memory holds.
template <int BM, int BN>
struct Shape {
    static_assert((BM == 128 && BN == 256) || (BM == 64 && (BN == 128 || BN == 64)), "a tile the entry points take");
    // Warpgroups in the main loop: both, or (the 64 x 64 tiles) warpgroup
    // 0 alone, with m64n64k16 steps: two m64n32k16 chains would read A
    // twice (measured on the H200: dh at T = 16 0.022 ms against 0.027);
    // warpgroup 1 then joins only the epilogue.
    static constexpr int MMA_WGS = BN == 64 ? 1 : 2;
    static constexpr int WG_M0 = BM == 128 ? 64 : 0;
    static constexpr int WG_N0 = BM == 128 || MMA_WGS == 1 ? 0 : BN / 2;
    static constexpr int WG_N = BM == 128 ? BN : BN / MMA_WGS;
    static constexpr int ACC = WG_N / 2;
    static_assert(WG_N0 % 64 == 0, "a warpgroup's columns start a 64-column block of a [k][n] stage");
    static constexpr int A_BYTES = BM * 128;
    static constexpr int STAGE_BYTES = (BM + BN) * 128;
    // 192 KiB of stages: 4 of the large tiles', 8 of the 64 x 128 ones';
    // 128 KiB, 8 stages, of the 64 x 64 ones (measured: dh at T = 256
    // 0.026 to 0.028 ms with 8, 0.029 to 0.032 with 12).
    static constexpr int STAGES = (BN == 64 ? 128 : 192) * 1024 / STAGE_BYTES;
    // Stages of B the copier requests before it waits for the kernel
    // before (measured: T = 256 f+b 0.079 ms with 1 or 2, 0.080 with none,
    // 0.085 with all 8, A's first box then queued behind them).
    static constexpr int EARLY_STAGES = STAGES < 2 ? STAGES : 2;
    // After the stages, where MMA_WGS = 1: two buffers (tiles in turn) of
    // the tile's dh, bf16 in pairs, rows of XCHG_ROW words (36: the stores
    // from the accumulators' layout hit 32 banks).
    static constexpr int XCHG_ROW = 36;
    static constexpr int XCHG_BYTES = MMA_WGS == 1 ? 2 * BM * XCHG_ROW * 4 : 0;
    static_assert(STAGES >= 3 && STAGES * STAGE_BYTES + XCHG_BYTES + 1024 <= BP_WG_SMEM, "the stages fit BP_WG_SMEM");
};

// The B row of the gate/up kernels' tile row r: 32 gate units, their 32 up
// units, the next 32 gate units, their up units, and so on; so that a
// warpgroup's 64 columns (BM = 64) hold the gate and up values of the same
// units, as do the 256 of BM = 128. Tile column c holds unit j0 + gate_up_unit(c), its up
// value when gate_up_is_up(c).
__device__ __forceinline__ int gate_up_unit(int c) { return (c >> 6) * 32 + (c & 31); }
__device__ __forceinline__ bool gate_up_is_up(int c) { return (c >> 5) & 1; }

// mbarriers (shared memory, CTA scope): the copying warpgroup and the
// computing ones hand the stages to each other through two per stage.
__device__ __forceinline__ void bar_init(unsigned long long* b, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem(b)), "r"(count) : "memory");
}
__device__ __forceinline__ void bar_arrive(unsigned long long* b) {
    asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" ::"r"(smem(b)) : "memory");
}
// Until the phase of the given parity has completed.
__device__ __forceinline__ void bar_wait(unsigned long long* b, unsigned parity) {
    unsigned done;
    do {
        asm volatile(
            "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done)
            : "r"(smem(b)), "r"(parity)
            : "memory");
    } while (!done);
}

// Programmatic dependent launch (src/subject/cuda/launch.rs): the subject
// launches each of these kernels so that it may start while the kernel
// before it in the stream runs (measured: T = 256 f+b 0.080 ms against
// 0.082). launch_dependents lets the next kernel's blocks start (on
// multiprocessors this grid leaves free, then on those its blocks leave);
// wait returns once the kernel before has completed and its writes are
// visible, at once where the launch was a plain one.
__device__ __forceinline__ void dependents_launch() {
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
}
__device__ __forceinline__ void prerequisites_wait() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }

// A CUtensorMap (the host encodes it: src/subject/cuda/tma.rs), passed by
// value as a __grid_constant__ parameter.
struct __align__(64) TmaDesc {
    unsigned long long opaque[16];
};

// The box of `map` at (inner, outer) into shared memory at dst (1024-byte
// aligned: the map's 128-byte swizzle is wgmma's), completing on `bar`'s
// transaction count. Outside the tensor the box holds zeros.
__device__ __forceinline__ void tma_load(unsigned char* dst, const TmaDesc* map, int inner, int outer,
                                         unsigned long long* bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::
            "r"(smem(dst)),
        "l"(reinterpret_cast<unsigned long long>(map)), "r"(inner), "r"(outer), "r"(smem(bar))
        : "memory");
}
__device__ __forceinline__ void bar_expect(unsigned long long* b, unsigned bytes) {
    asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n}\n" ::"r"(smem(b)),
                 "r"(bytes)
                 : "memory");
}

// The dynamic shared memory, from its first 1024-byte boundary: the
// stages, then (Shape::XCHG_BYTES) the dz epilogue's buffers.
__device__ __forceinline__ unsigned char* stage_base() {
    extern __shared__ __align__(1024) unsigned char bp_wg_smem[];
    return bp_wg_smem + ((1024u - (smem(bp_wg_smem) & 1023u)) & 1023u);
}

// One GEMM of the block's tiles, A (M x K, row m at a + m lda) times B (by
// MODE), over BM x BN tiles: tile i of the grid's persistent loop is tile
// row i / tiles_n, column i % tiles_n; column c of the tile is output column
// n0 + c (GATE_UP: n0 = the first gate unit, the tile's rows as
// gate_up_unit says). Warpgroup 2 copies the stages, warpgroups 0 and 1
// compute; `epilogue(m0, n0, acc)` runs on each tile's chains in the
// computing warpgroups, acc[4 i + e] at tile row out_row<BM, BN>(e), column
// out_col<BM, BN>(i, e) (wgmma's accumulator layout).
template <int MODE, int BM, int BN, typename Epilogue>
__device__ __forceinline__ void tiles_mma(const bf16_t* __restrict__ a, long long lda, int M,
                                          const bf16_t* __restrict__ b, long long ldb, int N, int K,
                                          const TmaDesc* ta, const TmaDesc* tb, bool tma, Epilogue epilogue) {
    // full[s]: stage s copied (one arrival per copying thread; with TMA,
    // one arrival and the copies' bytes); empty[s]: its steps done (one
    // arrival per computing warp).
    __shared__ __align__(8) unsigned long long full[Shape<BM, BN>::STAGES], empty[Shape<BM, BN>::STAGES];
    unsigned char* tiles = stage_base();
    constexpr int STAGES = Shape<BM, BN>::STAGES;
    constexpr int TILE_COLS = MODE == B_GATE_UP ? BN / 2 : BN;
    const int tid = threadIdx.x;
    if (tid == 0) {
        for (int s = 0; s < STAGES; ++s) {
            bar_init(&full[s], tma ? 1 : 128);
            bar_init(&empty[s], 4 * Shape<BM, BN>::MMA_WGS);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    // Also orders the callers' shared tables (exp_table_load) before any
    // read: no barrier for the whole block follows.
    __syncthreads();
    dependents_launch();

    const int tiles_n = (N + TILE_COLS - 1) / TILE_COLS;
    const long long tiles_all = (long long)((M + BM - 1) / BM) * tiles_n;
    const int stages = (K + BP_WG_BK - 1) / BP_WG_BK;

    if (tid >= 256) {
        // The copying warpgroup: with TMA one thread; otherwise 128
        // threads, each BM / 16 chunks of 8 of A and BN / 16 of B per stage
        // (below), STAGES - 2 stages in flight.
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
        const int ct = tid - 256;
        if (tma) {
            // One thread issues the bulk tensor copies: A's box of BM rows,
            // then B's boxes, each 64 wide in k (or n), 128 bytes.
            if (ct != 0) return;
            // B's boxes of stage k0 of the tile at n0 into sb (NK: one of BN
            // rows; KN: one per 64-column block; GATE_UP: per 64 tile rows,
            // 32 gate rows and their 32 up rows).
            auto load_b = [&](unsigned char* sb, int k0, int n0, unsigned long long* bar) {
                if (MODE == B_NK) {
                    tma_load(sb, tb, k0, n0, bar);
                } else if (MODE == B_KN) {
#pragma unroll
                    for (int cb = 0; cb < BN / 64; ++cb)
                        tma_load(sb + cb * BP_WG_BLOCK_BYTES, tb, n0 + cb * 64, k0, bar);
                } else {
#pragma unroll
                    for (int blk = 0; blk < BN / 64; ++blk) {
                        const int unit = n0 + blk * 32;
                        tma_load(sb + blk * BP_WG_BLOCK_BYTES, tb, k0, unit, bar);
                        tma_load(sb + blk * BP_WG_BLOCK_BYTES + 4096, tb, k0, N + unit, bar);
                    }
                }
            };
            // B is weights, which no kernel before this one writes (the
            // launch contract): the first tile's first stages of it are
            // requested before the wait, each stage's full barrier armed
            // for the whole stage; its A boxes follow the wait.
            int early = blockIdx.x < tiles_all ? Shape<BM, BN>::EARLY_STAGES : 0;
            if (early > stages) early = stages;
            for (int s = 0; s < early; ++s) {
                unsigned char* sa = tiles + s * Shape<BM, BN>::STAGE_BYTES;
                bar_expect(&full[s], Shape<BM, BN>::STAGE_BYTES);
                load_b(sa + Shape<BM, BN>::A_BYTES, s * BP_WG_BK, (int)(blockIdx.x % tiles_n) * TILE_COLS, &full[s]);
            }
            prerequisites_wait();
            long long it = 0;
            for (long long tile = blockIdx.x; tile < tiles_all; tile += gridDim.x) {
                const int m0 = (int)(tile / tiles_n) * BM, n0 = (int)(tile % tiles_n) * TILE_COLS;
                for (int s = 0; s < stages; ++s, ++it) {
                    const int slot = (int)(it % STAGES);
                    unsigned char* sa = tiles + slot * Shape<BM, BN>::STAGE_BYTES;
                    const int k0 = s * BP_WG_BK;
                    if (it < early) {
                        tma_load(sa, ta, k0, m0, &full[slot]);
                        continue;
                    }
                    if (it >= STAGES) bar_wait(&empty[slot], (unsigned)((it / STAGES - 1) & 1));
                    bar_expect(&full[slot], Shape<BM, BN>::STAGE_BYTES);
                    tma_load(sa, ta, k0, m0, &full[slot]);
                    load_b(sa + Shape<BM, BN>::A_BYTES, k0, n0, &full[slot]);
                }
            }
            return;
        }
        prerequisites_wait();
        const bool a_aligned = ((reinterpret_cast<unsigned long long>(a) & 15) == 0) && (lda % 8 == 0);
        const bool b_aligned = ((reinterpret_cast<unsigned long long>(b) & 15) == 0) && (ldb % 8 == 0);
        long long it = 0, signalled = 0;
        for (long long tile = blockIdx.x; tile < tiles_all; tile += gridDim.x) {
            const int m0 = (int)(tile / tiles_n) * BM, n0 = (int)(tile % tiles_n) * TILE_COLS;
            for (int s = 0; s < stages; ++s, ++it) {
                const int slot = (int)(it % STAGES);
                // The slot's previous stage, it - STAGES, released.
                if (it >= STAGES) bar_wait(&empty[slot], (unsigned)((it / STAGES - 1) & 1));
                unsigned char* sa = tiles + slot * Shape<BM, BN>::STAGE_BYTES;
                unsigned char* sb = sa + Shape<BM, BN>::A_BYTES;
                const int k0 = s * BP_WG_BK;
#pragma unroll 1
                for (int q = 0; q < BM / 16; ++q) {
                    const int c = ct + q * 128;
                    const int r = c >> 3, kc = c & 7;
                    const int m = m0 + r, k = k0 + kc * 8;
                    load8(sa + swz(r, kc), a + (long long)m * lda + k, m < M ? clamp8(K - k) : 0, a_aligned);
                }
#pragma unroll 1
                for (int q = 0; q < BN / 16; ++q) {
                    const int c = ct + q * 128;
                    if (MODE == B_KN) {
                        // [k][n]: 64 rows of k, BN / 8 chunks of n each;
                        // chunk nc in the column block nc / 8.
                        const int kr = c / (BN / 8), nc = c % (BN / 8);
                        const int k = k0 + kr, n = n0 + nc * 8;
                        load8(sb + (nc >> 3) * BP_WG_BLOCK_BYTES + swz(kr, nc & 7), b + (long long)k * ldb + n,
                              k < K ? clamp8(N - n) : 0, b_aligned);
                    } else {
                        const int r = c >> 3, kc = c & 7;
                        const int k = k0 + kc * 8;
                        int row, in;
                        if (MODE == B_GATE_UP) {
                            const int unit = n0 + gate_up_unit(r);
                            in = unit < N;
                            row = gate_up_is_up(r) ? N + unit : unit;
                        } else {
                            row = n0 + r;
                            in = row < N;
                        }
                        load8(sb + swz(r, kc), b + (long long)row * ldb + k, in ? clamp8(K - k) : 0, b_aligned);
                    }
                }
                asm volatile("cp.async.commit_group;\n" ::);
                // All but the newest STAGES - 2 of this thread's stages are
                // in; the copies (cp.async and plain stores) are
                // generic-proxy writes, which wgmma reads through the async
                // proxy.
                asm volatile("cp.async.wait_group %0;\n" ::"n"(STAGES - 2));
                asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
                for (; signalled <= it - (STAGES - 2); ++signalled) bar_arrive(&full[signalled % STAGES]);
            }
        }
        asm volatile("cp.async.wait_group 0;\n" ::);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        for (; signalled < it; ++signalled) bar_arrive(&full[signalled % STAGES]);
        return;
    }

    // The computing warpgroups (Shape): BM = 128: warpgroup w the tile's
    // rows 64 w .. 64 w + 63 and all of B; BM = 64: all of A, B's columns
    // from WG_N0 w (rows of an [n][k] tile; in a [k][n] one, columns of its
    // 64-column blocks); the 64 x 64 tiles: warpgroup 0 all of B.
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
    // Before any epilogue reads (z) or writes what the kernel before reads.
    prerequisites_wait();
    const int wgrp = tid >> 7;
    const bool releases = (tid & 31) == 0;
    long long it = 0;
    for (long long tile = blockIdx.x; tile < tiles_all; tile += gridDim.x) {
        const int m0 = (int)(tile / tiles_n) * BM, n0 = (int)(tile % tiles_n) * TILE_COLS;
        float acc[Shape<BM, BN>::ACC];
#pragma unroll
        for (int i = 0; i < Shape<BM, BN>::ACC; ++i) acc[i] = 0.0f;
        if (wgrp >= Shape<BM, BN>::MMA_WGS) {
            // Not in the main loop (Shape): the epilogue only, acc unused.
            epilogue(m0, n0, acc);
            continue;
        }
        // Four steps per stage, k blocks 0, 16, 32 and 48 of the stage, in
        // that order (wgmma steps of one warpgroup complete in issue order,
        // each on the accumulator the previous one left).
        for (int s = 0; s < stages; ++s, ++it) {
            const int slot = (int)(it % STAGES);
            bar_wait(&full[slot], (unsigned)((it / STAGES) & 1));
            const unsigned tile_smem = smem(tiles + slot * Shape<BM, BN>::STAGE_BYTES);
            const unsigned sa = tile_smem + wgrp * Shape<BM, BN>::WG_M0 * 128;
            // [k][n]: column c at block c / 64 (WG_N0 is a multiple of 64);
            // [n][k]: row c.
            const int wg_n0 = wgrp * Shape<BM, BN>::WG_N0;
            const unsigned sb = tile_smem + Shape<BM, BN>::A_BYTES +
                                (MODE == B_KN ? (wg_n0 >> 6) * BP_WG_BLOCK_BYTES : wg_n0 * 128);
            asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                // K-major: the next k block 32 bytes along the row; 8-row
                // groups 1024 bytes apart (the leading offset is unused).
                const unsigned long long da = desc(sa + j * 32, 16, 1024);
                if (MODE == B_KN) {
                    // MN-major: 16 rows of k per step; the 64-column blocks
                    // 8 KiB apart (leading), 8-row groups of k 1024 apart.
                    wgmma16<1>(acc, da, desc(sb + j * 16 * 128, BP_WG_BLOCK_BYTES, 1024));
                } else {
                    wgmma16<0>(acc, da, desc(sb + j * 32, 16, 1024));
                }
            }
            asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
            // The steps on the previous stage are done: its slot is free.
            asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
            if (s > 0 && releases) bar_arrive(&empty[(it - 1) % STAGES]);
        }
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
        if (stages > 0 && releases) bar_arrive(&empty[(it - 1) % STAGES]);
        epilogue(m0, n0, acc);
    }
}

// The tile row and column of acc[4 i + e] (computing threads only).
template <int BM, int BN>
__device__ __forceinline__ int out_row(int e) {
    const int tid = threadIdx.x;
    return (tid >> 7) * Shape<BM, BN>::WG_M0 + ((tid >> 5) & 3) * 16 + ((tid & 31) >> 2) + (e >> 1) * 8;
}
template <int BM, int BN>
__device__ __forceinline__ int out_col(int i, int e) {
    return (threadIdx.x >> 7) * Shape<BM, BN>::WG_N0 + i * 8 + (threadIdx.x & 3) * 2 + (e & 1);
}

// The epilogues store two adjacent outputs (columns n, n + 1, n even from
// the tile's first) as one word where the row length is even and the
// buffer aligned, so every pair is: half the store instructions, and each
// warp's stores fill whole 32-byte sectors (measured: the gate/up, down and
// dX kernels 12 to 18 % faster). Otherwise one output a store.
__device__ __forceinline__ bool aligned_to(const void* p, unsigned bytes) {
    return (reinterpret_cast<unsigned long long>(p) & (bytes - 1)) == 0;
}
__device__ __forceinline__ unsigned pack2(bf16_t lo, bf16_t hi) { return (unsigned)lo | ((unsigned)hi << 16); }

// One gate/up tile's epilogue calls (below), VEC a constant in each (the
// caller branches on it once per tile), so that the unrolled code holds one
// store path.
template <bool VEC, int BM, int BN, typename Epilogue>
__device__ __forceinline__ void gate_up_tile(int m0, int j0, const float (&acc)[Shape<BM, BN>::ACC], int T, int F,
                                             Epilogue& epilogue) {
    // Unrolled (about 95 KiB of code a store path), unlike the dz
    // epilogue: a loop would index the f32 accumulators at run time from
    // local memory, 512 bytes a thread, and took 0.174 ms against 0.144
    // (measured at T = 2048).
#pragma unroll
    for (int i = 0; i < Shape<BM, BN>::ACC / 4; ++i) {
        if (i & 4) continue;
#pragma unroll
        for (int e = 0; e < 4; e += 2) {
            const int t = m0 + out_row<BM, BN>(e), j = j0 + gate_up_unit(out_col<BM, BN>(i, e));
            if (t < T && j < F)
                epilogue(VEC, t, j, acc[4 * i + e], acc[4 * (i + 4) + e], acc[4 * i + e + 1],
                         acc[4 * (i + 4) + e + 1], j + 1 < F);
        }
    }
}
// The gate/up kernels: z = x w1^T for the tile's units, then `epilogue(vec,
// t, j, g0, u0, g1, u1, both)` on each pair of units j, j + 1 (j even from
// j0) of a token, j in range, j + 1 too where `both`. Of a thread's 8-column
// groups i, those with bit 2 clear hold gate values, i + 4 the same units'
// up values; accumulators 4 i + e and 4 i + e + 1 (e even) adjacent units.
template <int BM, int BN, typename Epilogue>
__device__ __forceinline__ void gate_up(const bf16_t* __restrict__ x, long long x_ld, const bf16_t* __restrict__ w1,
                                        int T, int H, int F, const TmaDesc* ta, const TmaDesc* tb, bool tma,
                                        bool vec, Epilogue epilogue) {
    static_assert(Shape<BM, BN>::WG_N % 64 == 0, "a warpgroup's columns: whole groups of 32 gate, 32 up units");
    tiles_mma<B_GATE_UP, BM, BN>(x, x_ld, T, w1, H, F, H, ta, tb, tma, [&](int m0, int j0, float(&acc)[Shape<BM, BN>::ACC]) {
        if (vec)
            gate_up_tile<true, BM, BN>(m0, j0, acc, T, F, epilogue);
        else
            gate_up_tile<false, BM, BN>(m0, j0, acc, T, F, epilogue);
    });
}

template <int BM, int BN>
__device__ __forceinline__ void gate_up_fwd(const bf16_t* __restrict__ x, int x_off, long long x_ld,
                                            const bf16_t* __restrict__ w1, int T, int H, int F,
                                            bf16_t* __restrict__ h, float* __restrict__ z, const TmaDesc* ta,
                                            const TmaDesc* tb, bool tma) {
    __shared__ double pow2[BP_EXP_TABLE];
    exp_table_load(pow2);  // tiles_mma's barrier orders it before any read
    // F even: every pair's h at an even index, its z values at even ones.
    const bool vec = F % 2 == 0 && aligned_to(h, 4) && aligned_to(z, 8);
    gate_up<BM, BN>(x + x_off, x_ld, w1, T, H, F, ta, tb, tma, vec,
                [&](bool v, int t, int j, float g0, float u0, float g1, float u1, bool both) {
                    bf16_t* hr = h + (long long)t * F + j;
                    float* zr = z + (long long)t * 2 * F + j;
                    const bf16_t h0 = swiglu::h_value(g0, u0, pow2);
                    if (v) {
                        const bf16_t h1 = swiglu::h_value(g1, u1, pow2);
                        *reinterpret_cast<unsigned*>(hr) = pack2(h0, h1);
                        *reinterpret_cast<float2*>(zr) = make_float2(g0, g1);
                        *reinterpret_cast<float2*>(zr + F) = make_float2(u0, u1);
                        return;
                    }
                    hr[0] = h0;
                    zr[0] = g0;
                    zr[F] = u0;
                    if (both) {
                        hr[1] = swiglu::h_value(g1, u1, pow2);
                        zr[1] = g1;
                        zr[F + 1] = u1;
                    }
                });
}

// The GEMMs' outputs c0 and c1 at o[0] and o[1] (o[1] only where `both`):
// one store where `pair` (o aligned to the pair), else one each.
__device__ __forceinline__ void store2(bf16_t* o, float c0, float c1, bool pair, bool both) {
    if (pair) {
        *reinterpret_cast<unsigned*>(o) = pack2(swiglu::bf16_rne(c0), swiglu::bf16_rne(c1));
    } else {
        o[0] = swiglu::bf16_rne(c0);
        if (both) o[1] = swiglu::bf16_rne(c1);
    }
}
__device__ __forceinline__ void store2(float* o, float c0, float c1, bool pair, bool both) {
    if (pair) {
        *reinterpret_cast<float2*>(o) = make_float2(c0, c1);
    } else {
        o[0] = c0;
        if (both) o[1] = c1;
    }
}

// One GEMM tile's outputs into out (row m at out + m N), as gate_up_tile's
// calls: pairs (m, n), (m, n + 1), n even from n0, in range, n + 1 too where
// `both`.
template <bool VEC, int BM, int BN, typename Out>
__device__ __forceinline__ void gemm_tile(int m0, int n0, const float (&acc)[Shape<BM, BN>::ACC], int M, int N,
                                          Out* out) {
#pragma unroll
    for (int i = 0; i < Shape<BM, BN>::ACC / 4; ++i)
#pragma unroll
        for (int e = 0; e < 4; e += 2) {
            const int m = m0 + out_row<BM, BN>(e), n = n0 + out_col<BM, BN>(i, e);
            if (m < M && n < N) store2(out + (long long)m * N + n, acc[4 * i + e], acc[4 * i + e + 1], VEC, n + 1 < N);
        }
}

// C = A B into out (M x N, dense): bf16 (rounded to nearest even) or f32.
template <int MODE, int BM, int BN, typename Out>
__device__ __forceinline__ void gemm(const bf16_t* __restrict__ a, int a_off, long long a_ld,
                                     const bf16_t* __restrict__ b, int M, int N, int K, const TmaDesc* ta,
                                     const TmaDesc* tb, bool tma, Out* out) {
    // N even: every pair starts at an even index, aligned to a pair.
    const bool vec = N % 2 == 0 && aligned_to(out, 2 * sizeof(Out));
    tiles_mma<MODE, BM, BN>(a + a_off, a_ld, M, b, MODE == B_KN ? (long long)N : (long long)K, N, K, ta, tb, tma,
                        [&](int m0, int n0, float(&acc)[Shape<BM, BN>::ACC]) {
                            if (vec)
                                gemm_tile<true, BM, BN>(m0, n0, acc, M, N, out);
                            else
                                gemm_tile<false, BM, BN>(m0, n0, acc, M, N, out);
                        });
}

// gemm_kn_dz where warpgroup 0 alone runs the main loop (Shape::MMA_WGS =
// 1): it leaves each tile's dh, rounded to bf16, in one of two shared
// buffers (tiles in turn), and both computing warpgroups turn it into dz,
// thread k the pairs (row p / (BN / 2), columns 2 (p mod BN / 2) and the
// next) for p = k, k + 256, ...: a warp a row's 32 pairs, z read and dz
// written in whole sectors. One barrier of the 256 threads a tile: after
// it, the buffer of the tile before the last is free (its readers have
// reached this tile).
template <int BM, int BN>
__device__ __forceinline__ void gemm_kn_dz_shared(const bf16_t* __restrict__ a, long long a_ld,
                                                  const bf16_t* __restrict__ b, const float* __restrict__ z, int M,
                                                  int N, int K, bf16_t* __restrict__ dz, const TmaDesc* ta,
                                                  const TmaDesc* tb, bool tma, const double* pow2) {
    using S = Shape<BM, BN>;
    constexpr int ROW = S::XCHG_ROW;
    unsigned* xchg = reinterpret_cast<unsigned*>(stage_base() + S::STAGES * S::STAGE_BYTES);
    const bool vec = N % 2 == 0 && aligned_to(z, 8) && aligned_to(dz, 4);
    int turn = 0;
    tiles_mma<B_KN, BM, BN>(a, a_ld, M, b, (long long)N, N, K, ta, tb, tma, [&](int m0, int n0, float(&acc)[S::ACC]) {
        unsigned* buf = xchg + (turn & 1) * BM * ROW;
        ++turn;
        if (threadIdx.x < 128) {
#pragma unroll
            for (int i = 0; i < S::ACC / 4; ++i)
#pragma unroll
                for (int e = 0; e < 4; e += 2)
                    buf[out_row<BM, BN>(e) * ROW + out_col<BM, BN>(i, e) / 2] =
                        pack2(swiglu::bf16_rne(acc[4 * i + e]), swiglu::bf16_rne(acc[4 * i + e + 1]));
        }
        asm volatile("bar.sync 1, 256;\n" ::: "memory");
#pragma unroll 1
        for (int p = threadIdx.x; p < BM * BN / 2; p += 256) {
            const int r = p / (BN / 2), c = 2 * (p % (BN / 2));
            const int t = m0 + r, j = n0 + c;
            if (t >= M || j >= N) continue;
            const unsigned d2 = buf[r * ROW + c / 2];
            const float* zr = z + (long long)t * 2 * N + j;
            bf16_t* row = dz + (long long)t * 2 * N + j;
            bf16_t dg[2], du[2];
            if (vec) {
                const float2 gg = *reinterpret_cast<const float2*>(zr);
                const float2 uu = *reinterpret_cast<const float2*>(zr + N);
                swiglu::dz_values(gg.x, uu.x, swiglu::bf16_value((bf16_t)d2), pow2, &dg[0], &du[0]);
                swiglu::dz_values(gg.y, uu.y, swiglu::bf16_value((bf16_t)(d2 >> 16)), pow2, &dg[1], &du[1]);
                *reinterpret_cast<unsigned*>(row) = pack2(dg[0], dg[1]);
                *reinterpret_cast<unsigned*>(row + N) = pack2(du[0], du[1]);
                continue;
            }
            swiglu::dz_values(zr[0], zr[N], swiglu::bf16_value((bf16_t)d2), pow2, &dg[0], &du[0]);
            row[0] = dg[0];
            row[N] = du[0];
            if (j + 1 < N) {
                swiglu::dz_values(zr[1], zr[N + 1], swiglu::bf16_value((bf16_t)(d2 >> 16)), pow2, &dg[1], &du[1]);
                row[1] = dg[1];
                row[N + 1] = du[1];
            }
        }
    });
}

// gemm_kn_dz where both computing warpgroups run the main loop: each
// turns its own accumulators into dz.
template <int BM, int BN>
__device__ __forceinline__ void gemm_kn_dz_acc(const bf16_t* __restrict__ a, long long a_ld,
                                               const bf16_t* __restrict__ b, const float* __restrict__ z, int M,
                                               int N, int K, bf16_t* __restrict__ dz, const TmaDesc* ta,
                                               const TmaDesc* tb, bool tma, const double* pow2) {
    constexpr int ACC = Shape<BM, BN>::ACC;
    tiles_mma<B_KN, BM, BN>(a, a_ld, M, b, (long long)N, N, K, ta, tb, tma, [&](int m0, int n0, float(&acc)[ACC]) {
        // The epilogue is a loop, not unrolled: unrolled, it inlined a
        // sigmoid per accumulator, 213 KiB of code that the instruction
        // caches could not hold (warps waited for an instruction 30 % of
        // their cycles; as a loop, 46 KiB, the kernel took 0.106 ms, not
        // 0.131). The loop indexes dh at run time, so dh goes, rounded to
        // bf16 two to a word, into an array in local memory: the
        // accumulators themselves stay registers.
        unsigned dh[ACC / 2];
#pragma unroll
        for (int k = 0; k < ACC / 2; ++k) dh[k] = pack2(swiglu::bf16_rne(acc[2 * k]), swiglu::bf16_rne(acc[2 * k + 1]));
        // G outputs a turn (accumulator columns i0 .. i0 + G / 4 - 1), their
        // z values loaded (in pairs, as the stores: `vec`) before any of
        // their stores, all in flight together (16 made the kernel 4 %
        // faster than 8).
        constexpr int G = 16;
        const bool vec = N % 2 == 0 && aligned_to(z, 8) && aligned_to(dz, 4);
#pragma unroll 1
        for (int i0 = 0; i0 < ACC / 4; i0 += G / 4) {
            float g[G], u[G];
#pragma unroll
            for (int q = 0; q < G; q += 2) {
                const int i = i0 + q / 4, e = q % 4;
                const int t = m0 + out_row<BM, BN>(e), j = n0 + out_col<BM, BN>(i, e);
                const float* zr = z + (long long)t * 2 * N + j;
                const bool in = t < M && j < N, both = in && j + 1 < N;
                if (vec) {
                    const float2 gg = in ? *reinterpret_cast<const float2*>(zr) : make_float2(0.0f, 0.0f);
                    const float2 uu = in ? *reinterpret_cast<const float2*>(zr + N) : make_float2(0.0f, 0.0f);
                    g[q] = gg.x;
                    g[q + 1] = gg.y;
                    u[q] = uu.x;
                    u[q + 1] = uu.y;
                } else {
                    g[q] = in ? zr[0] : 0.0f;
                    u[q] = in ? zr[N] : 0.0f;
                    g[q + 1] = both ? zr[1] : 0.0f;
                    u[q + 1] = both ? zr[N + 1] : 0.0f;
                }
            }
#pragma unroll
            for (int q = 0; q < G; q += 2) {
                const int i = i0 + q / 4, e = q % 4;
                const int t = m0 + out_row<BM, BN>(e), j = n0 + out_col<BM, BN>(i, e);
                if (t >= M || j >= N) continue;
                const unsigned d2 = dh[2 * i + e / 2];
                bf16_t dg[2], du[2];
                swiglu::dz_values(g[q], u[q], swiglu::bf16_value((bf16_t)d2), pow2, &dg[0], &du[0]);
                bf16_t* row = dz + (long long)t * 2 * N + j;
                if (vec) {
                    swiglu::dz_values(g[q + 1], u[q + 1], swiglu::bf16_value((bf16_t)(d2 >> 16)), pow2, &dg[1], &du[1]);
                    *reinterpret_cast<unsigned*>(row) = pack2(dg[0], dg[1]);
                    *reinterpret_cast<unsigned*>(row + N) = pack2(du[0], du[1]);
                    continue;
                }
                row[0] = dg[0];
                row[N] = du[0];
                if (j + 1 < N) {
                    swiglu::dz_values(g[q + 1], u[q + 1], swiglu::bf16_value((bf16_t)(d2 >> 16)), pow2, &dg[1], &du[1]);
                    row[1] = dg[1];
                    row[N + 1] = du[1];
                }
            }
        }
    });
}

// dh = bf16(dy w2) (M = T, N = F, K = H), then dz from dh and the forward's
// z, as se_gate_up_bwd of the other sources does from z recomputed.
template <int BM, int BN>
__device__ __forceinline__ void gemm_kn_dz(const bf16_t* __restrict__ a, int a_off, long long a_ld,
                                           const bf16_t* __restrict__ b, const float* __restrict__ z, int M,
                                           int N, int K, bf16_t* __restrict__ dz, const TmaDesc* ta,
                                           const TmaDesc* tb, bool tma) {
    __shared__ double pow2[BP_EXP_TABLE];
    exp_table_load(pow2);  // tiles_mma's barrier orders it before any read
    if constexpr (Shape<BM, BN>::MMA_WGS == 1)
        gemm_kn_dz_shared<BM, BN>(a + a_off, a_ld, b, z, M, N, K, dz, ta, tb, tma, pow2);
    else
        gemm_kn_dz_acc<BM, BN>(a + a_off, a_ld, b, z, M, N, K, dz, ta, tb, tma, pow2);
}

}  // namespace wg
}  // namespace bp

using namespace bp;
using namespace bp::wg;

// The entry points: NAME with 128 x 256 tiles, NAME_m64 with 64 x 128, and
// the dh GEMM also as se_gemm_kn_dz_n64, with 64 x 64 (where the 64 x 128
// tiles leave half the multiprocessors idle: T = 256). The last three
// parameters: the tensor maps of A (at its offset) and B, and whether to
// copy through them (tma = 0: the maps are unused; cp.async).
#define BP_WG_TMA const __grid_constant__ TmaDesc ta, const __grid_constant__ TmaDesc tb, int tma
#define BP_WG_GATE_UP(NAME, BM, BN)                                                                               \
    extern "C" __global__ void __launch_bounds__(BP_SE_THREADS, 1)                                                \
        se_gate_up_fwd##NAME(const bf16_t* __restrict__ x, int x_off, long long x_ld,                             \
                             const bf16_t* __restrict__ w1, int T, int H, int F, bf16_t* __restrict__ h,          \
                             float* __restrict__ z, BP_WG_TMA) {                                                  \
        gate_up_fwd<BM, BN>(x, x_off, x_ld, w1, T, H, F, h, z, &ta, &tb, tma != 0);                               \
    }
#define BP_WG_NK_BF16(NAME, BM, BN)                                                                               \
    extern "C" __global__ void __launch_bounds__(BP_SE_THREADS, 1)                                                \
        se_gemm_nk_bf16##NAME(const bf16_t* __restrict__ a, int a_off, long long a_ld,                            \
                              const bf16_t* __restrict__ b, int M, int N, int K, bf16_t* __restrict__ out,        \
                              BP_WG_TMA) {                                                                        \
        gemm<B_NK, BM, BN>(a, a_off, a_ld, b, M, N, K, &ta, &tb, tma != 0, out);                                  \
    }
#define BP_WG_KN_DZ(NAME, BM, BN)                                                                                 \
    extern "C" __global__ void __launch_bounds__(BP_SE_THREADS, 1)                                                \
        se_gemm_kn_dz##NAME(const bf16_t* __restrict__ a, int a_off, long long a_ld, const bf16_t* __restrict__ b, \
                            const float* __restrict__ z, int M, int N, int K, bf16_t* __restrict__ dz,            \
                            BP_WG_TMA) {                                                                          \
        gemm_kn_dz<BM, BN>(a, a_off, a_ld, b, z, M, N, K, dz, &ta, &tb, tma != 0);                                \
    }
#define BP_WG_KN_F32(NAME, BM, BN)                                                                                \
    extern "C" __global__ void __launch_bounds__(BP_SE_THREADS, 1)                                                \
        se_gemm_kn_f32##NAME(const bf16_t* __restrict__ a, int a_off, long long a_ld,                             \
                             const bf16_t* __restrict__ b, int M, int N, int K, float* __restrict__ out,          \
                             BP_WG_TMA) {                                                                         \
        gemm<B_KN, BM, BN>(a, a_off, a_ld, b, M, N, K, &ta, &tb, tma != 0, out);                                  \
    }
#define BP_WG_ENTRIES(NAME, BM, BN) \
    BP_WG_GATE_UP(NAME, BM, BN)     \
    BP_WG_NK_BF16(NAME, BM, BN)     \
    BP_WG_KN_DZ(NAME, BM, BN)       \
    BP_WG_KN_F32(NAME, BM, BN)

BP_WG_ENTRIES(, 128, 256)
BP_WG_ENTRIES(_m64, 64, 128)
BP_WG_KN_DZ(_n64, 64, 64)
