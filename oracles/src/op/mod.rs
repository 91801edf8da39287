//! The spec half of an op: what bitparity needs to know about an op to judge
//! any implementation of it. One implementation of [`Op`] per op of docs/ops/
//! (`seqwise_loss`, `router`, ...); everything generic (the accuracy check,
//! Ziv's loop, the comparison of outputs) is written once against it.
//!
//! The testing half (generators, shrinking, subjects, planted bugs) lives in
//! the main crate and builds on this trait.

pub mod moe_combine;
pub mod router;
pub mod seqwise_loss;
pub mod shared_expert;

use crate::num::Num;
use crate::padding::PaddingRule;
use crate::undecided::Tracked;
use crate::vocab::ClampTie;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fmt::Debug;

/// A numeric profile of an op: the order of each of its sums, as data.
pub trait Profile: Clone + Debug + PartialEq + Send + Sync + 'static {
    /// The profile's name (`serial`, `warp32-chunk64`, ...).
    fn name(&self) -> &str;
    /// A size of zero in an order, say, has no meaning.
    fn validate(&self) -> Result<(), String>;
    /// Whether some outputs' bits may be undecided under this profile: it
    /// runs a model that is open somewhere ([`crate::undecided`]).
    fn may_leave_undecided(&self) -> bool {
        false
    }
}

/// A result with the discrete decisions taken (the clamp, the gate, a
/// selection, a bf16 rounding) and how many rows' own decisions (on this value
/// type's values) disagreed with the imposed ones: `decision-near-tie`
/// (docs/ops/README.md#discrete-decisions).
#[derive(Clone, Debug)]
pub struct Run<T, D> {
    pub out: T,
    pub decisions: D,
    pub near_ties: usize,
    /// Imposed decisions that the imposing run vouched for (its bound put
    /// the exact value on the decided side) and that this run's own values,
    /// certain too, decide otherwise, one line each. Both cannot be right:
    /// a wrong formula or a wrong bound, judged as a failure, never counted
    /// as a near tie. Empty for decisions that carry no such claim.
    pub contradicted: Vec<String>,
}

/// How the rows of an output group relate to the tokens of the case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rows {
    /// One set of values for the whole case (`raw`, the counts).
    Global,
    /// `cols` values per token, row t belonging to token t. `local`: row t
    /// depends on token t's inputs alone (batch invariance applies to it).
    PerToken { local: bool },
}

/// The values of an output group: real outputs (compared bitwise, judged
/// against their bounds) or exact integers (counts, ids, a map).
#[derive(Clone, Debug)]
pub enum Values<'a, N> {
    Real(&'a [N]),
    Int(Vec<i64>),
}

/// One named output of an op, with its shape.
#[derive(Clone, Debug)]
pub struct Group<'a, N> {
    pub name: &'static str,
    pub rows: Rows,
    /// Values per row (per token for [`Rows::PerToken`]; all of them for
    /// [`Rows::Global`]).
    pub cols: usize,
    pub values: Values<'a, N>,
}

impl<N> Group<'_, N> {
    pub fn len(&self) -> usize {
        match &self.values {
            Values::Real(v) => v.len(),
            Values::Int(v) => v.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// `name[i]`, or `name[t][j]` for a per-token group.
    pub fn label(&self, i: usize) -> String {
        match self.rows {
            Rows::Global if self.len() == 1 => self.name.to_string(),
            Rows::Global => format!("{}[{i}]", self.name),
            Rows::PerToken { .. } => format!("{}[{}][{}]", self.name, i / self.cols.max(1), i % self.cols.max(1)),
        }
    }
}

/// Outcome of the finite-difference check of an op's analytic backward on
/// one case (see each op's `mpfr` module).
#[derive(Clone, Debug, Default)]
pub struct GradientCheck {
    /// Entries where the analytic derivative was compared with the
    /// difference quotient.
    pub checked: usize,
    /// Entries skipped because a decision changes within the step.
    pub kinks: usize,
    /// Entries with no derivative (NaN or Inf inputs, a zero denominator).
    pub nonfinite: usize,
    /// The entries where they disagree, one line each.
    pub failures: Vec<String>,
}

/// A forward result of op `O` on value type `N`, with its decisions.
pub type FwdRun<O, N> = Run<<O as Op>::Fwd<N>, <O as Op>::Decisions>;
/// A backward result of op `O` on value type `N`, with its decisions.
pub type BwdRun<O, N> = Run<<O as Op>::Bwd<N>, <O as Op>::Decisions>;

/// An op of docs/ops/, as the oracles see it.
pub trait Op: Sized + Send + Sync + 'static {
    /// The op's name: `--op`, `regressions/<NAME>/`, the `op` of a corpus entry.
    const NAME: &'static str;
    /// One input, every f32 kept exactly (serialized as hex floats).
    type Case: Clone + Debug + PartialEq + Serialize + DeserializeOwned + Send + Sync + 'static;
    type Profile: Profile;
    /// The discrete decisions the profile takes on its computed values.
    type Decisions: Clone + Debug + Send + Sync;
    type Fwd<N: Num>: Clone + Debug;
    type Bwd<N: Num>: Clone + Debug;
    type Error: std::error::Error + Clone + Send + Sync + 'static;

    /// Every rule of the validation section of the op's page in docs/ops/, and
    /// the memory bound of [`crate::case::MAX_STORAGE`]: everything downstream
    /// may index freely and allocate what a validated case implies.
    fn validate(case: &Self::Case) -> Result<(), Self::Error>;
    /// The case's named sizes (`T`, `E`, ...), for reports.
    fn dims(case: &Self::Case) -> Vec<(&'static str, usize)>;
    /// The most elements one buffer or intermediate of a valid case spans
    /// (a strided input's storage with its gaps, a T x 2F intermediate):
    /// what judging the case allocates, per buffer. A corpus entry's case
    /// is bounded by it (`bitparity::corpus::MAX_ENTRY_FOOTPRINT`), so that
    /// a file of a few bytes cannot ask for gigabytes.
    fn footprint(case: &Self::Case) -> usize;
    /// The multiply-adds of the forward, about: how long judging the case
    /// takes, above all in MPFR. A corpus entry's case is bounded by it too
    /// (`bitparity::corpus::MAX_ENTRY_WORK`), so that an entry cannot hold
    /// a replay for hours. Most ops are linear in their footprint.
    fn work(case: &Self::Case) -> usize {
        Self::footprint(case)
    }
    /// Every shipped profile.
    fn profiles() -> Vec<Self::Profile>;
    /// The profile the exact oracle runs (its order hardly matters there).
    fn exact_profile() -> Self::Profile;
    /// The profile whose every sum is [`crate::order::ReductionOrder::Any`]:
    /// run on [`crate::any_order::AnyOrder`] it bounds what a subject that
    /// claims no profile may compute. Never among [`Op::profiles`].
    fn any_order_profile() -> Self::Profile;

    /// Whether the op has padding rows at all (`shared_expert` has none,
    /// docs/ops/shared_expert.md#padding-rows: every token is computed, and
    /// both padding rules are the same op).
    const HAS_PADDING: bool = true;

    /// Whether the op has a clamp whose tie rule a subject can claim
    /// (`seqwise_loss`'s `clamp_tie`, docs/ops/seqwise_loss.md#the-clamp-tie;
    /// `shared_expert` has none). True exactly when [`Op::with_clamp_tie`]
    /// gives a case.
    const HAS_CLAMP: bool = false;

    /// `case` with its clamp tie rule (docs/ops/seqwise_loss.md#the-clamp-tie,
    /// the side of n == eps the gradient gate opens on) set to `tie`: what a
    /// subject that implements one rule only is judged on. `None`: the op has
    /// no clamp (`shared_expert`).
    fn with_clamp_tie(case: &Self::Case, tie: ClampTie) -> Option<Self::Case> {
        let _ = (case, tie);
        None
    }

    /// The forward on any value type under padding rule `rule`
    /// ([`crate::padding`]); `imposed` replaces the decisions the value type
    /// would take (the exact oracle takes the profile's).
    // The contract reads best spelled out; an alias would hide it.
    #[allow(clippy::type_complexity)]
    fn forward_under<N: Num>(
        case: &Self::Case,
        profile: &Self::Profile,
        rule: PaddingRule,
        imposed: Option<&Self::Decisions>,
    ) -> Result<FwdRun<Self, N>, Self::Error>;
    /// The backward on any value type (see [`Op::forward_under`]).
    #[allow(clippy::type_complexity)]
    fn backward_under<N: Num>(
        case: &Self::Case,
        profile: &Self::Profile,
        rule: PaddingRule,
        imposed: Option<&Self::Decisions>,
    ) -> Result<BwdRun<Self, N>, Self::Error>;

    /// [`Op::forward_under`] bitparity's padding rule, `skip`.
    #[allow(clippy::type_complexity)]
    fn forward_on<N: Num>(
        case: &Self::Case,
        profile: &Self::Profile,
        imposed: Option<&Self::Decisions>,
    ) -> Result<FwdRun<Self, N>, Self::Error> {
        Self::forward_under(case, profile, PaddingRule::Skip, imposed)
    }
    /// [`Op::backward_under`] bitparity's padding rule, `skip`.
    #[allow(clippy::type_complexity)]
    fn backward_on<N: Num>(
        case: &Self::Case,
        profile: &Self::Profile,
        imposed: Option<&Self::Decisions>,
    ) -> Result<BwdRun<Self, N>, Self::Error> {
        Self::backward_under(case, profile, PaddingRule::Skip, imposed)
    }

    /// The forward's outputs on `case`, labelled, in a fixed order.
    fn fwd_groups<'a, N: Num>(case: &Self::Case, f: &'a Self::Fwd<N>) -> Vec<Group<'a, N>>;
    /// The backward's outputs on `case`, labelled, in a fixed order.
    fn bwd_groups<'a, N: Num>(case: &Self::Case, b: &'a Self::Bwd<N>) -> Vec<Group<'a, N>>;

    /// The analytic derivative (the exact backward) against high-precision
    /// central finite differences of the exact forward, on at most
    /// `max_entries` entries spread over the case.
    fn check_gradient(case: &Self::Case, max_entries: usize) -> Result<GradientCheck, Self::Error>;
}

/// The profile oracle: the forward in plain f32.
pub fn forward<O: Op>(case: &O::Case, profile: &O::Profile) -> Result<O::Fwd<f32>, O::Error> {
    forward_under::<O>(case, profile, PaddingRule::Skip)
}

/// The profile oracle: the backward in plain f32.
pub fn backward<O: Op>(case: &O::Case, profile: &O::Profile) -> Result<O::Bwd<f32>, O::Error> {
    backward_under::<O>(case, profile, PaddingRule::Skip)
}

/// The profile oracle under padding rule `rule`: the forward in plain f32.
pub fn forward_under<O: Op>(case: &O::Case, profile: &O::Profile, rule: PaddingRule) -> Result<O::Fwd<f32>, O::Error> {
    Ok(O::forward_under::<f32>(case, profile, rule, None)?.out)
}

/// The profile oracle under padding rule `rule`: the backward in plain f32.
pub fn backward_under<O: Op>(case: &O::Case, profile: &O::Profile, rule: PaddingRule) -> Result<O::Bwd<f32>, O::Error> {
    Ok(O::backward_under::<f32>(case, profile, rule, None)?.out)
}

/// Which values of the profile oracle's forward `profile` leaves undecided
/// ([`crate::undecided`]), group by group as [`Op::fwd_groups`] lists them;
/// `None` where the profile decides every bit.
pub fn undecided_forward<O: Op>(
    case: &O::Case,
    profile: &O::Profile,
    rule: PaddingRule,
) -> Result<Option<Vec<Vec<bool>>>, O::Error> {
    let run = || O::forward_under::<Tracked>(case, profile, rule, None).map(|r| marks(&O::fwd_groups(case, &r.out)));
    profile.may_leave_undecided().then(run).transpose()
}

/// [`undecided_forward`] for the backward.
pub fn undecided_backward<O: Op>(
    case: &O::Case,
    profile: &O::Profile,
    rule: PaddingRule,
) -> Result<Option<Vec<Vec<bool>>>, O::Error> {
    let run = || O::backward_under::<Tracked>(case, profile, rule, None).map(|r| marks(&O::bwd_groups(case, &r.out)));
    profile.may_leave_undecided().then(run).transpose()
}

/// Each value's mark; exact integers are always decided.
fn marks(groups: &[Group<'_, Tracked>]) -> Vec<Vec<bool>> {
    groups
        .iter()
        .map(|g| match &g.values {
            Values::Real(v) => v.iter().map(|t| t.undecided()).collect(),
            Values::Int(v) => vec![false; v.len()],
        })
        .collect()
}

#[cfg(test)]
mod group_tests {
    use super::*;

    #[test]
    fn a_group_is_empty_only_without_values() {
        let g = |values: Values<'static, f32>| Group { name: "g", rows: Rows::Global, cols: 1, values };
        assert!(!g(Values::Real(&[1.0])).is_empty());
        assert!(!g(Values::Int(vec![7])).is_empty());
        assert!(g(Values::Real(&[])).is_empty());
        assert!(g(Values::Int(vec![])).is_empty());
    }

    #[test]
    fn a_label_names_the_output_and_its_place_as_failure_messages_show_it() {
        let raw = Group { name: "raw", rows: Rows::Global, cols: 1, values: Values::Real(&[0.5f32]) };
        assert_eq!(raw.label(0), "raw");
        let counts: Group<'_, f32> =
            Group { name: "counts", rows: Rows::Global, cols: 4, values: Values::Int(vec![1, 2, 3, 4]) };
        assert_eq!(counts.label(3), "counts[3]");
        // Three tokens of two values: element 5 is token 2, column 1.
        let v = [0.0f32; 6];
        let grad = Group { name: "grad", rows: Rows::PerToken { local: true }, cols: 2, values: Values::Real(&v) };
        assert_eq!(grad.label(5), "grad[2][1]");
        assert_eq!(grad.label(0), "grad[0][0]");
    }
}

#[cfg(test)]
mod profile_name_tests {
    use super::*;
    use crate::op::moe_combine::MoeCombine;
    use crate::op::router::Router;
    use crate::op::seqwise_loss::SeqwiseLoss;
    use crate::op::shared_expert::SharedExpert;

    fn names<O: Op>() -> Vec<String> {
        O::profiles().iter().map(|p| p.name().to_string()).collect()
    }

    #[test]
    fn every_op_names_its_profiles_as_corpus_entries_and_subjects_do() {
        // The names are stored in corpus entries and name subjects
        // (`oracle:serial`): written out here, not read from the code.
        assert_eq!(names::<SeqwiseLoss>(), ["serial", "warp32-chunk64"]);
        assert_eq!(names::<Router>(), ["serial", "warp32"]);
        assert_eq!(names::<SharedExpert>(), ["serial", "mma16-h100"]);
        assert_eq!(names::<MoeCombine>(), ["serial", "by-slot", "serial-bf16"]);
        for n in ["serial", "by-slot", "serial-bf16"] {
            let p = crate::profile::moe_combine::MoeCombineProfile::by_name(n).unwrap();
            assert_eq!(p.name(), n);
        }
        assert_eq!(MoeCombine::any_order_profile().name(), "any-order");
        for n in ["serial", "warp32"] {
            let p = crate::profile::router::RouterProfile::by_name(n).unwrap();
            assert_eq!(p.name(), n);
        }
        // A stored entry's profile is found again by its name.
        for n in ["serial", "warp32-chunk64"] {
            let p = crate::profile::seqwise_loss::SeqwiseProfile::by_name(n).unwrap();
            assert_eq!(p.name(), n);
        }
        assert!(crate::profile::seqwise_loss::SeqwiseProfile::by_name("warp32").is_none());
        assert_eq!(SeqwiseLoss::any_order_profile().name(), "any-order");
        assert_eq!(Router::any_order_profile().name(), "any-order");
    }

    /// Through the trait, as the generic layer calls it: a profile with a
    /// chunk of size 0 is refused, whichever op and whichever of its sums.
    #[test]
    fn every_op_refuses_a_profile_with_an_empty_chunk_through_the_trait() {
        use crate::order::ReductionOrder::{self, Serial};
        use crate::profile::shared_expert::SharedExpertProfile;
        use crate::profile::{router::RouterProfile, seqwise_loss::SeqwiseProfile};
        fn checked<P: Profile>(p: &P) -> Result<(), String> {
            p.validate()
        }
        let empty = || ReductionOrder::chunked(0, Serial, Serial);
        for o in SeqwiseLoss::profiles().iter().chain([&SeqwiseLoss::any_order_profile()]) {
            assert_eq!(checked(o), Ok(()), "{}", o.name);
        }
        let mut p = SeqwiseProfile::gpu();
        p.q = empty();
        assert!(checked(&p).is_err());
        let mut r = RouterProfile::serial();
        assert_eq!(checked(&r), Ok(()));
        r.loss.row = empty();
        assert!(checked(&r).is_err());
        let mut e = SharedExpertProfile::serial();
        assert_eq!(checked(&e), Ok(()));
        e.dx = empty();
        assert!(checked(&e).is_err());
        for mut m in MoeCombine::profiles().into_iter().chain([MoeCombine::any_order_profile()]) {
            assert_eq!(checked(&m), Ok(()), "{}", m.name);
            m.combine = empty();
            assert!(checked(&m).is_err());
        }
    }
}

#[cfg(test)]
mod clamp_tie_tests {
    use super::*;
    use crate::case::router::{FusedLoss, RouterCase};
    use crate::case::seqwise_loss::{Objective, SeqwiseCase};
    use crate::case::Layout;
    use crate::op::router::Router;
    use crate::op::seqwise_loss::SeqwiseLoss;
    use crate::op::shared_expert::SharedExpert;

    #[test]
    fn with_clamp_tie_sets_the_rule_and_nothing_else() {
        let mut s = SeqwiseCase::dense(1, 2, vec![0.5, 0.25], Objective::ProvidedMap { map: vec![true, false] });
        s.g = 0.75;
        for tie in [ClampTie::Strict, ClampTie::Inclusive] {
            let got = SeqwiseLoss::with_clamp_tie(&s, tie).unwrap();
            assert_eq!(got, SeqwiseCase { clamp_tie: tie, ..s.clone() });
        }
        let mut r = RouterCase {
            t: 1,
            e: 2,
            layout: Layout::dense(2),
            logits: vec![0.5, -0.5],
            bias: vec![0.0; 2],
            groups: 1,
            topk_groups: 1,
            k: 1,
            route_scale: 1.0,
            route_norm: true,
            padding: None,
            gw: vec![1.0],
            loss: None,
        };
        // No fused loss: no clamp, the case unchanged.
        assert_eq!(Router::with_clamp_tie(&r, ClampTie::Inclusive).unwrap(), r);
        r.loss = Some(FusedLoss { clamp_tie: ClampTie::Strict, g: 0.5 });
        let got = Router::with_clamp_tie(&r, ClampTie::Inclusive).unwrap();
        assert_eq!(got.loss, Some(FusedLoss { clamp_tie: ClampTie::Inclusive, g: 0.5 }));
        assert_eq!(RouterCase { loss: r.loss, ..got }, r);
        let x = crate::case::shared_expert::SharedExpertCase {
            t: 1,
            h: 1,
            f: 1,
            layout: Layout::dense(1),
            x: vec![1.0],
            w1: vec![1.0, 1.0],
            w2: vec![1.0],
            dy: vec![1.0],
        };
        assert!(SharedExpert::with_clamp_tie(&x, ClampTie::Strict).is_none(), "shared_expert has no clamp");
        // HAS_CLAMP says what with_clamp_tie does.
        assert_eq!(SeqwiseLoss::with_clamp_tie(&s, ClampTie::Strict).is_some(), SeqwiseLoss::HAS_CLAMP);
        assert_eq!(Router::with_clamp_tie(&r, ClampTie::Strict).is_some(), Router::HAS_CLAMP);
        assert_eq!(SharedExpert::with_clamp_tie(&x, ClampTie::Strict).is_some(), SharedExpert::HAS_CLAMP);
    }

    /// The sizes reports print for a case, named as docs/ops/ names them and
    /// written out here: T and E (and k for the unbiased top-k objective), the
    /// router's G, L and k, the MLP's H and F.
    #[test]
    fn every_op_names_its_sizes_for_reports() {
        let map = SeqwiseCase::dense(1, 3, vec![0.5, 0.25, 0.25], Objective::ProvidedMap { map: vec![true; 3] });
        assert_eq!(SeqwiseLoss::dims(&map), [("T", 1), ("E", 3)]);
        let topk = SeqwiseCase { objective: Objective::UnbiasedTopK { k: 2 }, ..map };
        assert_eq!(SeqwiseLoss::dims(&topk), [("T", 1), ("E", 3), ("k", 2)]);
        let r = RouterCase {
            t: 1,
            e: 4,
            layout: Layout::dense(4),
            logits: vec![0.5; 4],
            bias: vec![0.0; 4],
            groups: 2,
            topk_groups: 1,
            k: 2,
            route_scale: 1.0,
            route_norm: true,
            padding: None,
            gw: vec![1.0; 2],
            loss: None,
        };
        assert_eq!(Router::dims(&r), [("T", 1), ("E", 4), ("G", 2), ("L", 1), ("k", 2)]);
        let x = crate::case::shared_expert::SharedExpertCase {
            t: 2,
            h: 3,
            f: 1,
            layout: Layout::dense(3),
            x: vec![1.0; 6],
            w1: vec![1.0; 6],
            w2: vec![1.0; 3],
            dy: vec![1.0; 6],
        };
        assert_eq!(SharedExpert::dims(&x), [("T", 2), ("H", 3), ("F", 1)]);
        let m = crate::case::moe_combine::MoeCombineCase {
            t: 2,
            h: 3,
            e: 5,
            k: 2,
            capacity: None,
            layout: Layout::dense(3),
            ids: vec![0, 1, 2, 3],
            weights: vec![1.0; 4],
            padding: None,
            x: vec![1.0; 6],
            x_exp: vec![1.0; 12],
            dy: vec![1.0; 6],
            g_disp: vec![1.0; 12],
        };
        assert_eq!(crate::op::moe_combine::MoeCombine::dims(&m), [("T", 2), ("H", 3), ("E", 5), ("k", 2)]);
    }
}
