//! `bitparity selftest`: every planted bug hunted from 20 seeds, and how
//! fast each is caught: the measure of the generators and properties.

use super::output::{emit, write_output};
use super::Outcome;
use crate::fsio::check_writable;
use crate::gen::GenConfig;
use crate::harness::registry::{self, with_op};
use crate::harness::{Harness, OpCommand};
use crate::knobs;
use crate::report::Verdict;
use crate::selftest::{self, BugReport};
use std::path::{Path, PathBuf};

/// Hunts every planted bug of an op.
struct Hunt<'a> {
    seed: u64,
    cfg: &'a GenConfig,
}

impl OpCommand for Hunt<'_> {
    type Output = Vec<BugReport>;
    fn run<O: Harness>(self) -> Vec<BugReport> {
        selftest::run::<O>(self.seed, self.cfg)
    }
}

/// The number of an op's planted bugs.
struct Count;

impl OpCommand for Count {
    type Output = usize;
    fn run<O: Harness>(self) -> usize {
        O::planted().len()
    }
}

pub(super) fn run(op: Option<&str>, json: Option<PathBuf>, seed: &str) -> Outcome {
    let seed = knobs::parse_seed(seed).map_err(|e| format!("--seed: {e}"))?;
    let ops_selected = registry::select(&op.map(|o| vec![o.to_string()]).unwrap_or_default())?;
    if let Some(p) = &json {
        check_writable(p)?;
    }
    let cfg = GenConfig::from_env()?;
    let count: usize = ops_selected.iter().filter_map(|&o| with_op(o, Count)).sum();
    eprintln!("hunting {count} planted bugs from {} seeds each (seeds {seed}..)...", selftest::SEEDS);
    let reports: Vec<BugReport> =
        ops_selected.iter().filter_map(|&o| with_op(o, Hunt { seed, cfg: &cfg })).flatten().collect();
    let table = selftest::to_table(&reports);
    if json.as_deref() == Some(Path::new("-")) {
        eprint!("{table}");
    } else {
        emit(&table);
    }
    if let Some(p) = &json {
        let text = serde_json::to_string_pretty(&reports).map_err(|e| e.to_string())?;
        write_output(p, &(text + "\n"))?;
    }
    if reports.is_empty() {
        return Ok(Verdict::NothingJudged.exit_code());
    }
    Ok(if reports.iter().all(|r| r.caught) { 0 } else { 1 })
}
