//! Value types for the generic op implementations.
//!
//! Every op is written once (see [`crate::profile_oracle`]) against [`Num`].
//! Running it on `f32` gives the profile oracle's bits; on [`Bounded`] the same
//! bits plus a rigorous bound on their distance from the exact value (running
//! error analysis, docs/ops/README.md#the-accuracy-bound); on
//! [`crate::mpfr::Exact`] the exact value.

use crate::bf16::Rounding;
use std::cmp::Ordering;

/// Unit roundoff of f32, u = 2^-24.
pub const U_F32: f64 = 1.0 / 16_777_216.0;
/// 2^-150: below the normal range, the rounding error of a product or a
/// quotient is absolute (half the smallest subnormal), not relative.
pub const ETA_F32: f64 = 7.006_492_321_624_085e-46;

/// Arithmetic as the profile executes it: each operation rounds once.
pub trait Num: Clone + std::fmt::Debug {
    /// An exact input value.
    fn input(x: f32) -> Self;
    /// +0.0, exact.
    fn zero() -> Self {
        Self::input(0.0)
    }
    fn add(&self, y: &Self) -> Self;
    fn mul(&self, y: &Self) -> Self;
    fn div(&self, y: &Self) -> Self;
    fn neg(&self) -> Self;
    fn abs(&self) -> Self;
    /// e^x, correctly rounded where the type rounds (every transcendental is
    /// the exactly rounded f32 of the true value:
    /// docs/ops/README.md#the-correctly-rounded-exp).
    fn exp(&self) -> Self;
    /// Compares the value of this type (the f32 for f32 and Bounded, the exact
    /// value for Exact) with an f32 constant; `None` when the value is NaN.
    fn cmp_f32(&self, c: f32) -> Option<Ordering>;
    /// Compares two values of this type (as [`Num::cmp_f32`] does); `None`
    /// when either is NaN. Selections (top-k, group scores) order by it.
    fn cmp_num(&self, y: &Self) -> Option<Ordering>;
    /// The f32 this value stands for (its rounding, for the exact type).
    fn to_f32(&self) -> f32;
    /// This value rounded to bf16 (round to nearest even, overflow to +-inf,
    /// NaN stays NaN, subnormals kept): a discrete decision, with whether
    /// the exact value certainly rounds the same way (see [`crate::bf16`]).
    fn round_bf16(&self) -> Rounding<Self>;
    /// A sum in no known order ([`crate::order::ReductionOrder::Any`]). The
    /// default is the serial sum from +0.0: one admissible value (for f32),
    /// the exact sum (for the exact types, where the order does not matter),
    /// and for [`Bounded`] that serial value with its own rigorous bound,
    /// which says nothing about other orders. [`crate::any_order::AnyOrder`]
    /// overrides it with a bound that holds for every order.
    fn sum_any_order(xs: &[Self]) -> Self {
        let mut acc = Self::zero();
        for x in xs {
            acc = acc.add(x);
        }
        acc
    }
    /// `sum over i of a[i] * b[i]` as the tensor core's MMA steps compute it
    /// on `model` ([`crate::mma::MmaModel::dot_chain`] from +0). The default
    /// is the serial sum of the products: the exact value for the exact
    /// types (the real number does not depend on the model). `f32` runs the
    /// model; [`Bounded`] runs it with a rigorous bound.
    fn dot_mma(_model: &crate::mma::MmaModel, a: &[Self], b: &[f32]) -> Self {
        let mut acc = Self::zero();
        for (x, &y) in a.iter().zip(b) {
            acc = acc.add(&x.mul(&Self::input(y)));
        }
        acc
    }
}

/// A value type that carries, beside one f32 value, a rigorous bound on the
/// distance from the exact value of the value a subject computes:
/// [`Bounded`] (the profile's own value) and [`crate::any_order::AnyOrder`]
/// (any admissible evaluation). What [`crate::mpfr::reference`] judges with.
pub trait Bounds: Num {
    /// The bound (+inf: none holds).
    fn bound(&self) -> f64;
}

impl Bounds for Bounded {
    fn bound(&self) -> f64 {
        self.err
    }
}

impl Num for f32 {
    fn input(x: f32) -> Self {
        x
    }
    fn add(&self, y: &Self) -> Self {
        self + y
    }
    fn mul(&self, y: &Self) -> Self {
        self * y
    }
    fn div(&self, y: &Self) -> Self {
        self / y
    }
    fn neg(&self) -> Self {
        -self
    }
    fn abs(&self) -> Self {
        f32::abs(*self)
    }
    fn exp(&self) -> Self {
        crate::expf::exp_f32(*self)
    }
    fn cmp_f32(&self, c: f32) -> Option<Ordering> {
        self.partial_cmp(&c)
    }
    fn cmp_num(&self, y: &Self) -> Option<Ordering> {
        self.partial_cmp(y)
    }
    fn to_f32(&self) -> f32 {
        *self
    }
    /// The profile's decision; plain f32 carries no bound, so it vouches
    /// for nothing about the exact value.
    fn round_bf16(&self) -> Rounding<Self> {
        let r = crate::bf16::round_f32(*self);
        Rounding { decision: Some(r), certain: false, value: r }
    }
    fn dot_mma(model: &crate::mma::MmaModel, a: &[Self], b: &[f32]) -> Self {
        model.dot_chain(a, b, 0.0)
    }
}

/// An f32 result `x` with a rigorous bound `err >= |x - exact|`, where exact is
/// the real-number value of the same expression on the same inputs (taking the
/// same discrete decisions). The bound is kept in f64 and every operation on it
/// is rounded upward (`next_up` after round-to-nearest), so the bound itself is
/// never too small. `err` is +inf when no finite bound holds (overflow, NaN, a
/// quotient whose denominator's bound reaches zero).
///
/// # Derivation (running error analysis, docs/ops/README.md#the-accuracy-bound)
///
/// Write x^, y^ for the computed operands, x, y for the exact ones, e_x, e_y
/// for their bounds, and z^ = fl(x^ op y^). IEEE round-to-nearest gives, for a
/// normal result, z^ = (x^ op y^) / (1 + d) with |d| <= u = 2^-24, hence
/// |z^ - (x^ op y^)| <= u |z^|; below the normal range a product or quotient is
/// off by at most half the smallest subnormal, eta = 2^-150, and a sum is
/// exact (Hauser). Then, by the triangle inequality:
///
/// - add: |z^ - (x + y)| <= |z^ - (x^ + y^)| + |x^ - x| + |y^ - y|
///   <= u|z^| + e_x + e_y.
/// - mul: x^ y^ - x y = x^ (y^ - y) + y (x^ - x) and |y| <= |y^| + e_y, so
///   |z^ - x y| <= u|z^| + eta + |x^| e_y + |y^| e_x + e_x e_y.
/// - div: with z' = x^ / y^ exactly, x^/y^ - x/y = (x^ - x)/y + z' (y - y^)/y,
///   and |y| >= |y^| - e_y > 0 (else no finite bound), so
///   |z' - x/y| <= (e_x + |z'| e_y) / (|y^| - e_y), with |z'| <= (1+u)|z^| + eta;
///   add the rounding u|z^| + eta.
/// - max(x, c), |x|, -x and a select are 1-Lipschitz (or exact): e_z = e_x.
///
/// The [`crate::mpfr::Exact`] type applies the same rules with 2^-p in place
/// of u, no eta (MPFR's exponent range reaches 2^(+-2^30); an underflow to
/// zero is bounded by MPFR's smallest positive number) and no rounding term
/// where MPFR reports the operation exact, its bound held in a
/// [`crate::mpfr::Bound`] (any magnitude MPFR reaches) instead of an f64.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bounded {
    pub x: f32,
    pub err: f64,
}

/// a + b rounded upward (any signs: the rounded sum is 0 only when the
/// exact one is, as a sum never underflows to zero).
pub fn add_up(a: f64, b: f64) -> f64 {
    let s = a + b;
    if s == 0.0 {
        s
    } else {
        s.next_up()
    }
}
/// a * b rounded upward (a, b >= 0). A product that underflows to 0 from
/// non-zero factors comes back as 2^-1074, never 0. 0 * inf is +inf: in a
/// bound's term |x| e_y, either an infinite bound (nothing known of y) or
/// an infinite value, and no finite bound is claimed for either.
pub fn mul_up(a: f64, b: f64) -> f64 {
    if a == 0.0 || b == 0.0 {
        if a.is_infinite() || b.is_infinite() {
            f64::INFINITY
        } else {
            0.0
        }
    } else {
        (a * b).next_up()
    }
}
/// a / b rounded upward (a >= 0, b > 0).
pub fn div_up(a: f64, b: f64) -> f64 {
    let q = a / b;
    if a == 0.0 {
        0.0
    } else {
        q.next_up()
    }
}
/// a - b rounded downward.
pub fn sub_down(a: f64, b: f64) -> f64 {
    (a - b).next_down()
}

impl Bounded {
    /// The rounding error of producing `z` from an exact real result: u|z| in
    /// the standard model, plus eta for products and quotients (absolute error
    /// below the normal range). Non-finite results have no finite bound.
    fn rounding(z: f32, with_eta: bool) -> f64 {
        if !z.is_finite() {
            return f64::INFINITY;
        }
        let r = mul_up(U_F32, z.abs() as f64);
        if with_eta {
            add_up(r, ETA_F32)
        } else {
            r
        }
    }
    fn finite_or_inf(z: f32, err: f64) -> f64 {
        if z.is_finite() && err.is_finite() {
            err
        } else {
            f64::INFINITY
        }
    }
}

impl Num for Bounded {
    fn input(x: f32) -> Self {
        Bounded { x, err: if x.is_finite() { 0.0 } else { f64::INFINITY } }
    }
    fn add(&self, y: &Self) -> Self {
        let z = self.x + y.x;
        // A sum that lands in the subnormal range (or is zero) is exact.
        let round = if z.abs() < f32::MIN_POSITIVE { 0.0 } else { Self::rounding(z, false) };
        let err = add_up(add_up(self.err, y.err), round);
        Bounded { x: z, err: Self::finite_or_inf(z, err) }
    }
    fn mul(&self, y: &Self) -> Self {
        let z = self.x * y.x;
        let (ax, ay) = (self.x.abs() as f64, y.x.abs() as f64);
        let prop = add_up(add_up(mul_up(ax, y.err), mul_up(ay, self.err)), mul_up(self.err, y.err));
        let err = add_up(prop, Self::rounding(z, true));
        Bounded { x: z, err: Self::finite_or_inf(z, err) }
    }
    fn div(&self, y: &Self) -> Self {
        let z = self.x / y.x;
        let ay = y.x.abs() as f64;
        if ay.is_nan() || ay <= y.err {
            return Bounded { x: z, err: f64::INFINITY };
        }
        let az = z.abs() as f64;
        let z_exact = add_up(mul_up(1.0 + U_F32, az), ETA_F32);
        let num = add_up(self.err, mul_up(z_exact, y.err));
        let err = add_up(div_up(num, sub_down(ay, y.err)), Self::rounding(z, true));
        Bounded { x: z, err: Self::finite_or_inf(z, err) }
    }
    fn neg(&self) -> Self {
        Bounded { x: -self.x, err: self.err }
    }
    fn abs(&self) -> Self {
        Bounded { x: self.x.abs(), err: self.err }
    }
    /// z = exp(x^) correctly rounded. By the mean value theorem
    /// |exp(x^) - exp(x)| <= exp(max(x^, x)) |x^ - x| <= exp(x^ + e_x) e_x;
    /// exp(x^ + e_x) is bounded above by MPFR ([`crate::expf::exp_up`]:
    /// no libm accuracy assumed, no underflow to 0). The final rounding adds
    /// u|z| + eta (a subnormal result's error is absolute).
    fn exp(&self) -> Self {
        let z = crate::expf::exp_f32(self.x);
        if !self.x.is_finite() || !self.err.is_finite() {
            return Bounded { x: z, err: f64::INFINITY };
        }
        let prop =
            if self.err == 0.0 { 0.0 } else { mul_up(crate::expf::exp_up(add_up(self.x as f64, self.err)), self.err) };
        let err = add_up(prop, Self::rounding(z, true));
        Bounded { x: z, err: Self::finite_or_inf(z, err) }
    }
    fn cmp_f32(&self, c: f32) -> Option<Ordering> {
        self.x.partial_cmp(&c)
    }
    fn cmp_num(&self, y: &Self) -> Option<Ordering> {
        self.x.partial_cmp(&y.x)
    }
    fn to_f32(&self) -> f32 {
        self.x
    }
    /// The decision is the rounding of x (the profile's f32 value). With
    /// |x - exact| <= err, the exact value lies in [x - err, x + err], and
    /// rounding is monotone: when both ends round to the same bf16 (or both
    /// to zeros), so does the exact value (`certain`, and the rounded value
    /// is exactly the exact one's rounding: bound 0). Otherwise the exact
    /// value's rounding lies between the ends' roundings, and the bound is
    /// the larger distance from r to either. The ends are widened outward
    /// (one f64 ulp), which only makes the test more cautious.
    fn round_bf16(&self) -> Rounding<Self> {
        let r = crate::bf16::round_f32(self.x);
        if !self.x.is_finite() || !self.err.is_finite() {
            return Rounding { decision: Some(r), certain: false, value: Bounded { x: r, err: f64::INFINITY } };
        }
        let x = self.x as f64;
        let lo = crate::bf16::round_f64(if self.err == 0.0 { x } else { (x - self.err).next_down() });
        let hi = crate::bf16::round_f64(if self.err == 0.0 { x } else { (x + self.err).next_up() });
        let certain = lo.to_bits() == hi.to_bits() || (lo == 0.0 && hi == 0.0);
        let err = if certain {
            0.0
        } else {
            // |hi - r| and |r - lo|: differences of f32 values, rounded up
            // (inf where an end rounds to an infinity).
            let dist = |a: f32, b: f32| {
                let d = (a as f64 - b as f64).abs();
                if d == 0.0 {
                    0.0
                } else {
                    d.next_up()
                }
            };
            dist(hi, r).max(dist(r, lo))
        };
        Rounding { decision: Some(r), certain, value: Bounded { x: r, err: Self::finite_or_inf(r, err) } }
    }
    /// The model's value, and a bound that holds for it: the inputs' own
    /// errors times |b|, and for each step (n nonzero terms, c included)
    /// the alignment, n quanta of 2^(e - frac_bits) with e the largest raw
    /// exponent among the terms (a subnormal counts as 2^-126, a product as
    /// the sum of its factors' exponents: never below the exponent the model
    /// aligns by), plus the output's rounding, below one ulp of the aligned
    /// sum: at most 2^-23 (1 + 2^-22) |d| + 2^-149 (|aligned| - |d| < ulp
    /// <= 2^-23 |aligned| under truncation; half that to nearest).
    fn dot_mma(model: &crate::mma::MmaModel, a: &[Self], b: &[f32]) -> Self {
        let xs: Vec<f32> = a.iter().map(|v| v.x).collect();
        let mut err = 0.0;
        for (v, &w) in a.iter().zip(b) {
            err = add_up(err, mul_up(v.err, w.abs() as f64));
        }
        let raw = crate::mma::raw_exponent;
        let out_rel = add_up(1.0, 2f64.powi(-22)) * 2f64.powi(-23);
        let mut d = 0.0f32;
        for (xa, xb) in xs.chunks(crate::mma::K).zip(b.chunks(crate::mma::K)) {
            let next = model.dot_add(xa, xb, d);
            let (mut n, mut top) = (usize::from(d != 0.0), if d != 0.0 { raw(d) } else { i32::MIN });
            for (&x, &y) in xa.iter().zip(xb) {
                if x != 0.0 && y != 0.0 {
                    n += 1;
                    top = top.max(raw(x) + raw(y));
                }
            }
            // 2^(top - frac_bits) is at least 2^(-252 - 30) and at most
            // 2^254: an f64, exactly.
            let align = if n == 0 { 0.0 } else { mul_up(n as f64, 2f64.powi(top - model.frac_bits as i32)) };
            let out = add_up(mul_up(out_rel, (next as f64).abs()), ETA_F32 * 2.0);
            err = add_up(err, add_up(align, out));
            d = next;
        }
        Bounded { x: d, err: Self::finite_or_inf(d, err) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_add_covers_rounding() {
        let a = Bounded::input(1.0);
        let b = Bounded::input(f32::EPSILON / 4.0);
        let s = a.add(&b);
        assert_eq!(s.x, 1.0);
        let exact = 1.0f64 + (f32::EPSILON / 4.0) as f64;
        assert!((s.x as f64 - exact).abs() <= s.err);
    }

    /// The bound of a quotient must cover every dividend and divisor in
    /// the operands' intervals: the worst of the four corners, |x' / y' -
    /// z| with x' = x +- ex and y' = y +- ey, in exact rationals. A divisor
    /// known to half its value (y = 11 +- 5.5) makes the true quotient up to
    /// twice z; 13/11 rounds down in f32 (by 4.6e-8 of itself, found by
    /// trying small quotients), so the bound needs its (1 + u) on |z|.
    #[test]
    fn bounded_div_covers_the_worst_corner_of_its_operands() {
        use rug::Rational;
        let cases = [
            (13.0f32, 0.0, 11.0f32, 5.5),
            (13.0, 2f64.powi(-30), 11.0, 5.5),
            (10.0, 0.0, 37.0, 18.5),
            (-3.0, 0.0, 7.0, 1.0),
            (1.0, 0.0, 3.0, 1.0),
        ];
        for (x, ex, y, ey) in cases {
            let q = Bounded { x, err: ex }.div(&Bounded { x: y, err: ey });
            assert_eq!(q.x, x / y);
            let z = Rational::from_f32(q.x).expect("finite");
            let worst = [(ex, ey), (ex, -ey), (-ex, ey), (-ex, -ey)]
                .iter()
                .map(|&(dx, dy)| {
                    let xs = Rational::from_f64(x as f64).expect("finite") + Rational::from_f64(dx).expect("finite");
                    let ys = Rational::from_f64(y as f64).expect("finite") + Rational::from_f64(dy).expect("finite");
                    (xs / ys - &z).abs()
                })
                .max()
                .expect("four corners");
            assert!(Rational::from_f64(q.err).expect("finite") >= worst, "{x}/{y}: {} < {}", q.err, worst.to_f64());
        }
    }

    /// A bounded value's f32 is the profile's own value x, whatever its
    /// bound (what a bf16 decision reads when the rounding is uncertain).
    #[test]
    fn a_bounded_values_f32_is_its_own_value() {
        let third = Bounded::input(1.0).div(&Bounded::input(3.0));
        assert!(third.err > 0.0);
        assert_eq!(third.to_f32(), 1.0f32 / 3.0);
        assert_eq!(Bounded::input(-2.5).to_f32(), -2.5);
    }

    /// Bounded's MMA chain: the model's value, and a bound that covers the
    /// exact dot product (rationals), a cancelled pair that still sets the
    /// grid included (2^10 - 2^10 + 2^-20 is +0 on the model, 2^-20
    /// exactly), on chains of one to four steps.
    #[test]
    fn bounded_mma_chains_cover_the_exact_dot_product() {
        use crate::mma::H100_BF16;
        use rug::Rational;
        let check = |a: &[f32], b: &[f32]| {
            let inputs: Vec<Bounded> = a.iter().map(|&x| Bounded::input(x)).collect();
            let got = Bounded::dot_mma(&H100_BF16, &inputs, b);
            assert_eq!(got.x.to_bits(), H100_BF16.dot_chain(a, b, 0.0).to_bits());
            let exact = a.iter().zip(b).fold(Rational::new(), |s, (x, y)| {
                s + Rational::from_f32(*x).expect("finite") * Rational::from_f32(*y).expect("finite")
            });
            let err = (Rational::from_f32(got.x).expect("finite") - exact).abs();
            assert!(Rational::from_f64(got.err).expect("finite") >= err, "{a:?} {b:?}: {} < {}", got.err, err.to_f64());
            got
        };
        let cancel = check(&[1024.0, -1024.0, 2f32.powi(-20)], &[1.0, 1.0, 1.0]);
        assert_eq!(cancel.x, 0.0);
        // The grid is set by the factors' exponents together: 1 * 32 has the
        // exponent 0 + 5, its grid 2^-20, and 32 * 1.75 * 2^-26 (0.875 of
        // it) truncates to 0.
        let scaled = check(&[1.0, -1.0, 1.75 * 2f32.powi(-26)], &[32.0; 3]);
        assert_eq!(scaled.x, 0.0);
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for n in [5usize, 16, 17, 40, 64] {
            for _ in 0..50 {
                let mut draw = || {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    let e = (state % 24) as i32 - 12;
                    let v = f32::from_bits(((e + 127) as u32) << 23 | ((state >> 20) as u32 & 0x7f) << 16);
                    if state & (1 << 40) != 0 {
                        -v
                    } else {
                        v
                    }
                };
                let a: Vec<f32> = (0..n).map(|_| draw()).collect();
                let b: Vec<f32> = (0..n).map(|_| draw()).collect();
                check(&a, &b);
            }
        }
    }

    #[test]
    fn bounded_div_by_uncertain_zero_is_unbounded() {
        let y = Bounded { x: 1e-30, err: 1e-29 };
        assert!(Bounded::input(1.0).div(&y).err.is_infinite());
    }

    #[test]
    fn constants_are_exact_powers_of_two() {
        assert_eq!(U_F32, crate::expf::pow2_neg(24));
        assert_eq!(ETA_F32, crate::expf::pow2_neg(150));
    }

    #[test]
    fn upward_products_never_reach_zero() {
        let tiny = f64::from_bits(1);
        assert_eq!(mul_up(tiny, tiny), tiny);
        assert_eq!(mul_up(crate::expf::pow2_neg(1024), 1e-300), tiny);
        assert_eq!(mul_up(0.0, f64::INFINITY), f64::INFINITY);
        assert_eq!(div_up(tiny, 1e300), tiny);
    }

    #[test]
    fn bounded_bf16_roundings_are_certain_only_inside_one_interval() {
        // 1 + 2^-9 with a small bound: every value rounds to 1, certain,
        // bound 0 (the exact value's rounding is exactly 1).
        let r = Bounded { x: 1.0 + 2f32.powi(-9), err: 1e-6 }.round_bf16();
        assert_eq!((r.decision, r.certain, r.value), (Some(1.0), true, Bounded { x: 1.0, err: 0.0 }));
        // On the midpoint 1 + 2^-8 with a bound: 1 or 1 + 2^-7, uncertain,
        // the bound reaching the farther one.
        let r = Bounded { x: 1.0 + 2f32.powi(-8), err: 1e-9 }.round_bf16();
        assert_eq!((r.decision, r.certain), (Some(1.0), false));
        assert!(r.value.err >= 2f64.powi(-7) && r.value.err < 2f64.powi(-7) * (1.0 + 1e-15));
        // Exactly the midpoint with bound 0: the rounding of the value
        // itself, to even, certain.
        let r = Bounded::input(1.0 + 2f32.powi(-8)).round_bf16();
        assert_eq!((r.decision, r.certain, r.value.err), (Some(1.0), true, 0.0));
        // Around zero: zeros only, certain.
        let r = Bounded { x: 2f32.powi(-140), err: 2f64.powi(-139) }.round_bf16();
        assert!(r.certain && r.value.x == 0.0 && r.value.err == 0.0);
        // Non-finite, or unbounded: no claim, no finite bound.
        for b in [Bounded::input(f32::NAN), Bounded::input(f32::INFINITY), Bounded { x: 1.0, err: f64::INFINITY }] {
            let r = b.round_bf16();
            assert!(!r.certain && r.value.err.is_infinite(), "{b:?}");
        }
        // A finite value rounding to inf: unbounded (an overflow).
        let r = Bounded { x: f32::MAX, err: 0.0 }.round_bf16();
        assert_eq!(r.decision, Some(f32::INFINITY));
        assert!(r.value.err.is_infinite());
    }

    #[test]
    fn bounded_overflow_is_unbounded() {
        let big = Bounded::input(f32::MAX);
        assert!(big.add(&big).err.is_infinite());
    }
}
