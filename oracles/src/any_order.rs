//! [`AnyOrder`]: the value type that judges a subject claiming no profile
//! (docs/ops/README.md#the-accuracy-bound: accuracy within a rigorous bound for
//! an unknown reduction order). Each op, written once over [`Num`], run on this
//! type with its `any-order` profile (every sum [`ReductionOrder::Any`]) gives,
//! for every output, a bound that holds whatever order and association the
//! subject sums in.
//!
//! # What a subject may do (the admissible evaluations)
//!
//! The rules of docs/ops/README.md#rules-every-profile-keeps, with the worst
//! order: f32, every operation rounded to nearest even, subnormals kept,
//! transcendentals correctly rounded (see [`AnyOrder::exp`]), the association
//! inside each formula as docs/ops/ writes it, and
//! - every sum ([`ReductionOrder::Any`]) in any order and any association
//!   (a tree of additions, +0.0 padding allowed: adding +0.0 is exact);
//! - any product may be contracted into the addition that consumes it (an
//!   FMA: the product unrounded, one rounding for both).
//!
//! # The value
//!
//! `x` is one admissible value (the serial order without contraction: what
//! the f32 profile oracle of the `any-order` profile computes). `err`
//! bounds |v - exact| for every admissible value v (x included), exact being
//! the real-number value on the same discrete decisions. `spread` bounds
//! |v - x| for every admissible v; 0 means the value is *determined*: every
//! admissible evaluation gives x's bits (an input, a sigmoid of an input, a
//! sum of two determined values with no product in it). Decisions on a
//! determined value are the subject's decisions too; on another one they may
//! not be (see [`count_ambiguous`]).
//!
//! Bounds on magnitudes come from the value: every admissible |v| is at most
//! |x| + spread ([`AnyOrder::mag`]; an unrounded product that a subject
//! contracts into an FMA is an admissible value too, so `spread` and `err`
//! cover it) and |exact| at most |x| + err.
//!
//! # The rules (u = 2^-24, eta = 2^-150; every bound rounded upward)
//!
//! Write v_x for an admissible value of x, X for the exact one.
//! - add, both determined: the subject computes z = fl(x + y) as the
//!   reference does: [`crate::num::Bounded`]'s rule, spread 0. Otherwise
//!   |v_x + v_y| <= mag_x + mag_y =: m, and the rounding (an FMA's
//!   included, which may underflow) is at most u m + eta:
//!   err = e_x + e_y + u m + eta, spread = s_x + s_y + u m + eta + u|z|.
//! - mul: |v_x v_y - X Y| <= |v_x| e_y + |Y| e_x <= (|x| + s_x) e_y +
//!   (|y| + e_y) e_x; the rounding at most u (|x| + s_x)(|y| + s_y) + eta.
//!   Both determined: the subject's product is fl(xy), or xy itself when
//!   contracted, so spread = |xy - fl(xy)| (exact products: 0).
//! - div (never contracted): |v_y| >= |y| - s_y =: l > 0 and
//!   |Y| >= |y| - e_y > 0 (else no finite bound); v_x/v_y - X/Y =
//!   (v_x - X)/v_y + (X/Y)(Y - v_y)/v_y, so
//!   err = (e_x + (|x| + e_x)/(|y| - e_y) e_y) / l + u (|x| + s_x)/l + eta.
//!   Both determined: [`crate::num::Bounded`]'s rule, spread 0.
//! - a sum in any order of n terms (at most n - 1 roundings on any path from a
//!   term to the result; the gamma(h) of docs/ops/README.md#the-accuracy-bound
//!   with the worst depth h = n - 1): |s^ - sum v_i| <= gamma(n-1) sum mag_i +
//!   (n-1)(1 + gamma(n-1)) eta (the eta for additions that are FMAs), so err =
//!   sum e_i + that; terms that are exact, determined zeros (skipped padding
//!   rows) take part in no rounding and are not counted.
//! - an output that some admissible evaluation may overflow
//!   (|x| + spread > f32::MAX, or a sum whose partial sums may) has no finite
//!   bound (`unbounded`), as a non-finite x has.
//! - |x|, -x: exact. exp and the bf16 rounding: see each.
//!
//! # Decisions
//!
//! The op's decisions (the clamp max(n, eps), the gate, the router's
//! selections, the bf16 roundings) are taken on x. Where the subject may
//! decide otherwise:
//! - a bf16 rounding is handled in the value (see [`AnyOrder::round_bf16`]):
//!   the subject may take either neighbour its admissible values round to,
//!   and the bound reaches both; the exact oracle takes x's rounding;
//! - a comparison ([`Num::cmp_f32`], [`Num::cmp_num`]) whose outcome the
//!   spread leaves open is counted as *ambiguous* ([`count_ambiguous`]): the
//!   subject may have taken the other branch, and a branch changes outputs
//!   by more than any rounding (the gate, a top-k choice). Such a run's
//!   outputs are reported undetermined, counted, never passed
//!   ([`crate::mpfr::reference`]). Comparisons on determined values (the
//!   router's selections on s + bias, the counts, the top-k of the inputs)
//!   are never ambiguous; in practice only a clamp tie in a row of two or
//!   more experts is (the backwards of 51 of 1000 generated router cases,
//!   seed 5; none of 1000 seqwise_loss and 300 shared_expert cases).
//!   The clamp max(n, eps) alone is continuous and could be bounded across
//!   both branches; the gate that shares its comparison is not, so the row
//!   is counted as a whole. The count is per run, not per output: one
//!   ambiguous row leaves every output of the case undetermined.
//!
//! [`ReductionOrder::Any`]: crate::order::ReductionOrder::Any

use crate::bf16::Rounding;
use crate::num::{add_up, div_up, mul_up, sub_down, Bounded, Bounds, Num, ETA_F32, U_F32};
use std::cell::Cell;
use std::cmp::Ordering;

thread_local! {
    static AMBIGUOUS: Cell<usize> = const { Cell::new(0) };
}

/// Runs `f`, and counts the comparisons on [`AnyOrder`] values during it
/// whose outcome a subject may have taken the other way (see the module
/// docs). The count of an enclosing call comes back when `f` returns or
/// unwinds.
pub fn count_ambiguous<T>(f: impl FnOnce() -> T) -> (T, usize) {
    struct Restore(usize);
    impl Drop for Restore {
        fn drop(&mut self) {
            AMBIGUOUS.with(|a| a.set(self.0));
        }
    }
    let restore = Restore(AMBIGUOUS.with(|a| a.replace(0)));
    let out = f();
    let n = AMBIGUOUS.with(|a| a.get());
    drop(restore);
    (out, n)
}

fn note_ambiguous() {
    AMBIGUOUS.with(|a| a.set(a.get().saturating_add(1)));
}

/// gamma(k) = k u / (1 - k u), rounded upward (+inf once k u >= 1).
pub fn gamma(k: usize) -> f64 {
    let ku = mul_up(k as f64, U_F32);
    let den = sub_down(1.0, ku);
    if den <= 0.0 {
        f64::INFINITY
    } else {
        div_up(ku, den)
    }
}

/// One admissible f32 value of an expression, and bounds that hold for
/// every admissible evaluation of it (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AnyOrder {
    /// One admissible value: serial sums, no contraction.
    pub x: f32,
    /// |v - exact| <= err for every admissible value v (+inf: no bound).
    pub err: f64,
    /// |v - x| <= spread for every admissible value v (0: determined).
    pub spread: f64,
}

impl AnyOrder {
    fn determined(&self) -> bool {
        self.spread == 0.0
    }

    /// An upper bound of |v| for every admissible v (what a rounding's
    /// error is relative to; the exact value's magnitude, bounded by
    /// |x| + err, is not needed there).
    pub fn mag(&self) -> f64 {
        add_up(self.x.abs() as f64, self.spread)
    }

    /// The value `x` with the bounds given, or no bound where x is not
    /// finite, a bound is not, or an admissible value may overflow.
    fn finish(x: f32, err: f64, spread: f64) -> Self {
        if !x.is_finite() {
            // A determined infinity or NaN is still every subject's value
            // (decisions on it are certain); its bound says nothing.
            return AnyOrder { x, err: f64::INFINITY, spread: if spread == 0.0 { 0.0 } else { f64::INFINITY } };
        }
        // (A determined value is x itself: finite.)
        if !spread.is_finite() || (spread > 0.0 && add_up(x.abs() as f64, spread) > f32::MAX as f64) {
            return AnyOrder { x, err: f64::INFINITY, spread: f64::INFINITY };
        }
        // No bound on the distance from the exact value (an input that
        // overflowed, say) does not make the admissible values any less
        // known: the spread stays, and decisions on it stay certain.
        AnyOrder { x, err: if err.is_finite() { err } else { f64::INFINITY }, spread }
    }

    /// The same value as a [`Bounded`] (for the rules that apply when
    /// every operand is determined: the subject computes what x computes).
    fn as_bounded(&self) -> Bounded {
        Bounded { x: self.x, err: self.err }
    }

    fn from_bounded(b: Bounded, spread: f64) -> Self {
        AnyOrder::finish(b.x, b.err, spread)
    }

    /// An infinity or a NaN that every admissible evaluation computes.
    fn fixed_nonfinite(&self) -> bool {
        !self.x.is_finite() && self.determined()
    }

    /// Finite in every admissible evaluation ([`AnyOrder::finish`] keeps a
    /// finite spread only where no admissible value may overflow).
    fn certainly_finite(&self) -> bool {
        self.x.is_finite() && self.spread.is_finite()
    }

    /// u |v| + eta for |v| <= m: one rounding, an FMA's or an underflowing
    /// product's included.
    fn rounding(m: f64) -> f64 {
        add_up(mul_up(U_F32, m), ETA_F32)
    }

    /// Whether the admissible values [x - spread, x + spread] may compare
    /// with `c` otherwise than x does.
    fn straddles(&self, c: f64) -> bool {
        if self.determined() {
            return false;
        }
        if self.x.is_nan() {
            // NaN here, perhaps a number in another order (an overflow
            // that another order avoids): either outcome.
            return true;
        }
        let x = self.x as f64;
        let (lo, hi) = ((x - self.spread).next_down(), (x + self.spread).next_up());
        lo.partial_cmp(&c) != hi.partial_cmp(&c) || lo.is_nan() || hi.is_nan()
    }
}

impl Bounds for AnyOrder {
    fn bound(&self) -> f64 {
        self.err
    }
}

impl Num for AnyOrder {
    fn input(x: f32) -> Self {
        AnyOrder::finish(x, 0.0, 0.0)
    }
    fn add(&self, y: &Self) -> Self {
        if self.determined() && y.determined() {
            return AnyOrder::from_bounded(self.as_bounded().add(&y.as_bounded()), 0.0);
        }
        let z = self.x + y.x;
        if (self.fixed_nonfinite() && y.certainly_finite()) || (y.fixed_nonfinite() && self.certainly_finite()) {
            // inf or NaN plus a value that is finite in every evaluation:
            // the same inf or NaN in every one.
            return AnyOrder::finish(z, f64::INFINITY, 0.0);
        }
        let round = AnyOrder::rounding(add_up(self.mag(), y.mag()));
        let err = add_up(add_up(self.err, y.err), round);
        // The reference's own rounding: u|z| (a sum's is exact below the
        // normal range, and u|z| >= 0 covers that).
        let spread = add_up(add_up(add_up(self.spread, y.spread), round), mul_up(U_F32, z.abs() as f64));
        AnyOrder::finish(z, err, spread)
    }
    fn mul(&self, y: &Self) -> Self {
        let z = self.x * y.x;
        let (ax, ay) = (self.x.abs() as f64, y.x.abs() as f64);
        // The exact product of two f32 is exact in f64 (48 bits, exponents
        // far inside f64's range); its distance from the f32 z is rounded
        // up (below f32's normal range it may need more than 53 bits).
        let contracted = if !z.is_finite() {
            // inf or NaN whether contracted or not (an overflow's bound is
            // infinite anyway).
            0.0
        } else {
            let d = ((self.x as f64) * (y.x as f64) - z as f64).abs();
            if d == 0.0 {
                0.0
            } else {
                d.next_up()
            }
        };
        if self.determined() && y.determined() {
            // fl(xy) or, contracted into an FMA, xy: both within the
            // Bounded rule's bound (its propagated part covers xy).
            return AnyOrder::from_bounded(self.as_bounded().mul(&y.as_bounded()), contracted);
        }
        let (vx, vy) = (add_up(ax, self.spread), add_up(ay, y.spread));
        let prop = add_up(mul_up(vx, y.err), mul_up(add_up(ay, y.err), self.err));
        let round = AnyOrder::rounding(mul_up(vx, vy));
        let err = add_up(prop, round);
        // |v_x v_y - x y| <= |x| s_y + |y| s_x + s_x s_y, then the subject's
        // rounding and the reference's (|xy - z|).
        let diff = add_up(add_up(mul_up(ax, y.spread), mul_up(ay, self.spread)), mul_up(self.spread, y.spread));
        let spread = add_up(add_up(diff, round), contracted);
        AnyOrder::finish(z, err, spread)
    }
    fn div(&self, y: &Self) -> Self {
        if self.determined() && y.determined() {
            return AnyOrder::from_bounded(self.as_bounded().div(&y.as_bounded()), 0.0);
        }
        let z = self.x / y.x;
        let (ax, ay) = (self.x.abs() as f64, y.x.abs() as f64);
        // Lower bounds of |v_y| and of |Y|: each must be positive for the
        // spread and the bound, respectively, to be finite.
        let (l_sub, l_exact) = (sub_down(ay, y.spread), sub_down(ay, y.err));
        // (NaN: nothing known either.)
        if l_sub.is_nan() || l_sub <= 0.0 {
            return AnyOrder::finish(z, f64::INFINITY, f64::INFINITY);
        }
        let round = AnyOrder::rounding(div_up(add_up(ax, self.spread), l_sub));
        let err = if l_exact > 0.0 {
            let q_exact = div_up(add_up(ax, self.err), l_exact); // >= |X / Y|
            add_up(div_up(add_up(self.err, mul_up(q_exact, y.err)), l_sub), round)
        } else {
            f64::INFINITY
        };
        // v_x/v_y - x/y = (v_x - x)/v_y + (x/y)(y - v_y)/v_y, then the
        // subject's rounding and the reference's (u|z| + eta).
        let q_ref = div_up(ax, ay);
        let diff = div_up(add_up(self.spread, mul_up(q_ref, y.spread)), l_sub);
        let spread = add_up(add_up(diff, round), AnyOrder::rounding(z.abs() as f64));
        AnyOrder::finish(z, err, spread)
    }
    fn neg(&self) -> Self {
        AnyOrder { x: -self.x, ..*self }
    }
    fn abs(&self) -> Self {
        AnyOrder { x: self.x.abs(), ..*self }
    }
    /// exp correctly rounded, as docs/ops/README.md#the-correctly-rounded-exp
    /// demands of every subject (a profile-less one included): the subject's
    /// exp of its own argument v is fl(e^v). No error beyond that is allowed:
    /// an implementation that is off by a few ulps (CUDA's `expf`, 2 ulps;
    /// `__expf`) is not what the spec specifies, and allowing it would need a
    /// declared accuracy of the subject's exp, which no subject states yet.
    ///
    /// |e^v - e^X| <= e^(x + m) e_x with m = max(e_x, s_x) (so v, X <=
    /// x + m), and |e^v| <= e^(x + s_x): err = e^(x+m) e_x + u e^(x+s_x) + eta.
    /// A determined argument gives a determined result.
    fn exp(&self) -> Self {
        if self.determined() {
            return AnyOrder::from_bounded(self.as_bounded().exp(), 0.0);
        }
        let z = crate::expf::exp_f32(self.x);
        if !self.x.is_finite() || !self.spread.is_finite() {
            return AnyOrder::finish(z, f64::INFINITY, f64::INFINITY);
        }
        // e^(x + s) bounds every admissible e^v; e^(x + max(e, s)) the
        // exact one too (+inf where the bound is infinite).
        let top_sub = crate::expf::exp_up(add_up(self.x as f64, self.spread));
        let top = crate::expf::exp_up(add_up(self.x as f64, self.err.max(self.spread)));
        let round = AnyOrder::rounding(top_sub);
        let err = add_up(mul_up(top, self.err), round);
        // |fl(e^v) - fl(e^x)| <= e^(x + s) s + both roundings.
        let spread = add_up(add_up(mul_up(top_sub, self.spread), round), AnyOrder::rounding(z.abs() as f64));
        AnyOrder::finish(z, err, spread)
    }
    fn cmp_f32(&self, c: f32) -> Option<Ordering> {
        if self.straddles(c as f64) {
            note_ambiguous();
        }
        self.x.partial_cmp(&c)
    }
    fn cmp_num(&self, y: &Self) -> Option<Ordering> {
        // A value compared with itself (the selections' NaN test) is
        // never ambiguous: the subject's value equals itself too.
        let same_or_fixed = std::ptr::eq(self, y) || (self.determined() && y.determined());
        if !same_or_fixed {
            let (a, b) = (self.x as f64, y.x as f64);
            let s = add_up(self.spread, y.spread);
            // The admissible values of x - y lie in [a - b - s, a - b + s]
            // (a NaN that is not determined may be a number elsewhere).
            let d = a - b; // exact for finite f32
            let lo_hi = ((d - s).next_down().partial_cmp(&0.0), (d + s).next_up().partial_cmp(&0.0));
            if !s.is_finite() || d.is_nan() || lo_hi.0 != lo_hi.1 {
                note_ambiguous();
            }
        }
        self.x.partial_cmp(&y.x)
    }
    fn to_f32(&self) -> f32 {
        self.x
    }
    /// The subject rounds its own value v to bf16; the exact oracle is
    /// given x's rounding r (an intermediate: h, dh, dz) or rounds the exact
    /// value itself (the output y). Every admissible v and the exact value
    /// lie in J = [x - m, x + m], m = max(err, spread), and rounding is
    /// monotone: when J rounds to one bf16 (or to zeros), every subject
    /// rounds to r and so does the exact value (`certain`, bound 0).
    /// Otherwise the subject may take either neighbour: no decision
    /// (`None`, so that the generic code goes on with this value, not with
    /// an exact r), the value r with a bound of the width of J's roundings,
    /// which reaches from any subject's rounding to the exact side's.
    fn round_bf16(&self) -> Rounding<Self> {
        let r = crate::bf16::round_f32(self.x);
        if !self.x.is_finite() || !self.spread.is_finite() {
            let spread = if self.determined() { 0.0 } else { f64::INFINITY };
            return Rounding { decision: None, certain: false, value: AnyOrder { x: r, err: f64::INFINITY, spread } };
        }
        let x = self.x as f64;
        let ends = |m: f64| {
            if m == 0.0 {
                (r, r)
            } else {
                (crate::bf16::round_f64((x - m).next_down()), crate::bf16::round_f64((x + m).next_up()))
            }
        };
        let dist = |a: f32, b: f32| {
            let d = (a as f64 - b as f64).abs();
            if d == 0.0 {
                0.0
            } else {
                d.next_up()
            }
        };
        let (slo, shi) = ends(self.spread);
        let spread = dist(shi, r).max(dist(r, slo));
        if !self.err.is_finite() {
            // Nothing known of the exact value: no claim about its
            // rounding; the subjects' roundings still lie within `spread`.
            return Rounding { decision: None, certain: false, value: AnyOrder::finish(r, f64::INFINITY, spread) };
        }
        let (lo, hi) = ends(self.err.max(self.spread));
        if lo.to_bits() == hi.to_bits() || (lo == 0.0 && hi == 0.0) {
            return Rounding { decision: Some(r), certain: true, value: AnyOrder::input(r) };
        }
        Rounding { decision: None, certain: false, value: AnyOrder::finish(r, dist(hi, lo), spread) }
    }
    /// Any order, any association, products possibly contracted (see the
    /// module docs). `x` is the serial sum from +0.0, one admissible value.
    fn sum_any_order(xs: &[Self]) -> Self {
        // Exact, determined zeros (skipped padding rows) take part in no
        // rounding: a tree over the other terms, with +0.0 added exactly.
        let terms: Vec<&AnyOrder> = xs.iter().filter(|t| !(t.x == 0.0 && t.err == 0.0 && t.spread == 0.0)).collect();
        let x = xs.iter().fold(0.0f32, |acc, t| acc + t.x);
        match terms.len() {
            0 => return AnyOrder::input(x),
            1 => return AnyOrder::finish(x, terms[0].err, terms[0].spread),
            // a + b in either order is one rounding, as `add` has it (its x
            // may differ from the serial one in the sign of a zero only).
            2 => {
                let s = terms[0].add(terms[1]);
                return AnyOrder::finish(x, s.err, s.spread);
            }
            _ => {}
        }
        let n = terms.len();
        let g = gamma(n - 1);
        if terms.iter().any(|t| !t.x.is_finite()) {
            return AnyOrder::sum_with_nonfinite(x, &terms, g);
        }
        let (mut mags, mut errs, mut spreads, mut abs) = (0.0, 0.0, 0.0, 0.0);
        for t in &terms {
            mags = add_up(mags, t.mag());
            errs = add_up(errs, t.err);
            spreads = add_up(spreads, t.spread);
            abs = add_up(abs, t.x.abs() as f64);
        }
        // Every partial sum of any tree is within (1 + gamma) of the sum of
        // its terms' magnitudes (plus the FMAs' underflows): past f32::MAX,
        // some order may overflow.
        let etas = mul_up(mul_up(n as f64, ETA_F32), add_up(1.0, g));
        let partials = add_up(mul_up(mags, add_up(1.0, g)), etas);
        if partials > f32::MAX as f64 {
            return AnyOrder::finish(x, f64::INFINITY, f64::INFINITY);
        }
        let round = add_up(mul_up(g, mags), etas);
        let err = add_up(errs, round);
        // The reference's serial sum is one tree: gamma(n - 1) sum |x_i|.
        let spread = add_up(add_up(spreads, round), mul_up(g, abs));
        AnyOrder::finish(x, err, spread)
    }
}

impl AnyOrder {
    /// A sum in any order of `terms` (at least 3) some of which are not
    /// finite: NaN in every evaluation where a NaN, or infinities of both
    /// signs, are fixed terms; the one infinity's sign where the infinities
    /// are fixed and of one sign and no partial sum of the finite terms may
    /// overflow (then inf + finite is that inf, whatever the order); else
    /// nothing is known.
    fn sum_with_nonfinite(x: f32, terms: &[&AnyOrder], g: f64) -> Self {
        let unknown = AnyOrder::finish(x, f64::INFINITY, f64::INFINITY);
        let (nonfinite, finite): (Vec<&&AnyOrder>, Vec<&&AnyOrder>) = terms.iter().partition(|t| !t.x.is_finite());
        if nonfinite.iter().any(|t| !t.determined()) {
            return unknown;
        }
        let nan = nonfinite.iter().any(|t| t.x.is_nan())
            || (nonfinite.iter().any(|t| t.x > 0.0) && nonfinite.iter().any(|t| t.x < 0.0));
        if nan {
            return AnyOrder::finish(f32::NAN, f64::INFINITY, 0.0);
        }
        let mut mags = 0.0;
        for t in &finite {
            if !t.certainly_finite() {
                return unknown;
            }
            mags = add_up(mags, t.mag());
        }
        let etas = mul_up(mul_up(terms.len() as f64, ETA_F32), add_up(1.0, g));
        if add_up(mul_up(mags, add_up(1.0, g)), etas) > f32::MAX as f64 {
            return unknown;
        }
        AnyOrder::finish(nonfinite[0].x, f64::INFINITY, 0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::order::ReductionOrder;

    /// Two values whose admissible ranges overlap compare ambiguously (a
    /// subject may order them either way); apart, or fixed, they do not.
    /// 1 and 1 + 2^-23, each known to 2^-20: their difference -2^-23 lies
    /// within the 2^-19 the two spreads allow on either side of 0.
    #[test]
    fn overlapping_values_compare_ambiguously_and_apart_ones_do_not() {
        let near =
            (AnyOrder::finish(1.0, 0.0, 2f64.powi(-20)), AnyOrder::finish(1.0 + 2f32.powi(-23), 0.0, 2f64.powi(-20)));
        let (order, n) = count_ambiguous(|| near.0.cmp_num(&near.1));
        assert_eq!((order, n), (Some(Ordering::Less), 1));
        // And the other way round: a difference of +2^-23 with 2^-19 of room.
        assert_eq!(count_ambiguous(|| near.1.cmp_num(&near.0)), (Some(Ordering::Greater), 1));
        let apart = (AnyOrder::finish(1.0, 0.0, 2f64.powi(-20)), AnyOrder::finish(2.0, 0.0, 2f64.powi(-20)));
        assert_eq!(count_ambiguous(|| apart.0.cmp_num(&apart.1)), (Some(Ordering::Less), 0));
        let fixed = (AnyOrder::input(1.0), AnyOrder::input(1.0 + 2f32.powi(-23)));
        assert_eq!(count_ambiguous(|| fixed.1.cmp_num(&fixed.0)), (Some(Ordering::Greater), 0));
    }

    /// The bound the judging reads (the `Bounds` trait) is the value's own
    /// error bound: 0 for an input, and for a sum one that covers the exact
    /// value's distance without being vacuous (1 + 2^-30 + 2^-30 in any
    /// order is within 3 u of its terms' magnitudes).
    #[test]
    fn the_bound_is_the_values_error_bound() {
        fn bound_of<B: Bounds>(b: &B) -> f64 {
            b.bound()
        }
        assert_eq!(bound_of(&AnyOrder::input(1.5)), 0.0);
        let tiny = 2f32.powi(-30);
        let s = AnyOrder::sum_any_order(&[AnyOrder::input(1.0), AnyOrder::input(tiny), AnyOrder::input(tiny)]);
        let exact = 1.0 + 2.0 * tiny as f64;
        let b = bound_of(&s);
        assert!(b >= (s.x as f64 - exact).abs() && b > 0.0, "{b}");
        assert!(b <= 3.0 * U_F32 * exact, "{b}");
    }

    #[test]
    fn gamma_is_rounded_up_and_ends_at_one_over_u() {
        assert_eq!(gamma(0), 0.0);
        assert!(gamma(1) > U_F32 && gamma(1) < U_F32 * (1.0 + 1e-6));
        assert!(gamma(1 << 24).is_infinite());
    }

    #[test]
    fn inputs_and_determined_sums_carry_no_spread() {
        let a = AnyOrder::input(1.5);
        let b = AnyOrder::input(0.1);
        let s = a.add(&b);
        assert_eq!((s.x, s.spread), (1.5 + 0.1, 0.0));
        assert!(s.err > 0.0);
        // Two terms in any order: one rounding, determined.
        let two = ReductionOrder::Any.reduce(&[a, b]);
        assert_eq!((two.x, two.spread), (1.5 + 0.1, 0.0));
        // An inexact product may be contracted: not determined.
        let p = AnyOrder::input(0.1).mul(&AnyOrder::input(0.3));
        assert!(p.spread > 0.0);
        let exact = AnyOrder::input(0.5).mul(&AnyOrder::input(3.0));
        assert_eq!(exact.spread, 0.0);
    }

    #[test]
    fn a_sum_that_some_order_may_overflow_is_unbounded() {
        let big = AnyOrder::input(f32::MAX / 2.0);
        let s = ReductionOrder::Any.reduce(&[big, big, AnyOrder::input(-f32::MAX)]);
        assert!(s.err.is_infinite());
    }

    #[test]
    fn ambiguous_comparisons_are_counted() {
        let xs: Vec<AnyOrder> = [1.0f32, 1e-8, -1e-8].iter().map(|&v| AnyOrder::input(v)).collect();
        let s = ReductionOrder::Any.reduce(&xs);
        let (_, n) = count_ambiguous(|| s.cmp_f32(1.0));
        assert_eq!(n, 1);
        let (_, n) = count_ambiguous(|| (s.cmp_f32(0.5), s.cmp_num(&s), AnyOrder::input(1.0).cmp_f32(1.0)));
        assert_eq!(n, 0);
        let (_, n) = count_ambiguous(|| s.cmp_num(&AnyOrder::input(1.0)));
        assert_eq!(n, 1);
    }

    #[test]
    fn an_uncertain_bf16_rounding_reaches_both_neighbours() {
        // Within one rounding interval: certain, exact.
        let v = AnyOrder { x: 1.0 + 2f32.powi(-10), err: 1e-6, spread: 1e-6 };
        let r = v.round_bf16();
        assert_eq!((r.decision, r.certain, r.value), (Some(1.0), true, AnyOrder::input(1.0)));
        // Across the midpoint 1 + 2^-8: either neighbour, bound 2^-7.
        let v = AnyOrder { x: 1.0 + 2f32.powi(-8), err: 1e-6, spread: 1e-6 };
        let r = v.round_bf16();
        assert_eq!((r.decision, r.certain, r.value.x), (None, false, 1.0));
        assert!(r.value.err >= 2f64.powi(-7) && r.value.spread >= 2f64.powi(-7));
    }

    /// A count nested in another: the inner call counts only its own
    /// comparisons, and the enclosing count comes back afterwards, whether
    /// the inner closure returns or unwinds. `s` (1 + 1e-8 - 1e-8 in any
    /// order, not determined) compared with 1 is ambiguous; the input 1
    /// compared with 1 is not.
    #[test]
    fn a_nested_count_restores_the_enclosing_one() {
        let xs: Vec<AnyOrder> = [1.0f32, 1e-8, -1e-8].iter().map(|&v| AnyOrder::input(v)).collect();
        let s = ReductionOrder::Any.reduce(&xs);
        let one = AnyOrder::input(1.0);
        let (inner, outer) = count_ambiguous(|| {
            s.cmp_f32(1.0);
            s.cmp_f32(1.0);
            let (_, inner) = count_ambiguous(|| (s.cmp_f32(1.0), one.cmp_f32(1.0)));
            s.cmp_num(&one);
            inner
        });
        // Outer: two before, one after; inner: its one.
        assert_eq!((inner, outer), (1, 3));
        // An inner closure that unwinds (no panic message: resume_unwind
        // skips the hook) leaves the enclosing count as it was too.
        let (caught, outer) = count_ambiguous(|| {
            s.cmp_f32(1.0);
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                count_ambiguous(|| {
                    s.cmp_f32(1.0);
                    s.cmp_f32(1.0);
                    std::panic::resume_unwind(Box::new(()))
                })
            }));
            r.is_err()
        });
        assert_eq!((caught, outer), (true, 1));
    }
}
