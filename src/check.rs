//! `bitparity check`: generate cases, judge every property for every
//! subject, shrink and save failures, summarise.

use crate::corpus::{Entry, MPFR_SUBJECT};
use crate::gen::seqwise_loss::{classify, generate, shrink, Class, GenConfig};
use crate::props::seqwise_loss::{finite_differences, judge, Judgement, References};
use crate::props::Property;
use crate::subject::SeqwiseSubject;
use indicatif::{ProgressBar, ProgressStyle};
use oracles::case::seqwise_loss::SeqwiseCase;
use proptest::test_runner::{RngAlgorithm, TestRng};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What to run.
pub struct CheckPlan {
    pub subjects: Vec<Arc<dyn SeqwiseSubject>>,
    pub properties: Vec<Property>,
    /// Stop after this many cases (default 1000 when `seconds` is unset too).
    pub cases: Option<u64>,
    /// Stop after this many seconds.
    pub seconds: Option<f64>,
    pub seed: u64,
    pub gen: GenConfig,
    /// Where new failures are saved (`regressions/`); `None`: not saved.
    pub corpus: Option<PathBuf>,
    /// Suites that cannot run here, with the reason.
    pub skipped: Vec<Skip>,
    pub progress: bool,
    /// Candidates tried when shrinking one failure.
    pub shrink_budget: usize,
}

#[derive(Clone, Debug, Serialize)]
pub struct Skip {
    pub suite: String,
    pub reason: String,
}

/// One row of the table: a property, a profile, a subject.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RowKey {
    pub property: Property,
    pub profile: String,
    pub subject: String,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct RowStats {
    pub cases: u64,
    pub failures: u64,
    /// Worst |error| / bound (accuracy, gradient); `None` for bitwise properties.
    pub worst_error_over_bound: Option<f64>,
    pub near_ties: u64,
    pub unbounded: u64,
    pub kinks: u64,
}

/// A failure, shrunk (and saved when the plan has a corpus).
#[derive(Clone, Debug, Serialize)]
pub struct FailureRecord {
    pub property: Property,
    pub subject: String,
    pub profile: String,
    pub message: String,
    /// Index of the (smallest) case that failed, before shrinking.
    pub case_index: u64,
    pub original_shape: (usize, usize),
    pub shrunk_shape: (usize, usize),
    pub saved: Option<PathBuf>,
    #[serde(skip)]
    pub shrunk: SeqwiseCase,
}

/// Everything `check` found.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    pub cases: u64,
    pub seconds: f64,
    pub seed: u64,
    pub rows: BTreeMap<RowKey, RowStats>,
    pub classes: BTreeMap<Class, u64>,
    /// Cases where some exact decision differed from the profile's.
    pub near_tie_cases: u64,
    pub skipped: Vec<Skip>,
    pub failures: Vec<FailureRecord>,
}

impl Summary {
    pub fn failed(&self) -> bool {
        self.rows.values().any(|r| r.failures > 0)
    }
}

/// The RNG of case `index` under `seed`: any case is reproducible alone.
pub fn case_rng(seed: u64, index: u64) -> TestRng {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    bytes[8..16].copy_from_slice(&index.to_le_bytes());
    bytes[16..24].copy_from_slice(b"bitparit");
    TestRng::from_seed(RngAlgorithm::ChaCha, &bytes)
}

/// The case `index` of a run seeded `seed`.
pub fn case_at(seed: u64, index: u64, cfg: &GenConfig) -> SeqwiseCase {
    generate(&mut case_rng(seed, index), cfg)
}

/// Judgements of one case: one per (property, subject) and the FD check.
pub fn judge_case(
    case: &SeqwiseCase,
    subjects: &[Arc<dyn SeqwiseSubject>],
    properties: &[Property],
) -> Vec<(RowKey, Judgement)> {
    let mut refs = References::default();
    let mut out = Vec::new();
    for &p in properties {
        for s in subjects {
            let key = RowKey { property: p, profile: s.profile().name, subject: s.name() };
            out.push((key, judge(p, s.as_ref(), case, &mut refs)));
        }
        if p == Property::Gradient {
            let key = RowKey { property: p, profile: "-".into(), subject: MPFR_SUBJECT.into() };
            out.push((key, finite_differences(case)));
        }
    }
    out
}

/// The failure of row `key` on `case`, if it fails (the shrinker's predicate).
fn failure_of(key: &RowKey, case: &SeqwiseCase, subjects: &[Arc<dyn SeqwiseSubject>]) -> Option<String> {
    if key.subject == MPFR_SUBJECT {
        return finite_differences(case).failure;
    }
    let s = subjects.iter().find(|s| s.name() == key.subject)?;
    judge(key.property, s.as_ref(), case, &mut References::default()).failure
}

/// Runs the plan.
pub fn run(plan: &CheckPlan) -> Summary {
    let start = Instant::now();
    let limit = plan.seconds.map(Duration::from_secs_f64);
    let max_cases = plan.cases.or(if plan.seconds.is_some() { None } else { Some(1000) });
    let bar = if plan.progress {
        let b = match max_cases {
            Some(n) => ProgressBar::new(n),
            None => ProgressBar::new((plan.seconds.unwrap_or(0.0)).ceil() as u64),
        };
        b.set_style(
            ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        b
    } else {
        ProgressBar::hidden()
    };
    let state = Mutex::new(Summary { seed: plan.seed, skipped: plan.skipped.clone(), ..Default::default() });
    // The smallest failing case per row: (case index, T x E, message).
    let smallest_fail: Mutex<BTreeMap<RowKey, (u64, usize, String)>> = Mutex::new(BTreeMap::new());
    // Workers pull case indices from one counter until the case count or
    // the time budget is reached: no batch waits for its slowest case.
    let counter = std::sync::atomic::AtomicU64::new(0);
    let workers = rayon::current_num_threads().max(1);
    rayon::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|_| loop {
                if limit.is_some_and(|l| start.elapsed() >= l) {
                    return;
                }
                let i = counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if max_cases.is_some_and(|n| i >= n) {
                    return;
                }
                let case = case_at(plan.seed, i, &plan.gen);
                let classes = classify(&case);
                let judged = judge_case(&case, &plan.subjects, &plan.properties);
                let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
                st.cases += 1;
                for c in classes {
                    *st.classes.entry(c).or_default() += 1;
                }
                let mut near = false;
                for (key, j) in judged {
                    let row = st.rows.entry(key.clone()).or_default();
                    row.cases += 1;
                    row.near_ties += j.near_ties as u64;
                    row.unbounded += j.unbounded as u64;
                    row.kinks += j.kinks as u64;
                    near |= j.near_ties > 0;
                    if let Some(r) = j.ratio {
                        row.worst_error_over_bound = Some(row.worst_error_over_bound.unwrap_or(0.0).max(r));
                    }
                    if let Some(m) = j.failure {
                        row.failures += 1;
                        let mut ff = smallest_fail.lock().unwrap_or_else(|e| e.into_inner());
                        // Keep the smallest failing case (then the earliest):
                        // the shrinker starts closer to a minimal one.
                        let size = case.t * case.e;
                        let e = ff.entry(key).or_insert((i, size, m.clone()));
                        if (size, i) < (e.1, e.0) {
                            *e = (i, size, m);
                        }
                    }
                }
                st.near_tie_cases += near as u64;
                let fails: u64 = st.rows.values().map(|r| r.failures).sum();
                let done = st.cases;
                drop(st);
                match max_cases {
                    Some(_) => bar.set_position(done),
                    None => bar.set_position(start.elapsed().as_secs()),
                }
                bar.set_message(format!("{done} cases, {fails} failures"));
            });
        }
    });
    bar.finish_and_clear();
    let mut summary = state.into_inner().unwrap_or_else(|e| e.into_inner());
    // Shrink the smallest failure of each row, save it.
    for (key, (index, _, message)) in smallest_fail.into_inner().unwrap_or_else(|e| e.into_inner()) {
        let case = case_at(plan.seed, index, &plan.gen);
        if plan.progress {
            eprintln!(
                "shrinking {} / {} (case {index}, T x E = {} x {})...",
                key.property, key.subject, case.t, case.e
            );
        }
        let shrunk = shrink(&case, |c| failure_of(&key, c, &plan.subjects).is_some(), plan.shrink_budget);
        // The entry stores the shrunk case's own message.
        let message = failure_of(&key, &shrunk, &plan.subjects).unwrap_or(message);
        let saved = plan.corpus.as_ref().and_then(|root| {
            let entry = Entry::new(key.property, &key.subject, &key.profile, &message, shrunk.clone());
            match entry.save(root) {
                Ok(p) => Some(p),
                Err(e) => {
                    eprintln!("warning: could not save the failure: {e}");
                    None
                }
            }
        });
        summary.failures.push(FailureRecord {
            property: key.property,
            subject: key.subject,
            profile: key.profile,
            message,
            case_index: index,
            original_shape: (case.t, case.e),
            shrunk_shape: (shrunk.t, shrunk.e),
            saved,
            shrunk,
        });
    }
    summary.seconds = start.elapsed().as_secs_f64();
    summary
}
