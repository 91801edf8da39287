//! The MPFR oracle: exact results (MPFR through rug), their correctly rounded
//! f32, and the comparison of a profile's result with them.
//!
//! # The exact value type and its precision
//!
//! [`Exact`] is an MPFR number at precision p plus a rigorous bound (an f64,
//! every operation on it rounded upward) on its distance from the real-number
//! value. Each MPFR operation is correctly rounded to nearest; when MPFR
//! reports it exact (the ternary value), it adds no error, otherwise at most
//! 2^-p |z|. MPFR's exponent range (2^-(2^30) to 2^(2^30)) is unbounded for
//! products and quotients of f32-sized values, so there is no overflow and no
//! underflow term; only exp can leave it (see [`Exact`]'s `exp`).
//!
//! p starts at 128: every product of two f32 (48 bits) is then exact, every
//! sum of f32 inputs within a row is exact unless its terms span more than
//! 104 binades, and each quotient's relative error is 2^-128, some 2^100
//! below the f32 rounding errors the profile bounds are made of. "Enough
//! precision that the final rounding is exact" is then checked, not assumed
//! (Ziv's strategy): an output's f32 is taken as correctly rounded when both
//! ends of [value - bound, value + bound] round to the same f32; where one
//! does not, the whole computation is repeated at twice the precision, up to
//! [`MAX_PREC`]. An output left undetermined there (an exact f32 midpoint
//! reached through inexact quotients) is reported as such, never guessed.

pub mod reference;
pub mod router;
pub mod seqwise_loss;

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
    fn from_op(v: Float, dir: Ordering, propagated: f64) -> Self {
        let err = if !v.is_finite() || !propagated.is_finite() {
            if v.is_finite() {
                f64::INFINITY
            } else {
                propagated
            }
        } else if dir == Ordering::Equal {
            propagated
        } else {
            add_up(propagated, mul_up(ulp_scale(), abs_up(&v)))
        };
        Exact { v, err }
    }
}

/// 2^-p: the relative error of one MPFR rounding to nearest at precision p.
fn ulp_scale() -> f64 {
    2f64.powi(-(prec() as i32))
}

/// |v| as an f64, rounded upward.
pub fn abs_up(v: &Float) -> f64 {
    v.to_f64_round(Round::Up).abs().max(v.to_f64_round(Round::Down).abs())
}

impl Num for Exact {
    fn input(x: f32) -> Self {
        let v = Float::with_val(prec(), x);
        let err = if x.is_finite() { 0.0 } else { f64::INFINITY };
        Exact { v, err }
    }
    fn add(&self, y: &Self) -> Self {
        let (v, dir) = Float::with_val_round(prec(), &self.v + &y.v, Round::Nearest);
        Exact::from_op(v, dir, add_up(self.err, y.err))
    }
    fn mul(&self, y: &Self) -> Self {
        let (v, dir) = Float::with_val_round(prec(), &self.v * &y.v, Round::Nearest);
        let (ax, ay) = (abs_up(&self.v), abs_up(&y.v));
        let prop = add_up(add_up(mul_up(ax, y.err), mul_up(ay, self.err)), mul_up(self.err, y.err));
        Exact::from_op(v, dir, prop)
    }
    fn div(&self, y: &Self) -> Self {
        let (v, dir) = Float::with_val_round(prec(), &self.v / &y.v, Round::Nearest);
        if y.err == 0.0 && self.err == 0.0 {
            return Exact::from_op(v, dir, 0.0);
        }
        let ay = y.v.to_f64_round(Round::Down).abs().min(y.v.to_f64_round(Round::Up).abs());
        if ay.is_nan() || ay <= y.err {
            return Exact { v, err: f64::INFINITY };
        }
        // Same propagation rule as the f32 bound (SPEC section 2), with 2^-p
        // in place of u.
        let az = abs_up(&v);
        let num = add_up(self.err, mul_up(mul_up(1.0 + ulp_scale(), az), y.err));
        let prop = crate::num::div_up(num, crate::num::sub_down(ay, y.err));
        Exact::from_op(v, dir, prop)
    }
    fn neg(&self) -> Self {
        Exact { v: Float::with_val(prec(), -&self.v), err: self.err }
    }
    fn abs(&self) -> Self {
        Exact { v: Float::with_val(prec(), &*self.v.as_abs()), err: self.err }
    }
    /// MPFR's exp is correctly rounded (no error where it reports exact:
    /// e^0, e^-inf, e^inf); the input's error propagates as in
    /// [`crate::num::Bounded`]'s exp: exp(v + e_v) e_v, evaluated in f64 and
    /// scaled up by 1 + 2^-50.
    ///
    /// exp is the one operation on f32-sized inputs that can leave MPFR's
    /// exponent range (|v| > 2^30 ln 2, about 7.4e8: the router's sigmoid of
    /// a huge logit). Then MPFR returns +inf or +0 for a finite positive
    /// value: an overflow has no finite bound; an underflow's value lies
    /// below 2^-(2^30), so the smallest positive f64 bounds its error.
    fn exp(&self) -> Self {
        let (v, dir) = Float::with_val_round(prec(), self.v.exp_ref(), Round::Nearest);
        if self.v.is_finite() && v.is_infinite() {
            return Exact { v, err: f64::INFINITY };
        }
        let prop = if self.err == 0.0 {
            0.0
        } else if !self.err.is_finite() {
            f64::INFINITY
        } else {
            let top = add_up(self.v.to_f64_round(Round::Up), self.err).exp();
            mul_up(mul_up(top, 1.0 + 2f64.powi(-50)), self.err)
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
        return (n * 2f64.powi(-149)) as f32; // exact: on the f32 grid
    }
    let (r, _) = Float::with_val_round(24, v, Round::Nearest);
    // r has 24 bits, so to_f64 is exact; `as f32` is then exact, or overflows
    // to inf exactly when RNE overflows (r >= 2^128).
    r.to_f64() as f32
}

/// Whether `x` and `[v - err, v + err]` pin down one correctly rounded f32:
/// `Some(f32)` when both ends round alike.
pub fn correctly_rounded(x: &Exact) -> Option<f32> {
    if x.err == 0.0 || x.v.is_nan() {
        return Some(round_to_f32(&x.v));
    }
    if !x.err.is_finite() {
        return None;
    }
    if let Some(r) = settled_in_f64(x) {
        return Some(r);
    }
    let p = x.v.prec() + 64;
    let lo = Float::with_val_round(p, &x.v - x.err, Round::Down).0;
    let hi = Float::with_val_round(p, &x.v + x.err, Round::Up).0;
    let (a, b) = (round_to_f32(&lo), round_to_f32(&hi));
    if a == 0.0 && b == 0.0 && x.v.is_zero() {
        // An exact zero reached through inexact terms (x - x): its value is
        // settled, the sign of the zero is the profile's business.
        return Some(round_to_f32(&x.v));
    }
    (a.to_bits() == b.to_bits()).then_some(a)
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
    let slack = add_up(add_up((r as f64 - v).abs().next_up(), mul_up(v.abs(), 2f64.powi(-52))), x.err);
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
    /// bound reaches zero): counted, not judged.
    Unbounded,
}

/// Judges `computed` (with the profile's running bound `bound`) against the
/// exact value `exact`. NaN is within only where the exact value is NaN too.
pub fn judge(computed: f32, bound: f64, exact: &Exact) -> Verdict {
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
    // |computed - exact| rounded downward, so rounding never raises an alarm.
    let diff = Float::with_val_round(exact.v.prec() + 32, &exact.v - computed, Round::Nearest).0;
    let diff = diff.to_f64_round(Round::Down).abs().min(diff.to_f64_round(Round::Up).abs());
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
    fn judge_flags_a_wrong_value() {
        let exact = Exact::input(1.0).div(&Exact::input(3.0));
        let right = 1.0f32 / 3.0;
        let bound = crate::num::U_F32 * right as f64;
        assert!(matches!(judge(right, bound, &exact), Verdict::Within { .. }));
        let wrong = f32::from_bits(right.to_bits() + 2);
        assert!(matches!(judge(wrong, bound, &exact), Verdict::Outside { .. }));
    }
}
