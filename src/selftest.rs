//! `bitparity selftest`: every planted bug, hunted from 20 seeds. For each
//! bug: was it caught, after how many cases (median), by which property, and
//! how small the shrunk counterexample is.

use crate::check::case_at;
use crate::gen::seqwise_loss::{shrink, GenConfig};
use crate::props::seqwise_loss::{judge, References};
use crate::props::Property;
use crate::subject::planted::{Bug, KernelModel};
use oracles::case::seqwise_loss::SeqwiseCase;
use rayon::prelude::*;
use serde::Serialize;
use std::collections::BTreeMap;

/// Seeds per bug.
pub const SEEDS: u64 = 20;
/// Cases tried per seed before a bug counts as missed.
pub const MAX_CASES: u64 = 2000;
/// The properties the hunt uses, in the order they are tried on each case
/// (the cheap ones; accuracy and gradient judge the oracle, not a kernel).
pub const HUNT: [Property; 5] =
    [Property::Conformance, Property::Padding, Property::OffsetStride, Property::Determinism, Property::Validation];

#[derive(Clone, Debug, Serialize)]
pub struct Hunt {
    pub seed: u64,
    /// Cases generated up to and including the first failing one.
    pub cases: Option<u64>,
    pub property: Option<Property>,
    pub shrunk: Option<(usize, usize)>,
    pub message: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct BugReport {
    pub bug: String,
    pub description: String,
    pub caught: bool,
    pub seeds_caught: u64,
    pub median_cases: Option<u64>,
    pub property: Option<Property>,
    /// The largest shrunk T x E over the seeds, and its shape.
    pub shrunk_max: Option<(usize, usize)>,
    pub hunts: Vec<Hunt>,
}

/// Cases looked at past the first failure for a smaller counterexample.
pub const SMALLER_WITHIN: u64 = 200;

/// Hunts `bug` from one seed: the first failing case, the property that
/// caught it, and the smallest shrunk counterexample found near it.
pub fn hunt(bug: Bug, seed: u64, cfg: &GenConfig) -> Hunt {
    let subject = KernelModel::planted(bug);
    let failing = |case: &SeqwiseCase| -> Option<Property> {
        HUNT.into_iter().find(|&p| judge(p, &subject, case, &mut References::default()).failure.is_some())
    };
    let Some((first, property)) = (0..MAX_CASES).find_map(|i| failing(&case_at(seed, i, cfg)).map(|p| (i, p))) else {
        return Hunt { seed, cases: None, property: None, shrunk: None, message: None };
    };
    // Shrinking only removes and simplifies, so it can stop in a local
    // minimum; the smallest failing cases among the next few are shrunk too
    // and the smallest result kept.
    let mut candidates: Vec<(SeqwiseCase, Property)> = (first..first + SMALLER_WITHIN)
        .filter_map(|i| {
            let c = case_at(seed, i, cfg);
            failing(&c).map(|p| (c, p))
        })
        .collect();
    candidates.sort_by_key(|(c, _)| c.t * c.e);
    let mut best: Option<(SeqwiseCase, Property)> = None;
    for (case, p) in candidates.into_iter().take(8) {
        let fails = |c: &SeqwiseCase| judge(p, &subject, c, &mut References::default()).failure.is_some();
        let small = shrink(&case, fails, 20_000);
        if best.as_ref().is_none_or(|(b, _)| small.t * small.e < b.t * b.e) {
            best = Some((small, p));
        }
    }
    let (small, p) = best.expect("the first failing case is among the candidates");
    let message = judge(p, &subject, &small, &mut References::default()).failure;
    Hunt { seed, cases: Some(first + 1), property: Some(property), shrunk: Some((small.t, small.e)), message }
}

/// Hunts every bug from `SEEDS` seeds starting at `first_seed`.
pub fn run(first_seed: u64, cfg: &GenConfig) -> Vec<BugReport> {
    Bug::ALL
        .iter()
        .map(|&bug| {
            let hunts: Vec<Hunt> =
                (first_seed..first_seed + SEEDS).into_par_iter().map(|s| hunt(bug, s, cfg)).collect();
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
            let shrunk_max = hunts.iter().filter_map(|h| h.shrunk).max_by_key(|(t, e)| t * e);
            BugReport {
                bug: format!("bug:{}", bug.name()),
                description: bug.describe().into(),
                caught: seeds_caught == SEEDS,
                seeds_caught,
                median_cases,
                property,
                shrunk_max,
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
        "{:<26} {:>7} {:>13} {:<14} {:>11}  what",
        "planted bug", "caught", "median cases", "property", "shrunk TxE"
    );
    for r in reports {
        let _ = writeln!(
            out,
            "{:<26} {:>4}/{:<2} {:>13} {:<14} {:>11}  {}",
            r.bug,
            r.seeds_caught,
            SEEDS,
            r.median_cases.map(|c| c.to_string()).unwrap_or_else(|| "-".into()),
            r.property.map(|p| p.to_string()).unwrap_or_else(|| "-".into()),
            r.shrunk_max.map(|(t, e)| format!("{t}x{e}")).unwrap_or_else(|| "-".into()),
            r.description
        );
    }
    let all = reports.iter().all(|r| r.caught);
    let _ = writeln!(out, "\n{}", if all { "every planted bug caught" } else { "SOME PLANTED BUGS WERE MISSED" });
    out
}
