//! What the fuzz targets check, for every op: `fuzz/fuzz_targets/<target>.rs`
//! is one call into [`run_target`]; `bitparity import` judges an artifact
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

use crate::harness::{available, resolve, resolve_named, Harness, OpCommand, ResolveError};
use crate::props::{Property, MPFR_SUBJECT};
pub use crate::runner::judge::Step;
use crate::runner::judge::{judge, Until};
use crate::runner::shape;
use crate::subject::{Skip, SubjectRef};
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

/// The first failure of a target's steps on `case`: each step, cheapest
/// first, on every subject (the per-case steps last), by the one judge.
pub fn first_failure<O: Harness>(dir: Direction, case: &O::Case, subjects: &[SubjectRef<O>]) -> Option<Failure> {
    let size = O::size(case);
    let mut steps = subject_steps(dir, size);
    steps.extend(case_steps(dir, size));
    let judged = judge::<O>(case, subjects, &steps, Until::FirstFailure);
    let j = crate::runner::judge::first_failure(&judged)?;
    Some(Failure {
        step: j.step,
        subject: j.key.subject.clone(),
        profile: j.key.profile.clone(),
        message: j.judgement.failure.clone().unwrap_or_default(),
    })
}

/// The prefix of an op's fuzz targets (`loss` of `loss_fwd`).
struct Prefix;

impl OpCommand for Prefix {
    type Output = &'static str;
    fn run<O: Harness>(self) -> &'static str {
        O::FUZZ_PREFIX
    }
}

/// The name of an op's fuzz target in direction `dir` (`loss_bwd`).
pub fn target_name(op: &str, dir: Direction) -> Option<String> {
    crate::harness::with_op(op, Prefix).map(|prefix| format!("{prefix}_{}", dir.suffix()))
}

/// The op and direction of fuzz target `target` (`loss_bwd`).
pub fn target_of(target: &str) -> Option<(&'static str, Direction)> {
    crate::harness::OPS.into_iter().find_map(|op| {
        [Direction::Forward, Direction::Backward]
            .into_iter()
            .find(|&d| target_name(op, d).as_deref() == Some(target))
            .map(|d| (op, d))
    })
}

/// The body of fuzz target `target` (`loss_bwd`, `router_fwd`, ...): the
/// bytes become a case; any failure panics with the failure's report, which
/// libFuzzer records as a crash. An unknown target name or a bad
/// `BITPARITY_FUZZ_SUBJECT` ends the process with a message (exit 2): a
/// usage error, not a finding.
pub fn run_target(target: &str, data: &[u8]) {
    match target_of(target) {
        Some((op, dir)) => {
            crate::harness::with_op(op, Target { dir, target, data });
        }
        None => {
            eprintln!("bitparity fuzz: unknown target {target:?}");
            std::process::exit(2);
        }
    }
}

/// One input of a fuzz target, for its op.
struct Target<'a> {
    dir: Direction,
    target: &'a str,
    data: &'a [u8],
}

impl OpCommand for Target<'_> {
    type Output = ();
    fn run<O: Harness>(self) {
        // The subjects are chosen once per process (a fuzzer calls the
        // target millions of times).
        let subjects = crate::harness::per_op::<O, Vec<SubjectRef<O>>>(|| {
            let spec = std::env::var(crate::knobs::FUZZ_SUBJECT).ok();
            match select_subjects::<O>(spec.as_deref().map(Names::Environment)) {
                Ok((subjects, skipped)) => {
                    let names: Vec<String> = subjects.iter().map(|s| s.name()).collect();
                    eprintln!("bitparity fuzz: {}: subjects {}", self.target, names.join(", "));
                    for s in skipped {
                        eprintln!("bitparity fuzz: skipping {} (tier B): {}", s.suite, s.reason);
                    }
                    subjects
                }
                Err(e) => {
                    eprintln!("bitparity fuzz: {}={:?}: {e}", crate::knobs::FUZZ_SUBJECT, spec.unwrap_or_default());
                    std::process::exit(2);
                }
            }
        });
        let case = crate::harness::from_fuzz_bytes::<O>(self.data);
        if let Some(f) = first_failure::<O>(self.dir, &case, &subjects) {
            panic!("{}", report::<O>(self.target, &case, &f));
        }
    }
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
