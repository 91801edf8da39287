//! `bitparity merge`: the `--json` summaries of a run's shards combined into
//! the unsharded run's summary (each summary checked field by field first:
//! [`crate::merge::read_summary`]).

use super::output::{write_run, Outputs};
use super::Outcome;
use crate::fsio::{check_writable, read_capped};
use crate::merge;
use std::path::PathBuf;

pub(super) fn run(
    files: &[PathBuf],
    json: Option<PathBuf>,
    markdown: Option<PathBuf>,
    html: Option<PathBuf>,
) -> Outcome {
    for p in json.iter().chain(&markdown).chain(&html) {
        check_writable(p)?;
    }
    let mut parts = Vec::new();
    for f in files {
        let name = f.display().to_string();
        let bytes = read_capped(f, merge::MAX_SUMMARY_BYTES).map_err(|e| format!("{name}: {e}"))?;
        parts.push((name.clone(), merge::read_summary(&bytes).map_err(|e| format!("{name}: {e}"))?));
    }
    let run = merge::merge(&parts)?;
    let out = Outputs { json: json.as_deref(), markdown: markdown.as_deref(), html: html.as_deref() };
    write_run(&run, &out, "bitparity check (merged shards)")
}
