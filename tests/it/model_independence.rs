//! The kernel models share nothing computational with the oracles.
//!
//! Conformance compares the profile oracle with a kernel model; a top-k, a
//! sign or a reduction that both import is one implementation, and a bug
//! in it is invisible to the comparison (a NaN ranked below the numbers in
//! a shared top-k passed `bitparity check` on every seed). This test reads
//! the source of every file of `src/model/` and fails if any names an
//! `oracles` item outside [`ALLOWED`] (types, validation, constants, the
//! reduction order as data, the verified `exp_f32` and MMA step), calls a reduction
//! of the oracles crate, or reaches other framework code.

use std::collections::BTreeSet;

/// Every file of `src/model/`, as the compiler sees it.
const FILES: [(&str, &str); 5] = [
    ("mod.rs", include_str!("../../src/model/mod.rs")),
    ("seqwise_loss.rs", include_str!("../../src/model/seqwise_loss.rs")),
    ("router.rs", include_str!("../../src/model/router.rs")),
    ("shared_expert.rs", include_str!("../../src/model/shared_expert.rs")),
    ("moe_combine.rs", include_str!("../../src/model/moe_combine.rs")),
];

/// The only `oracles` items a model may name (an item's own paths below it,
/// an enum's variants say, come with it).
const ALLOWED: &[&str] = &[
    // The ops' cases, outputs, validation errors and spec constants.
    "oracles::case::Layout",
    "oracles::case::seqwise_loss::SeqwiseCase",
    "oracles::case::seqwise_loss::SeqwiseForward",
    "oracles::case::seqwise_loss::SeqwiseBackward",
    "oracles::case::seqwise_loss::SeqwiseError",
    "oracles::case::seqwise_loss::Objective",
    "oracles::vocab::ClampTie",
    "oracles::vocab::EPS",
    "oracles::vocab::EPS2",
    "oracles::case::router::RouterCase",
    "oracles::case::router::RouterForward",
    "oracles::case::router::RouterBackward",
    "oracles::case::router::RouterError",
    "oracles::case::router::FusedLoss",
    "oracles::case::shared_expert::SharedExpertCase",
    "oracles::case::shared_expert::SharedExpertForward",
    "oracles::case::shared_expert::SharedExpertBackward",
    "oracles::case::moe_combine::MoeCombineCase",
    "oracles::case::moe_combine::MoeCombineForward",
    "oracles::case::moe_combine::MoeCombineBackward",
    // The profiles, as data.
    "oracles::profile::seqwise_loss::SeqwiseProfile",
    "oracles::profile::seqwise_loss::GPU_LANES",
    "oracles::profile::router::RouterProfile",
    "oracles::profile::shared_expert::SharedExpertProfile",
    "oracles::profile::moe_combine::MoeCombineProfile",
    "oracles::profile::moe_combine::TermOrder",
    // A reduction order only as data to pattern-match: `reduce` is banned below.
    "oracles::order::ReductionOrder",
    // The shared leaves, each verified on its own: the correctly rounded
    // exp (exhaustively against MPFR), and the tensor core's MMA step
    // (against the H200 by bitparity-mma-check, 33.8 million outputs), which
    // a model of the `mma16-h100` profile chains in its own loop.
    "oracles::expf::exp_f32",
    "oracles::mma::MmaModel",
    "oracles::mma::K",
    // Bitwise comparison (tests).
    "oracles::same_bits",
];

/// Identifiers no model may contain: the oracles' computational items (a
/// model writes its own under other names).
const FORBIDDEN_WORDS: &[&str] = &[
    "profile_oracle",
    "mpfr",
    "topk_order",
    "top_k",
    "sgn",
    "sgn_of",
    "reduce",
    "routing_map",
    "forward_on",
    "backward_on",
    "forward_unchecked",
    "backward_unchecked",
    "l1_denominator",
    "row_gradient",
    "frequencies_of",
    "Num",
    "cmp_num",
    "Bounded",
    "Exact",
    // The oracles' bf16 rounding and its decisions (a model rounds on its
    // own, from the bits; `oracles::bf16::*` paths are off the allow-list).
    "round_bf16",
    "round_f32",
    "round_f64",
    "same_rounding",
    "Bf16Decision",
    "Rounding",
    // moe_combine's dispatch and what is built on it (a model ranks its
    // own slots): the function and its type, the slot count, a token's
    // listed terms, the sub-batch.
    "dispatch",
    "Dispatch",
    "slot_count",
    "listed",
    "sub_batch",
];

/// Text no model may contain: the case's logical values (a model reads the
/// strided storage), a path around the `oracles::` check, other framework
/// code (today's `subject::planted` imports the oracle's top-k).
const FORBIDDEN_TEXT: &[&str] =
    &[".row(", "::row(", ".scores", ".logits", "bitparity::", "super::super", "#[path", "include!"];

/// The only paths into this crate a model may take.
const ALLOWED_CRATE: &[&str] = &["crate::model", "crate::planted"];

/// The code of a source file: line and block comments removed (comments may
/// quote the spec's formulas, sgn(s) and all).
fn code_of(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    loop {
        let line = rest.find("//");
        let block = rest.find("/*");
        let block_first = match (line, block) {
            (None, None) => {
                out.push_str(rest);
                return out;
            }
            (Some(l), Some(b)) => b < l,
            (None, Some(_)) => true,
            (Some(_), None) => false,
        };
        if block_first {
            let b = block.unwrap_or(0);
            out.push_str(&rest[..b]);
            out.push(' ');
            rest = rest[b + 2..].find("*/").map_or("", |n| &rest[b + 2 + n + 2..]);
        } else {
            let l = line.unwrap_or(0);
            out.push_str(&rest[..l]);
            rest = rest[l..].find('\n').map_or("", |n| &rest[l + n..]);
        }
    }
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

fn is_path(c: char) -> bool {
    is_ident(c) || c == ':'
}

/// A use tree (whitespace removed, `as` renames as `@name`) expanded into
/// full paths.
fn expand(tree: &str) -> Vec<String> {
    let Some(open) = tree.find('{') else {
        return vec![tree.split('@').next().unwrap_or("").to_string()];
    };
    let prefix = &tree[..open];
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .filter(|p| !p.is_empty())
        .flat_map(|p| expand(p).into_iter().map(|s| format!("{prefix}{s}")))
        .collect()
}

/// Whether `path` (which starts at `oracles`) names an allowed item or
/// something under one.
fn oracles_path_allowed(path: &str) -> bool {
    ALLOWED.iter().any(|a| path == *a || path.strip_prefix(a).is_some_and(|rest| rest.starts_with("::")))
}

/// Every violation in one source file, and the allowed `oracles` paths it
/// names (so that the check is seen to have read something).
fn violations(text: &str) -> (Vec<String>, BTreeSet<String>) {
    let code = code_of(text);
    let mut bad = Vec::new();
    let mut seen = BTreeSet::new();
    // Paths: every `use` tree expanded, and every path written inline.
    let mut paths: Vec<String> = Vec::new();
    let mut rest_code = String::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find("use ") {
        let starts_word = at == 0 || !is_ident(rest[..at].chars().next_back().unwrap_or(' '));
        rest_code.push_str(&rest[..at]);
        if !starts_word {
            rest_code.push_str("use ");
            rest = &rest[at + 4..];
            continue;
        }
        let end = rest[at..].find(';').map_or(rest.len(), |n| at + n);
        let tree: String = rest[at + 4..end].split_whitespace().collect::<Vec<_>>().join(" ").replace(" as ", "@");
        let tree: String = tree.chars().filter(|c| !c.is_whitespace()).collect();
        paths.extend(expand(&tree));
        rest = &rest[(end + 1).min(rest.len())..];
    }
    rest_code.push_str(rest);
    let chars: Vec<(usize, char)> = rest_code.char_indices().collect();
    let mut i = 0;
    while i < chars.len() {
        let (at, c) = chars[i];
        if is_ident(c) && (i == 0 || !is_path(chars[i - 1].1)) {
            let end = rest_code[at..].find(|c: char| !is_path(c)).map_or(rest_code.len(), |n| at + n);
            let path = &rest_code[at..end];
            if path.contains("::") {
                paths.push(path.trim_end_matches(':').to_string());
            } else if path == "oracles" {
                bad.push("`oracles` named outside a path (a rename?)".to_string());
            }
            i += path.chars().count();
            continue;
        }
        i += 1;
    }
    for p in &paths {
        let p = p.trim_start_matches("::");
        let from_oracles = p.split("::").position(|seg| seg == "oracles");
        match from_oracles {
            Some(n) => {
                let tail: Vec<&str> = p.split("::").skip(n).collect();
                let tail = tail.join("::");
                if n > 0 && !p.starts_with("crate::oracles") {
                    bad.push(format!("{p}: `oracles` reached through another path"));
                }
                if oracles_path_allowed(&tail) {
                    seen.insert(tail);
                } else {
                    bad.push(format!("{p}: not on the allow-list"));
                }
            }
            None => {
                let in_crate = p.starts_with("crate::");
                if in_crate && !ALLOWED_CRATE.iter().any(|a| p == *a || p.starts_with(&format!("{a}::"))) {
                    bad.push(format!("{p}: framework code outside the models"));
                }
            }
        }
    }
    // Words and text.
    let words: BTreeSet<&str> = code.split(|c: char| !is_ident(c)).filter(|w| !w.is_empty()).collect();
    for w in FORBIDDEN_WORDS {
        if words.contains(w) {
            bad.push(format!("names `{w}`"));
        }
    }
    for t in FORBIDDEN_TEXT {
        if code.contains(t) {
            bad.push(format!("contains `{t}`"));
        }
    }
    (bad, seen)
}

#[test]
fn models_name_only_allowed_oracle_items() {
    let mut seen_all = BTreeSet::new();
    for (name, text) in FILES {
        let (bad, seen) = violations(text);
        assert!(bad.is_empty(), "src/model/{name}:\n  {}", bad.join("\n  "));
        seen_all.extend(seen);
    }
    // The check read the real imports (a path typo would read nothing).
    for must in [
        "oracles::case::seqwise_loss::SeqwiseCase",
        "oracles::case::router::RouterCase",
        "oracles::case::shared_expert::SharedExpertCase",
        "oracles::case::moe_combine::MoeCombineCase",
        "oracles::order::ReductionOrder",
        "oracles::expf::exp_f32",
    ] {
        assert!(seen_all.contains(must), "{must} not found in the models' imports: {seen_all:?}");
    }
}

#[test]
fn every_model_file_is_checked() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/model");
    let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".rs"))
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = FILES.iter().map(|(n, _)| n.to_string()).collect();
    listed.sort();
    assert_eq!(on_disk, listed, "a file of src/model/ is not in FILES: add it");
    let subdirs = std::fs::read_dir(&dir).unwrap().filter(|e| e.as_ref().unwrap().path().is_dir()).count();
    assert_eq!(subdirs, 0, "src/model/ has a subdirectory the check does not read");
}

#[test]
fn the_check_catches_what_it_must() {
    let caught = |src: &str| !violations(src).0.is_empty();
    // Shared computation, however it is reached.
    assert!(caught(
        "use oracles::vocab::topk_order;
use oracles::case::seqwise_loss::SeqwiseCase;"
    ));
    assert!(caught(
        "use oracles::vocab::top_k as pick;
use oracles::case::seqwise_loss::SeqwiseCase;"
    ));
    assert!(caught("use oracles::profile_oracle::seqwise_loss::sgn;"));
    assert!(caught("let q = oracles::profile_oracle::seqwise_loss::sgn(x);"));
    assert!(caught("let q = self.profile.q.reduce(&terms);"));
    assert!(caught("let q = ReductionOrder::reduce(&order, &terms);"));
    assert!(caught("let m = case.routing_map();"));
    assert!(caught("use oracles::{order::ReductionOrder, num::Num};"));
    assert!(caught("use oracles as o;"));
    assert!(caught("use oracles::case::seqwise_loss;"));
    assert!(caught("use oracles::case::seqwise_loss::*;"));
    assert!(caught("use crate::oracles::mpfr::Exact;"));
    assert!(caught("use crate::subject::planted::KernelModel;"));
    assert!(caught("let r = case.row(t);"));
    assert!(caught("let x = case.scores[i];"));
    assert!(caught("use oracles::bf16::round_f32;"));
    assert!(caught("let h = oracles::bf16::round_f32(x);"));
    assert!(caught("use oracles::bf16 as b;"));
    assert!(caught("let v = x.round_bf16();"));
    assert!(caught("use oracles::case::moe_combine::dispatch;"));
    assert!(caught("let d = dispatch(case)?;"));
    assert!(caught("let n = oracles::case::moe_combine::slot_count(case);"));
    assert!(caught("let s = case.sub_batch(0..1);"));
    // What a model may do.
    assert!(!caught("use oracles::{order::ReductionOrder, expf::exp_f32};\nlet y = oracles::expf::exp_f32(x);"));
    assert!(!caught(
        "use oracles::case::seqwise_loss::Objective as Obj;
use oracles::vocab::{\n    ClampTie, EPS, \n};"
    ));
    assert!(!caught("match o { oracles::order::ReductionOrder::Serial => 1, _ => 2 }"));
    assert!(!caught("use super::{sign_factor, Sum};\nuse crate::planted::RouterBug;"));
    assert!(!caught("// sgn(s) * r, as the oracle's reduce does\nlet x = 1; /* top_k */"));
}
