//! Replay of corpus entries (`bitparity replay`, `cargo test`): every correct
//! subject available must pass the entry's property, the planted bug the
//! entry names must still fail it, an entry of subject `mpfr` replays the
//! finite-difference check. What could not be replayed is said, per entry.

use crate::corpus::{case_of, RawEntry};
use crate::harness::{available, per_op, Harness, OpCommand};
use crate::props::{Property, MPFR_SUBJECT};
use crate::runner::judge::{judge, Step, Until};
use crate::subject::{planted_name, AnyOrderSubject, Skip, SubjectRef, ANY_ORDER_PREFIX};
use std::sync::Arc;

/// How one subject fared on an entry.
#[derive(Clone, Debug)]
pub struct SubjectResult {
    pub subject: String,
    /// The planted bug the entry caught: it must still fail.
    pub must_fail: bool,
    pub failure: Option<String>,
}

impl SubjectResult {
    pub fn ok(&self) -> bool {
        self.failure.is_some() == self.must_fail
    }
}

/// The replay of one entry.
#[derive(Clone, Debug, Default)]
pub struct EntryReplay {
    pub results: Vec<SubjectResult>,
    /// Subjects that could not judge it here, with why (counted, never
    /// passed).
    pub not_replayed: Vec<Skip>,
    /// Why the entry itself is unusable (an unknown property or planted bug,
    /// an invalid case); such an entry fails.
    pub broken: Option<String>,
}

impl EntryReplay {
    fn broken(why: impl Into<String>) -> Self {
        EntryReplay { broken: Some(why.into()), ..Default::default() }
    }
    /// Judged by something, every result as it must be, nothing broken.
    pub fn ok(&self) -> bool {
        self.broken.is_none() && !self.results.is_empty() && self.results.iter().all(SubjectResult::ok)
    }
    /// Whether anything judged it.
    pub fn judged(&self) -> bool {
        !self.results.is_empty()
    }
}

/// The correct subjects a replay runs, once per process and op.
pub struct ReplaySubjects<O: Harness> {
    pub subjects: Vec<SubjectRef<O>>,
    pub skipped: Vec<Skip>,
}

impl<O: Harness> Default for ReplaySubjects<O> {
    fn default() -> Self {
        let a = available::<O>();
        ReplaySubjects { subjects: a.subjects, skipped: a.skipped }
    }
}

/// Replays one entry of its op (the registry's [`crate::harness::with_op`]
/// picks the op by the entry's `op`): on the correct subjects available
/// here (found once per process) and on the subjects the user named,
/// `names`.
pub struct ReplayEntry<'a> {
    pub entry: &'a RawEntry,
    pub names: &'a [String],
}

impl OpCommand for ReplayEntry<'_> {
    type Output = EntryReplay;
    fn run<O: Harness>(self) -> EntryReplay {
        let base = per_op::<O, ReplaySubjects<O>>(ReplaySubjects::default);
        if self.names.is_empty() {
            return replay_entry::<O>(self.entry, &base);
        }
        let mut with = ReplaySubjects { subjects: base.subjects.clone(), skipped: base.skipped.clone() };
        for n in self.names {
            match crate::harness::resolve_named::<O>(n) {
                Ok(s) => {
                    for x in s {
                        if !with.subjects.iter().any(|y| y.name() == x.name()) {
                            with.subjects.push(x);
                        }
                    }
                }
                Err(e) => with.skipped.push(Skip { suite: n.clone(), reason: e.to_string() }),
            }
        }
        replay_entry::<O>(self.entry, &with)
    }
}

/// The correct subjects every entry of an op is replayed on here, and the
/// suites that cannot run here.
pub struct ReplayedOn;

impl OpCommand for ReplayedOn {
    type Output = (Vec<String>, Vec<Skip>);
    fn run<O: Harness>(self) -> (Vec<String>, Vec<Skip>) {
        let base = per_op::<O, ReplaySubjects<O>>(ReplaySubjects::default);
        (base.subjects.iter().map(|s| s.name()).collect(), base.skipped.clone())
    }
}

/// Replays `entry` (of op `O`) against every correct subject available and
/// the planted bug it names.
pub fn replay_entry<O: Harness>(entry: &RawEntry, with: &ReplaySubjects<O>) -> EntryReplay {
    let Some(property) = Property::by_name(&entry.property) else {
        let known: Vec<&str> = Property::ALL.iter().map(|p| p.name()).collect();
        return EntryReplay::broken(format!("unknown property {:?} (known: {})", entry.property, known.join(", ")));
    };
    let case: O::Case = match case_of::<O>(entry) {
        Ok(c) => c,
        Err(e) => return EntryReplay::broken(e),
    };
    let mut out = EntryReplay::default();
    if entry.subject == MPFR_SUBJECT {
        let j = judge::<O>(&case, &[], &[Step::FiniteDifferences], Until::All).remove(0).judgement;
        if j.not_applicable {
            out.not_replayed
                .push(Skip { suite: MPFR_SUBJECT.into(), reason: "no entry of the case could be checked".into() });
        } else {
            out.results.push(SubjectResult { subject: MPFR_SUBJECT.into(), must_fail: false, failure: j.failure });
        }
        return out;
    }
    // The subjects that judge it, each with whether it must fail (the
    // planted bug the entry caught).
    let mut on: Vec<(SubjectRef<O>, bool)> = with.subjects.iter().map(|s| (s.clone(), false)).collect();
    if let Some(bug) = planted_name(&entry.subject) {
        match O::planted().into_iter().find(|b| b.name == bug) {
            Some(b) => {
                // An entry of `anyorder:bug:<name>` fails as the bug seen
                // as claiming no profile.
                let s: SubjectRef<O> = if entry.subject.starts_with(ANY_ORDER_PREFIX) {
                    Arc::new(AnyOrderSubject(b.subject))
                } else {
                    b.subject
                };
                on.push((s, true));
            }
            None => {
                let names: Vec<&str> = O::planted().iter().map(|b| b.name).collect();
                out.broken = Some(format!(
                    "names planted bug {bug:?}, which {} does not have (known: {})",
                    O::NAME,
                    names.join(", ")
                ));
            }
        }
    } else if let (Some(_), Ok(subjects)) =
        (entry.subject.strip_prefix(ANY_ORDER_PREFIX), crate::harness::resolve::<O>(&entry.subject))
    {
        // A built-in correct subject seen as claiming no profile (only run
        // when named): the entry's own must pass now. The label is resolved
        // among built-in subjects only: an entry never starts a program.
        on.extend(subjects.into_iter().map(|s| (s, false)));
    } else if !with.subjects.iter().any(|s| s.name() == entry.subject) {
        // The subject that failed (cuda, say) cannot run here, or is not
        // among the subjects this replay was asked to run.
        let reason = with
            .skipped
            .iter()
            .find(|s| s.suite.ends_with(&entry.subject))
            .map(|s| s.reason.clone())
            .unwrap_or_else(|| not_here::<O>(&entry.subject));
        out.not_replayed.push(Skip { suite: entry.subject.clone(), reason });
    }
    let subjects: Vec<SubjectRef<O>> = on.iter().map(|(s, _)| s.clone()).collect();
    for j in judge::<O>(&case, &subjects, &[Step::Judge(property)], Until::All) {
        let must_fail = on.iter().any(|(s, m)| *m && s.name() == j.key.subject);
        if j.judgement.not_applicable && !must_fail {
            continue;
        }
        let subject = if must_fail { entry.subject.clone() } else { j.key.subject };
        out.results.push(SubjectResult { subject, must_fail, failure: j.judgement.failure });
    }
    out
}

/// Why the subject an entry records is not among those judging it here.
fn not_here<O: Harness>(label: &str) -> String {
    use crate::harness::ResolveError;
    let shown = crate::escape::visible(label);
    // An external subject runs only when the user names it: its command
    // may need a GPU, an environment, minutes, and a file must never start
    // a program.
    if crate::exec::is_exec_name(label) {
        return format!(
            "{shown} is an external subject: it runs only when named on the command line (replay --subject ...)"
        );
    }
    match crate::harness::resolve::<O>(label) {
        // A library (cuBLAS) where it cannot run.
        Err(ResolveError::Unavailable(why)) => why,
        // No built-in name: a label of a subject of some bitparity.toml.
        Err(ResolveError::Unknown(_)) => format!(
            "no built-in subject {shown} of {}: an external subject's label? replay with --subject NAME (and \
             --config PATH) to judge the entry on it",
            O::NAME
        ),
        // A library that claims no profile runs only when named (its entry
        // records a failure of its own).
        Ok(_) => format!("{shown} runs only when named (replay --subject {shown})"),
    }
}
