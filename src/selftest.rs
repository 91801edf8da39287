//! `bitparity selftest`: every planted bug of every op, hunted from 20 seeds.
//! For each bug: was it caught, after how many cases (median), by which
//! property, and how small the shrunk counterexample is.

use crate::gen::GenConfig;
use crate::harness::{case_at, Harness, Planted};
use crate::props::Property;
use crate::runner::judge::{judge, Step, Until};
use crate::runner::shape;
use crate::shrink::shrink;
use crate::subject::SubjectRef;
use rayon::prelude::*;
use serde::Serialize;
use std::collections::BTreeMap;

/// Seeds per bug.
pub const SEEDS: u64 = 20;
/// Cases tried per seed before a bug counts as missed.
pub const MAX_CASES: u64 = 2000;
/// Cases looked at past the first failure for a smaller counterexample.
pub const SMALLER_WITHIN: u64 = 200;
/// The properties the hunt uses, in the order they are tried on each case
/// (the bitwise ones: accuracy and gradient judge the oracle's formulas, not
/// a kernel's mistakes).
pub const HUNT: [Property; 6] = [
    Property::Conformance,
    Property::Padding,
    Property::OffsetStride,
    Property::BatchInvariance,
    Property::Determinism,
    Property::Validation,
];

#[derive(Clone, Debug, Serialize)]
pub struct Hunt {
    pub seed: u64,
    /// Cases generated up to and including the first failing one.
    pub cases: Option<u64>,
    pub property: Option<Property>,
    /// The shrunk counterexample's shape and size.
    pub shrunk: Option<String>,
    pub shrunk_size: Option<usize>,
    pub message: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct BugReport {
    pub op: String,
    pub bug: String,
    pub description: String,
    pub caught: bool,
    pub seeds_caught: u64,
    pub median_cases: Option<u64>,
    pub property: Option<Property>,
    /// The largest shrunk counterexample over the seeds (shape).
    pub shrunk_max: Option<String>,
    pub shrunk_max_size: Option<usize>,
    pub hunts: Vec<Hunt>,
}

/// The first property of `props` (in their order) that `s` fails on
/// `case`, with its message.
fn failing<O: Harness>(s: &SubjectRef<O>, props: &[Property], case: &O::Case) -> Option<(Property, String)> {
    let steps: Vec<Step> = props.iter().map(|&p| Step::Judge(p)).collect();
    let judged = judge::<O>(case, std::slice::from_ref(s), &steps, Until::FirstFailure);
    judged.into_iter().find_map(|j| j.judgement.failure.map(|m| (j.step.property(), m)))
}

/// The first case that subject `s` fails by one of `props`, as (index,
/// property, message): the `known` cases first (a corpus's entries, by
/// name; a failure's message names its entry), then the cases of seed
/// `seed`, at most `max_cases` generated before `deadline`, numbered on from
/// the known ones. `Err` holds the number of cases tried when none failed.
pub fn first_failure<O: Harness>(
    s: &SubjectRef<O>,
    props: &[Property],
    known: &[(String, O::Case)],
    seed: u64,
    max_cases: u64,
    deadline: Option<std::time::Instant>,
    cfg: &GenConfig,
) -> Result<(u64, Property, String), u64> {
    for (i, (name, case)) in known.iter().enumerate() {
        if let Some((p, m)) = failing(s, props, case) {
            return Ok((i as u64, p, format!("corpus entry {name}: {m}")));
        }
    }
    let skip = known.len() as u64;
    for i in 0..max_cases {
        if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
            return Err(skip + i);
        }
        if let Some((p, m)) = failing(s, props, &case_at::<O>(seed, i, cfg)) {
            return Ok((skip + i, p, m));
        }
    }
    Err(skip + max_cases)
}

/// Hunts `bug` from one seed: the first failing case, the property that
/// caught it, and the smallest shrunk counterexample found near it.
pub fn hunt<O: Harness>(bug: &Planted<O>, seed: u64, cfg: &GenConfig) -> Hunt {
    let s = &bug.subject;
    // Generated cases only: a planted bug's corpus entry would catch it at
    // once, and the selftest measures the generators.
    let Ok((first, property, _)) = first_failure(s, &HUNT, &[], seed, MAX_CASES, None, cfg) else {
        return Hunt { seed, cases: None, property: None, shrunk: None, shrunk_size: None, message: None };
    };
    // Shrinking only removes and simplifies, so it can stop in a local
    // minimum; the smallest failing cases among the next few are shrunk too
    // and the smallest result kept.
    let mut candidates: Vec<(O::Case, Property)> = (first..first + SMALLER_WITHIN)
        .filter_map(|i| {
            let c = case_at::<O>(seed, i, cfg);
            failing(s, &HUNT, &c).map(|(p, _)| (c, p))
        })
        .collect();
    candidates.sort_by_key(|(c, _)| O::size(c));
    let mut best: Option<(O::Case, Property)> = None;
    for (case, p) in candidates.into_iter().take(8) {
        let fails = |c: &O::Case| failing(s, &[p], c).is_some();
        let small = shrink::<O>(&case, fails, crate::shrink::BUDGET);
        if best.as_ref().is_none_or(|(b, _)| O::size(&small) < O::size(b)) {
            best = Some((small, p));
        }
    }
    let Some((small, p)) = best else {
        // Unreachable: the first failing case is among the candidates.
        return Hunt {
            seed,
            cases: Some(first + 1),
            property: Some(property),
            shrunk: None,
            shrunk_size: None,
            message: None,
        };
    };
    let message = failing(s, &[p], &small).map(|(_, m)| m);
    Hunt {
        seed,
        cases: Some(first + 1),
        property: Some(property),
        shrunk: Some(shape::<O>(&small)),
        shrunk_size: Some(O::size(&small)),
        message,
    }
}

/// The seeds of a selftest starting at `first`: `SEEDS` consecutive values,
/// wrapping past u64::MAX (never an empty range).
pub fn seeds(first: u64) -> Vec<u64> {
    (0..SEEDS).map(|i| first.wrapping_add(i)).collect()
}

/// Hunts every planted bug of op `O` from [`SEEDS`] seeds starting at
/// `first_seed`.
pub fn run<O: Harness>(first_seed: u64, cfg: &GenConfig) -> Vec<BugReport> {
    O::planted()
        .iter()
        .map(|bug| {
            let hunts: Vec<Hunt> = seeds(first_seed).into_par_iter().map(|s| hunt(bug, s, cfg)).collect();
            let mut cases: Vec<u64> = hunts.iter().filter_map(|h| h.cases).collect();
            cases.sort_unstable();
            let seeds_caught = cases.len() as u64;
            // Median over all seeds, a missed seed counting as infinitely many cases.
            let median_cases = if seeds_caught * 2 > SEEDS { Some(cases[(SEEDS as usize - 1) / 2]) } else { None };
            let mut by_prop: BTreeMap<Property, usize> = BTreeMap::new();
            for p in hunts.iter().filter_map(|h| h.property) {
                *by_prop.entry(p).or_default() += 1;
            }
            let property = by_prop.into_iter().max_by_key(|(_, n)| *n).map(|(p, _)| p);
            let largest = hunts.iter().filter(|h| h.shrunk_size.is_some()).max_by_key(|h| h.shrunk_size);
            BugReport {
                op: O::NAME.into(),
                bug: format!("bug:{}", bug.name),
                description: bug.description.into(),
                caught: seeds_caught == SEEDS,
                seeds_caught,
                median_cases,
                property,
                shrunk_max: largest.and_then(|h| h.shrunk.clone()),
                shrunk_max_size: largest.and_then(|h| h.shrunk_size),
                hunts,
            }
        })
        .collect()
}

pub fn to_table(reports: &[BugReport]) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<13} {:<26} {:>7} {:>13} {:<16} {:<22}  what",
        "op", "planted bug", "caught", "median cases", "property", "largest shrunk"
    );
    for r in reports {
        let _ = writeln!(
            out,
            "{:<13} {:<26} {:>4}/{:<2} {:>13} {:<16} {:<22}  {}",
            r.op,
            r.bug,
            r.seeds_caught,
            SEEDS,
            r.median_cases.map(|c| c.to_string()).unwrap_or_else(|| "-".into()),
            r.property.map(|p| p.to_string()).unwrap_or_else(|| "-".into()),
            r.shrunk_max.clone().unwrap_or_else(|| "-".into()),
            r.description
        );
    }
    let all = !reports.is_empty() && reports.iter().all(|r| r.caught);
    let _ = writeln!(out, "\n{}", if all { "every planted bug caught" } else { "SOME PLANTED BUGS WERE MISSED" });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corpus::{decode_case, read_entry};
    use oracles::op::seqwise_loss::SeqwiseLoss;

    #[test]
    fn known_cases_come_first_and_the_generated_ones_are_numbered_on() {
        let cfg = GenConfig::default();
        let bugs = SeqwiseLoss::planted();
        let bug = bugs.iter().find(|b| b.name == "fma-quotient").expect("the planted bug");
        let s = &bug.subject;
        let path =
            concat!(env!("CARGO_MANIFEST_DIR"), "/regressions/seqwise_loss/conformance-bug-fma-quotient-2daa2736.json");
        let caught: <SeqwiseLoss as oracles::op::Op>::Case = decode_case(&read_entry(path.as_ref()).unwrap()).unwrap();
        // A case the bug passes, and the first generated one it fails.
        let seed = 7;
        let passed =
            (0..).map(|i| case_at::<SeqwiseLoss>(seed, i, &cfg)).find(|c| failing(s, &HUNT, c).is_none()).unwrap();
        let (first, _, message) = first_failure(s, &HUNT, &[], seed, 1000, None, &cfg).expect("the bug is caught");

        let known = vec![("passes.json".to_string(), passed.clone()), ("caught.json".to_string(), caught)];
        let (i, p, m) = first_failure(s, &HUNT, &known, seed, 1000, None, &cfg).expect("the entry catches it");
        assert_eq!((i, p), (1, Property::Conformance));
        assert!(m.starts_with("corpus entry caught.json: "), "{m}");
        // Judged by a property that cannot see the bug, nothing fails.
        let only = [Property::Validation];
        assert_eq!(first_failure(s, &only, &known, seed, 50, None, &cfg).unwrap_err(), 52);

        let known = vec![("passes.json".to_string(), passed)];
        let (i, _, m) = first_failure(s, &HUNT, &known, seed, 1000, None, &cfg).expect("the bug is caught");
        assert_eq!((i, m), (first + 1, message), "generated cases are numbered after the known one");
        assert_eq!(first_failure(s, &HUNT, &known, seed, 0, None, &cfg).unwrap_err(), 1, "the known case is counted");
    }
}
