//! The regression corpus (SPEC section 8): `regressions/<op>/<name>.json`,
//! one shrunk failure each, stored as exact values (hex floats), with the
//! property it broke, the subject it broke, the date and a note. Entries are
//! never deleted: `cargo test` and `bitparity replay` run each against every
//! available subject.

use crate::gen::seqwise_loss::{classify, Class};
use crate::props::seqwise_loss::{finite_differences, judge, References};
use crate::props::Property;
use crate::subject::{planted::KernelModel, SeqwiseSubject};
use oracles::case::seqwise_loss::SeqwiseCase;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// The op names the corpus knows.
pub const OPS: [&str; 1] = ["seqwise_loss"];

/// The subject name of the finite-difference check (the spec's formulas
/// themselves, judged in MPFR).
pub const MPFR_SUBJECT: &str = "mpfr";

/// One corpus entry. The case is stored with every f32 as an exact hex float.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub op: String,
    pub property: Property,
    /// The subject that failed (`cuda`, `bug:fma-quotient`, `mpfr`, ...).
    pub subject: String,
    /// The profile the subject claimed.
    pub profile: String,
    /// The day the failure was found (YYYY-MM-DD, UTC).
    pub date: String,
    /// One line: what failed, as the property reported it.
    pub note: String,
    /// The adversarial classes the (shrunk) case exercises.
    pub classes: Vec<Class>,
    pub case: SeqwiseCase,
}

#[derive(Debug, Error)]
pub enum CorpusError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: not a corpus entry: {source}")]
    Parse { path: PathBuf, source: serde_json::Error },
    #[error("{path}: unknown op {op:?} (known: {known:?})")]
    UnknownOp { path: PathBuf, op: String, known: [&'static str; 1] },
    #[error("{path}: the stored case is invalid: {reason}")]
    InvalidCase { path: PathBuf, reason: String },
}

impl Entry {
    pub fn new(property: Property, subject: &str, profile: &str, note: &str, case: SeqwiseCase) -> Self {
        Entry {
            op: "seqwise_loss".into(),
            property,
            subject: subject.into(),
            profile: profile.into(),
            date: today(),
            note: note.lines().next().unwrap_or("").chars().take(300).collect(),
            classes: classify(&case).into_iter().collect(),
            case,
        }
    }

    /// A file name that says what failed and cannot collide for different cases.
    pub fn file_name(&self) -> String {
        let json = serde_json::to_string(&self.case).unwrap_or_default();
        let hash = json.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
        let subject: String = self.subject.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
        format!("{}-{}-{:08x}.json", self.property, subject, hash as u32)
    }

    /// Writes the entry under `root/<op>/`; returns its path. An existing file
    /// of the same name (the same case, property and subject) is kept.
    pub fn save(&self, root: &Path) -> Result<PathBuf, CorpusError> {
        let dir = root.join(&self.op);
        std::fs::create_dir_all(&dir).map_err(|source| CorpusError::Io { path: dir.clone(), source })?;
        let path = dir.join(self.file_name());
        if !path.exists() {
            let text = serde_json::to_string_pretty(self).expect("an entry always serializes");
            std::fs::write(&path, text + "\n").map_err(|source| CorpusError::Io { path: path.clone(), source })?;
        }
        Ok(path)
    }

    pub fn load(path: &Path) -> Result<Entry, CorpusError> {
        let text = std::fs::read_to_string(path).map_err(|source| CorpusError::Io { path: path.into(), source })?;
        let entry: Entry =
            serde_json::from_str(&text).map_err(|source| CorpusError::Parse { path: path.into(), source })?;
        if !OPS.contains(&entry.op.as_str()) {
            return Err(CorpusError::UnknownOp { path: path.into(), op: entry.op, known: OPS });
        }
        entry.case.validate().map_err(|e| CorpusError::InvalidCase { path: path.into(), reason: e.to_string() })?;
        Ok(entry)
    }
}

/// Every entry under `root` (or the one file `root` names), sorted by path.
pub fn load_all(root: &Path) -> Result<Vec<(PathBuf, Entry)>, CorpusError> {
    if root.is_file() {
        return Ok(vec![(root.to_path_buf(), Entry::load(root)?)]);
    }
    let mut paths = Vec::new();
    for op in OPS {
        let dir = root.join(op);
        let Ok(rd) = std::fs::read_dir(&dir) else { continue };
        for f in rd {
            let f = f.map_err(|source| CorpusError::Io { path: dir.clone(), source })?;
            if f.path().extension().is_some_and(|x| x == "json") {
                paths.push(f.path());
            }
        }
    }
    paths.sort();
    paths.into_iter().map(|p| Entry::load(&p).map(|e| (p, e))).collect()
}

/// How one subject fared on a replayed entry.
#[derive(Clone, Debug)]
pub struct ReplayResult {
    pub subject: String,
    /// Whether the subject must fail (a planted bug that the entry caught).
    pub must_fail: bool,
    pub failure: Option<String>,
}

impl ReplayResult {
    /// Correct subjects must pass; the planted bug the entry caught must
    /// still fail.
    pub fn ok(&self) -> bool {
        self.failure.is_some() == self.must_fail
    }
}

/// Replays `entry` against every subject in `subjects`, and also against the
/// planted bug it names, if any.
pub fn replay(entry: &Entry, subjects: &[std::sync::Arc<dyn SeqwiseSubject>]) -> Vec<ReplayResult> {
    let case = &entry.case;
    let mut refs = References::default();
    let mut out = Vec::new();
    if entry.subject == MPFR_SUBJECT {
        let j = finite_differences(case);
        out.push(ReplayResult { subject: MPFR_SUBJECT.into(), must_fail: false, failure: j.failure });
        return out;
    }
    for s in subjects {
        let j = judge(entry.property, s.as_ref(), case, &mut refs);
        out.push(ReplayResult { subject: s.name(), must_fail: false, failure: j.failure });
    }
    if let Some(bug) = entry.subject.strip_prefix("bug:").and_then(crate::subject::planted::Bug::by_name) {
        let s = KernelModel::planted(bug);
        let j = judge(entry.property, &s, case, &mut refs);
        out.push(ReplayResult { subject: entry.subject.clone(), must_fail: true, failure: j.failure });
    }
    out
}

/// Today's date (UTC) as YYYY-MM-DD.
pub fn today() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let days = (secs / 86_400) as i64;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + (m <= 2) as i64;
    format!("{y:04}-{m:02}-{d:02}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use oracles::case::seqwise_loss::Objective;

    #[test]
    fn entries_round_trip_exactly() {
        let case = SeqwiseCase::dense(1, 3, vec![f32::from_bits(1), -0.0, f32::NAN], Objective::UnbiasedTopK { k: 2 });
        let e = Entry::new(Property::Conformance, "bug:x", "serial", "a note", case);
        let dir = std::env::temp_dir().join(format!("bitparity-corpus-{}", std::process::id()));
        let path = e.save(&dir).unwrap();
        let back = Entry::load(&path).unwrap();
        assert_eq!(back.case.scores[0].to_bits(), 1);
        assert_eq!(back.case.scores[1].to_bits(), (-0.0f32).to_bits());
        assert!(back.case.scores[2].is_nan());
        assert_eq!(back.note, "a note");
        std::fs::remove_dir_all(dir).ok();
        assert_eq!(today().len(), 10);
    }
}
