//! Each op's code lives in its own files: adding an op writes one file per
//! concept and adds one line to each registry-like list, and nothing generic
//! changes (docs/layout.md#adding-an-op). This test reads every source file
//! of `src/` and fails on each identifier that names an op anywhere but
//!
//! - the op's own files: `src/<concept>/<op>.rs` for each concept of
//!   [`CONCEPTS`] and the files under `src/<concept>/<op>/` (an op's file
//!   split by the concepts inside it, the router's generator), and
//!   `src/subject/cuda/<op>_*.rs` (an op's further GPU subjects,
//!   shared_expert's cuBLAS one);
//! - the registry-like lists: a concept's `pub mod <op>;` and
//!   `pub use <op>::...;` lines in its `mod.rs`, the registry itself
//!   (`src/harness/registry.rs`), and the `KernelId` list of
//!   `src/subject/cuda/mod.rs`;
//! - the [`EXCEPTIONS`], each one op's file reaching another op's item,
//!   with why.
//!
//! Comments are not read (a doc comment may cite `router_fwd` as an
//! example), nor `#[cfg(test)]` modules (a generic module's unit tests must
//! run on some op). String literals are read: an op picked by its name in a
//! `match` is as generic-layer-breaking as one picked by its type.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Every op, with the spellings that name it in identifiers (module and file
/// names, type names: `SeqwiseCase`, `CudaSeqwise`). An identifier names an
/// op when it contains one of them.
const OPS: [(&str, &[&str]); 4] = [
    ("seqwise_loss", &["seqwise_loss", "Seqwise"]),
    ("router", &["router", "Router"]),
    ("shared_expert", &["shared_expert", "SharedExpert"]),
    ("moe_combine", &["moe_combine", "MoeCombine"]),
];

/// The concepts with one file per op (docs/layout.md#adding-an-op).
const CONCEPTS: [&str; 6] = ["src/gen", "src/model", "src/planted", "src/exec", "src/harness", "src/subject/cuda"];

/// One op's files reaching another op's items, each with its reason:
/// (file, the op it names, why).
const EXCEPTIONS: &[(&str, &str, &str)] = &[
    ("src/gen/common.rs", "seqwise_loss", "the T edges come from seqwise_loss's GPU lanes and token chunk"),
    (
        "src/model/shared_expert.rs",
        "router",
        "__expf's emulation (fast_exp) is the router model's, shared by the fast-exp bugs",
    ),
    (
        "src/exec/mod.rs",
        "seqwise_loss",
        "the clamp tie a subject may claim is seqwise_loss's; the refusal cites its page",
    ),
];

/// The code of a Rust source as (text, literal): comments removed, string
/// and char literals kept and marked (a `//`, a quote or a brace inside one
/// is not code).
fn strip_comments(text: &str) -> (String, Vec<bool>) {
    let b = text.as_bytes();
    let (mut out, mut lit) = (String::with_capacity(text.len()), Vec::with_capacity(text.len()));
    let mut push = |s: &str, is_lit: bool, out: &mut String| {
        out.push_str(s);
        lit.extend(std::iter::repeat_n(is_lit, s.len()));
    };
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut i = 0;
    while i < b.len() {
        let rest = &text[i..];
        let after_ident = i > 0 && ident(b[i - 1]);
        if rest.starts_with("//") {
            i = rest.find('\n').map_or(b.len(), |n| i + n);
        } else if let Some(body) = rest.strip_prefix("/*") {
            let end = body.find("*/").map_or(b.len(), |n| i + 2 + n + 2);
            // Its newlines kept: line numbers stay the file's.
            push(&format!(" {}", "\n".repeat(text[i..end].matches('\n').count())), false, &mut out);
            i = end;
        } else if !after_ident && (rest.starts_with("r\"") || rest.starts_with("r#")) {
            // A raw string: r, hashes, a quote, to a quote and as many hashes.
            let hashes = rest[1..].bytes().take_while(|&c| c == b'#').count();
            if rest.as_bytes().get(1 + hashes) != Some(&b'"') {
                push("r", false, &mut out);
                i += 1;
                continue;
            }
            let close = format!("\"{}", "#".repeat(hashes));
            let body = 2 + hashes;
            let end = rest[body..].find(&close).map_or(b.len(), |n| i + body + n + close.len());
            push(&text[i..end], true, &mut out);
            i = end;
        } else if b[i] == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            let end = (j + 1).min(b.len());
            push(&text[i..end], true, &mut out);
            i = end;
        } else if b[i] == b'\'' {
            // A char literal ('x', '\n', '"', '{'), else a lifetime.
            let len = if rest[1..].starts_with('\\') {
                rest.get(3..).and_then(|r| r.find('\'')).map(|n| n + 4)
            } else {
                rest[1..].chars().next().filter(|_| rest[1..].chars().nth(1) == Some('\'')).map(|c| c.len_utf8() + 2)
            };
            let n = len.unwrap_or(1);
            push(&text[i..i + n], len.is_some(), &mut out);
            i += n;
        } else {
            let n = rest.chars().next().map_or(1, char::len_utf8);
            push(&text[i..i + n], false, &mut out);
            i += n;
        }
    }
    (out, lit)
}

/// The code of a Rust source: comments and `#[cfg(test)] mod ... { ... }`
/// blocks removed, lines kept where they were (a removed block leaves its
/// newlines), so that a violation's line number is the file's.
fn code_of(text: &str) -> String {
    let (code, lit) = strip_comments(text);
    let b = code.as_bytes();
    let mut keep = vec![true; b.len()];
    let mut from = 0;
    while let Some(n) = code[from..].find("#[cfg(test)]") {
        let at = from + n;
        from = at + 1;
        if lit[at] {
            continue;
        }
        let after = at + "#[cfg(test)]".len();
        let next = code[after..].trim_start();
        if !next.starts_with("mod ") {
            continue;
        }
        let Some(open) = code[after..].find('{').map(|p| after + p) else { continue };
        let mut depth = 0usize;
        let mut end = b.len();
        for (j, &c) in b.iter().enumerate().skip(open) {
            if lit[j] {
                continue;
            }
            match c {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = j + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        keep[at..end].iter_mut().for_each(|k| *k = false);
    }
    code.char_indices().map(|(i, c)| if keep[i] || c == '\n' { c } else { ' ' }).collect()
}

/// The ops the identifiers of `line` name.
fn ops_named(line: &str) -> BTreeSet<&'static str> {
    line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .flat_map(|w| {
            OPS.iter().filter(move |(_, spellings)| spellings.iter().any(|s| w.contains(s))).map(|(op, _)| *op)
        })
        .collect()
}

/// Whether `line` of `path` may name `op` (see the module header).
fn allowed(path: &str, line: &str, op: &str) -> bool {
    let own = CONCEPTS.iter().any(|c| path == format!("{c}/{op}.rs") || path.starts_with(&format!("{c}/{op}/")))
        || path
            .strip_prefix(&format!("src/subject/cuda/{op}_"))
            .is_some_and(|r| r.ends_with(".rs") && !r.contains('/'));
    if own {
        return true;
    }
    let t = line.trim();
    let registration = t == format!("pub mod {op};")
        || t.strip_prefix("pub mod ").is_some_and(|m| m.starts_with(&format!("{op}_")) && m.ends_with(';'))
        || t.starts_with(&format!("pub use {op}::"));
    if registration && CONCEPTS.iter().any(|c| path == format!("{c}/mod.rs")) {
        return true;
    }
    if path == "src/harness/registry.rs" {
        return true;
    }
    // The KernelId list: its variants, their arms and their sources.
    if path == "src/subject/cuda/mod.rs"
        && (t.contains("KernelId::")
            || t.contains(".cu\"")
            || t.trim_end_matches(',').chars().all(|c| c.is_ascii_alphanumeric()))
    {
        return true;
    }
    EXCEPTIONS.iter().any(|&(p, o, _)| p == path && o == op)
}

/// Every violation in the source `text` of `path` (relative to the crate, `/`
/// separated), as `path:line: names op: the line`.
fn violations(path: &str, text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (n, line) in code_of(text).lines().enumerate() {
        for op in ops_named(line) {
            if !allowed(path, line, op) {
                out.push(format!("{path}:{}: names {op}: {}", n + 1, line.trim()));
            }
        }
    }
    out
}

/// Every `.rs` file under `dir`, recursively, sorted.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()) {
        if e.is_dir() {
            out.extend(sources(&e));
        } else if e.extension().is_some_and(|x| x == "rs") {
            out.push(e);
        }
    }
    out.sort();
    out
}

#[test]
fn no_generic_file_names_an_op() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut bad = Vec::new();
    let mut own_files = 0;
    for file in sources(&root.join("src")) {
        let rel = file.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
        let text = std::fs::read_to_string(&file).unwrap();
        bad.extend(violations(&rel, &text));
        own_files += usize::from(OPS.iter().any(|(op, _)| CONCEPTS.iter().any(|c| rel == format!("{c}/{op}.rs"))));
    }
    assert!(bad.is_empty(), "ops named outside their files (docs/layout.md#adding-an-op):\n  {}", bad.join("\n  "));
    // Every op has its file in every concept: the check read them.
    assert_eq!(own_files, OPS.len() * CONCEPTS.len(), "an op's file of a concept is missing, or OPS is stale");
}

/// The ops here are the registry's.
#[test]
fn the_ops_are_the_registrys() {
    let names: Vec<&str> = OPS.iter().map(|(op, _)| *op).collect();
    assert_eq!(names, bitparity::harness::OPS);
}

#[test]
fn every_exception_is_still_needed() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for &(path, op, why) in EXCEPTIONS {
        let text = std::fs::read_to_string(root.join(path)).unwrap();
        let uses = code_of(&text).lines().filter(|l| ops_named(l).contains(op)).count();
        assert!(uses > 0, "{path} no longer names {op}: drop its exception ({why})");
    }
}

/// The check on planted sources: what it must catch, and what it must let be.
#[test]
fn the_check_catches_a_planted_violation() {
    let caught = |path: &str, src: &str| !violations(path, src).is_empty();
    // An op named in generic code, by type, by module or by name.
    assert!(caught("src/runner/mod.rs", "let n = oracles::op::moe_combine::MoeCombine::NAME;"));
    assert!(caught("src/runner/judge.rs", "match op { \"router\" => 1, _ => 0 }"));
    assert!(caught("src/props/mod.rs", "fn f(c: &SharedExpertCase) {}"));
    assert!(caught("src/report.rs", "let s = CudaSeqwise::new();"));
    // A registration outside the concepts, or a use line posing as one.
    assert!(caught("src/runner/mod.rs", "pub mod moe_combine;"));
    assert!(caught("src/gen/mod.rs", "pub fn f(c: moe_combine::Class) -> String { c.to_string() }"));
    // One op's file reaching another op's.
    assert!(caught("src/gen/moe_combine.rs", "use crate::gen::router::Class;"));
    assert!(caught("src/exec/router.rs", "use oracles::op::moe_combine::MoeCombine;"));
    // The registry of another directory is not the registry.
    assert!(caught("src/app/registry.rs", "MoeCombine::NAME => Some(command.run::<MoeCombine>()),"));
    // A test module does not hide the code after it.
    assert!(caught("src/runner/mod.rs", "#[cfg(test)]\nmod tests {\n    fn t() {}\n}\nfn f() { moe_combine(); }\n"));
    // A brace in a string or a char does not end a test module early.
    assert!(!caught(
        "src/runner/mod.rs",
        "#[cfg(test)]\nmod tests {\n    fn t() { let _ = (\"}\", '}'); router(); }\n}\n"
    ));
    // What may name an op.
    assert!(!caught("src/gen/mod.rs", "pub mod moe_combine;"));
    assert!(!caught("src/model/mod.rs", "pub use moe_combine::MoeCombineModel;"));
    assert!(!caught("src/subject/cuda/mod.rs", "pub mod shared_expert_cublas;"));
    assert!(!caught("src/gen/moe_combine.rs", "use oracles::case::moe_combine::MoeCombineCase;"));
    assert!(!caught("src/gen/router/shrink.rs", "use oracles::case::router::RouterCase;"));
    assert!(caught("src/gen/router/shrink.rs", "use oracles::case::moe_combine::MoeCombineCase;"));
    assert!(!caught("src/subject/cuda/shared_expert_cublas.rs", "use oracles::op::shared_expert::SharedExpert;"));
    assert!(!caught("src/harness/registry.rs", "MoeCombine::NAME => Some(command.run::<MoeCombine>()),"));
    assert!(!caught(
        "src/subject/cuda/mod.rs",
        "            KernelId::MoeCombine => Some((\"moe_combine\", \"cuda\")),"
    ));
    assert!(!caught("src/runner/mod.rs", "// router_fwd, as an example\n/* MoeCombine */ fn f() {}\n"));
    assert!(!caught("src/runner/mod.rs", "/// `moe_combine`'s rows\nfn f<'a>(x: &'a str) -> char { '\"' }\n"));
    assert!(!caught("src/runner/mod.rs", "const S: &str = r#\"a \" b\"#; // router\n"));
    // Words that contain no op's spelling.
    assert!(!caught("src/runner/mod.rs", "let routes = route_norm(combine, expert, shared);"));
    // Line numbers are the file's.
    let v = violations("src/runner/mod.rs", "/* a\nb */\n#[cfg(test)]\nmod t {\n}\nfn f() { router(); }\n");
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(v[0].starts_with("src/runner/mod.rs:6: names router"), "{v:?}");
}
