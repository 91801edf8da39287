//! The correctly rounded f32 exponential
//! (docs/ops/README.md#the-correctly-rounded-exp: transcendentals are the
//! exactly rounded f32 of the true value), fast.
//!
//! # Two paths, one answer
//!
//! [`exp_f32`] first evaluates e^x in f64 with [`exp_eval`], whose error is
//! proven below to be at most [`EVAL_REL_ERR`] = 2^-51 relative. When the
//! interval of reals that the f64 result and that bound leave possible rounds
//! to a single f32 ([`settle`]), that f32 is the correct rounding of e^x (the
//! rounding is monotone and e^x lies in the interval). Otherwise e^x is too
//! close to a rounding boundary for this precision and [`exp_f32_mpfr`]
//! decides: MPFR at ever higher precision (Ziv's strategy). e^x of an f32
//! x != 0 is transcendental (Lindemann), so it is never an f32 nor a midpoint
//! between two and that loop always terminates. The fast path settles every
//! f32 input but 8 (a scan of all of them, `examples/expf_hard_cases.rs`);
//! it costs about 20 ns, MPFR alone about 2 us (`examples/expf_speed.rs`).
//!
//! The same evaluation, operation for operation, is the GPU's
//! (`kernels/expf.cuh`): IEEE double additions and multiplications rounded to
//! nearest, no contraction into FMA, so both compute the same double. The GPU
//! has no MPFR: it settles the inputs the fast path leaves undecided with a
//! table generated here (`examples/expf_hard_cases.rs`, docs/expf.md).
//!
//! # The evaluation and its error (x an f32 in [-110, 89])
//!
//! Notation: u = 2^-53, RN(z) the f64 nearest z; |RN(z) - z| <= u|z| and
//! <= u|RN(z)| (half an ulp of a normal double), and RN(z) = z when z is a
//! double. No value below is subnormal in f64.
//!
//! **1. Reduction.** t = RN(x * INV_LN2), k = t rounded to an integer (ties
//! to even, as CUDA's `rint`), so |k| <= K = 159 over the range.
//! r_hi = x - k*L1 is exact: L1 is ln2 truncated to a multiple of 2^-44 (44
//! significant bits), so k*L1 = (k m) 2^-44 with |k m| < 2^8 2^44 is a
//! double; if k != 0 then |t| > 1/2, so |x| > 1/4 and x (24 bits) is a
//! multiple of 2^-25, and x - k*L1 is a multiple of 2^-44 below 2^8 in
//! magnitude (52 bits): a double. If k = 0, r_hi = x.
//! Then r = RN(r_hi - RN(k*L2)) with L2 = RN(ln2 - L1). The true reduced
//! argument is r* = x - k ln2 = r_hi - k (ln2 - L1), so
//!
//! ```text
//! delta = |r - r*| <= u|r| + u|k L2| + K |L2 - (ln2 - L1)|
//! |r*| <= ln2 (1/2 + |t - x/ln2|),  |t - x/ln2| <= 110 |INV_LN2 - 1/ln2| + u|t|
//! ```
//!
//! whence |r| <= R = 0.3466 (checked at run time too: a larger r would go to
//! MPFR, never to a wrong answer).
//!
//! **2. Polynomial.** e^r = 1 + r S(r) with S(r) = sum_{j>=0} r^j / (j+1)!.
//! S is truncated after j = N = 12; the tail is at most R^13/14! / (1 - R/15)
//! (its terms shrink by at least R/15 each). The coefficients are
//! C[j] = RN(1/(j+1)!), and Horner evaluates s_N = C[N],
//! s_j = RN(C[j] + RN(r s_{j+1})). With sigma_j the exact Horner values of
//! the rounded coefficients and Sigma_j = sum_{i>=j} C[i] R^(i-j) >= |sigma_j|,
//! the error e_j >= |s_j - sigma_j| obeys, from e_N = 0 (the product's
//! rounding, then the sum's, each at most u times its exact result):
//!
//! ```text
//! e_j = R e_{j+1} + uR (Sigma_{j+1} + e_{j+1})
//!     + u (Sigma_j + R e_{j+1} + uR (Sigma_{j+1} + e_{j+1}))
//! ```
//!
//! Then q = RN(r s_0) with |q - r sigma_0| <= R e_0 + uR (Sigma_0 + e_0), and
//! p = RN(1 + q) with |p - (1 + q)| <= u p.
//!
//! **3. Scaling.** y = p 2^k is exact (a power of two; y >= 2^-160, normal).
//!
//! **Altogether**, |p - e^{r*}| <= A + u p, where
//!
//! ```text
//! A = R e_0 + uR (Sigma_0 + e_0)         (Horner and q)
//!   + R (sum_j |C[j] - 1/(j+1)!| R^j      (the rounded coefficients)
//!        + R^13/14! / (1 - R/15))         (the tail of S)
//!   + e^R (e^delta - 1)                   (the reduction)
//! |y - e^x| = 2^k |p - e^{r*}| <= (A / p_min + u) y,   p_min >= (e^-R - A) / (1 + u)
//! ```
//!
//! `the_error_bound_holds` computes this with every step rounded upward and
//! checks it against EVAL_REL_ERR = 2^-51: it comes to 3.14u = 2^-51.35.
//! `exp_eval_is_within_its_bound` checks it against MPFR on many inputs: the
//! largest error seen is 0.38 of 2^-51.
//!
//! Outside [-110, 89] nothing is evaluated: e^x > e^89 > 2^128 rounds to
//! +inf (89 > 128 ln2 = 88.72), e^x < e^-110 < 2^-150 rounds to +0.0
//! (110 > 150 ln2 = 103.97; 2^-150 is the midpoint between 0 and the
//! smallest subnormal 2^-149).
//!
//! # The platform's f64::exp
//!
//! None of the above uses it. Rust's `f64::exp` calls the platform libm's
//! `exp` (LLVM lowers `llvm.exp.f64` to a libm call); on x86_64 Linux that is
//! glibc's (2.36 here), whose `exp` since glibc 2.28 is ARM's
//! optimized-routines code, documented in its source at about 0.51 ulp;
//! glibc's manual ("Known Maximum Errors in Math Functions") lists measured
//! maxima per platform: a documented, tested bound, not a proof.
//! [`crate::num::Bounded::exp`] uses it, with a margin, only to bound the
//! propagation of an input's error, never for a result's bits.

use crate::mpfr::{correctly_rounded, Bound, Exact};
use rug::float::Round;
use rug::Float;

/// Past this, e^x >= e^89 > 2^128: +inf (see the module docs).
pub const OVERFLOW_X: f32 = 89.0;
/// Below this, e^x < e^-110 < 2^-150: +0.0.
pub const UNDERFLOW_X: f32 = -110.0;

/// RN(1/ln 2).
pub const INV_LN2: f64 = f64::from_bits(0x3ff7_1547_652b_82fe);
/// ln 2 truncated to a multiple of 2^-44 (44 significant bits): k*L1 exact
/// for |k| < 2^8.
pub const LN2_HI: f64 = f64::from_bits(0x3fe6_2e42_fefa_3800);
/// RN(ln 2 - LN2_HI).
pub const LN2_LO: f64 = f64::from_bits(0x3d2e_f357_93c7_6730);
/// Bound on |r| after the reduction (proven; checked at run time).
pub const R_MAX: f64 = 0.3466;
/// C[j] = RN(1/(j+1)!), j = 0..=12: the Taylor coefficients of
/// S(r) = (e^r - 1)/r.
pub const S_COEFFS: [f64; 13] = [
    f64::from_bits(0x3ff0_0000_0000_0000), // 1/1!
    f64::from_bits(0x3fe0_0000_0000_0000), // 1/2!
    f64::from_bits(0x3fc5_5555_5555_5555), // 1/3!
    f64::from_bits(0x3fa5_5555_5555_5555), // 1/4!
    f64::from_bits(0x3f81_1111_1111_1111), // 1/5!
    f64::from_bits(0x3f56_c16c_16c1_6c17), // 1/6!
    f64::from_bits(0x3f2a_01a0_1a01_a01a), // 1/7!
    f64::from_bits(0x3efa_01a0_1a01_a01a), // 1/8!
    f64::from_bits(0x3ec7_1de3_a556_c734), // 1/9!
    f64::from_bits(0x3e92_7e4f_b778_9f5c), // 1/10!
    f64::from_bits(0x3e5a_e645_67f5_44e4), // 1/11!
    f64::from_bits(0x3e21_eed8_eff8_d898), // 1/12!
    f64::from_bits(0x3de6_1246_13a8_6d09), // 1/13!
];
/// Proven bound on [`exp_eval`]'s relative error: |y - e^x| <= 2^-51 y.
pub const EVAL_REL_ERR: f64 = 1.0 / 2_251_799_813_685_248.0; // 2^-51
/// The half-width (relative) of the interval [`exp_f32_fast`] hands to
/// [`settle`]: 2^-50 covers EVAL_REL_ERR plus the two roundings of settle's
/// own ends (2u each way), with room to spare.
pub const SETTLE_REL: f64 = 1.0 / 1_125_899_906_842_624.0; // 2^-50

/// e^x rounded to the nearest f32 (ties cannot occur), subnormal results and
/// overflow to +inf included; exp(-inf) = +0.0, exp(NaN) = NaN.
pub fn exp_f32(x: f32) -> f32 {
    exp_f32_fast(x).unwrap_or_else(|| exp_f32_mpfr(x))
}

/// The fast path alone: `Some` of the correctly rounded e^x, or `None` where
/// the f64 evaluation cannot decide (e^x within about 2^-50 e^x of a rounding
/// boundary), which is where [`exp_f32`] asks MPFR.
pub fn exp_f32_fast(x: f32) -> Option<f32> {
    if x.is_nan() {
        return Some(f32::NAN);
    }
    if x > OVERFLOW_X {
        return Some(f32::INFINITY);
    }
    if x < UNDERFLOW_X {
        return Some(0.0);
    }
    settle(exp_eval(x)?, SETTLE_REL)
}

/// e^x in f64 for an f32 x in [UNDERFLOW_X, OVERFLOW_X], within
/// [`EVAL_REL_ERR`] relative of the true value (module docs); `None` outside
/// that range or if the reduced argument exceeds [`R_MAX`] (never, by the
/// proof: the check keeps a flaw in it from becoming a wrong answer).
pub fn exp_eval(x: f32) -> Option<f64> {
    if !(UNDERFLOW_X..=OVERFLOW_X).contains(&x) {
        return None;
    }
    let xd = x as f64; // exact
    let k = (xd * INV_LN2).round_ties_even(); // an integer in [-159, 128]
    let r_hi = xd - k * LN2_HI; // both operations exact (module docs, step 1)
    let r = r_hi - k * LN2_LO;
    if r.abs() > R_MAX {
        return None;
    }
    // Horner from the top; Rust never fuses a * b + c into an FMA.
    let mut s = S_COEFFS[S_COEFFS.len() - 1];
    for &c in S_COEFFS[..S_COEFFS.len() - 1].iter().rev() {
        s = c + r * s;
    }
    let p = 1.0 + r * s;
    // 2^k as a double: k + 1023 is in [864, 1151], a normal exponent.
    let scale = f64::from_bits(((k as i64 + 1023) as u64) << 52);
    Some(p * scale)
}

/// `Some(f)` when every real within (w - 2u) y of y (u = 2^-53) rounds to the
/// f32 f, for y > 0 normal and w a power of two with y w normal.
///
/// d = y w is exact; lo = RN(y - d) <= y - d + u y and hi = RN(y + d) >=
/// (y + d)(1 - u) >= y + d - 2u y, so [y - (w - 2u) y, y + (w - 2u) y] lies
/// in [lo, hi]. Rounding to the nearest f32 (`as f32`: ties to even,
/// subnormals kept, +inf from 2^128 - 2^103 up) is monotone, so when lo and
/// hi round alike, so does everything between them. When they do not, a
/// rounding boundary (a midpoint between neighbouring f32, 2^-150 below the
/// smallest subnormal, or 2^128 - 2^103 above the largest finite f32) lies
/// in [lo, hi], within (w + 2u) y of y.
pub fn settle(y: f64, w: f64) -> Option<f32> {
    let d = y * w;
    let (lo, hi) = ((y - d) as f32, (y + d) as f32);
    (lo.to_bits() == hi.to_bits()).then_some(lo)
}

/// e^x by MPFR alone (no fast path): the reference the fast path is tested
/// against, and its fallback.
pub fn exp_f32_mpfr(x: f32) -> f32 {
    if x.is_nan() {
        return f32::NAN;
    }
    if x == 0.0 {
        return 1.0;
    }
    if x.is_infinite() {
        return if x > 0.0 { f32::INFINITY } else { 0.0 };
    }
    // Far outside f32's range the answer is known, and MPFR's own exponent
    // range (2^(2^30)) would overflow before Ziv's loop could settle: e^128
    // > 2^184 rounds to +inf; e^-200 < 2^-288, below half the smallest
    // subnormal (2^-150), rounds to +0.0.
    if x > 128.0 {
        return f32::INFINITY;
    }
    if x < -200.0 {
        return 0.0;
    }
    let mut prec = 64u32;
    loop {
        // x has 24 significant bits: exact at precision 24. MPFR's exp is
        // correctly rounded to nearest, so |v - e^x| <= 2^-prec |v|.
        let (v, _) = Float::with_val_round(prec, Float::with_val(24, x).exp_ref(), Round::Nearest);
        // Far from the f32 range, settle at once (the interval test below
        // would come to the same answer, with its error bound held in a
        // [`Bound`] at any magnitude, only more slowly).
        if v.is_infinite() || v >= TWO_POW_129 {
            // e^x >= v (1 - 2^-prec) > 2^128: the f32 rounding is +inf.
            return f32::INFINITY;
        }
        if v.is_zero() || v <= TWO_POW_M151 {
            // e^x <= v (1 + 2^-prec) < 2^-150: the f32 rounding is +0.0.
            return 0.0;
        }
        let err = Bound::abs_up(&v).mul_up(Bound::pow2(-(prec as i64)));
        if let Some(r) = correctly_rounded(&Exact::new(v, err)) {
            return r;
        }
        prec *= 2;
    }
}

/// An upper bound of e^y as an f64: MPFR's exp, rounded upward to 53 bits
/// (y is exact at 53 bits), then upward to an f64 (subnormal or +inf
/// included). No libm accuracy is assumed, and a result below the f64 range
/// (or MPFR's) rounds up to 2^-1074, never down to 0.
pub fn exp_up(y: f64) -> f64 {
    if y.is_nan() {
        return f64::NAN;
    }
    let (e, _) = Float::with_val_round(53, Float::with_val(53, y).exp_ref(), Round::Up);
    e.to_f64_round(Round::Up)
}

/// e^x in decimal with `digits` significant digits (MPFR at 128 bits), for
/// reports.
pub fn exp_decimal(x: f32, digits: usize) -> String {
    Float::with_val(128, Float::with_val(24, x).exp_ref()).to_string_radix(10, Some(digits))
}

/// 2^129, beyond which every real rounds to +inf in f32.
const TWO_POW_129: f64 = 680_564_733_841_876_926_926_749_214_863_536_422_912.0;
/// 2^-151, below which every positive real rounds to +0.0 in f32.
const TWO_POW_M151: f64 = 1.0 / 2_854_495_385_411_919_762_116_571_938_898_990_272_765_493_248.0;

/// 2^-p as an f64, for p <= 1074 exactly (a subnormal past 1022); past that,
/// the smallest subnormal, which is larger (an upper bound stays one).
pub fn pow2_neg(p: u32) -> f64 {
    match p {
        0..=1022 => f64::from_bits((1023 - p as u64) << 52),
        1023..=1074 => f64::from_bits(1u64 << (1074 - p)),
        _ => f64::from_bits(1),
    }
}

/// The rounding boundaries around the f32 `r` = RN(v) of a real v > 0: v lies
/// in [lo, hi], and every real strictly between them rounds to r. `None` for
/// a side with no boundary (below +0.0, above +inf). Exact in f64: a midpoint
/// of two f32 has at most 25 significant bits.
pub fn rounding_interval(r: f32) -> (Option<f64>, Option<f64>) {
    let two_128 = 2f64.powi(128);
    if r.is_infinite() {
        // +inf starts at the midpoint of the largest f32 and 2^128.
        return (Some((f32::MAX as f64 + two_128) / 2.0), None);
    }
    let rd = r as f64;
    let below = (r != 0.0).then(|| (r.next_down().max(0.0) as f64 + rd) / 2.0);
    let next = if r == f32::MAX { two_128 } else { r.next_up() as f64 };
    (below, Some((rd + next) / 2.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::num::{add_up, mul_up};
    use std::sync::atomic::{AtomicU64, Ordering};

    const U: f64 = 1.0 / 9_007_199_254_740_992.0; // 2^-53

    #[test]
    fn the_fast_path_decides_below_the_underflow_threshold() {
        // e^x for x < -110 is below e^-110 = 2^(-110 / ln 2) ~ 2^-158.7, far
        // under half the least subnormal (2^-150): it rounds to +0, and the
        // fast path must say so itself, not hand the input to MPFR.
        for x in [f32::NEG_INFINITY, f32::MIN, -1000.0, -150.0, -110.5] {
            assert_eq!(exp_f32_fast(x).map(f32::to_bits), Some(0), "x = {x}");
        }
    }

    #[test]
    fn exp_at_the_edges() {
        for exp in [exp_f32, exp_f32_mpfr] {
            assert_eq!(exp(0.0), 1.0);
            assert_eq!(exp(-0.0), 1.0);
            assert_eq!(exp(f32::INFINITY), f32::INFINITY);
            assert_eq!(exp(f32::NEG_INFINITY).to_bits(), 0);
            assert!(exp(f32::NAN).is_nan());
            assert!(exp(f32::from_bits(0xffc0_0001)).is_nan());
            assert_eq!(exp(89.0), f32::INFINITY);
            assert_eq!(exp(1e30), f32::INFINITY);
            assert_eq!(exp(1000.0), f32::INFINITY); // beyond the f64 range
            assert_eq!(exp(-1000.0).to_bits(), 0);
            assert_eq!(exp(f32::MAX), f32::INFINITY);
            assert_eq!(exp(-f32::MAX).to_bits(), 0);
            assert_eq!(exp(-200.0).to_bits(), 0);
            // e^-80 is a normal f32, e^-100 (3.7e-44) a subnormal; e^-103
            // (1.85e-45) rounds to the smallest subnormal 2^-149 (1.4e-45), and
            // e^-104 (6.8e-46), below half of it (2^-150 = 7.0e-46), to +0.0.
            assert!(exp(-80.0).is_normal());
            let sub = exp(-100.0);
            assert!(sub > 0.0 && !sub.is_normal());
            assert_eq!(exp(-103.0).to_bits(), 1);
            assert_eq!(exp(-104.0).to_bits(), 0);
            // e^1 = 2.71828182845904523536...: nearest f32 is 0x402df854.
            assert_eq!(exp(1.0).to_bits(), 0x402d_f854);
            // ln(2^128 - 2^103) = 88.7228390520683...: the f32 just below
            // (88.72283172607421875) stays finite, the next one
            // (88.72283935546875) overflows.
            assert!(exp(f32::from_bits(0x42b1_7217)).is_finite());
            assert_eq!(exp(f32::from_bits(0x42b1_7218)), f32::INFINITY);
            // The smallest subnormal x: e^x = 1 + 2^-149 rounds to 1.
            assert_eq!(exp(f32::from_bits(1)), 1.0);
            assert_eq!(exp(-f32::from_bits(1)), 1.0);
        }
    }

    #[test]
    fn exp_up_is_an_upper_bound_and_never_zero() {
        for y in [-1e300, -800.0, -745.2, -700.0, -1.5, 0.0, 1e-300, 1.0, 88.7, 709.0, 710.0, 1e300] {
            let up = exp_up(y);
            let exact = Float::with_val(200, Float::with_val(53, y).exp_ref());
            assert!(up > 0.0, "e^{y}");
            assert!(exact <= up, "e^{y} = {exact} > {up}");
        }
        assert_eq!(exp_up(0.0), 1.0);
        assert_eq!(exp_up(-800.0), f64::from_bits(1));
        assert_eq!(exp_up(710.0), f64::INFINITY);
    }

    #[test]
    fn pow2_is_exact_through_the_subnormals() {
        assert_eq!(pow2_neg(0), 1.0);
        assert_eq!(pow2_neg(24), 1.0 / 16_777_216.0);
        assert_eq!(pow2_neg(1024), 2f64.powi(-1000) * 2f64.powi(-24));
        assert!(pow2_neg(1024) > 0.0);
        assert_eq!(pow2_neg(1074), f64::from_bits(1));
        assert_eq!(pow2_neg(5000), f64::from_bits(1));
    }

    /// The constants are what the proof says they are, checked with MPFR.
    #[test]
    fn the_constants_are_as_documented() {
        let p = 256;
        let ln2 = Float::with_val(p, rug::float::Constant::Log2);
        let scaled = Float::with_val(p, &ln2 << 44u32).floor();
        assert_eq!(LN2_HI, Float::with_val(p, scaled >> 44u32).to_f64());
        assert_eq!(LN2_HI.to_bits() & ((1 << 9) - 1), 0, "44 significant bits");
        assert_eq!(LN2_LO, Float::with_val(p, &ln2 - LN2_HI).to_f64());
        assert_eq!(INV_LN2, Float::with_val(p, 1 / &ln2).to_f64());
        let mut fact = Float::with_val(p, 1);
        for (j, &c) in S_COEFFS.iter().enumerate() {
            fact *= (j + 1) as u32;
            assert_eq!(c, Float::with_val(p, 1 / &fact).to_f64(), "C[{j}]");
        }
        assert_eq!(EVAL_REL_ERR, 2f64.powi(-51));
        assert_eq!(SETTLE_REL, 2f64.powi(-50));
        assert_eq!(TWO_POW_129, 2f64.powi(129));
        assert_eq!(TWO_POW_M151, 2f64.powi(-151));
    }

    /// The error analysis of the module docs, every step rounded upward (f64
    /// with one ulp up per operation; MPFR where a constant's own error is
    /// needed). Fails if the documented bound does not cover the proof.
    #[test]
    fn the_error_bound_holds() {
        let p = 256;
        let up = |f: Float| f.to_f64_round(Round::Up);
        let ln2 = Float::with_val(p, rug::float::Constant::Log2);
        let k_max = 159.0;
        // |t - x/ln2| <= 110 |INV_LN2 - 1/ln2| + u |t|, |t| <= 159.
        let inv_err = up(Float::with_val(p, Float::with_val(p, INV_LN2) - Float::with_val(p, 1 / &ln2)).abs());
        let t_err = add_up(mul_up(110.0, inv_err), mul_up(U, k_max));
        let ln2_up = up(ln2.clone());
        let r_star_max = mul_up(ln2_up, add_up(0.5, t_err));
        // delta <= u R + u K L2 + K |L2 - (ln2 - L1)|.
        let l2_err = up(Float::with_val(p, Float::with_val(p, &ln2 - LN2_HI) - LN2_LO).abs());
        let delta = add_up(add_up(mul_up(U, R_MAX), mul_up(U, mul_up(k_max, LN2_LO))), mul_up(k_max, l2_err));
        assert!(add_up(r_star_max, delta) <= R_MAX, "|r| may exceed R_MAX");
        let r = R_MAX;
        // Sigma_j and the Horner recurrence.
        let n = S_COEFFS.len() - 1;
        let mut sigma = vec![0.0; n + 2];
        for j in (0..=n).rev() {
            sigma[j] = add_up(S_COEFFS[j], mul_up(r, sigma[j + 1]));
        }
        let mut e = 0.0;
        for j in (0..n).rev() {
            let prod = add_up(mul_up(r, e), mul_up(mul_up(U, r), add_up(sigma[j + 1], e)));
            e = add_up(prod, mul_up(U, add_up(sigma[j], prod)));
        }
        let e_q = add_up(mul_up(r, e), mul_up(mul_up(U, r), add_up(sigma[0], e)));
        // Coefficient rounding and the tail of S at |r| <= R.
        let mut coeff = Float::with_val(p, 0);
        let mut fact = Float::with_val(p, 1);
        let rr = Float::with_val(p, r);
        let mut pow = Float::with_val(p, 1);
        for (j, &c) in S_COEFFS.iter().enumerate() {
            fact *= (j + 1) as u32;
            let diff = Float::with_val(p, Float::with_val(p, c) - Float::with_val(p, 1 / &fact)).abs();
            coeff += diff * &pow;
            pow *= &rr;
        }
        // Tail: sum_{j>n} R^j/(j+1)! <= R^(n+1)/(n+2)! / (1 - R/(n+3)).
        fact *= (n + 2) as u32;
        let tail = Float::with_val(p, &pow / &fact) / (1 - Float::with_val(p, r) / (n as u32 + 3));
        let s_err = up(Float::with_val(p, coeff + tail));
        let e_r_max = up(Float::with_val(p, rr.clone().exp()));
        let e_delta = up(Float::with_val(p, Float::with_val(p, delta).exp_m1()));
        let a = add_up(add_up(e_q, mul_up(r, s_err)), mul_up(e_r_max, e_delta));
        // p >= e^{r*} - A - u p, so p >= (e^-R - A) / (1 + u) > (e^-R - A) / (1 + 2^-52).
        let p_min =
            (((Float::with_val(p, -rr).exp().to_f64_round(Round::Down) - a).next_down()) / (1.0 + 2.0 * U)).next_down();
        let eps = add_up(a / p_min, U).next_up();
        println!("exp_eval relative error bound: {eps:e} = 2^{:.3} (u = 2^-53)", eps.log2());
        assert!(eps <= EVAL_REL_ERR, "the proven bound {eps:e} exceeds EVAL_REL_ERR");
        // settle(y, SETTLE_REL) certifies (SETTLE_REL - 2u) y around y.
        const { assert!(EVAL_REL_ERR <= SETTLE_REL - 2.0 * U) };
    }

    /// A deterministic generator of f32 bit patterns (SplitMix64).
    fn splitmix(state: &mut u64) -> u64 {
        *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Runs `f` over `inputs` on every core; returns the first failures.
    fn par_check(inputs: &[u32], f: impl Fn(f32) -> Option<String> + Sync) -> Vec<String> {
        let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2).max(1);
        let chunk = inputs.len().div_ceil(threads).max(1);
        let fails = std::sync::Mutex::new(Vec::new());
        std::thread::scope(|s| {
            for part in inputs.chunks(chunk) {
                let (f, fails) = (&f, &fails);
                s.spawn(move || {
                    for &b in part {
                        if let Some(msg) = f(f32::from_bits(b)) {
                            let mut v = fails.lock().unwrap();
                            if v.len() < 10 {
                                v.push(msg);
                            }
                        }
                    }
                });
            }
        });
        fails.into_inner().unwrap()
    }

    fn same(a: f32, b: f32) -> bool {
        crate::same_bits(a, b)
    }

    /// Every f32 within `radius` steps of `center` (same sign), both ways.
    fn window(center: f32, radius: u32) -> impl Iterator<Item = u32> {
        let c = center.to_bits();
        let sign = c & 0x8000_0000;
        let mag = c & 0x7fff_ffff;
        (mag.saturating_sub(radius)..=mag.saturating_add(radius).min(0x7f80_0000)).map(move |m| sign | m)
    }

    fn check_against_mpfr(inputs: &[u32]) {
        let fails = par_check(inputs, |x| {
            let (fast, exact) = (exp_f32(x), exp_f32_mpfr(x));
            (!same(fast, exact)).then(|| format!("x = {x:e} ({:#010x}): {fast:e} vs MPFR {exact:e}", x.to_bits()))
        });
        assert!(fails.is_empty(), "{fails:#?}");
    }

    /// Random bit patterns over the whole f32 range, and random values in
    /// the range where e^x is finite and nonzero (most random patterns are
    /// far outside it and settle trivially).
    #[test]
    fn fast_path_matches_mpfr_on_random_inputs() {
        let mut st = 0x6578_7066;
        let mut inputs: Vec<u32> = (0..400_000).map(|_| splitmix(&mut st) as u32).collect();
        let (lo, hi) = (-104.0f32, 88.8f32);
        inputs.extend(
            (0..1_200_000)
                .map(|_| {
                    let u = (splitmix(&mut st) >> 11) as f64 / (1u64 << 53) as f64;
                    (lo as f64 + u * (hi - lo) as f64) as f32
                })
                .map(f32::to_bits),
        );
        // Random magnitudes on a log scale: small |x| (e^x near 1) included.
        inputs.extend((0..400_000).map(|_| {
            let b = splitmix(&mut st);
            let exp = 90 + (b % 44) as u32; // 2^-37 .. 2^6
            ((b >> 32) as u32 & 0x8000_0000) | (exp << 23) | ((b >> 8) as u32 & 0x007f_ffff)
        }));
        check_against_mpfr(&inputs);
    }

    /// Every f32 in dense windows where the rounding is delicate: the
    /// overflow threshold, the normal/subnormal threshold of the result, the
    /// underflow to +0.0 and to the smallest subnormal, and around 0, where
    /// e^x rounds to 1 or to a neighbour of 1.
    #[test]
    fn fast_path_matches_mpfr_in_dense_windows() {
        let centers = [
            f32::from_bits(0x42b1_7218), // ln(2^128 - 2^103): overflow
            -87.336_54,                  // ln(2^-126): subnormal results start
            -103.972_08,                 // ln(2^-150): rounds to +0.0 below
            -103.279_3,                  // ln(3 * 2^-150): 1 or 2 times 2^-149
            2f32.powi(-24),              // e^x near 1 + 2^-24 (midpoint above 1)
            -(2f32.powi(-25)),           // e^x near 1 - 2^-25 (midpoint below 1)
            2f32.powi(-23),              // e^x near 1 + 2^-23
            -(2f32.powi(-24)),           // e^x near 1 - 2^-24
            std::f32::consts::LN_2,      // e^x near 2
            -std::f32::consts::LN_2,     // e^x near 1/2
        ];
        let mut inputs: Vec<u32> = centers.iter().flat_map(|&c| window(c, 1 << 16)).collect();
        // Around 0: the smallest magnitudes, both signs.
        inputs.extend(window(f32::from_bits(0), 1 << 16));
        inputs.extend(window(f32::from_bits(0x8000_0000), 1 << 16));
        check_against_mpfr(&inputs);
    }

    /// The proven bound, checked against MPFR: |y - e^x| <= 2^-51 y. Reports
    /// the largest error seen as a fraction of the bound.
    #[test]
    fn exp_eval_is_within_its_bound() {
        let mut st = 0x626f_756e;
        let inputs: Vec<u32> = (0..300_000)
            .map(|_| {
                let u = (splitmix(&mut st) >> 11) as f64 / (1u64 << 53) as f64;
                (-110.0 + u * 199.0) as f32
            })
            .map(f32::to_bits)
            .collect();
        let worst = AtomicU64::new(0);
        let fails = par_check(&inputs, |x| {
            let y = exp_eval(x)?;
            let exact = Float::with_val(128, Float::with_val(24, x).exp_ref());
            let err = Float::with_val(128, &exact - y).abs() / y;
            let ratio = (err / EVAL_REL_ERR).to_f64();
            worst.fetch_max(ratio.to_bits(), Ordering::Relaxed);
            (ratio > 1.0).then(|| format!("x = {x:e}: error {ratio} times the bound"))
        });
        println!("largest exp_eval error: {:.3} of the bound", f64::from_bits(worst.load(Ordering::Relaxed)));
        assert!(fails.is_empty(), "{fails:#?}");
    }

    /// The fast path settles all but a sliver of the inputs (what makes it
    /// fast: each fallback costs an MPFR evaluation).
    #[test]
    fn exp_eval_settles_nearly_everything() {
        let mut st = 0x7365_7474;
        let n = 2_000_000u32;
        let undecided = (0..n)
            .filter(|_| {
                let u = (splitmix(&mut st) >> 11) as f64 / (1u64 << 53) as f64;
                exp_f32_fast((-104.0 + u * 193.0) as f32).is_none()
            })
            .count();
        // The expected count is about n * 2^-24 = 0.1; the proof makes 2^-50
        // windows, so even 10 would say the bound or the test is broken.
        assert!(undecided <= 10, "{undecided} of {n} inputs fell back to MPFR");
    }

    #[test]
    fn settle_rounds_at_the_boundaries() {
        // Just below the overflow boundary 2^128 - 2^103 stays finite.
        let b = 2f64.powi(128) - 2f64.powi(103);
        assert_eq!((b.next_down()) as f32, f32::MAX);
        assert_eq!(b as f32, f32::INFINITY);
        assert_eq!(settle(b, SETTLE_REL), None);
        assert_eq!(settle(b * (1.0 + 2f64.powi(-40)), SETTLE_REL), Some(f32::INFINITY));
        assert_eq!(settle(b * (1.0 - 2f64.powi(-40)), SETTLE_REL), Some(f32::MAX));
        // 2^-150: below rounds to +0.0, above to the smallest subnormal.
        let h = 2f64.powi(-150);
        assert_eq!(settle(h, SETTLE_REL), None);
        assert_eq!(settle(h * (1.0 - 2f64.powi(-40)), SETTLE_REL).map(f32::to_bits), Some(0));
        assert_eq!(settle(h * (1.0 + 2f64.powi(-40)), SETTLE_REL).map(f32::to_bits), Some(1));
    }

    #[test]
    fn rounding_intervals_contain_their_preimages() {
        for r in [1.0f32, f32::from_bits(1), f32::MIN_POSITIVE, f32::MAX, 3.5, 0.0, f32::INFINITY] {
            let (lo, hi) = rounding_interval(r);
            if let Some(lo) = lo {
                assert_eq!(lo.next_up() as f32, r, "{r:e}");
                assert_ne!(lo.next_down() as f32, r, "{r:e}");
            }
            if let Some(hi) = hi {
                assert_eq!(hi.next_down() as f32, r, "{r:e}");
                assert_ne!(hi.next_up() as f32, r, "{r:e}");
            }
        }
        assert_eq!(rounding_interval(0.0).0, None);
        assert_eq!(rounding_interval(f32::INFINITY).1, None);
        assert_eq!(rounding_interval(1.0), (Some(1.0 - 2f64.powi(-25)), Some(1.0 + 2f64.powi(-24))));
    }
}
