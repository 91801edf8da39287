//! What the fuzz targets check, for every op: `fuzz/fuzz_targets/<target>.rs`
//! is one call into [`crate::harness::registry::run_fuzz_target`]; `bitparity import` judges an artifact
//! exactly as its target did.
//!
//! Each op has two targets, `<prefix>_fwd` and `<prefix>_bwd` (`loss_fwd`,
//! `router_bwd`, ...). The fuzzer's bytes become a case through the op's
//! generator on a pass-through RNG ([`crate::harness::from_fuzz_bytes`]).
//! A target then runs its [`Step`]s, cheap ones first, on every subject,
//! and stops at the first failure.
//!
//! Knob: `BITPARITY_FUZZ_SUBJECT`, the subjects to fuzz, comma separated,
//! any name `bitparity check --subject` takes (`bug:fma-quotient`, `cuda`,
//! `model:serial`, `bugs`, `all`). Default: every available correct subject.
//!
//! The MPFR steps are gated by the case's size (constants below, not knobs:
//! the gate is part of what an input means, and `import` must agree with the
//! fuzzer that produced the artifact).

pub mod files;

use crate::harness::{available, resolve, resolve_named, Harness, ResolveError};
use crate::props::{applies, finite_differences, judge, Judgement, Property, References, MPFR_SUBJECT};
use crate::runner::shape;
use crate::subject::{Skip, SubjectRef};
use oracles::op::Profile;
use std::fmt::Write as _;

// The MPFR steps run on small cases only, where each adds at most about
// half to an execution's cost (docs/fuzzing.md has the measurements).

/// Accuracy (the forward within its bound of MPFR) runs on cases of size
/// (T x E) at most this.
pub const ACCURACY_MAX_SIZE: usize = 256;
/// The gradient bound runs on cases of size at most this.
pub const GRADIENT_MAX_SIZE: usize = 64;
/// The finite-difference check runs on cases of size at most this.
pub const FD_MAX_SIZE: usize = 16;

/// Which half of the op a target fuzzes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// The forward: bitwise conformance of the forward, the metamorphic
    /// properties, validation, determinism (GPU), accuracy (small cases).
    Forward,
    /// The backward: conformance of forward and backward, the metamorphic
    /// properties, validation, determinism (GPU), the gradient bound and the
    /// finite differences (small cases).
    Backward,
}

impl Direction {
    pub fn suffix(self) -> &'static str {
        match self {
            Direction::Forward => "fwd",
            Direction::Backward => "bwd",
        }
    }
}

/// One check of a case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// A property of docs/ops/README.md#properties, as `bitparity check` judges it.
    Judge(Property),
    /// Conformance of the forward alone. Stored in the corpus as
    /// `conformance`, which checks the forward first.
    ForwardConformance,
    /// The analytic derivative against MPFR finite differences (subject `mpfr`).
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

/// The steps run on a subject, cheapest first, for a case of `size`;
/// `device`: the subject runs on a GPU (determinism applies).
pub fn subject_steps(dir: Direction, size: usize) -> Vec<Step> {
    let mut v = match dir {
        Direction::Forward => vec![Step::ForwardConformance],
        Direction::Backward => vec![Step::Judge(Property::Conformance)],
    };
    v.extend([
        Step::Judge(Property::Padding),
        Step::Judge(Property::OffsetStride),
        Step::Judge(Property::BatchInvariance),
        Step::Judge(Property::Validation),
        Step::Judge(Property::Determinism),
    ]);
    match dir {
        Direction::Forward if size <= ACCURACY_MAX_SIZE => v.push(Step::Judge(Property::Accuracy)),
        Direction::Backward if size <= GRADIENT_MAX_SIZE => v.push(Step::Judge(Property::Gradient)),
        _ => {}
    }
    v
}

/// Steps that judge the spec's formulas rather than a subject, once a case.
pub fn case_steps(dir: Direction, size: usize) -> Vec<Step> {
    match dir {
        Direction::Backward if size <= FD_MAX_SIZE => vec![Step::FiniteDifferences],
        _ => vec![],
    }
}

/// Judges one step on one subject (`None`: the step says nothing about it).
fn judge_step<O: Harness>(
    step: Step,
    s: &SubjectRef<O>,
    case: &O::Case,
    refs: &mut References<O>,
) -> Option<Judgement> {
    match step {
        Step::FiniteDifferences => Some(finite_differences::<O>(case)),
        Step::ForwardConformance => {
            applies(Property::Conformance, s.as_ref()).ok()?;
            Some(crate::props::forward_conformance(s.as_ref(), case))
        }
        Step::Judge(p) => {
            applies(p, s.as_ref()).ok()?;
            Some(judge(p, s.as_ref(), case, refs))
        }
    }
}

/// A failed check: which step, which subject, what it said.
#[derive(Clone, Debug)]
pub struct Failure {
    pub step: Step,
    /// The subject's name, or `mpfr` for the finite differences.
    pub subject: String,
    /// The subject's profile (`-` for `mpfr` or a subject that claims none).
    pub profile: String,
    pub message: String,
}

/// The first failure of a target's steps on `case`, in the target's order:
/// for each subject its steps, then the per-case steps.
pub fn first_failure<O: Harness>(dir: Direction, case: &O::Case, subjects: &[SubjectRef<O>]) -> Option<Failure> {
    let size = O::size(case);
    let mut refs = References::<O>::default();
    for s in subjects {
        for step in subject_steps(dir, size) {
            if let Some(message) = judge_step(step, s, case, &mut refs).and_then(|j| j.failure) {
                let profile = s.profile().map(|p| p.name().to_string()).unwrap_or_else(|| "-".into());
                return Some(Failure { step, subject: s.name(), profile, message });
            }
        }
    }
    for step in case_steps(dir, size) {
        if let Some(message) = finite_differences::<O>(case).failure {
            return Some(Failure { step, subject: MPFR_SUBJECT.into(), profile: "-".into(), message });
        }
    }
    None
}

/// Subject names (comma separated) and where they were given: only names
/// typed on the command line may start an external subject's program; a
/// variable of the environment names built-in subjects only.
#[derive(Clone, Copy, Debug)]
pub enum Names<'a> {
    CommandLine(&'a str),
    Environment(&'a str),
}

/// The subjects to fuzz: those `names` names, or every available correct
/// subject; and the suites skipped, with why. A named subject that is
/// unknown or cannot run here is an error.
pub fn select_subjects<O: Harness>(names: Option<Names<'_>>) -> Result<(Vec<SubjectRef<O>>, Vec<Skip>), String> {
    let (spec, typed) = match names {
        Some(Names::CommandLine(s)) => (s, true),
        Some(Names::Environment(s)) => (s, false),
        None => ("", false),
    };
    let names: Vec<&str> = spec.split(',').map(str::trim).filter(|n| !n.is_empty()).collect();
    if names.is_empty() {
        let a = available::<O>();
        return Ok((a.subjects, a.skipped));
    }
    let mut subjects = Vec::new();
    for n in names {
        let resolved = if typed { resolve_named::<O>(n) } else { resolve::<O>(n) };
        match resolved {
            Ok(s) => subjects.extend(s),
            Err(ResolveError::Unknown(m) | ResolveError::Unavailable(m)) => return Err(m),
        }
    }
    Ok((subjects, Vec::new()))
}

/// A readable report of a failure: the property, the subject, the message,
/// the case compactly and as exact JSON.
pub fn report<O: Harness>(target: &str, case: &O::Case, f: &Failure) -> String {
    let mut out = String::new();
    let classes: Vec<String> = O::classify(case).iter().map(|c| c.to_string()).collect();
    let _ = writeln!(out, "bitparity fuzz failure in {target}");
    let _ = writeln!(out, "  property: {}", f.step.property());
    let _ = writeln!(out, "  subject:  {} (profile {})", f.subject, f.profile);
    let _ = writeln!(out, "  failure:  {}", f.message);
    let _ = writeln!(out, "  case:     {}, classes: {}", shape::<O>(case), classes.join(" "));
    let json = serde_json::to_string(case).unwrap_or_else(|e| format!("(case not serializable: {e})"));
    let _ = writeln!(out, "{json}");
    let subject = if f.subject == MPFR_SUBJECT { String::new() } else { format!(" --subject {}", f.subject) };
    let _ = writeln!(out, "shrink it and keep it as a regression: bitparity import <artifact>{subject}");
    out
}
