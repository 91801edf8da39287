// router (shared/SPEC.md section 4): TorchTitan's DeepSeekV3Router after the
// gate matmul: sigmoid scores, an expert bias used only to choose,
// group-limited top-k, normalised and scaled weights; forward and backward,
// the backward optionally fused with the seqwise_loss gradient (section 3,
// ProvidedMap objective) of the router's own scores.
//
// Numeric profile: "warp32" (oracles/src/profile/router.rs, RouterProfile::gpu())
//   norm (D over the k chosen weights, + 1e-20 after): Serial over j ascending
//   q    (route gradient, over the k chosen experts):  Serial over j ascending
//   loss (the fused seqwise_loss gradient): the "warp32-chunk64" orders of
//        kernels/seqwise_loss.cu: n_t and q_t over E are
//        Strided{32, Serial, Butterfly} (common.cuh's warp_strided_sum).
// Transcendental: exp, correctly rounded (bp::exp_cr, expf.cuh). Selections
// (groups, experts) are exact: they depend only on the f32 values of u = s +
// bias, compared through bp::topk_key with the expert (or group) index as the
// tie-break. One warp per token; the block and grid sizes decide which warp
// takes which token and nothing else: no floating-point value depends on
// them. No floating-point atomics: the only atomics are integer (counts, and
// a bit-or into a per-warp mask in the backward), exact in any order.
//
// ---------------------------------------------------------------------------
// Launch contract (src/subject/cuda_router.rs follows it; anything else is
// undefined). V = elements per lane, the smallest of {1,2,4,8,16,32} with
// 32 * V >= E. W = BP_ROUTER_THREADS / 32 = 8 warps per block.
//
// Limits, checked by the launcher (refused as "unavailable" outside them):
//   2 <= E <= 1024      (32 lanes x V <= 32 values in registers)
//   G | E, E/G >= 2, 1 <= L <= G, 1 <= k <= L * E / G   (SPEC validation;
//                        G up to E/2 = 512 and k up to E are supported)
//   T >= 1, T * k <= 2^24 (SPEC; the counts and C are exact in f32),
//   T * E and T * k < 2^31, stride < 2^62 (i32 / i64 arguments).
//
// router_fwd_v<V>(const float* logits, int offset, long long stride, int T,
//     int E, const float* bias, int G, int L, int k, float route_scale,
//     int route_norm, const unsigned char* padding, unsigned* ids,
//     float* weights, unsigned char* map, unsigned* counts, float* scores)
//   block (BP_ROUTER_THREADS, 1, 1); any grid >= 1 (warp w of block b takes
//   tokens t = b*W + w, then t += gridDim.x*W: the launcher caps the grid at
//   the blocks resident on the device); dynamic shared memory
//   (E + W * (2E + 32)) * 4 bytes (E block counters, then per warp: E words
//   of keys / chosen weights, E words of kept-group flags / chosen ids, 32
//   words of candidate scratch): above 48 KiB for E > 563, so the launcher
//   raises the function's limit.
//   Reads: logits at logits + offset + t*stride + e for e < E only (the gaps
//   may hold anything), bias[E], padding[T] (0 = valid).
//   Writes: ids[T*k] (ascending per token), weights[T*k], map[T*E] (0/1),
//   scores[T*E] (s, dense row-major), counts[E] += selections of valid tokens.
//   counts MUST be zeroed before the launch (it is accumulated atomically).
//
// router_bwd_v<V>(const float* scores, const unsigned* ids, const float* gw,
//     const unsigned char* padding, const unsigned* counts, int T, int E,
//     int k, float route_scale, int route_norm, int fused, int inclusive,
//     float g, float* grad)
//   block (BP_ROUTER_THREADS, 1, 1); any grid >= 1 (tokens as in the
//   forward); dynamic shared memory W * (E + 32) * 4 bytes (per warp: E words
//   of route gradients by expert, 32 words of chosen masks).
//   Reads: the forward's scores, ids and counts (the forward must have run
//   on the same buffers, before, on the same stream), gw[T*k], padding[T]
//   (fused only). fused = 0: no loss (g, inclusive and counts unused);
//   inclusive = 1: the clamp gate is n >= eps (ClampTie::Inclusive), else
//   n > eps (Strict).
//   Writes: grad[T*E] (dense row-major). Nothing needs zeroing.
//
// router_freq(const unsigned* counts, int E, float* freq)
//   one block of 1024 threads (any multiple of 32 up to 1024 works), no
//   dynamic shared memory: f_e = (c_e / max(C, eps)) * E, the fused loss's
//   frequencies, as the backward computes them (the backward does not need
//   this kernel: it derives f_e itself from counts; router_freq exposes them).
// ---------------------------------------------------------------------------

#include "common.cuh"
#include "expf.cuh"

#define BP_EPS __uint_as_float(0x2b8cbcccu)   // 1e-12f
#define BP_EPS2 __uint_as_float(0x1e3ce508u)  // 1e-20f
#define BP_ROUTER_THREADS 256
#define BP_ROUTER_WARPS (BP_ROUTER_THREADS / BP_WARP)
// Expert e's group is (e * ceil(2^20 / gs)) >> 20 = floor(e / gs), exact for
// e < 1024 and gs <= 512 (the error term e * (ceil(2^20/gs) * gs - 2^20) /
// 2^20 < 1024 * 512 / 2^20 < 1 never crosses an integer; the Rust tests check
// every pair). A multiply and a shift instead of an integer division per value.
#define BP_GROUP_SHIFT 20

namespace bp {
namespace router {

// Lanes below this one, as a ballot mask.
__device__ __forceinline__ unsigned lanes_below(int lane) { return (1u << lane) - 1u; }

// The inverse of topk_key, up to what the key forgets: -0.0 comes back as
// +0.0 and every NaN as one NaN. Adding two such values gives a sum with the
// same topk_key as the sum of the originals (a zero sum is +-0.0 either way,
// which the key does not tell apart; NaN stays NaN; every other value is
// unchanged), and a group score is only ever compared through its key.
__device__ __forceinline__ float key_value(unsigned key) {
    const unsigned b = (key & 0x80000000u) ? (key & 0x7fffffffu) : ~key;
    return __uint_as_float(b);
}

// The two largest keys seen, k1 >= k2, as a multiset (a repeated maximum fills
// both). Which of two equal keys is "a" does not matter: a + b is commutative.
__device__ __forceinline__ void top2_push(unsigned& k1, unsigned& k2, unsigned x) {
    k2 = max(k2, min(k1, x));
    k1 = max(k1, x);
}
__device__ __forceinline__ void top2_merge(unsigned& k1, unsigned& k2, unsigned b1, unsigned b2) {
    const unsigned lo = min(k1, b1);
    k1 = max(k1, b1);
    k2 = max(lo, max(k2, b2));
}

// The k first elements in the selection order (key descending, index
// ascending) of the warp's elements key[j] at index lane + 32 j; key 0 marks
// an absent element, never chosen (the caller guarantees at least k present).
// Returns this lane's chosen elements as a mask (bit j: index lane + 32 j).
// `scratch` holds 32 words of this warp's shared memory.
//
// k <= 32, fast path: tau = the k-th largest of the 32 lane maxima (as a
// multiset). The k lanes whose maxima were taken each hold an element >= tau,
// so an element below tau has k elements strictly above it and is out, ties
// or not: the candidates (present, >= tau) contain every chosen element, and
// are at least k. When they are at most 32 (the usual case), they are
// compacted into `scratch` in index order (j-major ballots: index lane + 32 j
// ascends with (j, lane)), so the slot order is the index order and the rank
// of a candidate, counted against the others, is its exact place in the
// selection order. Many equal keys (an all-equal row) give more than 32
// candidates: the threshold path then decides.
//
// Any k: K* = the k-th largest key, by a binary descent over its 32 bits with
// exact warp counts; every key above K* is chosen, and the ties at K* in index
// order until k are taken.
template <int N>
__device__ __forceinline__ unsigned select_topk(const unsigned (&key)[N], int k, int lane, unsigned* scratch) {
    const unsigned lt = lanes_below(lane);
    if (k <= BP_WARP) {
        unsigned lm = 0u;
#pragma unroll
        for (int j = 0; j < N; ++j) lm = max(lm, key[j]);
        unsigned tau = 0u;
        for (int i = 0; i < k; ++i) {
            tau = __reduce_max_sync(BP_FULL_MASK, lm);
            const unsigned holders = __ballot_sync(BP_FULL_MASK, lm == tau);
            if (lane == __ffs(holders) - 1) lm = 0u;
        }
        // Fewer than k lanes with a present element leave tau = 0: every
        // present element is then a candidate.
        const unsigned lo = max(tau, 1u);
        unsigned cand = 0u, c = 0u;
#pragma unroll
        for (int j = 0; j < N; ++j) {
            const bool is = key[j] >= lo;
            const unsigned b = __ballot_sync(BP_FULL_MASK, is);
            if (is) {
                cand |= 1u << j;
                const unsigned slot = c + __popc(b & lt);
                if (slot < BP_WARP) scratch[slot] = key[j];
            }
            c += __popc(b);
        }
        if (c <= BP_WARP) {  // warp-uniform
            __syncwarp();
            const bool mine = (unsigned)lane < c;
            const unsigned ki = mine ? scratch[lane] : 0u;
            unsigned rank = 0u;
            for (unsigned m = 0; m < c; ++m) {
                const unsigned km = scratch[m];  // one address: a broadcast
                rank += (km > ki || (km == ki && m < (unsigned)lane)) ? 1u : 0u;
            }
            const unsigned won = __ballot_sync(BP_FULL_MASK, mine && rank < (unsigned)k);
            __syncwarp();  // scratch is rewritten by the next selection
            unsigned chosen = 0u, before = 0u;
#pragma unroll
            for (int j = 0; j < N; ++j) {
                const bool is = (cand >> j) & 1u;
                const unsigned b = __ballot_sync(BP_FULL_MASK, is);
                if (is) {
                    const unsigned slot = before + __popc(b & lt);  // < c <= 32
                    if ((won >> slot) & 1u) chosen |= 1u << j;
                }
                before += __popc(b);
            }
            return chosen;
        }
    }
    // K* >= 1: every probe is >= 1, so absent keys are never counted, and at
    // least k keys are present.
    unsigned kth = 0u;
    for (int bit = 31; bit >= 0; --bit) {
        const unsigned probe = kth | (1u << bit);
        unsigned n = 0u;
#pragma unroll
        for (int j = 0; j < N; ++j) n += (key[j] >= probe) ? 1u : 0u;
        if (__reduce_add_sync(BP_FULL_MASK, n) >= (unsigned)k) kth = probe;
    }
    unsigned gt = 0u;
#pragma unroll
    for (int j = 0; j < N; ++j) gt += (key[j] > kth) ? 1u : 0u;
    const unsigned need = (unsigned)k - __reduce_add_sync(BP_FULL_MASK, gt);  // >= 1
    unsigned chosen = 0u, before = 0u;
#pragma unroll
    for (int j = 0; j < N; ++j) {
        const bool tie = key[j] == kth;
        const unsigned b = __ballot_sync(BP_FULL_MASK, tie);
        if (key[j] > kth || (tie && before + __popc(b & lt) < need)) chosen |= 1u << j;
        before += __popc(b);
    }
    return chosen;
}

// How a warp cuts the group phase, fixed for the whole launch (computed once
// per warp, outside the token loop).
struct GroupPlan {
    bool active;     // L < G: with L == G every group is kept, nothing to do
    int gs;          // experts per group, E / G
    unsigned gmul;   // ceil(2^20 / gs): group of e = (e * gmul) >> 20
    int lanes;       // P, lanes per group: 32 / (G rounded up to a power of 2), 1 for G > 32
    int slot;        // lane / P: the (first) group this lane scans
    int part;        // lane % P: which of the group's values it scans
    int rot;         // where in its group it starts (any start is correct; see keep_groups)
};

__device__ __forceinline__ GroupPlan group_plan(int E, int G, int L, int lane) {
    GroupPlan gp;
    gp.active = L < G;
    gp.gs = E / G;
    gp.gmul = ((1u << BP_GROUP_SHIFT) + (unsigned)gp.gs - 1u) / (unsigned)gp.gs;
    int pow2 = 1;
    while (pow2 < G) pow2 <<= 1;
    gp.lanes = (G <= BP_WARP) ? BP_WARP / pow2 : 1;
    gp.slot = lane / gp.lanes;
    gp.part = lane % gp.lanes;
    gp.rot = (gp.lanes * gp.slot) % gp.gs;
    return gp;
}

// The group phase: each group's score, the sum of its two largest u (a + b,
// step 3), from the keys staged in keys_sh (keys_sh[e] = topk_key(u_e)); then
// the L best groups in the selection order (score descending, group index
// ascending); kept_sh[g] = 1 for a kept group, 0 otherwise, for every g < G.
//
// P lanes share a group (P = 4 for G = 8): lane part p takes the group's
// values p, p + P, ... starting at offset rot (mod gs), and the P partial
// top-2s merge by an xor butterfly. Any split and any start give the same
// top-2 multiset, so they are free to avoid bank conflicts: with gs = 32 and
// P = 4 the 32 lanes read 32 distinct banks at every step. Groups beyond 32
// (N > 1, P = 1): lane l takes groups l, l + 32, ...: group g's score ends at
// lane g % 32, slot g / 32, which is select_topk's index layout.
template <int N>
__device__ __forceinline__ void keep_groups(const unsigned* keys_sh, unsigned* kept_sh, int G, int L,
                                            const GroupPlan& gp, int lane, unsigned* scratch) {
    const int slots = BP_WARP / gp.lanes;
    unsigned gk[N];
#pragma unroll
    for (int gj = 0; gj < N; ++gj) {
        const int g = gp.slot + slots * gj;
        unsigned k1 = 0u, k2 = 0u;
        if (g < G) {
            const unsigned* grp = keys_sh + g * gp.gs;
            for (int i = gp.part; i < gp.gs; i += gp.lanes) {
                int o = i + gp.rot;
                if (o >= gp.gs) o -= gp.gs;
                top2_push(k1, k2, grp[o]);
            }
        }
        for (int o = gp.lanes >> 1; o > 0; o >>= 1) {
            const unsigned b1 = __shfl_xor_sync(BP_FULL_MASK, k1, o);
            const unsigned b2 = __shfl_xor_sync(BP_FULL_MASK, k2, o);
            top2_merge(k1, k2, b1, b2);
        }
        // gs >= 2, so k2 is a real value; the score's key is the profile's
        // topk_key(a + b) (see key_value).
        gk[gj] = (g < G) ? topk_key(add(key_value(k1), key_value(k2))) : 0u;
    }
    if (gp.lanes > 1) {
        // N == 1 and G <= 16: group g's score sits at lanes g*P .. g*P+P-1;
        // bring it to lane g (lane * P < 32 for every lane < G).
        const unsigned v = __shfl_sync(BP_FULL_MASK, gk[0], (lane * gp.lanes) & (BP_WARP - 1));
        gk[0] = (lane < G) ? v : 0u;
    }
    const unsigned kept = select_topk<N>(gk, L, lane, scratch);
#pragma unroll
    for (int gj = 0; gj < N; ++gj) {
        const int g = lane + BP_WARP * gj;
        if (g < G) kept_sh[g] = (kept >> gj) & 1u;
    }
}

struct FwdArgs {
    const float* logits;
    int offset;
    long long stride;
    int T, E;
    const float* bias;
    int G, L, k;
    float scale;
    bool norm;
    const unsigned char* padding;
    unsigned* ids;
    float* weights;
    unsigned char* map;
    unsigned* counts;
    float* scores;
};

// One token, one warp: steps 1 to 7 of SPEC section 4.
// wsh: this warp's 2E + 32 words of shared memory; cnt_sh: the block's E
// counters of valid selections.
template <int V>
__device__ __forceinline__ void fwd_token(const FwdArgs& a, int t, int lane, unsigned* wsh, unsigned* cnt_sh,
                                          const GroupPlan& gp) {
    const int E = a.E;
    const float* row = a.logits + a.offset + (long long)t * a.stride;
    unsigned* keys_sh = wsh;          // group phase: topk_key(u); emit: chosen s (wbuf)
    unsigned* aux_sh = wsh + E;       // group phase: kept flags; emit: chosen ids (ibuf)
    unsigned* scratch = wsh + 2 * E;  // select_topk's candidates

    // Every load of the row before the first exp, so they are all in flight.
    float x[V];
#pragma unroll
    for (int j = 0; j < V; ++j) {
        const int e = lane + BP_WARP * j;
        x[j] = (e < E) ? __ldg(row + e) : 0.0f;
    }
    // 1. s = 1 / (1 + exp(-x)), each operation rounded; 2. u = s + bias, kept
    // only as its selection key. Absent lanes (e >= E) get key 0.
    float s[V];
    unsigned key[V];
#pragma unroll
    for (int j = 0; j < V; ++j) {
        const int e = lane + BP_WARP * j;
        s[j] = 0.0f;
        key[j] = 0u;
        if (e < E) {
            s[j] = div(1.0f, add(1.0f, exp_cr(-x[j])));
            key[j] = topk_key(add(s[j], __ldg(a.bias + e)));
        }
    }

    // 3. The L best groups; the others' experts leave the selection.
    if (gp.active) {
#pragma unroll
        for (int j = 0; j < V; ++j) {
            const int e = lane + BP_WARP * j;
            if (e < E) keys_sh[e] = key[j];  // bank = lane: no conflict
        }
        __syncwarp();
        if (a.G <= BP_WARP) {
            keep_groups<1>(keys_sh, aux_sh, a.G, a.L, gp, lane, scratch);
        } else {
            keep_groups<(V + 1) / 2>(keys_sh, aux_sh, a.G, a.L, gp, lane, scratch);  // G <= E/2 <= 16 V
        }
        __syncwarp();
#pragma unroll
        for (int j = 0; j < V; ++j) {
            const unsigned e = (unsigned)(lane + BP_WARP * j);
            if (e < (unsigned)E && aux_sh[(e * gp.gmul) >> BP_GROUP_SHIFT] == 0u) key[j] = 0u;
        }
    }

    // 4. The k best experts of the kept groups.
    const unsigned chosen = select_topk<V>(key, a.k, lane, scratch);
    __syncwarp();  // every lane is past its reads of keys_sh and aux_sh

    // 5. ids ascending: position of a chosen expert = chosen experts of lower
    // index (j-major ballots walk the indices in ascending order). 7. s, the
    // map, and the valid token's counts.
    float* wbuf = reinterpret_cast<float*>(keys_sh);
    unsigned* ibuf = aux_sh;
    const bool valid = a.padding[t] == 0;
    const unsigned lt = lanes_below(lane);
    const size_t rowE = (size_t)t * (size_t)E;
    unsigned base = 0u;
#pragma unroll
    for (int j = 0; j < V; ++j) {
        const int e = lane + BP_WARP * j;
        const bool c = (chosen >> j) & 1u;
        const unsigned b = __ballot_sync(BP_FULL_MASK, c);
        if (c) {
            const unsigned pos = base + __popc(b & lt);  // < k
            wbuf[pos] = s[j];
            ibuf[pos] = (unsigned)e;
            if (valid) atomicAdd(cnt_sh + e, 1u);
        }
        base += __popc(b);
        if (e < E) {
            a.scores[rowE + e] = s[j];
            a.map[rowE + e] = c ? 1 : 0;
        }
    }
    __syncwarp();

    // 6. D = (Serial sum of w over j ascending) + 1e-20: every lane adds the
    // k values in position order (broadcast reads), so every lane holds the
    // one serial sum; then w / D, then * route_scale.
    float D = 0.0f;
    if (a.norm) {
        for (int i = 0; i < a.k; ++i) D = add(D, wbuf[i]);
        D = add(D, BP_EPS2);
    }
    const size_t rowK = (size_t)t * (size_t)a.k;
    for (int i = lane; i < a.k; i += BP_WARP) {
        float w = wbuf[i];
        if (a.norm) w = div(w, D);
        a.weights[rowK + i] = mul(w, a.scale);
        a.ids[rowK + i] = ibuf[i];
    }
    __syncwarp();  // the next token rewrites wbuf and ibuf
}

template <int V>
__device__ __forceinline__ void fwd(const FwdArgs& a) {
    extern __shared__ unsigned sh[];
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int warps = blockDim.x >> 5;
    unsigned* cnt_sh = sh;
    unsigned* wsh = sh + a.E + warp * (2 * a.E + BP_WARP);
    for (int e = threadIdx.x; e < a.E; e += blockDim.x) cnt_sh[e] = 0u;
    const GroupPlan gp = group_plan(a.E, a.G, a.L, lane);
    __syncthreads();
    // The loop bound is warp-uniform: every lane of a warp takes the same
    // tokens, so every warp-collective call has all 32 lanes.
    for (int t = blockIdx.x * warps + warp; t < a.T; t += gridDim.x * warps) fwd_token<V>(a, t, lane, wsh, cnt_sh, gp);
    __syncthreads();
    // Integer counts: exact in any order, so the per-block sums may be added
    // to the global counters in any order.
    for (int e = threadIdx.x; e < a.E; e += blockDim.x) {
        const unsigned c = cnt_sh[e];
        if (c != 0u) atomicAdd(a.counts + e, c);
    }
}

// f_e = (c_e / max(C, eps)) * E, divide then multiply. C <= T*k <= 2^24
// (validated), so c_e, C and E convert to f32 exactly, and max(C, eps) is C
// for any C >= 1 and eps for C = 0.
__device__ __forceinline__ float frequency(unsigned c, unsigned C, int E) {
    const float Cf = (C == 0u) ? BP_EPS : (float)C;
    return mul(div((float)c, Cf), (float)E);
}

struct BwdArgs {
    const float* scores;
    const unsigned* ids;
    const float* gw;
    const unsigned char* padding;
    const unsigned* counts;
    int T, E, k;
    float scale;
    bool norm, fused, inclusive;
    float g;
    float* grad;
};

// The route part of token t: r_j for each chosen expert j, stored by expert
// in rbuf (rbuf[ids_j] = r_j), and the chosen experts as one mask per owning
// lane (bit id >> 5 of cmask[id & 31]). Position i = c0 + lane of the chunk
// at c0 (one chunk when k <= 32): id_i, a_i = route_scale * gw_i, and w0_i =
// s[id_i], gathered from the row this warp just read (an L1 hit).
// route_norm: D = Serial(w0) + 1e-20, q = Serial(-(a_i * ((w0_i / D) / D)))
// from +0.0, r_i = a_i / D + q: every lane walks the positions in ascending
// order through shuffles, so every lane holds the one serial sum.
// Without route_norm: r_i = a_i.
// One position of the route part: the chosen expert, a = route_scale * gw,
// and w0 = s[id], the gathered weight before normalisation.
struct Position {
    unsigned id;
    float a, w0;
};

__device__ __forceinline__ void route_part(const BwdArgs& a, int t, int lane, const float* srow, float* rbuf,
                                           unsigned* cmask) {
    const size_t rowK = (size_t)t * (size_t)a.k;
    auto load = [&](int c0) {
        const int i = c0 + lane;
        Position p{0xffffffffu, 0.0f, 0.0f};
        if (i < a.k) {
            p.id = __ldg(a.ids + rowK + i);
            p.a = mul(a.scale, __ldg(a.gw + rowK + i));
            if (p.id < (unsigned)a.E) p.w0 = __ldg(srow + p.id);
        }
        return p;
    };
    // The first chunk stays in registers; later ones (k > 32) are loaded
    // again in each pass (L1 hits).
    const Position first = load(0);
    float D = 0.0f, q = 0.0f;
    if (a.norm) {
        for (int c0 = 0; c0 < a.k; c0 += BP_WARP) {
            const Position p = (c0 == 0) ? first : load(c0);
            const int n = min(BP_WARP, a.k - c0);
            for (int m = 0; m < n; ++m) D = add(D, __shfl_sync(BP_FULL_MASK, p.w0, m));
        }
        D = add(D, BP_EPS2);
        for (int c0 = 0; c0 < a.k; c0 += BP_WARP) {
            const Position p = (c0 == 0) ? first : load(c0);
            const float term = -mul(p.a, div(div(p.w0, D), D));
            const int n = min(BP_WARP, a.k - c0);
            for (int m = 0; m < n; ++m) q = add(q, __shfl_sync(BP_FULL_MASK, term, m));
        }
    }
    for (int c0 = 0; c0 < a.k; c0 += BP_WARP) {
        const Position p = (c0 == 0) ? first : load(c0);
        // The forward's ids are distinct and < E; the guard only keeps a
        // corrupt id from writing outside this warp's shared memory.
        if (c0 + lane < a.k && p.id < (unsigned)a.E) {
            rbuf[p.id] = a.norm ? add(div(p.a, D), q) : p.a;
            atomicOr(cmask + (p.id & 31u), 1u << (p.id >> 5));
        }
    }
}

// The fused loss part of a valid token: l_te, the seqwise_loss ProvidedMap
// gradient of row s, exactly as seqwise_bwd_v<V> computes it
// (kernels/seqwise_loss.cu, bwd_row): n = Strided{32, Serial, Butterfly} of
// |s|; d = max(n, eps) with NaN propagating (eps only where n < eps); the
// gate n > eps (Strict) or n >= eps (Inclusive); q = Strided{32, Serial,
// Butterfly} of -(a_e * ((s_e / d) / d)); l_e = a_e / d + sgn(s_e) * r with
// r = gate ? q : +0.0 (a select, not a product).
template <int V>
__device__ __forceinline__ void loss_part(const float (&x)[V], const float (&ae)[V], int lane, int E, bool inclusive,
                                          float (&l)[V]) {
    float y[V];
#pragma unroll
    for (int j = 0; j < V; ++j) y[j] = fabsf(x[j]);
    const float n = warp_strided_sum<V>(y, lane, E);
    const float d = (n < BP_EPS) ? BP_EPS : n;
    const bool gate = inclusive ? (n >= BP_EPS) : (n > BP_EPS);
    float terms[V];
#pragma unroll
    for (int j = 0; j < V; ++j) terms[j] = -mul(ae[j], div(div(x[j], d), d));
    const float q = warp_strided_sum<V>(terms, lane, E);
    const float r = gate ? q : 0.0f;
#pragma unroll
    for (int j = 0; j < V; ++j) l[j] = add(div(ae[j], d), mul(sgn(x[j]), r));
}

template <int V>
__device__ __forceinline__ void bwd_token(const BwdArgs& a, int t, int lane, const float (&ae)[V], float* rbuf,
                                          unsigned* cmask) {
    const int E = a.E;
    const size_t rowE = (size_t)t * (size_t)E;
    const float* srow = a.scores + rowE;
    float x[V];
#pragma unroll
    for (int j = 0; j < V; ++j) {
        const int e = lane + BP_WARP * j;
        x[j] = (e < E) ? __ldg(srow + e) : 0.0f;
    }
    cmask[lane] = 0u;
    __syncwarp();
    route_part(a, t, lane, srow, rbuf, cmask);
    __syncwarp();
    const unsigned mine = cmask[lane];  // bit j: expert lane + 32 j is chosen

    // Without a fused loss, and on a padding token, l = +0.0.
    float l[V];
#pragma unroll
    for (int j = 0; j < V; ++j) l[j] = 0.0f;
    if (a.fused && a.padding[t] == 0) loss_part<V>(x, ae, lane, E, a.inclusive, l);

    // gs = chosen ? r_j + l : l (a chosen expert's r + (+0.0) without a
    // loss, as the profile adds it); grad = (gs * (1 - s)) * s, 1 - s one
    // rounded subtraction.
#pragma unroll
    for (int j = 0; j < V; ++j) {
        const int e = lane + BP_WARP * j;
        if (e < E) {
            const float gsv = ((mine >> j) & 1u) ? add(rbuf[e], l[j]) : l[j];
            a.grad[rowE + e] = mul(mul(gsv, __fsub_rn(1.0f, x[j])), x[j]);
        }
    }
    __syncwarp();  // the next token rewrites cmask and rbuf
}

template <int V>
__device__ __forceinline__ void bwd(const BwdArgs& a) {
    extern __shared__ unsigned sh[];
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int warps = blockDim.x >> 5;
    unsigned* wsh = sh + warp * (a.E + BP_WARP);
    float* rbuf = reinterpret_cast<float*>(wsh);
    unsigned* cmask = wsh + a.E;
    // a_e = g * f_e, once per warp. The counts are the forward's, complete
    // before this kernel starts (stream order), and C is their exact integer
    // sum (a warp reduction: any order is exact), so every warp derives the
    // same f_e as router_freq, without a grid-wide dependency.
    float ae[V];
    if (a.fused) {
        unsigned c[V];
        unsigned part = 0u;
#pragma unroll
        for (int j = 0; j < V; ++j) {
            const int e = lane + BP_WARP * j;
            c[j] = (e < a.E) ? __ldg(a.counts + e) : 0u;
            part += c[j];
        }
        const unsigned C = __reduce_add_sync(BP_FULL_MASK, part);
#pragma unroll
        for (int j = 0; j < V; ++j) {
            const int e = lane + BP_WARP * j;
            ae[j] = (e < a.E) ? mul(a.g, frequency(c[j], C, a.E)) : 0.0f;
        }
    } else {
#pragma unroll
        for (int j = 0; j < V; ++j) ae[j] = 0.0f;
    }
    for (int t = blockIdx.x * warps + warp; t < a.T; t += gridDim.x * warps) bwd_token<V>(a, t, lane, ae, rbuf, cmask);
}

}  // namespace router
}  // namespace bp

#define BP_ROUTER_INSTANTIATE(V, FWD_MIN_BLOCKS)                                                            \
    extern "C" __global__ void __launch_bounds__(BP_ROUTER_THREADS, FWD_MIN_BLOCKS) router_fwd_v##V(        \
        const float* __restrict__ logits, int offset, long long stride, int T, int E,                       \
        const float* __restrict__ bias, int G, int L, int k, float route_scale, int route_norm,             \
        const unsigned char* __restrict__ padding, unsigned* __restrict__ ids, float* __restrict__ weights, \
        unsigned char* __restrict__ map, unsigned* __restrict__ counts, float* __restrict__ scores) {        \
        const bp::router::FwdArgs a{logits, offset, stride, T, E, bias, G, L, k, route_scale,                 \
                                    route_norm != 0, padding, ids, weights, map, counts, scores};          \
        bp::router::fwd<V>(a);                                                                              \
    }                                                                                                       \
    extern "C" __global__ void __launch_bounds__(BP_ROUTER_THREADS) router_bwd_v##V(                        \
        const float* __restrict__ scores, const unsigned* __restrict__ ids, const float* __restrict__ gw,  \
        const unsigned char* __restrict__ padding, const unsigned* __restrict__ counts, int T, int E,      \
        int k, float route_scale, int route_norm, int fused, int inclusive, float g,                        \
        float* __restrict__ grad) {                                                                         \
        const bp::router::BwdArgs a{scores, ids, gw, padding, counts, T, E, k, route_scale,                 \
                                    route_norm != 0, fused != 0, inclusive != 0, g, grad};                  \
        bp::router::bwd<V>(a);                                                                              \
    }

// The forward's residency target per V (blocks of 256 threads per SM), which
// is its register budget: what ptxas needs without spilling, rounded to a
// whole number of resident blocks. V = 8 (E = 256): 4 blocks (64 registers)
// hold T = 4096 tokens in one wave on 132 SMs. V = 32 needs about 164
// registers: left to its default, ptxas caps it at 128 and spills 128 bytes.
BP_ROUTER_INSTANTIATE(1, 6)
BP_ROUTER_INSTANTIATE(2, 6)
BP_ROUTER_INSTANTIATE(4, 5)
BP_ROUTER_INSTANTIATE(8, 4)
BP_ROUTER_INSTANTIATE(16, 2)
BP_ROUTER_INSTANTIATE(32, 1)

// f_e for every expert, from the forward's counts (see the header). C is the
// exact integer sum (per-thread partials, warp reductions, then the warp sums
// in order: integer, so any order is the same).
extern "C" __global__ void __launch_bounds__(1024)
    router_freq(const unsigned* __restrict__ counts, int E, float* __restrict__ freq) {
    __shared__ unsigned wsum[32];
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    unsigned part = 0u;
    for (int e = threadIdx.x; e < E; e += blockDim.x) part += counts[e];
    part = __reduce_add_sync(BP_FULL_MASK, part);
    if (lane == 0) wsum[warp] = part;
    __syncthreads();
    unsigned C = 0u;
    for (int w = 0; w < (int)(blockDim.x >> 5); ++w) C += wsum[w];
    for (int e = threadIdx.x; e < E; e += blockDim.x) freq[e] = bp::router::frequency(counts[e], C, E);
}
