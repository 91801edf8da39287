// seqwise_loss (shared/SPEC.md section 3): the DeepSeek-V3 microbatch-wise
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
//   seqwise_bwd_v<V>        one warp per row: d_t, q_t, the gradient row.
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

template <int V>
__device__ __forceinline__ void row_topk(const float (&x)[V], int lane, int E, int k, unsigned* cnt) {
    unsigned key[V];
#pragma unroll
    for (int j = 0; j < V; ++j) key[j] = (lane + BP_WARP * j < E) ? topk_key(x[j]) : 0u;
    if (k <= BP_TOPK_ITERATIVE_MAX) {
        topk_iterative<V>(key, k, lane, cnt);
    } else {
        topk_threshold<V>(key, k, lane, cnt);
    }
}

// One block per chunk of 64 consecutive tokens (the profile's token chunk).
// Phase 1: each warp takes rows of the chunk: the row sum (Strided{32}), the
// denominator into shared memory, and (UnbiasedTopK) the row's top-k counted
// in shared memory. Phase 2: a thread per expert sums p_te = s_te / d_t over
// the chunk's valid rows serially, ascending t, from +0.0 (Chunked inner =
// Serial; a padding row is skipped, the same bits as adding +0.0), and
// counts the map (ProvidedMap). Outputs the chunk partials.
template <int V>
__device__ __forceinline__ void fwd_chunk(const float* __restrict__ base, int offset, long long stride, int T,
                                          int E, const unsigned char* __restrict__ padding,
                                          const unsigned char* __restrict__ map, int topk_flag, int k,
                                          float* __restrict__ p_part, unsigned* __restrict__ c_part) {
    __shared__ float d_sh[BP_TOKEN_CHUNK];
    __shared__ unsigned char valid_sh[BP_TOKEN_CHUNK];
    extern __shared__ unsigned cnt_sh[];  // E counters (UnbiasedTopK)
    const bool topk = topk_flag != 0;
    const int chunk = blockIdx.x;
    const int t0 = chunk * BP_TOKEN_CHUNK;
    const int rows = min(BP_TOKEN_CHUNK, T - t0);
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int nwarps = blockDim.x >> 5;
    const float* __restrict__ first = base + offset;

    if (topk) {
        for (int e = threadIdx.x; e < E; e += blockDim.x) cnt_sh[e] = 0u;
    }
    __syncthreads();

    for (int r = warp; r < rows; r += nwarps) {
        const int t = t0 + r;
        if (padding[t] != 0) {
            if (lane == 0) { valid_sh[r] = 0; d_sh[r] = 0.0f; }
            continue;
        }
        float x[V];
        load_row<V>(x, first + (long long)t * stride, lane, E);
        const float n = row_sum<V>(x, lane, E, topk);
        if (lane == 0) { valid_sh[r] = 1; d_sh[r] = row_denominator(n, topk); }
        if (topk) row_topk<V>(x, lane, E, k, cnt_sh);
    }
    __syncthreads();

    for (int e = threadIdx.x; e < E; e += blockDim.x) {
        float acc = 0.0f;
        unsigned c = 0u;
        const float* __restrict__ col = first + (long long)t0 * stride + e;
#pragma unroll 8
        for (int r = 0; r < rows; ++r) {
            if (valid_sh[r] == 0) continue;
            acc = add(acc, div(__ldg(col + (long long)r * stride), d_sh[r]));
            if (!topk) c += map[(size_t)(t0 + r) * (size_t)E + (size_t)e];
        }
        p_part[(size_t)chunk * (size_t)E + (size_t)e] = acc;
        c_part[(size_t)chunk * (size_t)E + (size_t)e] = topk ? cnt_sh[e] : c;
    }
}

// One warp per row. a_e = g * f_e; d as in the forward; the terms
// -(a_e * ((s / d) / d)) reduced in the profile's q order; then
// ProvidedMap: grad = a_k / d + sgn(s) * r, r = gate ? q : +0.0 (a select);
// UnbiasedTopK: grad = a_k / D + q. Padding rows: +0.0, never read.
template <int V>
__device__ __forceinline__ void bwd_row(const float* __restrict__ base, int offset, long long stride, int T, int E,
                                        const unsigned char* __restrict__ padding, int topk_flag, int inclusive,
                                        float g, const float* __restrict__ freq, float* __restrict__ grad) {
    const int lane = threadIdx.x & 31;
    const int t = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (t >= T) return;
    const bool topk = topk_flag != 0;
    float* __restrict__ out = grad + (size_t)t * (size_t)E;
    if (padding[t] != 0) {
#pragma unroll
        for (int j = 0; j < V; ++j) {
            const int e = lane + BP_WARP * j;
            if (e < E) out[e] = 0.0f;
        }
        return;
    }
    float x[V], a[V];
    load_row<V>(x, base + offset + (long long)t * stride, lane, E);
#pragma unroll
    for (int j = 0; j < V; ++j) {
        const int e = lane + BP_WARP * j;
        a[j] = (e < E) ? mul(g, __ldg(freq + e)) : 0.0f;
    }
    const float n = row_sum<V>(x, lane, E, topk);
    const float d = row_denominator(n, topk);
    const bool gate = inclusive ? (n >= BP_EPS) : (n > BP_EPS);
    float terms[V];
#pragma unroll
    for (int j = 0; j < V; ++j) terms[j] = -mul(a[j], div(div(x[j], d), d));
    const float q = warp_strided_sum<V>(terms, lane, E);
    const float r = gate ? q : 0.0f;
#pragma unroll
    for (int j = 0; j < V; ++j) {
        const int e = lane + BP_WARP * j;
        if (e < E) {
            const float first_term = div(a[j], d);
            out[e] = topk ? add(first_term, q) : add(first_term, mul(sgn(x[j]), r));
        }
    }
}

}  // namespace bp

#define BP_INSTANTIATE(V)                                                                                   \
    extern "C" __global__ void __launch_bounds__(BP_FWD_THREADS) seqwise_fwd_chunk_v##V(                    \
        const float* __restrict__ base, int offset, long long stride, int T, int E,                         \
        const unsigned char* __restrict__ padding, const unsigned char* __restrict__ map, int topk, int k, \
        float* __restrict__ p_part, unsigned* __restrict__ c_part) {                                        \
        bp::fwd_chunk<V>(base, offset, stride, T, E, padding, map, topk, k, p_part, c_part);                \
    }                                                                                                       \
    extern "C" __global__ void __launch_bounds__(BP_BWD_THREADS) seqwise_bwd_v##V(                          \
        const float* __restrict__ base, int offset, long long stride, int T, int E,                         \
        const unsigned char* __restrict__ padding, int topk, int inclusive, float g,                        \
        const float* __restrict__ freq, float* __restrict__ grad) {                                         \
        bp::bwd_row<V>(base, offset, stride, T, E, padding, topk, inclusive, g, freq, grad);                \
    }

BP_INSTANTIATE(1)
BP_INSTANTIATE(2)
BP_INSTANTIATE(4)
BP_INSTANTIATE(8)
BP_INSTANTIATE(16)
BP_INSTANTIATE(32)

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
            for (int i = 0; i < n; ++i) acc = bp::add(acc, buf[i][tx]);
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
