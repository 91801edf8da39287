//! The one judge: every check of a case, on every subject it applies to,
//! in one order, sharing the case's references (the oracles' results and
//! bounds, computed once per case). `check` judges everything; the
//! selftest, the mutants' hunts, the fuzz targets and `import` stop at the
//! first failure; `replay` and the shrinker judge one property.

use super::RowKey;
use crate::harness::Harness;
use crate::props::{self, applies, finite_differences, Judgement, Property, References, MPFR_SUBJECT};
use crate::subject::SubjectRef;
use oracles::op::Profile;

/// One check of a case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// A property (docs/ops/README.md#properties), on every subject it
    /// applies to.
    Judge(Property),
    /// Conformance of the forward alone (a forward fuzz target's). Filed
    /// under `conformance`, which checks the forward first.
    ForwardConformance,
    /// The analytic derivative against MPFR finite differences, once a case
    /// (subject `mpfr`).
    FiniteDifferences,
}

impl Step {
    /// The property a failure of this step is filed under.
    pub fn property(self) -> Property {
        match self {
            Step::Judge(p) => p,
            Step::ForwardConformance => Property::Conformance,
            Step::FiniteDifferences => Property::Gradient,
        }
    }
}

/// The steps of a list of properties: each property, and the finite
/// differences after the gradient (its row `mpfr`).
pub fn steps_of(properties: &[Property]) -> Vec<Step> {
    let mut v = Vec::new();
    for &p in properties {
        v.push(Step::Judge(p));
        if p == Property::Gradient {
            v.push(Step::FiniteDifferences);
        }
    }
    v
}

/// Whether to stop at the first failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Until {
    FirstFailure,
    All,
}

/// One judgement: of which step, filed under which row.
#[derive(Clone, Debug)]
pub struct Judged {
    pub key: RowKey,
    pub step: Step,
    pub judgement: Judgement,
}

/// The row of `step` for subject `s` (`None`: the finite differences).
pub fn row_key<O: Harness>(step: Step, s: Option<&SubjectRef<O>>) -> RowKey {
    match s {
        Some(s) => RowKey {
            op: O::NAME.into(),
            property: step.property(),
            profile: s.profile().map(|p| p.name().to_string()).unwrap_or_else(|| "-".into()),
            subject: s.name(),
        },
        None => {
            RowKey { op: O::NAME.into(), property: step.property(), profile: "-".into(), subject: MPFR_SUBJECT.into() }
        }
    }
}

/// Judges `case` with every step of `steps`, in order, each on every
/// subject it applies to (the finite differences once): the judgements in
/// that order, up to the first failure when `until` says so.
pub fn judge<O: Harness>(case: &O::Case, subjects: &[SubjectRef<O>], steps: &[Step], until: Until) -> Vec<Judged> {
    let mut refs = References::<O>::default();
    let mut out = Vec::new();
    for &step in steps {
        let on: Vec<Option<&SubjectRef<O>>> = match step {
            Step::FiniteDifferences => vec![None],
            _ => subjects.iter().filter(|s| applies(step.property(), s.as_ref()).is_ok()).map(Some).collect(),
        };
        for s in on {
            let judgement = match (step, s) {
                (Step::FiniteDifferences, _) | (_, None) => finite_differences::<O>(case),
                (Step::ForwardConformance, Some(s)) => props::forward_conformance(s.as_ref(), case),
                (Step::Judge(p), Some(s)) => props::judge(p, s.as_ref(), case, &mut refs),
            };
            let failed = judgement.failure.is_some();
            out.push(Judged { key: row_key(step, s), step, judgement });
            if failed && until == Until::FirstFailure {
                return out;
            }
        }
    }
    out
}

/// The first failure among the judgements, if any.
pub fn first_failure(judged: &[Judged]) -> Option<&Judged> {
    judged.iter().find(|j| j.judgement.failure.is_some())
}
