// Shared device helpers of bitparity's kernels.
//
// Every floating-point operation that a profile names is written with an
// explicitly rounded intrinsic (__fadd_rn, __fmul_rn, __fdiv_rn): each is one
// IEEE operation rounded to nearest even, which the compiler may never fuse
// into an FMA nor reassociate, whatever the compile flags. The kernels are
// also compiled with --fmad=false --prec-div=true --ftz=false (see
// src/subject/cuda.rs), so no other operation is contracted or flushed.
//
// Requires sm_80 or newer (__reduce_max_sync / __reduce_min_sync /
// __reduce_add_sync are integer warp reductions: exact, order-free).

#pragma once

#define BP_WARP 32
#define BP_FULL_MASK 0xffffffffu

namespace bp {

// One rounding each: the reader sees where every rounding happens.
__device__ __forceinline__ float add(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ float mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ float div(float a, float b) { return __fdiv_rn(a, b); }

// ReductionOrder::Butterfly over the 32 lanes of a warp: offsets 16, 8, 4, 2, 1,
// x = x + partner. Lane 0 computes exactly v[0] = v[0] + v[width] of the
// profile oracle at every step; every other lane computes the same sums with
// the operands possibly swapped, which IEEE addition makes bitwise identical
// (NaN payloads aside, and any NaN matches any NaN).
__device__ __forceinline__ float warp_butterfly(float x) {
#pragma unroll
    for (int o = 16; o >= 1; o >>= 1) {
        x = add(x, __shfl_xor_sync(BP_FULL_MASK, x, o));
    }
    return x;
}

// ReductionOrder::Strided{32, Serial, Butterfly} over values held as
// x[j] = value of index lane + 32 j (indices >= n absent): each lane sums its
// indices serially from +0.0, then the butterfly.
template <int V>
__device__ __forceinline__ float warp_strided_sum(const float (&x)[V], int lane, int n) {
    float acc = 0.0f;
#pragma unroll
    for (int j = 0; j < V; ++j) {
        if (lane + BP_WARP * j < n) acc = add(acc, x[j]);
    }
    return warp_butterfly(acc);
}

// The top-k order as a monotone unsigned key: larger key = selected first.
// NaN (any sign, any payload) is the largest; -0.0 ranks as +0.0; key 0 is
// never produced by a float (-inf maps to 0x007fffff), so 0 marks "absent".
__device__ __forceinline__ unsigned topk_key(float x) {
    if (x != x) return 0xffffffffu;
    unsigned b = __float_as_uint(x);
    if (b == 0x80000000u) b = 0u;
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// RN(1/y) for y in [1, 2^125): the reciprocal estimate r = MUFU.RCP(y)
// (rcp.approx, within one ulp) and one correction, r + r (1 - y r), each
// step one rounding: the sequence that __frcp_rn runs for every y whose
// exponent is not at the ends of the range, here without its range test and
// its branch to the slow path. kernels/expf_check.cu compares it with
// __frcp_rn on every f32 of [1, 2^125) (the exhaustive exp check fails on a
// difference).
__device__ __forceinline__ float rcp_rn_mid(float y) {
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(y));
    const float d = __fmaf_rn(y, r, -1.0f);
    return __fmaf_rn(r, -d, r);
}

// x / d correctly rounded (the bits of __fdiv_rn(x, d)) for many x sharing
// one divisor d: the fast path that __fdiv_rn runs (its sm_90 SASS: MUFU.RCP,
// r = r0 + r0 (1 - d r0), q0 = x r, the residual x - d q0, exact in an FMA,
// and the correction q0 + r (x - d q0)), with r computed once per divisor
// instead of once per quotient, and without __fdiv_rn's per-quotient range
// test (FCHK) and call scaffolding. The fast path is taken only where |x| and
// |d| both lie in [2^-31, 2^33): the quotient is then more than 2^60 away from
// the ends of the normal range and the residual cannot underflow; anywhere
// else (zeros, subnormals, Inf, NaN, large ranges) __fdiv_rn itself. r is
// rcp_rn_mid's value (RN(1/d), checked on every d in [1, 2^125)), and
// kernels/expf_check.cu checks div_by against __fdiv_rn on 2^32 pairs (every
// f32 as x, with a divisor hashed from it); the GPU suites check the kernels
// that use it bitwise against the profile oracle.
struct Divisor {
    float d, r;
    bool fast;
};

__device__ __forceinline__ bool div_fast_range(float v) {
    // Biased exponent in [96, 159]: the unsigned difference wraps below 96.
    return ((__float_as_uint(v) >> 23 & 0xffu) - 96u) < 64u;
}

__device__ __forceinline__ Divisor divisor(float d) {
    float r0;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r0) : "f"(d));
    const float e = __fmaf_rn(-d, r0, 1.0f);
    return Divisor{d, __fmaf_rn(r0, e, r0), div_fast_range(d)};
}

__device__ __forceinline__ float div_by(float x, const Divisor& v) {
    if (v.fast && div_fast_range(x)) {
        // x and r are nonzero normals here, so RN(x r) is __fdiv_rn's
        // fma(x, r, +0).
        const float q0 = __fmul_rn(x, v.r);
        const float res = __fmaf_rn(-v.d, q0, x);
        return __fmaf_rn(v.r, res, q0);
    }
    return __fdiv_rn(x, v.d);
}

// sgn(s) as PyTorch's sign: +1, -1, +0.0 for either zero, NaN for NaN.
__device__ __forceinline__ float sgn(float s) {
    if (s != s) return s;
    if (s > 0.0f) return 1.0f;
    if (s < 0.0f) return -1.0f;
    return 0.0f;
}

}  // namespace bp
