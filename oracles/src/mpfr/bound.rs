//! [`Bound`]: a non-negative real kept as an f64 significand and an i64
//! binary exponent, every operation rounded in the direction that keeps it
//! rigorous (upward for an upper bound, downward for a lower one): the type
//! of [`super::Exact`]'s error bound.
//!
//! # Why not a plain f64, and why not an MPFR number
//!
//! An f64 bound stops at 2^1024 and, below 2^-1074, can only round up to
//! 2^-1074. MPFR values reach 2^(+-2^30): e^10000 (about 2^14427, from a
//! logit of -10000) is an ordinary MPFR number, but its rounding error at
//! 128 bits, 2^-128 of it, is +inf in f64, and every bound computed from it
//! (the sigmoid 1 / (1 + e^10000) about 2^-14427, whose own error is some
//! 2^-14553) becomes +inf: nothing known, where everything is known.
//!
//! A low-precision MPFR number rounded upward (rug's `Round::Up`) would
//! cover that range too, but each operation on it allocates, and a bound is
//! updated several times per exact operation (a product's bound takes three
//! products and three sums), on every operation of every case. `Bound` is
//! `Copy`, allocation-free, and as fast as the f64 it replaces: the
//! significand's arithmetic is f64's, only the exponent is kept apart.
//! 53 bits of significand are plenty for a bound: what matters is that it
//! is never too small, not that it is tight to the last bit.
//!
//! # Representation and rounding
//!
//! A value is 0, +inf, or m 2^e with m an f64 in [0.5, 1) and e in
//! [[`EXP_MIN`], [`EXP_MAX`]] (that is, beyond MPFR's own exponent range in
//! both directions: every MPFR magnitude, and quotients of them, fit). The
//! representation is unique, so `==` is equality of values and the order
//! (`<`, `<=`) is exact: zero, then by exponent, then by significand.
//!
//! The significands are combined with f64 arithmetic rounded to nearest,
//! then moved one ulp in the safe direction (`next_up` / `next_down`): for a
//! real t in f64's normal range, RN(t) is the double nearest t, so t lies
//! between RN(t) and its neighbour on t's side, and next_up(RN(t)) >= t >=
//! next_down(RN(t)). Each operation keeps its significands' results normal
//! (see each one), and rescaling by a power of two (into [0.5, 1)) is exact.
//! A result beyond the exponent range is clamped in the safe direction: an
//! upper bound above it becomes +inf and one below it the smallest positive
//! value 2^(EXP_MIN - 1); a lower bound above it becomes 2^(EXP_MAX - 1)
//! and one below it 0.

use rug::float::{Round, Special};
use rug::Float;
use std::cmp::Ordering;
use std::fmt;

/// The largest exponent e of a finite [`Bound`] m 2^e (m in [0.5, 1)).
/// 2^60, far beyond MPFR's largest (2^30 - 1 by default, 2^62 at most), and
/// small enough that the sum or difference of two exponents cannot
/// overflow an i64.
pub const EXP_MAX: i64 = 1 << 60;
/// The smallest exponent of a finite, non-zero [`Bound`].
pub const EXP_MIN: i64 = -(1 << 60);

/// A non-negative real, 0, or +inf (see the module docs). Build it with
/// [`Bound::from_f64`], [`Bound::pow2`], [`Bound::abs_up`] or
/// [`Bound::abs_down`]; combine with the `*_up` / `*_down` operations.
#[derive(Clone, Copy, PartialEq)]
pub struct Bound {
    /// 0, +inf, or in [0.5, 1).
    m: f64,
    /// 0 for 0 and +inf, else in [EXP_MIN, EXP_MAX].
    e: i64,
}

/// Which way a result may move when it is rounded or clamped.
#[derive(Clone, Copy, PartialEq)]
enum Dir {
    /// An upper bound: it may only grow.
    Up,
    /// A lower bound: it may only shrink.
    Down,
}

/// x = f 2^k with f in [0.5, 1), exactly, for a positive finite f64 x.
fn frexp(x: f64) -> (f64, i64) {
    debug_assert!(x > 0.0 && x.is_finite());
    // A subnormal is scaled into the normal range first (exact).
    let (x, adjust) = if x < f64::MIN_POSITIVE { (x * f64::from_bits((1023 + 64) << 52), -64) } else { (x, 0) };
    let bits = x.to_bits();
    let biased = ((bits >> 52) & 0x7ff) as i64;
    let f = f64::from_bits((bits & !(0x7ff << 52)) | (1022 << 52));
    (f, biased - 1022 + adjust)
}

/// 2^-d as an f64, exactly, for 0 <= d <= 64.
fn pow2_neg_small(d: i64) -> f64 {
    debug_assert!((0..=64).contains(&d));
    f64::from_bits(((1023 - d) as u64) << 52)
}

impl Bound {
    pub const ZERO: Bound = Bound { m: 0.0, e: 0 };
    pub const INFINITY: Bound = Bound { m: f64::INFINITY, e: 0 };

    /// f 2^e for f in [0.5, 1), clamped to the exponent range toward `dir`.
    fn clamped(f: f64, e: i64, dir: Dir) -> Bound {
        debug_assert!((0.5..1.0).contains(&f));
        if e > EXP_MAX {
            // f 2^e > 2^(EXP_MAX - 1).
            if dir == Dir::Up {
                Bound::INFINITY
            } else {
                Bound { m: 0.5, e: EXP_MAX }
            }
        } else if e < EXP_MIN {
            // f 2^e < 2^(EXP_MIN - 1).
            if dir == Dir::Up {
                Bound { m: 0.5, e: EXP_MIN }
            } else {
                Bound::ZERO
            }
        } else {
            Bound { m: f, e }
        }
    }

    /// m 2^e for a positive finite f64 m: rescaled exactly, then clamped.
    fn scaled(m: f64, e: i64, dir: Dir) -> Bound {
        let (f, k) = frexp(m);
        Bound::clamped(f, e.saturating_add(k), dir)
    }

    /// `x` exactly (x >= 0; a NaN, which bounds nothing, gives +inf).
    pub fn from_f64(x: f64) -> Bound {
        debug_assert!(x >= 0.0 || x.is_nan(), "a bound is non-negative: {x}");
        if x == 0.0 {
            Bound::ZERO
        } else if x.is_nan() || x.is_infinite() {
            Bound::INFINITY
        } else {
            Bound::scaled(x, 0, Dir::Up)
        }
    }

    /// 2^k, exactly within the exponent range; beyond it, clamped upward
    /// (+inf above, the smallest positive value below): an upper bound.
    pub fn pow2(k: i64) -> Bound {
        Bound::clamped(0.5, k.saturating_add(1), Dir::Up)
    }

    /// 2^k, clamped downward beyond the exponent range: a lower bound.
    pub fn pow2_down(k: i64) -> Bound {
        Bound::clamped(0.5, k.saturating_add(1), Dir::Down)
    }

    /// |v| rounded to 53 bits in `round`'s direction, then clamped toward `dir`.
    fn of_abs(v: &Float, round: Round, dir: Dir) -> Bound {
        if v.is_nan() {
            // No value: no finite upper bound, no positive lower one.
            return if dir == Dir::Up { Bound::INFINITY } else { Bound::ZERO };
        }
        if v.is_infinite() {
            return Bound::INFINITY;
        }
        if v.is_zero() {
            return Bound::ZERO;
        }
        // |v| = f 2^e with f in [0.5, 1) the significand: its limbs, most
        // significant last, the top one's top bit set. Read in place (no
        // MPFR call: this runs on every inexact operation): the top limb's
        // leading 53 bits m give m 2^-53 <= f, and (m + 1) 2^-53 > f where
        // any bit below them is set (they are below one unit of m).
        if let (Some(e), Some(sig)) = (v.get_exp(), v.get_significand()) {
            if let Some((&top, rest)) = sig.as_limbs().split_last() {
                if std::mem::size_of_val(&top) == 8 {
                    #[allow(clippy::useless_conversion)] // a no-op where limbs are u64
                    let top = u64::from(top);
                    let exact = top & 0x7ff == 0 && rest.iter().all(|&l| l == 0);
                    let m = (top >> 11) + u64::from(!exact && dir == Dir::Up); // in [2^52, 2^53]
                    return if m == 1 << 53 {
                        Bound::clamped(0.5, e as i64 + 1, dir)
                    } else {
                        // m 2^-53 in [0.5, 1): m's low 52 bits under the biased exponent of 0.5.
                        Bound::clamped(f64::from_bits((1022 << 52) | (m & ((1 << 52) - 1))), e as i64, dir)
                    };
                }
            }
        }
        // Other limb sizes: mpfr_get_d_2exp, f in [0.5, 1) with f 2^e = |v|
        // rounded to 53 bits in the direction asked (rescaled anyway, should
        // a carry reach 1).
        let (f, e) = v.as_abs().to_f64_exp_round(round);
        Bound::scaled(f, e as i64, dir)
    }

    /// An upper bound of |v| (+inf for an infinity or a NaN).
    pub fn abs_up(v: &Float) -> Bound {
        Bound::of_abs(v, Round::Up, Dir::Up)
    }

    /// A lower bound of |v| (0 for a NaN, +inf for an infinity).
    pub fn abs_down(v: &Float) -> Bound {
        Bound::of_abs(v, Round::Down, Dir::Down)
    }

    pub fn is_zero(&self) -> bool {
        self.m == 0.0
    }

    pub fn is_finite(&self) -> bool {
        self.m.is_finite()
    }

    /// a + b rounded upward. Aligned on the larger exponent, the smaller
    /// significand scaled by 2^-d is exact and normal for d <= 64, and the
    /// sum lies in [0.5, 2): one rounding, then next_up. For d > 64 the
    /// smaller term is below 2^-65 of the larger one's scale, less than one
    /// ulp (2^-53) of its significand: next_up of the larger covers it.
    pub fn add_up(self, b: Bound) -> Bound {
        if self.is_zero() {
            return b;
        }
        if b.is_zero() {
            return self;
        }
        if !self.is_finite() || !b.is_finite() {
            return Bound::INFINITY;
        }
        let (hi, lo) = if self.e >= b.e { (self, b) } else { (b, self) };
        let d = hi.e - lo.e;
        let s = if d > 64 { hi.m.next_up() } else { (hi.m + lo.m * pow2_neg_small(d)).next_up() };
        Bound::scaled(s, hi.e, Dir::Up)
    }

    /// a * b rounded upward. The significands' product lies in [0.25, 1):
    /// normal. 0 * +inf is +inf, as in [`crate::num::mul_up`]: an infinite
    /// factor is a bound that says nothing, or an infinite value.
    pub fn mul_up(self, b: Bound) -> Bound {
        if !self.is_finite() || !b.is_finite() {
            return Bound::INFINITY;
        }
        if self.is_zero() || b.is_zero() {
            return Bound::ZERO;
        }
        Bound::scaled((self.m * b.m).next_up(), self.e + b.e, Dir::Up)
    }

    /// a / b rounded upward, for b a lower bound of the divisor (so a
    /// larger quotient is safe): +inf when b is 0, 0 when a is 0 or b is
    /// +inf (an infinite divisor). The significands' quotient lies in
    /// (0.5, 2): normal.
    pub fn div_up(self, b: Bound) -> Bound {
        if !self.is_finite() || b.is_zero() {
            return Bound::INFINITY;
        }
        if self.is_zero() || !b.is_finite() {
            return Bound::ZERO;
        }
        Bound::scaled((self.m / b.m).next_up(), self.e - b.e, Dir::Up)
    }

    /// a - b rounded downward, or 0 where a <= b (a lower bound of a
    /// difference that is not certainly positive is 0). With a > b, the
    /// exponent difference d is >= 0. For d <= 64 both significands, the
    /// smaller scaled by 2^-d (exact), are multiples of 2^-117, so their
    /// exact difference is at least 2^-117, and so is its rounding to
    /// nearest (monotone): next_down keeps it positive and normal. For
    /// d > 64, b is below 2^-65 of a's scale, and next_down of a's
    /// significand is at least 2^-54 below it.
    pub fn sub_down(self, b: Bound) -> Bound {
        if b.is_zero() {
            return self;
        }
        if !b.is_finite() || self <= b {
            return Bound::ZERO;
        }
        if !self.is_finite() {
            return Bound::INFINITY;
        }
        let d = self.e - b.e;
        let s = if d > 64 { self.m.next_down() } else { (self.m - b.m * pow2_neg_small(d)).next_down() };
        Bound::scaled(s, self.e, Dir::Down)
    }

    /// An f64 at least this large: exact where it fits (2^-1074 up to f64's
    /// largest value), a multiple of 2^-1074 rounded up below the normal
    /// range (2^-1074 below that), +inf above it.
    pub fn to_f64_up(&self) -> f64 {
        if self.is_zero() || !self.is_finite() {
            return self.m;
        }
        if self.e > 1024 {
            return f64::INFINITY;
        }
        if self.e >= -1021 {
            // m 2^e is a normal f64 (its exponent e - 1 is in [-1022, 1023]):
            // m's bits with the biased exponent 1022 + e instead of 1022.
            return f64::from_bits(self.m.to_bits().wrapping_add((self.e as u64) << 52));
        }
        let k = self.e + 1074;
        if k <= 0 {
            return f64::from_bits(1);
        }
        // m 2^e = (m 2^k) 2^-1074 with k in [1, 52]: m 2^k is exact, its
        // ceiling n <= 2^52, and n 2^-1074 is the f64 with bits n.
        let n = (self.m * f64::from_bits(((1023 + k) as u64) << 52)).ceil();
        f64::from_bits(n as u64)
    }

    /// An MPFR number (53 bits) at least this large: exact within MPFR's
    /// exponent range, +inf above it, MPFR's smallest positive number below.
    pub fn to_float(&self) -> Float {
        if self.is_zero() {
            return Float::new(53);
        }
        if !self.is_finite() {
            return Float::with_val(53, Special::Infinity);
        }
        let (emin, emax) = (rug::float::exp_min() as i64, rug::float::exp_max() as i64);
        if self.e > emax {
            Float::with_val(53, Special::Infinity)
        } else if self.e < emin {
            // m 2^e < 2^(emin - 1) = 0.5 2^emin.
            Float::with_val(53, 0.5) << emin as i32
        } else {
            Float::with_val(53, self.m) << self.e as i32
        }
    }

    /// log2 of the value (approximate; -inf for 0): for messages and tests.
    pub fn log2(&self) -> f64 {
        if self.is_zero() || !self.is_finite() {
            return self.m.log2();
        }
        self.e as f64 + self.m.log2()
    }
}

impl PartialOrd for Bound {
    /// Exact: the representation is unique (see the module docs).
    fn partial_cmp(&self, b: &Bound) -> Option<Ordering> {
        let rank = |x: &Bound| {
            if x.is_zero() {
                0
            } else if x.is_finite() {
                1
            } else {
                2
            }
        };
        Some(rank(self).cmp(&rank(b)).then(self.e.cmp(&b.e)).then(self.m.total_cmp(&b.m)))
    }
}

impl fmt::Debug for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let x = self.to_f64_up();
        if self.is_zero() || !self.is_finite() || (x.is_normal() && x < f64::MAX) {
            write!(f, "{x:e}")
        } else {
            write!(f, "{:.17}p{}", 2.0 * self.m, self.e - 1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rug::Rational;

    /// The exact value, for finite bounds.
    fn exact(b: Bound) -> Rational {
        let mut r = Rational::from_f64(b.m).unwrap();
        if b.e >= 0 {
            r <<= b.e as u32;
        } else {
            r >>= (-b.e) as u32;
        }
        r
    }

    /// A small deterministic generator (splitmix64).
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
        /// A bound with a random significand (sometimes a short one) and
        /// an exponent in [-lim, lim], or 0.
        fn bound(&mut self, lim: i64) -> Bound {
            let r = self.next();
            if r.is_multiple_of(17) {
                return Bound::ZERO;
            }
            let m = if r.is_multiple_of(5) {
                0.5 + (r >> 60) as f64 / 32.0
            } else {
                0.5 + (r >> 12) as f64 * 2f64.powi(-53)
            };
            let e = (self.next() % (2 * lim as u64 + 1)) as i64 - lim;
            Bound::clamped(m, e, Dir::Up)
        }
    }

    #[test]
    fn conversions_are_exact() {
        for x in [1.0, 0.5, 0.75, 3.0, f64::MAX, f64::MIN_POSITIVE, f64::from_bits(1), f64::from_bits(0xfffff), 1e-300]
        {
            let b = Bound::from_f64(x);
            assert_eq!(exact(b), Rational::from_f64(x).unwrap(), "{x:e}");
            assert_eq!(b.to_f64_up(), x, "{x:e}");
            assert_eq!(b.to_float(), x, "{x:e}");
            assert_eq!(Bound::abs_up(&Float::with_val(53, -x)), b);
            assert_eq!(Bound::abs_down(&Float::with_val(53, x)), b);
        }
        assert_eq!(Bound::from_f64(0.0), Bound::ZERO);
        assert_eq!(Bound::from_f64(f64::INFINITY), Bound::INFINITY);
        assert_eq!(Bound::from_f64(f64::NAN), Bound::INFINITY);
        assert_eq!(Bound::pow2(-1074).to_f64_up(), f64::from_bits(1));
        assert_eq!(Bound::pow2(-1024).to_f64_up(), f64::from_bits(1 << 50));
        assert_eq!(Bound::pow2(1023).to_f64_up(), 2f64.powi(1023));
        assert_eq!(Bound::pow2(1024).to_f64_up(), f64::INFINITY);
        // Below the f64 range: up to 2^-1074, never 0.
        assert_eq!(Bound::pow2(-5000).to_f64_up(), f64::from_bits(1));
        // A value between two subnormals rounds up to the next one.
        let b = Bound::from_f64(3.0).mul_up(Bound::pow2(-1076));
        assert_eq!(b.to_f64_up(), f64::from_bits(1));
        let b = Bound::from_f64(5.0).mul_up(Bound::pow2(-1075));
        assert_eq!(b.to_f64_up(), f64::from_bits(3));
        // Far outside f64: exact, and in MPFR too.
        let big = Bound::pow2(14427);
        assert_eq!(big.to_float(), Float::with_val(53, Float::i_exp(1, 14427)));
        assert_eq!(Bound::pow2(-14553).to_float(), Float::with_val(53, Float::i_exp(1, -14553)));
        assert!((big.log2() - 14427.0).abs() < 1e-12);
        let v = Float::with_val(200, Float::i_exp(3, 20000)) / 7u32;
        assert!(Bound::abs_down(&v).to_float() <= v && v <= Bound::abs_up(&v).to_float());
        // Beyond MPFR's exponent range: +inf above, the smallest positive below.
        assert!(Bound::pow2(EXP_MAX - 1).to_float().is_infinite());
        let tiny = Bound::pow2(EXP_MIN).to_float();
        assert!(tiny > 0 && tiny == Float::with_val(53, Float::i_exp(1, rug::float::exp_min() - 1)));
    }

    #[test]
    fn magnitudes_read_from_the_limbs_are_mpfr_s_directed_roundings() {
        // abs_up / abs_down read the significand in place: they must be
        // MPFR's own rounding of |v| to 53 bits upward / downward, at every
        // precision (one limb or several), exact values included.
        let mut rng = Rng(11);
        for prec in [24u32, 53, 64, 65, 128, 200, 1024] {
            for i in 0..2000u32 {
                let mut v = Float::with_val(prec, rng.next()) / Float::with_val(prec, rng.next() | 1);
                v <<= (rng.next() % 40_000) as i32 - 20_000;
                if i.is_multiple_of(3) {
                    v = Float::with_val(prec, v.to_f64()); // often exact in 53 bits
                }
                if i.is_multiple_of(2) {
                    v = -v;
                }
                for (got, round) in [(Bound::abs_up(&v), Round::Up), (Bound::abs_down(&v), Round::Down)] {
                    let want = Float::with_val_round(53, &*v.as_abs(), round).0;
                    assert_eq!(got.to_float(), want, "{v} at {prec} bits, {round:?}");
                }
            }
        }
    }

    /// A significand of all ones past bit 53 rounds up into the next binade:
    /// 2^k (1 - 2^-60) is bounded above by 2^k, not by 2^(k-1).
    #[test]
    fn rounding_up_carries_into_the_next_power_of_two() {
        for prec in [64u32, 128] {
            for k in [-3i32, 0, 7] {
                let mut v = Float::with_val(prec, 1) - Float::with_val(prec, 2f64.powi(-60));
                v <<= k;
                let up = Bound::abs_up(&v).to_float();
                assert_eq!(up, Float::with_val(53, 2f64.powi(k)), "2^{k} (1 - 2^-60) at {prec} bits");
                assert_eq!(up, Float::with_val_round(53, &v, Round::Up).0);
            }
        }
    }

    #[test]
    fn the_range_is_clamped_in_the_safe_direction() {
        assert_eq!(Bound::pow2(EXP_MAX), Bound::INFINITY);
        assert_eq!(Bound::pow2_down(EXP_MAX + 5), Bound::pow2(EXP_MAX - 1));
        assert_eq!(Bound::pow2(EXP_MIN - 10), Bound::pow2(EXP_MIN - 1));
        assert_eq!(Bound::pow2_down(EXP_MIN - 10), Bound::ZERO);
        assert!(Bound::pow2(EXP_MIN - 1) > Bound::ZERO);
        let huge = Bound::pow2(EXP_MAX - 1);
        assert_eq!(huge.mul_up(huge), Bound::INFINITY);
        assert_eq!(huge.add_up(huge), Bound::INFINITY);
        let small = Bound::pow2(EXP_MIN - 1);
        assert_eq!(small.mul_up(small), small, "rounded up to the smallest, never 0");
        let q = Bound::from_f64(1.0).div_up(huge);
        assert!(q >= Bound::pow2(1 - EXP_MAX) && q < Bound::pow2(2 - EXP_MAX));
        assert_eq!(Bound::pow2(i64::MAX), Bound::INFINITY);
        assert_eq!(Bound::pow2_down(i64::MIN), Bound::ZERO);
    }

    #[test]
    fn zero_and_infinity() {
        let (z, inf, one) = (Bound::ZERO, Bound::INFINITY, Bound::from_f64(1.0));
        assert_eq!(z.add_up(one), one);
        assert_eq!(one.add_up(inf), inf);
        assert_eq!(z.mul_up(one), z);
        assert_eq!(z.mul_up(inf), inf);
        assert_eq!(one.div_up(z), inf);
        assert_eq!(z.div_up(one), z);
        assert_eq!(one.div_up(inf), z);
        assert_eq!(one.sub_down(one), z);
        assert_eq!(one.sub_down(inf), z);
        assert_eq!(inf.sub_down(one), inf);
        assert!(z < one && one < inf && z < inf);
        assert!(!inf.is_finite() && z.is_finite() && z.is_zero());
        assert_eq!(z.to_f64_up(), 0.0);
        assert_eq!(inf.to_f64_up(), f64::INFINITY);
        assert!(z.to_float().is_zero() && inf.to_float().is_infinite());
        assert_eq!(Bound::abs_up(&Float::with_val(53, Special::Nan)), inf);
        assert_eq!(Bound::abs_down(&Float::with_val(53, Special::Nan)), z);
        assert_eq!(Bound::abs_up(&Float::with_val(53, Special::NegInfinity)), inf);
    }

    /// Every operation against exact rational arithmetic: an upper bound is
    /// never below the exact result, a lower bound never above it, and
    /// neither is off by more than a few ulps.
    #[test]
    fn operations_are_rounded_the_safe_way_and_tight() {
        let mut rng = Rng(7);
        let close = |got: &Rational, want: &Rational| {
            // |got - want| <= 2^-50 want (a few ulps of 2^-53).
            let diff = Rational::from(got - want).abs();
            diff <= Rational::from(want >> 50u32)
        };
        for i in 0..20_000u32 {
            // Exponents near each other, and (one in four) far apart.
            let lim = if i.is_multiple_of(4) { 3000 } else { 70 };
            let (a, b) = (rng.bound(lim), rng.bound(lim));
            let (qa, qb) = (exact(a), exact(b));
            let sum = a.add_up(b);
            let s = Rational::from(&qa + &qb);
            assert!(exact(sum) >= s && close(&exact(sum), &s), "{a:?} + {b:?} = {sum:?}");
            let prod = a.mul_up(b);
            let p = Rational::from(&qa * &qb);
            assert!(exact(prod) >= p && close(&exact(prod), &p), "{a:?} * {b:?} = {prod:?}");
            if !b.is_zero() {
                let quot = a.div_up(b);
                let q = Rational::from(&qa / &qb);
                assert!(exact(quot) >= q && close(&exact(quot), &q), "{a:?} / {b:?} = {quot:?}");
            }
            let diff = a.sub_down(b);
            let d = Rational::from(&qa - &qb);
            if d <= 0 {
                assert_eq!(diff, Bound::ZERO);
            } else {
                assert!(exact(diff) <= d, "{a:?} - {b:?} = {diff:?}");
                assert!(diff > Bound::ZERO, "{a:?} - {b:?}: a positive difference has a positive lower bound");
            }
            // The order is the exact one.
            assert_eq!(a.partial_cmp(&b), qa.partial_cmp(&qb), "{a:?} vs {b:?}");
            // The conversions bracket the value.
            let f = a.to_f64_up();
            assert!(f == f64::INFINITY || Rational::from_f64(f).unwrap() >= qa, "{a:?}: {f:e}");
            assert_eq!(a.to_float().to_rational().unwrap(), qa);
        }
    }

    #[test]
    fn cancellation_keeps_a_positive_lower_bound() {
        // a - b with a = next_up(b): the exact difference is one ulp.
        let b = Bound::from_f64(0.75);
        let a = Bound::from_f64(0.75f64.next_up());
        let d = a.sub_down(b);
        assert!(d > Bound::ZERO && exact(d) <= Rational::from_f64(0.75f64.next_up() - 0.75).unwrap());
        // Exponents 64 apart: still exact enough to be positive.
        let d = Bound::from_f64(1.0).sub_down(Bound::pow2(-64));
        assert!(d > Bound::from_f64(0.99) && exact(d) <= Rational::from(1) - (Rational::from(1) >> 64u32));
    }
}
