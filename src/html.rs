//! `--html PATH`: a run's summary as one self-contained page (docs/cli.md,
//! "JSON, Markdown and HTML reports"): the table, the plan, the skipped suites, every failure with
//! its shrunk case, differing bits and reproduce commands, and charts of
//! what the run covered (classes, shapes) and of how close each output came
//! to its bound.
//!
//! Self-contained because a report is mailed, attached to CI runs and
//! opened years later, offline: inline CSS, charts drawn here as inline SVG,
//! no font, script or image fetched at view time. The one small script
//! (a toggle) is optional to read the page; it also marks the page as
//! loaded without script errors, which is what `scripts/html-check` looks
//! for in headless Chromium. Every text from the run (names, messages, case
//! values) goes through [`esc`]: a subject or a message may hold `<`.

use crate::corpus;
use crate::props::compare::{bit_diff, BitDiff};
use crate::report::{measure, notes, ratio_text, RunReport, Verdict};
use crate::runner::{DimCounts, FailureRecord, OpSummary, RowKey, RowStats, SaveNote};
use oracles::case::hexf;
use oracles::mpfr::histogram::{RatioHistogram, MAX_EXP, MIN_EXP};
use std::fmt::Write;

/// Set on `<html>` by the page's script when it ran to its end.
pub const READY_ATTR: &str = "data-bp-ready";
/// Set on `<html>` by `window.onerror` (with the message) when any script
/// of the page failed.
pub const ERROR_ATTR: &str = "data-bp-script-error";

/// `s` as HTML text or attribute value: the five characters that could end
/// a text, an attribute or a tag are written as entities.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A name usable in an `id` (and a link to it): letters, digits, `-`, `_`;
/// anything else becomes `-`.
fn anchor(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '-' }).collect()
}

const CSS: &str = r#"
:root { --fg:#1f2328; --muted:#59636e; --line:#d1d9e0; --bg:#ffffff; --panel:#f6f8fa;
  --pass:#1a7f37; --fail:#cf222e; --warn:#9a6700; --blue:#0969da; --purple:#8250df; }
* { box-sizing: border-box; }
body { margin: 0; color: var(--fg); background: var(--bg);
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", "Liberation Sans", Arial, sans-serif; }
main { max-width: 1340px; margin: 0 auto; padding: 18px 24px 40px; }
code, pre, .mono { font-family: ui-monospace, "DejaVu Sans Mono", "Liberation Mono", Menlo, Consolas, monospace; font-size: 12.5px; }
h1 { font-size: 22px; margin: 0; }
h2 { font-size: 19px; margin: 28px 0 8px; padding-bottom: 4px; border-bottom: 2px solid var(--line); }
h2 small { font-weight: normal; color: var(--muted); font-size: 14px; }
h3 { font-size: 15px; margin: 18px 0 6px; }
h4 { font-size: 13.5px; margin: 0 0 4px; }
header { display: flex; align-items: center; gap: 14px; flex-wrap: wrap; }
.verdict { padding: 3px 12px; border-radius: 14px; color: #fff; font-weight: 600; font-size: 14px; }
.v-passed { background: var(--pass); } .v-failed { background: var(--fail); }
.v-nothing { background: var(--muted); } .v-interrupted { background: var(--warn); }
nav { margin: 6px 0 0; color: var(--muted); } nav a { margin-right: 12px; }
a { color: var(--blue); text-decoration: none; } a:hover { text-decoration: underline; }
dl.plan { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; margin: 0;
  background: var(--panel); border: 1px solid var(--line); border-radius: 6px; padding: 10px 14px; }
dl.plan dt { color: var(--muted); } dl.plan dd { margin: 0; }
table.summary { border-collapse: collapse; width: 100%; }
table.summary th, table.summary td { border-bottom: 1px solid var(--line); padding: 3px 8px; text-align: left; vertical-align: top; }
table.summary th { background: var(--panel); font-weight: 600; }
table.summary td.num { text-align: right; font-variant-numeric: tabular-nums; }
table.summary td:not(:last-child), table.summary th { white-space: nowrap; }
tr.fail td { background: #ffebe9; } tr.fail td.failures { color: var(--fail); font-weight: 700; }
tr.na td { color: var(--muted); }
body.hide-na tr.na { display: none; }
.skipped { margin: 6px 0; padding-left: 18px; } .skipped li { color: var(--warn); }
.charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(560px, 1fr)); gap: 10px 16px; }
.legend { display: flex; flex-wrap: wrap; gap: 2px 12px; margin-top: 2px; font-size: 12.5px; }
.legend span::before { content: ""; display: inline-block; width: 10px; height: 10px; margin-right: 4px; background: var(--c); vertical-align: -1px; }
.chart { border: 1px solid var(--line); border-radius: 6px; padding: 8px 10px; background: #fff; }
.chart p { margin: 2px 0 0; color: var(--muted); font-size: 12.5px; }
.shapes { display: grid; grid-template-columns: repeat(auto-fill, minmax(300px, 1fr)); gap: 10px 16px; }
.failure { border: 1px solid #ffcecb; border-left: 5px solid var(--fail); border-radius: 6px; padding: 10px 14px; margin: 8px 0; background: #fffafa; }
.failure h4 { color: var(--fail); font-size: 14px; }
.failure pre { background: var(--panel); border: 1px solid var(--line); border-radius: 4px; padding: 6px 8px; margin: 6px 0; overflow-x: auto; white-space: pre-wrap; word-break: break-all; }
table.bits { border-collapse: collapse; margin: 6px 0; }
table.bits th, table.bits td { border: 1px solid var(--line); padding: 2px 8px; text-align: left; }
table.bits th { background: var(--panel); }
.muted { color: var(--muted); } .ok { color: var(--pass); font-weight: 600; }
footer { margin-top: 28px; padding-top: 10px; border-top: 2px solid var(--line); font-size: 15px; }
svg text { font-family: system-ui, "DejaVu Sans", Arial, sans-serif; }
"#;

/// Runs first: any later script error (a syntax error included) is
/// recorded on `<html>`, where the browser check finds it.
fn error_script() -> String {
    format!(
        "window.onerror = function (msg, src, line) {{\n  \
         document.documentElement.setAttribute('{ERROR_ATTR}', String(msg) + ' (line ' + line + ')');\n}};"
    )
}

/// Runs last: the n/a toggle (shown only when scripts run), then the mark
/// that the page's script ran to its end. (`scripts/html-check --self-test`
/// edits its `box.parentNode.hidden = false;` line to make it throw.)
fn ready_script() -> String {
    format!(
        "(function () {{\n  \
         var box = document.getElementById('hide-na');\n  \
         box.parentNode.hidden = false;\n  \
         box.addEventListener('change', function () {{ document.body.classList.toggle('hide-na', box.checked); }});\n  \
         document.documentElement.setAttribute('{READY_ATTR}', 'yes');\n}})();"
    )
}

/// The whole page.
pub fn to_html(run: &RunReport, title: &str) -> String {
    let mut h = String::new();
    let v = run.verdict();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<script>\n{}\n</script>\n<style>{CSS}</style>\n</head>\n<body>\n<main>\n",
        esc(title),
        error_script()
    );
    let (class, word) = match v {
        Verdict::Passed => ("v-passed", "passed"),
        Verdict::Failed => ("v-failed", "FAILED"),
        Verdict::NothingJudged => ("v-nothing", "NOTHING JUDGED"),
        Verdict::Interrupted => ("v-interrupted", "INTERRUPTED"),
    };
    let _ = writeln!(
        h,
        "<header><h1>{}</h1><span class=\"verdict {class}\">{word}</span><span class=\"muted\">exit code {}</span></header>",
        esc(title),
        v.exit_code()
    );
    let links: String = std::iter::once("<a href=\"#plan\">plan</a>".to_string())
        .chain(run.ops.iter().map(|s| format!("<a href=\"#op-{}\">{}</a>", anchor(&s.op), esc(&s.op))))
        .chain(std::iter::once("<a href=\"#verdict\">verdict</a>".to_string()))
        .collect();
    let _ =
        writeln!(h, "<nav>{links}<label hidden><input type=\"checkbox\" id=\"hide-na\"> hide n/a rows</label></nav>");
    plan(&mut h, run);
    for s in &run.ops {
        op_section(&mut h, s);
    }
    let why = match v {
        Verdict::NothingJudged if !run.unavailable.is_empty() => " (a subject you named could not run)",
        Verdict::NothingJudged => " (no case was judged)",
        Verdict::Interrupted => " (interrupted: the report covers the cases run so far)",
        _ => "",
    };
    let judged: u64 = run.ops.iter().map(OpSummary::judged).sum();
    let failures: u64 = run.ops.iter().flat_map(|s| s.rows.values()).map(|r| r.failures).sum();
    let _ = writeln!(
        h,
        "<footer id=\"verdict\"><span class=\"verdict {class}\">{word}</span> {judged} cases judged over every \
         row, {failures} failed{}; exit code {}</footer>",
        esc(why),
        v.exit_code()
    );
    let _ = write!(h, "</main>\n<script>\n{}\n</script>\n</body>\n</html>\n", ready_script());
    h
}

fn plan(h: &mut String, run: &RunReport) {
    let p = &run.plan;
    let mut rows: Vec<(&str, String)> = vec![("seed", run.seed.to_string())];
    rows.push((
        "cases",
        match (p.cases, p.seconds_per_op) {
            (Some(c), Some(s)) => format!("{c} per op, or {s:.1} s per op, whichever ends first"),
            (Some(c), None) => format!("{c} per op"),
            (None, Some(s)) => format!("{s:.1} s per op"),
            (None, None) => "-".into(),
        },
    ));
    if p.first_case != 0 {
        rows.push(("first case", p.first_case.to_string()));
    }
    rows.push(("shard", p.shard.map_or("whole run".into(), |s| s.to_string())));
    let props: Vec<String> = p.properties.iter().map(|x| x.to_string()).collect();
    rows.push(("properties", props.join(", ")));
    rows.push((
        "subjects",
        if p.subjects.is_empty() { "every available correct subject".into() } else { p.subjects.join(", ") },
    ));
    rows.push(("generator", format!("max T x E {}, max T {}, max E {}", run.gen.max_te, run.gen.max_t, run.gen.max_e)));
    let knobs: Vec<String> = run.knobs.iter().map(|(k, v)| format!("{k}={v}")).collect();
    rows.push(("knobs", if knobs.is_empty() { "none set".into() } else { knobs.join(", ") }));
    let _ = writeln!(h, "<section id=\"plan\">\n<h2>Plan</h2>\n<dl class=\"plan\">");
    for (k, v) in rows {
        let _ = writeln!(h, "<dt>{}</dt><dd>{}</dd>", esc(k), esc(&v));
    }
    let _ = writeln!(h, "</dl>");
    if !run.unavailable.is_empty() {
        let _ = writeln!(h, "<h3>Not run (named, unavailable here)</h3>\n<ul class=\"skipped\">");
        for u in &run.unavailable {
            let _ = writeln!(h, "<li><b>{}</b>: {}</li>", esc(&u.suite), esc(&u.reason));
        }
        let _ = writeln!(h, "</ul>");
    }
    let _ = writeln!(h, "</section>");
}

fn op_section(h: &mut String, s: &OpSummary) {
    let id = anchor(&s.op);
    let _ = writeln!(
        h,
        "<section id=\"op-{id}\" class=\"op\">\n<h2>{} <small>{} cases in {:.1} s</small></h2>",
        esc(&s.op),
        s.cases,
        s.seconds
    );
    let _ = writeln!(h, "<h3 id=\"summary-{id}\">Summary</h3>");
    summary_table(h, s);
    if !s.skipped.is_empty() {
        let _ = writeln!(h, "<h3 id=\"skipped-{id}\">Skipped suites</h3>\n<ul class=\"skipped\">");
        for sk in &s.skipped {
            let _ = writeln!(h, "<li><b>SKIPPED {}</b>: {}</li>", esc(&sk.suite), esc(&sk.reason));
        }
        let _ = writeln!(h, "</ul>");
    }
    let _ = writeln!(h, "<h3 id=\"failures-{id}\">Failures</h3>");
    if s.failures.is_empty() {
        let _ = writeln!(h, "<p class=\"ok\">none</p>");
    }
    for f in &s.failures {
        failure(h, f);
    }
    let _ = writeln!(
        h,
        "<h3 id=\"errors-{id}\">Error / bound</h3>\n<p class=\"muted\">Every judged output's |computed &minus; exact| / \
         rigorous bound, bins by powers of two (bin 2<sup>e</sup>: ratios in (2<sup>e&minus;1</sup>, 2<sup>e</sup>]), \
         counts on a log scale. Right of the dashed line: outside the bound (a failure).</p>"
    );
    let charts: Vec<(&RowKey, &RowStats, &RatioHistogram)> =
        s.rows.iter().filter_map(|(k, r)| r.histogram.as_ref().map(|hist| (k, r, hist))).collect();
    if charts.is_empty() {
        let _ =
            writeln!(h, "<p class=\"muted\">No row of this run is judged against a bound (accuracy, gradient).</p>");
    } else {
        let _ = writeln!(h, "<div class=\"charts\">");
        for (k, r, hist) in charts {
            ratio_chart(h, k, r, hist);
        }
        let _ = writeln!(h, "</div>");
    }
    let _ = writeln!(
        h,
        "<h3 id=\"classes-{id}\">Adversarial classes <small class=\"muted\">(cases that exercised each)</small></h3>"
    );
    let mut classes = s.classes.clone();
    classes.push(("decision-near-tie".into(), s.near_tie_cases));
    h.push_str(&class_chart(&classes, s.cases));
    let _ = writeln!(h, "<h3 id=\"shapes-{id}\">Shapes <small class=\"muted\">(cases per size; each bar from its label up to the next power of two)</small></h3>");
    if s.shapes.is_empty() {
        let _ = writeln!(h, "<p class=\"muted\">No case was generated.</p>");
    } else {
        let _ = writeln!(h, "<div class=\"shapes\">");
        for d in &s.shapes {
            h.push_str(&shape_chart(&s.op, d));
        }
        let _ = writeln!(h, "</div>");
    }
    let _ = writeln!(h, "</section>");
}

fn summary_table(h: &mut String, s: &OpSummary) {
    let _ = writeln!(
        h,
        "<table class=\"summary\">\n<thead><tr><th>property</th><th>profile</th><th>padding</th><th>subject</th>\
         <th class=\"num\">cases</th><th class=\"num\">failures</th><th class=\"num\">err/bound</th><th>notes</th></tr></thead>\n<tbody>"
    );
    for (k, r) in &s.rows {
        let (class, cases, failures, m, note) = match &r.not_applicable {
            Some(why) => ("na", "-".to_string(), "-".to_string(), "-".to_string(), format!("n/a: {why}")),
            None => (
                if r.failures > 0 { "fail" } else { "" },
                r.cases.to_string(),
                r.failures.to_string(),
                measure(k, r),
                notes(r),
            ),
        };
        let _ = writeln!(
            h,
            "<tr class=\"{class}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td>\
             <td class=\"num failures\">{}</td><td class=\"num\">{}</td><td>{}</td></tr>",
            esc(k.property.name()),
            esc(&k.profile),
            esc(&r.padding),
            esc(&k.subject),
            esc(&cases),
            esc(&failures),
            esc(&m),
            esc(&note)
        );
    }
    let _ = writeln!(h, "</tbody>\n</table>");
}

/// An f32's bits as the terminal shows them, with its value in hex-float
/// and in decimal.
fn value_cells(bits: u32) -> String {
    let x = f32::from_bits(bits);
    format!(
        "<td class=\"mono\">{bits:#010x}</td><td class=\"mono\">{} ({})</td>",
        esc(&hexf::format(x)),
        esc(&format!("{x:e}"))
    )
}

fn failure(h: &mut String, f: &FailureRecord) {
    let at = f.case_index.map(|i| format!("case {i} ")).unwrap_or_default();
    let _ = writeln!(
        h,
        "<div class=\"failure\">\n<h4>FAILED {} / {} / {} ({})</h4>\n<div>{}({}), shrunk to <b>{}</b></div>",
        esc(&f.op),
        esc(f.property.name()),
        esc(&f.subject),
        esc(&f.profile),
        esc(&at),
        esc(&f.original_shape),
        esc(&f.shrunk_shape)
    );
    let _ = writeln!(h, "<pre>{}</pre>", esc(&f.message));
    if let Some(d) = bit_diff(&f.message) {
        bits_table(h, &d);
    }
    let _ = writeln!(h, "<div class=\"muted\">shrunk case</div>\n<pre>{}</pre>", esc(f.shrunk_case.trim_end()));
    let saved = match &f.save {
        SaveNote::Saved { path } => format!("saved to {} (new corpus entry: commit it)", path.display()),
        SaveNote::Repaired { path } => {
            format!("saved to {} (replacing an unreadable file of that name)", path.display())
        }
        SaveNote::Known { path } => format!("already in the corpus: {}", path.display()),
        SaveNote::NotSaved { reason } => format!("not saved: {reason}"),
    };
    let _ = writeln!(h, "<div class=\"muted\">{}</div>", esc(&saved));
    if !f.reproduce.is_empty() {
        let cmds: Vec<String> = f.reproduce.iter().map(|r| format!("$ {}", esc(r))).collect();
        let _ = writeln!(h, "<div class=\"muted\">reproduce</div>\n<pre>{}</pre>", cmds.join("\n"));
    }
    let _ = writeln!(h, "</div>");
}

fn bits_table(h: &mut String, d: &BitDiff) {
    let ulps = match d.ulps() {
        Some(0) => "0 (the sign of zero)".to_string(),
        Some(n) => n.to_string(),
        None => "- (NaN)".to_string(),
    };
    let _ = writeln!(
        h,
        "<table class=\"bits\"><tr><th>output</th><th></th><th>bits</th><th>value</th><th>ULP distance</th></tr>\n\
         <tr><td rowspan=\"2\" class=\"mono\">{}</td><th>expected</th>{}<td rowspan=\"2\">{}</td></tr>\n\
         <tr><th>got</th>{}</tr></table>",
        esc(&d.output),
        value_cells(d.expected),
        esc(&ulps),
        value_cells(d.got)
    );
}

/// `2<sup>e</sup>` as SVG text.
fn pow2_svg(e: i32) -> String {
    format!("2<tspan dy=\"-5\" font-size=\"8\">{e}</tspan>")
}

/// One row's ratio histogram: exact zeros, the power-of-two bins (the ones
/// around what occurred, always up to the bound), then the outputs kept
/// apart (undetermined, unbounded) and the row's near-tie rows.
fn ratio_chart(h: &mut String, k: &RowKey, r: &RowStats, hist: &RatioHistogram) {
    let nonzero: Vec<(i32, u64)> = hist.nonzero_bins().collect();
    let hi = nonzero.last().map_or(1, |&(e, _)| e.max(1));
    let lo_seen = nonzero.first().map_or(-8, |&(e, _)| e);
    let lo = lo_seen.min(hi - 9).max(MIN_EXP);
    let hi = hi.min(MAX_EXP);
    // Slots: zero, gap, bins, gap, undetermined, unbounded, near-tie rows.
    let bins = (hi - lo + 1) as usize;
    let slots = bins as f64 + 4.0 + 2.0;
    let (w, plot_h, left, top) = (540.0, 120.0, 40.0, 14.0);
    let slot = w / slots;
    let bar = (slot * 0.8).max(1.0);
    let special = [
        ("undetermined", hist.undetermined, "#9a6700", "outputs whose exact rounding stayed undetermined"),
        ("unbounded", hist.unbounded, "#6e7781", "outputs with no finite bound (not judged)"),
        ("near-tie", r.near_ties, "#8250df", "decision rows near a tie (rows, not outputs)"),
    ];
    let max = [hist.zero]
        .into_iter()
        .chain(hist.bins.iter().copied())
        .chain(special.iter().map(|s| s.1))
        .max()
        .unwrap_or(0)
        .max(1);
    let height = |n: u64| if n == 0 { 0.0 } else { (plot_h * ((n as f64).ln_1p() / (max as f64).ln_1p())).max(1.5) };
    let base = top + plot_h;
    let mut svg = String::new();
    let _ = write!(
        svg,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"100%\" viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"{}\">",
        left + w + 6.0,
        base + 18.0,
        esc(&format!("error over bound, {} {}", k.property, k.subject))
    );
    let _ = write!(svg, "<line x1=\"{left}\" y1=\"{base}\" x2=\"{}\" y2=\"{base}\" stroke=\"#8c959f\"/>", left + w);
    let _ = write!(
        svg,
        "<text x=\"{}\" y=\"{}\" font-size=\"9\" text-anchor=\"end\" fill=\"#59636e\">{max}</text>\
         <text x=\"{}\" y=\"{base}\" font-size=\"9\" text-anchor=\"end\" fill=\"#59636e\">0</text>",
        left - 3.0,
        top + 7.0,
        left - 3.0
    );
    let put = |svg: &mut String, x: f64, n: u64, fill: &str, tip: String| {
        let bh = height(n);
        let _ = write!(
            svg,
            "<rect x=\"{x:.2}\" y=\"{:.2}\" width=\"{bar:.2}\" height=\"{bh:.2}\" fill=\"{fill}\"><title>{}</title></rect>",
            base - bh,
            esc(&tip)
        );
    };
    let x_of = |slot_index: f64| left + slot_index * slot + (slot - bar) / 2.0;
    put(&mut svg, x_of(0.0), hist.zero, "#1a7f37", format!("error exactly 0: {} outputs", hist.zero));
    let _ = write!(
        svg,
        "<text x=\"{:.2}\" y=\"{}\" font-size=\"9\" text-anchor=\"middle\">0</text>",
        x_of(0.0) + bar / 2.0,
        base + 13.0
    );
    // Labels at the multiples of a step, so that 2^0 (the bound) has one.
    let step = (bins as f64 / 10.0).ceil().max(1.0) as i32;
    for (i, e) in (lo..=hi).enumerate() {
        let n = hist.bins[(e - MIN_EXP) as usize];
        let x = x_of(2.0 + i as f64);
        let range = match e {
            MIN_EXP => format!("ratio at most 2^{e}"),
            MAX_EXP => format!("ratio above 2^{}", e - 1),
            _ => format!("ratio in (2^{}, 2^{e}]", e - 1),
        };
        put(&mut svg, x, n, if e > 0 { "#cf222e" } else { "#0969da" }, format!("{range}: {n} outputs"));
        if e % step == 0 {
            let _ = write!(
                svg,
                "<text x=\"{:.2}\" y=\"{}\" font-size=\"9\" text-anchor=\"middle\">{}</text>",
                x + bar / 2.0,
                base + 13.0,
                pow2_svg(e)
            );
        }
    }
    // The bound: between the bins of e = 0 and e = 1.
    if (lo..hi).contains(&0) {
        let x = left + (2.0 + (0 - lo + 1) as f64) * slot;
        let _ = write!(
            svg,
            "<line x1=\"{x:.2}\" y1=\"{}\" x2=\"{x:.2}\" y2=\"{base}\" stroke=\"#cf222e\" stroke-dasharray=\"3,2\"/>\
             <text x=\"{:.2}\" y=\"{}\" font-size=\"9\" fill=\"#cf222e\">bound</text>",
            top - 6.0,
            x + 2.0,
            top + 1.0
        );
    }
    // The bars kept apart: named by the legend below the chart.
    for (j, (_, n, fill, what)) in special.iter().enumerate() {
        put(&mut svg, x_of(bins as f64 + 3.0 + j as f64), *n, fill, format!("{what}: {n}"));
    }
    svg.push_str("</svg>");
    let within: u64 = hist.nonzero_bins().filter(|&(e, _)| e <= 0).map(|(_, n)| n).sum();
    let outside: u64 = hist.nonzero_bins().filter(|&(e, _)| e > 0).map(|(_, n)| n).sum();
    let worst = r.worst_error_over_bound.map_or("-".to_string(), ratio_text);
    let legend: String = [
        ("#1a7f37", format!("{} exact", hist.zero)),
        ("#0969da", format!("{within} within the bound (worst {worst})")),
        ("#cf222e", format!("{outside} outside")),
        (special[0].2, format!("{} undetermined", hist.undetermined)),
        (special[1].2, format!("{} unbounded", hist.unbounded)),
        (special[2].2, format!("{} near-tie rows", r.near_ties)),
    ]
    .iter()
    .map(|(c, t)| format!("<span style=\"--c:{c}\">{}</span>", esc(t)))
    .collect();
    let _ = writeln!(
        h,
        "<div class=\"chart\" data-outputs=\"{}\"><h4>{} &middot; {} &middot; {} \
         <span class=\"muted\">({} outputs of {} cases)</span></h4>{svg}<div class=\"legend\">{legend}</div></div>",
        hist.total(),
        esc(k.property.name()),
        esc(&k.profile),
        esc(&k.subject),
        hist.total(),
        r.cases,
    );
}

/// How many cases exercised each class: horizontal bars in two columns,
/// scaled to the op's case count; a class no case exercised is shown red.
fn class_chart(classes: &[(String, u64)], cases: u64) -> String {
    let per_col = classes.len().div_ceil(2).max(1);
    let (col_w, label_w, row_h) = (640.0, 190.0, 17.0);
    let bar_w = col_w - label_w - 70.0;
    let height = per_col as f64 * row_h + 4.0;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"100%\" viewBox=\"0 0 {} {height}\" role=\"img\" aria-label=\"class coverage\">",
        col_w * 2.0
    );
    for (i, (name, n)) in classes.iter().enumerate() {
        let (col, row) = (i / per_col, i % per_col);
        let (x0, y) = (col as f64 * col_w, row as f64 * row_h + 2.0);
        let frac = if cases == 0 { 0.0 } else { (*n as f64 / cases as f64).min(1.0) };
        let _ = write!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"end\">{}</text>\
             <rect x=\"{:.1}\" y=\"{y:.1}\" width=\"{bar_w:.1}\" height=\"{:.1}\" fill=\"#eef1f4\"/>\
             <rect x=\"{:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"#0969da\"><title>{}: {n} of {cases} cases</title></rect>\
             <text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\"{}>{n}</text>",
            x0 + label_w - 6.0,
            y + 11.5,
            esc(name),
            x0 + label_w,
            row_h - 4.0,
            x0 + label_w,
            bar_w * frac,
            row_h - 4.0,
            esc(name),
            x0 + label_w + bar_w + 6.0,
            y + 11.5,
            if *n == 0 { " fill=\"#cf222e\" font-weight=\"bold\"" } else { "" }
        );
    }
    svg.push_str("</svg>\n");
    svg
}

/// A size compactly: 512, 1k, 64k, 1M.
fn size_text(v: u128) -> String {
    match v {
        v if v >= 1 << 30 && v % (1 << 30) == 0 => format!("{}G", v >> 30),
        v if v >= 1 << 20 && v % (1 << 20) == 0 => format!("{}M", v >> 20),
        v if v >= 1 << 10 && v % (1 << 10) == 0 => format!("{}k", v >> 10),
        v => v.to_string(),
    }
}

/// One dimension's sizes: a bar per power-of-two range, from the smallest
/// size seen to the largest.
fn shape_chart(op: &str, d: &DimCounts) -> String {
    let seen: Vec<usize> = (0..d.bins.len()).filter(|&b| d.bins[b] > 0).collect();
    let (Some(&lo), Some(&hi)) = (seen.first(), seen.last()) else {
        return String::new();
    };
    let bins = hi - lo + 1;
    let (w, plot_h, left, top) = (280.0, 80.0, 30.0, 8.0);
    let slot = w / bins as f64;
    let bar = (slot * 0.8).max(1.0);
    let max = d.bins.iter().copied().max().unwrap_or(0).max(1);
    let base = top + plot_h;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"100%\" viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"{}\">\
         <line x1=\"{left}\" y1=\"{base}\" x2=\"{}\" y2=\"{base}\" stroke=\"#8c959f\"/>\
         <text x=\"{}\" y=\"{}\" font-size=\"9\" text-anchor=\"end\" fill=\"#59636e\">{max}</text>",
        left + w + 4.0,
        base + 26.0,
        esc(&format!("{op} {} sizes", d.dim)),
        left + w,
        left - 3.0,
        top + 7.0
    );
    let step = bins.div_ceil(9).max(1);
    for (i, b) in (lo..=hi).enumerate() {
        let n = d.bins[b];
        let (a, z) = DimCounts::range(b);
        let x = left + i as f64 * slot + (slot - bar) / 2.0;
        let bh = if n == 0 { 0.0 } else { (plot_h * n as f64 / max as f64).max(1.5) };
        let range = if a == z { a.to_string() } else { format!("{a}..{z}") };
        let _ = write!(
            svg,
            "<rect x=\"{x:.2}\" y=\"{:.2}\" width=\"{bar:.2}\" height=\"{bh:.2}\" fill=\"#8250df\"><title>{}</title></rect>",
            base - bh,
            esc(&format!("{} = {range}: {n} cases", d.dim))
        );
        if i % step == 0 {
            let _ = write!(
                svg,
                "<text x=\"{:.2}\" y=\"{}\" font-size=\"9\" text-anchor=\"middle\">{}</text>",
                x + bar / 2.0,
                base + 12.0,
                esc(&size_text(a))
            );
        }
    }
    svg.push_str("</svg>");
    format!("<div class=\"chart\" data-cases=\"{}\"><h4>{}</h4>{svg}</div>\n", d.cases(), esc(&d.dim))
}

/// The page's title for a command: `bitparity check, <date>`.
pub fn title(command: &str) -> String {
    format!("{command}, {}", corpus::today())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::GenConfig;
    use crate::props::Property;
    use crate::report::RunPlan;
    use crate::runner::count_dims;
    use crate::subject::Skip;
    use std::collections::BTreeMap;

    /// A run by hand: one op whose names hold HTML, a failure with bits, a
    /// histogram and shapes with known counts.
    fn run() -> RunReport {
        let mut hist = RatioHistogram::default();
        for r in [0.0, 0.0, 0.25, 0.3, 1.0, 3.0] {
            hist.add_ratio(r);
        }
        hist.undetermined = 1;
        hist.unbounded = 2;
        let mut rows = BTreeMap::new();
        let key = |p: Property| RowKey {
            op: "op<x>".into(),
            property: p,
            profile: "p&q".into(),
            subject: "bug:<script>alert(1)</script>".into(),
        };
        rows.insert(
            key(Property::Accuracy),
            RowStats {
                cases: 3,
                failures: 1,
                worst_error_over_bound: Some(3.0),
                near_ties: 4,
                histogram: Some(hist),
                ..Default::default()
            },
        );
        rows.insert(
            key(Property::Determinism),
            RowStats { not_applicable: Some("a pure <CPU> function".into()), ..Default::default() },
        );
        let mut shapes = Vec::new();
        for t in [1, 2, 3, 64, 65, 1024] {
            count_dims(&mut shapes, &[("T", t), ("E", 8)]);
        }
        let failure = FailureRecord {
            op: "op<x>".into(),
            property: Property::Conformance,
            subject: "bug:<script>alert(1)</script>".into(),
            profile: "p&q".into(),
            message: "backward grad[0][1]: expected 0x3f800000 (0x1p0), got 0x3f800002 (0x1.000004p0)".into(),
            case_index: Some(7),
            original_shape: "T=3 E=8".into(),
            shrunk_shape: "T=1 E=2".into(),
            shrunk_case: "row 0: [<1>, 2]".into(),
            save: SaveNote::NotSaved { reason: "saving is off".into() },
            reproduce: vec!["bitparity check --op 'op<x>' --seed 1 --case 7".into()],
        };
        RunReport {
            seed: 42,
            plan: RunPlan {
                cases: Some(6),
                seconds_per_op: None,
                first_case: 0,
                properties: vec![Property::Accuracy, Property::Determinism],
                subjects: vec!["bug:<script>alert(1)</script>".into()],
                shard: None,
            },
            ops: vec![OpSummary {
                op: "op<x>".into(),
                cases: 6,
                seconds: 0.5,
                rows,
                classes: vec![("tiny-t".into(), 3), ("never<hit>".into(), 0)],
                shapes,
                near_tie_cases: 1,
                skipped: vec![Skip { suite: "op<x> / cuda".into(), reason: "no GPU <here>".into() }],
                failures: vec![failure],
            }],
            gen: GenConfig::default(),
            knobs: vec![("BITPARITY_MAX_T".into(), "<9>".into())],
            unavailable: vec![],
            interrupted: false,
        }
    }

    #[test]
    fn the_page_has_every_section_and_marker() {
        let page = to_html(&run(), "bitparity <check>");
        for id in [
            "plan",
            "op-op-x-",
            "summary-op-x-",
            "failures-op-x-",
            "errors-op-x-",
            "classes-op-x-",
            "shapes-op-x-",
            "skipped-op-x-",
            "verdict",
        ] {
            assert!(page.contains(&format!("id=\"{id}\"")), "section {id} missing");
        }
        assert!(page.contains(ERROR_ATTR) && page.contains(READY_ATTR), "the browser check's markers");
        assert!(page.contains("<svg") && page.contains("FAILED"));
        // The bits, their values and the ULP distance of the failure.
        for s in ["0x3f800000", "0x3f800002", "0x1.000004p0", "<td rowspan=\"2\">2</td>", "backward grad[0][1]"] {
            assert!(page.contains(s), "{s} missing");
        }
        assert!(page.contains("$ bitparity check --op &#39;op&lt;x&gt;&#39; --seed 1 --case 7"));
        // Self-contained: nothing fetched at view time.
        for s in ["http://", "https://", "src=", "@import", "url("] {
            let outside_svg_ns = page.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
            assert!(!outside_svg_ns.contains(s), "{s} in a self-contained page");
        }
    }

    #[test]
    fn names_and_values_are_escaped() {
        let page = to_html(&run(), "bitparity <check>");
        assert!(!page.contains("<script>alert(1)"), "a subject name became a tag");
        assert!(page.contains("bug:&lt;script&gt;alert(1)&lt;/script&gt;"));
        for s in ["<x>", "<CPU>", "<here>", "<1>", "<9>", "<hit>", "<check>", "p&q"] {
            assert!(!page.contains(s), "{s} unescaped");
        }
        // The only tags are the page's own: two scripts, both ours.
        assert_eq!(page.matches("<script>").count(), 2);
        assert_eq!(esc("<a href='x'>&\"</a>"), "&lt;a href=&#39;x&#39;&gt;&amp;&quot;&lt;/a&gt;");
    }

    #[test]
    fn the_ratio_histogram_adds_up_to_the_outputs_judged() {
        let page = to_html(&run(), "t");
        // 2 exact, 3 within (0.25, 0.3, 1.0), 1 outside (3.0), 1 undetermined, 2 unbounded.
        assert!(page.contains("data-outputs=\"9\""), "every output in one bar");
        assert!(page.contains("(9 outputs of 3 cases)"));
        for s in [
            "2 exact",
            "3 within the bound (worst 3.000)",
            "1 outside",
            "1 undetermined",
            "2 unbounded",
            "4 near-tie rows",
        ] {
            assert!(page.contains(&format!("\">{s}</span>")), "{s} missing from the legend");
        }
        // One bar per bin shown: its tooltip states its count.
        assert!(page.contains("ratio in (2^-3, 2^-2]: 1 outputs"));
        assert!(page.contains("ratio in (2^-2, 2^-1]: 1 outputs"));
        assert!(page.contains("ratio in (2^1, 2^2]: 1 outputs"));
        assert!(page.contains("error exactly 0: 2 outputs"));
    }

    #[test]
    fn shapes_and_classes_are_counted() {
        let page = to_html(&run(), "t");
        assert!(page.contains("data-cases=\"6\""));
        assert!(page.contains("T = 64..127: 2 cases"));
        assert!(page.contains("T = 2..3: 2 cases"));
        assert!(page.contains("E = 8..15: 6 cases"));
        assert!(page.contains("never&lt;hit&gt;: 0 of 6 cases"));
        assert!(page.contains("decision-near-tie: 1 of 6 cases"));
    }
}
