//! The worked examples of `docs/ops/*.md` against the profile oracle, bit for
//! bit: a page that states a wrong output, or an oracle that drifts from its
//! page, fails here.
//!
//! Every block that opens with ```` ```json example ```` is one example:
//!
//! ```text
//! { "op": "<the page's op>",
//!   "case": <the case, exactly as a corpus entry's "case" field encodes it>,
//!   "profiles": { "<profile>": { "forward": {<output>: <value>, ...},
//!                                "backward": {<output>: <value>, ...},
//!                                "trace": {...} }, ... } }
//! ```
//!
//! Outputs are named as the op's output structs name their fields; reals
//! are exact hex floats (any NaN matches any NaN, the sign of zero counts),
//! integers are numbers, flags are booleans. Every output of the op must be
//! stated. `trace` (intermediate values) is for readers and for the
//! independent recomputation, `docs/ops/examples/recompute.py`, which this
//! file also runs: the pages' numbers come from that script, written from
//! the pages' formulas and sharing no code with the oracle.

use oracles::case::hexf;
use oracles::op::moe_combine::MoeCombine;
use oracles::op::router::Router;
use oracles::op::seqwise_loss::SeqwiseLoss;
use oracles::op::shared_expert::SharedExpert;
use oracles::op::{self, Op, Profile};
use oracles::same_bits;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use std::process::Command;

/// One output of an op, as the oracle computed it.
enum Out {
    Real(f32),
    Reals(Vec<f32>),
    /// Counts, ids and slots (-1 for a dropped choice).
    Ints(Vec<i64>),
    Flags(Vec<bool>),
}

type Outputs = Vec<(&'static str, Out)>;

/// What an op's examples need: its outputs by name.
trait Documented: Op {
    fn forward_outputs(f: &Self::Fwd<f32>) -> Outputs;
    fn backward_outputs(b: &Self::Bwd<f32>) -> Outputs;
}

impl Documented for SeqwiseLoss {
    fn forward_outputs(f: &Self::Fwd<f32>) -> Outputs {
        vec![("counts", ints(&f.counts)), ("freq", Out::Reals(f.freq.clone())), ("raw", Out::Real(f.raw))]
    }
    fn backward_outputs(b: &Self::Bwd<f32>) -> Outputs {
        vec![("grad", Out::Reals(b.grad.clone()))]
    }
}

impl Documented for Router {
    fn forward_outputs(f: &Self::Fwd<f32>) -> Outputs {
        vec![
            ("ids", ints(&f.ids)),
            ("weights", Out::Reals(f.weights.clone())),
            ("map", Out::Flags(f.map.clone())),
            ("counts", ints(&f.counts)),
            ("scores", Out::Reals(f.scores.clone())),
        ]
    }
    fn backward_outputs(b: &Self::Bwd<f32>) -> Outputs {
        vec![("grad", Out::Reals(b.grad.clone()))]
    }
}

impl Documented for SharedExpert {
    fn forward_outputs(f: &Self::Fwd<f32>) -> Outputs {
        vec![("y", Out::Reals(f.y.clone()))]
    }
    fn backward_outputs(b: &Self::Bwd<f32>) -> Outputs {
        vec![("dx", Out::Reals(b.dx.clone()))]
    }
}

impl Documented for MoeCombine {
    fn forward_outputs(f: &Self::Fwd<f32>) -> Outputs {
        vec![
            ("slot", Out::Ints(f.slot.iter().map(|&s| s as i64).collect())),
            ("counts", ints(&f.counts)),
            ("x_disp", Out::Reals(f.x_disp.clone())),
            ("y", Out::Reals(f.y.clone())),
        ]
    }
    fn backward_outputs(b: &Self::Bwd<f32>) -> Outputs {
        vec![
            ("dx_exp", Out::Reals(b.dx_exp.clone())),
            ("dw", Out::Reals(b.dw.clone())),
            ("dx", Out::Reals(b.dx.clone())),
        ]
    }
}

fn ints(v: &[u32]) -> Out {
    Out::Ints(v.iter().map(|&x| x as i64).collect())
}

fn pages_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/ops")
}

/// The op pages (every `.md` of docs/ops but the index), by name.
fn pages() -> Vec<(String, String)> {
    let mut pages: Vec<(String, String)> = std::fs::read_dir(pages_dir())
        .expect("docs/ops")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "md") && p.file_name().is_some_and(|n| n != "README.md"))
        .map(|p| {
            let name = p.file_stem().and_then(|s| s.to_str()).expect("a UTF-8 name").to_string();
            (name, std::fs::read_to_string(&p).expect("a readable page"))
        })
        .collect();
    pages.sort();
    pages
}

/// The text of every ```` ```json example ```` block of a page, with the
/// line it starts on.
fn example_blocks(page: &str) -> Vec<(usize, String)> {
    let mut blocks = Vec::new();
    let mut open: Option<(usize, String)> = None;
    for (i, line) in page.lines().enumerate() {
        match &mut open {
            None if line == "```json example" => open = Some((i + 1, String::new())),
            None => {}
            Some(_) if line == "```" => blocks.extend(open.take()),
            Some((_, text)) => {
                text.push_str(line);
                text.push('\n');
            }
        }
    }
    assert!(open.is_none(), "an example block that is never closed");
    blocks
}

fn object<'a>(v: &'a Value, what: &str) -> Result<&'a Map<String, Value>, String> {
    v.as_object().ok_or_else(|| format!("{what} is not an object"))
}

/// The keys of `m`, which must be among `allowed` (a typo must not hide an
/// output from the comparison).
fn only_keys(m: &Map<String, Value>, allowed: &[&str], what: &str) -> Result<(), String> {
    match m.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(format!("{what}: unknown key {k:?} (known: {allowed:?})")),
        None => Ok(()),
    }
}

fn real(v: &Value, what: &str) -> Result<f32, String> {
    let s = v.as_str().ok_or_else(|| format!("{what}: a real must be a hex-float string, not {v}"))?;
    hexf::parse(s).map_err(|e| format!("{what}: {e}"))
}

fn show(x: f32) -> String {
    format!("{} ({:#010x})", hexf::format(x), x.to_bits())
}

/// The page's values of one output against the oracle's, every difference
/// one line.
fn compare(name: &str, stated: &Value, got: &Out) -> Result<Vec<String>, String> {
    let list = |v: &Value| v.as_array().cloned().ok_or_else(|| format!("{name}: expected a list, not {v}"));
    let mut diffs = Vec::new();
    let mut length = |n: usize, m: usize| {
        if n != m {
            diffs.push(format!("{name}: the page states {n} values, the oracle gives {m}"));
        }
        n == m
    };
    match got {
        Out::Real(x) => {
            let s = real(stated, name)?;
            if !same_bits(s, *x) {
                diffs.push(format!("{name}: the page says {}, the oracle gives {}", show(s), show(*x)));
            }
        }
        Out::Reals(xs) => {
            let stated = list(stated)?;
            if length(stated.len(), xs.len()) {
                for (i, (v, &x)) in stated.iter().zip(xs).enumerate() {
                    let s = real(v, &format!("{name}[{i}]"))?;
                    if !same_bits(s, x) {
                        diffs.push(format!("{name}[{i}]: the page says {}, the oracle gives {}", show(s), show(x)));
                    }
                }
            }
        }
        Out::Ints(xs) => {
            let stated = list(stated)?;
            if length(stated.len(), xs.len()) {
                for (i, (v, &x)) in stated.iter().zip(xs).enumerate() {
                    if v.as_i64() != Some(x) {
                        diffs.push(format!("{name}[{i}]: the page says {v}, the oracle gives {x}"));
                    }
                }
            }
        }
        Out::Flags(xs) => {
            let stated = list(stated)?;
            if length(stated.len(), xs.len()) {
                for (i, (v, &x)) in stated.iter().zip(xs).enumerate() {
                    if v.as_bool() != Some(x) {
                        diffs.push(format!("{name}[{i}]: the page says {v}, the oracle gives {x}"));
                    }
                }
            }
        }
    }
    Ok(diffs)
}

/// One direction's stated outputs against the oracle's: the same names,
/// the same values.
fn compare_all(stated: &Value, got: &Outputs, what: &str) -> Result<Vec<String>, String> {
    let stated = object(stated, what)?;
    let names: Vec<&str> = got.iter().map(|(n, _)| *n).collect();
    only_keys(stated, &names, what)?;
    let mut diffs = Vec::new();
    for (name, out) in got {
        let v = stated.get(*name).ok_or_else(|| format!("{what}: the page does not state {name}"))?;
        diffs.extend(compare(name, v, out)?.into_iter().map(|d| format!("{what} {d}")));
    }
    Ok(diffs)
}

/// One example of op `O`: every profile it states, forward and backward;
/// the differences, one line each (an unreadable example is an `Err`).
fn check_example<O: Documented>(block: &Value) -> Result<Vec<String>, String> {
    let top = object(block, "the example")?;
    only_keys(top, &["op", "case", "profiles"], "the example")?;
    let case: O::Case =
        serde_json::from_value(top.get("case").cloned().ok_or("no case")?).map_err(|e| format!("the case: {e}"))?;
    O::validate(&case).map_err(|e| format!("the case is invalid: {e}"))?;
    let profiles = object(top.get("profiles").ok_or("no profiles")?, "profiles")?;
    if !profiles.contains_key("serial") {
        return Err("every example states the serial profile's outputs".into());
    }
    let mut diffs = Vec::new();
    for (name, stated) in profiles {
        let profile = O::profiles()
            .into_iter()
            .find(|p| p.name() == name)
            .ok_or_else(|| format!("{} has no shipped profile {name:?}", O::NAME))?;
        let stated = object(stated, name)?;
        only_keys(stated, &["forward", "backward", "trace"], name)?;
        let fwd = op::forward::<O>(&case, &profile).map_err(|e| format!("{name}: the oracle refused: {e}"))?;
        let bwd = op::backward::<O>(&case, &profile).map_err(|e| format!("{name}: the oracle refused: {e}"))?;
        for (dir, got) in [("forward", O::forward_outputs(&fwd)), ("backward", O::backward_outputs(&bwd))] {
            let v = stated.get(dir).ok_or_else(|| format!("{name}: no {dir}"))?;
            diffs.extend(compare_all(v, &got, &format!("{name} {dir}"))?);
        }
    }
    Ok(diffs)
}

fn check_block(op: &str, block: &Value) -> Result<Vec<String>, String> {
    match op {
        "seqwise_loss" => check_example::<SeqwiseLoss>(block),
        "router" => check_example::<Router>(block),
        "shared_expert" => check_example::<SharedExpert>(block),
        "moe_combine" => check_example::<MoeCombine>(block),
        _ => Err(format!("no op {op:?}")),
    }
}

/// Every example of every page: (page, line, parsed block).
fn examples() -> Vec<(String, usize, Value)> {
    let mut all = Vec::new();
    for (name, text) in pages() {
        for (line, block) in example_blocks(&text) {
            let v: Value =
                serde_json::from_str(&block).unwrap_or_else(|e| panic!("docs/ops/{name}.md:{line}: not JSON: {e}"));
            all.push((name.clone(), line, v));
        }
    }
    all
}

#[test]
fn every_worked_example_is_the_profile_oracles_output() {
    let mut failures = Vec::new();
    let mut per_page = std::collections::BTreeMap::new();
    for (page, line, block) in examples() {
        *per_page.entry(page.clone()).or_insert(0) += 1;
        let op = block.get("op").and_then(Value::as_str).unwrap_or_default();
        if op != page {
            failures.push(format!("docs/ops/{page}.md:{line}: an example of {op:?} on the page of {page}"));
            continue;
        }
        match check_block(op, &block) {
            Ok(diffs) => failures.extend(diffs.into_iter().map(|d| format!("docs/ops/{page}.md:{line}: {d}"))),
            Err(e) => failures.push(format!("docs/ops/{page}.md:{line}: {e}")),
        }
    }
    for op in [SeqwiseLoss::NAME, Router::NAME, SharedExpert::NAME, MoeCombine::NAME] {
        if !per_page.contains_key(op) {
            failures.push(format!("docs/ops/{op}.md has no worked example"));
        }
    }
    assert!(failures.is_empty(), "{} differences:\n{}", failures.len(), failures.join("\n"));
}

/// The comparison is not vacuous: one changed bit in any stated real, or
/// one changed count, id or flag, is reported.
#[test]
fn a_changed_value_in_an_example_is_caught() {
    fn first_leaf(v: &mut Value) -> Option<&mut Value> {
        match v {
            Value::Array(a) => a.iter_mut().find_map(first_leaf),
            Value::Object(o) => o.values_mut().find_map(first_leaf),
            leaf => Some(leaf),
        }
    }
    let mut checked = 0;
    for (page, line, block) in examples() {
        let serial = &block["profiles"]["serial"];
        for dir in ["forward", "backward"] {
            let outputs = serial[dir].as_object().expect("outputs").keys().cloned().collect::<Vec<_>>();
            for name in outputs {
                let mut changed = block.clone();
                let leaf = first_leaf(&mut changed["profiles"]["serial"][dir][&name]).expect("a value");
                *leaf = match leaf.clone() {
                    Value::String(s) => {
                        let x = hexf::parse(&s).expect("a hex float");
                        let other = if x.is_nan() { 1.0 } else { f32::from_bits(x.to_bits() ^ 1) };
                        Value::String(hexf::format(other))
                    }
                    Value::Number(n) => Value::from(n.as_i64().expect("an integer") + 1),
                    Value::Bool(b) => Value::Bool(!b),
                    other => panic!("docs/ops/{page}.md:{line}: {name} holds {other}"),
                };
                let diffs = check_block(&page, &changed).expect("a readable example");
                assert_eq!(diffs.len(), 1, "docs/ops/{page}.md:{line}: {dir} {name} changed: {diffs:?}");
                checked += 1;
            }
        }
    }
    assert!(checked >= 10, "only {checked} outputs changed");
}

/// The independent recomputation (docs/ops/examples/recompute.py, plain
/// Python from the pages' formulas) agrees with every page, traces
/// included. Without python3 it says so and checks nothing.
#[test]
fn the_independent_recomputation_agrees_with_the_pages() {
    let script = pages_dir().join("examples/recompute.py");
    let out = match Command::new("python3").arg(&script).output() {
        Ok(out) => out,
        Err(e) => {
            eprintln!("SKIPPED the_independent_recomputation_agrees_with_the_pages: no python3 ({e})");
            return;
        }
    };
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}: {}\n{}", script.display(), text, String::from_utf8_lossy(&out.stderr));
}
