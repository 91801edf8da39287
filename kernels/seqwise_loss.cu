// seqwise_loss (docs/ops/seqwise_loss.md): the DeepSeek-V3 microbatch-wise
// load-balance loss, forward and backward, fused.
//
// Numeric profile: "warp32-chunk64" (oracles/src/profile/seqwise_loss.rs,
// SeqwiseProfile::gpu()), and nothing else, whatever the launch geometry:
//   row   (n_t or the plain row sum, over E): Strided{32, Serial, Butterfly}
//   tokens (P_e over T):                      Chunked{64, Serial, Serial}
//   raw   (sum_e f_e * P_e):                  Strided{32, Serial, Butterfly}
//   q     (backward, over E):                 Strided{32, Serial, Butterfly}
// The warp width (32) and the token chunk (64) are constants of the profile,
// fixed here at compile time; the block sizes and grid sizes chosen by the
// launcher (src/subject/cuda.rs) change which thread does which work, never
// the order of any floating-point operation. No floating-point atomics: the
// only atomics are integer counts (exact in any order) and a ticket counter.
//
// Kernels (V = elements per lane = 32 * V >= E, V in {1,2,4,8,16,32}):
//   seqwise_fwd_chunk_v<V>  one block per 64-token chunk: row denominators,
//                           top-k counts, then per-expert chunk partials of P_e.
//   seqwise_fwd_finalize    P_e = serial sum of the chunk partials, counts,
//                           f_e, and (in the last block to finish) raw.
//   seqwise_bwd_v<V>        one warp per row (a warp takes several rows when
//                           T is larger than one wave): d_t, q_t, the
//                           gradient row.
//
// Inputs: the scores lie at base + offset + t * stride (base 16-byte aligned,
// offset 0..3, stride >= E); only the E values of each valid row are read.
// Padding rows (padding[t] != 0) are never read.

#include "common.cuh"

#define BP_TOKEN_CHUNK 64
#define BP_EPS __uint_as_float(0x2b8cbcccu)   // 1e-12f
#define BP_EPS2 __uint_as_float(0x1e3ce508u)  // 1e-20f
#define BP_TOPK_ITERATIVE_MAX 16
#define BP_FWD_THREADS 512
#define BP_BWD_THREADS 256
#define BP_FIN_BATCH 8  // chunk partials each helper thread loads per batch

namespace bp {

// Row denominator of the forward and the backward, from the row's warp sum n:
// ProvidedMap: d = max(n, eps) with NaN propagating (eps only where n < eps);
// UnbiasedTopK: D = n + eps2.
__device__ __forceinline__ float row_denominator(float n, bool topk) {
    if (topk) return add(n, BP_EPS2);
    return (n < BP_EPS) ? BP_EPS : n;
}

template <int V>
__device__ __forceinline__ void load_row(float (&x)[V], const float* __restrict__ row, int lane, int E) {
#pragma unroll
    for (int j = 0; j < V; ++j) {
        const int e = lane + BP_WARP * j;
        x[j] = (e < E) ? __ldg(row + e) : 0.0f;
    }
}

// The row's sum over E in the profile's order: |s| for ProvidedMap, s for
// UnbiasedTopK.
template <int V>
__device__ __forceinline__ float row_sum(const float (&x)[V], int lane, int E, bool topk) {
    float y[V];
#pragma unroll
    for (int j = 0; j < V; ++j) y[j] = topk ? x[j] : fabsf(x[j]);
    return warp_strided_sum<V>(y, lane, E);
}

// Top-k for small k: k rounds of warp arg-max under (key desc, index asc).
// Each lane keeps its best (lowest j among equal keys = lowest index, since
// index = lane + 32 j); the warp takes the largest key, then the lowest index
// holding it. The winner removes it and rescans its own values.
template <int V>
__device__ __forceinline__ void topk_iterative(unsigned (&key)[V], int k, int lane, unsigned* cnt) {
    unsigned bk = 0u;
    int bj = 0;
#pragma unroll
    for (int j = 0; j < V; ++j) {
        if (key[j] > bk) { bk = key[j]; bj = j; }
    }
    for (int i = 0; i < k; ++i) {
        const unsigned m = __reduce_max_sync(BP_FULL_MASK, bk);
        const unsigned cand = (bk == m) ? (unsigned)(lane + BP_WARP * bj) : 0xffffffffu;
        const unsigned w = __reduce_min_sync(BP_FULL_MASK, cand);
        if (lane == (int)(w & 31u)) {
            atomicAdd(cnt + w, 1u);
#pragma unroll
            for (int j = 0; j < V; ++j) {
                if (j == bj) key[j] = 0u;
            }
            bk = 0u;
            bj = 0;
#pragma unroll
            for (int j = 0; j < V; ++j) {
                if (key[j] > bk) { bk = key[j]; bj = j; }
            }
        }
    }
}

// Top-k for any k: K* = the k-th largest key (binary descent over the 32 key
// bits with exact warp counts), then every key > K* and the lowest-index ties
// at K* until k are taken.
template <int V>
__device__ __forceinline__ void topk_threshold(const unsigned (&key)[V], int k, int lane, unsigned* cnt) {
    unsigned prefix = 0u;
    for (int bit = 31; bit >= 0; --bit) {
        const unsigned cand = prefix | (1u << bit);
        unsigned c = 0u;
#pragma unroll
        for (int j = 0; j < V; ++j) c += (key[j] >= cand) ? 1u : 0u;
        c = __reduce_add_sync(BP_FULL_MASK, c);
        if (c >= (unsigned)k) prefix = cand;
    }
    unsigned gt = 0u;
#pragma unroll
    for (int j = 0; j < V; ++j) gt += (key[j] > prefix) ? 1u : 0u;
    gt = __reduce_add_sync(BP_FULL_MASK, gt);
    const unsigned need = (unsigned)k - gt;
    const unsigned below = (1u << lane) - 1u;
    unsigned before = 0u;
#pragma unroll
    for (int j = 0; j < V; ++j) {
        const bool tie = key[j] == prefix;
        const unsigned b = __ballot_sync(BP_FULL_MASK, tie);
        const unsigned rank = before + __popc(b & below);
        if (key[j] > prefix || (tie && rank < need)) atomicAdd(cnt + lane + BP_WARP * j, 1u);
        before += __popc(b);
    }
}

// Top-k for k <= 32, fast path: tau = the k-th largest of the 32 lane maxima
// (as a multiset). At least k keys are >= tau, so every top-k element is a
// candidate (key >= tau), and so is every element that beats a candidate.
// When the candidates fit in one warp (c <= 32, the usual case), they are
// compacted into shared memory and each is ranked exactly against the others
// under (key desc, index asc); rank < k is selected. Returns false (nothing
// counted) when c > 32: the caller falls back to topk_iterative.
template <int V>
__device__ __forceinline__ bool topk_candidates(const unsigned (&key)[V], int k, int lane, unsigned* cnt,
                                                unsigned* cand_key, unsigned* cand_idx) {
    unsigned lm = 0u;
#pragma unroll
    for (int j = 0; j < V; ++j) lm = max(lm, key[j]);
    unsigned tau = 0u;
    for (int i = 0; i < k; ++i) {
        tau = __reduce_max_sync(BP_FULL_MASK, lm);
        const unsigned holders = __ballot_sync(BP_FULL_MASK, lm == tau);
        if (lane == __ffs(holders) - 1) lm = 0u;
    }
    unsigned mine = 0u;
#pragma unroll
    for (int j = 0; j < V; ++j) mine += (key[j] >= tau) ? 1u : 0u;
    // Exclusive prefix of the per-lane candidate counts.
    unsigned incl = mine;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const unsigned up = __shfl_up_sync(BP_FULL_MASK, incl, o);
        if (lane >= o) incl += up;
    }
    const unsigned total = __shfl_sync(BP_FULL_MASK, incl, 31);
    if (total > 32u) return false;
    unsigned slot = incl - mine;
#pragma unroll
    for (int j = 0; j < V; ++j) {
        if (key[j] >= tau) {
            cand_key[slot] = key[j];
            cand_idx[slot] = (unsigned)(lane + BP_WARP * j);
            ++slot;
        }
    }
    __syncwarp();
    if ((unsigned)lane < total) {
        const unsigned ki = cand_key[lane], ii = cand_idx[lane];
        unsigned rank = 0u;
#pragma unroll 4
        for (unsigned j = 0; j < total; ++j) {
            const unsigned kj = cand_key[j], ij = cand_idx[j];
            rank += (kj > ki || (kj == ki && ij < ii)) ? 1u : 0u;
        }
        if (rank < (unsigned)k) atomicAdd(cnt + ii, 1u);
    }
    __syncwarp();
    return true;
}

template <int V>
__device__ __forceinline__ void row_topk(const float (&x)[V], int lane, int E, int k, unsigned* cnt,
                                         unsigned* cand_key, unsigned* cand_idx) {
    unsigned key[V];
#pragma unroll
    for (int j = 0; j < V; ++j) key[j] = (lane + BP_WARP * j < E) ? topk_key(x[j]) : 0u;
    if (k <= BP_TOPK_ITERATIVE_MAX) {
        if (!topk_candidates<V>(key, k, lane, cnt, cand_key, cand_idx)) topk_iterative<V>(key, k, lane, cnt);
    } else {
        topk_threshold<V>(key, k, lane, cnt);
    }
}

// One block per chunk of 64 consecutive tokens (the profile's token chunk),
// walked in steps of R = 16 rows, one row per warp:
//   step phase 1: the warp's row: its sum (Strided{32}), its denominator d,
//     p_te = s_te / d into shared memory (a padding row writes +0.0), and
//     (UnbiasedTopK) its top-k, counted in shared memory;
//   step phase 2: a thread per expert adds the step's p_te to its running
//     chunk partial in ascending row order. The partial starts at +0.0 and
//     carries over the steps, so over the chunk it is exactly Chunked's inner
//     Serial sum; a padding row adds +0.0, which is what the profile oracle
//     adds for it (and, the partial never being -0.0, changes no bit).
// ProvidedMap: each lane counts the map entries of its experts over the rows
// its warp takes, and the warps add their counts into shared memory at the end.
// Dynamic shared memory: E counters, then R x E values of p.
template <int V>
__device__ __forceinline__ void fwd_chunk(const float* __restrict__ base, int offset, long long stride, int T,
                                          int E, const unsigned char* __restrict__ padding,
                                          const unsigned char* __restrict__ map, int topk_flag, int k,
                                          float* __restrict__ p_part, unsigned* __restrict__ c_part) {
    constexpr int R = BP_FWD_THREADS / 32;
    constexpr int EPT = (BP_WARP * V + BP_FWD_THREADS - 1) / BP_FWD_THREADS;  // experts per thread
    constexpr bool PREFETCH = V <= 8;  // the next row's loads ahead of this row's work
    __shared__ unsigned cand_key_sh[R][32];
    __shared__ unsigned cand_idx_sh[R][32];
    extern __shared__ unsigned dyn_sh[];
    unsigned* cnt_sh = dyn_sh;                         // E counters
    float* p_sh = reinterpret_cast<float*>(dyn_sh + E);  // R rows of E values
    const bool topk = topk_flag != 0;
    const int chunk = blockIdx.x;
    const int t0 = chunk * BP_TOKEN_CHUNK;
    const int rows = min(BP_TOKEN_CHUNK, T - t0);
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const float* __restrict__ first = base + offset;
    float* __restrict__ prow = p_sh + warp * E;

    for (int e = threadIdx.x; e < E; e += blockDim.x) cnt_sh[e] = 0u;
    float acc[EPT];
#pragma unroll
    for (int q = 0; q < EPT; ++q) acc[q] = 0.0f;
    unsigned cmap[V];
#pragma unroll
    for (int j = 0; j < V; ++j) cmap[j] = 0u;

    float x[V];
    bool valid = warp < rows && padding[t0 + warp] == 0;
    if (valid) load_row<V>(x, first + (long long)(t0 + warp) * stride, lane, E);
    __syncthreads();

    for (int r0 = 0; r0 < rows; r0 += R) {
        const int r = r0 + warp;
        // The next step's row (ahead of this step's work when PREFETCH).
        const int rn = r + R;
        float xn[V];
        const bool vn = rn < rows && padding[t0 + rn] == 0;
        if (PREFETCH && vn) load_row<V>(xn, first + (long long)(t0 + rn) * stride, lane, E);
        if (valid) {
            const float n = row_sum<V>(x, lane, E, topk);
            const Divisor d = divisor(row_denominator(n, topk));
#pragma unroll
            for (int j = 0; j < V; ++j) {
                const int e = lane + BP_WARP * j;
                if (e < E) prow[e] = div_by(x[j], d);
            }
            if (topk) {
                row_topk<V>(x, lane, E, k, cnt_sh, cand_key_sh[warp], cand_idx_sh[warp]);
            } else {
                const unsigned char* __restrict__ mrow = map + (size_t)(t0 + r) * (size_t)E;
#pragma unroll
                for (int j = 0; j < V; ++j) {
                    const int e = lane + BP_WARP * j;
                    if (e < E) cmap[j] += mrow[e];
                }
            }
        } else {
#pragma unroll
            for (int j = 0; j < V; ++j) {
                const int e = lane + BP_WARP * j;
                if (e < E) prow[e] = 0.0f;
            }
        }
        __syncthreads();
        const int nr = min(R, rows - r0);
#pragma unroll
        for (int q = 0; q < EPT; ++q) {
            const int e = threadIdx.x + q * BP_FWD_THREADS;
            if (e < E) {
                float a = acc[q];
#pragma unroll 4
                for (int i = 0; i < nr; ++i) a = add(a, p_sh[i * E + e]);
                acc[q] = a;
            }
        }
        __syncthreads();
        if (!PREFETCH && vn) load_row<V>(xn, first + (long long)(t0 + rn) * stride, lane, E);
#pragma unroll
        for (int j = 0; j < V; ++j) x[j] = xn[j];
        valid = vn;
    }

    if (!topk) {
#pragma unroll
        for (int j = 0; j < V; ++j) {
            const int e = lane + BP_WARP * j;
            if (e < E && cmap[j] != 0u) atomicAdd(cnt_sh + e, cmap[j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int q = 0; q < EPT; ++q) {
        const int e = threadIdx.x + q * BP_FWD_THREADS;
        if (e < E) {
            p_part[(size_t)chunk * (size_t)E + (size_t)e] = acc[q];
            c_part[(size_t)chunk * (size_t)E + (size_t)e] = cnt_sh[e];
        }
    }
}

// Each warp takes rows t = w, w + W, w + 2W, ... (w its global warp index,
// W the number of warps in the grid: the launcher sizes the grid to the GPU,
// so at most one wave of blocks). a_e = g * f_e, once per warp; then per row:
// d as in the forward, shared by the row's quotients (div_by); the terms
// -(a_e * ((s / d) / d)) reduced in the profile's q order; then
// ProvidedMap: grad = a_e / d + sgn(s) * r, r = gate ? q : +0.0 (a select);
// UnbiasedTopK: grad = a_e / D + q. Padding rows: +0.0, never read.
template <int V>
__device__ __forceinline__ void bwd_rows(const float* __restrict__ base, int offset, long long stride, int T, int E,
                                         const unsigned char* __restrict__ padding, int topk_flag, int inclusive,
                                         float g, const float* __restrict__ freq, float* __restrict__ grad) {
    const int lane = threadIdx.x & 31;
    const int warps = gridDim.x * (blockDim.x >> 5);
    const int first_row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (first_row >= T) return;
    const bool topk = topk_flag != 0;
    bool in_row[V];
    float a[V];
#pragma unroll
    for (int j = 0; j < V; ++j) {
        const int e = lane + BP_WARP * j;
        in_row[j] = e < E;
        a[j] = in_row[j] ? mul(g, __ldg(freq + e)) : 0.0f;
    }
    for (int t = first_row; t < T; t += warps) {
        float* __restrict__ out = grad + (size_t)t * (size_t)E + lane;
        if (padding[t] != 0) {
#pragma unroll
            for (int j = 0; j < V; ++j) {
                if (in_row[j]) out[BP_WARP * j] = 0.0f;
            }
            continue;
        }
        const float* __restrict__ row = base + offset + (long long)t * stride + lane;
        float x[V];
#pragma unroll
        for (int j = 0; j < V; ++j) x[j] = in_row[j] ? __ldg(row + BP_WARP * j) : 0.0f;
        const float n = row_sum<V>(x, lane, E, topk);
        const Divisor d = divisor(row_denominator(n, topk));
        const bool gate = inclusive ? (n >= BP_EPS) : (n > BP_EPS);
        float terms[V];
#pragma unroll
        for (int j = 0; j < V; ++j) terms[j] = -mul(a[j], div_by(div_by(x[j], d), d));
        const float q = warp_strided_sum<V>(terms, lane, E);
        const float r = gate ? q : 0.0f;
#pragma unroll
        for (int j = 0; j < V; ++j) {
            if (in_row[j]) {
                const float first_term = div_by(a[j], d);
                out[BP_WARP * j] = topk ? add(first_term, q) : add(first_term, mul(sgn(x[j]), r));
            }
        }
    }
}

}  // namespace bp

#define BP_INSTANTIATE(V, FWD_MIN_BLOCKS)                                                                   \
    extern "C" __global__ void __launch_bounds__(BP_FWD_THREADS, BP_FWD_MIN_BLOCKS(FWD_MIN_BLOCKS))         \
        seqwise_fwd_chunk_v##V(                                                                             \
        const float* __restrict__ base, int offset, long long stride, int T, int E,                         \
        const unsigned char* __restrict__ padding, const unsigned char* __restrict__ map, int topk, int k, \
        float* __restrict__ p_part, unsigned* __restrict__ c_part) {                                        \
        bp::fwd_chunk<V>(base, offset, stride, T, E, padding, map, topk, k, p_part, c_part);                \
    }                                                                                                       \
    extern "C" __global__ void __launch_bounds__(BP_BWD_THREADS) seqwise_bwd_v##V(                          \
        const float* __restrict__ base, int offset, long long stride, int T, int E,                         \
        const unsigned char* __restrict__ padding, int topk, int inclusive, float g,                        \
        const float* __restrict__ freq, float* __restrict__ grad) {                                         \
        bp::bwd_rows<V>(base, offset, stride, T, E, padding, topk, inclusive, g, freq, grad);                \
    }

// A tuning experiment can force one residency for every V (-DBP_FWD_MIN_BLOCKS_ALL=n).
#ifdef BP_FWD_MIN_BLOCKS_ALL
#define BP_FWD_MIN_BLOCKS(n) BP_FWD_MIN_BLOCKS_ALL
#else
#define BP_FWD_MIN_BLOCKS(n) n
#endif
// The forward's register budget per V (blocks of 512 threads resident per
// SM): measured on the H200, three blocks beat two for V <= 8.
BP_INSTANTIATE(1, 3)
BP_INSTANTIATE(2, 3)
BP_INSTANTIATE(4, 3)
BP_INSTANTIATE(8, 3)
BP_INSTANTIATE(16, 2)
BP_INSTANTIATE(32, 1)

// Block (32, 32), one block per 32 experts. P_e = Serial over the chunk
// partials in chunk order (Chunked outer = Serial), from +0.0: the 1024
// threads stage batches of 256 chunk partials in shared memory (loads of the
// next batch in flight while warp 0 adds the current one, ascending). Counts
// are integer sums (any order). The last block to finish (ticket counter)
// computes C, f_e = (c_e / max(C, eps)) * E (C = 0 gives eps), and
// raw = Strided{32, Serial, Butterfly} over f_e * P_e, then resets the ticket.
extern "C" __global__ void __launch_bounds__(1024)
    seqwise_fwd_finalize(const float* __restrict__ p_part, const unsigned* __restrict__ c_part, int nchunks, int E,
                         float* __restrict__ P, unsigned* __restrict__ counts, float* __restrict__ freq,
                         float* __restrict__ raw, unsigned* __restrict__ ticket) {
    __shared__ float buf[32 * BP_FIN_BATCH][33];
    __shared__ unsigned cred[32][33];
    __shared__ unsigned wsum[32];
    __shared__ int is_last;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int tid = ty * 32 + tx;
    const int e = blockIdx.x * 32 + tx;
    const bool has_e = e < E;
    const int batch = 32 * BP_FIN_BATCH;
    const int nb = (nchunks + batch - 1) / batch;

    float acc = 0.0f;
    unsigned csum = 0u;
    float regs[BP_FIN_BATCH];
#pragma unroll
    for (int u = 0; u < BP_FIN_BATCH; ++u) {
        const int c = ty * BP_FIN_BATCH + u;
        const bool ok = has_e && c < nchunks;
        regs[u] = ok ? p_part[(size_t)c * (size_t)E + e] : 0.0f;
        csum += ok ? c_part[(size_t)c * (size_t)E + e] : 0u;
    }
    for (int b = 0; b < nb; ++b) {
#pragma unroll
        for (int u = 0; u < BP_FIN_BATCH; ++u) buf[ty * BP_FIN_BATCH + u][tx] = regs[u];
        __syncthreads();
        if (b + 1 < nb) {
#pragma unroll
            for (int u = 0; u < BP_FIN_BATCH; ++u) {
                const int c = (b + 1) * batch + ty * BP_FIN_BATCH + u;
                const bool ok = has_e && c < nchunks;
                regs[u] = ok ? p_part[(size_t)c * (size_t)E + e] : 0.0f;
                csum += ok ? c_part[(size_t)c * (size_t)E + e] : 0u;
            }
        }
        if (ty == 0 && has_e) {
            const int n = min(batch, nchunks - b * batch);
            // Shared-memory loads sixteen at a time ahead of the serial adds.
            for (int i0 = 0; i0 < n; i0 += 16) {
                float v[16];
#pragma unroll
                for (int i = 0; i < 16; ++i) v[i] = (i0 + i < n) ? buf[i0 + i][tx] : 0.0f;
#pragma unroll
                for (int i = 0; i < 16; ++i) {
                    if (i0 + i < n) acc = bp::add(acc, v[i]);
                }
            }
        }
        __syncthreads();
    }
    cred[ty][tx] = csum;
    __syncthreads();
    if (ty == 0 && has_e) {
        unsigned c = 0u;
        for (int i = 0; i < 32; ++i) c += cred[i][tx];
        P[e] = acc;
        counts[e] = c;
    }

    // Publish this block's P_e and counts, then take a ticket.
    __threadfence();
    __syncthreads();
    if (tid == 0) is_last = (atomicAdd(ticket, 1u) == gridDim.x - 1u) ? 1 : 0;
    __syncthreads();
    if (!is_last) return;
    __threadfence();

    unsigned part = 0u;
    for (int i = tid; i < E; i += 1024) part += __ldcg(counts + i);
    part = __reduce_add_sync(BP_FULL_MASK, part);
    if (tx == 0) wsum[ty] = part;
    __syncthreads();
    unsigned total = 0u;
    for (int i = 0; i < 32; ++i) total += wsum[i];
    // C <= 2^24 (validated), so the conversions to f32 are exact.
    const float Cf = (total == 0u) ? BP_EPS : (float)total;
    const float Ef = (float)E;
    float* terms = &buf[0][0];  // E <= 32 * 8 * 33 (the launcher checks)
    for (int i = tid; i < E; i += 1024) {
        const float f = bp::mul(bp::div((float)__ldcg(counts + i), Cf), Ef);
        freq[i] = f;
        terms[i] = bp::mul(f, __ldcg(P + i));
    }
    __syncthreads();
    if (ty == 0) {
        float lacc = 0.0f;
        for (int i = tx; i < E; i += 32) lacc = bp::add(lacc, terms[i]);
        lacc = bp::warp_butterfly(lacc);
        if (tx == 0) {
            raw[0] = lacc;
            *ticket = 0u;
        }
    }
}
