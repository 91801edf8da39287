//! The properties of docs/ops/README.md#properties, written once for every op:
//! each judges one subject on one case. What is op-specific (which outputs
//! exist, how a case is transformed, the finite-difference check) comes from
//! the op's [`Op`] and [`Harness`].

pub mod compare;

use crate::harness::{Harness, Metamorphic};
use crate::subject::{Subject, SubjectError, SubjectKind};
use compare::{diff_decided, diff_groups, diff_transformed};
use oracles::any_order::AnyOrder;
use oracles::mpfr::histogram::RatioHistogram;
use oracles::mpfr::reference::{Accuracy, BackwardReference, ForwardReference};
use oracles::op::{self, Group, Op, Profile};
use oracles::padding::PaddingRule;
use serde::{Deserialize, Serialize};
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Entries per case whose derivative is checked by finite differences.
pub const FD_ENTRIES: usize = 16;

/// The name of the finite-difference check's row: the spec's formulas
/// themselves, judged in MPFR, with no subject taking part.
pub const MPFR_SUBJECT: &str = "mpfr";

/// The properties of docs/ops/README.md#properties.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Property {
    /// Tier A: forward outputs within the profile's rigorous bound of MPFR.
    Accuracy,
    /// Tier A: the analytic derivative against high-precision finite
    /// differences (subject `mpfr`), and the backward within its bound of it.
    Gradient,
    /// Tier A: every invalid input gets an error; nothing panics.
    Validation,
    /// Tier A/B: appended padding rows and NaN/Inf-poisoned padding change no bit.
    Padding,
    /// Tier B (tier A for CPU subjects): bitwise equal to the profile oracle.
    Conformance,
    /// Tier B: the same values at another offset or row stride give the same bits.
    OffsetStride,
    /// Tier B: a token's own outputs do not depend on the other tokens.
    BatchInvariance,
    /// Tier B: two runs give identical bits.
    Determinism,
}

impl Property {
    pub const ALL: [Property; 8] = [
        Property::Conformance,
        Property::Padding,
        Property::OffsetStride,
        Property::BatchInvariance,
        Property::Determinism,
        Property::Validation,
        Property::Accuracy,
        Property::Gradient,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Property::Accuracy => "accuracy",
            Property::Gradient => "gradient",
            Property::Validation => "validation",
            Property::Padding => "padding",
            Property::Conformance => "conformance",
            Property::OffsetStride => "offset-stride",
            Property::BatchInvariance => "batch-invariance",
            Property::Determinism => "determinism",
        }
    }
    pub fn by_name(s: &str) -> Option<Property> {
        Property::ALL.into_iter().find(|p| p.name() == s)
    }
    /// Whether the property compares bits (no error/bound ratio).
    pub fn bitwise(self) -> bool {
        !matches!(self, Property::Accuracy | Property::Gradient)
    }
    fn metamorphic(self) -> Option<Metamorphic> {
        match self {
            Property::Padding => Some(Metamorphic::Padding),
            Property::OffsetStride => Some(Metamorphic::OffsetStride),
            Property::BatchInvariance => Some(Metamorphic::BatchInvariance),
            _ => None,
        }
    }
}

impl fmt::Display for Property {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One property's judgement of one subject on one case.
#[derive(Clone, Debug, Default)]
pub struct Judgement {
    /// Why it failed; `None` when it held (or said nothing).
    pub failure: Option<String>,
    /// The property says nothing about this case (no transform applies):
    /// the case is not counted for it.
    pub not_applicable: bool,
    /// Worst |error| / bound over the outputs (accuracy and gradient).
    pub ratio: Option<f64>,
    /// Rows where the exact value would have decided otherwise.
    pub near_ties: usize,
    /// Outputs with no finite bound: counted, not judged.
    pub unbounded: usize,
    /// Finite-difference entries skipped at a kink.
    pub kinks: usize,
    /// Exact outputs whose correct f32 rounding stayed undetermined.
    pub undetermined: usize,
    /// Every output's |error| / bound (accuracy and gradient, when the
    /// outputs could be judged at all).
    pub histogram: Option<RatioHistogram>,
    /// The subject said it cannot run this case here (an honest skip,
    /// with its reason): not judged, counted apart.
    pub unavailable: Option<String>,
}

impl Judgement {
    pub fn fail(msg: impl Into<String>) -> Self {
        Judgement { failure: Some(msg.into()), ..Default::default() }
    }
    fn not_applicable() -> Self {
        Judgement { not_applicable: true, ..Default::default() }
    }
    fn unavailable(why: String) -> Self {
        Judgement { unavailable: Some(why), ..Default::default() }
    }
    pub fn passed(&self) -> bool {
        self.failure.is_none()
    }
}

/// Whether `property` can say anything about subject `s` of op `O`; the
/// reason when it cannot (the row is reported `n/a`, never counted).
pub fn applies<O: Harness>(property: Property, s: &dyn Subject<O>) -> Result<(), String> {
    let kind = s.kind();
    match property {
        Property::Conformance if kind == SubjectKind::Oracle => {
            Err("the profile oracle itself: conformance would compare it with itself".into())
        }
        // Accuracy and gradient judge a subject that claims no profile against
        // the bound of every admissible evaluation (any order of every sum,
        // docs/ops/README.md#the-accuracy-bound): see [`accuracy`].
        Property::Conformance if s.profile().is_none() => Err("the subject claims no profile".into()),
        Property::OffsetStride if kind == SubjectKind::Oracle => {
            Err("the profile oracle reads the case's logical values, not a memory layout".into())
        }
        Property::Determinism if !matches!(kind, SubjectKind::Device | SubjectKind::External) => {
            Err("a pure CPU function".into())
        }
        _ => match property.metamorphic() {
            Some(m) => O::applies(m),
            None => Ok(()),
        },
    }
}

/// Per case, the references of each (profile, padding rule), computed once
/// and shared by every subject that claims that pair, and the any-order
/// references per padding rule, shared by every subject that claims no
/// profile.
pub struct References<O: Op> {
    fwd: HashMap<(String, PaddingRule), ForwardReference<O>>,
    bwd: HashMap<(String, PaddingRule), BackwardReference<O>>,
    any_fwd: HashMap<PaddingRule, ForwardReference<O, AnyOrder>>,
    any_bwd: HashMap<PaddingRule, BackwardReference<O, AnyOrder>>,
}

impl<O: Op> Default for References<O> {
    fn default() -> Self {
        References { fwd: HashMap::new(), bwd: HashMap::new(), any_fwd: HashMap::new(), any_bwd: HashMap::new() }
    }
}

fn refused(e: impl fmt::Display) -> String {
    format!("the oracles refused the case: {e}")
}

impl<O: Op> References<O> {
    fn forward(&mut self, case: &O::Case, p: &O::Profile, rule: PaddingRule) -> Result<&ForwardReference<O>, String> {
        match self.fwd.entry((p.name().to_string(), rule)) {
            Entry::Occupied(e) => Ok(e.into_mut()),
            Entry::Vacant(e) => Ok(e.insert(ForwardReference::under(case, p, rule).map_err(refused)?)),
        }
    }
    fn any_forward(&mut self, case: &O::Case, rule: PaddingRule) -> Result<&ForwardReference<O, AnyOrder>, String> {
        match self.any_fwd.entry(rule) {
            Entry::Occupied(e) => Ok(e.into_mut()),
            Entry::Vacant(e) => Ok(e.insert(ForwardReference::any_order_under(case, rule).map_err(refused)?)),
        }
    }
    fn any_backward(&mut self, case: &O::Case, rule: PaddingRule) -> Result<&BackwardReference<O, AnyOrder>, String> {
        match self.any_bwd.entry(rule) {
            Entry::Occupied(e) => Ok(e.into_mut()),
            Entry::Vacant(e) => Ok(e.insert(BackwardReference::any_order_under(case, rule).map_err(refused)?)),
        }
    }
    fn backward(&mut self, case: &O::Case, p: &O::Profile, rule: PaddingRule) -> Result<&BackwardReference<O>, String> {
        match self.bwd.entry((p.name().to_string(), rule)) {
            Entry::Occupied(e) => Ok(e.into_mut()),
            Entry::Vacant(e) => Ok(e.insert(BackwardReference::under(case, p, rule).map_err(refused)?)),
        }
    }
}

/// Why a property stopped before its verdict: a failure, or the subject
/// declared itself unavailable for the case (an honest skip, never a pass).
#[derive(Debug)]
enum Stop {
    Failed(String),
    Unavailable(String),
}

impl From<String> for Stop {
    fn from(m: String) -> Self {
        Stop::Failed(m)
    }
}

/// A subject call that may not panic: a panic is reported as a failure.
fn call<T>(what: &str, f: impl FnOnce() -> Result<T, SubjectError>) -> Result<T, Stop> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(SubjectError::Unavailable(m))) => Err(Stop::Unavailable(format!("{what}: {m}"))),
        Ok(Err(e)) => Err(Stop::Failed(format!("{what}: {e}"))),
        Err(p) => Err(Stop::Failed(format!("{what} panicked: {}", panic_message(&*p)))),
    }
}

/// The text of a panic payload.
pub fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default()
}

fn forward<O: Op>(s: &dyn Subject<O>, case: &O::Case) -> Result<O::Fwd<f32>, Stop> {
    call("forward", || s.forward(case))
}
fn backward<O: Op>(s: &dyn Subject<O>, case: &O::Case) -> Result<O::Bwd<f32>, Stop> {
    call("backward", || s.backward(case))
}

fn verdict(r: Result<Option<String>, Stop>) -> Judgement {
    match r {
        Ok(None) => Judgement::default(),
        Ok(Some(m)) | Err(Stop::Failed(m)) => Judgement::fail(m),
        Err(Stop::Unavailable(m)) => Judgement::unavailable(m),
    }
}

/// Judges `property` for subject `s` on `case` (a valid case). The caller has
/// checked [`applies`].
pub fn judge<O: Harness>(
    property: Property,
    s: &dyn Subject<O>,
    case: &O::Case,
    refs: &mut References<O>,
) -> Judgement {
    // A subject of one clamp tie rule is judged on the case under its rule
    // (the references are per case and rule, so they are not shared).
    let claimed = s.clamp_tie().and_then(|t| O::with_clamp_tie(case, t)).filter(|c| c != case);
    let mut own = References::default();
    let (case, refs) = match &claimed {
        Some(c) => (c, &mut own),
        None => (case, refs),
    };
    let mut j = match property {
        Property::Conformance => conformance(s, case),
        Property::Accuracy => accuracy(s, case, refs),
        Property::Gradient => gradient(s, case, refs),
        Property::Validation => validation(s, case),
        Property::Determinism => determinism(s, case),
        Property::Padding => metamorphic(s, case, Metamorphic::Padding),
        Property::OffsetStride => metamorphic(s, case, Metamorphic::OffsetStride),
        Property::BatchInvariance => metamorphic(s, case, Metamorphic::BatchInvariance),
    };
    // The stored case keeps its own rule: the message says which one judged.
    if let (Some(m), Some(t)) = (&mut j.failure, claimed.as_ref().and(s.clamp_tie())) {
        m.push_str(&format!(" (judged under clamp_tie {}, the subject's claim)", t.name()));
    }
    j
}

/// Bitwise equality with the profile oracle of the subject's profile, under
/// the padding rule it claims, forward then backward. Outputs the profile
/// leaves undecided ([`oracles::undecided`]: a step of an MMA model where
/// the model is open) are not compared: they are counted `undetermined`,
/// and a case whose outputs are all undecided judges nothing (n/a).
pub fn conformance<O: Harness>(s: &dyn Subject<O>, case: &O::Case) -> Judgement {
    conforms(s, case, true)
}

/// The forward half of [`conformance`] (a fuzz target's step).
pub fn forward_conformance<O: Harness>(s: &dyn Subject<O>, case: &O::Case) -> Judgement {
    conforms(s, case, false)
}

fn conforms<O: Harness>(s: &dyn Subject<O>, case: &O::Case, with_backward: bool) -> Judgement {
    let Some(p) = s.profile() else { return Judgement::not_applicable() };
    let rule = s.padding();
    let (mut undecided, mut values) = (0, 0);
    // One pass's groups against the expected ones, counting what was left out.
    let mut compare = |expected: &[Group<f32>], got: &[Group<f32>], open: Option<Vec<Vec<bool>>>| {
        values += expected.iter().map(|g| g.len()).sum::<usize>();
        let (d, n) = diff_decided(expected, got, open.as_deref());
        undecided += n;
        d
    };
    let mut j = verdict((|| {
        let refused = |e: O::Error| format!("the profile oracle refused the case: {e}");
        let f = forward(s, case)?;
        let expected = op::forward_under::<O>(case, &p, rule).map_err(refused)?;
        let open = op::undecided_forward::<O>(case, &p, rule).map_err(refused)?;
        let d = compare(&O::fwd_groups(case, &expected), &O::fwd_groups(case, &f), open);
        if d.is_some() || !with_backward {
            return Ok(d.map(|d| format!("forward {d}")));
        }
        let b = backward(s, case)?;
        let expected = op::backward_under::<O>(case, &p, rule).map_err(refused)?;
        let open = op::undecided_backward::<O>(case, &p, rule).map_err(refused)?;
        Ok(compare(&O::bwd_groups(case, &expected), &O::bwd_groups(case, &b), open).map(|d| format!("backward {d}")))
    })());
    j.undetermined = undecided;
    j.not_applicable = j.passed() && j.unavailable.is_none() && undecided > 0 && undecided == values;
    j
}

/// Two runs, forward and backward, give the same bits.
fn determinism<O: Harness>(s: &dyn Subject<O>, case: &O::Case) -> Judgement {
    verdict((|| {
        let (f1, f2) = (forward(s, case)?, forward(s, case)?);
        if let Some(d) = diff_groups(&O::fwd_groups(case, &f1), &O::fwd_groups(case, &f2)) {
            return Ok(Some(format!("second run: forward {d}")));
        }
        let (b1, b2) = (backward(s, case)?, backward(s, case)?);
        Ok(diff_groups(&O::bwd_groups(case, &b1), &O::bwd_groups(case, &b2))
            .map(|d| format!("second run: backward {d}")))
    })())
}

/// Every transformed case of the relation relates to the original as its
/// [`crate::harness::Transform`] says, forward and backward.
fn metamorphic<O: Harness>(s: &dyn Subject<O>, case: &O::Case, kind: Metamorphic) -> Judgement {
    let transforms = O::transforms(kind, case, s.padding());
    if transforms.is_empty() {
        return Judgement::not_applicable();
    }
    verdict((|| {
        let (fa, ba) = (forward(s, case)?, backward(s, case)?);
        for t in &transforms {
            let fb = forward(s, &t.case)?;
            if let Some(d) = diff_transformed(&O::fwd_groups(case, &fa), &O::fwd_groups(&t.case, &fb), t) {
                return Ok(Some(format!("{}: forward {d}", t.what)));
            }
            let bb = backward(s, &t.case)?;
            if let Some(d) = diff_transformed(&O::bwd_groups(case, &ba), &O::bwd_groups(&t.case, &bb), t) {
                return Ok(Some(format!("{}: backward {d}", t.what)));
            }
        }
        Ok(None)
    })())
}

/// Every invalid variant of the case is refused by the spec's validation
/// and, as invalid input, by the subject (forward and backward).
fn validation<O: Harness>(s: &dyn Subject<O>, case: &O::Case) -> Judgement {
    for (what, bad) in O::invalid_variants(case) {
        if O::validate(&bad).is_ok() {
            return Judgement::fail(format!("{what}: the spec's validation accepted it"));
        }
        let outcomes = [
            catch_unwind(AssertUnwindSafe(|| s.forward(&bad).map(|_| ()))),
            catch_unwind(AssertUnwindSafe(|| s.backward(&bad).map(|_| ()))),
        ];
        for (dir, o) in ["forward", "backward"].iter().zip(outcomes) {
            match o {
                Ok(Err(SubjectError::Invalid(_))) => {}
                Ok(Ok(())) => return Judgement::fail(format!("{dir} accepted an invalid input ({what})")),
                // Not judged, never passed: a subject that cannot run the
                // case here (a hung one) says nothing of its validation.
                Ok(Err(SubjectError::Unavailable(m))) => {
                    return Judgement::unavailable(format!("{dir} on {what}: {m}"))
                }
                Ok(Err(e)) => {
                    return Judgement::fail(format!("{dir} on {what}: {e} (expected an invalid-input error)"))
                }
                Err(_) => return Judgement::fail(format!("{dir} panicked on an invalid input ({what})")),
            }
        }
    }
    Judgement::default()
}

/// The forward within its bound of the exact forward: the bound of the
/// subject's profile, or, for a subject that claims none, the bound of every
/// admissible evaluation (any order and association of every sum, products
/// possibly contracted; [`oracles::any_order`]). A run of the latter where a
/// decision could go either way for such a subject (a clamp tie in a sum of
/// two or more terms) judges nothing: its outputs are counted undetermined.
fn accuracy<O: Harness>(s: &dyn Subject<O>, case: &O::Case, refs: &mut References<O>) -> Judgement {
    bounded(
        "forward",
        forward(s, case).and_then(|f| match s.profile() {
            Some(p) => Ok(refs.forward(case, &p, s.padding()).map_err(Stop::Failed)?.judge(case, &f)),
            None => Ok(refs.any_forward(case, s.padding()).map_err(Stop::Failed)?.judge(case, &f)),
        }),
    )
}

/// The backward within its bound of the exact backward, the analytic
/// derivative of the exact forward (checked against finite differences by
/// the `mpfr` row): as [`accuracy`], with the profile's bound or the
/// any-order one.
fn gradient<O: Harness>(s: &dyn Subject<O>, case: &O::Case, refs: &mut References<O>) -> Judgement {
    bounded(
        "backward",
        backward(s, case).and_then(|b| match s.profile() {
            Some(p) => Ok(refs.backward(case, &p, s.padding()).map_err(Stop::Failed)?.judge(case, &b)),
            None => Ok(refs.any_backward(case, s.padding()).map_err(Stop::Failed)?.judge(case, &b)),
        }),
    )
}

/// A judgement from an accuracy verdict (or the reason there is none).
fn bounded(what: &str, judged: Result<Accuracy, Stop>) -> Judgement {
    match judged {
        Err(Stop::Failed(m)) => Judgement::fail(m),
        Err(Stop::Unavailable(m)) => Judgement::unavailable(m),
        Ok(acc) => Judgement {
            failure: acc.outside.first().map(|m| format!("{what} outside its bound: {m}")),
            ratio: Some(acc.worst_ratio),
            near_ties: acc.near_ties,
            unbounded: acc.unbounded,
            undetermined: acc.undetermined,
            histogram: Some(acc.histogram),
            ..Default::default()
        },
    }
}

/// The analytic derivative (exact backward) against finite differences of
/// the exact forward: a property of the spec's formulas, judged once a case
/// (row `gradient / - / mpfr`).
pub fn finite_differences<O: Op>(case: &O::Case) -> Judgement {
    match O::check_gradient(case, FD_ENTRIES) {
        Err(e) => Judgement::fail(format!("the MPFR oracle refused the case: {e}")),
        Ok(r) => Judgement {
            failure: r.failures.first().cloned(),
            kinks: r.kinks,
            unbounded: r.nonfinite,
            not_applicable: r.checked == 0,
            ..Default::default()
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::resolve;
    use crate::model::SharedExpertModel;
    use crate::subject::SubjectError;
    use oracles::case::shared_expert::{SharedExpertBackward, SharedExpertCase, SharedExpertForward};
    use oracles::op::seqwise_loss::SeqwiseLoss;
    use oracles::op::shared_expert::SharedExpert;
    use oracles::profile::shared_expert::SharedExpertProfile;

    /// `applies` of `property` to the one subject `name` of op `O`: `Ok` or
    /// the reason.
    fn verdict<O: Harness>(property: Property, name: &str) -> Result<(), String> {
        let s = resolve::<O>(name).unwrap();
        assert_eq!(s.len(), 1, "{name}");
        applies(property, s[0].as_ref())
    }

    #[test]
    fn a_property_that_cannot_judge_a_subject_says_why_and_one_that_can_applies() {
        let reason = |r: Result<(), String>| r.expect_err("n/a");
        // The profile oracle against itself, or read as a memory layout.
        assert!(reason(verdict::<SeqwiseLoss>(Property::Conformance, "oracle:serial")).contains("with itself"));
        assert!(reason(verdict::<SeqwiseLoss>(Property::OffsetStride, "oracle:serial")).contains("memory layout"));
        // A CPU function is deterministic by construction.
        assert!(reason(verdict::<SeqwiseLoss>(Property::Determinism, "model:serial")).contains("pure CPU"));
        // A subject that claims no profile has no bits to conform to.
        let any = verdict::<SeqwiseLoss>(Property::Conformance, "anyorder:model:serial");
        assert!(reason(any).contains("claims no profile"));
        // The op's own word on a metamorphic relation.
        let batch = verdict::<SeqwiseLoss>(Property::BatchInvariance, "model:serial");
        assert!(reason(batch).contains("own token alone"));
        assert!(reason(verdict::<SharedExpert>(Property::Padding, "model:serial")).contains("no padding mask"));
        // Where nothing stands in the way, the property judges.
        for p in [Property::Conformance, Property::OffsetStride, Property::Padding, Property::Validation] {
            assert_eq!(verdict::<SeqwiseLoss>(p, "model:serial"), Ok(()), "{p}");
        }
        for p in [Property::BatchInvariance, Property::Accuracy, Property::Gradient] {
            assert_eq!(verdict::<SharedExpert>(p, "model:serial"), Ok(()), "{p}");
        }
    }

    /// The `mma16-h100` kernel model with the last bit of y[t][0] and of
    /// dX[t][0] flipped, for token t.
    struct Nudged(usize);

    impl Subject<SharedExpert> for Nudged {
        fn name(&self) -> String {
            "nudged".into()
        }
        fn profile(&self) -> Option<SharedExpertProfile> {
            Some(SharedExpertProfile::mma_h100())
        }
        fn kind(&self) -> SubjectKind {
            SubjectKind::Model
        }
        fn forward(&self, case: &SharedExpertCase) -> Result<SharedExpertForward<f32>, SubjectError> {
            let mut f = SharedExpertModel::new(SharedExpertProfile::mma_h100()).forward(case).unwrap();
            f.y[self.0 * case.h] = f32::from_bits(f.y[self.0 * case.h].to_bits() ^ 0x1_0000);
            Ok(f)
        }
        fn backward(&self, case: &SharedExpertCase) -> Result<SharedExpertBackward<f32>, SubjectError> {
            let mut b = SharedExpertModel::new(SharedExpertProfile::mma_h100()).backward(case).unwrap();
            b.dx[self.0 * case.h] = f32::from_bits(b.dx[self.0 * case.h].to_bits() ^ 1);
            Ok(b)
        }
    }

    /// Token 0's gate sum is 3 x 2^-149, below 2^-126, where the MMA model
    /// is open: 2, 3 or 4 x 2^-149 are possible, and g sigmoid(g) is 2^-149
    /// or 2^-148. Times its up value 2^60, h is 2^-89 or 2^-88, and so is
    /// every y of token 0; times its dh, 2^61, so is its dz of the up unit,
    /// and every dX of token 0. Token 1's sums are 3 x 2^-79 and 0.5, and
    /// every step of it is decided.
    #[test]
    fn conformance_leaves_out_the_outputs_of_an_open_mma_step_and_judges_the_rest() {
        let p = |k: i32| 2f32.powi(k);
        let case = SharedExpertCase {
            t: 2,
            h: 2,
            f: 1,
            layout: oracles::case::Layout::dense(2),
            x: vec![p(-70), p(60), 1.0, 0.5],
            w1: vec![3.0 * p(-79), 0.0, 0.0, 1.0],
            w2: vec![1.0, 1.0],
            dy: vec![p(60), p(60), 1.0, -1.0],
        };
        assert_eq!(case.validate(), Ok(()));
        let exact = conformance::<SharedExpert>(&SharedExpertModel::new(SharedExpertProfile::mma_h100()), &case);
        assert!(exact.passed() && !exact.not_applicable, "{exact:?}");
        assert_eq!(exact.undetermined, 4, "token 0's y and dX, two values each");
        let open = conformance::<SharedExpert>(&Nudged(0), &case);
        assert!(open.passed() && !open.not_applicable, "{open:?}");
        assert_eq!(open.undetermined, 4);
        let decided = conformance::<SharedExpert>(&Nudged(1), &case);
        assert!(decided.failure.as_deref().is_some_and(|m| m.starts_with("forward y[1][0]: expected")), "{decided:?}");
        // The forward alone, as a fuzz target's step judges it.
        assert!(forward_conformance::<SharedExpert>(&Nudged(1), &case).failure.is_some());
        assert_eq!(forward_conformance::<SharedExpert>(&Nudged(0), &case).undetermined, 2);
        // Token 0 alone: nothing is decided, nothing is judged.
        let alone = conformance::<SharedExpert>(&Nudged(0), &case.rows(0..1));
        assert!(alone.passed() && alone.not_applicable && alone.undetermined == 4, "{alone:?}");
        // The serial profile decides every bit: nothing is left out.
        let serial = conformance::<SharedExpert>(&SharedExpertModel::new(SharedExpertProfile::serial()), &case);
        assert!(serial.passed() && serial.undetermined == 0, "{serial:?}");
    }

    #[test]
    fn an_accuracy_judgement_carries_its_verdicts_counts() {
        let s = resolve::<SharedExpert>("model:serial").unwrap().remove(0);
        let p = s.profile().expect("a profile");
        let cfg = crate::gen::GenConfig::default();
        let mut near_ties = 0;
        for i in 0..40 {
            let case = crate::harness::case_at::<SharedExpert>(3, i, &cfg);
            let j = judge(Property::Accuracy, s.as_ref(), &case, &mut References::default());
            let f = s.forward(&case).unwrap();
            let acc = ForwardReference::<SharedExpert>::under(&case, &p, s.padding()).unwrap().judge(&case, &f);
            assert_eq!(j.failure, None);
            assert_eq!((j.near_ties, j.unbounded, j.undetermined), (acc.near_ties, acc.unbounded, acc.undetermined));
            assert_eq!(j.ratio, Some(acc.worst_ratio));
            near_ties += j.near_ties;
        }
        assert!(near_ties > 0, "the cases hold near ties to count");
    }
}
