// router (docs/ops/router.md): TorchTitan's DeepSeekV3Router after the gate
// matmul: sigmoid scores, an expert bias used only to choose, group-limited
// top-k, normalised and scaled weights; forward and backward, the backward
// optionally fused with the seqwise_loss gradient (docs/ops/seqwise_loss.md,
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
//   G | E, E/G >= 2, 1 <= L <= G, 1 <= k <= L * E / G   (the op's validation;
//                        G up to E/2 = 512 and k up to E are supported)
//   T >= 1, T * k <= 2^24 (the op's; the counts and C are exact in f32),
//   T * E and T * k < 2^31, stride < 2^62 (i32 / i64 arguments).
//
// router_fwd_v<V>(const float* logits, int offset, long long stride, int T,
//     int E, const float* bias, int G, int L, int k, float route_scale,
//     int route_norm, const unsigned char* padding, unsigned* ids,
//     float* weights, unsigned char* map, unsigned* counts, float* scores)
//   block (BP_ROUTER_THREADS, 1, 1); any grid >= 1 (warp w of block b takes
//   tokens t = b*W + w, then t += gridDim.x*W: the launcher caps the grid at
//   the blocks resident on the device); dynamic shared memory
//   (2E + W * (max(2E, 128) + 32)) * 4 bytes (E block counters, the E biases,
//   then per warp: E words of keys / chosen weights, E words of kept-group
//   flags / chosen ids, at least 128 words in all (fwd_grouped32's 32
//   entries of 4 words), 32 words of candidate scratch): above 48 KiB for E > 668, so
//   the launcher raises the function's limit; plus 512 bytes of static
//   shared memory (exp_cr's table).
//   Reads: logits at logits + offset + t*stride + e for e < E only (the gaps
//   may hold anything), bias[E], padding[T] (0 = valid).
//   Writes: ids[T*k] (ascending per token), weights[T*k], map[T*E] (0/1),
//   scores[T*E] (s, dense row-major), counts[E] += selections of valid tokens.
//   map must be 16-byte aligned (when E = 32 G, rows are written V bytes per
//   lane, up to 16 bytes a store).
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

// topk_key of a number that is neither NaN nor -0.0 (u = s + bias with s > 0
// and the bias finite): the same key without the two tests.
__device__ __forceinline__ unsigned topk_key_number(float x) {
    const unsigned b = __float_as_uint(x);
    return b ^ ((unsigned)((int)b >> 31) | 0x80000000u);
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
    bool grouped32;  // gs = 32, k <= 2L: fwd_grouped32 takes the selection
    int gs;          // experts per group, E / G
    unsigned gmul;   // ceil(2^20 / gs): group of e = (e * gmul) >> 20
    int lanes;       // P, lanes per group: 32 / (G rounded up to a power of 2), 1 for G > 32
    int slot;        // lane / P: the (first) group this lane scans
    int part;        // lane % P: which of the group's values it scans
    int rot;         // where in its group it starts (any start is correct; see keep_groups)
};

__device__ __forceinline__ GroupPlan group_plan(int E, int G, int L, int k, int lane) {
    GroupPlan gp;
    gp.active = L < G;
    gp.gs = E / G;
    gp.grouped32 = gp.gs == BP_WARP && k <= 2 * L;
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

// The group-limited selection when a group is one register row (group size
// 32 = the warp width: group j is key[j] across the 32 lanes), L <= G and
// k <= 2L: steps 3 and 4 by warp reductions, and the emit of steps 5 to 7.
// Returns false, having written nothing but scratch, when more than 32
// experts remain candidates (many equal keys): the caller then takes the
// general path. Every branch below is warp-uniform.
//
// 3. Group j's two largest keys: m1 = max, m2 = m1 again if m1 is held by two
//    lanes or more, else the largest key below it (as a multiset, the order
//    of a + b does not matter). Lane g < G gathers its group's pair and forms
//    the score key topk_key(a + b) (see key_value); the L best groups are
//    taken one by one by a max reduction, ties to the lower group (lane).
// 4. lo = the smallest m2 of a kept group: the 2L >= k elements m1 and m2 of
//    the kept groups are all >= lo, so an element below lo has at least k
//    elements strictly above it and is out, ties or not. The candidates (kept
//    group, key >= lo; at least 2L >= k of them) are compacted into scratch
//    in index order (j-major ballots: e = lane + 32 j ascends with (j,
//    lane)), one per lane, as (key, expert, s). With c candidates, the c - k
//    worst leave one at a time (min reduction; among equal keys the highest
//    index, i.e. the highest lane, goes first), or, when k < c - k, the k
//    best are taken one at a time (max reduction, lowest lane first): either
//    way the k first in the selection order stay. Lane order is index order,
//    so a winner's place in ids (ascending) is the number of winners in
//    lanes below it.
// 5.-7. Winners write ids, their s into wbuf (the norm's serial sum reads it
//    in place order), their bit into the warp's bitmap (G words), and count
//    themselves when the token is valid; the map row is written from the
//    bitmap, V bytes per lane.
template <int V, bool FULL>
__device__ __forceinline__ bool fwd_grouped32(const FwdArgs& a, int t, int lane, const unsigned (&key)[V],
                                              const float (&s)[V], unsigned* wsh, unsigned* cnt_sh, bool valid) {
    const int G = a.G;
    const unsigned lt = lanes_below(lane);
    // P lanes per group when FULL (G = V), 1 otherwise: kept_bits has group
    // j's flag at bit P j.
    constexpr int P = FULL ? BP_WARP / V : 1;
    unsigned gb;          // lane g P (g < G): group g's second key
    unsigned kept_bits;   // bit P g: group g is kept
    unsigned sk;          // lane g P: group g's score key (0 elsewhere)
    bool head;            // this lane holds its group's score
    if constexpr (FULL) {
        // G = V groups of 32 keys, P = 32 / V lanes per group: lane g P + p
        // takes group g's keys p, p + P, ... (V of them) from a staged copy
        // with row stride 32 + P (lane g P + p reads bank (g P + p + P i) mod
        // 32, one bank per lane; the staging writes one bank per lane too),
        // and the P partial top-2s merge by an xor butterfly: any split gives
        // the same top-2 multiset.
        constexpr int S = BP_WARP + P;
        unsigned* stage = wsh;  // V S = E + 32 words <= 2E
#pragma unroll
        for (int j = 0; j < V; ++j) stage[j * S + lane] = key[j];
        __syncwarp();
        const unsigned* mine = stage + (lane / P) * S + (lane % P);
        unsigned k1 = mine[0], k2 = 0u;
#pragma unroll
        for (int i = 1; i < V; ++i) top2_push(k1, k2, mine[P * i]);
#pragma unroll
        for (int o = P / 2; o > 0; o >>= 1) {
            const unsigned b1 = __shfl_xor_sync(BP_FULL_MASK, k1, o);
            const unsigned b2 = __shfl_xor_sync(BP_FULL_MASK, k2, o);
            top2_merge(k1, k2, b1, b2);
        }
        __syncwarp();  // the staged keys are read: the scratch below reuses them
        head = (lane % P) == 0;
        gb = k2;
        // 32 keys per group, so k2 is a real key; the score's key is the
        // profile's topk_key(a + b) (see key_value).
        sk = head ? topk_key(add(key_value(k1), key_value(k2))) : 0u;
    } else {
        // Group j is register row j: its m1 = max, m2 = m1 again if m1 is
        // held by two lanes or more, else the largest key below it; lane j
        // gathers group j's pair.
        unsigned ga = 0u;
        gb = 0u;
#pragma unroll
        for (int j = 0; j < V; ++j) {
            if (j < G) {
                const unsigned m1 = __reduce_max_sync(BP_FULL_MASK, key[j]);
                const bool top = key[j] == m1;
                const unsigned below = __reduce_max_sync(BP_FULL_MASK, top ? 0u : key[j]);
                const unsigned m2 = (__popc(__ballot_sync(BP_FULL_MASK, top)) > 1) ? m1 : below;
                if (lane == j) {
                    ga = m1;
                    gb = m2;
                }
            }
        }
        head = lane < G;
        sk = head ? topk_key(add(key_value(ga), key_value(gb))) : 0u;
    }
    if (a.L < G) {
        // Real group keys are >= 1 (topk_key never gives 0), so a taken group
        // (set to 0) and the other lanes never win again; ties go to the
        // lower lane, i.e. the lower group.
        for (int i = 0; i < a.L; ++i) {
            const unsigned m = __reduce_max_sync(BP_FULL_MASK, sk);
            const bool hit = sk == m;
            const unsigned h = __ballot_sync(BP_FULL_MASK, hit);
            if (hit && (h & lt) == 0u) sk = 0u;
        }
        kept_bits = __ballot_sync(BP_FULL_MASK, head && sk == 0u);
    } else {
        kept_bits = __ballot_sync(BP_FULL_MASK, head);
    }
    const unsigned lo = __reduce_min_sync(BP_FULL_MASK, ((kept_bits >> lane) & 1u) ? gb : 0xffffffffu);

    // Scratch: 32 entries of 4 words at wsh (the general path's keys_sh and
    // aux_sh, max(2E, 128) words: E = 32 has only 64 of its own), the
    // bitmap's G words at wsh + 128 (G <= 32: within the warp's words).
    uint4* ent = reinterpret_cast<uint4*>(wsh);
    unsigned* bits = wsh + 4 * BP_WARP;
    if (lane < G) bits[lane] = 0u;
    unsigned c = 0u;
#pragma unroll
    for (int j = 0; j < V; ++j) {
        const bool is = ((kept_bits >> (P * j)) & 1u) && key[j] >= lo;  // bit P j: 0 for j >= G
        const unsigned b = __ballot_sync(BP_FULL_MASK, is);
        const unsigned slot = c + __popc(b & lt);
        if (is && slot < BP_WARP) {
            ent[slot] = make_uint4(key[j], (unsigned)(lane + BP_WARP * j), __float_as_uint(s[j]), 0u);
        }
        c += __popc(b);
    }
    __syncwarp();
    if (c > BP_WARP) return false;
    const unsigned k = (unsigned)a.k;  // k <= 2L <= c <= 32
    const bool mine = (unsigned)lane < c;
    const uint4 en = mine ? ent[lane] : make_uint4(0u, 0u, 0u, 0u);
    bool in = mine;
    if (c - k <= k) {
        for (unsigned i = k; i < c; ++i) {
            const unsigned m = __reduce_min_sync(BP_FULL_MASK, in ? en.x : 0xffffffffu);
            const unsigned h = __ballot_sync(BP_FULL_MASK, in && en.x == m);
            if (lane == 31 - __clz(h)) in = false;
        }
    } else {
        bool won = false;
        for (unsigned i = 0; i < k; ++i) {
            const bool open = in && !won;
            const unsigned m = __reduce_max_sync(BP_FULL_MASK, open ? en.x : 0u);
            const unsigned h = __ballot_sync(BP_FULL_MASK, open && en.x == m);
            if (lane == __ffs(h) - 1) won = true;
        }
        in = won;
    }
    const unsigned winners = __ballot_sync(BP_FULL_MASK, in);
    __syncwarp();  // every lane has read its entry: wbuf overwrites them

    float* wbuf = reinterpret_cast<float*>(wsh);
    const size_t rowK = (size_t)t * (size_t)a.k;
    const unsigned pos = __popc(winners & lt);
    const float w0 = __uint_as_float(en.z);
    if (in) {
        wbuf[pos] = w0;
        atomicOr(bits + (en.y >> 5), 1u << (en.y & 31u));
        if (valid) atomicAdd(cnt_sh + en.y, 1u);
        a.ids[rowK + pos] = en.y;
    }
    __syncwarp();
    // 6. D = (Serial sum of w over places ascending) + 1e-20, in every lane.
    float D = 0.0f;
    if (a.norm) {
        int i = 0;
        for (; i + 4 <= (int)k; i += 4) {
            const float4 w4 = *reinterpret_cast<const float4*>(wbuf + i);
            D = add(add(add(add(D, w4.x), w4.y), w4.z), w4.w);
        }
        for (; i < (int)k; ++i) D = add(D, wbuf[i]);
        D = add(D, BP_EPS2);
    }
    if (in) a.weights[rowK + pos] = mul(a.norm ? div(w0, D) : w0, a.scale);
    // 7. The map row from the bitmap: lane l writes bytes l V .. l V + V - 1
    // (E = 32 G, so a lane's V bytes are V bits of one word; the row starts
    // on a multiple of 32 bytes).
    const int first = lane * V;
    if (first < a.E) {
        const unsigned w = bits[first >> 5] >> (first & 31);
        unsigned char* out = a.map + (size_t)t * (size_t)a.E + first;
        // Bits 0..3 of n spread to the low bit of bytes 0..3: n * (1 + 2^7 +
        // 2^14 + 2^21) puts bit i at 8i (copies elsewhere never overlap or carry).
        auto nib = [](unsigned n) { return ((n & 0xfu) * 0x204081u) & 0x01010101u; };
        if constexpr (V == 1) {
            *out = (unsigned char)(w & 1u);
        } else if constexpr (V == 2) {
            *reinterpret_cast<unsigned short*>(out) = (unsigned short)((w & 1u) | ((w & 2u) << 7));
        } else if constexpr (V == 4) {
            *reinterpret_cast<unsigned*>(out) = nib(w);
        } else if constexpr (V == 8) {
            *reinterpret_cast<uint2*>(out) = make_uint2(nib(w), nib(w >> 4));
        } else if constexpr (V == 16) {
            *reinterpret_cast<uint4*>(out) = make_uint4(nib(w), nib(w >> 4), nib(w >> 8), nib(w >> 12));
        } else if constexpr (V == 32) {
            reinterpret_cast<uint4*>(out)[0] = make_uint4(nib(w), nib(w >> 4), nib(w >> 8), nib(w >> 12));
            reinterpret_cast<uint4*>(out)[1] = make_uint4(nib(w >> 16), nib(w >> 20), nib(w >> 24), nib(w >> 28));
        }
    }
    __syncwarp();  // the next token rewrites scratch and the bitmap
    return true;
}

// One token, one warp: steps 1 to 7 of docs/ops/router.md#forward.
// wsh: this warp's fwd_warp_words(E) words of shared memory; cnt_sh: the block's E
// counters of valid selections; pow2: exp_cr's table in shared memory;
// bias: the E biases in shared memory; x: the token's logits (fwd_load).
// FULL: E = 32 V, every lane holds V experts (no bounds to test).
template <int V, bool FULL>
__device__ __forceinline__ void fwd_token(const FwdArgs& a, int t, int lane, const float (&x)[V], unsigned* wsh,
                                          unsigned* cnt_sh, const GroupPlan& gp, const double* pow2,
                                          const float* bias) {
    const int E = a.E;
    unsigned* keys_sh = wsh;          // group phase: topk_key(u); emit: chosen s (wbuf)
    unsigned* aux_sh = wsh + E;       // group phase: kept flags; emit: chosen ids (ibuf)
    unsigned* scratch = wsh + 2 * E;  // select_topk's candidates
    const bool valid = a.padding[t] == 0;
    const size_t rowE = (size_t)t * (size_t)E;
    // 1. s = 1 / (1 + exp(-x)), each operation rounded; 2. u = s + bias, kept
    // only as its selection key. Absent lanes (e >= E) get key 0.
    // The common case, branch-free so that the V values interleave: |x| < 86
    // and exp's table path settles. Then 1 + e < 2^125, 1/y is rcp_rn_mid,
    // s is in (0, 1] and u = s + bias is a finite number and not -0.0 (s >
    // 0), so its key needs no NaN or zero test. The other values (NaN, large
    // |x|, an unsettled exp) are redone below by the general functions.
    float s[V];
    unsigned key[V];
    unsigned redo = 0u;
#pragma unroll
    for (int j = 0; j < V; ++j) {
        const float z = -x[j];
        const bool in_range = fabsf(z) < 86.0f;  // false for NaN
        bool settled;
        const float ex = exp_detail::exp_table_eval(in_range ? z : 0.0f, pow2, settled);
        if (!(in_range && settled)) redo |= 1u << j;
        s[j] = rcp_rn_mid(add(1.0f, ex));
        const bool present = FULL || lane + BP_WARP * j < E;
        key[j] = topk_key_number(add(s[j], present ? bias[lane + BP_WARP * j] : 0.0f));
    }
    if (redo != 0u) {  // rare
#pragma unroll
        for (int j = 0; j < V; ++j) {
            if ((redo >> j) & 1u) {
                s[j] = __frcp_rn(add(1.0f, exp_detail::exp_ref(-x[j])));
                const int e = lane + BP_WARP * j;
                key[j] = topk_key(add(s[j], (e < E) ? bias[e] : 0.0f));
            }
        }
    }
    // 7. s is written at once.
    float* sl = a.scores + rowE + lane;
#pragma unroll
    for (int j = 0; j < V; ++j) {
        if (FULL || lane + BP_WARP * j < E) {
            sl[BP_WARP * j] = s[j];
        } else {
            key[j] = 0u;
        }
    }

    if (gp.grouped32) {
        if (fwd_grouped32<V, FULL>(a, t, lane, key, s, wsh, cnt_sh, valid)) return;
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
    // index (j-major ballots walk the indices in ascending order). 7. The map
    // and the valid token's counts.
    float* wbuf = reinterpret_cast<float*>(keys_sh);
    unsigned* ibuf = aux_sh;
    const unsigned lt = lanes_below(lane);
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
        if (e < E) a.map[rowE + e] = c ? 1 : 0;
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

// Token t's logits, lane + 32 j at x[j] (0 where absent): one base address,
// immediate offsets.
template <int V, bool FULL>
__device__ __forceinline__ void fwd_load(const FwdArgs& a, int t, int lane, float (&x)[V]) {
    const float* xl = a.logits + a.offset + (long long)t * a.stride + lane;
#pragma unroll
    for (int j = 0; j < V; ++j) x[j] = (FULL || lane + BP_WARP * j < a.E) ? __ldg(xl + BP_WARP * j) : 0.0f;
}

// BP_ROUTER_FWD_PREFETCH=1: a warp loads its next token's logits before it
// computes the current one (two rows in flight); 0: one row at a time.
#ifndef BP_ROUTER_FWD_PREFETCH
#define BP_ROUTER_FWD_PREFETCH 1
#endif

// The forward's shared words per warp: keys and flags (2E), at least the
// 128 words of fwd_grouped32's entries, then 32 words of candidate scratch.
// The launcher's fwd_shared_bytes (src/subject/cuda/router.rs) must agree.
__device__ __forceinline__ int fwd_warp_words(int E) { return max(2 * E, 4 * BP_WARP) + BP_WARP; }

template <int V, bool FULL>
__device__ __forceinline__ void fwd_body(const FwdArgs& a) {
    extern __shared__ __align__(16) unsigned sh[];
    __shared__ double pow2[BP_EXP_TABLE];
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int warps = blockDim.x >> 5;
    const int t0 = blockIdx.x * warps + warp;
    const int dt = gridDim.x * warps;
    // The first token's row is in flight while the block sets up.
    float x[V];
    if (t0 < a.T) fwd_load<V, FULL>(a, t0, lane, x);
    unsigned* cnt_sh = sh;
    float* bias_sh = reinterpret_cast<float*>(sh + a.E);
    unsigned* wsh = sh + 2 * a.E + warp * fwd_warp_words(a.E);
    for (int e = threadIdx.x; e < a.E; e += blockDim.x) {
        cnt_sh[e] = 0u;
        bias_sh[e] = __ldg(a.bias + e);
    }
    exp_table_load(pow2);
    const GroupPlan gp = group_plan(a.E, a.G, a.L, a.k, lane);
    __syncthreads();
    // The loop bound is warp-uniform: every lane of a warp takes the same
    // tokens, so every warp-collective call has all 32 lanes.
    for (int t = t0; t < a.T; t += dt) {
#if BP_ROUTER_FWD_PREFETCH
        float xn[V];
        if (t + dt < a.T) {
            fwd_load<V, FULL>(a, t + dt, lane, xn);
        } else {
#pragma unroll
            for (int j = 0; j < V; ++j) xn[j] = 0.0f;  // the loop ends: never used
        }
        fwd_token<V, FULL>(a, t, lane, x, wsh, cnt_sh, gp, pow2, bias_sh);
#pragma unroll
        for (int j = 0; j < V; ++j) x[j] = xn[j];
#else
        if (t != t0) fwd_load<V, FULL>(a, t, lane, x);
        fwd_token<V, FULL>(a, t, lane, x, wsh, cnt_sh, gp, pow2, bias_sh);
#endif
    }
    __syncthreads();
    // Integer counts: exact in any order, so the per-block sums may be added
    // to the global counters in any order.
    for (int e = threadIdx.x; e < a.E; e += blockDim.x) {
        const unsigned c = cnt_sh[e];
        if (c != 0u) atomicAdd(a.counts + e, c);
    }
}

template <int V>
__device__ __forceinline__ void fwd(const FwdArgs& a) {
    if (a.E == BP_WARP * V) {
        fwd_body<V, true>(a);
    } else {
        fwd_body<V, false>(a);
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

__device__ __forceinline__ void route_part(const BwdArgs& a, int t, int lane, const float* srow, unsigned id0,
                                           float gw0, float* rbuf, unsigned* cmask) {
    const size_t rowK = (size_t)t * (size_t)a.k;
    auto gather = [&](Position& p) {
        if (p.id < (unsigned)a.E) p.w0 = __ldg(srow + p.id);
    };
    auto load = [&](int c0) {
        const int i = c0 + lane;
        Position p{0xffffffffu, 0.0f, 0.0f};
        if (i < a.k) {
            p.id = __ldg(a.ids + rowK + i);
            p.a = mul(a.scale, __ldg(a.gw + rowK + i));
            gather(p);
        }
        return p;
    };
    // The first chunk (prefetched with the row: id0, gw0) stays in
    // registers; later ones (k > 32) are loaded again in each pass (L1 hits).
    Position first{id0, 0.0f, 0.0f};
    if (lane < a.k) {
        first.a = mul(a.scale, gw0);
        gather(first);
    }
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

// What a token's backward reads first: its row of s, and the first chunk of
// its chosen experts and their gw (lanes < k). The loop loads token t + dt's
// while it computes token t's, so that a warp keeps two rows in flight.
template <int V>
struct BwdRow {
    float x[V];
    unsigned id;
    float gw;
};

template <int V, bool FULL>
__device__ __forceinline__ void bwd_load(const BwdArgs& a, int t, int lane, BwdRow<V>& r) {
    const float* sl = a.scores + (size_t)t * (size_t)a.E + lane;
#pragma unroll
    for (int j = 0; j < V; ++j) r.x[j] = (FULL || lane + BP_WARP * j < a.E) ? __ldg(sl + BP_WARP * j) : 0.0f;
    r.id = 0xffffffffu;
    r.gw = 0.0f;
    if (lane < a.k) {
        const size_t rowK = (size_t)t * (size_t)a.k;
        r.id = __ldg(a.ids + rowK + lane);
        r.gw = __ldg(a.gw + rowK + lane);
    }
}

template <int V, bool FULL>
__device__ __forceinline__ void bwd_token(const BwdArgs& a, int t, int lane, const float (&ae)[V], float* rbuf,
                                          unsigned* cmask, const BwdRow<V>& row) {
    const int E = a.E;
    const size_t rowE = (size_t)t * (size_t)E;
    const float* srow = a.scores + rowE;
    const float(&x)[V] = row.x;
    cmask[lane] = 0u;
    __syncwarp();
    route_part(a, t, lane, srow, row.id, row.gw, rbuf, cmask);
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
    float* gl = a.grad + rowE + lane;
#pragma unroll
    for (int j = 0; j < V; ++j) {
        if (FULL || lane + BP_WARP * j < E) {
            const float gsv = ((mine >> j) & 1u) ? add(rbuf[lane + BP_WARP * j], l[j]) : l[j];
            gl[BP_WARP * j] = mul(mul(gsv, __fsub_rn(1.0f, x[j])), x[j]);
        }
    }
    __syncwarp();  // the next token rewrites cmask and rbuf
}

template <int V, bool FULL>
__device__ __forceinline__ void bwd_tokens(const BwdArgs& a, int lane, const float (&ae)[V], float* rbuf,
                                           unsigned* cmask, int t0, int dt) {
    BwdRow<V> cur, nxt;
    if (t0 < a.T) bwd_load<V, FULL>(a, t0, lane, cur);
    for (int t = t0; t < a.T; t += dt) {
        if (t + dt < a.T) {
            bwd_load<V, FULL>(a, t + dt, lane, nxt);
        } else {
            nxt = BwdRow<V>{};  // the loop ends: never used
        }
        bwd_token<V, FULL>(a, t, lane, ae, rbuf, cmask, cur);
        cur = nxt;
    }
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
    // same f_e (docs/ops/seqwise_loss.md#forward), without a grid-wide
    // dependency.
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
    const int t0 = blockIdx.x * warps + warp;
    const int dt = gridDim.x * warps;
    if (a.E == BP_WARP * V) {
        bwd_tokens<V, true>(a, lane, ae, rbuf, cmask, t0, dt);
    } else {
        bwd_tokens<V, false>(a, lane, ae, rbuf, cmask, t0, dt);
    }
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
// is its register budget. V = 8 (E = 256): 3 blocks (80 registers): 4 blocks
// (64 registers, T = 4096 in one wave on 132 SMs) spill in the token loop and
// measured slower at both T = 4096 and 65536 (reports/router-2026-11-30/
// speed-notes.md); BP_ROUTER_FWD_MIN_BLOCKS_V8 overrides it for such
// measurements. V = 32 needs about 164 registers: left to its default, ptxas
// caps it at 128 and spills.
BP_ROUTER_INSTANTIATE(1, 6)
BP_ROUTER_INSTANTIATE(2, 6)
BP_ROUTER_INSTANTIATE(4, 5)
#ifndef BP_ROUTER_FWD_MIN_BLOCKS_V8
#define BP_ROUTER_FWD_MIN_BLOCKS_V8 3
#endif
BP_ROUTER_INSTANTIATE(8, BP_ROUTER_FWD_MIN_BLOCKS_V8)
BP_ROUTER_INSTANTIATE(16, 2)
BP_ROUTER_INSTANTIATE(32, 1)

