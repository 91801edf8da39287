//! What a result is judged against, for any [`Op`]: the exact result (Ziv's
//! loop over the whole computation) on the profile's decisions, and the
//! profile's own rigorous bound (the profile run on [`Bounded`]), or, for a
//! subject that claims no profile, the bound of every admissible evaluation
//! (the `any-order` profile run on [`AnyOrder`]).

use super::histogram::RatioHistogram;
use super::rational::Rat;
#[cfg(test)]
use super::Bound;
use super::{correctly_rounded, with_precision, Exact, Verdict, MAX_PREC, START_PREC};
use crate::any_order::{count_ambiguous, AnyOrder};
use crate::num::{Bounded, Bounds, Num};
use crate::op::{BwdRun, FwdRun, Group, Op, Run, Values};
use crate::padding::PaddingRule;
use rug::Rational;

/// An exact result, the precision it took, and how many real outputs'
/// correct f32 rounding stayed undetermined (reported, never guessed).
#[derive(Clone, Debug)]
pub struct ExactResult<T> {
    pub out: T,
    /// Rows where the exact values would have decided otherwise than the
    /// imposed decisions (`decision-near-tie`).
    pub near_ties: usize,
    pub prec: u32,
    /// Real outputs whose correct rounding neither Ziv's loop (up to
    /// [`MAX_PREC`]) nor the rational evaluation settled.
    pub undetermined: usize,
    /// The positions of those outputs among the real outputs, in the op's
    /// group order (so that their ratios are kept apart, see
    /// [`RatioHistogram::undetermined`]); as many as `undetermined`.
    pub undetermined_at: Vec<usize>,
    /// Real outputs left open by Ziv's loop at [`MAX_PREC`] that the
    /// rational evaluation settled (an exact f32 midpoint, say).
    pub rational: usize,
    /// Imposed decisions the exact values contradict (see
    /// [`crate::op::Run::contradicted`]): failures of the imposing run.
    pub contradicted: Vec<String>,
}

/// The real values of some output groups.
fn reals<'a, N>(groups: &'a [Group<'a, N>]) -> impl Iterator<Item = &'a N> + 'a {
    groups.iter().flat_map(|g| match &g.values {
        Values::Real(v) => v.iter(),
        Values::Int(_) => [].iter(),
    })
}

/// Ziv's loop over a whole computation: double the precision until every
/// real output's f32 rounding is settled (see the module docs of [`super`]).
///
/// What is still open at [`MAX_PREC`] is handed to one evaluation of the
/// same computation on [`Rat`] (`rational`, given the decisions the exact
/// run took, so both compute the same function), which settles every output
/// that is a finite rational: an exact value has one correct rounding,
/// decided by [`super::rational::round_rational_to_f32`]. An output counts as
/// settled only if its rational value also lies within the MPFR value's
/// bound: where it does not, the two evaluations disagree (a bug), and
/// nothing is claimed. The outputs keep their MPFR values and bounds, which
/// is all [`super::judge`] needs (see there).
fn ziv<T, R, D, E>(
    compute: impl Fn() -> Result<Run<T, D>, E>,
    groups: impl for<'a> Fn(&'a T) -> Vec<Group<'a, Exact>>,
    rational: impl FnOnce(&D) -> Result<Run<R, D>, E>,
    rational_groups: impl for<'a> Fn(&'a R) -> Vec<Group<'a, Rat>>,
) -> Result<ExactResult<T>, E> {
    let mut prec = START_PREC;
    loop {
        let run = with_precision(prec, &compute)?;
        let out_groups = groups(&run.out);
        let open: Vec<(usize, &Exact)> =
            reals(&out_groups).enumerate().filter(|(_, x)| correctly_rounded(x).is_none()).collect();
        if !open.is_empty() && prec < MAX_PREC {
            prec *= 2;
            continue;
        }
        let undetermined_at: Vec<usize> = if open.is_empty() {
            Vec::new()
        } else {
            let rat = rational(&run.decisions)?;
            let rat_groups = rational_groups(&rat.out);
            let values: Vec<&Rat> = reals(&rat_groups).collect();
            open.iter().filter(|(i, x)| !values.get(*i).is_some_and(|r| settles(r, x))).map(|(i, _)| *i).collect()
        };
        let (undetermined, rational) = (undetermined_at.len(), open.len() - undetermined_at.len());
        drop(out_groups);
        let (near_ties, contradicted) = (run.near_ties, run.contradicted);
        return Ok(ExactResult {
            out: run.out,
            near_ties,
            prec,
            undetermined,
            undetermined_at,
            rational,
            contradicted,
        });
    }
}

/// Whether the rational value `r` settles the output `x`: a finite rational
/// within `x`'s bound of its MPFR value (exact: |q - v| is an exact
/// rational, compared by MPFR with the bound as an MPFR number at least as
/// large, never turned into a rational itself, whatever its exponent).
fn settles(r: &Rat, x: &Exact) -> bool {
    let (Some(q), Some(v)) = (r.value(), x.v.to_rational()) else {
        return false;
    };
    x.err.is_finite() && x.err.to_float() >= Rational::from(q - &v).abs()
}

/// A pass of an op, as a reference computes and reads it: [`Forward`] or
/// [`Backward`].
pub trait Pass<O: Op> {
    /// The pass's outputs on value type `N`.
    type Out<N: Num>;
    /// The pass on `N` (see [`Op::forward_under`]).
    fn run<N: Num>(
        case: &O::Case,
        profile: &O::Profile,
        rule: PaddingRule,
        imposed: Option<&O::Decisions>,
    ) -> Result<PassRun<O, Self, N>, O::Error>;
    /// The pass's outputs, labelled (see [`Op::fwd_groups`]).
    fn groups<'a, N: Num>(case: &O::Case, out: &'a Self::Out<N>) -> Vec<Group<'a, N>>;
}

/// A result of pass `P` of op `O` on value type `N`, with its decisions.
pub type PassRun<O, P, N> = Run<<P as Pass<O>>::Out<N>, <O as Op>::Decisions>;

/// The forward.
pub struct Forward;

/// The backward.
pub struct Backward;

impl<O: Op> Pass<O> for Forward {
    type Out<N: Num> = O::Fwd<N>;
    fn run<N: Num>(
        case: &O::Case,
        profile: &O::Profile,
        rule: PaddingRule,
        imposed: Option<&O::Decisions>,
    ) -> Result<FwdRun<O, N>, O::Error> {
        O::forward_under::<N>(case, profile, rule, imposed)
    }
    fn groups<'a, N: Num>(case: &O::Case, out: &'a O::Fwd<N>) -> Vec<Group<'a, N>> {
        O::fwd_groups(case, out)
    }
}

impl<O: Op> Pass<O> for Backward {
    type Out<N: Num> = O::Bwd<N>;
    fn run<N: Num>(
        case: &O::Case,
        profile: &O::Profile,
        rule: PaddingRule,
        imposed: Option<&O::Decisions>,
    ) -> Result<BwdRun<O, N>, O::Error> {
        O::backward_under::<N>(case, profile, rule, imposed)
    }
    fn groups<'a, N: Num>(case: &O::Case, out: &'a O::Bwd<N>) -> Vec<Group<'a, N>> {
        O::bwd_groups(case, out)
    }
}

/// The exact pass `P` under padding rule `rule` ([`crate::padding`]), on
/// `imposed` decisions (those of the profile being judged,
/// docs/ops/README.md#discrete-decisions), or on the exact ones.
pub fn exact_under<O: Op, P: Pass<O>>(
    case: &O::Case,
    rule: PaddingRule,
    imposed: Option<&O::Decisions>,
) -> Result<ExactResult<P::Out<Exact>>, O::Error> {
    let p = O::exact_profile();
    ziv(
        || P::run::<Exact>(case, &p, rule, imposed),
        |out| P::groups(case, out),
        |decisions| P::run::<Rat>(case, &p, rule, Some(decisions)),
        |out| P::groups(case, out),
    )
}

/// The exact forward (see [`exact_under`]).
pub fn exact_forward<O: Op>(
    case: &O::Case,
    imposed: Option<&O::Decisions>,
) -> Result<ExactResult<O::Fwd<Exact>>, O::Error> {
    exact_under::<O, Forward>(case, PaddingRule::Skip, imposed)
}

/// [`exact_forward`] under padding rule `rule` ([`crate::padding`]).
pub fn exact_forward_under<O: Op>(
    case: &O::Case,
    rule: PaddingRule,
    imposed: Option<&O::Decisions>,
) -> Result<ExactResult<O::Fwd<Exact>>, O::Error> {
    exact_under::<O, Forward>(case, rule, imposed)
}

/// The exact backward (see [`exact_under`]).
pub fn exact_backward<O: Op>(
    case: &O::Case,
    imposed: Option<&O::Decisions>,
) -> Result<ExactResult<O::Bwd<Exact>>, O::Error> {
    exact_under::<O, Backward>(case, PaddingRule::Skip, imposed)
}

/// [`exact_backward`] under padding rule `rule` ([`crate::padding`]).
pub fn exact_backward_under<O: Op>(
    case: &O::Case,
    rule: PaddingRule,
    imposed: Option<&O::Decisions>,
) -> Result<ExactResult<O::Bwd<Exact>>, O::Error> {
    exact_under::<O, Backward>(case, rule, imposed)
}

/// Accuracy of a result: how many outputs were judged, which were outside
/// their bound, how many had no finite bound or no settled exact rounding,
/// the worst |error| / bound and the distribution of the ratios.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Accuracy {
    pub judged: usize,
    pub outside: Vec<String>,
    pub unbounded: usize,
    pub worst_ratio: f64,
    pub near_ties: usize,
    pub undetermined: usize,
    /// Every real output judged, by its ratio (`judged` of them).
    pub histogram: RatioHistogram,
}

impl Accuracy {
    fn add(&mut self, what: impl FnOnce() -> String, computed: f32, bound: f64, exact: &Exact, undetermined: bool) {
        self.judged += 1;
        let verdict = super::judge(computed, bound, exact);
        match verdict {
            Verdict::Unbounded => self.histogram.unbounded += 1,
            _ if undetermined => self.histogram.undetermined += 1,
            Verdict::Within { ratio } | Verdict::Outside { ratio } => self.histogram.add_ratio(ratio),
        }
        match verdict {
            Verdict::Within { ratio } => self.worst_ratio = self.worst_ratio.max(ratio),
            Verdict::Outside { ratio } => {
                self.worst_ratio = self.worst_ratio.max(ratio);
                self.outside.push(format!(
                    "{}: computed {:e}, exact {:e}, bound {:e}",
                    what(),
                    computed,
                    exact.v.to_f64(),
                    bound
                ));
            }
            Verdict::Unbounded => self.unbounded += 1,
        }
    }

    /// Judges `computed` group by group: integers must equal the exact ones,
    /// every real output must lie within its bound (from `bounded`) of the
    /// exact value. `undetermined_at` are the positions, among the real
    /// outputs, of those whose exact rounding stayed undetermined
    /// ([`ExactResult::undetermined_at`]).
    pub fn of<B: Bounds>(
        computed: &[Group<f32>],
        bounded: &[Group<B>],
        exact: &[Group<Exact>],
        undetermined_at: &[usize],
    ) -> Self {
        let mut acc = Accuracy::default();
        // The position of the next real output, counted as `reals` does.
        let mut position = 0usize;
        for ((c, b), x) in computed.iter().zip(bounded).zip(exact) {
            match (&c.values, &b.values, &x.values) {
                (Values::Int(ci), _, Values::Int(xi)) => {
                    if ci != xi {
                        acc.outside.push(format!("{} {:?} != exact {:?}", c.name, ci, xi));
                    }
                }
                (Values::Real(cv), Values::Real(bv), Values::Real(xv)) => {
                    if cv.len() != xv.len() || bv.len() != xv.len() {
                        acc.outside.push(format!("{}: {} values, expected {}", c.name, cv.len(), xv.len()));
                        position += xv.len();
                        continue;
                    }
                    for (i, ((cv, bv), xv)) in cv.iter().zip(bv.iter()).zip(xv.iter()).enumerate() {
                        acc.add(|| c.label(i), *cv, bv.bound(), xv, undetermined_at.contains(&(position + i)));
                    }
                    position += xv.len();
                }
                _ => {
                    acc.outside.push(format!("{}: not the kind of output the op defines", c.name));
                    if let Values::Real(xv) = &x.values {
                        position += xv.len();
                    }
                }
            }
        }
        if computed.len() != exact.len() {
            acc.outside.push(format!("{} output groups, expected {}", computed.len(), exact.len()));
        }
        acc
    }
}

/// The real outputs of some groups, counted.
fn real_outputs<N>(groups: &[Group<N>]) -> usize {
    reals(groups).count()
}

/// A run's outputs when a decision was ambiguous (see
/// [`crate::any_order`]): the subject may have taken the other branch, so
/// nothing is judged; every real output is counted as undetermined.
fn ambiguous(real: usize) -> Accuracy {
    Accuracy { undetermined: real, ..Default::default() }
}

/// What a subject's pass `P` is judged against: the run on `B` of a
/// profile (`Bounded`: the profile's own value and bound; [`AnyOrder`]: the
/// `any-order` profile, every admissible evaluation), and the exact pass on
/// that run's decisions (docs/ops/README.md#discrete-decisions).
pub struct Reference<O: Op, P: Pass<O>, B: Bounds = Bounded> {
    pub bounded: PassRun<O, P, B>,
    pub exact: ExactResult<P::Out<Exact>>,
    /// Comparisons of the run whose outcome a subject may have taken the
    /// other way (always 0 on `Bounded`, whose value is the profile's own).
    pub ambiguous: usize,
}

/// What a subject's forward is judged against.
pub type ForwardReference<O, B = Bounded> = Reference<O, Forward, B>;

/// What a subject's backward is judged against.
pub type BackwardReference<O, B = Bounded> = Reference<O, Backward, B>;

impl<O: Op, P: Pass<O>, B: Bounds> Reference<O, P, B> {
    pub fn new(case: &O::Case, profile: &O::Profile) -> Result<Self, O::Error> {
        Self::under(case, profile, PaddingRule::Skip)
    }

    /// The reference of a subject that claims `profile` and padding rule
    /// `rule`.
    pub fn under(case: &O::Case, profile: &O::Profile, rule: PaddingRule) -> Result<Self, O::Error> {
        let (bounded, ambiguous) = count_ambiguous(|| P::run::<B>(case, profile, rule, None));
        let bounded = bounded?;
        let exact = exact_under::<O, P>(case, rule, Some(&bounded.decisions))?;
        Ok(Reference { bounded, exact, ambiguous })
    }

    /// Every output of `computed` within the bound of the exact pass;
    /// integer outputs equal; every decision the run vouched for confirmed
    /// by the exact values. Nothing judged where a decision was ambiguous
    /// (every real output undetermined).
    pub fn judge(&self, case: &O::Case, computed: &P::Out<f32>) -> Accuracy {
        let exact = P::groups(case, &self.exact.out);
        if self.ambiguous > 0 {
            return ambiguous(real_outputs(&exact));
        }
        let mut acc = Accuracy::of(
            &P::groups(case, computed),
            &P::groups(case, &self.bounded.out),
            &exact,
            &self.exact.undetermined_at,
        );
        acc.near_ties = self.exact.near_ties;
        acc.undetermined = self.exact.undetermined;
        acc.outside.extend(self.exact.contradicted.iter().map(|c| format!("decision contradicted: {c}")));
        acc
    }
}

impl<O: Op, P: Pass<O>> Reference<O, P, AnyOrder> {
    /// The reference of a subject that claims no profile.
    pub fn any_order(case: &O::Case) -> Result<Self, O::Error> {
        Self::new(case, &O::any_order_profile())
    }

    /// The reference of a subject that claims no profile and padding rule
    /// `rule`.
    pub fn any_order_under(case: &O::Case, rule: PaddingRule) -> Result<Self, O::Error> {
        Self::under(case, &O::any_order_profile(), rule)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::seqwise_loss::{Objective, SeqwiseCase};
    use crate::num::Num;
    use crate::op::seqwise_loss::SeqwiseLoss;
    use crate::profile::seqwise_loss::SeqwiseProfile;

    #[test]
    fn an_ambiguous_gate_judges_nothing_and_counts_every_output_undetermined() {
        // n = a + b + c: (a + b) + c rounds to eps + 1 ulp, (a + c) + b to
        // eps exactly (found by trying every order in f32), so the strict
        // gate n > eps is closed in one admissible order and open in
        // another: a subject that claims no profile may take either, and
        // none of its 3 gradients can be judged.
        let (a, b, c) = (f32::from_bits(0x2b0c_bcbf), f32::from_bits(0x2b0c_bccc), f32::from_bits(0x2154_0000));
        let case = SeqwiseCase::dense(1, 3, vec![a, b, c], Objective::ProvidedMap { map: vec![true, true, true] });
        let r = BackwardReference::<SeqwiseLoss, AnyOrder>::any_order(&case).unwrap();
        assert!(r.ambiguous > 0);
        let serial = crate::op::backward::<SeqwiseLoss>(&case, &SeqwiseProfile::serial()).unwrap();
        let acc = r.judge(&case, &serial);
        assert_eq!((acc.judged, acc.undetermined), (0, 3), "{acc:?}");
        assert!(acc.outside.is_empty());
    }

    #[test]
    fn an_undetermined_output_is_judged_and_counted_apart() {
        // Two real outputs, both within their bounds; the second's exact
        // rounding is marked undetermined: both are judged, the histogram
        // holds one ratio and one undetermined.
        use crate::op::Rows;
        let computed = [1.0f32, 2.0];
        let bounded = [Bounded { x: 1.0, err: 1e-3 }, Bounded { x: 2.0, err: 1e-3 }];
        let exact = [Exact::input(1.0), Exact::input(2.0)];
        fn group<N>(v: &[N]) -> Group<'_, N> {
            Group { name: "y", rows: Rows::Global, cols: 2, values: Values::Real(v) }
        }
        let acc = Accuracy::of(&[group(&computed)], &[group(&bounded)], &[group(&exact)], &[1]);
        assert_eq!(acc.judged, 2);
        assert!(acc.outside.is_empty(), "{:?}", acc.outside);
        assert_eq!(acc.histogram.undetermined, 1);
        assert_eq!(acc.histogram.total(), 2);
    }

    #[test]
    fn an_exact_zero_gradient_reached_through_inexact_divisions_settles() {
        // One token, one expert, map [true], s = 3, g = 1: n = d = 3, c = [1],
        // f = 1/1 * 1 = 1, a = g f = 1, so grad = a/d + sgn(s) q with
        // q = -(a ((s/d)/d)) = -1/3: grad = 1/3 - 1/3 = 0 exactly, each third
        // an inexact MPFR quotient.
        let case = SeqwiseCase::dense(1, 1, vec![3.0], Objective::ProvidedMap { map: vec![true] });
        let exact = exact_backward::<SeqwiseLoss>(&case, None).unwrap();
        assert_eq!(exact.undetermined, 0);
        assert!(exact.prec < MAX_PREC);
        let profile = SeqwiseProfile::serial();
        let bounded = SeqwiseLoss::backward_on::<Bounded>(&case, &profile, None).unwrap().out;
        assert!(matches!(super::super::judge(0.0, bounded.grad[0].err, &exact.out.grad[0]), Verdict::Within { .. }));
    }

    #[test]
    fn an_exact_zero_gradient_with_unequal_roundings_settles() {
        // One token, ten experts, all mapped, every s = 1, g = 3: d = 10,
        // c_e = 1, C = 10, f = (1/10) 10 = 1, a = 3, q = -10 (3 ((1/10)/10))
        // = -3/10, so grad_k = 3/10 + q = 0 exactly. In MPFR the two sides
        // are rounded differently (3/10 against a sum of ten roundings of
        // 3 ((1/10)/10)), which leaves a tiny non-zero value at every
        // precision: only the fact that every value within its bound rounds
        // to a zero can settle it.
        let mut case = SeqwiseCase::dense(1, 10, vec![1.0; 10], Objective::ProvidedMap { map: vec![true; 10] });
        case.g = 3.0;
        let exact = exact_backward::<SeqwiseLoss>(&case, None).unwrap();
        assert_eq!(exact.undetermined, 0);
        assert!(exact.prec < MAX_PREC, "settled only at {} bits", exact.prec);
        let profile = SeqwiseProfile::serial();
        let bounded = SeqwiseLoss::backward_on::<Bounded>(&case, &profile, None).unwrap().out;
        for (x, b) in exact.out.grad.iter().zip(&bounded.grad) {
            assert!(x.err > Bound::ZERO);
            assert!(matches!(super::super::judge(0.0, b.err, x), Verdict::Within { .. }));
        }
    }

    /// One token, two experts, map [true, false], s = (95, 673),
    /// g = 224361 / 2^9. By hand: d = 768 = 3 2^8, c = (1, 0), f = (2, 0),
    /// a = (2g, 0), q = -(2g 95 / 768^2), and
    /// grad_0 = 2g/d - 2g 95/d^2 = 2g 673 / 768^2
    ///        = 2 224361 673 / (2^9 9 2^16) = 2 9 (2^24 + 1) / (9 2^25)
    ///        = 1 + 2^-24 (224361 673 = 9 (2^24 + 1): 224361 = 9 97 257,
    ///        2^24 + 1 = 97 257 673),
    /// the midpoint between 1 and its successor, which rounds to even: 1.0.
    /// It is reached through s/d, a non-dyadic quotient (95 is prime to 3),
    /// whose rounding MPFR never removes: at every precision the value sits
    /// within its bound of the midpoint, on one side or the other.
    fn midpoint_case() -> SeqwiseCase {
        let mut case = SeqwiseCase::dense(1, 2, vec![95.0, 673.0], Objective::ProvidedMap { map: vec![true, false] });
        case.g = 224361.0 / 512.0;
        case
    }

    #[test]
    fn a_gradient_on_an_f32_midpoint_is_settled_by_the_rational_evaluation() {
        let case = midpoint_case();
        let exact = exact_backward::<SeqwiseLoss>(&case, None).unwrap();
        assert_eq!(exact.prec, MAX_PREC);
        let g0 = &exact.out.grad[0];
        assert!(g0.err > Bound::ZERO, "an inexact result at {MAX_PREC} bits with a zero bound");
        // MPFR alone cannot decide it...
        assert_eq!(correctly_rounded(g0), None);
        // ...and the exact value is within its bound of the MPFR value.
        let midpoint = rug::Rational::from((16_777_217, 16_777_216));
        let dist = (g0.v.to_rational().unwrap() - &midpoint).abs();
        assert!(g0.err.to_float() >= dist);
        // The rational evaluation settles it, on the midpoint, to even.
        assert_eq!(exact.undetermined, 0);
        assert_eq!(exact.rational, 1);
        let p = SeqwiseLoss::exact_profile();
        let rat = SeqwiseLoss::backward_on::<Rat>(&case, &p, None).unwrap().out;
        assert_eq!(rat.grad[0].value(), Some(&midpoint));
        assert_eq!(rat.grad[0].to_f32(), 1.0);
        // The profile's f32 result is judged within its bound.
        let bounded = SeqwiseLoss::backward_on::<Bounded>(&case, &p, None).unwrap().out;
        assert!(matches!(super::super::judge(bounded.grad[0].x, bounded.grad[0].err, g0), Verdict::Within { .. }));
    }

    #[test]
    fn a_nan_reached_through_an_approximate_zero_is_not_taken_for_the_result() {
        // UnbiasedTopK, k = 1, one token, s = (2^100, 2^-140, -2^100, -eps2):
        // D = (sum s) + eps2 = 2^-140 exactly; the top-1 is 2^100, so
        // c = (1, 0, 0, 0), f = (4, 0, 0, 0); P_0 = 2^100 / 2^-140 = 2^240
        // and the other P_e are finite, so raw = 4 2^240 = 2^242, whose f32
        // rounding is +inf. At 128 bits the serial sum loses 2^-140 beside
        // 2^100, and D comes out as an inexact zero: raw as NaN.
        let pow2 =
            |e: i32| if e >= -126 { f32::from_bits(((127 + e) as u32) << 23) } else { f32::from_bits(1 << (149 + e)) };
        let scores = vec![pow2(100), pow2(-140), -pow2(100), -crate::vocab::EPS2];
        let case = SeqwiseCase::dense(1, 4, scores, Objective::UnbiasedTopK { k: 1 });
        let exact = exact_forward::<SeqwiseLoss>(&case, None).unwrap();
        assert_eq!(exact.undetermined, 0);
        assert_eq!(exact.out.raw.v, rug::Float::with_val(8, rug::Float::i_exp(1, 242)));
        assert_eq!(correctly_rounded(&exact.out.raw), Some(f32::INFINITY));
    }

    #[test]
    fn a_row_with_an_exactly_zero_denominator_gives_determined_nan() {
        // UnbiasedTopK, k = 1, three rows whose sum is exactly -eps2, so
        // D_t = 0 exactly. Top-1 picks experts 0, 1, 0: c = (2, 1, 0),
        // C = 3, f = (2/3 3, 1/3 3, 0): the first two are inexact quotients,
        // a_2 = g 0 = 0 exactly. By IEEE, (s_2 / 0) / 0 is -inf, and
        // a_2 (-inf) = 0 (-inf) is NaN, so every q_t and every grad_tk is
        // NaN: determined by the operands (their signs are certain), not
        // undetermined, and settled at the first precision.
        let eps2 = crate::vocab::EPS2;
        let scores = vec![1.0, -1.0, -eps2, -1.0, 1.0, -eps2, 1.0, -1.0, -eps2];
        let case = SeqwiseCase::dense(3, 3, scores, Objective::UnbiasedTopK { k: 1 });
        let exact = exact_backward::<SeqwiseLoss>(&case, None).unwrap();
        assert_eq!((exact.undetermined, exact.prec), (0, START_PREC));
        for g in &exact.out.grad {
            assert!(g.v.is_nan() && g.err.is_zero(), "{g:?}");
        }
        let f32_grad = crate::op::backward::<SeqwiseLoss>(&case, &SeqwiseLoss::exact_profile()).unwrap().grad;
        assert!(f32_grad.iter().all(|g| g.is_nan()));
    }
}
