//! Which outputs of a profile oracle the profile does not decide.
//!
//! A profile that runs the tensor core's MMA model ([`crate::mma`]) decides
//! every bit of a step's result except where the model is open: a step whose
//! aligned sum is nonzero and below 2^-126 in magnitude
//! ([`crate::mma::MmaModel::step`]). There the H200 gave, 44 times in 168,275,
//! one subnormal ulp more in magnitude than the model (reports/mma-2026-12-02/).
//! The profile takes as possible, at an open step, the model's result and
//! its two f32 neighbours, and follows every possibility through the rest of
//! the op: an output is undecided when its possible values differ in any
//! bit. Conformance compares the others bit for bit and counts these apart
//! (as a near tie is counted: never a pass, never a mismatch). Should the
//! hardware ever differ by more than that ulp, a decided output would show
//! it as a mismatch.
//!
//! [`Tracked`] is the value type that follows them: the profile oracle's own
//! f32 value, and an interval of f32 values holding every possible one. The
//! one generic implementation of each op runs on it as on `f32`, so the
//! possibilities follow the op's data flow exactly. Most collapse again: a
//! later MMA step's coarser grid truncates a subnormal accumulator's
//! difference away, and a bf16 rounding maps the whole interval to one value.
//! A profile with no MMA model has no open step, and every value is decided.

use crate::bf16::Rounding;
use crate::num::Num;
use std::cmp::Ordering;

/// The most possible accumulators one MMA chain follows before its result
/// is given up as undecided (each open step can triple them).
const MAX_ACCUMULATORS: usize = 16;

/// The profile oracle's f32 value `x`, and every value the hardware may give
/// in its place: the f32 values from `lo` to `hi` (ordered as
/// `f32::total_cmp` orders them, -0.0 below +0.0). Decided when `lo` and
/// `hi` are the same bits (then they are `x`'s); undecided everywhere
/// (`lo` = -inf, `hi` = NaN) when no interval holds (a NaN among the
/// possibilities, a divisor that may be zero, a chain of too many).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tracked {
    pub x: f32,
    lo: f32,
    hi: f32,
    /// The possible values are bf16 values (a bf16 rounding's result), so
    /// those between `lo` and `hi` can be listed.
    bf16: bool,
}

impl Tracked {
    fn point(x: f32) -> Self {
        Tracked { x, lo: x, hi: x, bf16: false }
    }

    fn anything(x: f32) -> Self {
        Tracked { x, lo: f32::NEG_INFINITY, hi: f32::NAN, bf16: false }
    }

    /// Whether the possible values differ (in any bit).
    pub fn undecided(&self) -> bool {
        self.lo.to_bits() != self.hi.to_bits()
    }

    fn is_point(&self) -> bool {
        !self.undecided()
    }

    /// `x` with the interval spanned by `candidates` (each a possible
    /// value, `x` among them or between them): decided when they are all
    /// the same bits, or all NaN (any NaN matches any NaN); anything when
    /// some but not all are NaN.
    fn spanning(x: f32, candidates: &[f32]) -> Self {
        let first = candidates.first().map_or(x.to_bits(), |c| c.to_bits());
        if candidates.iter().all(|c| c.to_bits() == first) || candidates.iter().all(|c| c.is_nan()) {
            return Self::point(x);
        }
        if candidates.iter().any(|c| c.is_nan()) {
            return Self::anything(x);
        }
        let lo = candidates.iter().copied().min_by(f32::total_cmp).unwrap_or(x);
        let hi = candidates.iter().copied().max_by(f32::total_cmp).unwrap_or(x);
        Tracked { x, lo, hi, bf16: false }
    }

    /// Every value this one may be, for an MMA step's input: one for a
    /// decided value or a zero of either sign (a step takes no term for
    /// either), the bf16 values from `lo` to `hi` for a bf16 rounding's
    /// result (at most `max`); `None` otherwise.
    fn step_inputs(&self, max: usize) -> Option<Vec<f32>> {
        if self.is_point() || (self.lo == 0.0 && self.hi == 0.0) {
            return Some(vec![self.x]);
        }
        if !self.bf16 || !self.lo.is_finite() || !self.hi.is_finite() {
            return None;
        }
        // bf16 values in order as integers, negative ones mirrored below
        // zero (both zeros are 0).
        let key = |v: f32| {
            let b = (v.to_bits() >> 16) as i32;
            if b & 0x8000 != 0 {
                -(b & 0x7fff)
            } else {
                b
            }
        };
        let value = |k: i32| f32::from_bits(if k < 0 { ((-k) as u32 | 0x8000) << 16 } else { (k as u32) << 16 });
        let (lo, hi) = (key(self.lo), key(self.hi));
        (hi - lo < max as i32).then(|| (lo..=hi).map(value).collect())
    }

    /// A monotone operation of one operand (round-to-nearest keeps the
    /// order of its exact results): the ends go to the ends.
    fn monotone(&self, f: impl Fn(f32) -> f32) -> Self {
        if self.is_point() {
            return Self::point(f(self.x));
        }
        Self::spanning(f(self.x), &[f(self.lo), f(self.hi)])
    }

    /// An operation of two operands monotone in each over the operands'
    /// intervals (a sum, a product, a quotient by an interval without
    /// zero): its extremes lie at the four corners.
    fn corners(&self, y: &Self, f: impl Fn(f32, f32) -> f32) -> Self {
        if self.is_point() && y.is_point() {
            return Self::point(f(self.x, y.x));
        }
        let x = f(self.x, y.x);
        Self::spanning(x, &[f(self.lo, y.lo), f(self.lo, y.hi), f(self.hi, y.lo), f(self.hi, y.hi)])
    }
}

/// The possible results of a chain of the model's steps from +0 on point
/// inputs: the accumulators followed through every open step (the model's
/// result and its two f32 neighbours); `None` past [`MAX_ACCUMULATORS`].
fn chain_results(model: &crate::mma::MmaModel, a: &[f32], b: &[f32]) -> Option<Vec<f32>> {
    let mut accumulators = vec![0.0f32];
    for (xa, xb) in a.chunks(crate::mma::K).zip(b.chunks(crate::mma::K)) {
        let mut next: Vec<f32> = Vec::with_capacity(3 * accumulators.len());
        for &c in &accumulators {
            let (d, open) = model.step(xa, xb, c);
            next.push(d);
            if open {
                next.extend([d.next_down(), d.next_up()]);
            }
        }
        next.sort_by(f32::total_cmp);
        next.dedup_by(|p, q| p.to_bits() == q.to_bits());
        if next.len() > MAX_ACCUMULATORS {
            return None;
        }
        accumulators = next;
    }
    Some(accumulators)
}

impl Num for Tracked {
    fn input(x: f32) -> Self {
        Self::point(x)
    }
    fn add(&self, y: &Self) -> Self {
        self.corners(y, |a, b| a + b)
    }
    fn mul(&self, y: &Self) -> Self {
        self.corners(y, |a, b| a * b)
    }
    fn div(&self, y: &Self) -> Self {
        // A quotient is monotone in its divisor only on one side of zero.
        let zero = f32::total_cmp(&y.lo, &0.0) != Ordering::Greater && f32::total_cmp(&y.hi, &-0.0) != Ordering::Less;
        if y.undecided() && zero {
            return Self::anything(self.x / y.x);
        }
        self.corners(y, |a, b| a / b)
    }
    fn neg(&self) -> Self {
        self.monotone(|a| -a)
    }
    fn abs(&self) -> Self {
        if self.is_point() {
            return Self::point(self.x.abs());
        }
        let straddles = self.lo.is_sign_negative() && self.hi.is_sign_positive();
        let ends = [self.lo.abs(), self.hi.abs(), if straddles { 0.0 } else { self.lo.abs() }];
        Self::spanning(self.x.abs(), &ends)
    }
    fn exp(&self) -> Self {
        self.monotone(crate::expf::exp_f32)
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
    /// The profile's decision, as `f32` takes it (vouching for nothing),
    /// when every possible value rounds to the same bf16; otherwise no
    /// decision (`None`: the oracles then go on with the rounded interval
    /// itself), so the possibilities flow on into the sums it feeds.
    fn round_bf16(&self) -> Rounding<Self> {
        let value = Tracked { bf16: true, ..self.monotone(crate::bf16::round_f32) };
        let decision = value.is_point().then_some(value.x);
        Rounding { decision, certain: false, value }
    }
    /// The model's chain, as `f32` runs it, following every possible
    /// accumulator: at an open step, the model's result and its two f32
    /// neighbours; and every possible input, where an input is undecided
    /// (a zero of either sign counts once; a bf16 rounding's few values,
    /// each; at most [`MAX_ACCUMULATORS`] combinations). Otherwise the result
    /// is given up as undecided.
    fn dot_mma(model: &crate::mma::MmaModel, a: &[Self], b: &[f32]) -> Self {
        let xs: Vec<f32> = a.iter().map(|v| v.x).collect();
        let x = model.dot_chain(&xs, b, 0.0);
        let mut choices: Vec<(usize, Vec<f32>)> = Vec::new();
        let mut combinations = 1usize;
        for (k, v) in a.iter().enumerate() {
            match v.step_inputs(MAX_ACCUMULATORS) {
                Some(values) if values.len() == 1 => {}
                Some(values) => {
                    combinations = combinations.saturating_mul(values.len());
                    choices.push((k, values));
                }
                None => return Self::anything(x),
            }
            if combinations > MAX_ACCUMULATORS {
                return Self::anything(x);
            }
        }
        let mut results = Vec::new();
        for mut n in 0..combinations {
            let mut inputs = xs.clone();
            for (k, values) in &choices {
                inputs[*k] = values[n % values.len()];
                n /= values.len();
            }
            match chain_results(model, &inputs, b) {
                Some(r) => results.extend(r),
                None => return Self::anything(x),
            }
        }
        Self::spanning(x, &results)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mma::H100_BF16;

    fn p(k: i32) -> f32 {
        2f32.powi(k)
    }

    /// The steps below are worked out by hand from the model's rules; the
    /// first is the H200's smallest counterexample (reports/mma-2026-12-02/).
    #[test]
    fn a_step_is_open_exactly_when_its_aligned_sum_is_nonzero_and_below_2_to_the_minus_126() {
        let step = |a: &[f32], b: &[f32], c: f32| H100_BF16.step(a, b, c);
        // 2^-159 - 2^-139: subnormal, open (the H200 gives -2^-139).
        let (d, open) = step(&[p(-129), p(-130)], &[p(-30), -p(-9)], 0.0);
        assert_eq!((d.to_bits(), open), (0x8000_03ff, true));
        // 2^-160: truncates to +0, still open (one ulp more would be 2^-149).
        assert_eq!(step(&[p(-130)], &[p(-30)], 0.0), (0.0, true));
        // Exactly 2^-126 and 2^-126 - 2^-149: the smallest normal is
        // decided, the largest subnormal is not.
        assert_eq!(step(&[p(-63)], &[p(-63)], 0.0), (p(-126), false));
        let (d, open) = step(&[p(-63), -p(-75)], &[p(-63), p(-74)], 0.0);
        assert_eq!((d.to_bits(), open), (0x007f_ffff, true));
        // A zero sum, a cancelled one, and no terms: +0, decided.
        assert_eq!(step(&[1.0, 1.0], &[1.0, -1.0], 0.0), (0.0, false));
        assert_eq!(step(&[0.0], &[5.0], 0.0), (0.0, false));
        // NaN and infinities are decided.
        assert!(!step(&[f32::NAN], &[1.0], 0.0).1);
        assert!(!step(&[f32::INFINITY], &[1.0], 0.0).1);
        // A normal result reached from subnormal terms is decided.
        assert_eq!(step(&[p(-126)], &[1.0], p(-126)), (p(-125), false));
    }

    fn span(x: f32, lo: f32, hi: f32) -> Tracked {
        Tracked { x, lo, hi, bf16: false }
    }

    fn chain(a: &[f32], b: &[f32]) -> Tracked {
        let inputs: Vec<Tracked> = a.iter().map(|&x| Tracked::input(x)).collect();
        Tracked::dot_mma(&H100_BF16, &inputs, b)
    }

    #[test]
    fn an_open_step_leaves_its_neighbours_possible_until_a_later_step_truncates_them_away() {
        // One step summing to 2^-140 (open): 2^-140 and its neighbours.
        let mut a = vec![0.0f32; 32];
        let mut b = vec![0.0f32; 32];
        (a[0], b[0]) = (p(-70), p(-70));
        let open = chain(&a[..16], &b[..16]);
        assert!(open.undecided());
        assert_eq!((open.x, open.lo, open.hi), (p(-140), p(-140) - p(-149), p(-140) + p(-149)));
        assert_eq!(H100_BF16.chain_step(&a[..16], &b[..16], 0.0), (p(-140), true));
        // A second step adds 1.0: its grid, 2^-25, truncates every possible
        // accumulator to 0, and the result 1.0 is decided.
        (a[16], b[16]) = (1.0, 1.0);
        assert_eq!(chain(&a, &b), Tracked::point(1.0));
        assert_eq!(H100_BF16.chain_step(&a, &b, 0.0), (1.0, true), "though a step of it was open");
        // A second step adding 2^-130: its sum is open too, so each of the
        // three accumulators gives three results, two ulps either side.
        b[16] = p(-130);
        let c = chain(&a, &b);
        assert!(c.undecided());
        let mid = p(-130) + p(-140);
        assert_eq!((c.x, c.lo, c.hi), (mid, mid - 2.0 * p(-149), mid + 2.0 * p(-149)));
        // No open step: decided.
        a[0] = 1.0;
        b[0] = 1.0;
        assert!(!chain(&a, &b).undecided());
    }

    #[test]
    fn possibilities_follow_the_arithmetic_and_a_bf16_rounding_can_decide_them() {
        let tiny = span(p(-140), p(-140) - p(-149), p(-140) + p(-149));
        let one = Tracked::input(1.0);
        // 1 + tiny rounds to 1 at every end: decided.
        assert_eq!(one.add(&tiny), Tracked::point(1.0));
        // tiny * 2^10 keeps the spread (2^-139 either side of 2^-130), and
        // its bf16 rounding (grid 2^-133 there) maps all of it to one value:
        // decided.
        let scaled = tiny.mul(&Tracked::input(p(10)));
        assert_eq!((scaled.lo, scaled.hi), (p(-130) - p(-139), p(-130) + p(-139)));
        let r = scaled.round_bf16();
        assert_eq!(r.decision, Some(p(-130)));
        assert!(!r.value.undecided() && !r.certain);
        // A rounding whose ends fall apart stays undecided, with no decision.
        let tie = span(1.0 + p(-8), 1.0 + p(-8) - p(-23), 1.0 + p(-8) + p(-23));
        let r = tie.round_bf16();
        assert_eq!((r.decision, r.value.lo, r.value.hi), (None, 1.0, 1.0 + p(-7)));
        // A quotient by what may be zero, a NaN: anything.
        let zero = span(0.0, -p(-149), p(-149));
        assert!(one.div(&zero).undecided() && one.div(&zero).hi.is_nan());
        let nan = Tracked::input(f32::NAN).add(&tiny);
        assert!(nan.x.is_nan() && !nan.undecided(), "NaN at every end: a decided NaN");
        let inf = Tracked::input(f32::INFINITY).add(&span(-f32::INFINITY, -f32::INFINITY, 1.0));
        assert!(inf.undecided() && inf.hi.is_nan(), "NaN at one end only: anything");
        // Negation swaps the ends; the absolute value of a straddling
        // interval starts at zero.
        let n = tiny.neg();
        assert_eq!((n.lo, n.hi), (-tiny.hi, -tiny.lo));
        let straddle = span(0.0, -p(-149), p(-148));
        let ab = straddle.abs();
        assert_eq!((ab.lo, ab.hi), (0.0, p(-148)));
        // An undecided input to a chain: its result is given up, unless it
        // is a zero of either sign (no term either way).
        let inputs = [tiny, one];
        assert!(Tracked::dot_mma(&H100_BF16, &inputs, &[1.0, 1.0]).hi.is_nan());
        let signed_zero = span(0.0, -0.0, 0.0);
        assert!(signed_zero.undecided());
        assert_eq!(Tracked::dot_mma(&H100_BF16, &[signed_zero, one], &[1.0, 1.0]), Tracked::point(1.0));
        // A bf16 rounding's result may be 0 or 2^-133 (adjacent bf16
        // values): the chain follows both. Beside 1.0, both truncate away;
        // alone, the results differ. The same interval not known to be
        // bf16 values is not listed: the result is given up.
        let h = Tracked { bf16: true, ..span(0.0, 0.0, p(-133)) };
        assert_eq!(Tracked::dot_mma(&H100_BF16, &[h, one], &[1.0, 1.0]), Tracked::point(1.0));
        let alone = Tracked::dot_mma(&H100_BF16, &[h, one], &[1.0, 0.0]);
        assert_eq!((alone.x, alone.lo, alone.hi), (0.0, 0.0, p(-133) + p(-149)));
        let unlisted = span(0.0, 0.0, p(-133));
        assert!(Tracked::dot_mma(&H100_BF16, &[unlisted, one], &[1.0, 1.0]).hi.is_nan());
        // Too many values to list: given up.
        let wide = Tracked { bf16: true, ..span(1.0, 1.0, 2.0) };
        assert!(Tracked::dot_mma(&H100_BF16, &[wide, one], &[1.0, 1.0]).hi.is_nan());
        assert!(h.round_bf16().value.bf16 && !h.add(&one).bf16);
        // Points stay points.
        assert_eq!(one.mul(&one).add(&one).exp(), Tracked::point(crate::expf::exp_f32(2.0)));
    }
}
