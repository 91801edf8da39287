//! The registry of ops: the object-safe face ([`DynOp`]) through which the
//! CLI, the corpus replay, the fuzz targets and import reach every op, and
//! the one list of ops ([`ops`]).

use super::{resolve_named, Harness, ResolveError};
use crate::corpus::RawEntry;
use crate::fuzzing::{self, Direction};
use crate::import::{self, ImportError, Imported};
use crate::runner::replay::{replay_entry, EntryReplay, ReplaySubjects};
use crate::runner::{self, OpSummary, Plan};
use crate::selftest::{self, BugReport};
use crate::subject::{Skip, SubjectRef};
use oracles::op::router::Router;
use oracles::op::seqwise_loss::SeqwiseLoss;
use oracles::op::shared_expert::SharedExpert;
use std::marker::PhantomData;
use std::path::Path;
use std::sync::OnceLock;

/// How the subject names of a command resolve for one op.
#[derive(Clone, Debug, Default)]
pub struct Resolution {
    /// Names that gave subjects here.
    pub found: Vec<String>,
    /// Names this op has no subject of (fine when another op has).
    pub unknown: Vec<(String, String)>,
    /// Names that exist but cannot run here (no GPU).
    pub unavailable: Vec<Skip>,
}

/// An op, without its types: what the commands need.
pub trait DynOp: Send + Sync {
    fn name(&self) -> &'static str;
    /// The prefix of its fuzz targets.
    fn fuzz_prefix(&self) -> &'static str;
    /// Its GPU subjects' names (`cuda` and its libraries): built-in names
    /// no configured subject may take.
    fn device_subject_names(&self) -> Vec<&'static str>;
    /// How `names` resolve for this op (empty: its available correct subjects).
    fn resolve_names(&self, names: &[String]) -> Resolution;
    /// `bitparity check` on this op with the subjects `names` give (every
    /// available correct one when empty).
    fn check(&self, plan: &Plan, names: &[String]) -> OpSummary;
    /// Replays one stored entry of this op.
    fn replay(&self, entry: &RawEntry) -> EntryReplay;
    /// Replays one stored entry on the correct subjects and on the
    /// subjects the user named, `names` (`replay --subject ...`).
    fn replay_on(&self, entry: &RawEntry, names: &[String]) -> EntryReplay;
    /// Suites the replay cannot run here.
    fn replay_skips(&self) -> Vec<Skip>;
    /// The correct subjects every entry of this op is replayed on here.
    fn replay_subject_names(&self) -> Vec<String>;
    /// Hunts every planted bug of this op.
    fn selftest(&self, first_seed: u64, cfg: &crate::gen::GenConfig) -> Vec<BugReport>;
    fn planted_count(&self) -> usize;
    /// The first case this op's CUDA subject `subject` (`cuda`, or a
    /// library's kernel such as `cuda-tc`) fails by one of `props` (a
    /// mutants child hunts its mutant so): the cases of the corpus `entries`
    /// (this op's) first, then those of seed `seed`. `Ok(Err(n))` when none
    /// of `n` cases did; `Err` when the subject cannot run or an entry is
    /// not a case of this op.
    #[allow(clippy::too_many_arguments)]
    fn hunt_cuda(
        &self,
        subject: &str,
        props: &[crate::props::Property],
        entries: &[(String, RawEntry)],
        seed: u64,
        max_cases: u64,
        deadline: Option<std::time::Instant>,
        cfg: &crate::gen::GenConfig,
    ) -> Result<Result<(u64, crate::props::Property, String), u64>, HuntError>;
    /// The op's adversarial classes, in the order its reports list them.
    fn class_names(&self) -> Vec<String>;
    /// The body of this op's fuzz target in direction `dir`.
    fn fuzz(&self, dir: Direction, target: &str, data: &[u8]);
    /// Imports a fuzz artifact of this op.
    fn import(
        &self,
        artifact: &Path,
        bytes: &[u8],
        dirs: &[Direction],
        subject: Option<fuzzing::Names<'_>>,
        corpus: &Path,
    ) -> Result<Imported, ImportError>;
}

/// Why a hunt ([`DynOp::hunt_cuda`]) could not run. Apart, because a
/// mutants child counts a subject that cannot load as a kill (the mutant
/// broke the kernel's interface) and a bad corpus entry as its own error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HuntError {
    /// A corpus entry that is another op's, does not decode, or is invalid
    /// (named by its file).
    Corpus(String),
    /// The subject cannot run here: not a CUDA subject of the op, no GPU,
    /// or its kernels do not load.
    Subject(String),
}

impl std::fmt::Display for HuntError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HuntError::Corpus(m) => write!(f, "corpus entry {m}"),
            HuntError::Subject(m) => f.write_str(m),
        }
    }
}

/// An op in the registry; holds what a process resolves once (the fuzz
/// targets' subjects, the replay's subjects).
pub struct Registered<O: Harness> {
    fuzz_subjects: OnceLock<Vec<SubjectRef<O>>>,
    replay_subjects: OnceLock<ReplaySubjects<O>>,
    _op: PhantomData<O>,
}

impl<O: Harness> Registered<O> {
    pub const fn new() -> Self {
        Registered { fuzz_subjects: OnceLock::new(), replay_subjects: OnceLock::new(), _op: PhantomData }
    }

    fn subjects(&self, names: &[String]) -> (Vec<SubjectRef<O>>, Vec<Skip>) {
        if names.is_empty() {
            let a = super::available::<O>();
            return (a.subjects, a.skipped);
        }
        let mut subjects: Vec<SubjectRef<O>> = Vec::new();
        for n in names {
            if let Ok(s) = resolve_named::<O>(n) {
                for x in s {
                    if !subjects.iter().any(|y| y.name() == x.name()) {
                        subjects.push(x);
                    }
                }
            }
        }
        (subjects, Vec::new())
    }
}

impl<O: Harness> Default for Registered<O> {
    fn default() -> Self {
        Self::new()
    }
}

impl<O: Harness> DynOp for Registered<O> {
    fn name(&self) -> &'static str {
        O::NAME
    }
    fn fuzz_prefix(&self) -> &'static str {
        O::FUZZ_PREFIX
    }
    fn device_subject_names(&self) -> Vec<&'static str> {
        std::iter::once("cuda").chain(O::LIBRARIES.iter().copied()).collect()
    }
    fn resolve_names(&self, names: &[String]) -> Resolution {
        let mut r = Resolution::default();
        for n in names {
            match resolve_named::<O>(n) {
                Ok(_) => r.found.push(n.clone()),
                Err(ResolveError::Unknown(m)) => r.unknown.push((n.clone(), m)),
                Err(ResolveError::Unavailable(m)) => r.unavailable.push(Skip { suite: n.clone(), reason: m }),
            }
        }
        r
    }
    fn check(&self, plan: &Plan, names: &[String]) -> OpSummary {
        let (subjects, skipped) = self.subjects(names);
        runner::check::<O>(plan, &subjects, skipped)
    }
    fn replay(&self, entry: &RawEntry) -> EntryReplay {
        replay_entry::<O>(entry, self.replay_subjects.get_or_init(ReplaySubjects::default))
    }
    fn replay_on(&self, entry: &RawEntry, names: &[String]) -> EntryReplay {
        let base = self.replay_subjects.get_or_init(ReplaySubjects::default);
        let mut with = ReplaySubjects { subjects: base.subjects.clone(), skipped: base.skipped.clone() };
        for n in names {
            match resolve_named::<O>(n) {
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
        replay_entry::<O>(entry, &with)
    }
    fn replay_skips(&self) -> Vec<Skip> {
        self.replay_subjects.get_or_init(ReplaySubjects::default).skipped.clone()
    }
    fn replay_subject_names(&self) -> Vec<String> {
        self.replay_subjects.get_or_init(ReplaySubjects::default).subjects.iter().map(|s| s.name()).collect()
    }
    fn selftest(&self, first_seed: u64, cfg: &crate::gen::GenConfig) -> Vec<BugReport> {
        selftest::run::<O>(first_seed, cfg)
    }
    fn planted_count(&self) -> usize {
        O::planted().len()
    }
    fn hunt_cuda(
        &self,
        subject: &str,
        props: &[crate::props::Property],
        entries: &[(String, RawEntry)],
        seed: u64,
        max_cases: u64,
        deadline: Option<std::time::Instant>,
        cfg: &crate::gen::GenConfig,
    ) -> Result<Result<(u64, crate::props::Property, String), u64>, HuntError> {
        let known = entries
            .iter()
            .map(|(name, e)| {
                if e.op != O::NAME {
                    return Err(format!("{name}: an entry of op {:?}, not {}", e.op, O::NAME));
                }
                let case = crate::corpus::case_of::<O>(e).map_err(|m| format!("{name}: {m}"))?;
                Ok((name.clone(), case))
            })
            .collect::<Result<Vec<_>, String>>()
            .map_err(HuntError::Corpus)?;
        let s = super::device_subject::<O>(subject).map_err(HuntError::Subject)?;
        Ok(selftest::first_failure(s.as_ref(), props, &known, seed, max_cases, deadline, cfg))
    }
    fn class_names(&self) -> Vec<String> {
        O::classes().iter().map(|c| c.to_string()).collect()
    }
    fn fuzz(&self, dir: Direction, target: &str, data: &[u8]) {
        let subjects = self.fuzz_subjects.get_or_init(|| {
            let spec = std::env::var(crate::knobs::FUZZ_SUBJECT).ok();
            match fuzzing::select_subjects::<O>(spec.as_deref().map(fuzzing::Names::Environment)) {
                Ok((subjects, skipped)) => {
                    let names: Vec<String> = subjects.iter().map(|s| s.name()).collect();
                    eprintln!("bitparity fuzz: {target}: subjects {}", names.join(", "));
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
        let case = super::from_fuzz_bytes::<O>(data);
        if let Some(f) = fuzzing::first_failure::<O>(dir, &case, subjects) {
            panic!("{}", fuzzing::report::<O>(target, &case, &f));
        }
    }
    fn import(
        &self,
        artifact: &Path,
        bytes: &[u8],
        dirs: &[Direction],
        subject: Option<fuzzing::Names<'_>>,
        corpus: &Path,
    ) -> Result<Imported, ImportError> {
        import::import::<O>(artifact, bytes, dirs, subject, corpus)
    }
}

static SEQWISE_LOSS: Registered<SeqwiseLoss> = Registered::new();
static ROUTER: Registered<Router> = Registered::new();
static SHARED_EXPERT: Registered<SharedExpert> = Registered::new();

/// Every op, one line each.
pub fn ops() -> [&'static dyn DynOp; 3] {
    [&SEQWISE_LOSS, &ROUTER, &SHARED_EXPERT]
}

/// Every op's GPU subject names (`cuda`, `cuda-tc`, `cublas`, ...), once each.
pub fn device_subject_names() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = Vec::new();
    for n in ops().into_iter().flat_map(|o| o.device_subject_names()) {
        if !names.contains(&n) {
            names.push(n);
        }
    }
    names
}

/// Loads the configuration of external subjects (`--config PATH`, else
/// `./bitparity.toml` when there is one) against the registry's ops and
/// built-in names.
pub fn load_config(path: Option<&Path>) -> Result<(), String> {
    let names: Vec<&str> = ops().iter().map(|o| o.name()).collect();
    crate::exec::config::load(path, &names, &device_subject_names())
}

/// The op named `name`.
pub fn op_by_name(name: &str) -> Option<&'static dyn DynOp> {
    ops().into_iter().find(|o| o.name() == name)
}

/// The op and direction of fuzz target `target` (`loss_bwd`).
pub fn target(target: &str) -> Option<(&'static dyn DynOp, Direction)> {
    ops().into_iter().find_map(|o| {
        [Direction::Forward, Direction::Backward]
            .into_iter()
            .find(|d| target == format!("{}_{}", o.fuzz_prefix(), d.suffix()))
            .map(|d| (o, d))
    })
}

/// The body of fuzz target `target` (`loss_bwd`, `router_fwd`, ...): the
/// bytes become a case; any failure panics with the failure's report, which
/// libFuzzer records as a crash. An unknown target name or a bad
/// `BITPARITY_FUZZ_SUBJECT` ends the process with a message (exit 2): a
/// usage error, not a finding.
pub fn run_fuzz_target(name: &str, data: &[u8]) {
    match target(name) {
        Some((op, dir)) => op.fuzz(dir, name, data),
        None => {
            eprintln!("bitparity fuzz: unknown target {name:?}");
            std::process::exit(2);
        }
    }
}
