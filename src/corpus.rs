//! The regression corpus as storage (docs/ops/README.md#the-regression-corpus):
//! `regressions/<op>/<name>.json`, one shrunk failure each, stored as exact
//! values (hex floats) with the property it broke, the subject it broke, the
//! date and a note. This module only reads and writes entries; replaying them
//! is the runner's business ([`crate::runner::replay`]).
//!
//! Writes are atomic ([`crate::fsio::write_atomic`]): a crash or SIGKILL at
//! any moment leaves either no entry or a whole one. Reads are strict: an
//! unknown key, a missing field, a value that is not exactly an f32 is an
//! error naming the file, never a silently different case.

use crate::fsio::{not_regular, read_capped, write_atomic};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The largest entry file read (a 4096 x 256 case with a map is about
/// 20 MB of JSON).
pub const MAX_ENTRY_BYTES: u64 = 64 << 20;

/// One corpus entry; `C` is the op's case type (or a JSON value before the
/// op named in `op` decodes it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry<C> {
    /// The op whose case this is (`seqwise_loss`, `router`).
    pub op: String,
    /// The property the subject broke (`conformance`, ...).
    pub property: String,
    /// The subject that failed (`cuda`, `bug:fma-quotient`, `mpfr`, ...).
    pub subject: String,
    /// The profile the subject claimed (`-` for `mpfr`).
    pub profile: String,
    /// The day the failure was found (YYYY-MM-DD, UTC).
    pub date: String,
    /// One line: what failed, as the property reported it.
    pub note: String,
    /// The adversarial classes the (shrunk) case exercises.
    pub classes: Vec<String>,
    pub case: C,
}

/// An entry whose case the op has not decoded yet.
pub type RawEntry = Entry<serde_json::Value>;

/// What [`save`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Saved {
    /// A new file.
    New(PathBuf),
    /// The corpus already held this entry (same op, property, subject and
    /// case), verified by reading it back.
    Present(PathBuf),
    /// A file of this name existed but was not a readable copy of this entry
    /// (empty, truncated, corrupt): it was replaced.
    Repaired(PathBuf),
}

impl Saved {
    pub fn path(&self) -> &Path {
        match self {
            Saved::New(p) | Saved::Present(p) | Saved::Repaired(p) => p,
        }
    }
}

impl<C: Serialize> Entry<C> {
    /// A file name that says what failed and cannot collide for different
    /// cases: `<property>-<subject>-<hash of the case>.json`.
    pub fn file_name(&self) -> String {
        let json = serde_json::to_string(&self.case).unwrap_or_default();
        let hash = json.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
        let subject: String = self.subject.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
        format!("{}-{}-{:08x}.json", self.property, subject, hash as u32)
    }

    /// The entry's text: pretty JSON, a final newline.
    pub fn to_text(&self) -> Result<String, String> {
        serde_json::to_string_pretty(self).map(|t| t + "\n").map_err(|e| format!("cannot serialize the entry: {e}"))
    }

    /// The same entry with its case as a JSON value.
    fn raw(&self) -> Result<RawEntry, String> {
        let case = serde_json::to_value(&self.case).map_err(|e| format!("cannot serialize the case: {e}"))?;
        Ok(Entry {
            op: self.op.clone(),
            property: self.property.clone(),
            subject: self.subject.clone(),
            profile: self.profile.clone(),
            date: self.date.clone(),
            note: self.note.clone(),
            classes: self.classes.clone(),
            case,
        })
    }
}

/// Whether `a` and `b` record the same failure (date and note aside).
fn same_failure(a: &RawEntry, b: &RawEntry) -> bool {
    a.op == b.op && a.property == b.property && a.subject == b.subject && a.case == b.case
}

/// Writes `entry` under `root/<op>/`, atomically. An existing file of the
/// same name is read back: kept when it holds this failure, replaced when it
/// is not a readable entry, and left alone (the new entry takes the next free
/// name) when it is another valid entry. An entry larger than
/// [`MAX_ENTRY_BYTES`] is refused (`Err`, nothing written): `replay` could
/// never read it back, and a corpus must not hold what it cannot replay.
pub fn save<C: Serialize>(root: &Path, entry: &Entry<C>) -> Result<Saved, String> {
    let text = entry.to_text()?;
    if text.len() as u64 > MAX_ENTRY_BYTES {
        return Err(format!(
            "not saved: the entry is {} MiB, past the {} MiB a corpus entry may hold (a case too big to shrink \
             further; the reproduce command regenerates it)",
            text.len() >> 20,
            MAX_ENTRY_BYTES >> 20
        ));
    }
    let dir = root.join(&entry.op);
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let raw = entry.raw()?;
    let name = entry.file_name();
    let stem = name.trim_end_matches(".json");
    for n in 0.. {
        let path = if n == 0 { dir.join(&name) } else { dir.join(format!("{stem}-{n}.json")) };
        if !path.exists() && std::fs::symlink_metadata(&path).is_err() {
            write_atomic(&path, text.as_bytes())?;
            return Ok(Saved::New(path));
        }
        if not_regular(&path).is_some() {
            // A FIFO or device of that name: never opened, never replaced.
            continue;
        }
        match read_entry(&path) {
            Ok(existing) if same_failure(&existing, &raw) => return Ok(Saved::Present(path)),
            Ok(_) => continue,
            Err(_) if path.is_file() || std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_symlink()) => {
                write_atomic(&path, text.as_bytes())?;
                return Ok(Saved::Repaired(path));
            }
            // A folder of that name: take the next name.
            Err(_) => continue,
        }
    }
    unreachable!("0.. never ends")
}

/// Parses one entry strictly (the case stays JSON for the op to decode).
pub fn parse(bytes: &[u8]) -> Result<RawEntry, String> {
    if bytes.is_empty() {
        return Err("empty file".into());
    }
    serde_json::from_slice::<NoDuplicateKeys>(bytes).map_err(|e| format!("not a corpus entry: {e}"))?;
    serde_json::from_slice(bytes).map_err(|e| format!("not a corpus entry: {e}"))
}

/// A JSON document with no object holding the same key twice, at any depth.
/// The case is kept as a JSON value until its op decodes it, and a value
/// keeps only the last of two equal keys: without this check
/// `"offset": 0, "offset": 3` would silently be another case.
struct NoDuplicateKeys;

impl<'de> Deserialize<'de> for NoDuplicateKeys {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = NoDuplicateKeys;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(NoDuplicateKeys)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(NoDuplicateKeys)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(NoDuplicateKeys)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(NoDuplicateKeys)
            }
            fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
                Ok(NoDuplicateKeys)
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(NoDuplicateKeys)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                while a.next_element::<NoDuplicateKeys>()?.is_some() {}
                Ok(NoDuplicateKeys)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                let mut seen = std::collections::BTreeSet::new();
                while let Some(k) = a.next_key::<String>()? {
                    a.next_value::<NoDuplicateKeys>()?;
                    if !seen.insert(k.clone()) {
                        return Err(serde::de::Error::custom(format!("duplicate key {k:?}")));
                    }
                }
                Ok(NoDuplicateKeys)
            }
        }
        d.deserialize_any(V)
    }
}

/// Reads and parses the entry at `path`.
pub fn read_entry(path: &Path) -> Result<RawEntry, String> {
    parse(&read_capped(path, MAX_ENTRY_BYTES)?)
}

/// Decodes an entry's case as op case type `C` (strict: unknown keys and
/// missing fields refused).
pub fn decode_case<C: DeserializeOwned>(entry: &RawEntry) -> Result<C, String> {
    C::deserialize(&entry.case).map_err(|e| format!("the stored case is not a valid {} case: {e}", entry.op))
}

/// Entry files, and (path, why) for what is in the corpus but not an entry.
pub type Listing = (Vec<PathBuf>, Vec<(PathBuf, String)>);

/// The entry files under `root` (or `root` itself when it is not a folder),
/// sorted by path, and the problems found listing them (a folder that is not
/// an op's, a JSON file outside an op folder), each with its path.
pub fn list(root: &Path, ops: &[&str]) -> Result<Listing, String> {
    let meta = std::fs::metadata(root).map_err(|e| format!("{}: {e}", root.display()))?;
    if !meta.is_dir() {
        return Ok((vec![root.to_path_buf()], Vec::new()));
    }
    let mut files = Vec::new();
    let mut problems = Vec::new();
    let read = |dir: &Path| -> Result<Vec<PathBuf>, String> {
        let mut v = Vec::new();
        for e in std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))? {
            v.push(e.map_err(|e| format!("{}: {e}", dir.display()))?.path());
        }
        v.sort();
        Ok(v)
    };
    let is_json = |p: &Path| p.extension().is_some_and(|x| x == "json");
    // `root` may itself be one op's folder.
    let root_op = root.file_name().and_then(|n| n.to_str()).filter(|n| ops.contains(n));
    for p in read(root)? {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("").to_string();
        if root_op.is_some() {
            if is_json(&p) {
                entry_file(p, &mut files, &mut problems);
            }
        } else if p.is_dir() && ops.contains(&name.as_str()) {
            for f in read(&p)?.into_iter().filter(|f| is_json(f)) {
                entry_file(f, &mut files, &mut problems);
            }
        } else if let Some(why) = not_regular(&p).filter(|_| is_json(&p)) {
            problems.push((p, why.into()));
        } else if p.is_dir() && !name.starts_with('.') {
            problems.push((p, format!("not an op's folder (ops: {})", ops.join(", "))));
        } else if is_json(&p) {
            problems.push((p, "an entry outside an op's folder (regressions/<op>/<name>.json)".into()));
        }
    }
    files.sort();
    Ok((files, problems))
}

/// Files the listing found: a FIFO, device or socket is a problem (opening
/// it could block for ever), never read; everything else is read, and
/// reported with its path when it is not an entry.
fn entry_file(p: PathBuf, files: &mut Vec<PathBuf>, problems: &mut Vec<(PathBuf, String)>) {
    match not_regular(&p) {
        Some(why) => problems.push((p, why.into())),
        None => files.push(p),
    }
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

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("bitparity-corpus-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn entry(case: serde_json::Value) -> Entry<serde_json::Value> {
        Entry {
            op: "seqwise_loss".into(),
            property: "conformance".into(),
            subject: "bug:x".into(),
            profile: "serial".into(),
            date: today(),
            note: "a note".into(),
            classes: vec!["tiny-t".into()],
            case,
        }
    }

    #[test]
    fn save_is_idempotent_repairs_empty_files_and_keeps_other_entries() {
        let root = tmp("save");
        let e = entry(serde_json::json!({"t": 1}));
        let Saved::New(p) = save(&root, &e).unwrap() else { panic!("not new") };
        assert_eq!(save(&root, &e).unwrap(), Saved::Present(p.clone()));
        // A crash in the old in-place writer left 0-byte files behind.
        std::fs::write(&p, b"").unwrap();
        assert_eq!(save(&root, &e).unwrap(), Saved::Repaired(p.clone()));
        assert_eq!(read_entry(&p).unwrap(), e);
        // Another valid entry under the same name is never overwritten.
        let mut other = e.clone();
        other.subject = "bug:y".into();
        std::fs::write(&p, other.to_text().unwrap()).unwrap();
        let Saved::New(p2) = save(&root, &e).unwrap() else { panic!("not new") };
        assert_ne!(p2, p);
        assert_eq!(read_entry(&p).unwrap(), other);
        std::fs::remove_dir_all(root).ok();
    }

    #[test]
    fn an_entry_replay_could_not_read_is_not_saved() {
        let root = tmp("too-big");
        let e = entry(serde_json::json!({"x": "0".repeat(MAX_ENTRY_BYTES as usize)}));
        let err = save(&root, &e).unwrap_err();
        assert!(err.contains("past the 64 MiB"), "{err}");
        assert!(!root.join("seqwise_loss").exists(), "something was written");
        // A large entry within the limit is saved and reads back.
        let small = entry(serde_json::json!({"x": "0".repeat(1 << 20)}));
        let Saved::New(p) = save(&root, &small).unwrap() else { panic!("not new") };
        assert_eq!(read_entry(&p).unwrap(), small);
        std::fs::remove_dir_all(root).ok();
    }

    #[test]
    fn parsing_is_strict() {
        let text = entry(serde_json::json!({})).to_text().unwrap();
        assert!(parse(text.as_bytes()).is_ok());
        assert!(parse(b"").unwrap_err().contains("empty"));
        assert!(parse(b"{}").is_err());
        let typo = text.replace("\"note\"", "\"notes\"");
        assert!(parse(typo.as_bytes()).unwrap_err().contains("notes"));
        let dup = text.replace("\"case\": {}", "\"case\": {\"t\": 1, \"t\": 2}");
        assert!(parse(dup.as_bytes()).unwrap_err().contains("duplicate key \"t\""), "{dup}");
        let missing = text.replace(",\n  \"date\": ", ",\n  \"xdate\": ");
        assert!(parse(missing.as_bytes()).is_err());
    }

    #[test]
    fn listing_reports_what_is_not_an_entry() {
        let root = tmp("list");
        std::fs::create_dir_all(root.join("seqwise_loss/x.json")).unwrap();
        std::fs::write(root.join("seqwise_loss/a.json"), b"{}").unwrap();
        std::fs::create_dir_all(root.join("nope")).unwrap();
        std::fs::write(root.join("stray.json"), b"{}").unwrap();
        let (files, problems) = list(&root, &["seqwise_loss"]).unwrap();
        assert_eq!(files.len(), 2, "{files:?}");
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(list(&root.join("missing"), &["seqwise_loss"]).is_err());
        let (files, _) = list(&root.join("seqwise_loss"), &["seqwise_loss"]).unwrap();
        assert_eq!(files.len(), 2);
        std::fs::remove_dir_all(root).ok();
    }
}
