//! `bitparity import <artifact>`: a fuzz artifact (the raw bytes libFuzzer
//! saved, minimized or not) becomes a corpus entry.
//!
//! The bytes are turned into a case exactly as the fuzz targets do
//! ([`from_fuzz_bytes`]), the target's checks are run in the target's order
//! ([`first_failure`]) to find the property and subject that fail, the case
//! is shrunk against that one failure, and the shrunk case is saved as an
//! [`Entry`] (exact hex floats), which `cargo test` and `bitparity replay`
//! replay from then on.

use crate::corpus::{CorpusError, Entry};
use crate::fuzzing::{first_failure, select_subjects, still_fails, Failure, Target, SUBJECT_ENV};
use crate::gen::seqwise_loss::{from_fuzz_bytes, shrink};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use thiserror::Error;

/// Candidates the shrinker tries (as `bitparity check` does).
pub const SHRINK_BUDGET: usize = 20_000;

/// What to import.
#[derive(Clone, Debug)]
pub struct ImportRequest {
    pub artifact: PathBuf,
    /// Subjects, comma separated (`bug:fma-quotient`); `None`: the
    /// `BITPARITY_FUZZ_SUBJECT` variable, else every available correct subject.
    pub subject: Option<String>,
    /// The target that produced the artifact; `None`: read off the artifact's
    /// folder (`fuzz/artifacts/<target>/`), else both, loss_bwd first.
    pub target: Option<Target>,
    /// The corpus root (`regressions`).
    pub corpus: PathBuf,
}

/// What was imported.
#[derive(Clone, Debug)]
pub struct Imported {
    pub path: PathBuf,
    /// The corpus already held this entry (the same shrunk case, property
    /// and subject): it was kept as it was.
    pub existed: bool,
    pub target: Target,
    pub failure: Failure,
    /// T x E before and after shrinking.
    pub original: (usize, usize),
    pub shrunk: (usize, usize),
}

#[derive(Debug, Error)]
pub enum ImportError {
    #[error("cannot read the artifact {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{0}")]
    Subject(String),
    #[error(
        "{path}: the artifact does not fail: its case (T x E = {t} x {e}) passes every check of {targets} \
         for subjects {subjects}; nothing imported (was it found against another subject? try --subject)"
    )]
    NoFailure { path: PathBuf, t: usize, e: usize, targets: String, subjects: String },
    #[error("saving the entry: {0}")]
    Save(#[from] CorpusError),
}

/// The target named by the artifact's folder (`.../loss_bwd/crash-...`).
pub fn target_of(artifact: &Path) -> Option<Target> {
    artifact.parent()?.file_name()?.to_str().and_then(Target::by_name)
}

/// Imports one artifact.
pub fn import(req: &ImportRequest) -> Result<Imported, ImportError> {
    let bytes =
        std::fs::read(&req.artifact).map_err(|source| ImportError::Read { path: req.artifact.clone(), source })?;
    let spec = req.subject.clone().or_else(|| std::env::var(SUBJECT_ENV).ok());
    let (subjects, _skipped) = select_subjects(spec.as_deref()).map_err(ImportError::Subject)?;
    let targets: Vec<Target> = match req.target.or_else(|| target_of(&req.artifact)) {
        Some(t) => vec![t],
        None => vec![Target::LossBwd, Target::LossFwd],
    };
    let case = from_fuzz_bytes(&bytes);
    let found = targets.iter().find_map(|&t| first_failure(t, &case, &subjects).map(|f| (t, f)));
    let Some((target, failure)) = found else {
        let names: Vec<String> = subjects.iter().map(|s| s.name()).collect();
        let targets: Vec<&str> = targets.iter().map(|t| t.name()).collect();
        return Err(ImportError::NoFailure {
            path: req.artifact.clone(),
            t: case.t,
            e: case.e,
            targets: targets.join(" and "),
            subjects: names.join(", "),
        });
    };
    let shrunk = shrink(&case, |c| still_fails(failure.step, &failure.subject, c, &subjects), SHRINK_BUDGET);
    // The entry stores the message of the shrunk case, which is what replay shows.
    let message = match first_step_message(&failure, &shrunk, &subjects) {
        Some(m) => m,
        None => failure.message.clone(),
    };
    let note = format!("fuzz {}: {message}", target.name());
    let entry = Entry::new(failure.step.property(), &failure.subject, &failure.profile, &note, shrunk.clone());
    let existed = req.corpus.join(&entry.op).join(entry.file_name()).exists();
    let path = entry.save(&req.corpus)?;
    Ok(Imported {
        path,
        existed,
        target,
        failure: Failure { message, ..failure },
        original: (case.t, case.e),
        shrunk: (shrunk.t, shrunk.e),
    })
}

fn first_step_message(
    f: &Failure,
    case: &oracles::case::seqwise_loss::SeqwiseCase,
    subjects: &[std::sync::Arc<dyn crate::subject::SeqwiseSubject>],
) -> Option<String> {
    let mut refs = crate::props::seqwise_loss::References::default();
    let any = crate::subject::ProfileOracle(oracles::profile::seqwise_loss::SeqwiseProfile::serial());
    let s = subjects.iter().find(|s| s.name() == f.subject).map(|s| s.as_ref()).unwrap_or(&any);
    f.step.judge(s, case, &mut refs).failure
}

/// The `bitparity import` command: prints the saved entry's path on stdout,
/// what failed on stderr; exit 1 when the artifact does not fail, 2 on a
/// usage or I/O error.
pub fn cmd_import(artifact: PathBuf, subject: Option<String>, target: Option<String>, corpus: PathBuf) -> ExitCode {
    let target = match target.as_deref().map(|t| Target::by_name(t).ok_or(t)) {
        None => None,
        Some(Ok(t)) => Some(t),
        Some(Err(t)) => {
            eprintln!("error: unknown fuzz target {t:?} (known: loss_fwd, loss_bwd)");
            return ExitCode::from(2);
        }
    };
    let req = ImportRequest { artifact, subject, target, corpus };
    match import(&req) {
        Ok(i) => {
            eprintln!(
                "{}: {} fails {} ({}); shrunk from T x E = {} x {} to {} x {}",
                i.target.name(),
                i.failure.subject,
                i.failure.step.property(),
                i.failure.message,
                i.original.0,
                i.original.1,
                i.shrunk.0,
                i.shrunk.1
            );
            if i.existed {
                eprintln!("the corpus already holds this shrunk case for this property and subject; kept as it was");
            }
            println!("{}", i.path.display());
            ExitCode::SUCCESS
        }
        Err(e @ ImportError::NoFailure { .. }) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("bitparity-import-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&d).ok();
        d
    }

    /// Bytes whose case fails `subject` under `target`, searched over short inputs.
    fn failing_bytes(target: Target, subject: &str) -> Vec<u8> {
        let (subjects, _) = select_subjects(Some(subject)).unwrap();
        (0u32..20_000)
            .map(|i| {
                let mut x = i.wrapping_mul(2_654_435_761) ^ 0x9e37_79b9;
                (0..64)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 17;
                        x ^= x << 5;
                        x as u8
                    })
                    .collect::<Vec<u8>>()
            })
            .find(|b| first_failure(target, &from_fuzz_bytes(b), &subjects).is_some())
            .expect("some short input fails the planted bug")
    }

    #[test]
    fn imports_a_planted_failure_and_it_replays() {
        let dir = tmp("ok");
        let artifact = dir.join("crash-1");
        std::fs::write(&artifact, failing_bytes(Target::LossBwd, "bug:offset-ignored")).unwrap();
        let req = ImportRequest {
            artifact,
            subject: Some("bug:offset-ignored".into()),
            target: Some(Target::LossBwd),
            corpus: dir.join("corpus"),
        };
        let i = import(&req).unwrap();
        assert!(i.shrunk.0 * i.shrunk.1 <= i.original.0 * i.original.1);
        let entry = Entry::load(&i.path).unwrap();
        assert_eq!(entry.subject, "bug:offset-ignored");
        let results = crate::corpus::replay(&entry, &crate::subject::available().subjects);
        assert!(results.iter().all(|r| r.ok()), "{results:?}");
        assert!(results.iter().any(|r| r.must_fail));
        std::fs::remove_dir_all(dir).ok();
    }

    #[test]
    fn a_passing_artifact_and_a_missing_file_are_errors() {
        let dir = tmp("err");
        let artifact = dir.join("empty");
        std::fs::write(&artifact, b"").unwrap();
        let mut req =
            ImportRequest { artifact, subject: Some("oracle:serial".into()), target: None, corpus: dir.join("corpus") };
        assert!(matches!(import(&req), Err(ImportError::NoFailure { .. })));
        req.artifact = dir.join("no-such-file");
        assert!(matches!(import(&req), Err(ImportError::Read { .. })));
        req.subject = Some("bug:no-such-bug".into());
        req.artifact = dir.join("empty");
        assert!(matches!(import(&req), Err(ImportError::Subject(_))));
        assert!(!dir.join("corpus").exists());
        std::fs::remove_dir_all(dir).ok();
    }

    #[test]
    fn the_target_is_read_off_the_artifact_folder() {
        assert_eq!(target_of(Path::new("fuzz/artifacts/loss_fwd/crash-abc")), Some(Target::LossFwd));
        assert_eq!(target_of(Path::new("crash-abc")), None);
    }
}
