//! Exact rational evaluation: [`Rat`], a [`Num`] over `rug::Rational`.
//!
//! Ziv's loop ([`super::reference`]) cannot settle an output whose exact
//! value lies on an f32 rounding boundary (a midpoint between two f32, or
//! zero between -0.0 and +0.0) when it is reached through non-dyadic
//! quotients: MPFR rounds those at every precision, so the value keeps a
//! bound, and an interval around a boundary never rounds alike at both
//! ends. An output built from +, *, /, neg and abs on f32 inputs is a
//! rational function of them: evaluated in rational arithmetic it is exact,
//! with no bound at all, and its correct rounding is decided by integer
//! arithmetic. Rationals grow (a sum of n quotients carries a denominator of
//! up to n times the bits of one), so the loop runs this once, and only on a
//! computation it left undetermined at [`super::MAX_PREC`].
//!
//! What is not a finite rational is "not representable", a state every
//! operation propagates: a non-finite input, a quotient by zero, and e^x for
//! any x but 0 (e^x is transcendental for rational x != 0, by
//! Lindemann-Weierstrass). Its [`Num::to_f32`] is NaN and its comparisons
//! are `None`: it never stands for a number.

use crate::bf16::Rounding;
use crate::num::Num;
use rug::{Integer, Rational};
use std::cmp::Ordering;

/// An exact rational value, or `None`: not a finite rational (see the
/// module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct Rat(Option<Rational>);

impl Rat {
    /// The exact value; `None` when it is not a finite rational.
    pub fn value(&self) -> Option<&Rational> {
        self.0.as_ref()
    }

    fn of(a: &Self, b: &Self, f: impl FnOnce(&Rational, &Rational) -> Option<Rational>) -> Self {
        Rat(a.0.as_ref().zip(b.0.as_ref()).and_then(|(x, y)| f(x, y)))
    }
}

impl From<Rational> for Rat {
    fn from(q: Rational) -> Self {
        Rat(Some(q))
    }
}

impl Num for Rat {
    /// A finite f32 is a dyadic rational, converted exactly; -0.0 becomes
    /// 0 (a rational has no signed zero; the sign of an exact zero is the
    /// profile's business, see [`super::correctly_rounded`]).
    fn input(x: f32) -> Self {
        Rat(Rational::from_f32(x))
    }
    fn add(&self, y: &Self) -> Self {
        Rat::of(self, y, |a, b| Some(Rational::from(a + b)))
    }
    fn mul(&self, y: &Self) -> Self {
        Rat::of(self, y, |a, b| Some(Rational::from(a * b)))
    }
    /// A quotient by zero has no rational value (and rug would panic on it).
    fn div(&self, y: &Self) -> Self {
        Rat::of(self, y, |a, b| (b.cmp0() != Ordering::Equal).then(|| Rational::from(a / b)))
    }
    fn neg(&self) -> Self {
        Rat(self.0.as_ref().map(|a| Rational::from(-a)))
    }
    fn abs(&self) -> Self {
        Rat(self.0.as_ref().map(|a| Rational::from(a.abs_ref())))
    }
    /// e^0 = 1; e^x for rational x != 0 is transcendental (Lindemann).
    fn exp(&self) -> Self {
        match &self.0 {
            Some(a) if a.cmp0() == Ordering::Equal => Rat(Some(Rational::from(1))),
            _ => Rat(None),
        }
    }
    /// Exact; `None` for a value that is not representable or a NaN `c`.
    fn cmp_f32(&self, c: f32) -> Option<Ordering> {
        let a = self.0.as_ref()?;
        if c.is_nan() {
            return None;
        }
        Some(match Rational::from_f32(c) {
            Some(q) => a.cmp(&q),
            // Every rational lies strictly between -inf and +inf.
            None if c > 0.0 => Ordering::Less,
            None => Ordering::Greater,
        })
    }
    fn cmp_num(&self, y: &Self) -> Option<Ordering> {
        Some(self.0.as_ref()?.cmp(y.0.as_ref()?))
    }
    /// The correct rounding ([`round_rational_to_f32`]); NaN when not
    /// representable.
    fn to_f32(&self) -> f32 {
        self.0.as_ref().map_or(f32::NAN, round_rational_to_f32)
    }
    /// Exact: a finite rational has one correct rounding; what is not one
    /// has none (`decision: None`, and the value stays not representable).
    fn round_bf16(&self) -> Rounding<Self> {
        match &self.0 {
            Some(q) => {
                let d = round_rational_to_bf16(q);
                Rounding { decision: Some(d), certain: true, value: Rat::input(d) }
            }
            None => Rounding { decision: None, certain: false, value: Rat(None) },
        }
    }
}

/// The f32 nearest to `q`, ties to even, subnormals kept, overflow to
/// infinity, as IEEE round-to-nearest-even defines it; a negative value that
/// rounds to zero gives -0.0. Integer arithmetic only, so nothing is rounded
/// on the way.
///
/// With |q| = n/d and 2^e <= |q| < 2^(e+1), the f32 grid near |q| has the
/// quantum 2^k, k = max(e, -126) - 23 (24 significant bits for a normal
/// value, the fixed 2^-149 below 2^-126). m = floor(|q| / 2^k) and the
/// remainder r / d' of that division place |q| between m 2^k and
/// (m + 1) 2^k; comparing 2r with d' says which is nearer, or that |q| is
/// the midpoint. m < 2^24 (|q| < 2^(e+1) = 2^24 2^k for a normal value,
/// 2^23 2^k below), so m + 1 <= 2^24 and m 2^k is exact in f64 and, being
/// on the f32 grid, in f32, unless it is 2^128, which IEEE rounds to inf.
pub fn round_rational_to_f32(q: &Rational) -> f32 {
    round_rational(q, 24)
}

/// The bf16 nearest to `q` (ties to even, subnormals down to 2^-133 kept,
/// overflow to infinity), as the f32 it is exactly: [`round_rational_to_f32`]
/// with 8 significant bits instead of 24 (the same exponent range).
pub fn round_rational_to_bf16(q: &Rational) -> f32 {
    round_rational(q, 8)
}

/// The nearest value with `bits` significant bits and f32's exponent range
/// (see [`round_rational_to_f32`], written for bits = 24).
fn round_rational(q: &Rational, bits: i64) -> f32 {
    if q.cmp0() == Ordering::Equal {
        return 0.0;
    }
    let negative = q.cmp0() == Ordering::Less;
    let signed = |x: f32| if negative { -x } else { x };
    let n = Integer::from(q.numer().abs_ref());
    let d = q.denom();
    // bits(n) - bits(d) - 1 <= log2(n/d) < bits(n) - bits(d) + 1.
    let mut e = n.significant_bits() as i64 - d.significant_bits() as i64;
    if e > 129 {
        // |q| >= 2^(e-1) >= 2^129, past the overflow threshold (2^128 - 2^103
        // for f32, 2^128 - 2^119 for bf16).
        return signed(f32::INFINITY);
    }
    if e < -151 {
        // |q| < 2^(e+1) <= 2^-151, below half the smallest subnormal (2^-150
        // for f32, 2^-134 for bf16).
        return signed(0.0);
    }
    // Now |e| <= 151: the shifts are small. e is floor(log2 |q|) or one more.
    let below = if e >= 0 { n < Integer::from(d << e as u32) } else { Integer::from(&n << (-e) as u32) < *d };
    if below {
        e -= 1;
    }
    if e >= 128 {
        return signed(f32::INFINITY);
    }
    let k = e.max(-126) - (bits - 1);
    let (num, den) =
        if k >= 0 { (n, Integer::from(d << k as u32)) } else { (Integer::from(&n << (-k) as u32), d.clone()) };
    let (m, r) = num.div_rem(den.clone());
    let up = match (r << 1u32).cmp(&den) {
        Ordering::Less => false,
        Ordering::Greater => true,
        Ordering::Equal => m.is_odd(),
    };
    let m = if up { m + 1u32 } else { m };
    // m <= 2^bits: exact in f64 (to_f64 rounds only past 53 bits), and
    // 2^k (-149 <= k <= 104 for f32, -133 <= k <= 120 for bf16) is a normal
    // f64, so the product is exact.
    let pow2 = f64::from_bits(((1023 + k) as u64) << 52);
    let magnitude = m.to_f64() * pow2;
    // On the f32 grid, so `as f32` is exact; 2^128 (m = 2^bits at the top
    // binade) is past f32::MAX and converts to inf, the IEEE rounding.
    signed(magnitude as f32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mpfr::round_to_f32;
    use rug::float::Round;
    use rug::Float;

    fn q(n: i64, d: i64) -> Rational {
        Rational::from((n, d))
    }

    /// 2^e as a rational.
    fn pow2(e: i32) -> Rational {
        if e >= 0 {
            Rational::from(Integer::from(1) << e as u32)
        } else {
            Rational::from((Integer::from(1), Integer::from(1) << (-e) as u32))
        }
    }

    /// Independent reference: MPFR's correct rounding of `q` to a Float
    /// (directed both ways at 4096 bits), then [`round_to_f32`]; it answers
    /// only where both directions give the same f32 (always for a dyadic q
    /// of fewer than 4096 bits, which MPFR holds exactly, and for any q not
    /// on a rounding boundary).
    fn mpfr_rounding(q: &Rational) -> Option<f32> {
        let lo = round_to_f32(&Float::with_val_round(4096, q, Round::Down).0);
        let hi = round_to_f32(&Float::with_val_round(4096, q, Round::Up).0);
        (lo.to_bits() == hi.to_bits()).then_some(lo)
    }

    #[test]
    fn rounding_of_hand_picked_values() {
        let f = |x: &Rational| round_rational_to_f32(x);
        assert_eq!(f(&q(1, 3)).to_bits(), 0x3eaa_aaab); // 0.0101..., rounds up
        assert_eq!(f(&q(-1, 3)).to_bits(), 0xbeaa_aaab);
        assert_eq!(f(&q(0, 1)).to_bits(), 0);
        // Midpoints, ties to even: 1 + 2^-24 between 1 (even) and 1 + 2^-23;
        // 1 + 3 2^-24 between 1 + 2^-23 (odd) and 1 + 2^-22 (even).
        assert_eq!(f(&(pow2(0) + pow2(-24))), 1.0);
        assert_eq!(f(&(pow2(0) + Rational::from(3) * pow2(-24))), 1.0 + 2.0 * f32::EPSILON);
        assert_eq!(f(&-(pow2(0) + pow2(-24))), -1.0);
        // One part in 2^100 off a midpoint decides it.
        assert_eq!(f(&(pow2(0) + pow2(-24) + pow2(-124))), 1.0 + f32::EPSILON);
        assert_eq!(f(&(pow2(0) + pow2(-24) - pow2(-124))), 1.0);
        // Subnormals: 2^-150 is the midpoint between +0.0 and 2^-149 (even:
        // 0); 3 2^-150 between 2^-149 (odd) and 2^-148 (even).
        assert_eq!(f(&pow2(-150)).to_bits(), 0);
        assert_eq!(f(&-pow2(-150)).to_bits(), 0x8000_0000);
        assert_eq!(f(&(pow2(-150) + pow2(-400))).to_bits(), 1);
        assert_eq!(f(&(Rational::from(3) * pow2(-150))).to_bits(), 2);
        assert_eq!(f(&pow2(-149)).to_bits(), 1);
        assert_eq!(f(&pow2(-1000)).to_bits(), 0);
        assert_eq!(f(&-pow2(-1000)).to_bits(), 0x8000_0000);
        // The largest subnormal rounds up into the normals from just below
        // the midpoint's far side: 2^-126 - 2^-150 is the midpoint between
        // the largest subnormal (odd) and 2^-126 (even).
        assert_eq!(f(&(pow2(-126) - pow2(-150))), f32::MIN_POSITIVE);
        assert_eq!(f(&(pow2(-126) - pow2(-150) - pow2(-300))).to_bits(), 0x007f_ffff);
        // Overflow: f32::MAX = 2^128 - 2^104; the threshold 2^128 - 2^103
        // is a midpoint whose even side is 2^128: inf.
        let max = pow2(128) - pow2(104);
        assert_eq!(f(&max), f32::MAX);
        assert_eq!(f(&(pow2(128) - pow2(103) - pow2(-10))), f32::MAX);
        assert_eq!(f(&(pow2(128) - pow2(103))), f32::INFINITY);
        assert_eq!(f(&-(pow2(128) - pow2(103))), f32::NEG_INFINITY);
        assert_eq!(f(&pow2(5000)), f32::INFINITY);
        // Powers of two across the whole range are exact.
        for e in -149..=127 {
            assert_eq!(f(&pow2(e)) as f64, 2f64.powi(e), "2^{e}");
        }
    }

    /// A reproducible xorshift generator (no dependency).
    struct Xorshift(u64);
    impl Xorshift {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        /// A random integer of exactly 1 + (r % 128) bits.
        fn integer(&mut self) -> Integer {
            let nbits = 1 + (self.next() % 128) as u32;
            let mut x = Integer::from(self.next() | 1 << 63);
            while x.significant_bits() < nbits {
                x = (x << 64u32) + self.next();
            }
            let excess = x.significant_bits() - nbits;
            x >> excess
        }
    }

    #[test]
    fn rounding_agrees_with_mpfr_on_random_rationals() {
        let mut rng = Xorshift(0x9e37_79b9_7f4a_7c15);
        for i in 0..20_000 {
            // Numerators and denominators of 1 to 128 bits, scaled by 2^s,
            // -200 <= s < 200: normal, subnormal, zero and overflowing
            // results alike. Every tenth value is the midpoint above a
            // random finite f32, or 2^-300 off it.
            let shift = (rng.next() % 400) as i32 - 200;
            let mut x = Rational::from((rng.integer(), rng.integer())) * pow2(shift);
            if i % 10 == 0 {
                let f = f32::from_bits(rng.next() as u32 & 0x7fff_ffff);
                let f = if f.is_finite() { f } else { f32::MAX };
                let above = if f == f32::MAX { pow2(128) } else { Rational::from_f32(f.next_up()).unwrap() };
                let mid = (Rational::from_f32(f).unwrap() + above) / 2u32;
                x = mid + [Rational::new(), pow2(-300), -pow2(-300)][(rng.next() % 3) as usize].clone();
            }
            if rng.next().is_multiple_of(2) {
                x = -x;
            }
            let expected = mpfr_rounding(&x).expect("4096 bits hold every dyadic value here and separate the rest");
            assert_eq!(round_rational_to_f32(&x).to_bits(), expected.to_bits(), "{x}");
        }
    }

    #[test]
    fn bf16_rounding_agrees_with_mpfr_on_random_rationals_and_midpoints() {
        let mut rng = Xorshift(0x2545_f491_4f6c_dd1d);
        for i in 0..5_000 {
            let shift = (rng.next() % 400) as i32 - 200;
            let mut x = Rational::from((rng.integer(), rng.integer())) * pow2(shift);
            if i % 4 == 0 {
                // A bf16 midpoint (bits with the 9th significant bit set, as
                // an f32, exact), or 2^-300 off it.
                let m = f32::from_bits((rng.next() as u32 & 0x7fff_0000) | 0x8000);
                let m = if m.is_finite() { m } else { 1.5 };
                x = Rational::from_f32(m).unwrap()
                    + [Rational::new(), pow2(-300), -pow2(-300)][(rng.next() % 3) as usize].clone();
            }
            let lo = crate::mpfr::round_to_bf16(&Float::with_val_round(4096, &x, Round::Down).0);
            let hi = crate::mpfr::round_to_bf16(&Float::with_val_round(4096, &x, Round::Up).0);
            assert_eq!(lo.to_bits(), hi.to_bits(), "{x}");
            assert_eq!(round_rational_to_bf16(&x).to_bits(), lo.to_bits(), "{x}");
        }
        // Ties by hand: 1 + 2^-8 to 1 (even), 1 + 3 2^-8 to 1 + 2^-6 (even);
        // 2^-134 to +0.0, 3 2^-134 to 2^-132; the overflow midpoint to inf.
        assert_eq!(round_rational_to_bf16(&(pow2(0) + pow2(-8))), 1.0);
        assert_eq!(round_rational_to_bf16(&(pow2(0) + Rational::from(3) * pow2(-8))), 1.0 + 2f32.powi(-6));
        assert_eq!(round_rational_to_bf16(&pow2(-134)).to_bits(), 0);
        assert_eq!(round_rational_to_bf16(&(Rational::from(3) * pow2(-134))), 2f32.powi(-132));
        assert_eq!(round_rational_to_bf16(&(pow2(128) - pow2(119))), f32::INFINITY);
        assert_eq!(round_rational_to_bf16(&(pow2(128) - pow2(119) - pow2(-5))), f32::from_bits(0x7f7f_0000));
        let r = Rat::input(1.5).round_bf16();
        assert_eq!((r.decision, r.certain), (Some(1.5), true));
        let n = Rat::input(f32::NAN).round_bf16();
        assert_eq!((n.decision, n.certain), (None, false));
    }

    #[test]
    fn values_that_are_not_finite_rationals_are_never_numbers() {
        let one = Rat::input(1.0);
        let zero = Rat::input(0.0);
        let not = |r: &Rat| {
            assert_eq!(r.value(), None);
            assert!(r.to_f32().is_nan());
            assert_eq!(r.cmp_f32(0.0), None);
            assert_eq!(r.cmp_num(&Rat::input(1.0)), None);
        };
        not(&Rat::input(f32::INFINITY));
        not(&Rat::input(f32::NEG_INFINITY));
        not(&Rat::input(f32::NAN));
        not(&one.div(&zero));
        not(&zero.div(&zero));
        not(&one.exp());
        // They propagate through every operation, even a product by zero.
        let inf = Rat::input(f32::INFINITY);
        for r in [zero.mul(&inf), inf.add(&one).neg().abs(), one.div(&zero).mul(&zero), one.add(&one.div(&zero))] {
            not(&r);
        }
        // Through a whole op: a row holding +inf, and a row whose L1 norm
        // is a forced zero (the clamp imposed off, so d = n = 0).
        use crate::case::seqwise_loss::{Objective, SeqwiseCase};
        use crate::op::{seqwise_loss::SeqwiseLoss, Op};
        let p = SeqwiseLoss::exact_profile();
        let c = SeqwiseCase::dense(1, 2, vec![f32::INFINITY, 0.5], Objective::ProvidedMap { map: vec![true, true] });
        let b = SeqwiseLoss::backward_on::<Rat>(&c, &p, None).unwrap().out;
        b.grad.iter().for_each(not);
        let f = SeqwiseLoss::forward_on::<Rat>(&c, &p, None).unwrap().out;
        not(&f.raw);
        let c = SeqwiseCase::dense(1, 2, vec![0.0, -0.0], Objective::ProvidedMap { map: vec![true, false] });
        let keep_zero = crate::profile_oracle::seqwise_loss::Decisions { keep_norm: vec![true], gate: vec![true] };
        let b = SeqwiseLoss::backward_on::<Rat>(&c, &p, Some(&keep_zero)).unwrap().out;
        b.grad.iter().for_each(not);
        // Representable values: exact arithmetic, exp(0) = 1.
        assert_eq!(one.div(&Rat::input(3.0)).mul(&Rat::input(3.0)), one);
        assert_eq!(zero.exp(), one);
        assert_eq!(Rat::input(-0.0).cmp_f32(0.0), Some(Ordering::Equal));
        assert_eq!(one.cmp_f32(f32::INFINITY), Some(Ordering::Less));
        assert_eq!(one.cmp_f32(f32::NEG_INFINITY), Some(Ordering::Greater));
        assert_eq!(one.cmp_f32(f32::NAN), None);
    }
}
