//! The kill matrix: each mutant's outcome, and per file the score
//! `killed / (run - equivalent)` where `run` leaves out the mutants that did
//! not compile, that compiled to the original's machine code, and that were
//! not run (sampled out, or past the campaign's time). A timeout or a crash
//! is not a kill: both count against the score, listed apart. Beside it,
//! the score with hangs: `(killed + timed out) / the same`, the convention
//! of PIT and Stryker, which count a mutant that hangs the tests as
//! detected (a user's run would not end either).

use super::triage::{Triage, Verdict};
use super::Mutant;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// What became of one mutant.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum Outcome {
    /// A property failed: the op, the property, the case's index (0-based:
    /// `case + 1` cases were run) and the failure's first line.
    Killed { op: String, property: String, case: u64, message: String },
    /// No property failed on `cases` cases of each op it reaches.
    Survived { cases: u64 },
    /// NVRTC compiled it to the original's machine code, byte for byte.
    SameCode,
    /// NVRTC rejected it.
    NoCompile { log: String },
    /// The child ran past its time limit (a hang, most often) and was killed.
    TimedOut { seconds: f64 },
    /// The child died or failed without a verdict.
    Crashed { detail: String },
    /// Not run: sampled out, or the campaign's time ran out first.
    NotRun,
    /// `--compile-only`: NVRTC's front end accepted it.
    Compiles,
}

impl Outcome {
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Killed { .. } => "killed",
            Outcome::Survived { .. } => "survived",
            Outcome::SameCode => "same-code",
            Outcome::NoCompile { .. } => "no-compile",
            Outcome::TimedOut { .. } => "timed-out",
            Outcome::Crashed { .. } => "crashed",
            Outcome::NotRun => "not-run",
            Outcome::Compiles => "compiles",
        }
    }
}

/// One row of the matrix.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    #[serde(flatten)]
    pub mutant: Mutant,
    #[serde(flatten)]
    pub outcome: Outcome,
    /// The triage's word on a survivor (equivalent or unkillable, why).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub triage: Option<String>,
    #[serde(skip)]
    pub equivalent: bool,
    /// Seconds the child took.
    pub seconds: f64,
}

impl Row {
    pub fn new(mutant: Mutant, outcome: Outcome, seconds: f64, triage: &Triage) -> Row {
        let (triage, equivalent) = match (triage.get(&mutant.id), &outcome) {
            (Some(Verdict::Equivalent(r)), Outcome::Survived { .. }) => (Some(format!("equivalent: {r}")), true),
            (Some(Verdict::Unkillable(r)), Outcome::Survived { .. }) => (Some(format!("unkillable: {r}")), false),
            // A triaged mutant that died is not equivalent: the triage is
            // wrong, and the report says so.
            (Some(_), Outcome::Killed { .. }) => (Some("triaged, but killed: the triage entry is wrong".into()), false),
            _ => (None, false),
        };
        Row { mutant, outcome, triage, equivalent, seconds }
    }
}

/// One file's counts.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Score {
    pub file: String,
    pub mutants: usize,
    pub killed: usize,
    pub survived: usize,
    pub equivalent: usize,
    pub same_code: usize,
    pub no_compile: usize,
    pub timed_out: usize,
    pub crashed: usize,
    pub not_run: usize,
    pub compiles: usize,
    /// killed / (killed + survived - equivalent + timed out + crashed);
    /// None when nothing was judged.
    pub score: Option<f64>,
    /// (killed + timed out) over the score's denominator: a hang detected.
    pub with_hangs: Option<f64>,
    /// The median of the kills' case counts.
    pub median_cases: Option<u64>,
}

/// The scores per file, in the rows' order of files.
pub fn scores(rows: &[Row]) -> Vec<Score> {
    let mut by: BTreeMap<usize, Score> = BTreeMap::new();
    let mut order: Vec<&str> = Vec::new();
    let mut kills: BTreeMap<usize, Vec<u64>> = BTreeMap::new();
    for r in rows {
        let i = order.iter().position(|f| *f == r.mutant.file).unwrap_or_else(|| {
            order.push(r.mutant.file);
            order.len() - 1
        });
        let s = by.entry(i).or_insert_with(|| Score { file: r.mutant.file.into(), ..Score::default() });
        s.mutants += 1;
        match &r.outcome {
            Outcome::Killed { case, .. } => {
                s.killed += 1;
                kills.entry(i).or_default().push(case + 1);
            }
            Outcome::Survived { .. } if r.equivalent => s.equivalent += 1,
            Outcome::Survived { .. } => s.survived += 1,
            Outcome::SameCode => s.same_code += 1,
            Outcome::NoCompile { .. } => s.no_compile += 1,
            Outcome::TimedOut { .. } => s.timed_out += 1,
            Outcome::Crashed { .. } => s.crashed += 1,
            Outcome::NotRun => s.not_run += 1,
            Outcome::Compiles => s.compiles += 1,
        }
    }
    for (i, s) in by.iter_mut() {
        let judged = s.killed + s.survived + s.timed_out + s.crashed;
        s.score = (judged > 0).then(|| s.killed as f64 / judged as f64);
        s.with_hangs = (judged > 0).then(|| (s.killed + s.timed_out) as f64 / judged as f64);
        if let Some(k) = kills.get_mut(i) {
            k.sort_unstable();
            s.median_cases = Some(k[k.len() / 2]);
        }
    }
    by.into_values().collect()
}

fn pct(x: Option<f64>) -> String {
    x.map_or("-".into(), |x| format!("{:.1}%", 100.0 * x))
}

/// The score table's header, as the Markdown and HTML reports name it.
const SCORE_HEADER: [&str; 13] = [
    "file",
    "mutants",
    "killed",
    "survived",
    "equivalent",
    "same code",
    "no compile",
    "timed out",
    "crashed",
    "not run",
    "score",
    "score with hangs",
    "median cases to kill",
];

/// One file's cells, in [`SCORE_HEADER`]'s order.
fn cells(s: &Score) -> [String; 13] {
    [
        s.file.clone(),
        s.mutants.to_string(),
        s.killed.to_string(),
        s.survived.to_string(),
        s.equivalent.to_string(),
        s.same_code.to_string(),
        s.no_compile.to_string(),
        s.timed_out.to_string(),
        s.crashed.to_string(),
        s.not_run.to_string(),
        pct(s.score),
        pct(s.with_hangs),
        s.median_cases.map_or("-".into(), |m| m.to_string()),
    ]
}

/// The scores as a plain-text table (short column names).
pub fn table(scores: &[Score]) -> String {
    let short = [
        "file",
        "mutants",
        "killed",
        "survived",
        "equiv",
        "same-code",
        "no-compile",
        "timeout",
        "crashed",
        "not-run",
        "score",
        "+hangs",
        "median",
    ];
    let line = |c: &[String]| {
        let mut l = format!("{:<16}", c[0]);
        for (x, h) in c[1..].iter().zip(&short[1..]) {
            let _ = write!(l, " {x:>w$}", w = h.len().max(5));
        }
        l + "\n"
    };
    let mut t = line(&short.map(String::from));
    for s in scores {
        t.push_str(&line(&cells(s)));
    }
    t
}

/// The survivors and the rows a reader must look at (timeouts, crashes,
/// wrong triage), as lines.
pub fn survivors(rows: &[Row]) -> Vec<&Row> {
    rows.iter()
        .filter(|r| {
            matches!(r.outcome, Outcome::Survived { .. } | Outcome::TimedOut { .. } | Outcome::Crashed { .. })
                && !r.equivalent
        })
        .collect()
}

fn md_escape(s: &str) -> String {
    s.replace('|', "\\|").replace('`', "'")
}

/// The whole matrix as Markdown: the scores, then one row per mutant.
pub fn markdown(rows: &[Row], header: &str) -> String {
    let sc = scores(rows);
    let mut m = format!("{header}\n\n| {} |\n|---|{}\n", SCORE_HEADER.join(" | "), "---:|".repeat(11));
    for s in &sc {
        let _ = writeln!(m, "| {} |", cells(s).join(" | "));
    }
    m.push_str("\n| mutant | line | rule | diff | outcome | by | cases |\n|---|---:|---|---|---|---|---:|\n");
    for r in rows.iter().filter(|r| r.outcome != Outcome::NotRun) {
        let (by, cases) = verdict(r);
        let _ = writeln!(
            m,
            "| `{}` | {} | {} | `{}` → `{}` | {} | {} | {} |",
            r.mutant.id,
            r.mutant.line,
            r.mutant.rule.name(),
            md_escape(&r.mutant.before),
            md_escape(&r.mutant.after),
            r.outcome.label(),
            md_escape(&by),
            cases
        );
    }
    m
}

/// A row's "by" and "cases" cells: what killed it (op, property, the
/// failure's first line) and after how many cases, a survivor's triage and
/// cases run, a crash's or a rejected compile's first line.
fn verdict(r: &Row) -> (String, String) {
    let first = |s: &str| s.lines().next().unwrap_or("").to_string();
    match &r.outcome {
        Outcome::Killed { op, property, case, message } => {
            (format!("{op}: {property} — {}", first(message)), (case + 1).to_string())
        }
        Outcome::Survived { cases } => (r.triage.clone().unwrap_or_default(), cases.to_string()),
        Outcome::Crashed { detail } => (first(detail), String::new()),
        Outcome::NoCompile { log } => (log.lines().find(|l| l.contains("error")).unwrap_or("").into(), String::new()),
        _ => (String::new(), String::new()),
    }
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The matrix as one self-contained HTML page (no script: a table per file,
/// rows coloured by outcome).
pub fn html(rows: &[Row], header: &str) -> String {
    let mut h = String::from(
        "<!doctype html><meta charset=utf-8><title>bitparity mutants</title><style>\
         body{font:14px system-ui;margin:2em}table{border-collapse:collapse;margin:1em 0}\
         td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}code{font-size:12px}\
         .killed{background:#e6f4e6}.survived{background:#fbe3e3}.timed-out,.crashed{background:#fff2cc}\
         .same-code,.no-compile{color:#777}</style>",
    );
    let _ = write!(h, "<h1>bitparity mutants</h1><p>{}</p><table><tr>", html_escape(header));
    for c in SCORE_HEADER {
        let _ = write!(h, "<th>{c}</th>");
    }
    h.push_str("</tr>");
    for s in scores(rows) {
        h.push_str("<tr>");
        for c in cells(&s) {
            let _ = write!(h, "<td>{}</td>", html_escape(&c));
        }
        h.push_str("</tr>");
    }
    h.push_str("</table><table><tr><th>mutant</th><th>line</th><th>rule</th><th>diff</th><th>outcome</th><th>by</th><th>cases</th></tr>");
    for r in rows.iter().filter(|r| r.outcome != Outcome::NotRun) {
        let (by, cases) = verdict(r);
        let _ = write!(
            h,
            "<tr class=\"{}\"><td><code>{}</code></td><td>{}</td><td>{}</td><td><code>-{}<br>+{}</code></td><td>{}</td><td>{}</td><td>{}</td></tr>",
            r.outcome.label(),
            html_escape(&r.mutant.id),
            r.mutant.line,
            r.mutant.rule.name(),
            html_escape(&r.mutant.before),
            html_escape(&r.mutant.after),
            r.outcome.label(),
            html_escape(&by),
            cases
        );
    }
    h.push_str("</table>\n");
    h
}

/// The rows of earlier runs' JSON reports (`texts`: name and content, in
/// order: a later run's outcome of a mutant replaces an earlier one's, a
/// kill excepted, which a later survival leaves),
/// for `mutants` (the others of a report are ignored), judged again with
/// `triage`: runs combined and survivors re-triaged without the GPU.
/// Returns the rows and the ids the reports hold that these sources no
/// longer have.
pub fn from_runs(
    mutants: Vec<Mutant>,
    texts: &[(String, String)],
    triage: &Triage,
) -> Result<(Vec<Row>, Vec<String>), String> {
    #[derive(Deserialize)]
    struct Run {
        mutants: Vec<serde_json::Value>,
    }
    let mut latest: BTreeMap<String, (Outcome, f64)> = BTreeMap::new();
    for (name, text) in texts {
        let run: Run = serde_json::from_str(text).map_err(|e| format!("{name}: not a mutants report: {e}"))?;
        for v in run.mutants {
            let id = v.get("id").and_then(|i| i.as_str()).ok_or_else(|| format!("{name}: a row without an id"))?;
            let outcome = Outcome::deserialize(&v).map_err(|e| format!("{name}: {id}: {e}"))?;
            let seconds = v.get("seconds").and_then(|s| s.as_f64()).unwrap_or(0.0);
            // A kill stands: a later run that hunts a survivor with fewer
            // cases, other shapes or without a sanitizer tool (as re-runs of
            // survivors do) does not undo a failure shown on the same code
            // (an id names one mutated line of one source).
            let killed_before = matches!(latest.get(id), Some((Outcome::Killed { .. }, _)));
            if outcome != Outcome::NotRun && !(killed_before && matches!(outcome, Outcome::Survived { .. })) {
                latest.insert(id.to_string(), (outcome, seconds));
            }
        }
    }
    let known: std::collections::HashSet<String> = super::all().into_iter().map(|m| m.id).collect();
    let stale = latest.keys().filter(|k| !known.contains(*k)).cloned().collect();
    let rows = mutants
        .into_iter()
        .map(|m| {
            let (o, s) = latest.remove(&m.id).unwrap_or((Outcome::NotRun, 0.0));
            Row::new(m, o, s, triage)
        })
        .collect();
    Ok((rows, stale))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(i: usize, outcome: Outcome, triage: &Triage) -> Row {
        let m = super::super::mutants_of(super::super::files()[0]).swap_remove(i);
        Row::new(m, outcome, 1.0, triage)
    }

    #[test]
    fn the_score_leaves_out_only_what_was_not_judged_and_the_equivalent() {
        let ms = super::super::mutants_of(super::super::files()[0]);
        let t = Triage::parse(&format!("[[equivalent]]\nid='{}'\nreason='r'\n", ms[3].id), "t").unwrap();
        let killed = |c| Outcome::Killed { op: "o".into(), property: "p".into(), case: c, message: "m".into() };
        let rows = vec![
            row(0, killed(0), &t),
            row(1, killed(9), &t),
            row(2, Outcome::Survived { cases: 5 }, &t),
            row(3, Outcome::Survived { cases: 5 }, &t),
            row(4, Outcome::TimedOut { seconds: 1.0 }, &t),
            row(5, Outcome::SameCode, &t),
            row(6, Outcome::NoCompile { log: String::new() }, &t),
            row(7, Outcome::NotRun, &t),
            row(8, killed(4), &t),
        ];
        let s = &scores(&rows)[0];
        assert_eq!((s.killed, s.survived, s.equivalent, s.timed_out), (3, 1, 1, 1));
        // 3 kills of 5 judged: the equivalent, same-code, no-compile and
        // not-run rows are out; the timeout is in.
        assert_eq!(s.score, Some(0.6));
        assert_eq!(s.with_hangs, Some(0.8));
        assert_eq!(s.median_cases, Some(5));
        assert_eq!(survivors(&rows).len(), 2);
        let md = markdown(&rows, "h");
        assert!(md.contains("| 60.0% | 80.0% | 5 |"), "{md}");
    }

    #[test]
    fn a_killed_mutant_triaged_equivalent_is_flagged() {
        let ms = super::super::mutants_of(super::super::files()[0]);
        let t = Triage::parse(&format!("[[equivalent]]\nid='{}'\nreason='r'\n", ms[0].id), "t").unwrap();
        let r = row(0, Outcome::Killed { op: "o".into(), property: "p".into(), case: 0, message: "m".into() }, &t);
        assert!(!r.equivalent && r.triage.unwrap().contains("wrong"));
    }

    #[test]
    fn runs_combine_the_latest_outcome_wins_a_kill_stands_and_the_triage_applies_again() {
        let ms = super::super::mutants_of(super::super::files()[0]);
        let killed = Outcome::Killed { op: "o".into(), property: "p".into(), case: 2, message: "m".into() };
        let first = vec![
            Row::new(ms[0].clone(), Outcome::Survived { cases: 9 }, 1.0, &Triage::default()),
            Row::new(ms[1].clone(), Outcome::Survived { cases: 9 }, 1.0, &Triage::default()),
        ];
        let second = vec![
            Row::new(ms[0].clone(), killed.clone(), 2.0, &Triage::default()),
            Row::new(ms[1].clone(), Outcome::NotRun, 0.0, &Triage::default()),
        ];
        // A later survival (a re-run with fewer cases) leaves the kill.
        let third = vec![Row::new(ms[0].clone(), Outcome::Survived { cases: 3 }, 1.0, &Triage::default())];
        let json = |rows: &[Row]| serde_json::json!({ "header": "h", "mutants": rows }).to_string();
        let mut stale_run: serde_json::Value = serde_json::from_str(&json(&first[..1])).unwrap();
        stale_run["mutants"][0]["id"] = "gone.cu:12345678".into();
        let texts = vec![
            ("a".to_string(), json(&first)),
            ("b".to_string(), json(&second)),
            ("b2".to_string(), json(&third)),
            ("c".to_string(), stale_run.to_string()),
        ];
        let t = Triage::parse(&format!("[[equivalent]]\nid='{}'\nreason='r'\n", ms[1].id), "t").unwrap();
        let (rows, stale) = from_runs(ms[..3].to_vec(), &texts, &t).unwrap();
        assert_eq!(rows[0].outcome, killed);
        // Not run in b: a's survival stands, and the triage now calls it
        // equivalent.
        assert_eq!(rows[1].outcome, Outcome::Survived { cases: 9 });
        assert!(rows[1].equivalent);
        assert_eq!(rows[2].outcome, Outcome::NotRun);
        assert_eq!(stale, vec!["gone.cu:12345678".to_string()]);
        assert!(from_runs(ms, &[("x".into(), "{}".into())], &t).is_err());
    }

    #[test]
    fn outcomes_round_trip_through_json() {
        for o in [
            Outcome::Killed { op: "router".into(), property: "conformance".into(), case: 3, message: "x".into() },
            Outcome::Survived { cases: 10 },
            Outcome::SameCode,
            Outcome::NoCompile { log: "e".into() },
        ] {
            let s = serde_json::to_string(&o).unwrap();
            assert_eq!(serde_json::from_str::<Outcome>(&s).unwrap(), o);
        }
    }
}
