//! What the fuzz targets check (`fuzz/fuzz_targets/loss_fwd.rs` and
//! `loss_bwd.rs` are one call each into this module), shared with
//! `bitparity import` so that an artifact is judged exactly as the target
//! judged it.
//!
//! The fuzzer's bytes become a case through
//! [`from_fuzz_bytes`](crate::gen::seqwise_loss::from_fuzz_bytes) (the
//! property suites' generator on a pass-through RNG). Each target then runs
//! its [`Step`]s, cheap ones first, on every subject, and stops at the first
//! failure.
//!
//! Knobs, each read once per process:
//! - `BITPARITY_FUZZ_SUBJECT`: the subjects to fuzz, comma separated, any
//!   name `bitparity check --subject` takes (`bug:fma-quotient`, `cuda`,
//!   `model:serial`, `bugs`, `all`). Default: every available correct subject
//!   (the profile oracle and the kernel model of every profile, and `cuda`
//!   where a GPU is found; without one, tier B is skipped and the target says
//!   so once on stderr).
//!
//! The MPFR steps are gated by the case's size (constants below, not knobs:
//! the gate is part of what an input means, and `import` must agree with the
//! fuzzer that produced the artifact).

use crate::corpus::MPFR_SUBJECT;
use crate::gen::seqwise_loss::{classify, from_fuzz_bytes};
use crate::props::seqwise_loss::{diff_forward, finite_differences, judge, Judgement, References};
use crate::props::Property;
use crate::subject::{self, SeqwiseSubject};
use oracles::case::seqwise_loss::SeqwiseCase;
use oracles::profile_oracle::seqwise_loss as oracle;
use std::fmt::Write as _;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, OnceLock};

/// The name of the GPU subject, on which the targets also check determinism.
pub const GPU_SUBJECT: &str = "cuda";

/// The environment variable naming the subjects to fuzz.
pub const SUBJECT_ENV: &str = "BITPARITY_FUZZ_SUBJECT";

// The MPFR steps run on small cases only, where each adds at most about
// half to an execution's cost. Measured per case without a sanitizer, four
// CPU subjects (docs/fuzzing.md): the bitwise steps together cost 0.10, 0.26,
// 0.55 and 1.8 ms for T x E up to 16, 64, 256 and 4096; accuracy 0.03, 0.08,
// 0.28 and 2.3 ms; the gradient bound 0.03, 0.13, 0.44 and 5.2 ms; the finite
// differences 0.11, 0.76, 3.8 and 7.3 ms.

/// Accuracy (the forward within its bound of MPFR) runs on cases with
/// T x E at most this.
pub const ACCURACY_MAX_TE: usize = 256;
/// The gradient bound (the backward within its bound of the MPFR
/// derivative) runs on cases with T x E at most this.
pub const GRADIENT_MAX_TE: usize = 64;
/// The finite-difference check (MPFR, several forward evaluations per entry)
/// runs on cases with T x E at most this.
pub const FD_MAX_TE: usize = 16;

/// A fuzz target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// The forward: bitwise conformance of the forward, padding,
    /// offset/stride, validation, determinism (GPU), accuracy (small cases).
    LossFwd,
    /// The backward: bitwise conformance (forward and backward), padding,
    /// offset/stride, validation, determinism (GPU), the gradient bound and the
    /// finite differences (small cases).
    LossBwd,
}

impl Target {
    pub const ALL: [Target; 2] = [Target::LossFwd, Target::LossBwd];

    pub fn name(self) -> &'static str {
        match self {
            Target::LossFwd => "loss_fwd",
            Target::LossBwd => "loss_bwd",
        }
    }

    pub fn by_name(name: &str) -> Option<Target> {
        Target::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The steps run on a subject, cheapest first, for a case of `te` = T x E
    /// elements; `gpu`: the subject is a GPU kernel (tier B adds determinism).
    pub fn subject_steps(self, te: usize, gpu: bool) -> Vec<Step> {
        let mut v = match self {
            Target::LossFwd => vec![Step::ForwardConformance],
            Target::LossBwd => vec![Step::Judge(Property::Conformance)],
        };
        v.extend([
            Step::Judge(Property::Padding),
            Step::Judge(Property::OffsetStride),
            Step::Judge(Property::Validation),
        ]);
        if gpu {
            v.push(Step::Judge(Property::Determinism));
        }
        match self {
            Target::LossFwd if te <= ACCURACY_MAX_TE => v.push(Step::Judge(Property::Accuracy)),
            Target::LossBwd if te <= GRADIENT_MAX_TE => v.push(Step::Judge(Property::Gradient)),
            _ => {}
        }
        v
    }

    /// Steps that judge the spec's formulas rather than a subject, run once
    /// a case.
    pub fn case_steps(self, te: usize) -> Vec<Step> {
        match self {
            Target::LossBwd if te <= FD_MAX_TE => vec![Step::FiniteDifferences],
            _ => vec![],
        }
    }
}

/// One check of a case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// A property of SPEC section 6, as `bitparity check` judges it.
    Judge(Property),
    /// Conformance of the forward alone (bitwise against the profile oracle).
    /// Stored in the corpus as `conformance`, which checks the forward first.
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

    /// Judges this step; `subject` is ignored by [`Step::FiniteDifferences`].
    pub fn judge(self, s: &dyn SeqwiseSubject, case: &SeqwiseCase, refs: &mut References) -> Judgement {
        match self {
            Step::Judge(p) => judge(p, s, case, refs),
            Step::ForwardConformance => forward_conformance(s, case),
            Step::FiniteDifferences => finite_differences(case),
        }
    }
}

fn forward_conformance(s: &dyn SeqwiseSubject, case: &SeqwiseCase) -> Judgement {
    let got = match catch_unwind(AssertUnwindSafe(|| s.forward(case))) {
        Ok(Ok(f)) => f,
        Ok(Err(e)) => return failed(format!("forward: {e}")),
        Err(_) => return failed("forward panicked".to_string()),
    };
    match oracle::forward(case, &s.profile()) {
        Err(e) => failed(format!("the profile oracle refused the case: {e}")),
        Ok(expected) => match diff_forward(&expected, &got) {
            Some(d) => failed(format!("forward {d}")),
            None => Judgement::default(),
        },
    }
}

fn failed(msg: String) -> Judgement {
    Judgement { failure: Some(msg), ..Default::default() }
}

/// A failed check: which step, which subject, what it said.
#[derive(Clone, Debug)]
pub struct Failure {
    pub step: Step,
    /// The subject's name, or `mpfr` for the finite differences.
    pub subject: String,
    /// The subject's profile (`-` for `mpfr`).
    pub profile: String,
    /// The property's message (expected and actual bits for the bitwise ones).
    pub message: String,
}

/// The first failure of `target`'s steps on `case`, in the order the target
/// runs them: for each subject its steps, then the per-case steps.
pub fn first_failure(target: Target, case: &SeqwiseCase, subjects: &[Arc<dyn SeqwiseSubject>]) -> Option<Failure> {
    let te = case.t * case.e;
    let mut refs = References::default();
    for s in subjects {
        for step in target.subject_steps(te, s.name() == GPU_SUBJECT) {
            if let Some(message) = step.judge(s.as_ref(), case, &mut refs).failure {
                return Some(Failure { step, subject: s.name(), profile: s.profile().name, message });
            }
        }
    }
    for step in target.case_steps(te) {
        // No subject takes part: any will do as the argument.
        let any = subject::ProfileOracle(oracles::profile::seqwise_loss::SeqwiseProfile::serial());
        if let Some(message) = step.judge(&any, case, &mut refs).failure {
            return Some(Failure { step, subject: MPFR_SUBJECT.into(), profile: "-".into(), message });
        }
    }
    None
}

/// Whether `case` still fails `step` for the subject named `subject` (the
/// shrinker's predicate).
pub fn still_fails(step: Step, subject: &str, case: &SeqwiseCase, subjects: &[Arc<dyn SeqwiseSubject>]) -> bool {
    if step == Step::FiniteDifferences {
        return !finite_differences(case).passed();
    }
    subjects
        .iter()
        .find(|s| s.name() == subject)
        .is_some_and(|s| !step.judge(s.as_ref(), case, &mut References::default()).passed())
}

/// Subjects, and the suites skipped with why: (subject, reason).
pub type Selected = (Vec<Arc<dyn SeqwiseSubject>>, Vec<(String, String)>);

/// The subjects to fuzz: those `spec` names (comma separated, as
/// `BITPARITY_FUZZ_SUBJECT` or `--subject` give them), or every available
/// correct subject. Returns the subjects and the suites skipped, with why.
pub fn select_subjects(spec: Option<&str>) -> Result<Selected, String> {
    let names: Vec<&str> =
        spec.map(|s| s.split(',').map(str::trim).filter(|n| !n.is_empty()).collect()).unwrap_or_default();
    if names.is_empty() {
        let a = subject::available();
        return Ok((a.subjects, a.skipped));
    }
    let mut subjects = Vec::new();
    for n in names {
        subjects.extend(subject::resolve(n)?);
    }
    Ok((subjects, Vec::new()))
}

/// The subjects of this process's fuzz target, from `BITPARITY_FUZZ_SUBJECT`,
/// resolved once. A bad name ends the process with a message (exit 2): it
/// is a usage error, not a finding.
fn fuzz_subjects() -> &'static [Arc<dyn SeqwiseSubject>] {
    static SUBJECTS: OnceLock<Vec<Arc<dyn SeqwiseSubject>>> = OnceLock::new();
    SUBJECTS.get_or_init(|| {
        let spec = std::env::var(SUBJECT_ENV).ok();
        match select_subjects(spec.as_deref()) {
            Ok((subjects, skipped)) => {
                let names: Vec<String> = subjects.iter().map(|s| s.name()).collect();
                eprintln!("bitparity fuzz: subjects {}", names.join(", "));
                for (name, reason) in skipped {
                    eprintln!("bitparity fuzz: skipping {name} (tier B): {reason}");
                }
                subjects
            }
            Err(e) => {
                eprintln!("bitparity fuzz: {SUBJECT_ENV}={:?}: {e}", spec.unwrap_or_default());
                std::process::exit(2);
            }
        }
    })
}

/// A readable report of a failure: the property, the subject, the message
/// (expected and actual bits), the case as exact hex floats.
pub fn report(target: Target, case: &SeqwiseCase, f: &Failure) -> String {
    let mut out = String::new();
    let classes: Vec<String> = classify(case).iter().map(|c| c.to_string()).collect();
    let _ = writeln!(out, "bitparity fuzz failure in {}", target.name());
    let _ = writeln!(out, "  property: {}", f.step.property());
    let _ = writeln!(out, "  subject:  {} (profile {})", f.subject, f.profile);
    let _ = writeln!(out, "  failure:  {}", f.message);
    let _ = writeln!(out, "  case:     T x E = {} x {}, classes: {}", case.t, case.e, classes.join(" "));
    let json = serde_json::to_string(case).unwrap_or_else(|e| format!("(case not serializable: {e})"));
    let _ = writeln!(out, "{json}");
    let subject = if f.subject == MPFR_SUBJECT { String::new() } else { format!(" --subject {}", f.subject) };
    let _ = writeln!(out, "shrink it and keep it as a regression: bitparity import <artifact>{subject}");
    out
}

/// The body of a fuzz target: the bytes become a case; any failure panics
/// with [`report`], which libFuzzer records as a crash.
pub fn run_target(target: Target, data: &[u8]) {
    let subjects = fuzz_subjects();
    let case = from_fuzz_bytes(data);
    if let Some(f) = first_failure(target, &case, subjects) {
        panic!("{}", report(target, &case, &f));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::subject::planted::Bug;

    /// The short inputs libFuzzer starts from: 4-byte little-endian counters.
    fn input(i: u32) -> [u8; 4] {
        i.to_le_bytes()
    }

    #[test]
    fn correct_subjects_pass_both_targets() {
        let (subjects, _) = select_subjects(None).unwrap();
        for i in 0..40 {
            let case = from_fuzz_bytes(&input(i));
            for target in Target::ALL {
                let f = first_failure(target, &case, &subjects);
                assert!(f.is_none(), "{}", report(target, &case, &f.unwrap()));
            }
        }
    }

    #[test]
    fn loss_bwd_finds_every_planted_bug_from_short_inputs() {
        for bug in Bug::ALL {
            let (subjects, _) = select_subjects(Some(&format!("bug:{}", bug.name()))).unwrap();
            let found = (0..1000).find_map(|i| {
                let case = from_fuzz_bytes(&input(i));
                first_failure(Target::LossBwd, &case, &subjects).map(|f| (case, f))
            });
            let (case, f) = found.unwrap_or_else(|| panic!("bug:{} not found in 1000 inputs", bug.name()));
            let text = report(Target::LossBwd, &case, &f);
            assert!(text.contains(&format!("subject:  bug:{}", bug.name())), "{text}");
            assert!(text.contains(&format!("property: {}", f.step.property())), "{text}");
            // The case as exact JSON: it parses back to the same bits.
            let json = text.lines().find(|l| l.starts_with('{')).unwrap();
            let back: SeqwiseCase = serde_json::from_str(json).unwrap();
            assert_eq!(serde_json::to_string(&back).unwrap(), serde_json::to_string(&case).unwrap());
            assert!(still_fails(f.step, &f.subject, &case, &subjects));
        }
    }

    #[test]
    fn steps_follow_the_size_gates() {
        let has = |t: Target, te: usize, p: Property| t.subject_steps(te, false).contains(&Step::Judge(p));
        assert!(has(Target::LossFwd, ACCURACY_MAX_TE, Property::Accuracy));
        assert!(!has(Target::LossFwd, ACCURACY_MAX_TE + 1, Property::Accuracy));
        assert!(has(Target::LossBwd, GRADIENT_MAX_TE, Property::Gradient));
        assert!(!has(Target::LossBwd, GRADIENT_MAX_TE + 1, Property::Gradient));
        assert_eq!(Target::LossBwd.case_steps(FD_MAX_TE), vec![Step::FiniteDifferences]);
        assert!(Target::LossBwd.case_steps(FD_MAX_TE + 1).is_empty());
        assert!(Target::LossFwd.case_steps(1).is_empty());
        assert!(Target::LossFwd.subject_steps(1, true).contains(&Step::Judge(Property::Determinism)));
        assert!(!Target::LossFwd.subject_steps(1, false).contains(&Step::Judge(Property::Determinism)));
        assert_eq!(Step::ForwardConformance.property(), Property::Conformance);
        assert_eq!(Step::FiniteDifferences.property(), Property::Gradient);
    }

    #[test]
    fn subject_lists_are_parsed_and_checked() {
        let (s, skipped) = select_subjects(Some(" bug:fma-quotient, model:serial ,")).unwrap();
        let names: Vec<String> = s.iter().map(|s| s.name()).collect();
        assert_eq!(names, ["bug:fma-quotient", "model:serial"]);
        assert!(skipped.is_empty());
        assert!(select_subjects(Some("bug:nope")).err().unwrap_or_default().contains("unknown planted bug"));
        assert!(!select_subjects(Some("")).unwrap().0.is_empty(), "empty means the default");
        assert_eq!(Target::by_name("loss_bwd"), Some(Target::LossBwd));
        assert_eq!(Target::by_name("loss"), None);
    }
}
