// bp::exp_cr(x, pow2): e^x correctly rounded to f32 (round to nearest even)
// for every f32 x, subnormal results and overflow included; exp_cr(-inf) =
// +0.0, exp_cr(NaN) = NaN. Deterministic: IEEE double operations rounded to
// nearest, each written as an explicitly rounded intrinsic (__dadd_rn,
// __dmul_rn, __dsub_rn, __fma_rn: never contracted or reassociated, whatever
// the flags), plus committed tables. No fast-math intrinsic, no flush to zero.
//
// Two paths (docs/expf.md):
//   - exp_detail::exp_table_eval, for |x| < 87: a table of 2^(j/64) and a
//     degree-5 polynomial by FMAs, error <= 2.4 u (its comments), settled by
//     an integer test on the double's low bits. Cheap: about 12 double
//     operations. Of the 2^32 inputs, 7 in its range reach exp_ref (this
//     header compiled for the CPU and run on all of them, docs/expf.md).
//   - exp_detail::exp_ref, for everything else (NaN, |x| >= 87, the inputs
//     the first path cannot settle): the evaluation below.
// exp_cr takes the first path's result when it settles, else exp_ref's: each
// path returns only correctly rounded results, so any mix is exact.
//
// exp_ref is the CPU reference's fast path, operation for operation
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

// Entries of the table of 2^(j/64) (exp_table_load).
#define BP_EXP_TABLE 64

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

namespace exp_detail {

// The reference evaluation (the CPU's, operation for operation), for every
// f32 input: exp_cr's path for the inputs its table-driven path leaves
// (|x| >= 87, NaN, and the rare results it cannot settle). Out of line: it is
// rarely taken, and one copy serves every call site.
__device__ __noinline__ float exp_ref(float x) {
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
    return exp_hard(x);
}

}  // namespace exp_detail

namespace exp_detail {

// RN(2^(j/64)), j = 0..63 (src/subject/cuda/expf.rs checks each against
// MPFR). Kernels copy it into shared memory (exp_table_load) and pass that
// copy to exp_cr.
__device__ const double pow2_64[BP_EXP_TABLE] = {
    0x1.0000000000000p+0, 0x1.02c9a3e778061p+0, 0x1.059b0d3158574p+0, 0x1.0874518759bc8p+0,
    0x1.0b5586cf9890fp+0, 0x1.0e3ec32d3d1a2p+0, 0x1.11301d0125b51p+0, 0x1.1429aaea92de0p+0,
    0x1.172b83c7d517bp+0, 0x1.1a35beb6fcb75p+0, 0x1.1d4873168b9aap+0, 0x1.2063b88628cd6p+0,
    0x1.2387a6e756238p+0, 0x1.26b4565e27cddp+0, 0x1.29e9df51fdee1p+0, 0x1.2d285a6e4030bp+0,
    0x1.306fe0a31b715p+0, 0x1.33c08b26416ffp+0, 0x1.371a7373aa9cbp+0, 0x1.3a7db34e59ff7p+0,
    0x1.3dea64c123422p+0, 0x1.4160a21f72e2ap+0, 0x1.44e086061892dp+0, 0x1.486a2b5c13cd0p+0,
    0x1.4bfdad5362a27p+0, 0x1.4f9b2769d2ca7p+0, 0x1.5342b569d4f82p+0, 0x1.56f4736b527dap+0,
    0x1.5ab07dd485429p+0, 0x1.5e76f15ad2148p+0, 0x1.6247eb03a5585p+0, 0x1.6623882552225p+0,
    0x1.6a09e667f3bcdp+0, 0x1.6dfb23c651a2fp+0, 0x1.71f75e8ec5f74p+0, 0x1.75feb564267c9p+0,
    0x1.7a11473eb0187p+0, 0x1.7e2f336cf4e62p+0, 0x1.82589994cce13p+0, 0x1.868d99b4492edp+0,
    0x1.8ace5422aa0dbp+0, 0x1.8f1ae99157736p+0, 0x1.93737b0cdc5e5p+0, 0x1.97d829fde4e50p+0,
    0x1.9c49182a3f090p+0, 0x1.a0c667b5de565p+0, 0x1.a5503b23e255dp+0, 0x1.a9e6b5579fdbfp+0,
    0x1.ae89f995ad3adp+0, 0x1.b33a2b84f15fbp+0, 0x1.b7f76f2fb5e47p+0, 0x1.bcc1e904bc1d2p+0,
    0x1.c199bdd85529cp+0, 0x1.c67f12e57d14bp+0, 0x1.cb720dcef9069p+0, 0x1.d072d4a07897cp+0,
    0x1.d5818dcfba487p+0, 0x1.da9e603db3285p+0, 0x1.dfc97337b9b5fp+0, 0x1.e502ee78b3ff6p+0,
    0x1.ea4afa2a490dap+0, 0x1.efa1bee615a27p+0, 0x1.f50765b6e4540p+0, 0x1.fa7c1819e90d8p+0,
};

// The table-driven evaluation for |x| < 87 (x not NaN): the correctly
// rounded e^x with settled = true, or settled = false where it cannot settle
// (then the caller takes exp_ref). Branch-free, so that a caller's unrolled
// loop over several values interleaves them. Every operation is one IEEE double operation
// rounded to nearest (__fma_rn a fused multiply-add, one rounding):
//   1. kd = RN(x * RN(64/ln2) + 1.5 * 2^52): its low word is k, x * 64/ln2
//      rounded to an integer (ties to even; |k| <= 8033), kf = kd - 1.5*2^52
//      = k exactly; r = RN(RN(x - k*L1) - k*L2) with L1 = RN(ln2/64), L2 =
//      RN(ln2/64 - L1): |r| <= 0.005416, |r - (x - k ln2/64)| <= 2^-60.
//   2. p = 1 + r/2 + r^2/6 + r^3/24 + r^4/120 by Horner (four FMAs); q = r*p;
//      y0 = RN(T + T*q), T = RN(2^(j/64)), j = k mod 64: e^r is 1 + q plus
//      the Taylor tail r^6/720 (1 + r) <= 2^-54.7.
//   3. y = y0 * 2^(k >> 6), exact (added to the exponent field: y0 is in
//      [0.994, 1.99] and k >> 6 in [-126, 125], so y is a normal double, and
//      e^x in [e^-87, e^87] is a normal f32).
// Error: |y - e^x| <= (u (T's rounding) + u (y0's) + 2^-54.7 (the tail) +
// 2^-59 (r, q, p: each rounding scaled by |r| <= 2^-7.5)) e^x <= 2.4 u e^x,
// u = 2^-53, so |y - e^x| < 2.4 ulp(y) (ulp(y) = 2^-52 of y's binade, and y <
// 2 * its binade). The f32 rounding boundaries in y's binade sit where the
// low 29 bits of y's fraction are 2^28 (the midpoints between f32 neighbours;
// the next boundaries outside the binade are 2^27 ulps away or more). When
// those bits are more than 4 from 2^28, no boundary lies between y and e^x,
// and RN_f32(y) (monotone) is RN_f32(e^x). Otherwise (a proportion of about
// 2^-25 of the inputs) the caller falls back to exp_ref, which settles it or
// looks it up.
__device__ __forceinline__ float exp_table_eval(float x, const double* pow2, bool& settled) {
    const double shift = 0x1.8p+52;
    const double xd = (double)x;                                  // exact
    const double kd = __fma_rn(xd, 0x1.71547652b82fep+6, shift);  // RN(64/ln2)
    const int k = __double2loint(kd);
    const double kf = __dsub_rn(kd, shift);                       // exact
    double r = __fma_rn(-kf, 0x1.62e42fefa39efp-7, xd);           // L1 = RN(ln2/64)
    r = __fma_rn(-kf, 0x1.abc9e3b39803fp-62, r);                  // L2 = RN(ln2/64 - L1)
    double p = __fma_rn(r, 0x1.1111111111111p-7, 0x1.5555555555555p-5);  // RN(1/120), RN(1/24)
    p = __fma_rn(r, p, 0x1.5555555555555p-3);                     // RN(1/6)
    p = __fma_rn(r, p, 0.5);
    p = __fma_rn(r, p, 1.0);
    const double q = __dmul_rn(r, p);
    const double t = pow2[k & (BP_EXP_TABLE - 1)];
    const double y0 = __fma_rn(t, q, t);
    const int lo = __double2loint(y0);
    settled = (unsigned)((lo & 0x1fffffff) - 0x0ffffffc) > 8u;
    // Unsigned: an input outside the range (whose result the caller drops)
    // must not overflow a signed int.
    const unsigned hi = (unsigned)__double2hiint(y0) + ((unsigned)(k >> 6) << 20);
    return __double2float_rn(__hiloint2double((int)hi, lo));
}

}  // namespace exp_detail

// Copies the table into `tab` (shared memory, BP_EXP_TABLE doubles): every
// thread of the block calls it; a __syncthreads() must follow before any
// exp_cr reads `tab`.
__device__ __forceinline__ void exp_table_load(double* tab) {
    for (int i = threadIdx.x; i < BP_EXP_TABLE; i += blockDim.x) tab[i] = exp_detail::pow2_64[i];
}

// e^x correctly rounded to f32, for every f32 x; `pow2` is the table that
// exp_table_load copied (into shared memory).
__device__ __forceinline__ float exp_cr(float x, const double* pow2) {
    bool settled;
    const float y = exp_detail::exp_table_eval(x, pow2, settled);
    if (fabsf(x) < 87.0f && settled) return y;
    return exp_detail::exp_ref(x);
}

}  // namespace bp
