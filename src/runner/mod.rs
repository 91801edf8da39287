//! The one runner: judges cases (generated, fuzzed, imported or stored) with
//! every property on every subject, shrinks each new failure at once and
//! hands it to the corpus, and summarises. `check`, `selftest`, the fuzz
//! targets, `import` and `replay` all go through it.

pub mod judge;
pub mod replay;

pub use judge::{Judged, Step, Until};

use crate::corpus::{self, Entry, Saved};
use crate::gen::GenConfig;
use crate::harness::{case_at, Harness};
use crate::props::{applies, Judgement, Property, MPFR_SUBJECT};
use crate::shrink::shrink;
use crate::subject::{Skip, SubjectRef};
use indicatif::{ProgressBar, ProgressStyle};
use oracles::mpfr::histogram::RatioHistogram;
use oracles::op::{Op, Profile};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Where failures go.
#[derive(Clone, Debug, Default)]
pub struct SavePolicy {
    /// The corpus (`regressions/`); `None`: nothing is saved.
    pub store: Option<std::sync::Arc<corpus::Store>>,
    /// Whether failures of planted bugs (`bug:*`, demonstrations) are saved
    /// too; they are not unless the user named a corpus explicitly.
    pub planted: bool,
}

/// What to run, for every op alike.
#[derive(Clone, Debug)]
pub struct Plan {
    pub properties: Vec<Property>,
    /// Stop after this many cases.
    pub cases: Option<u64>,
    /// Stop after this long.
    pub seconds: Option<Duration>,
    /// The index of the first case (`--case N` runs exactly case N).
    pub first_case: u64,
    /// This run's share of the cases (`--shard i/n`); `None`: all of them.
    pub shard: Option<Shard>,
    pub seed: u64,
    pub gen: GenConfig,
    pub save: SavePolicy,
    pub progress: bool,
    /// Set by SIGINT: the current cases finish, no new one starts.
    pub interrupt: Arc<AtomicBool>,
}

/// Shard `index` of `count` (`--shard i/n`, 1-based, the convention of
/// cargo-nextest's `--partition count:i/n`): the cases whose position m in
/// the unsharded run (case index = first case + m) has m mod n = i - 1. The n
/// shards of a run together judge exactly the cases of the unsharded run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Shard {
    pub index: u64,
    pub count: u64,
}

impl Shard {
    /// Reads `i/n` with 1 <= i <= n.
    pub fn parse(text: &str) -> Result<Shard, String> {
        let bad = || format!("--shard {text:?}: expected i/n with 1 <= i <= n (e.g. 2/8)");
        let (i, n) = text.split_once('/').ok_or_else(bad)?;
        let (index, count) = (i.trim().parse::<u64>().map_err(|_| bad())?, n.trim().parse::<u64>().map_err(|_| bad())?);
        if index == 0 || index > count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }

    /// The position in the unsharded run of this shard's `n`-th case
    /// (`None` past the positions a u64 holds).
    pub fn position(self, n: u64) -> Option<u64> {
        n.checked_mul(self.count)?.checked_add(self.index - 1)
    }

    /// How many of the first `cases` positions are this shard's.
    pub fn share(self, cases: u64) -> u64 {
        if cases < self.index {
            0
        } else {
            (cases - self.index) / self.count + 1
        }
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// One row of the table: an op, a property, a profile, a subject.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct RowKey {
    pub op: String,
    pub property: Property,
    pub profile: String,
    pub subject: String,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct RowStats {
    /// Cases judged (passed or failed); cases the property says nothing
    /// about are never counted here.
    pub cases: u64,
    pub failures: u64,
    /// Cases where the property said nothing (no transform applies, no
    /// finite-difference entry could be checked).
    pub not_applicable_cases: u64,
    /// Why the property cannot say anything about this subject at all.
    pub not_applicable: Option<String>,
    /// Worst |error| / bound (accuracy, gradient).
    pub worst_error_over_bound: Option<f64>,
    pub near_ties: u64,
    pub unbounded: u64,
    pub kinks: u64,
    pub undetermined: u64,
    /// Every judged output's |error| / bound (the rows of accuracy and of
    /// the gradient against the profile's bound; `None` elsewhere).
    #[serde(skip)]
    pub histogram: Option<RatioHistogram>,
    /// Cases the subject declared unavailable (an honest skip: never
    /// counted as judged), and the first reason it gave.
    pub unavailable: u64,
    pub unavailable_reason: Option<String>,
    /// The padding rule the subject was judged by (`skip`, `mask`;
    /// docs/padding.md), `-` where the op has no padding rows or the row
    /// judges no subject (`mpfr`). Empty in a row built by hand.
    pub padding: String,
    /// The clamp tie rule the subject implements and was judged under on
    /// every case (`Subject::clamp_tie`); `None`: each case's own.
    pub clamp_tie: Option<String>,
}

/// The number of power-of-two bins of a dimension's sizes: bin b holds the
/// sizes of bit length b (0; 1; 2..3; 4..7; ...), every usize included.
pub const SIZE_BINS: usize = usize::BITS as usize + 1;

/// How many cases had each size of one dimension (T, E, H, ...), by powers
/// of two: bounded memory whatever the sizes, and exact sums across shards.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DimCounts {
    /// The dimension's name, as the op's shape spells it.
    pub dim: String,
    /// Its place in the op's shape (T = 0): the order the report lists the
    /// dimensions in, the same whichever case was seen first.
    pub position: usize,
    /// `bins[b]`: cases whose size has bit length b.
    pub bins: [u64; SIZE_BINS],
}

impl DimCounts {
    pub fn new(dim: &str, position: usize) -> DimCounts {
        DimCounts { dim: dim.to_string(), position, bins: [0; SIZE_BINS] }
    }
    /// The bin of a size: its bit length.
    pub fn bin(size: usize) -> usize {
        (usize::BITS - size.leading_zeros()) as usize
    }
    /// The sizes bin `b` holds, as (least, greatest).
    pub fn range(b: usize) -> (u128, u128) {
        match b {
            0 => (0, 0),
            _ => (1u128 << (b - 1), (1u128 << b) - 1),
        }
    }
    pub fn cases(&self) -> u64 {
        self.bins.iter().sum()
    }
}

/// Adds a case's dims to the per-dimension counts, keeping them in the
/// order of the op's shape.
pub fn count_dims(shapes: &mut Vec<DimCounts>, dims: &[(&'static str, usize)]) {
    for (position, &(name, size)) in dims.iter().enumerate() {
        let i = match shapes.iter().position(|d| d.dim == name) {
            Some(i) => i,
            None => {
                shapes.push(DimCounts::new(name, position));
                shapes.sort_by(|a, b| (a.position, &a.dim).cmp(&(b.position, &b.dim)));
                shapes.iter().position(|d| d.dim == name).unwrap_or(0)
            }
        };
        shapes[i].position = shapes[i].position.min(position);
        shapes[i].bins[DimCounts::bin(size)] += 1;
    }
}

/// What happened to a failure's shrunk case.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum SaveNote {
    Saved {
        path: PathBuf,
    },
    Repaired {
        path: PathBuf,
    },
    /// The corpus already holds this failure, or an entry of the same
    /// property and subject that still fails it: nothing new was written.
    Known {
        path: PathBuf,
    },
    NotSaved {
        reason: String,
    },
}

/// A failure, shrunk, with how to reproduce it.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FailureRecord {
    pub op: String,
    pub property: Property,
    pub subject: String,
    pub profile: String,
    /// The shrunk case's own message.
    pub message: String,
    /// Index of the generated case that failed first, when generated.
    pub case_index: Option<u64>,
    pub original_shape: String,
    pub shrunk_shape: String,
    /// The shrunk case, compactly (its shape and the values that matter).
    pub shrunk_case: String,
    pub save: SaveNote,
    /// Commands that reproduce it.
    pub reproduce: Vec<String>,
}

impl FailureRecord {
    /// The failure as printed when it is found and in the table's tail: what
    /// failed, the shrunk case, where it was saved, how to reproduce it.
    pub fn text(&self) -> String {
        let f = self;
        let mut out = String::new();
        let at = f.case_index.map(|i| format!("case {i} ")).unwrap_or_default();
        let _ = writeln!(
            out,
            "FAILED {} / {} / {} ({}): {at}({}), shrunk to {}",
            f.op, f.property, f.subject, f.profile, f.original_shape, f.shrunk_shape
        );
        let _ = writeln!(out, "  {}", f.message);
        for line in f.shrunk_case.lines() {
            let _ = writeln!(out, "  | {line}");
        }
        match &f.save {
            SaveNote::Saved { path } => {
                let _ = writeln!(out, "  saved to {} (new corpus entry: commit it)", path.display());
            }
            SaveNote::Repaired { path } => {
                let _ = writeln!(out, "  saved to {} (replacing an unreadable file of that name)", path.display());
            }
            SaveNote::Known { path } => {
                let _ = writeln!(out, "  already in the corpus: {}", path.display());
            }
            SaveNote::NotSaved { reason } => {
                let _ = writeln!(out, "  not saved: {reason}");
            }
        }
        for r in &f.reproduce {
            let _ = writeln!(out, "  reproduce: {r}");
        }
        out
    }
}

/// Everything a run of one op found.
#[derive(Clone, Debug, Default, Serialize)]
pub struct OpSummary {
    pub op: String,
    pub cases: u64,
    pub seconds: f64,
    #[serde(skip)]
    pub rows: BTreeMap<RowKey, RowStats>,
    /// Cases that exercised each class, every class listed.
    pub classes: Vec<(String, u64)>,
    /// The cases' sizes, per dimension of the op's shape.
    #[serde(skip)]
    pub shapes: Vec<DimCounts>,
    /// Cases where some exact decision differed from the profile's.
    pub near_tie_cases: u64,
    pub skipped: Vec<Skip>,
    pub failures: Vec<FailureRecord>,
}

impl OpSummary {
    pub fn failed(&self) -> bool {
        self.rows.values().any(|r| r.failures > 0)
    }
    /// Cases judged by some row.
    pub fn judged(&self) -> u64 {
        self.rows.values().map(|r| r.cases).sum()
    }
}

/// `name` with its dims: `T=2 E=8`.
pub fn shape<O: Op>(case: &O::Case) -> String {
    O::dims(case).iter().map(|(n, v)| format!("{n}={v}")).collect::<Vec<_>>().join(" ")
}

fn profile_name<O: Op>(s: &SubjectRef<O>) -> String {
    s.profile().map(|p| p.name().to_string()).unwrap_or_else(|| "-".into())
}

/// The padding rule a subject is judged by, as the report names it.
fn padding_name<O: Op>(s: &SubjectRef<O>) -> String {
    if O::HAS_PADDING {
        s.padding().name().into()
    } else {
        "-".into()
    }
}

/// The rows a plan will fill, with the rows that say nothing about their
/// subject marked n/a up front.
pub fn rows_for<O: Harness>(subjects: &[SubjectRef<O>], properties: &[Property]) -> BTreeMap<RowKey, RowStats> {
    let mut rows = BTreeMap::new();
    for &p in properties {
        for s in subjects {
            let key = RowKey { op: O::NAME.into(), property: p, profile: profile_name(s), subject: s.name() };
            let not_applicable = applies(p, s.as_ref()).err();
            // The rows judged against the profile's bound keep the
            // distribution of their ratios.
            let histogram = (matches!(p, Property::Accuracy | Property::Gradient) && not_applicable.is_none())
                .then(RatioHistogram::default);
            let padding = padding_name(s);
            let clamp_tie = s.clamp_tie().map(|t| t.name().to_string());
            rows.insert(key, RowStats { not_applicable, histogram, padding, clamp_tie, ..Default::default() });
        }
        if p == Property::Gradient {
            let key = RowKey { op: O::NAME.into(), property: p, profile: "-".into(), subject: MPFR_SUBJECT.into() };
            rows.insert(key, RowStats { padding: "-".into(), ..Default::default() });
        }
    }
    rows
}

/// What judging a case again says: it fails (why), it holds, or it could
/// not be judged (the subject is hung or unavailable now: neither).
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    Fails(String),
    Holds,
    NotJudged(String),
}

impl Verdict {
    pub fn failure(self) -> Option<String> {
        match self {
            Verdict::Fails(m) => Some(m),
            _ => None,
        }
    }
}

/// The verdict of `property` on `case` for the subject named `subject` (or
/// the finite-difference check for `mpfr`): the shrinker's predicate, the
/// stored message and the corpus's "is this bug known" come from this one
/// function.
pub fn verdict_of<O: Harness>(
    property: Property,
    subject: &str,
    case: &O::Case,
    subjects: &[SubjectRef<O>],
) -> Verdict {
    let (on, step) = if subject == MPFR_SUBJECT {
        (Vec::new(), Step::FiniteDifferences)
    } else {
        (subjects.iter().filter(|s| s.name() == subject).take(1).cloned().collect(), Step::Judge(property))
    };
    if on.is_empty() && step != Step::FiniteDifferences {
        return Verdict::NotJudged(format!("no subject {subject} in this run"));
    }
    let judged = judge::judge::<O>(case, &on, &[step], Until::FirstFailure);
    if let Some(m) = judged.iter().find_map(|j| j.judgement.failure.clone()) {
        return Verdict::Fails(m);
    }
    match judged.into_iter().find_map(|j| j.judgement.unavailable) {
        Some(why) => Verdict::NotJudged(why),
        None => Verdict::Holds,
    }
}

/// Adds a judgement to its row.
pub fn tally(row: &mut RowStats, j: &Judgement) {
    row.near_ties += j.near_ties as u64;
    row.unbounded += j.unbounded as u64;
    row.kinks += j.kinks as u64;
    row.undetermined += j.undetermined as u64;
    if let Some(why) = &j.unavailable {
        row.unavailable += 1;
        row.unavailable_reason.get_or_insert_with(|| why.clone());
        return;
    }
    if j.not_applicable {
        row.not_applicable_cases += 1;
        return;
    }
    row.cases += 1;
    if let Some(h) = &j.histogram {
        row.histogram.get_or_insert_with(RatioHistogram::default).merge(h);
    }
    if let Some(r) = j.ratio {
        row.worst_error_over_bound = Some(row.worst_error_over_bound.unwrap_or(0.0).max(r));
    }
    row.failures += j.failure.is_some() as u64;
}

/// A failing case, found by whatever means: what to shrink and how to
/// describe it.
pub struct Found<'a, O: Harness> {
    pub property: Property,
    pub subject: &'a str,
    pub profile: &'a str,
    pub case: &'a O::Case,
    pub case_index: Option<u64>,
    /// How to regenerate it (`--seed X --case N`), when generated.
    pub seed: Option<u64>,
    /// Prefix of the stored note (`fuzz loss_bwd: `).
    pub note_prefix: String,
    /// The failure as first seen, when known: what is reported when the
    /// subject can no longer judge (a hung one) by the time it is shrunk.
    pub first_message: Option<String>,
    /// Once set (SIGINT), shrinking stops at the smallest failing case so
    /// far, which is saved and reported: an interrupted run ends in seconds
    /// even when a shrink of a slow subject is in flight.
    pub stop: Option<&'a AtomicBool>,
}

/// Shrinks a failure against its own property and subject, saves it as the
/// policy says (never twice for the same bug), and describes it.
pub fn record_failure<O: Harness>(
    found: Found<'_, O>,
    subjects: &[SubjectRef<O>],
    policy: &SavePolicy,
    budget: usize,
) -> FailureRecord {
    let Found { property, subject, profile, case, case_index, seed, note_prefix, first_message, stop } = found;
    // A subject that can judge nothing more (after a kernel fault every CUDA
    // call of the process fails; a hung one answers nothing): shrinking
    // would "succeed" down to the smallest case, or stop at once. The case
    // is kept as found.
    let lost = subjects.iter().find(|s| s.name() == subject).and_then(|s| s.lost());
    let (shrunk, message) = match lost {
        Some(why) => (
            case.clone(),
            match first_message {
                Some(m) => format!("{m} (not shrunk: {why})"),
                None => format!("not shrunk: {why}"),
            },
        ),
        None => {
            let stopped = || stop.is_some_and(|s| s.load(Ordering::Relaxed));
            // The message of the smallest failing case so far: what is
            // reported when the subject can no longer judge it again (a
            // hung subject, marked so while shrinking).
            let mut last = first_message;
            let shrunk = shrink::<O>(
                case,
                |c| {
                    if stopped() {
                        return false;
                    }
                    match verdict_of::<O>(property, subject, c, subjects) {
                        Verdict::Fails(m) => {
                            last = Some(m);
                            true
                        }
                        _ => false,
                    }
                },
                budget,
            );
            let message = match verdict_of::<O>(property, subject, &shrunk, subjects) {
                Verdict::Fails(m) => m,
                Verdict::Holds => last.unwrap_or_else(|| "(no longer fails)".into()),
                Verdict::NotJudged(why) => last.unwrap_or_else(|| format!("(could not be judged again: {why})")),
            };
            (shrunk, message)
        }
    };
    let save =
        save_failure::<O>(property, subject, profile, &format!("{note_prefix}{message}"), &shrunk, subjects, policy);
    let mut reproduce = Vec::new();
    // A subject of a bitparity.toml other than ./bitparity.toml exists only
    // where that file is loaded: the commands name it, so that they work
    // when pasted.
    let config_arg = crate::exec::config::get().flag_for(subject).map(|f| format!(" {f}")).unwrap_or_default();
    match &save {
        SaveNote::Saved { path } | SaveNote::Repaired { path } | SaveNote::Known { path } => {
            // An external subject is replayed only when named.
            let subject_arg = if crate::exec::is_exec_name(subject) {
                format!(" --subject {}{config_arg}", crate::knobs::shell_word(subject))
            } else {
                String::new()
            };
            reproduce.push(format!(
                "bitparity replay {}{subject_arg}",
                crate::knobs::shell_word(&path.display().to_string())
            ))
        }
        SaveNote::NotSaved { .. } => {}
    }
    if let (Some(seed), Some(i)) = (seed, case_index) {
        // Quoted as one word: an external subject's name holds its command.
        let subject_arg = if subject == MPFR_SUBJECT {
            String::new()
        } else {
            format!(" --subject {}{config_arg}", crate::knobs::shell_word(subject))
        };
        // The knobs that shaped the generated case come first: without them
        // the same seed and index give another case.
        let knobs: String =
            crate::knobs::recorded().iter().map(|(k, v)| format!("{k}={} ", crate::knobs::shell_word(v))).collect();
        reproduce.push(format!(
            "{knobs}bitparity check --op {} --seed {seed} --case {i}{subject_arg} --property {property} --no-save",
            O::NAME
        ));
    }
    FailureRecord {
        op: O::NAME.into(),
        property,
        subject: subject.into(),
        profile: profile.into(),
        message,
        case_index,
        original_shape: shape::<O>(case),
        shrunk_shape: shape::<O>(&shrunk),
        shrunk_case: O::describe(&shrunk),
        save,
        reproduce,
    }
}

/// The corpus entry of a shrunk failure.
pub fn entry_of<O: Harness>(
    property: Property,
    subject: &str,
    profile: &str,
    note: &str,
    case: &O::Case,
) -> Entry<O::Case> {
    Entry {
        op: O::NAME.into(),
        property: property.name().into(),
        subject: subject.into(),
        profile: profile.into(),
        date: corpus::today(),
        note: note.lines().next().unwrap_or("").chars().take(300).collect(),
        classes: O::classify(case).iter().map(|c| c.to_string()).collect(),
        case: case.clone(),
    }
}

fn save_failure<O: Harness>(
    property: Property,
    subject: &str,
    profile: &str,
    note: &str,
    case: &O::Case,
    subjects: &[SubjectRef<O>],
    policy: &SavePolicy,
) -> SaveNote {
    let Some(store) = &policy.store else {
        return SaveNote::NotSaved { reason: "saving is off (--no-save)".into() };
    };
    if crate::subject::planted_name(subject).is_some() && !policy.planted {
        return SaveNote::NotSaved {
            reason: "a planted bug (a demonstration): not written to the corpus unless --corpus DIR is given".into(),
        };
    }
    if let Err(reason) = corpus::check_footprint::<O>(case) {
        return SaveNote::NotSaved { reason: format!("not saved: {reason}") };
    }
    // When the subject can judge nothing more (hung, its GPU context lost),
    // any entry of it for this property is taken as the bug: not one entry
    // per case it meets.
    let lost = subjects.iter().any(|s| s.name() == subject && s.lost().is_some());
    let still_fails = |raw: &corpus::RawEntry| {
        lost || corpus::case_of::<O>(raw)
            .is_ok_and(|c| matches!(verdict_of::<O>(property, subject, &c, subjects), Verdict::Fails(_)))
    };
    match store.keep(&entry_of::<O>(property, subject, profile, note, case), still_fails) {
        Ok(corpus::Kept::Known(path)) | Ok(corpus::Kept::Saved(Saved::Present(path))) => SaveNote::Known { path },
        Ok(corpus::Kept::Saved(Saved::New(path))) => SaveNote::Saved { path },
        Ok(corpus::Kept::Saved(Saved::Repaired(path))) => SaveNote::Repaired { path },
        Err(reason) => SaveNote::NotSaved { reason },
    }
}

/// A line on stderr, above the progress bar when there is one: a failure
/// is said when it is found, with or without a bar (a run killed later has
/// already shown what it saved).
fn say(bar: &ProgressBar, line: String) {
    // A failure's text holds a subject's own words (an external subject's
    // message, its stderr): nothing in it may act on the terminal.
    let line = crate::escape::visible_lines(&line);
    if bar.is_hidden() {
        eprintln!("{}", line.trim_end());
    } else {
        bar.println(line.trim_end());
    }
}

fn progress_bar(plan: &Plan, op: &str) -> ProgressBar {
    if !plan.progress {
        return ProgressBar::hidden();
    }
    let b = match (plan.cases, plan.seconds) {
        (Some(n), _) => ProgressBar::new(plan.shard.map_or(n, |sh| sh.share(n))),
        (None, Some(d)) => ProgressBar::new(d.as_secs().max(1)),
        (None, None) => ProgressBar::new(0),
    };
    b.set_style(
        ProgressStyle::with_template(&format!(
            "{op} {{spinner}} [{{elapsed_precise}}] {{bar:40}} {{pos}}/{{len}} {{msg}}"
        ))
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    b
}

/// `bitparity check` for one op: generated cases, every property on every
/// subject, each new failure shrunk and saved as soon as it is found.
pub fn check<O: Harness>(plan: &Plan, subjects: &[SubjectRef<O>], skipped: Vec<Skip>) -> OpSummary {
    let start = Instant::now();
    let bar = progress_bar(plan, O::NAME);
    let state = Mutex::new(OpSummary {
        op: O::NAME.into(),
        rows: rows_for::<O>(subjects, &plan.properties),
        skipped,
        ..Default::default()
    });
    let classes: Mutex<BTreeMap<O::Class, u64>> = Mutex::new(BTreeMap::new());
    let shapes: Mutex<Vec<DimCounts>> = Mutex::new(Vec::new());
    // Per row, the position of the case whose failure was shrunk (the first
    // found: shrunk and saved at once) and the lowest failing position. The
    // report shows the lowest one's failure, so that it does not depend on
    // how the cases were spread over threads or shards.
    let shrunk_at: Mutex<BTreeMap<RowKey, u64>> = Mutex::new(BTreeMap::new());
    let lowest: Mutex<BTreeMap<RowKey, (u64, Option<String>)>> = Mutex::new(BTreeMap::new());
    let records: Mutex<BTreeMap<RowKey, FailureRecord>> = Mutex::new(BTreeMap::new());
    // Workers pull case numbers from one counter until the case count or
    // the time budget is reached: no batch waits for its slowest case.
    let counter = AtomicU64::new(0);
    let steps = judge::steps_of(&plan.properties);
    let shard = plan.shard.unwrap_or(Shard { index: 1, count: 1 });
    let workers = rayon::current_num_threads().max(1);
    fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
        m.lock().unwrap_or_else(|e| e.into_inner())
    }
    let record = |key: &RowKey, position: u64, case: &O::Case, first_message: Option<String>| {
        let index = plan.first_case.wrapping_add(position);
        record_failure::<O>(
            Found {
                property: key.property,
                subject: &key.subject,
                profile: &key.profile,
                case,
                case_index: Some(index),
                seed: Some(plan.seed),
                note_prefix: String::new(),
                first_message,
                stop: Some(&plan.interrupt),
            },
            subjects,
            &plan.save,
            crate::shrink::BUDGET,
        )
    };
    rayon::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|_| loop {
                if plan.interrupt.load(Ordering::Relaxed)
                    || plan.seconds.is_some_and(|l| start.elapsed() >= l)
                    || crate::subject::cuda::device::lost().is_some()
                {
                    return;
                }
                let Some(position) = shard.position(counter.fetch_add(1, Ordering::Relaxed)) else { return };
                if plan.cases.is_some_and(|c| position >= c) {
                    return;
                }
                let index = plan.first_case.wrapping_add(position);
                let case = case_at::<O>(plan.seed, index, &plan.gen);
                let judged: Vec<(RowKey, Judgement)> = judge::judge::<O>(&case, subjects, &steps, Until::All)
                    .into_iter()
                    .map(|j| (j.key, j.judgement))
                    .collect();
                if crate::interrupt::hard_stop() {
                    // Cut off by a second interrupt (its subjects killed
                    // under it): neither passed nor failed, not counted.
                    return;
                }
                {
                    let mut c = lock(&classes);
                    for class in O::classify(&case) {
                        *c.entry(class).or_default() += 1;
                    }
                }
                count_dims(&mut lock(&shapes), &O::dims(&case));
                let mut new_failures = Vec::new();
                let (done, fails) = {
                    let mut st = lock(&state);
                    st.cases += 1;
                    let mut near = false;
                    for (key, j) in &judged {
                        let Some(row) = st.rows.get_mut(key) else { continue };
                        tally(row, j);
                        near |= j.near_ties > 0;
                        if j.failure.is_some() {
                            let mut low = lock(&lowest);
                            let l = low.entry(key.clone()).or_insert((position, j.failure.clone()));
                            if position < l.0 {
                                *l = (position, j.failure.clone());
                            }
                            if let std::collections::btree_map::Entry::Vacant(v) = lock(&shrunk_at).entry(key.clone()) {
                                v.insert(position);
                                new_failures.push((key.clone(), j.failure.clone()));
                            }
                        }
                    }
                    st.near_tie_cases += near as u64;
                    (st.cases, st.rows.values().map(|r| r.failures).sum::<u64>())
                };
                match plan.cases {
                    Some(_) => bar.set_position(done),
                    None => bar.set_position(start.elapsed().as_secs()),
                }
                bar.set_message(format!("{done} cases, {fails} failures"));
                for (key, message) in new_failures {
                    say(
                        &bar,
                        format!(
                            "{} / {} / {} failed on case {index} ({}): shrinking...",
                            key.op,
                            key.property,
                            key.subject,
                            shape::<O>(&case)
                        ),
                    );
                    let r = record(&key, position, &case, message);
                    say(&bar, r.text());
                    lock(&records).insert(key, r);
                }
            });
        }
    });
    // A row whose lowest failing case is not the one shrunk (another thread
    // got there first): that case is shrunk too and reported instead, unless
    // its subject can judge nothing more (the one shrunk is reported then).
    let (shrunk_at, lowest) = (lock(&shrunk_at).clone(), lock(&lowest).clone());
    for (key, (low, first_message)) in lowest {
        let lost = subjects.iter().any(|s| s.name() == key.subject && s.lost().is_some());
        if shrunk_at.get(&key) == Some(&low) || plan.interrupt.load(Ordering::Relaxed) || lost {
            continue;
        }
        let case = case_at::<O>(plan.seed, plan.first_case.wrapping_add(low), &plan.gen);
        say(
            &bar,
            format!(
                "{} / {} / {}: case {} failed too, the lowest: shrinking it for the report",
                key.op,
                key.property,
                key.subject,
                plan.first_case.wrapping_add(low)
            ),
        );
        let r = record(&key, low, &case, first_message);
        lock(&records).insert(key, r);
    }
    bar.finish_and_clear();
    let mut summary = state.into_inner().unwrap_or_else(|e| e.into_inner());
    if let Some(why) = crate::subject::cuda::device::lost() {
        // Judging on would count every later case as a failure of the GPU.
        summary.skipped.push(Skip {
            suite: format!("{} (every subject, from here on)", O::NAME),
            reason: format!("the GPU context was lost ({why}): the run stopped; later cases were not judged"),
        });
    }
    summary.failures = records.into_inner().unwrap_or_else(|e| e.into_inner()).into_values().collect();
    let counts = classes.into_inner().unwrap_or_else(|e| e.into_inner());
    summary.shapes = shapes.into_inner().unwrap_or_else(|e| e.into_inner());
    summary.classes = O::classes().iter().map(|c| (c.to_string(), counts.get(c).copied().unwrap_or(0))).collect();
    summary.failures.sort_by(|a, b| (a.property, &a.subject).cmp(&(b.property, &b.subject)));
    summary.seconds = start.elapsed().as_secs_f64();
    summary
}

#[cfg(test)]
mod shard_tests {
    use super::Shard;

    #[test]
    fn shards_partition_the_positions() {
        let cases = 23;
        for count in 1..=5u64 {
            let mut seen = vec![0u32; cases as usize];
            for index in 1..=count {
                let s = Shard { index, count };
                let mine: Vec<u64> = (0..).map_while(|n| s.position(n).filter(|&p| p < cases)).collect();
                assert_eq!(mine.len() as u64, s.share(cases), "{s}");
                for p in mine {
                    seen[p as usize] += 1;
                }
            }
            assert!(seen.iter().all(|&c| c == 1), "{count} shards: {seen:?}");
        }
        assert_eq!(Shard { index: 3, count: 3 }.share(2), 0);
        assert_eq!(Shard { index: 2, count: u64::MAX }.position(1), None);
    }

    #[test]
    fn parse_takes_i_of_n() {
        assert_eq!(Shard::parse("2/8"), Ok(Shard { index: 2, count: 8 }));
        for bad in ["0/1", "2/1", "1", "a/b", "1/0", ""] {
            assert!(Shard::parse(bad).is_err(), "{bad}");
        }
    }
}

#[cfg(test)]
mod histogram_tests {
    use super::*;
    use crate::harness::available;
    use crate::subject::SubjectKind;
    use oracles::mpfr::histogram::bin_exponent;
    use oracles::op::seqwise_loss::SeqwiseLoss;
    use oracles::op::{Group, Values};

    fn reals<N>(groups: &[Group<'_, N>]) -> u64 {
        groups.iter().map(|g| if let Values::Real(v) = &g.values { v.len() as u64 } else { 0 }).sum()
    }

    #[test]
    fn every_judged_output_is_in_its_rows_histogram_once() {
        let plan = Plan {
            properties: vec![Property::Accuracy, Property::Gradient, Property::Conformance],
            cases: Some(12),
            seconds: None,
            first_case: 0,
            shard: None,
            seed: 3,
            gen: GenConfig { max_te: 256, ..GenConfig::default() },
            save: SavePolicy::default(),
            progress: false,
            interrupt: Arc::new(AtomicBool::new(false)),
        };
        let subjects: Vec<SubjectRef<SeqwiseLoss>> =
            available::<SeqwiseLoss>().subjects.into_iter().filter(|s| s.kind() != SubjectKind::Device).collect();
        let summary = check::<SeqwiseLoss>(&plan, &subjects, Vec::new());
        assert!(!summary.failed());
        // The real outputs of the 12 cases, counted apart from the judging.
        let (mut fwd, mut bwd) = (0, 0);
        for i in 0..12 {
            let case = case_at::<SeqwiseLoss>(plan.seed, i, &plan.gen);
            let p = SeqwiseLoss::profiles()[0].clone();
            fwd += reals(&SeqwiseLoss::fwd_groups(&case, &oracles::op::forward::<SeqwiseLoss>(&case, &p).unwrap()));
            bwd += reals(&SeqwiseLoss::bwd_groups(&case, &oracles::op::backward::<SeqwiseLoss>(&case, &p).unwrap()));
        }
        let mut rows_with_histograms = 0;
        for (k, r) in &summary.rows {
            let Some(h) = &r.histogram else {
                assert!(
                    k.property == Property::Conformance || k.subject == MPFR_SUBJECT || r.not_applicable.is_some(),
                    "{k:?} has no histogram"
                );
                continue;
            };
            rows_with_histograms += 1;
            let expected = if k.property == Property::Accuracy { fwd } else { bwd };
            assert_eq!(h.total(), expected, "{k:?}: every output counted once");
            assert_eq!(h.unbounded, r.unbounded, "{k:?}");
            // The worst ratio lies in the highest non-empty bin (where no
            // output was kept apart as undetermined: the worst counts those).
            let top = h.nonzero_bins().last().map(|(e, _)| e);
            match r.worst_error_over_bound {
                _ if h.undetermined > 0 => {}
                Some(w) if w > 0.0 => assert_eq!(top, Some(bin_exponent(w)), "{k:?}"),
                _ => assert_eq!(top, None, "{k:?}"),
            }
        }
        assert!(rows_with_histograms >= 4, "accuracy and gradient, for each CPU subject");
        // Every case's size is counted once per dimension.
        assert_eq!(summary.shapes.iter().map(|d| d.dim.as_str()).take(2).collect::<Vec<_>>(), ["T", "E"]);
        for d in summary.shapes.iter().filter(|d| d.dim != "k") {
            assert_eq!(d.cases(), 12, "{}", d.dim);
        }
    }
}
