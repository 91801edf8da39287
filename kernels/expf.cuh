// bp::exp_cr(x): e^x correctly rounded to f32 (round to nearest even) for
// every f32 x, subnormal results and overflow included; exp_cr(-inf) = +0.0,
// exp_cr(NaN) = NaN. Deterministic: IEEE double operations rounded to
// nearest, each written as an explicitly rounded intrinsic (__dadd_rn,
// __dmul_rn, __dsub_rn: never fused into an FMA, whatever the flags), plus a
// committed table. No fast-math intrinsic, no flush to zero.
//
// The algorithm is the CPU reference's fast path, operation for operation
// (oracles/src/expf.rs, whose module docs hold the full error analysis, and
// docs/expf.md):
//   1. k = rint(x * RN(1/ln2)); r = (x - k*L1) - RN(k*L2), the first
//      subtraction and product exact (L1 has 44 significant bits, |k| <= 159);
//   2. p = 1 + r * S(r), S the degree-12 Taylor polynomial of (e^r - 1)/r,
//      by Horner;
//   3. y = p * 2^k (exact).
// Proven there: |y - e^x| <= 2^-51 y for every f32 x in [-110, 89].
//
// Why not CUDA's exp(double)? The CUDA C++ Programming Guide's table of
// double-precision functions gives exp(x) a maximum error of 1 ulp ("full
// range"), but says of its bounds that they "are generated from extensive but
// not exhaustive tests, so they are not guaranteed bounds", and the
// implementation may change with the toolkit. This evaluation's bound is
// proven, and it is the same double as the CPU's on every input.
//
// The rounding test. d = y * 2^-50 (exact), lo = RN(y - d), hi = RN(y + d):
// [lo, hi] contains [y - (2^-50 - 2u) y, y + (2^-50 - 2u) y] (u = 2^-53), which
// contains e^x because 2^-51 <= 2^-50 - 2u. Rounding to the nearest f32
// (__double2float_rn) is monotone, so when lo and hi round alike, e^x rounds
// the same way: that f32 is the answer.
//
// The rare inputs where they do not (e^x within about 2^-50 e^x of a
// rounding boundary) are settled by the table of expf_hard.cuh. If the test
// fails, a rounding boundary m lies in [lo, hi], so |m - y| <= (2^-50 + 2u) y
// and |m - e^x| <= (2^-50 + 2u + 2^-51) y < 2^-49 e^x. The table lists, with
// its correctly rounded result (MPFR), every f32 x in [-110, 89] whose e^x is
// within 2^-49 e^x of a boundary: a superset of the inputs that reach it,
// whatever double (within the proven bound) the GPU computed. How the
// generator makes sure it misses none: oracles/examples/expf_hard_cases.rs.
//
// Outside [-110, 89]: e^x > e^89 > 2^128 rounds to +inf (89 > 128 ln2);
// e^x < e^-110 < 2^-150 rounds to +0.0 (110 > 150 ln2).

#pragma once

#include "expf_hard.cuh"

namespace bp {

namespace exp_detail {

// The table lookup: a binary search over the sorted input bits. An input
// missing from the table cannot reach this (see above); if the proof were
// wrong it would return this NaN, which the exhaustive check reports.
__device__ __forceinline__ float exp_hard(float x) {
    const unsigned key = __float_as_uint(x);
    int lo = 0;
    int hi = BP_EXP_HARD_COUNT - 1;
    while (lo <= hi) {
        const int mid = (lo + hi) >> 1;
        const unsigned v = exp_hard_table::input[mid];
        if (v == key) return __uint_as_float(exp_hard_table::result[mid]);
        if (v < key) {
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    return __uint_as_float(0x7fc0e0e0u);
}

}  // namespace exp_detail

__device__ __forceinline__ float exp_cr(float x) {
    if (x != x) return x;                                   // NaN
    if (x > 89.0f) return __uint_as_float(0x7f800000u);     // +inf (and x = +inf)
    if (x < -110.0f) return 0.0f;                           // +0.0 (and x = -inf)
    // The constants have the bits of oracles/src/expf.rs (a test compares them).
    const double inv_ln2 = 0x1.71547652b82fep+0;  // RN(1/ln2)
    const double ln2_hi = 0x1.62e42fefa3800p-1;   // ln2 truncated to 44 bits
    const double ln2_lo = 0x1.ef35793c76730p-45;  // RN(ln2 - ln2_hi)
    // c[j] = RN(1/(j+1)!), j = 0..12.
    const double c[13] = {
        0x1.0000000000000p+0, 0x1.0000000000000p-1, 0x1.5555555555555p-3, 0x1.5555555555555p-5,
        0x1.1111111111111p-7, 0x1.6c16c16c16c17p-10, 0x1.a01a01a01a01ap-13, 0x1.a01a01a01a01ap-16,
        0x1.71de3a556c734p-19, 0x1.27e4fb7789f5cp-22, 0x1.ae64567f544e4p-26, 0x1.1eed8eff8d898p-29,
        0x1.6124613a86d09p-33,
    };
    const double xd = (double)x;                       // exact
    const double k = rint(__dmul_rn(xd, inv_ln2));     // ties to even, as the CPU's round_ties_even
    const double r_hi = __dsub_rn(xd, __dmul_rn(k, ln2_hi));  // both exact
    const double r = __dsub_rn(r_hi, __dmul_rn(k, ln2_lo));
    double s = c[12];
#pragma unroll
    for (int j = 11; j >= 0; --j) {
        s = __dadd_rn(c[j], __dmul_rn(r, s));
    }
    const double p = __dadd_rn(1.0, __dmul_rn(r, s));
    // 2^k: k + 1023 is in [864, 1151], a normal exponent; the product is exact.
    const double scale = __longlong_as_double((long long)((int)k + 1023) << 52);
    const double y = __dmul_rn(p, scale);
    const double d = __dmul_rn(y, 0x1p-50);
    const float lo = __double2float_rn(__dsub_rn(y, d));
    const float hi = __double2float_rn(__dadd_rn(y, d));
    if (__float_as_uint(lo) == __float_as_uint(hi)) return lo;
    return exp_detail::exp_hard(x);
}

}  // namespace bp
