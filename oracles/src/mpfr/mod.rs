//! The MPFR oracle: exact results (MPFR through rug), their correctly rounded
//! f32, and the comparison of a profile's result with them.
//!
//! # The exact value type and its precision
//!
//! [`Exact`] is an MPFR number at precision p plus a rigorous bound on its
//! distance from the real-number value, a [`Bound`]: a non-negative real
//! kept as an f64 significand and an i64 binary exponent, every operation on
//! it rounded upward ([`bound`] says why that and not an f64 or an MPFR
//! number). Each MPFR operation is correctly rounded to nearest; when MPFR
//! reports it exact (the ternary value), it adds no error, otherwise at most
//! 2^-p |z| (2^-p and |z| rounded up, both exact or upward in a `Bound`).
//!
//! The bound lives in the same range as the values. An f64 bound did not:
//! e^10000 (about 2^14427, from a logit of -10000) is an ordinary MPFR
//! number, but its error, 2^-128 of it, was +inf in f64, and so was every
//! bound computed from it (the sigmoid 1 / (1 + e^10000), about 2^-14427, its
//! weights and gradients): Ziv's loop climbed to [`MAX_PREC`] and reported
//! outputs undetermined whose rounding (+0.0) is obvious. A `Bound` reaches
//! 2^(+-2^60), beyond MPFR's own exponent range (2^(+-2^30)) both ways, and
//! an error below 2^-1074 is kept as it is, not raised to 2^-1074.
//!
//! MPFR's exponent range holds every sum, product and quotient of f32 values
//! the ops compute; only `exp` of an argument beyond about 7.4e8 in
//! magnitude leaves it (e^f32::MAX is about 2^(4.9e38)). An inexact zero is
//! an underflow (round to nearest never turns a non-zero value in range into
//! zero): its error is below MPFR's smallest positive number, which is what
//! it is given. An inexact infinity is an overflow: no finite bound holds
//! (+inf), except for `exp`, whose overflow is kept as what it is, a finite
//! real beyond every MPFR number ([`Exact::beyond`]: its sign and a lower
//! bound of its magnitude). The sigmoid's 1 + e^x and 1 / (1 + e^x) of such
//! a value are then a real beyond MPFR's range again and a tiny real with a
//! tiny bound: s for a logit of -f32::MAX settles at +0.0 like the others.
//!
//! Non-finite values: the ops follow IEEE where a value is infinite or NaN
//! (docs/ops/*.md: NaN propagates; a row whose denominator is exactly zero
//! gives infinities and NaN). An infinite or NaN input is exactly itself, bound
//! 0, and so is an IEEE result that the operands determine ([`Exact::ieee`]).
//! An infinite bound says nothing is known: a quotient by a value whose bound
//! reaches zero, say, is +-inf or NaN in MPFR while the real quotient may be
//! finite.
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
//!
//! An output the op itself rounds to bf16 (`shared_expert`'s y) is held
//! already rounded ([`Num::round_bf16`]): exactly (bound 0) once the exact
//! value's bound lies inside one bf16 rounding interval, and until then as
//! one candidate with a bound reaching the other, so that Ziv's loop goes on
//! exactly as long as the bf16 rounding is open.

pub mod bound;
pub mod histogram;
pub mod interval;
pub mod moe_combine;
pub mod rational;
pub mod reference;
pub mod router;
pub mod seqwise_loss;
pub mod shared_expert;

pub use bound::Bound;

use crate::bf16::Rounding;
use crate::expf::pow2_neg;
use crate::num::{add_up, mul_up, Num};
use rug::float::{Constant, Round, Special};
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
    /// A bound on |v - exact| (+inf: nothing is known).
    pub err: Bound,
    /// `Some(l)`: the exact value is a finite real beyond every finite MPFR
    /// number, of `v`'s sign (`v` is +-inf, as MPFR cannot hold it), with
    /// magnitude at least `l`, itself at least 2^emax (MPFR's largest
    /// exponent: every finite MPFR number is below 2^emax). Made by an `exp`
    /// that overflows MPFR (see the module docs). `err` is then +inf, so
    /// whatever reads only `v` and `err` sees "nothing known", which is
    /// always rigorous; the operations that use it are the sum with a
    /// bounded finite value (a real beyond MPFR's range again), the quotient
    /// of a bounded finite value by it (a tiny real with a tiny bound), a
    /// sign change, [`correctly_rounded`] and [`judge`] (a real of that
    /// magnitude rounds to +-inf in f32). Everything else gives +inf.
    pub beyond: Option<Bound>,
}

impl Exact {
    /// `v` with the bound `err` (a value in MPFR's range).
    pub fn new(v: Float, err: Bound) -> Self {
        Exact { v, err, beyond: None }
    }

    /// `v`, of which nothing is known.
    fn unknown(v: Float) -> Self {
        Exact::new(v, Bound::INFINITY)
    }

    /// A finite MPFR value with a finite bound.
    fn is_bounded(&self) -> bool {
        self.beyond.is_none() && self.v.is_finite() && self.err.is_finite()
    }

    /// The result `v` of one MPFR operation (`dir`: its ternary value), given
    /// the error `propagated` from the operands' bounds.
    fn from_op(v: Float, dir: Ordering, propagated: Bound) -> Self {
        let err = if !propagated.is_finite() {
            Bound::INFINITY
        } else if !v.is_finite() {
            // MPFR's NaN is always exact; an inexact infinity is an overflow
            // (see the module docs).
            if dir == Ordering::Equal {
                propagated
            } else {
                Bound::INFINITY
            }
        } else if dir == Ordering::Equal {
            propagated
        } else if v.is_zero() {
            // An underflow: |exact| < MPFR's smallest positive number.
            propagated.add_up(mpfr_tiny())
        } else {
            propagated.add_up(ulp_scale().mul_up(Bound::abs_up(&v)))
        };
        Exact::new(v, err)
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
    /// may be zero times an infinity, an MPFR overflow (an inexact infinity
    /// from finite operands), or a real beyond MPFR's range (its bound is
    /// +inf: it is no IEEE infinity) where the caller has no rule for it.
    fn ieee(x: &Exact, y: &Exact, v: Float, dir: Ordering) -> Self {
        let determined_nan = |a: &Exact| a.v.is_nan() && a.err.is_finite();
        let certain =
            |a: &Exact| a.err.is_zero() || (a.err.is_finite() && (!a.v.is_finite() || Bound::abs_down(&a.v) > a.err));
        let determined = determined_nan(x) || determined_nan(y) || (dir == Ordering::Equal && certain(x) && certain(y));
        Exact::new(v, if determined { Bound::ZERO } else { Bound::INFINITY })
    }

    /// x + y where one of them is beyond MPFR's range ([`Exact::beyond`]):
    /// with the other one bounded finite, |x + y| >= l - (|o| + e_o), of the
    /// far one's sign, beyond MPFR's range again while that stays >= 2^emax.
    fn add_beyond(x: &Exact, y: &Exact) -> Self {
        let (v, dir) = Float::with_val_round(prec(), &x.v + &y.v, Round::Nearest);
        let (far, l, other) = match (x.beyond, y.beyond) {
            (Some(l), None) => (x, l, y),
            (None, Some(l)) => (y, l, x),
            _ => return Exact::ieee(x, y, v, dir),
        };
        if !other.is_bounded() {
            return Exact::ieee(x, y, v, dir);
        }
        let rest = l.sub_down(Bound::abs_up(&other.v).add_up(other.err));
        if rest < beyond_mpfr() {
            return Exact::ieee(x, y, v, dir);
        }
        Exact { v: far.v.clone(), err: Bound::INFINITY, beyond: Some(rest) }
    }

    /// x / y where one of them is beyond MPFR's range: for x bounded finite
    /// and y beyond (|y| >= l), |x / y| <= (|x^| + e_x) / l, around MPFR's
    /// x^ / +-inf = +-0. Otherwise nothing is known (or IEEE's NaN).
    fn div_beyond(x: &Exact, y: &Exact) -> Self {
        let (v, dir) = Float::with_val_round(prec(), &x.v / &y.v, Round::Nearest);
        match y.beyond {
            Some(l) if x.is_bounded() => Exact::new(v, Bound::abs_up(&x.v).add_up(x.err).div_up(l)),
            _ => Exact::ieee(x, y, v, dir),
        }
    }

    /// e^r for a real r >= v - err whose exponential overflowed MPFR:
    /// e^r >= 2^((v - err) / ln 2) >= 2^k, k an integer below that, rounded
    /// down at every step. Beyond MPFR's range when k >= emax, else (an
    /// argument whose bound reaches below the overflow threshold) nothing is
    /// known.
    fn overflowed_exp(v: &Float, err: Bound) -> Self {
        let inf = Float::with_val(prec(), Special::Infinity);
        let lo = Float::with_val_round(64, v - &err.to_float(), Round::Down).0;
        if lo.partial_cmp(&0) != Some(Ordering::Greater) {
            return Exact::unknown(inf);
        }
        let ln2_up = Float::with_val_round(64, Constant::Log2, Round::Up).0;
        let q = Float::with_val_round(64, &lo / &ln2_up, Round::Down).0;
        // An f64 rounded down, then its floor; `as` saturates at i64::MAX.
        let k = q.to_f64_round(Round::Down).floor() as i64;
        if k < rug::float::exp_max() as i64 {
            return Exact::unknown(inf);
        }
        Exact { v: inf, err: Bound::INFINITY, beyond: Some(Bound::pow2_down(k)) }
    }
}

/// 2^-p: the relative error of one MPFR rounding to nearest at precision p.
fn ulp_scale() -> Bound {
    Bound::pow2(-(prec() as i64))
}

/// MPFR's smallest positive number, 2^(emin - 1): a bound on a real that
/// MPFR rounded to zero.
fn mpfr_tiny() -> Bound {
    Bound::pow2(rug::float::exp_min() as i64 - 1)
}

/// 2^emax, above every finite MPFR number: the least magnitude of a value
/// beyond MPFR's range ([`Exact::beyond`]).
fn beyond_mpfr() -> Bound {
    Bound::pow2(rug::float::exp_max() as i64)
}

/// An upper bound of e^(v + err), by MPFR rounded upward (+inf where that
/// overflows).
fn exp_up(v: &Float, err: Bound) -> Bound {
    let arg = Float::with_val_round(53, v + &err.to_float(), Round::Up).0;
    Bound::abs_up(&Float::with_val_round(53, arg.exp_ref(), Round::Up).0)
}

impl Num for Exact {
    /// Exact, infinities and NaN included (each is exactly itself; see the
    /// module docs).
    fn input(x: f32) -> Self {
        Exact::new(Float::with_val(prec(), x), Bound::ZERO)
    }
    fn add(&self, y: &Self) -> Self {
        if self.beyond.is_some() || y.beyond.is_some() {
            return Exact::add_beyond(self, y);
        }
        let (v, dir) = Float::with_val_round(prec(), &self.v + &y.v, Round::Nearest);
        if Exact::meets_nonfinite(self, y, &v) {
            return Exact::ieee(self, y, v, dir);
        }
        Exact::from_op(v, dir, self.err.add_up(y.err))
    }
    fn mul(&self, y: &Self) -> Self {
        // A real beyond MPFR's range is +-inf here, bound +inf: `ieee` gives
        // nothing known (or a determined NaN).
        let (v, dir) = Float::with_val_round(prec(), &self.v * &y.v, Round::Nearest);
        if Exact::meets_nonfinite(self, y, &v) {
            return Exact::ieee(self, y, v, dir);
        }
        let (ax, ay) = (Bound::abs_up(&self.v), Bound::abs_up(&y.v));
        let prop = ax.mul_up(y.err).add_up(ay.mul_up(self.err)).add_up(self.err.mul_up(y.err));
        Exact::from_op(v, dir, prop)
    }
    fn div(&self, y: &Self) -> Self {
        if self.beyond.is_some() || y.beyond.is_some() {
            return Exact::div_beyond(self, y);
        }
        let (v, dir) = Float::with_val_round(prec(), &self.v / &y.v, Round::Nearest);
        if Exact::meets_nonfinite(self, y, &v) {
            return Exact::ieee(self, y, v, dir);
        }
        if y.err.is_zero() && self.err.is_zero() {
            return Exact::from_op(v, dir, Bound::ZERO);
        }
        // |y^| rounded down: a lower bound of the denominator's magnitude.
        let ay = Bound::abs_down(&y.v);
        if ay <= y.err {
            return Exact::unknown(v);
        }
        // Same propagation rule as the f32 bound
        // (docs/ops/README.md#the-accuracy-bound), with 2^-p in place of u:
        // |x^/y^| <= (1 + 2^-p)|z^|, formed as |z^| + 2^-p |z^|, rounded up.
        let az = Bound::abs_up(&v);
        let z_exact = az.add_up(ulp_scale().mul_up(az));
        let num = self.err.add_up(z_exact.mul_up(y.err));
        let prop = num.div_up(ay.sub_down(y.err));
        Exact::from_op(v, dir, prop)
    }
    /// Exact at the operand's own precision (a sign change never rounds).
    fn neg(&self) -> Self {
        Exact { v: -self.v.clone(), err: self.err, beyond: self.beyond }
    }
    fn abs(&self) -> Self {
        Exact { v: self.v.clone().abs(), err: self.err, beyond: self.beyond }
    }
    /// MPFR's exp is correctly rounded (no error where it reports exact:
    /// e^0, e^-inf, e^inf); the input's error propagates as in
    /// [`crate::num::Bounded`]'s exp: exp(v + e_v) e_v, with exp(v + e_v)
    /// bounded above by MPFR (rounded upward). A determined NaN or infinity
    /// gives a determined NaN, inf or 0. An underflow is a real below MPFR's
    /// smallest positive number; an overflow of a finite argument, a real
    /// beyond MPFR's range ([`Exact::beyond`]); the exp of a real beyond
    /// MPFR's range is left unknown.
    fn exp(&self) -> Self {
        let (v, dir) = Float::with_val_round(prec(), self.v.exp_ref(), Round::Nearest);
        if self.beyond.is_some() {
            return Exact::unknown(v);
        }
        let prop = if self.err.is_zero() || (!self.v.is_finite() && self.err.is_finite()) {
            Bound::ZERO
        } else if !self.err.is_finite() {
            Bound::INFINITY
        } else {
            exp_up(&self.v, self.err).mul_up(self.err)
        };
        if self.v.is_finite() && v.is_zero() {
            // |e^r - 0| <= |e^r - e^v| + e^v <= prop + MPFR's smallest positive.
            return Exact::new(v, prop.add_up(mpfr_tiny()));
        }
        if self.v.is_finite() && v.is_infinite() && self.err.is_finite() {
            return Exact::overflowed_exp(&self.v, self.err);
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
    /// The exact value's rounding, where its bound pins it down: both ends
    /// of [v - err, v + err] round alike (or both to zeros: then +0.0, the
    /// sign of an exact zero being no real's; see [`correctly_rounded`]).
    /// Otherwise undetermined at this precision (`decision: None`), and the
    /// value is v's rounding with a bound reaching the ends' roundings, so
    /// that an output computed from it stays unsettled and Ziv's loop
    /// doubles the precision.
    fn round_bf16(&self) -> Rounding<Self> {
        let settled = |d: f32| Rounding { decision: Some(d), certain: true, value: Exact::input(d) };
        if self.beyond.is_some() {
            // A real beyond MPFR's range (above 2^emax > 2^128) rounds to +-inf.
            return settled(round_to_bf16(&self.v));
        }
        let r = round_to_bf16(&self.v);
        if !self.err.is_finite() {
            return Rounding { decision: None, certain: false, value: Exact::unknown(Float::with_val(prec(), r)) };
        }
        if self.err.is_zero() || !self.v.is_finite() {
            return settled(r);
        }
        let p = self.v.prec() + 64;
        let err = self.err.to_float();
        let lo = round_to_bf16(&Float::with_val_round(p, &self.v - &err, Round::Down).0);
        let hi = round_to_bf16(&Float::with_val_round(p, &self.v + &err, Round::Up).0);
        if lo.to_bits() == hi.to_bits() {
            return settled(lo);
        }
        if lo == 0.0 && hi == 0.0 {
            return settled(0.0);
        }
        // |end - r| exactly (f32 values span at most 277 bits), then upward.
        let dist = |a: f32| Bound::abs_up(&Float::with_val(300, Float::with_val(24, a) - r));
        let (a, b) = (dist(lo), dist(hi));
        let spread = if a > b { a } else { b };
        Rounding { decision: None, certain: false, value: Exact::new(Float::with_val(prec(), r), spread) }
    }
}

/// The bf16 nearest to `v` (ties to even), as the f32 it is exactly:
/// subnormals (down to 2^-133) kept, +-inf at and beyond the midpoint above
/// the largest bf16, one rounding (never through an intermediate f32).
pub fn round_to_bf16(v: &Float) -> f32 {
    if v.is_nan() {
        return f32::NAN;
    }
    if v.is_infinite() || v.is_zero() {
        return v.to_f32();
    }
    let tiny = Float::with_val(32, f32::MIN_POSITIVE);
    if v.as_abs().lt(&tiny) {
        // Below 2^-126 the bf16 grid is the integers times 2^-133.
        let scaled = Float::with_val(v.prec() + 8, v << 133u32).round_even();
        let n = scaled.to_f64(); // an integer of at most 2^7 (its sign kept): exact
        return (n * pow2_neg(133)) as f32; // exact: on the bf16 grid
    }
    let (r, _) = Float::with_val_round(8, v, Round::Nearest);
    // r has 8 bits, so to_f64 is exact; `as f32` is then exact, or gives inf
    // exactly when the rounding reached 2^128 (RNE's overflow).
    r.to_f64() as f32
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
/// known, a NaN included: see the module docs). A real beyond MPFR's range
/// ([`Exact::beyond`], above 2^emax > 2^128) rounds to +-inf.
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
    if x.beyond.is_some() {
        return Some(round_to_f32(&x.v));
    }
    if !x.err.is_finite() {
        return None;
    }
    if x.err.is_zero() || !x.v.is_finite() {
        return Some(round_to_f32(&x.v));
    }
    if let Some(r) = settled_in_f64(x) {
        return Some(r);
    }
    // x.v - x.err and x.v + x.err (err as an MPFR number at least as large),
    // widened outward: the interval only grows.
    let p = x.v.prec() + 64;
    let err = x.err.to_float();
    let lo = Float::with_val_round(p, &x.v - &err, Round::Down).0;
    let hi = Float::with_val_round(p, &x.v + &err, Round::Up).0;
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
/// f64 conversion error (2^-52 |v|) and `err` (as an f64 rounded up: +inf
/// beyond f64's range), every value within `err` of v rounds to r. Otherwise
/// (near a boundary, zero, subnormal, overflow) `None`, and the exact path
/// decides.
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
    let slack = add_up(add_up((r as f64 - v).abs().next_up(), mul_up(v.abs(), pow2_neg(52))), x.err.to_f64_up());
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
/// bound + exact.err, so "outside" is never raised on a correct result:
/// |computed - v| is rounded toward zero, bound + exact.err upward, and the
/// two are compared exactly as [`Bound`]s, whatever their magnitudes (an
/// exact.err below 2^-1074 or above f64's range included). A real beyond
/// MPFR's range is judged as an infinity: it rounds to one, and no finite
/// f32 is within an f64 bound of it.
/// That needs only a rigorous `exact.err`, not a settled rounding: an output
/// left undetermined, or settled by the rational evaluation
/// ([`reference`]), is judged the same way. Judging against the rational
/// value itself (bound 0) would only tighten the test, by at most exact.err
/// (it lies within exact.err of v), some 2^-1024 relative: not worth a
/// second value type in the verdict. The sign of a zero is not judged:
/// |computed - v| sees magnitudes.
pub fn judge(computed: f32, bound: f64, exact: &Exact) -> Verdict {
    if exact.beyond.is_none() && !exact.err.is_finite() {
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
    // |computed - v| rounded toward zero at both steps (MPFR, then to 53
    // bits), bound + exact.err upward, so rounding never raises an alarm.
    let diff = Float::with_val_round(exact.v.prec() + 32, &exact.v - computed, Round::Zero).0;
    let within = Bound::abs_down(&diff) <= Bound::from_f64(bound).add_up(exact.err);
    // The ratio is only reported.
    let diff = diff.to_f64_round(Round::Zero).abs();
    let ratio = if diff == 0.0 {
        0.0
    } else if bound == 0.0 {
        f64::INFINITY
    } else {
        diff / bound
    };
    if within {
        Verdict::Within { ratio: ratio.min(1.0) }
    } else {
        Verdict::Outside { ratio }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The verdict's ratio is |computed - exact| / bound: 0 only for a
    /// computed value equal to the exact one (1 + 2^-23 against 1 with a
    /// bound of 2^-22 is half the bound; 1 against 1 is 0).
    #[test]
    fn the_ratio_is_the_distance_over_the_bound() {
        let one = Exact::input(1.0);
        assert_eq!(judge(1.0 + 2f32.powi(-23), 2f64.powi(-22), &one), Verdict::Within { ratio: 0.5 });
        assert_eq!(judge(1.0, 2f64.powi(-22), &one), Verdict::Within { ratio: 0.0 });
        assert_eq!(judge(1.0 + 2f32.powi(-21), 2f64.powi(-22), &one), Verdict::Outside { ratio: 2.0 });
    }

    #[test]
    fn an_exact_values_f32_is_its_correct_rounding() {
        // Num::to_f32 on Exact: an input comes back as itself (signed zeros,
        // a subnormal, the largest finite), a sum rounds to nearest.
        for x in [1.0f32, -0.0, 0.0, -2.5, f32::from_bits(1), f32::MAX, 1e-12] {
            assert_eq!(Exact::input(x).to_f32().to_bits(), x.to_bits(), "{x:e}");
        }
        let third = with_precision(200, || Exact::input(1.0).div(&Exact::input(3.0)));
        assert_eq!(third.to_f32(), 1.0f32 / 3.0, "1/3 rounded once");
        let just_above_one = with_precision(200, || Exact::input(1.0).add(&Exact::input(2f32.powi(-30))));
        assert_eq!(just_above_one.to_f32(), 1.0);
    }

    #[test]
    fn an_inexact_value_of_certain_sign_times_an_infinity_is_a_determined_infinity() {
        with_precision(200, || {
            // 1/3 is rounded (a bound > 0) but far from 0: its sign is the
            // exact value's, so IEEE's +inf * (1/3) = +inf holds in every
            // evaluation: determined, bound 0.
            let third = Exact::input(1.0).div(&Exact::input(3.0));
            assert!(!third.err.is_zero());
            let p = Exact::input(f32::INFINITY).mul(&third);
            assert!(p.v.is_infinite() && p.v.is_sign_positive(), "{:?}", p.v);
            assert!(p.err.is_zero(), "{:?}", p.err);
            // 1 with a bound of exactly 1 may be 0, and +inf x 0 is NaN:
            // nothing is known.
            let maybe_zero = Exact::new(Float::with_val(200, 1.0), Bound::from_f64(1.0));
            let p = Exact::input(f32::INFINITY).mul(&maybe_zero);
            assert!(!p.err.is_finite(), "{:?}", p.err);
        });
    }

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
    fn bf16_rounding_of_mpfr_values_agrees_with_the_f64_one() {
        // Every f64 value is exact in MPFR at 53 bits: both roundings must
        // give the same bits, across the whole range (subnormal bf16,
        // overflow, midpoints and their neighbours).
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for i in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = match i % 4 {
                // Random bits with the exponent near f32's range.
                0 | 1 => f64::from_bits((x & 0x800f_ffff_ffff_ffff) | ((((x >> 52) % 300) + 1023 - 150) << 52)),
                // bf16 midpoints (a 9th significant bit set), exactly.
                2 => f32::from_bits(((x as u32) & 0xffff_0000) | 0x8000) as f64,
                // A midpoint one f64 ulp off, either way.
                _ => {
                    let m = f32::from_bits(((x as u32) & 0xffff_0000) | 0x8000) as f64;
                    if x & 1 == 0 {
                        m.next_up()
                    } else {
                        m.next_down()
                    }
                }
            };
            if v.is_nan() {
                continue;
            }
            let got = round_to_bf16(&Float::with_val(53, v));
            assert_eq!(got.to_bits(), crate::bf16::round_f64(v).to_bits(), "{v:e}");
        }
    }

    #[test]
    fn an_exact_value_on_a_bf16_boundary_is_undetermined_until_its_bound_shrinks() {
        // 1 + 2^-8 is the midpoint between 1 and 1 + 2^-7: with no bound it
        // rounds to even (1), settled; with a bound around it, the two ends
        // round apart: undetermined, its value 1 with a bound reaching
        // 1 + 2^-7 (so what follows stays unsettled and Ziv goes on).
        let mid = Float::with_val(128, 1) + Float::with_val(128, Float::i_exp(1, -8));
        let exact = Exact::new(mid.clone(), Bound::ZERO).round_bf16();
        assert_eq!((exact.decision, exact.certain), (Some(1.0), true));
        let r = Exact::new(mid, Bound::pow2(-100)).round_bf16();
        assert_eq!((r.decision, r.certain), (None, false));
        assert_eq!(r.value.v, 1.0);
        assert!(r.value.err >= Bound::pow2(-7) && r.value.err < Bound::pow2(-6));
        // Around zero, every value rounds to a zero: settled as zero.
        let z = Exact::new(Float::with_val(128, Float::i_exp(1, -200)), Bound::pow2(-199)).round_bf16();
        assert_eq!((z.decision.map(f32::abs), z.certain), (Some(0.0), true));
        // Nothing known: no decision.
        let u = Exact::unknown(Float::with_val(128, 1)).round_bf16();
        assert_eq!((u.decision, u.certain), (None, false));
        assert!(!u.value.err.is_finite());
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
                    let x = Exact::new(v.clone(), Bound::from_f64(err));
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
        assert!(a.add(&b).err.is_zero());
        let q = a.div(&b);
        assert!(q.err > Bound::ZERO && q.err < Bound::from_f64(1e-35));
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
        assert!(q.err > Bound::ZERO, "a rounded quotient at {MAX_PREC} bits claims an error bound of {:?}", q.err);
        assert!(q.err.to_float() >= actual);
    }

    #[test]
    fn an_interval_holding_only_zeros_settles() {
        // [2^-200 - 2^-199, 2^-200 + 2^-199]: every value has magnitude
        // below 2^-150 (half the smallest subnormal), so each rounds to a
        // zero, of either sign: the rounding is settled, its sign is not.
        let x = Exact::new(Float::with_val(128, Float::i_exp(1, -200)), Bound::pow2(-199));
        assert_eq!(correctly_rounded(&x).map(f32::abs), Some(0.0));
        // [0, 2^-150]: 2^-150 is the midpoint between +0.0 and 2^-149 and
        // rounds to even, +0.0.
        let y = Exact::new(Float::with_val(128, Float::i_exp(1, -151)), Bound::pow2(-151));
        assert_eq!(correctly_rounded(&y).map(f32::to_bits), Some(0));
        // Past the midpoint, the upper end rounds to 2^-149: not settled.
        let wider = Bound::pow2(-151).add_up(Bound::pow2(-160));
        let z = Exact::new(Float::with_val(128, Float::i_exp(1, -151)), wider);
        assert_eq!(correctly_rounded(&z), None);
    }

    /// s = 1 / (1 + e^-x), as the router computes it (docs/ops/router.md#the-sigmoid).
    fn sigmoid(x: f32) -> Exact {
        let one = Exact::input(1.0);
        one.div(&one.add(&Exact::input(x).neg().exp()))
    }

    /// e^y at 4000 bits, independently of [`Exact`] (y well inside MPFR's range).
    fn exp_at_4000(y: f32) -> Float {
        Float::with_val(4000, Float::with_val(24, y).exp_ref())
    }

    #[test]
    fn the_sigmoid_of_a_very_negative_logit_has_a_tiny_bound_and_rounds_to_plus_zero() {
        with_precision(START_PREC, || {
            // Within MPFR's range: s = 1 / (1 + e^-x) < e^x, about 2^-14427 for
            // x = -10000 (10000 / ln 2 = 14426.95) and 2^-288.5 for x = -200.
            // The bound must hold (checked against a 4000-bit evaluation, whose
            // own error, some 2^-4000 relative, is far below the margin) and be
            // as tight as the precision says: a few 2^-128 of s.
            for (x, log2_s) in [(-10000.0f32, -14426.95), (-200.0, -288.54), (-1000.0, -1442.70)] {
                let s = sigmoid(x);
                assert!(s.err.is_finite() && s.err > Bound::ZERO, "x = {x}: {:?}", s.err);
                let one = Float::with_val(4000, 1);
                let exact = Float::with_val(4000, &one / Float::with_val(4000, &one + exp_at_4000(-x)));
                let dist = Float::with_val(4000, &s.v - &exact).abs();
                assert!(dist <= s.err.to_float(), "x = {x}: |v - s| = {dist:e} > {:?}", s.err);
                assert!((s.err.log2() - (log2_s - 125.0)).abs() < 3.0, "x = {x}: {:?}", s.err);
                assert_eq!(correctly_rounded(&s).map(f32::to_bits), Some(0), "x = {x}");
            }
            // Beyond MPFR's range (e^-x overflows it for -x > 7.44e8, emax ln 2):
            // s < e^x < 2^-emax, and MPFR's smallest positive number is
            // 2^(emin - 1), so the bound is some 2^-emax: finite and tiny.
            let emax = rug::float::exp_max() as i64;
            for x in [-f32::MAX, -1e30, -7.5e8] {
                let s = sigmoid(x);
                assert!(s.v.is_zero() && s.beyond.is_none(), "x = {x}: {s:?}");
                assert!(s.err > Bound::ZERO, "x = {x}: s > 0, so v = 0 needs a positive bound");
                assert!(s.err <= Bound::pow2(1 - emax), "x = {x}: {:?}", s.err);
                assert_eq!(correctly_rounded(&s).map(f32::to_bits), Some(0), "x = {x}");
            }
            // x = -inf is exactly +0.0 (docs/ops/router.md#the-sigmoid), as before.
            let s = sigmoid(f32::NEG_INFINITY);
            assert!(s.v.is_zero() && s.err.is_zero());
        });
    }

    #[test]
    fn the_sigmoid_of_a_very_positive_logit_rounds_to_one() {
        with_precision(START_PREC, || {
            // s = 1 / (1 + e^-x) is within e^-x of 1: 1 - 2^-14427 for x = 10000,
            // rounded to 1 at any precision, with a bound of some 2^-128.
            for x in [10000.0f32, 200.0, f32::MAX, 1e30] {
                let s = sigmoid(x);
                assert!(s.err.is_finite() && s.err < Bound::pow2(-120), "x = {x}: {:?}", s.err);
                assert!(Float::with_val(64, &s.v - 1u32).abs() <= s.err.to_float());
                assert_eq!(correctly_rounded(&s), Some(1.0), "x = {x}");
            }
        });
    }

    #[test]
    fn an_exponential_beyond_mpfr_is_a_real_of_known_sign_and_magnitude() {
        let emax = rug::float::exp_max() as i64;
        let e = Exact::input(f32::MAX).exp();
        let floor = e.beyond.expect("e^f32::MAX is beyond MPFR's range");
        assert!(e.v.is_infinite() && e.v > 0 && !e.err.is_finite());
        assert!(floor >= Bound::pow2(emax));
        // It rounds to +inf, and is judged as an infinity.
        assert_eq!(correctly_rounded(&e), Some(f32::INFINITY));
        assert_eq!(judge(f32::INFINITY, f64::INFINITY, &e), Verdict::Within { ratio: 0.0 });
        assert!(matches!(judge(f32::MAX, 1e300, &e), Verdict::Outside { .. }));
        // Its negation is beyond too; 1 + it is; 1 / (1 + it) is a tiny real.
        let n = e.neg();
        assert!(n.v < 0 && n.beyond == e.beyond && correctly_rounded(&n) == Some(f32::NEG_INFINITY));
        let sum = Exact::input(-3.0).add(&e);
        assert!(sum.v > 0 && sum.beyond.is_some_and(|l| l <= floor && l >= Bound::pow2(emax)));
        let q = Exact::input(-3.0).div(&sum);
        assert!(q.v.is_zero() && q.v.is_sign_negative() && q.err.is_finite() && q.err > Bound::ZERO);
        // Where no rule applies, nothing is known (never a wrong claim): the
        // sum or product of two such reals, its product with 0 (0 as a
        // real, but NaN in MPFR), its exponential, a quotient of it.
        for unknown in [e.add(&n), e.mul(&Exact::input(0.0)), e.mul(&Exact::input(2.0)), e.exp(), e.div(&e)] {
            assert!(!unknown.err.is_finite() && unknown.beyond.is_none(), "{unknown:?}");
            assert_eq!(correctly_rounded(&unknown), None);
            assert_eq!(judge(1.0, 1.0, &unknown), Verdict::Unbounded);
        }
        // A NaN stays a determined NaN.
        let nan = e.add(&Exact::input(f32::NAN));
        assert!(nan.v.is_nan() && nan.err.is_zero());
    }

    #[test]
    fn exact_bounds_are_rigorous_far_outside_the_f64_range() {
        with_precision(START_PREC, || {
            // e^10000 (2^14427): error 2^-128 of it, beyond f64 but not beyond a Bound.
            let e = Exact::input(10000.0).exp();
            let dist = Float::with_val(4000, &e.v - exp_at_4000(10000.0)).abs();
            assert!(e.err.is_finite() && dist <= e.err.to_float());
            assert!((e.err.log2() - (14426.95 - 128.0)).abs() < 2.0, "{:?}", e.err);
            // Products and quotients of such values keep finite, rigorous bounds.
            let p = e.mul(&e);
            let exact_p = exp_at_4000(20000.0);
            assert!(Float::with_val(4000, &p.v - &exact_p).abs() <= p.err.to_float());
            let q = Exact::input(3.0).div(&e);
            let exact_q = Float::with_val(4000, 3u32 / exp_at_4000(10000.0));
            assert!(Float::with_val(4000, &q.v - &exact_q).abs() <= q.err.to_float());
            assert!(q.err.is_finite() && q.err < Bound::pow2(-14427 - 120));
            // An input error propagates through exp at that scale too.
            let x = Exact::input(1.0).div(&Exact::input(3.0)).mul(&Exact::input(30000.0));
            let ex = x.exp();
            let exact = Float::with_val(4000, Float::with_val(4000, 10000u32).exp_ref());
            assert!(ex.err.is_finite() && Float::with_val(4000, &ex.v - &exact).abs() <= ex.err.to_float());
        });
    }

    #[test]
    fn judge_is_rigorous_whatever_the_exact_bound_s_magnitude() {
        // A tiny exact bound (2^-14553): a computed +0.0 is within 2^-150 of
        // s = 2^-14427, the smallest subnormal is not within 2^-151.
        let tiny = Exact::new(Float::with_val(128, Float::i_exp(1, -14427)), Bound::pow2(-14553));
        assert!(matches!(judge(0.0, crate::num::ETA_F32, &tiny), Verdict::Within { .. }));
        assert!(matches!(judge(f32::from_bits(1), 2f64.powi(-151), &tiny), Verdict::Outside { .. }));
        // Within by the exact bound alone, below f64's range: |0 - v| =
        // 2^-1100 <= 0 + 2^-1099.
        let below = Exact::new(Float::with_val(128, Float::i_exp(1, -1100)), Bound::pow2(-1099));
        assert!(matches!(judge(0.0, 0.0, &below), Verdict::Within { .. }));
        let below = Exact::new(Float::with_val(128, Float::i_exp(1, -1100)), Bound::pow2(-1101));
        assert!(matches!(judge(0.0, 0.0, &below), Verdict::Outside { .. }));
        // A huge exact bound: v = 2^2000 +- 2^2001 holds 1.0, v +- 2^1999
        // does not, and 2^14427 +- 2^14299 holds no f32.
        let wide = Exact::new(Float::with_val(128, Float::i_exp(1, 2000)), Bound::pow2(2001));
        assert!(matches!(judge(1.0, 1.0, &wide), Verdict::Within { .. }));
        let narrow = Exact::new(Float::with_val(128, Float::i_exp(1, 2000)), Bound::pow2(1999));
        assert!(matches!(judge(1.0, 1.0, &narrow), Verdict::Outside { .. }));
        let huge = Exact::new(Float::with_val(128, Float::i_exp(1, 14427)), Bound::pow2(14299));
        assert!(matches!(judge(f32::MAX, f64::MAX, &huge), Verdict::Outside { .. }));
        assert!(matches!(judge(f32::INFINITY, 1.0, &huge), Verdict::Outside { .. }));
        assert_eq!(judge(f32::INFINITY, f64::INFINITY, &huge), Verdict::Unbounded);
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

    /// A sum with a real beyond MPFR's range where no rule keeps it beyond
    /// is nothing known, but MPFR's value is still IEEE's sum of the two
    /// values it holds: e^v for v = 744261117.5 (just above emax ln 2 =
    /// 744261117.26..., so e^v is beyond, at least 2^emax) minus 3 may fall
    /// below 2^emax, and is +inf + -3 = +inf (the real is positive too: a
    /// decision on it must not see -inf); e^f32::MAX + (-e^f32::MAX) is
    /// +inf + -inf = NaN.
    #[test]
    fn a_sum_beyond_mpfr_that_no_rule_settles_keeps_ieee_s_value() {
        with_precision(START_PREC, || {
            assert_eq!(rug::float::exp_max(), (1 << 30) - 1, "the arguments below assume MPFR's default emax");
            // 744261056 + 61.5, exact (both f32, the sum within 128 bits).
            let v = Exact::input(744261056.0).add(&Exact::input(61.5));
            assert!(v.err.is_zero() && v.v == 744261117.5);
            let e = v.exp();
            assert!(e.beyond.is_some(), "{e:?}");
            let s = e.add(&Exact::input(-3.0));
            assert!(s.beyond.is_none() && !s.err.is_finite(), "{s:?}");
            assert!(s.v.is_infinite() && s.v.is_sign_positive(), "{:?}", s.v);
            assert_eq!(s.cmp_f32(0.0), Some(Ordering::Greater));
            let big = Exact::input(f32::MAX).exp();
            let d = big.add(&big.neg());
            assert!(d.v.is_nan() && d.beyond.is_none() && !d.err.is_finite(), "{d:?}");
        });
    }

    /// An exact argument just below emax ln 2 (where e^x leaves MPFR's
    /// range): e^x is a finite MPFR number, rounded once, with a bound of
    /// 2^-128 of it, though the 53-bit upper bound exp_up would compute of
    /// e^x (its argument rounded up to the 53-bit grid, past emax ln 2)
    /// overflows: an exact argument propagates no error, and needs none.
    /// x = 744261117 + 0x1.0c0718p-2 + 2^-26: the 53-bit grid point below
    /// emax ln 2 = 744261117.2617458373... is 744261117.26174581050872802734375
    /// (spacing 2^-23), and x is 2^-26 above it, 1.2e-8 below emax ln 2.
    #[test]
    fn the_exp_of_an_exact_argument_just_below_mpfr_s_overflow_is_bounded() {
        with_precision(START_PREC, || {
            assert_eq!(rug::float::exp_max(), (1 << 30) - 1, "the argument below assumes MPFR's default emax");
            let terms = [744261056.0f32, 61.0, f32::from_bits(0x3e86_038c), 2f32.powi(-26)];
            let x = terms.iter().skip(1).fold(Exact::input(terms[0]), |acc, &t| acc.add(&Exact::input(t)));
            assert!(x.err.is_zero());
            // Independently: x < emax ln 2 (so e^x < 2^emax, finite in MPFR),
            // and x rounded up to 53 bits is above it.
            let threshold = Float::with_val(300, Constant::Log2) * rug::float::exp_max();
            assert!(x.v < threshold);
            assert!(Float::with_val_round(53, &x.v, Round::Up).0 > threshold);
            let e = x.exp();
            assert!(e.beyond.is_none() && e.v.is_finite(), "{e:?}");
            assert!(e.err.is_finite() && e.err > Bound::ZERO, "{:?}", e.err);
            let exact = Float::with_val(4000, Float::with_val(4000, &x.v).exp_ref());
            assert!(Float::with_val(4000, &e.v - &exact).abs() <= e.err.to_float());
            // e^x, some 2^(1.07e9), rounds to +inf in f32 (past f32::MAX's
            // rounding boundary, 2^128 - 2^103).
            assert_eq!(correctly_rounded(&e), Some(f32::INFINITY));
        });
    }
}
