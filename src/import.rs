//! `bitparity import <artifact>`: a fuzz artifact (the raw bytes libFuzzer
//! saved, minimized or not) becomes a corpus entry.
//!
//! The bytes become a case exactly as the fuzz target made it
//! ([`crate::harness::from_fuzz_bytes`]), the target's checks run in the
//! target's order ([`first_failure`]) to find the property and subject that
//! fail, and the runner shrinks and saves that one failure
//! ([`crate::runner::record_failure`]).

use crate::fuzzing::{first_failure, select_subjects, Direction, Failure, Names};
use crate::harness::{from_fuzz_bytes, Harness};
use crate::runner::{record_failure, FailureRecord, Found, SavePolicy};
use std::path::Path;

/// The most bytes `import` reads: libFuzzer's inputs are far smaller
/// (its `-max_len` defaults to 4096; our generator's draws fit in 160 KiB).
pub const MAX_ARTIFACT_BYTES: u64 = 1 << 20;

/// What was imported.
#[derive(Clone, Debug)]
pub struct Imported {
    pub target: String,
    pub failure: Failure,
    pub record: FailureRecord,
}

/// Why nothing was imported.
#[derive(Clone, Debug)]
pub enum ImportError {
    /// A usage or input error (exit 2).
    Usage(String),
    /// The artifact's case passes every check (exit 1: nothing to keep).
    NoFailure(String),
}

/// Imports an artifact's bytes for op `O`, trying the given directions in
/// order (the artifact's own target first when known).
pub fn import<O: Harness>(
    artifact: &Path,
    bytes: &[u8],
    dirs: &[Direction],
    subject: Option<Names<'_>>,
    corpus: &Path,
) -> Result<Imported, ImportError> {
    let (subjects, _) = select_subjects::<O>(subject).map_err(ImportError::Usage)?;
    let case = from_fuzz_bytes::<O>(bytes);
    let target = |d: Direction| format!("{}_{}", O::FUZZ_PREFIX, d.suffix());
    let Some((dir, failure)) = dirs.iter().find_map(|&d| first_failure::<O>(d, &case, &subjects).map(|f| (d, f)))
    else {
        let names: Vec<String> = subjects.iter().map(|s| s.name()).collect();
        let targets: Vec<String> = dirs.iter().map(|&d| target(d)).collect();
        return Err(ImportError::NoFailure(format!(
            "{}: the artifact does not fail: its case ({}) passes every check of {} for subjects {}; \
             nothing imported (was it found against another subject? try --subject)",
            artifact.display(),
            crate::runner::shape::<O>(&case),
            targets.join(" and "),
            names.join(", ")
        )));
    };
    let policy =
        SavePolicy { store: Some(std::sync::Arc::new(crate::corpus::Store::new(corpus.to_path_buf()))), planted: true };
    let record = record_failure::<O>(
        Found {
            property: failure.step.property(),
            subject: &failure.subject,
            profile: &failure.profile,
            case: &case,
            case_index: None,
            seed: None,
            note_prefix: format!("fuzz {}: ", target(dir)),
            first_message: Some(failure.message.clone()),
            stop: None,
        },
        &subjects,
        &policy,
        crate::shrink::BUDGET,
    );
    Ok(Imported { target: target(dir), failure, record })
}
