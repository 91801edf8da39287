//! The correctly rounded f32 exponential (SPEC section 2: transcendentals are
//! the exactly rounded f32 of the true value).
//!
//! e^x of an f32 x != 0 is transcendental (Lindemann), so it is never an f32
//! nor a midpoint between two: Ziv's strategy (evaluate with a rigorous error
//! bound, widen the precision until both ends of the interval round alike)
//! always terminates, and its answer is the correct rounding.

use crate::mpfr::{abs_up, correctly_rounded, Exact};
use crate::num::mul_up;
use rug::float::Round;
use rug::Float;

/// e^x rounded to the nearest f32 (ties cannot occur), subnormal results and
/// overflow to +inf included; exp(-inf) = +0.0, exp(NaN) = NaN.
pub fn exp_f32(x: f32) -> f32 {
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
        let err = mul_up(abs_up(&v), pow2_neg(prec));
        if let Some(r) = correctly_rounded(&Exact { v, err }) {
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

/// 2^-p as an f64, for p <= 1074 exactly (a subnormal past 1022); past that,
/// the smallest subnormal, which is larger (an upper bound stays one).
pub fn pow2_neg(p: u32) -> f64 {
    match p {
        0..=1022 => f64::from_bits((1023 - p as u64) << 52),
        1023..=1074 => f64::from_bits(1u64 << (1074 - p)),
        _ => f64::from_bits(1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_at_the_edges() {
        assert_eq!(exp_f32(0.0), 1.0);
        assert_eq!(exp_f32(-0.0), 1.0);
        assert_eq!(exp_f32(f32::INFINITY), f32::INFINITY);
        assert_eq!(exp_f32(f32::NEG_INFINITY).to_bits(), 0);
        assert!(exp_f32(f32::NAN).is_nan());
        assert_eq!(exp_f32(89.0), f32::INFINITY);
        assert_eq!(exp_f32(-200.0).to_bits(), 0);
        // e^-80 is a normal f32, e^-100 (3.7e-44) a subnormal; e^-103
        // (1.85e-45) rounds to the smallest subnormal 2^-149 (1.4e-45), and
        // e^-104 (6.8e-46), below half of it (2^-150 = 7.0e-46), to +0.0.
        assert!(exp_f32(-80.0).is_normal());
        let sub = exp_f32(-100.0);
        assert!(sub > 0.0 && !sub.is_normal());
        assert_eq!(exp_f32(-103.0).to_bits(), 1);
        assert_eq!(exp_f32(-104.0).to_bits(), 0);
        // Beyond MPFR's exponent range too (e^1e30 overflows MPFR itself).
        assert_eq!(exp_f32(1e30), f32::INFINITY);
        assert_eq!(exp_f32(-1e30).to_bits(), 0);
        assert_eq!(exp_f32(f32::MAX), f32::INFINITY);
        assert_eq!(exp_f32(f32::MIN).to_bits(), 0);
        // e^1 = 2.71828182845904523536...: nearest f32 is 0x402df854.
        assert_eq!(exp_f32(1.0).to_bits(), 0x402d_f854);
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
}
