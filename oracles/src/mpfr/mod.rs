//! The MPFR oracle: exact results (MPFR through rug), their correctly rounded
//! f32, and the comparison of a profile's result with them.
//!
//! # The exact value type and its precision
//!
//! [`Exact`] is an MPFR number at precision p plus a rigorous bound (an f64,
//! every operation on it rounded upward) on its distance from the real-number
//! value. Each MPFR operation is correctly rounded to nearest; when MPFR
//! reports it exact (the ternary value), it adds no error, otherwise at most
//! 2^-p |z|, which is 2^-p exactly ([`crate::expf::pow2_neg`]: an f64
//! subnormal at p = 1024, never a zero) times |z| rounded up. f64 bounds
//! below 2^-1074 round up to 2^-1074 (`mul_up`), never down to zero.
//!
//! MPFR's exponent range (about 2^+-2^30) holds every sum, product and
//! quotient of f32 values the ops compute; only `exp` of an argument beyond
//! about 7e8 in magnitude leaves it. An inexact zero is such an underflow
//! (round to nearest never turns a non-zero value in range into zero): its
//! error is below MPFR's smallest positive number, far below 2^-1074, which
//! is what it is given. An inexact infinity is an overflow: the real value is
//! finite and no finite bound holds (+inf).
//!
//! Non-finite values: the ops follow IEEE where a value is infinite or NaN
//! (SPEC: NaN propagates; a row whose denominator is exactly zero gives
//! infinities and NaN). An infinite or NaN input is exactly itself, bound
//! 0, and so is an IEEE result that the operands determine
//! ([`Exact::ieee`]). An infinite bound says nothing is known: a quotient by
//! a value whose bound reaches zero, say, is +-inf or NaN in MPFR while the
//! real quotient may be finite.
//!
//! p starts at 128: every product of two f32 (48 bits) is then exact, every
//! sum of f32 inputs within a row is exact unless its terms span more than
//! 104 binades, and each quotient's relative error is 2^-128, some 2^100
//! below the f32 rounding errors the profile bounds are made of. "Enough
//! precision that the final rounding is exact" is then checked, not assumed
//! (Ziv's strategy): an output's f32 is taken as correctly rounded when both
//! ends of [value - bound, value + bound] round to the same f32; where one
//! does not, the whole computation is repeated at twice the precision, up to
//! [`MAX_PREC`]. Two kinds of outputs never settle that way, because their
//! exact value sits on a rounding boundary while MPFR's inexact quotients
//! keep a bound around it: an exact zero (between -0.0 and +0.0), settled
//! by [`correctly_rounded`] as zero when its whole interval rounds to zeros;
//! and an exact f32 midpoint, which one exact rational evaluation
//! ([`rational`], run by [`reference`] at [`MAX_PREC`]) settles. What
//! neither settles is reported as undetermined, never guessed.

pub mod rational;
pub mod reference;
pub mod router;
pub mod seqwise_loss;

use crate::expf::{exp_up, pow2_neg};
use crate::num::{add_up, mul_up, Num};
use rug::float::Round;
use rug::Float;
use std::cell::Cell;
use std::cmp::Ordering;

/// Starting precision of the exact oracle (bits); see the module docs.
pub const START_PREC: u32 = 128;
/// Ziv's loop stops doubling here.
pub const MAX_PREC: u32 = 1024;

thread_local! {
    static PREC: Cell<u32> = const { Cell::new(START_PREC) };
}

/// Runs `f` with [`Exact`] values at precision `prec` on this thread. The
/// previous precision comes back when `f` returns or unwinds (a guard), so a
/// panic caught further up never leaves this thread at another precision.
pub fn with_precision<T>(prec: u32, f: impl FnOnce() -> T) -> T {
    struct Restore(u32);
    impl Drop for Restore {
        fn drop(&mut self) {
            PREC.with(|p| p.set(self.0));
        }
    }
    let _restore = Restore(PREC.with(|p| p.replace(prec)));
    f()
}

fn prec() -> u32 {
    PREC.with(|p| p.get())
}

/// An MPFR value and a rigorous bound on its distance from the exact real.
#[derive(Clone, Debug)]
pub struct Exact {
    pub v: Float,
    pub err: f64,
}

impl Exact {
    /// The result `v` of one MPFR operation (`dir`: its ternary value), given
    /// the error `propagated` from the operands' bounds.
    fn from_op(v: Float, dir: Ordering, propagated: f64) -> Self {
        let err = if !propagated.is_finite() {
            // Also a NaN from a bound's arithmetic: nothing is known.
            f64::INFINITY
        } else if !v.is_finite() {
            // MPFR's NaN is always exact; an inexact infinity is an overflow
            // (see the module docs).
            if dir == Ordering::Equal {
                propagated
            } else {
                f64::INFINITY
            }
        } else if dir == Ordering::Equal {
            propagated
        } else if v.is_zero() {
            // An underflow: |exact| < MPFR's smallest positive < 2^-1074.
            add_up(propagated, pow2_neg(1074))
        } else {
            add_up(propagated, mul_up(ulp_scale(), abs_up(&v)))
        };
        Exact { v, err }
    }

    /// Whether an operation on `x` and `y` with MPFR result `v` meets an
    /// infinity or a NaN: then [`Exact::ieee`] decides, not the bound
    /// formulas (which hold for finite values only).
    fn meets_nonfinite(x: &Exact, y: &Exact, v: &Float) -> bool {
        !x.v.is_finite() || !y.v.is_finite() || !v.is_finite()
    }

    /// IEEE's result where an operation meets an infinity or a NaN (an
    /// operand, or a quotient by an exact zero). It depends only on which
    /// operands are NaN, infinite or zero, and on their signs: so it is
    /// determined (bound 0) when a determined NaN is among the operands (NaN
    /// op anything is NaN), or when every operand is determined and each
    /// inexact finite one is certainly non-zero (|v| > err: its sign and its
    /// being non-zero are the real value's). An exact zero's sign is MPFR's,
    /// which follows IEEE on the same exact operations. Otherwise nothing is
    /// known (+inf): a quotient by an inexact zero, an inexact value that
    /// may be zero times an infinity, or an MPFR overflow (an inexact
    /// infinity from finite operands).
    fn ieee(x: &Exact, y: &Exact, v: Float, dir: Ordering) -> Self {
        let determined_nan = |a: &Exact| a.v.is_nan() && a.err.is_finite();
        let certain = |a: &Exact| {
            a.err == 0.0 || (a.err.is_finite() && (!a.v.is_finite() || a.v.as_abs().to_f64_round(Round::Down) > a.err))
        };
        let determined = determined_nan(x) || determined_nan(y) || (dir == Ordering::Equal && certain(x) && certain(y));
        Exact { v, err: if determined { 0.0 } else { f64::INFINITY } }
    }
}

/// 2^-p: the relative error of one MPFR rounding to nearest at precision p,
/// exact for every p up to 1074 (2^-1024 is a subnormal f64, not 0).
fn ulp_scale() -> f64 {
    pow2_neg(prec())
}

/// |v| as an f64, rounded upward.
pub fn abs_up(v: &Float) -> f64 {
    v.as_abs().to_f64_round(Round::Up)
}

impl Num for Exact {
    /// Exact, infinities and NaN included (each is exactly itself; see the
    /// module docs).
    fn input(x: f32) -> Self {
        Exact { v: Float::with_val(prec(), x), err: 0.0 }
    }
    fn add(&self, y: &Self) -> Self {
        let (v, dir) = Float::with_val_round(prec(), &self.v + &y.v, Round::Nearest);
        if Exact::meets_nonfinite(self, y, &v) {
            return Exact::ieee(self, y, v, dir);
        }
        Exact::from_op(v, dir, add_up(self.err, y.err))
    }
    fn mul(&self, y: &Self) -> Self {
        let (v, dir) = Float::with_val_round(prec(), &self.v * &y.v, Round::Nearest);
        if Exact::meets_nonfinite(self, y, &v) {
            return Exact::ieee(self, y, v, dir);
        }
        let (ax, ay) = (abs_up(&self.v), abs_up(&y.v));
        let prop = add_up(add_up(mul_up(ax, y.err), mul_up(ay, self.err)), mul_up(self.err, y.err));
        Exact::from_op(v, dir, prop)
    }
    fn div(&self, y: &Self) -> Self {
        let (v, dir) = Float::with_val_round(prec(), &self.v / &y.v, Round::Nearest);
        if Exact::meets_nonfinite(self, y, &v) {
            return Exact::ieee(self, y, v, dir);
        }
        if y.err == 0.0 && self.err == 0.0 {
            return Exact::from_op(v, dir, 0.0);
        }
        // |y^| rounded down: a lower bound of the denominator's magnitude.
        let ay = y.v.as_abs().to_f64_round(Round::Down);
        if ay <= y.err {
            return Exact { v, err: f64::INFINITY };
        }
        // Same propagation rule as the f32 bound (SPEC section 2), with 2^-p
        // in place of u. |x^/y^| <= (1 + 2^-p)|z^| is formed as
        // |z^| + 2^-p |z^|, both rounded up: 1 + 2^-p itself is 1.0 in f64
        // for p > 52.
        let az = abs_up(&v);
        let z_exact = add_up(az, mul_up(ulp_scale(), az));
        let num = add_up(self.err, mul_up(z_exact, y.err));
        let prop = crate::num::div_up(num, crate::num::sub_down(ay, y.err));
        Exact::from_op(v, dir, prop)
    }
    /// Exact at the operand's own precision (a sign change never rounds).
    fn neg(&self) -> Self {
        Exact { v: -self.v.clone(), err: self.err }
    }
    fn abs(&self) -> Self {
        Exact { v: self.v.clone().abs(), err: self.err }
    }
    /// MPFR's exp is correctly rounded (no error where it reports exact:
    /// e^0, e^-inf, e^inf); the input's error propagates as in
    /// [`crate::num::Bounded`]'s exp: exp(v + e_v) e_v, with exp(v + e_v)
    /// bounded above by MPFR ([`exp_up`]). A determined NaN or infinity
    /// gives a determined NaN, inf or 0.
    fn exp(&self) -> Self {
        let (v, dir) = Float::with_val_round(prec(), self.v.exp_ref(), Round::Nearest);
        let prop = if self.err == 0.0 || (!self.v.is_finite() && self.err.is_finite()) {
            0.0
        } else if !self.err.is_finite() {
            f64::INFINITY
        } else {
            mul_up(exp_up(add_up(self.v.to_f64_round(Round::Up), self.err)), self.err)
        };
        if self.v.is_finite() && v.is_zero() {
            return Exact { v, err: add_up(prop, f64::from_bits(1)) };
        }
        Exact::from_op(v, dir, prop)
    }
    fn cmp_f32(&self, c: f32) -> Option<Ordering> {
        self.v.partial_cmp(&c)
    }
    fn cmp_num(&self, y: &Self) -> Option<Ordering> {
        self.v.partial_cmp(&y.v)
    }
    fn to_f32(&self) -> f32 {
        round_to_f32(&self.v)
    }
}

/// The f32 nearest to `v` (ties to even), subnormals and overflow included:
/// one rounding, never through an intermediate f64.
pub fn round_to_f32(v: &Float) -> f32 {
    if v.is_nan() {
        return f32::NAN;
    }
    if v.is_infinite() || v.is_zero() {
        // Exact conversions (the sign is kept).
        return v.to_f32();
    }
    let tiny = Float::with_val(32, f32::MIN_POSITIVE);
    if v.as_abs().lt(&tiny) {
        // Below 2^-126 the f32 grid is the integers times 2^-149.
        let scaled = Float::with_val(v.prec() + 8, v << 149u32).round_even();
        let n = scaled.to_f64(); // an integer of at most 2^23: exact
        return (n * pow2_neg(149)) as f32; // exact: on the f32 grid
    }
    let (r, _) = Float::with_val_round(24, v, Round::Nearest);
    // r has 24 bits, so to_f64 is exact; `as f32` is then exact, or overflows
    // to inf exactly when RNE overflows (r >= 2^128).
    r.to_f64() as f32
}

/// Whether `x` pins down one correctly rounded f32: `Some(f32)` when every
/// real within `err` of `v` rounds to it (rounding is monotone, so both ends
/// of [v - err, v + err] rounding alike suffices), or, see below, to a zero.
/// `None` where it does not, or where the bound is infinite (nothing is
/// known, a NaN included: see the module docs).
///
/// Zeros: where every value of the interval rounds to a zero but the two
/// ends to zeros of opposite signs, the interval holds 0 and tiny values of
/// both signs. The rounding is then settled as zero, and `+0.0` is
/// returned: the sign of an exact zero is not the real value's but the
/// profile's (x - x is +0.0, -0.0 + -0.0 is -0.0), and [`judge`] compares
/// magnitudes. Without this, an exact zero reached through inexact
/// quotients (a/d - a (s/d)/d, rounded differently on each side) never
/// settles: MPFR leaves a residue of about 2^-p, and its interval straddles
/// zero at every precision. When both ends round to the same zero, the
/// interval lies on one side of 0 and that zero's sign is the correct one.
pub fn correctly_rounded(x: &Exact) -> Option<f32> {
    if !x.err.is_finite() {
        return None;
    }
    if x.err == 0.0 || !x.v.is_finite() {
        return Some(round_to_f32(&x.v));
    }
    if let Some(r) = settled_in_f64(x) {
        return Some(r);
    }
    // x.v - x.err and x.v + x.err, widened outward: the interval only grows.
    let p = x.v.prec() + 64;
    let lo = Float::with_val_round(p, &x.v - x.err, Round::Down).0;
    let hi = Float::with_val_round(p, &x.v + x.err, Round::Up).0;
    let (a, b) = (round_to_f32(&lo), round_to_f32(&hi));
    if a.to_bits() == b.to_bits() {
        Some(a)
    } else if a == 0.0 && b == 0.0 {
        Some(0.0)
    } else {
        None
    }
}

/// The fast path of [`correctly_rounded`], without MPFR allocations: r is the
/// f32 nearest to v's f64 approximation; if v lies strictly inside r's
/// rounding interval (half an ulp of r on each side) with room for both the
/// f64 conversion error (2^-52 |v|) and `err`, every value within `err` of v
/// rounds to r. Otherwise (near a boundary, zero, subnormal, overflow) `None`,
/// and the exact path decides.
fn settled_in_f64(x: &Exact) -> Option<f32> {
    let v = x.v.to_f64();
    let r = v as f32;
    if !r.is_normal() || !v.is_normal() || !r.next_up().is_finite() {
        return None;
    }
    // Half an ulp of r (the smaller one below a power of two), exact in f64.
    let below = (r as f64 - r.next_down() as f64).abs();
    let above = (r.next_up() as f64 - r as f64).abs();
    let half = below.min(above) / 2.0;
    // |r - v| is exact (Sterbenz), next_up keeps it an upper bound anyway;
    // 2^-52 |v| bounds the f64 conversion's error (2^-53 would do).
    let slack = add_up(add_up((r as f64 - v).abs().next_up(), mul_up(v.abs(), pow2_neg(52))), x.err);
    (slack < half).then_some(r)
}

/// How a profile's output compares with the exact one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Verdict {
    /// |computed - exact| <= bound (+ the exact value's own bound);
    /// `ratio` = |computed - exact| / bound (0 when both are 0).
    Within { ratio: f64 },
    /// Outside the bound: a wrong formula (or a wrong bound).
    Outside { ratio: f64 },
    /// The profile's bound is infinite (overflow, a NaN, a denominator whose
    /// bound reaches zero), or the exact value's is: counted, not judged.
    Unbounded,
}

/// Judges `computed` (with the profile's running bound `bound`) against the
/// exact value `exact`. NaN is within only where the exact value is NaN too.
///
/// Rigour: if |computed - real| <= bound, then |computed - v| <=
/// bound + exact.err, so "outside" is never raised on a correct result.
/// That needs only a rigorous `exact.err`, not a settled rounding: an output
/// left undetermined, or settled by the rational evaluation
/// ([`reference`]), is judged the same way. Judging against the rational
/// value itself (bound 0) would only tighten the test, by at most exact.err
/// (it lies within exact.err of v), some 2^-1024 relative: not worth a
/// second value type in the verdict. The sign of a zero is not judged:
/// |computed - v| sees magnitudes.
pub fn judge(computed: f32, bound: f64, exact: &Exact) -> Verdict {
    if !exact.err.is_finite() {
        // Nothing is known of the real value (see the module docs).
        return Verdict::Unbounded;
    }
    if exact.v.is_nan() || computed.is_nan() {
        return if exact.v.is_nan() && computed.is_nan() {
            Verdict::Within { ratio: 0.0 }
        } else if bound.is_infinite() {
            Verdict::Unbounded
        } else {
            Verdict::Outside { ratio: f64::INFINITY }
        };
    }
    if computed.is_infinite() || exact.v.is_infinite() {
        let same = exact.v.is_infinite() && computed == exact.v.to_f32();
        return if same {
            Verdict::Within { ratio: 0.0 }
        } else if bound.is_infinite() {
            Verdict::Unbounded
        } else {
            Verdict::Outside { ratio: f64::INFINITY }
        };
    }
    if bound.is_infinite() {
        return Verdict::Unbounded;
    }
    // |computed - v| rounded toward zero at both steps (MPFR, then f64), so
    // rounding never raises an alarm.
    let diff = Float::with_val_round(exact.v.prec() + 32, &exact.v - computed, Round::Zero).0;
    let diff = diff.to_f64_round(Round::Zero).abs();
    let allowed = add_up(bound, exact.err);
    let ratio = if diff == 0.0 {
        0.0
    } else if bound == 0.0 {
        f64::INFINITY
    } else {
        diff / bound
    };
    if diff <= allowed {
        Verdict::Within { ratio: ratio.min(1.0) }
    } else {
        Verdict::Outside { ratio }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_to_f32_is_correct_at_the_edges() {
        let v = |x: f64| Float::with_val(200, x);
        assert_eq!(round_to_f32(&v(1.0)), 1.0);
        // Halfway between the two smallest subnormals rounds to even (2^-148).
        let half = Float::with_val(200, 3.0) * Float::with_val(200, 2f64.powi(-150));
        assert_eq!(round_to_f32(&half), f32::from_bits(2));
        // Just above f32::MAX's rounding boundary overflows, just below does not.
        let max = f32::MAX as f64;
        let boundary = max + 2f64.powi(103);
        assert_eq!(round_to_f32(&v(boundary)), f32::INFINITY);
        assert_eq!(round_to_f32(&v(boundary - 2f64.powi(80))), f32::MAX);
        // A value one part in 2^60 above a midpoint rounds up (no double rounding).
        let mid = Float::with_val(200, 1.0) + Float::with_val(200, 2f64.powi(-24));
        let above = mid.clone() + Float::with_val(200, 2f64.powi(-84));
        assert_eq!(round_to_f32(&mid), 1.0);
        assert_eq!(round_to_f32(&above), 1.0 + f32::EPSILON);
    }

    #[test]
    fn the_fast_rounding_path_agrees_with_the_exact_one() {
        // Values at, near and between f32 rounding boundaries, with bounds.
        let mut seen_fast = 0;
        for i in 0..2000u32 {
            let base = f32::from_bits(0x3f80_0000 + i * 977) as f64;
            let ulp = (f32::from_bits(0x3f80_0000 + i * 977 + 1) as f64) - base;
            for frac in [0.0, 0.25, 0.5 - 1e-9, 0.5, 0.5 + 1e-9, 0.75] {
                let v = Float::with_val(200, base) + Float::with_val(200, ulp * frac);
                for err in [1e-30, ulp * 1e-6, ulp * 0.3] {
                    let x = Exact { v: v.clone(), err };
                    if let Some(fast) = settled_in_f64(&x) {
                        seen_fast += 1;
                        let p = v.prec() + 64;
                        let lo = round_to_f32(&Float::with_val_round(p, &v - err, Round::Down).0);
                        let hi = round_to_f32(&Float::with_val_round(p, &v + err, Round::Up).0);
                        assert_eq!((fast, fast), (lo, hi), "v = {v}, err = {err}");
                    }
                }
            }
        }
        assert!(seen_fast > 10_000);
    }

    #[test]
    fn exact_ops_track_exactness() {
        let a = Exact::input(1.0);
        let b = Exact::input(3.0);
        assert_eq!(a.add(&b).err, 0.0);
        let q = a.div(&b);
        assert!(q.err > 0.0 && q.err < 1e-35);
        assert_eq!(correctly_rounded(&q), Some(1.0f32 / 3.0));
    }

    #[test]
    fn an_inexact_operation_at_max_prec_has_a_nonzero_bound() {
        // 1/3 is not dyadic: MPFR rounds it at every precision, so the
        // bound must be positive and at least the actual error, which is
        // computed here in exact rational arithmetic.
        let q = with_precision(MAX_PREC, || Exact::input(1.0).div(&Exact::input(3.0)));
        assert_eq!(q.v.prec(), MAX_PREC);
        let actual = (q.v.to_rational().unwrap() - rug::Rational::from((1, 3))).abs();
        assert!(actual > 0);
        assert!(q.err > 0.0, "a rounded quotient at {MAX_PREC} bits claims an error bound of {}", q.err);
        assert!(rug::Rational::from_f64(q.err).unwrap() >= actual);
    }

    #[test]
    fn an_interval_holding_only_zeros_settles() {
        // [2^-200 - 2^-199, 2^-200 + 2^-199]: every value has magnitude
        // below 2^-150 (half the smallest subnormal), so each rounds to a
        // zero, of either sign: the rounding is settled, its sign is not.
        let x = Exact { v: Float::with_val(128, Float::i_exp(1, -200)), err: crate::expf::pow2_neg(199) };
        assert_eq!(correctly_rounded(&x).map(f32::abs), Some(0.0));
        // [0, 2^-150]: 2^-150 is the midpoint between +0.0 and 2^-149 and
        // rounds to even, +0.0.
        let y = Exact { v: Float::with_val(128, Float::i_exp(1, -151)), err: crate::expf::pow2_neg(151) };
        assert_eq!(correctly_rounded(&y).map(f32::to_bits), Some(0));
        // Past the midpoint, the upper end rounds to 2^-149: not settled.
        let wider = crate::num::add_up(crate::expf::pow2_neg(151), crate::expf::pow2_neg(160));
        let z = Exact { v: Float::with_val(128, Float::i_exp(1, -151)), err: wider };
        assert_eq!(correctly_rounded(&z), None);
    }

    #[test]
    fn judge_flags_a_wrong_value() {
        let exact = Exact::input(1.0).div(&Exact::input(3.0));
        let right = 1.0f32 / 3.0;
        let bound = crate::num::U_F32 * right as f64;
        assert!(matches!(judge(right, bound, &exact), Verdict::Within { .. }));
        let wrong = f32::from_bits(right.to_bits() + 2);
        assert!(matches!(judge(wrong, bound, &exact), Verdict::Outside { .. }));
    }
}
