//! The summary of a run as a table (stdout) and as JSON (`--json`).

use crate::check::Summary;
use crate::gen::seqwise_loss::Class;
use serde::Serialize;
use std::fmt::Write;

#[derive(Serialize)]
struct JsonRow<'a> {
    op: &'a str,
    property: String,
    profile: &'a str,
    subject: &'a str,
    cases: u64,
    failures: u64,
    worst_error_over_bound: Option<f64>,
    near_ties: u64,
    unbounded: u64,
    kinks: u64,
}

#[derive(Serialize)]
struct JsonSummary<'a> {
    op: &'a str,
    cases: u64,
    seconds: f64,
    seed: u64,
    passed: bool,
    rows: Vec<JsonRow<'a>>,
    classes: std::collections::BTreeMap<String, u64>,
    near_tie_cases: u64,
    skipped: &'a [crate::check::Skip],
    failures: &'a [crate::check::FailureRecord],
}

pub fn to_json(op: &str, s: &Summary) -> String {
    let rows = s
        .rows
        .iter()
        .map(|(k, r)| JsonRow {
            op,
            property: k.property.to_string(),
            profile: &k.profile,
            subject: &k.subject,
            cases: r.cases,
            failures: r.failures,
            worst_error_over_bound: r.worst_error_over_bound,
            near_ties: r.near_ties,
            unbounded: r.unbounded,
            kinks: r.kinks,
        })
        .collect();
    let classes = Class::ALL.iter().map(|c| (c.to_string(), s.classes.get(c).copied().unwrap_or(0))).collect();
    let j = JsonSummary {
        op,
        cases: s.cases,
        seconds: s.seconds,
        seed: s.seed,
        passed: !s.failed(),
        rows,
        classes,
        near_tie_cases: s.near_tie_cases,
        skipped: &s.skipped,
        failures: &s.failures,
    };
    serde_json::to_string_pretty(&j).expect("a summary always serializes")
}

/// The table: property x profile x subject, then the class counts, the
/// skipped suites and the failures.
pub fn to_table(op: &str, s: &Summary) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{op}: {} cases in {:.1} s (seed {})\n", s.cases, s.seconds, s.seed);
    let _ = writeln!(
        out,
        "{:<14} {:<16} {:<24} {:>7} {:>8} {:>12}  notes",
        "property", "profile", "subject", "cases", "failures", "err/bound"
    );
    for (k, r) in &s.rows {
        let ratio = r.worst_error_over_bound.map(|x| format!("{x:.3}")).unwrap_or_else(|| "bitwise".into());
        let mut notes = Vec::new();
        if r.near_ties > 0 {
            notes.push(format!("{} near-tie rows", r.near_ties));
        }
        if r.unbounded > 0 {
            notes.push(format!("{} unbounded", r.unbounded));
        }
        if r.kinks > 0 {
            notes.push(format!("{} kinks", r.kinks));
        }
        let _ = writeln!(
            out,
            "{:<14} {:<16} {:<24} {:>7} {:>8} {:>12}  {}{}",
            k.property.to_string(),
            k.profile,
            k.subject,
            r.cases,
            r.failures,
            ratio,
            notes.join(", "),
            if r.failures > 0 { "  <-- FAILED" } else { "" }
        );
    }
    let _ = writeln!(out, "\nadversarial classes (cases that exercised each):");
    let mut line = String::new();
    for (i, c) in Class::ALL.iter().enumerate() {
        let _ = write!(line, "  {:<18}{:>6}", c.to_string(), s.classes.get(c).copied().unwrap_or(0));
        if i % 4 == 3 {
            let _ = writeln!(out, "{line}");
            line.clear();
        }
    }
    if !line.is_empty() {
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(
        out,
        "  {:<18}{:>6}  (cases where an exact decision differed from the profile's)",
        "decision-near-tie", s.near_tie_cases
    );
    for sk in &s.skipped {
        let _ = writeln!(out, "\nSKIPPED {}: {}", sk.suite, sk.reason);
    }
    for f in &s.failures {
        let _ = writeln!(
            out,
            "\nFAILED {} / {} ({}): case {} (T x E = {} x {}, shrunk to {} x {})\n  {}",
            f.property,
            f.subject,
            f.profile,
            f.case_index,
            f.original_shape.0,
            f.original_shape.1,
            f.shrunk_shape.0,
            f.shrunk_shape.1,
            f.message
        );
        if let Some(p) = &f.saved {
            let _ = writeln!(out, "  saved to {}", p.display());
        }
    }
    let verdict = if s.failed() { "FAILED" } else { "passed" };
    let _ = writeln!(out, "\n{verdict}");
    out
}
