//! A run's summary as a table (the terminal), JSON (`--json`) and Markdown
//! (`--markdown`, the nightly report), and its verdict and exit code.

use crate::gen::GenConfig;
use crate::props::Property;
use crate::runner::{DimCounts, FailureRecord, OpSummary, Shard, SIZE_BINS};
use crate::subject::Skip;
use oracles::mpfr::histogram::{RatioHistogram, BINS, MAX_EXP, MIN_EXP};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write;

/// How a run ended; each verdict has its exit code (docs/cli.md, "Exit codes").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Every judged case of every property held, and something was judged.
    Passed,
    /// Some property failed.
    Failed,
    /// Nothing was judged, or a subject the user named could not run: not a
    /// pass.
    NothingJudged,
    /// Stopped by SIGINT before its budget, with no failure.
    Interrupted,
}

impl Verdict {
    pub fn exit_code(self) -> u8 {
        match self {
            Verdict::Passed => 0,
            Verdict::Failed => 1,
            Verdict::NothingJudged => 3,
            Verdict::Interrupted => 130,
        }
    }
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Passed => "passed",
            Verdict::Failed => "FAILED",
            Verdict::NothingJudged => "NOTHING JUDGED",
            Verdict::Interrupted => "INTERRUPTED",
        }
    }
}

/// What a `check` was asked to run: shards of one run agree on all of it
/// but the shard.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunPlan {
    /// Cases per op, when bounded by a count (`--cases`).
    pub cases: Option<u64>,
    /// The time budget of each op, when bounded by time (`--seconds`).
    pub seconds_per_op: Option<f64>,
    /// The index of the first case (`--case N`).
    pub first_case: u64,
    pub properties: Vec<Property>,
    /// The subjects named (`--subject`; empty: every available one).
    pub subjects: Vec<String>,
    /// This summary's share of the run; `None` for a whole run (unsharded,
    /// or the merge of every shard).
    pub shard: Option<Shard>,
}

/// Everything a `check` found, over every op it ran.
#[derive(Clone, Debug)]
pub struct RunReport {
    pub seed: u64,
    pub plan: RunPlan,
    pub ops: Vec<OpSummary>,
    pub gen: GenConfig,
    /// Environment knobs that change the cases (set ones only).
    pub knobs: Vec<(String, String)>,
    /// Subjects the user named that could not run here, with why.
    pub unavailable: Vec<Skip>,
    pub interrupted: bool,
}

impl RunReport {
    pub fn verdict(&self) -> Verdict {
        if self.ops.iter().any(OpSummary::failed) {
            Verdict::Failed
        } else if self.interrupted {
            Verdict::Interrupted
        } else if !self.unavailable.is_empty()
            || self.ops.iter().map(OpSummary::judged).sum::<u64>() == 0
            || !self.unjudged().is_empty()
        {
            Verdict::NothingJudged
        } else {
            Verdict::Passed
        }
    }

    /// Subjects that computed nothing judged, as `op / subject`: every
    /// property that applies to them judged no case (a subject that
    /// answered `unavailable` to every case). Refusing the invalid cases
    /// alone does not count: it shows the subject checks its inputs, not
    /// that it computes the op.
    pub fn unjudged(&self) -> Vec<String> {
        let mut out = Vec::new();
        for s in &self.ops {
            let mut subjects: Vec<&str> = s.rows.keys().map(|k| k.subject.as_str()).collect();
            subjects.dedup();
            for subject in subjects {
                if subject == crate::props::MPFR_SUBJECT {
                    continue;
                }
                let applicable: Vec<_> =
                    s.rows.iter().filter(|(k, r)| k.subject == subject && r.not_applicable.is_none()).collect();
                let computing: Vec<_> =
                    applicable.iter().filter(|(k, _)| k.property != crate::props::Property::Validation).collect();
                let judged: u64 = if computing.is_empty() {
                    applicable.iter().map(|(_, r)| r.cases).sum()
                } else {
                    computing.iter().map(|(_, r)| r.cases).sum()
                };
                if !applicable.is_empty() && judged == 0 {
                    out.push(format!("{} / {subject}", s.op));
                }
            }
        }
        out
    }
}

/// A ratio readable at any size: 0.954, 3.2e12, inf.
pub(crate) fn ratio_text(r: f64) -> String {
    if r.is_infinite() {
        "inf".into()
    } else if r < 1000.0 {
        format!("{r:.3}")
    } else {
        format!("{r:.2e}")
    }
}

/// A row's err/bound cell, in the table and the Markdown alike: the worst
/// ratio; `fd-order` for the finite-difference check (a convergence order,
/// no ratio); `bitwise` only for properties that compare bits.
pub(crate) fn measure(k: &crate::runner::RowKey, r: &crate::runner::RowStats) -> String {
    match r.worst_error_over_bound {
        Some(x) => ratio_text(x),
        None if k.subject == crate::props::MPFR_SUBJECT => "fd-order".into(),
        None if k.property.bitwise() => "bitwise".into(),
        None => "-".into(),
    }
}

pub(crate) fn notes(r: &crate::runner::RowStats) -> String {
    let mut v = Vec::new();
    if let Some(t) = &r.clamp_tie {
        v.push(format!("judged under clamp_tie {t} (claimed)"));
    }
    if r.near_ties > 0 {
        v.push(format!("{} near-tie rows", r.near_ties));
    }
    if r.unbounded > 0 {
        v.push(format!("{} unbounded", r.unbounded));
    }
    if r.kinks > 0 {
        v.push(format!("{} kinks", r.kinks));
    }
    if r.undetermined > 0 {
        v.push(format!("{} undetermined", r.undetermined));
    }
    if r.not_applicable_cases > 0 {
        v.push(format!("{} cases n/a", r.not_applicable_cases));
    }
    if r.unavailable > 0 {
        let why: String = r.unavailable_reason.as_deref().unwrap_or("").chars().take(80).collect();
        v.push(format!("{} cases unavailable ({why})", r.unavailable));
    }
    v.join(", ")
}

/// The table: per op, property x profile x subject, then the class counts,
/// the skipped suites and the failures; then the verdict.
pub fn to_table(run: &RunReport) -> String {
    let mut out = String::new();
    let knobs: Vec<String> = run.knobs.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let _ = writeln!(
        out,
        "seed {}{}; generator max T x E {}, max T {}, max E {}{}",
        run.seed,
        run.plan.shard.map(|s| format!(", shard {s}")).unwrap_or_default(),
        run.gen.max_te,
        run.gen.max_t,
        run.gen.max_e,
        if knobs.is_empty() { String::new() } else { format!(" ({})", knobs.join(", ")) }
    );
    for s in &run.ops {
        let _ = writeln!(out, "\n{}: {} cases in {:.1} s\n", s.op, s.cases, s.seconds);
        // The subject column fits the longest name (an `exec:` command can
        // be long), 26 at least, so that the columns stay aligned.
        let w = s.rows.keys().map(|k| k.subject.chars().count()).max().unwrap_or(0).max(26);
        let _ = writeln!(
            out,
            "{:<16} {:<16} {:<7} {:<w$} {:>7} {:>8} {:>10}  notes",
            "property", "profile", "padding", "subject", "cases", "failures", "err/bound"
        );
        for (k, r) in &s.rows {
            if let Some(why) = &r.not_applicable {
                let _ = writeln!(
                    out,
                    "{:<16} {:<16} {:<7} {:<w$} {:>7} {:>8} {:>10}  n/a: {why}",
                    k.property.to_string(),
                    k.profile,
                    r.padding,
                    k.subject,
                    "-",
                    "-",
                    "-"
                );
                continue;
            }
            let measure = measure(k, r);
            let _ = writeln!(
                out,
                "{:<16} {:<16} {:<7} {:<w$} {:>7} {:>8} {:>10}  {}{}",
                k.property.to_string(),
                k.profile,
                r.padding,
                k.subject,
                r.cases,
                r.failures,
                measure,
                notes(r),
                if r.failures > 0 { "  <-- FAILED" } else { "" }
            );
        }
        let _ = writeln!(out, "\nadversarial classes of {} (cases that exercised each):", s.op);
        let mut line = String::new();
        for (i, (c, n)) in s.classes.iter().enumerate() {
            let _ = write!(line, "  {c:<20}{n:>6}");
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
            "  {:<20}{:>6}  (cases where an exact decision differed from the profile's)",
            "decision-near-tie", s.near_tie_cases
        );
        for sk in &s.skipped {
            let _ = writeln!(out, "\nSKIPPED {}: {}", sk.suite, sk.reason);
        }
        for f in &s.failures {
            let _ = write!(out, "\n{}", f.text());
        }
    }
    for u in &run.unavailable {
        let _ = writeln!(out, "\nNOT RUN (named, unavailable here) {}: {}", u.suite, u.reason);
    }
    let v = run.verdict();
    let unjudged = run.unjudged();
    let why = match v {
        Verdict::NothingJudged if !run.unavailable.is_empty() => " (a subject you named could not run)".to_string(),
        Verdict::NothingJudged if !unjudged.is_empty() && run.ops.iter().map(OpSummary::judged).sum::<u64>() > 0 => {
            format!(" (no case judged what {} computes)", crate::escape::visible(&unjudged.join(", ")))
        }
        Verdict::NothingJudged => " (no case was judged)".to_string(),
        Verdict::Interrupted => " (interrupted: the table covers the cases run so far)".to_string(),
        _ => String::new(),
    };
    let _ = writeln!(out, "\n{}{why}", v.word());
    out
}

/// A row of the JSON summary.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonRow {
    pub op: String,
    pub property: Property,
    pub profile: String,
    pub subject: String,
    pub cases: u64,
    pub failures: u64,
    /// The worst |error| / bound: a number, `"inf"` (an error against a
    /// zero bound, or an infinite one), `null` for a row with no ratio (a
    /// property that compares bits).
    #[serde(with = "ratio")]
    pub worst_error_over_bound: Option<f64>,
    pub near_ties: u64,
    pub unbounded: u64,
    pub kinks: u64,
    pub undetermined: u64,
    pub not_applicable_cases: u64,
    pub not_applicable: Option<String>,
    /// Every judged output's |error| / bound, in power-of-two bins (the
    /// rows judged against the profile's bound; `null` elsewhere).
    pub error_over_bound_histogram: Option<JsonRatioHistogram>,
    /// Cases the subject declared unavailable (absent in older summaries).
    #[serde(default)]
    pub unavailable: u64,
    #[serde(default)]
    pub unavailable_reason: Option<String>,
    /// The padding rule the row's subject was judged by (`skip`, `mask`,
    /// `-`: docs/padding.md); empty in older summaries.
    #[serde(default)]
    pub padding: String,
    /// The clamp tie rule the row's subject claims and was judged under on
    /// every case; absent: each case's own rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clamp_tie: Option<String>,
}

/// A worst ratio in JSON, which has no infinity: a number, `"inf"`, or
/// `null` for none (never the same as infinity).
mod ratio {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            None => s.serialize_none(),
            Some(x) if *x == f64::INFINITY => s.serialize_str("inf"),
            Some(x) => s.serialize_f64(*x),
        }
    }

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Ratio {
        Number(f64),
        Word(String),
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
        use serde::de::Error;
        match Option::<Ratio>::deserialize(d)? {
            None => Ok(None),
            Some(Ratio::Number(x)) if x.is_finite() && x >= 0.0 => Ok(Some(x)),
            Some(Ratio::Word(w)) if w == "inf" => Ok(Some(f64::INFINITY)),
            Some(Ratio::Number(x)) => Err(D::Error::custom(format!("a ratio is at least 0, not {x}"))),
            Some(Ratio::Word(w)) => Err(D::Error::custom(format!("a ratio is a number or \"inf\", not {w:?}"))),
        }
    }
}

/// A row's ratio histogram ([`RatioHistogram`]) in the JSON summary, with
/// only its non-empty bins; every output counted is in exactly one of
/// `zero`, `log2`, `undetermined`, `unbounded`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonRatioHistogram {
    /// Outputs computed exactly (error 0).
    pub zero: u64,
    /// Exponent e (a JSON key, so a string) -> outputs whose ratio lies in
    /// (2^(e-1), 2^e]; e from -64 (which also holds every smaller positive
    /// ratio) to 16 (every larger one, infinity included). e <= 0: within
    /// the bound.
    pub log2: BTreeMap<i32, u64>,
    /// Outputs whose exact rounding stayed undetermined (kept apart).
    pub undetermined: u64,
    /// Outputs with no finite bound: not judged.
    pub unbounded: u64,
}

impl JsonRatioHistogram {
    pub fn of(h: &RatioHistogram) -> JsonRatioHistogram {
        JsonRatioHistogram {
            zero: h.zero,
            log2: h.nonzero_bins().collect(),
            undetermined: h.undetermined,
            unbounded: h.unbounded,
        }
    }
    /// The histogram back, refusing a bin no run writes.
    pub fn to_histogram(&self) -> Result<RatioHistogram, String> {
        let mut h = RatioHistogram {
            zero: self.zero,
            undetermined: self.undetermined,
            unbounded: self.unbounded,
            ..Default::default()
        };
        for (&e, &n) in &self.log2 {
            if !(MIN_EXP..=MAX_EXP).contains(&e) {
                return Err(format!("histogram bin 2^{e} is outside 2^{MIN_EXP}..2^{MAX_EXP}"));
            }
            h.bins[(e - MIN_EXP) as usize] = n;
        }
        debug_assert_eq!(h.bins.len(), BINS);
        Ok(h)
    }
}

/// The sizes of one dimension of an op's cases ([`DimCounts`]) in the JSON
/// summary, with only its non-empty bins.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonDim {
    /// The dimension's name in the op's shape (`T`, `E`, `H`, ...).
    pub dim: String,
    /// Its place in the op's shape (T = 0).
    pub position: usize,
    /// Bit length b (a JSON key, so a string) -> cases whose size has it:
    /// b = 0 is size 0, otherwise sizes 2^(b-1) ..= 2^b - 1.
    pub by_bit_length: BTreeMap<usize, u64>,
}

impl JsonDim {
    pub fn of(d: &DimCounts) -> JsonDim {
        JsonDim {
            dim: d.dim.clone(),
            position: d.position,
            by_bit_length: d.bins.iter().enumerate().filter(|(_, &n)| n > 0).map(|(b, &n)| (b, n)).collect(),
        }
    }
    /// The counts back, refusing a bit length no size has.
    pub fn to_counts(&self) -> Result<DimCounts, String> {
        let mut d = DimCounts::new(&self.dim, self.position);
        for (&b, &n) in &self.by_bit_length {
            if b >= SIZE_BINS {
                return Err(format!("dimension {}: bit length {b} is larger than a size can have", self.dim));
            }
            d.bins[b] = n;
        }
        Ok(d)
    }
}

/// An op of the JSON summary.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonOp {
    pub op: String,
    pub cases: u64,
    pub seconds: f64,
    pub near_tie_cases: u64,
    pub classes: BTreeMap<String, u64>,
    /// The cases' sizes, per dimension, in the order of the op's shape.
    pub shapes: Vec<JsonDim>,
    pub skipped: Vec<Skip>,
    pub failures: Vec<FailureRecord>,
}

/// The generator's sizes, as the JSON summary records them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonGenerator {
    pub max_te: usize,
    pub max_t: usize,
    pub max_e: usize,
}

/// The JSON summary (`--json`; docs/cli.md, "JSON, Markdown and HTML
/// reports"), which `merge` reads back: strict, so that a file of another
/// kind is refused.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonReport {
    pub seed: u64,
    pub verdict: Verdict,
    pub exit_code: u8,
    pub passed: bool,
    pub interrupted: bool,
    pub cases: u64,
    pub seconds: f64,
    pub plan: RunPlan,
    pub generator: JsonGenerator,
    pub knobs: BTreeMap<String, String>,
    pub unavailable: Vec<Skip>,
    pub ops: Vec<JsonOp>,
    pub rows: Vec<JsonRow>,
}

impl JsonReport {
    pub fn of(run: &RunReport) -> JsonReport {
        let rows = run
            .ops
            .iter()
            .flat_map(|s| s.rows.iter())
            .map(|(k, r)| JsonRow {
                op: k.op.clone(),
                property: k.property,
                profile: k.profile.clone(),
                subject: k.subject.clone(),
                cases: r.cases,
                failures: r.failures,
                worst_error_over_bound: r.worst_error_over_bound,
                near_ties: r.near_ties,
                unbounded: r.unbounded,
                kinks: r.kinks,
                undetermined: r.undetermined,
                not_applicable_cases: r.not_applicable_cases,
                not_applicable: r.not_applicable.clone(),
                error_over_bound_histogram: r.histogram.as_ref().map(JsonRatioHistogram::of),
                unavailable: r.unavailable,
                unavailable_reason: r.unavailable_reason.clone(),
                padding: r.padding.clone(),
                clamp_tie: r.clamp_tie.clone(),
            })
            .collect();
        let ops = run
            .ops
            .iter()
            .map(|s| JsonOp {
                op: s.op.clone(),
                cases: s.cases,
                seconds: s.seconds,
                near_tie_cases: s.near_tie_cases,
                classes: s.classes.iter().cloned().collect(),
                shapes: s.shapes.iter().map(JsonDim::of).collect(),
                skipped: s.skipped.clone(),
                failures: s.failures.clone(),
            })
            .collect();
        let v = run.verdict();
        JsonReport {
            seed: run.seed,
            verdict: v,
            exit_code: v.exit_code(),
            passed: v == Verdict::Passed,
            interrupted: run.interrupted,
            cases: run.ops.iter().map(|s| s.cases).sum(),
            seconds: run.ops.iter().map(|s| s.seconds).sum(),
            plan: run.plan.clone(),
            generator: JsonGenerator { max_te: run.gen.max_te, max_t: run.gen.max_t, max_e: run.gen.max_e },
            knobs: run.knobs.iter().cloned().collect(),
            unavailable: run.unavailable.clone(),
            ops,
            rows,
        }
    }
}

/// The same summary as JSON (docs/cli.md, "JSON, Markdown and HTML reports").
pub fn to_json(run: &RunReport) -> String {
    serde_json::to_string_pretty(&JsonReport::of(run)).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}")) + "\n"
}

/// The summary as Markdown: the nightly report's body.
pub fn to_markdown(run: &RunReport, title: &str) -> String {
    let mut md = format!("# {title}\n\n");
    let _ = writeln!(
        md,
        "- seed {}{}; verdict **{}** (exit {})",
        run.seed,
        run.plan.shard.map(|s| format!(", shard {s}")).unwrap_or_default(),
        run.verdict().word(),
        run.verdict().exit_code()
    );
    let _ = writeln!(
        md,
        "- generator: max T x E {}, max T {}, max E {}{}",
        run.gen.max_te,
        run.gen.max_t,
        run.gen.max_e,
        run.knobs.iter().map(|(k, v)| format!(", {k}={v}")).collect::<String>()
    );
    for s in &run.ops {
        let _ = writeln!(md, "\n## {}: {} cases in {:.1} s\n", s.op, s.cases, s.seconds);
        md.push_str(
            "| property | profile | padding | subject | cases | failures | err/bound | notes |\n\
             |---|---|---|---|---:|---:|---:|---|\n",
        );
        for (k, r) in &s.rows {
            let (cases, failures, measure, note) = match &r.not_applicable {
                Some(why) => ("-".to_string(), "-".to_string(), "-".to_string(), format!("n/a: {why}")),
                None => (r.cases.to_string(), r.failures.to_string(), measure(k, r), notes(r)),
            };
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {cases} | {failures} | {measure} | {note} |",
                k.property, k.profile, r.padding, k.subject
            );
        }
        md.push_str("\n| class | cases |\n|---|---:|\n");
        for (c, n) in &s.classes {
            let _ = writeln!(md, "| {c} | {n} |");
        }
        for sk in &s.skipped {
            let _ = writeln!(md, "\nSKIPPED {}: {}", sk.suite, sk.reason);
        }
        for f in &s.failures {
            let _ = write!(md, "\n```\n{}```\n", f.text());
        }
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_round_trip_through_json_and_refuse_what_no_run_writes() {
        let mut h = RatioHistogram::default();
        for r in [0.0, 1e-30, 0.5, 1.0, f64::INFINITY] {
            h.add_ratio(r);
        }
        h.unbounded = 3;
        let text = serde_json::to_string(&JsonRatioHistogram::of(&h)).unwrap();
        assert_eq!(text, r#"{"zero":1,"log2":{"-64":1,"-1":1,"0":1,"16":1},"undetermined":0,"unbounded":3}"#);
        let back: JsonRatioHistogram = serde_json::from_str(&text).unwrap();
        assert_eq!(back.to_histogram().unwrap(), h);
        let out_of_range: JsonRatioHistogram =
            serde_json::from_str(r#"{"zero":0,"log2":{"17":1},"undetermined":0,"unbounded":0}"#).unwrap();
        assert!(out_of_range.to_histogram().unwrap_err().contains("2^17"));
        assert!(serde_json::from_str::<JsonRatioHistogram>(
            r#"{"zero":0,"log2":{},"undetermined":0,"unbounded":0,"x":1}"#
        )
        .is_err());
        let dim: JsonDim = serde_json::from_str(r#"{"dim":"T","position":0,"by_bit_length":{"65":1}}"#).unwrap();
        assert!(dim.to_counts().is_err());
    }
}
