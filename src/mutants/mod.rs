//! `bitparity mutants`: how many bugs nobody chose the properties catch.
//! The CUDA sources of the ops' kernels and their headers are mutated by
//! rule ([`rules`]), one edit per mutant; each mutant is compiled by NVRTC
//! and put through the op's tier B properties in a child process
//! ([`child`]), many at once ([`campaign`]); survivors shown equivalent are
//! listed in `kernels/mutants.toml` ([`triage`]); the kill matrix is the
//! report ([`report`]).
//!
//! docs/mutants.md says how to run it and how the score is counted.

pub mod campaign;
pub mod child;
pub mod expf;
pub mod lex;
pub mod report;
pub mod rules;
pub mod sanitizer;
pub mod triage;

use crate::subject::cuda::{KernelId, KernelSource, HEADERS};
pub use rules::Rule;
use serde::Serialize;

/// One mutant: one rule's edit of one source file.
#[derive(Clone, Debug, Serialize)]
pub struct Mutant {
    /// `file:hash`: the hash is of the rule, the edited line's text, the
    /// edit's column, its replacement and which occurrence of that line
    /// text it is, so an id survives edits elsewhere in the file (the
    /// triage file names mutants by id).
    pub id: String,
    pub file: &'static str,
    /// 1-based line of the edit.
    pub line: usize,
    pub rule: Rule,
    /// The line before and after, trimmed (`-old` / `+new`).
    pub before: String,
    pub after: String,
    #[serde(skip)]
    start: usize,
    #[serde(skip)]
    end: usize,
    #[serde(skip)]
    replacement: String,
}

impl Mutant {
    /// The whole mutated file.
    pub fn text(&self) -> String {
        let src = source(self.file).map(|s| s.text).unwrap_or_default();
        format!("{}{}{}", &src[..self.start], self.replacement, &src[self.end..])
    }

    /// The edit as a two-line diff.
    pub fn diff(&self) -> String {
        format!("-{}\n+{}", self.before, self.after)
    }

    /// The kernels this mutant changes: its file's, or every kernel that
    /// includes its header (the exp check's among them).
    pub fn kernels(&self) -> Vec<KernelId> {
        kernels_of(self.file)
    }
}

/// The files mutated: every op's kernel source, then the headers (the exp
/// check kernel is bitparity's own probe, not an op's kernel).
pub fn files() -> Vec<KernelSource> {
    op_kernels().into_iter().map(KernelId::source).chain(HEADERS.iter().copied()).collect()
}

/// The kernels of the ops (those with a CUDA subject).
pub fn op_kernels() -> Vec<KernelId> {
    KernelId::ALL.into_iter().filter(|k| k.op().is_some()).collect()
}

/// The source file `name` as compiled into this binary.
pub fn source(name: &str) -> Option<KernelSource> {
    files().into_iter().find(|f| f.name == name)
}

/// The kernels that are `file` or include it.
pub fn kernels_of(file: &str) -> Vec<KernelId> {
    KernelId::ALL.into_iter().filter(|k| k.source().name == file || k.includes(file)).collect()
}

/// Every mutant of `file`, in source order.
pub fn mutants_of(file: KernelSource) -> Vec<Mutant> {
    let src = file.text;
    let tokens = lex::tokens(src);
    let mut seen = std::collections::HashMap::<u64, u32>::new();
    rules::edits(src, &tokens)
        .into_iter()
        .map(|e| {
            let line_start = src[..e.start].rfind('\n').map_or(0, |p| p + 1);
            let line_end = src[e.end..].find('\n').map_or(src.len(), |p| e.end + p);
            let line = src[..e.start].matches('\n').count() + 1;
            let before = src[line_start..line_end].trim().to_string();
            let after =
                format!("{}{}{}", &src[line_start..e.start], e.replacement, &src[e.end..line_end]).trim().to_string();
            let key = fnv1a(format!("{}\0{}\0{}\0{}", e.rule.name(), before, e.start - line_start, e.replacement));
            let n = seen.entry(key).or_default();
            let hash = fnv1a(format!("{key}\0{n}"));
            *n += 1;
            Mutant {
                id: format!("{}:{:08x}", file.name, hash as u32),
                file: file.name,
                line,
                rule: e.rule,
                before,
                after,
                start: e.start,
                end: e.end,
                replacement: e.replacement,
            }
        })
        .collect()
}

/// Every mutant of every file of [`files`].
pub fn all() -> Vec<Mutant> {
    files().into_iter().flat_map(mutants_of).collect()
}

/// The mutant with id `id`.
pub fn by_id(id: &str) -> Result<Mutant, String> {
    let file = id.rsplit_once(':').map(|(f, _)| f).ok_or_else(|| format!("mutant id {id:?} is not FILE:HASH"))?;
    let src = source(file).ok_or_else(|| format!("mutant id {id:?}: no mutated file named {file:?}"))?;
    mutants_of(src).into_iter().find(|m| m.id == id).ok_or_else(|| format!("no mutant {id:?} in {file}"))
}

/// FNV-1a, 64 bits: a stable hash (std's hasher may change between
/// releases, and ids are committed in the triage file).
fn fnv1a(s: String) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_has_mutants_with_unique_ids_that_change_the_text() {
        let mut ids = std::collections::HashSet::new();
        for f in files() {
            let ms = mutants_of(f);
            assert!(!ms.is_empty(), "{} has no mutant", f.name);
            for (i, m) in ms.iter().enumerate() {
                assert!(ids.insert(m.id.clone()), "duplicate id {}", m.id);
                assert_ne!(m.text(), f.text, "{} changes nothing", m.id);
                // by_id lists the file's mutants again: a sample of them
                // (the first, the last, every 17th) keeps the test linear.
                if i % 17 == 0 || i + 1 == ms.len() {
                    assert_eq!(by_id(&m.id).unwrap().text(), m.text());
                }
            }
        }
    }

    #[test]
    fn headers_reach_the_kernels_that_include_them() {
        let k = kernels_of("common.cuh");
        assert!(k.contains(&KernelId::SeqwiseLoss) && k.contains(&KernelId::Router), "{k:?}");
        assert!(kernels_of("expf_hard.cuh").contains(&KernelId::ExpfCheck));
        assert_eq!(kernels_of("router.cu"), vec![KernelId::Router]);
        assert!(by_id("nofile.cu:00000000").is_err() && by_id("router.cu").is_err());
    }
}
