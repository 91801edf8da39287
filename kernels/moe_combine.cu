// moe_combine (SPEC.md section 9): the dispatch of routed tokens to expert
// slots and the weighted combine of the experts' outputs, forward and
// backward. Two combines share one dispatch:
//
// (a) The gather kernels. Numeric profile: "serial" (the oracles crate's
//     moe_combine profiles), and nothing else, whatever the launch geometry:
//       combine y[t][h]  (over the token's kept choices j): Serial over j
//                        ascending from +0.0, acc = acc + w[t][j] * x_exp[s][h],
//                        the product and the sum each rounded (bp::mul,
//                        bp::add: __fmul_rn, __fadd_rn, never fused);
//       dw[t][j]         (over h): Serial over h ascending from +0.0 of the
//                        rounded products dy[t][h] * x_exp[s][h];
//       dx[t][h]         (over kept j): Serial over j ascending from +0.0 of
//                        g_disp[s][h];
//       dx_exp[s][h]     one rounded product w[t][j] * dy[t][h], no sum.
//     Every output element is one thread's (or, for dw, one warp's) serial
//     loop over its whole index range: no split, no tree, no atomics, so the
//     results do not depend on T, on the other tokens, on the grid or on the
//     device (batch-invariant and deterministic by construction). A dropped
//     choice (slot -1: over capacity, or a padding token) is never read, so
//     a token with no kept choice gets +0.0 and its NaN weights or rows
//     reach nothing.
//
// (b) The scatter kernels: the combine as MoE code usually writes it (and as
//     PyTorch's index_add_ runs it on a GPU): one thread per (slot, h) adds
//     its product into y[t][h] with a float atomicAdd. They claim NO
//     profile: the order in which a token's k products reach y is the order
//     in which the atomics land, which depends on scheduling. With at most
//     two kept choices the result is still fixed (+0.0 + a = a for every a,
//     -0.0 included, and a + b = b + a), from three on it is not: this is
//     the nondeterminism (and batch variance) bitparity's determinism and
//     batch-invariance properties must show on a GPU. y is zeroed first
//     (moe_zero_f32), as torch.zeros before index_add_.
//
// The dispatch is exact (integers only): slots grouped by expert in
// ascending expert id; inside an expert, ascending token index (a token
// holds at most one choice of each expert: ids are distinct within a
// token); padding tokens are never dispatched; with a capacity C, an
// expert's choices of rank >= C in that order are dropped. It is computed
// in three kernels with no atomics: each warp ranks the choices of a chunk
// of BP_MOE_CHUNK consecutive tokens serially in token order (per-expert
// counters in shared memory), one block turns the chunks' counts into
// per-chunk bases and the experts' offsets, and every choice then adds its
// chunk's base to its rank. The chunk is a constant; the dispatch has a
// single correct answer anyway.
//
// scripts/moe-combine-host-emulation runs these kernels on the CPU, launched
// as the contract below says, against the `serial` profile (no GPU needed;
// it cannot show the GPU's scheduling, memory model or code generation).
//
// ---------------------------------------------------------------------------
// Launch contract (the launcher, src/subject/cuda/moe_combine.rs, follows it;
// anything else is undefined).
//
// Shapes: T, H, E, k >= 1, k <= E; ids[t*k + j] < E and distinct within a
// token (the op's validation: an id >= E is treated as dropped, a repeated
// one races); T*k, nchunks*E, T*H and N_slots*H below 2^31. All indices into
// strided buffers are computed in 64 bits.
//   nchunks  = ceil(T / BP_MOE_CHUNK)            (BP_MOE_CHUNK = 64)
//   cap      = -1 for no capacity, else min(C, T) (C may exceed 2^31; a rank
//              is always below T, so min(C, T) drops the same choices)
//   N_slots  = the sum of the counts; the launcher knows it from the case
//              (x_exp has N_slots rows) and may check it against offsets[E].
// Strided inputs (x, x_exp, dy, g_disp): one element offset `off` (0..3)
// and one row stride `ld` (>= H) for all four, as the case gives them: row
// r, column h at p[off + r*ld + h]. Only the H values of a row that a kept
// choice names are read; the gaps may hold anything (the poison NaN).
// Outputs are dense and row-major. Each launch below with a grid dimension
// of 0 (N_slots = 0) is skipped: its outputs are empty.
// Kernels of one pass run in this order on one stream, each after the one
// before has finished.
//
// Dispatch (forward and backward both start with it; the backward needs
// slot and slot_src):
// moe_dispatch_rank(const unsigned* ids, const unsigned char* padding,
//     int T, int E, int k, int* slot, unsigned* chunk_counts)
//   block (BP_MOE_RANK_WARPS * 32 = 128, 1, 1), grid (ceil(nchunks / 4), 1, 1),
//   dynamic shared memory BP_MOE_RANK_WARPS * E * 4 bytes (above 48 KiB
//   for E > 3072: the launcher raises the function's limit).
//   Reads ids[T*k], padding[T] (0 = a valid token; the launcher passes T
//   zeros when the case has no padding).
//   Writes slot[T*k] = the choice's rank among its expert's choices in its
//   chunk, or -1 (padding token); chunk_counts[nchunks*E] (scratch:
//   chunk c's choices of expert e at c*E + e). Nothing needs zeroing.
// moe_dispatch_scan(int nchunks, int E, int cap, unsigned* chunk_counts,
//     unsigned* counts, unsigned* offsets)
//   block (1024, 1, 1), grid (1, 1, 1), no dynamic shared memory.
//   Rewrites chunk_counts in place with each chunk's base (the expert's
//   choices in the chunks before it); writes counts[E] (the kept choices of
//   each expert: the op's `counts` output) and offsets[E + 1] (the exclusive
//   prefix sum of counts; offsets[E] = N_slots).
// moe_dispatch_slots(const unsigned* ids, int T, int E, int k, int cap,
//     const unsigned* chunk_counts, const unsigned* offsets, int* slot,
//     int* slot_src)
//   block (BP_MOE_THREADS = 256, 1, 1), any grid (x) >= 1 (grid-stride over
//   the T*k choices).
//   Rewrites slot[T*k] in place: the choice's slot, or -1 (dropped or
//   padding): the op's `slot` output (i32; the wire's u32 0xFFFFFFFF for -1
//   is the same bits). Writes slot_src[N_slots] = t*k + j of the choice
//   that owns each slot (every slot has exactly one).
// moe_dispatch_copy(const float* x, int off, long long ld, int H, int k,
//     const int* slot_src, int n_slots, float* x_disp)
//   block (256, 1, 1), grid (ceil(H / 256), min(N_slots, 65535), 1) (slots
//   s = blockIdx.y, then += gridDim.y).
//   Writes x_disp[N_slots*H] = the rows x[t] of the slots' tokens, copied as
//   bits.
//
// Forward, gather (profile "serial"):
// moe_combine_gather(const float* x_exp, int off, long long ld, int T,
//     int H, int k, const int* slot, const float* weights, float* y)
//   block (256, 1, 1), grid (ceil(H / 256), min(T, 65535), 1) (tokens
//   t = blockIdx.y, then += gridDim.y).
//   Reads slot[T*k] (the dispatch's), weights[T*k], x_exp (strided, N_slots
//   rows). Writes y[T*H].
//
// Backward, gather (profile "serial"), after the dispatch:
// moe_combine_bwd_dx_exp(const float* dy, int off, long long ld, int H,
//     int k, const int* slot_src, const float* weights, int n_slots,
//     float* dx_exp)
//   block (256, 1, 1), grid (ceil(H / 256), min(N_slots, 65535), 1).
//   Writes dx_exp[N_slots*H].
// moe_combine_bwd_dw(const float* dy, const float* x_exp, int off,
//     long long ld, int T, int H, int k, const int* slot, float* dw)
//   block (256, 1, 1) (8 warps), any grid (x) >= 1: warp w of block b takes
//   the choices i = 8b + w, then += 8 gridDim.x.
//   Writes dw[T*k] (+0.0 for a dropped choice).
// moe_combine_bwd_dx(const float* g_disp, int off, long long ld, int T,
//     int H, int k, const int* slot, float* dx)
//   As moe_combine_gather, without weights. Writes dx[T*H].
//
// Forward and backward, scatter (no profile), after the dispatch:
// moe_zero_f32(float* out, long long n)
//   block (256, 1, 1), any grid (x) >= 1. Writes out[n] = +0.0.
// moe_combine_scatter(const float* x_exp, int off, long long ld, int H,
//     int k, const int* slot_src, const float* weights, int n_slots,
//     float* y)
//   block (256, 1, 1), grid (ceil(H / 256), min(N_slots, 65535), 1).
//   y[T*H] MUST hold +0.0 everywhere before the launch (moe_zero_f32 on
//   it): it is accumulated atomically.
// moe_combine_scatter_bwd_dx(const float* g_disp, int off, long long ld,
//     int H, int k, const int* slot_src, int n_slots, float* dx)
//   As moe_combine_scatter, adding g_disp[s][h] into dx[t][h] (the
//   dispatch's backward as index_add_ runs it). dx zeroed first. The
//   scatter subject's dx_exp and dw come from the gather backward's kernels
//   (products, and a dot per choice: no atomics in how users write them).
// ---------------------------------------------------------------------------

#include "common.cuh"

#define BP_MOE_THREADS 256
#define BP_MOE_CHUNK 64      // tokens a warp ranks in moe_dispatch_rank
#define BP_MOE_RANK_WARPS 4  // warps (chunks) per block of moe_dispatch_rank
#define BP_MOE_SCAN_THREADS 1024
#define BP_MOE_NONE (-1)

namespace bp {
namespace moe {

// Row r of a strided input (off and ld as in the launch contract).
__device__ __forceinline__ const float* row(const float* __restrict__ base, int off, long long ld, long long r) {
    return base + off + r * ld;
}

// Each warp walks its chunk's tokens in ascending order; the lanes take the
// token's choices j = lane, lane + 32, ... Within a token every choice names
// another expert (ids distinct), so the lanes of one step never touch the
// same counter, and the __syncwarp after each token orders the steps: a
// choice's rank is the number of earlier tokens of the chunk that chose the
// same expert.
__device__ __forceinline__ void rank_chunk(const unsigned* __restrict__ ids,
                                           const unsigned char* __restrict__ padding, int T, int E, int k,
                                           int* __restrict__ slot, unsigned* __restrict__ chunk_counts) {
    extern __shared__ unsigned rank_sh[];
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int nchunks = (T + BP_MOE_CHUNK - 1) / BP_MOE_CHUNK;
    const int c = blockIdx.x * BP_MOE_RANK_WARPS + warp;
    if (c >= nchunks) return;
    unsigned* cnt = rank_sh + (size_t)warp * (size_t)E;
    for (int e = lane; e < E; e += BP_WARP) cnt[e] = 0u;
    __syncwarp();
    const int t_end = min(T, (c + 1) * BP_MOE_CHUNK);
    for (int t = c * BP_MOE_CHUNK; t < t_end; ++t) {
        const bool pad = padding[t] != 0;
        const long long first = (long long)t * k;
        for (int j = lane; j < k; j += BP_WARP) {
            const unsigned e = ids[first + j];
            int r = BP_MOE_NONE;
            if (!pad && e < (unsigned)E) {
                r = (int)cnt[e];
                cnt[e] = (unsigned)r + 1u;
            }
            slot[first + j] = r;
        }
        __syncwarp();
    }
    unsigned* out = chunk_counts + (size_t)c * (size_t)E;
    for (int e = lane; e < E; e += BP_WARP) out[e] = cnt[e];
}

// One block. Each thread takes experts e = tid, tid + 1024, ...: the
// exclusive running sum of its chunks' counts replaces them in chunk order,
// and its kept count is min(total, cap). Then warp 0 scans the counts into
// the offsets, 32 experts a step (integer sums: exact in any order).
__device__ __forceinline__ void scan_counts(int nchunks, int E, int cap, unsigned* __restrict__ chunk_counts,
                                            unsigned* __restrict__ counts, unsigned* __restrict__ offsets) {
    for (int e = threadIdx.x; e < E; e += blockDim.x) {
        unsigned base = 0u;
        for (int c = 0; c < nchunks; ++c) {
            unsigned* p = chunk_counts + (size_t)c * (size_t)E + (size_t)e;
            const unsigned v = *p;
            *p = base;
            base += v;
        }
        counts[e] = (cap < 0 || base < (unsigned)cap) ? base : (unsigned)cap;
    }
    __syncthreads();
    if (threadIdx.x >= BP_WARP) return;
    const int lane = threadIdx.x;
    unsigned carry = 0u;
    for (int e0 = 0; e0 < E; e0 += BP_WARP) {
        const int e = e0 + lane;
        const unsigned v = (e < E) ? counts[e] : 0u;
        unsigned incl = v;
#pragma unroll
        for (int o = 1; o < BP_WARP; o <<= 1) {
            const unsigned up = __shfl_up_sync(BP_FULL_MASK, incl, o);
            if (lane >= o) incl += up;
        }
        if (e < E) offsets[e] = carry + incl - v;
        carry += __shfl_sync(BP_FULL_MASK, incl, BP_WARP - 1);
    }
    if (lane == 0) offsets[E] = carry;
}

// Choice i = t*k + j: its rank within its expert is its chunk's base plus
// its rank within the chunk; a rank at or past the capacity is dropped.
__device__ __forceinline__ void place_slots(const unsigned* __restrict__ ids, int T, int E, int k, int cap,
                                            const unsigned* __restrict__ chunk_counts,
                                            const unsigned* __restrict__ offsets, int* __restrict__ slot,
                                            int* __restrict__ slot_src) {
    const long long n = (long long)T * k;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        const int r = slot[i];
        int s = BP_MOE_NONE;
        if (r != BP_MOE_NONE) {
            const unsigned e = ids[i];
            const long long c = (i / k) / BP_MOE_CHUNK;
            const unsigned rank = chunk_counts[c * E + e] + (unsigned)r;
            if (cap < 0 || rank < (unsigned)cap) {
                s = (int)(offsets[e] + rank);
                slot_src[s] = (int)i;
            }
        }
        slot[i] = s;
    }
}

// out[t][h] for the block's tile of h and its tokens t: Serial over the
// token's choices j ascending from +0.0, dropped choices skipped; WEIGHTED:
// each term the rounded product w[t][j] * src[s][h], else src[s][h] itself.
template <bool WEIGHTED>
__device__ __forceinline__ void gather_rows(const float* __restrict__ src, int off, long long ld, int T, int H, int k,
                                            const int* __restrict__ slot, const float* __restrict__ weights,
                                            float* __restrict__ out) {
    const int h = blockIdx.x * blockDim.x + threadIdx.x;
    if (h >= H) return;
    for (int t = blockIdx.y; t < T; t += gridDim.y) {
        const long long first = (long long)t * k;
        float acc = 0.0f;
        for (int j = 0; j < k; ++j) {
            const int s = slot[first + j];
            if (s == BP_MOE_NONE) continue;
            const float v = __ldg(row(src, off, ld, s) + h);
            acc = add(acc, WEIGHTED ? mul(weights[first + j], v) : v);
        }
        out[(long long)t * H + h] = acc;
    }
}

// dw[i] for choice i = t*k + j, one warp: the lanes load 32 consecutive h
// of dy[t] and x_exp[s] and form their products (independent roundings);
// then every lane runs the same serial chain over them, in ascending h,
// taking each product from its lane by a shuffle. Only h < H is added.
__device__ __forceinline__ void dot_choices(const float* __restrict__ dy, const float* __restrict__ x_exp, int off,
                                            long long ld, int T, int H, int k, const int* __restrict__ slot,
                                            float* __restrict__ dw) {
    const int lane = threadIdx.x & 31;
    const int warps_per_block = blockDim.x >> 5;
    const long long n = (long long)T * k;
    const long long step = (long long)gridDim.x * warps_per_block;
    for (long long i = (long long)blockIdx.x * warps_per_block + (threadIdx.x >> 5); i < n; i += step) {
        const int s = slot[i];
        float acc = 0.0f;
        if (s != BP_MOE_NONE) {
            const float* __restrict__ a = row(dy, off, ld, i / k);
            const float* __restrict__ b = row(x_exp, off, ld, s);
            for (int h0 = 0; h0 < H; h0 += BP_WARP) {
                const int h = h0 + lane;
                const float p = (h < H) ? mul(__ldg(a + h), __ldg(b + h)) : 0.0f;
                const int m = min(BP_WARP, H - h0);
#pragma unroll
                for (int q = 0; q < BP_WARP; ++q) {
                    const float pq = __shfl_sync(BP_FULL_MASK, p, q);
                    if (q < m) acc = add(acc, pq);
                }
            }
        }
        if (lane == 0) dw[i] = acc;
    }
}

// The blocks' slots s = blockIdx.y, += gridDim.y, at the block's tile of h:
// the slot's owner choice i and its token t = i / k.
#define BP_MOE_FOR_SLOTS(n_slots, H)                                \
    const int h = blockIdx.x * blockDim.x + threadIdx.x;            \
    if (h >= (H)) return;                                           \
    for (int s = blockIdx.y; s < (n_slots); s += gridDim.y)

}  // namespace moe
}  // namespace bp

extern "C" __global__ void __launch_bounds__(BP_MOE_RANK_WARPS * BP_WARP)
    moe_dispatch_rank(const unsigned* __restrict__ ids, const unsigned char* __restrict__ padding, int T, int E, int k,
                      int* __restrict__ slot, unsigned* __restrict__ chunk_counts) {
    bp::moe::rank_chunk(ids, padding, T, E, k, slot, chunk_counts);
}

extern "C" __global__ void __launch_bounds__(BP_MOE_SCAN_THREADS)
    moe_dispatch_scan(int nchunks, int E, int cap, unsigned* __restrict__ chunk_counts, unsigned* __restrict__ counts,
                      unsigned* __restrict__ offsets) {
    bp::moe::scan_counts(nchunks, E, cap, chunk_counts, counts, offsets);
}

extern "C" __global__ void __launch_bounds__(BP_MOE_THREADS)
    moe_dispatch_slots(const unsigned* __restrict__ ids, int T, int E, int k, int cap,
                       const unsigned* __restrict__ chunk_counts, const unsigned* __restrict__ offsets,
                       int* __restrict__ slot, int* __restrict__ slot_src) {
    bp::moe::place_slots(ids, T, E, k, cap, chunk_counts, offsets, slot, slot_src);
}

// x_disp[s] = x[t] as bits: the copy goes through unsigned words, so no
// value (a NaN payload, a subnormal) is ever touched by float hardware.
extern "C" __global__ void __launch_bounds__(BP_MOE_THREADS)
    moe_dispatch_copy(const float* __restrict__ x, int off, long long ld, int H, int k, const int* __restrict__ slot_src,
                      int n_slots, float* __restrict__ x_disp) {
    const unsigned* __restrict__ xb = reinterpret_cast<const unsigned*>(x);
    unsigned* __restrict__ out = reinterpret_cast<unsigned*>(x_disp);
    BP_MOE_FOR_SLOTS(n_slots, H) {
        const long long t = slot_src[s] / k;
        out[(long long)s * H + h] = __ldg(xb + off + t * ld + h);
    }
}

extern "C" __global__ void __launch_bounds__(BP_MOE_THREADS)
    moe_combine_gather(const float* __restrict__ x_exp, int off, long long ld, int T, int H, int k,
                       const int* __restrict__ slot, const float* __restrict__ weights, float* __restrict__ y) {
    bp::moe::gather_rows<true>(x_exp, off, ld, T, H, k, slot, weights, y);
}

extern "C" __global__ void __launch_bounds__(BP_MOE_THREADS)
    moe_combine_bwd_dx_exp(const float* __restrict__ dy, int off, long long ld, int H, int k,
                           const int* __restrict__ slot_src, const float* __restrict__ weights, int n_slots,
                           float* __restrict__ dx_exp) {
    BP_MOE_FOR_SLOTS(n_slots, H) {
        const int i = slot_src[s];
        dx_exp[(long long)s * H + h] = bp::mul(weights[i], __ldg(bp::moe::row(dy, off, ld, i / k) + h));
    }
}

extern "C" __global__ void __launch_bounds__(BP_MOE_THREADS)
    moe_combine_bwd_dw(const float* __restrict__ dy, const float* __restrict__ x_exp, int off, long long ld, int T,
                       int H, int k, const int* __restrict__ slot, float* __restrict__ dw) {
    bp::moe::dot_choices(dy, x_exp, off, ld, T, H, k, slot, dw);
}

extern "C" __global__ void __launch_bounds__(BP_MOE_THREADS)
    moe_combine_bwd_dx(const float* __restrict__ g_disp, int off, long long ld, int T, int H, int k,
                       const int* __restrict__ slot, float* __restrict__ dx) {
    bp::moe::gather_rows<false>(g_disp, off, ld, T, H, k, slot, nullptr, dx);
}

// ---- the scatter combine: no profile (see the header) ----------------------

extern "C" __global__ void __launch_bounds__(BP_MOE_THREADS) moe_zero_f32(float* __restrict__ out, long long n) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        out[i] = 0.0f;
}

extern "C" __global__ void __launch_bounds__(BP_MOE_THREADS)
    moe_combine_scatter(const float* __restrict__ x_exp, int off, long long ld, int H, int k,
                        const int* __restrict__ slot_src, const float* __restrict__ weights, int n_slots,
                        float* __restrict__ y) {
    BP_MOE_FOR_SLOTS(n_slots, H) {
        const int i = slot_src[s];
        const float v = weights[i] * bp::moe::row(x_exp, off, ld, s)[h];
        atomicAdd(y + (long long)(i / k) * H + h, v);
    }
}

extern "C" __global__ void __launch_bounds__(BP_MOE_THREADS)
    moe_combine_scatter_bwd_dx(const float* __restrict__ g_disp, int off, long long ld, int H, int k,
                               const int* __restrict__ slot_src, int n_slots, float* __restrict__ dx) {
    BP_MOE_FOR_SLOTS(n_slots, H) {
        const int i = slot_src[s];
        atomicAdd(dx + (long long)(i / k) * H + h, bp::moe::row(g_disp, off, ld, s)[h]);
    }
}
