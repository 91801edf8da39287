//! `bitparity import`: a fuzz artifact judged as its target judged it, and
//! the failure it shows shrunk and saved as a corpus entry.

use super::output::emit;
use super::Outcome;
use crate::fsio::{check_folder_writable, read_capped};
use crate::fuzzing::{target_name, target_of, Direction, Names};
use crate::harness::registry::{with_op, OPS};
use crate::harness::{Harness, OpCommand};
use crate::import::{ImportError, Imported, MAX_ARTIFACT_BYTES};
use crate::knobs;
use crate::runner::SaveNote;
use std::path::Path;

/// Imports an artifact for an op, in one direction.
struct ImportOp<'a> {
    artifact: &'a Path,
    bytes: &'a [u8],
    dir: Direction,
    subject: Option<Names<'a>>,
    corpus: &'a Path,
}

impl OpCommand for ImportOp<'_> {
    type Output = Result<Imported, ImportError>;
    fn run<O: Harness>(self) -> Result<Imported, ImportError> {
        crate::import::import::<O>(self.artifact, self.bytes, &[self.dir], self.subject, self.corpus)
    }
}

/// Every fuzz target, as (op, direction): backward first (its checks
/// include the forward's conformance).
fn all_targets() -> Vec<(&'static str, Direction)> {
    OPS.into_iter().flat_map(|o| [(o, Direction::Backward), (o, Direction::Forward)]).collect()
}

pub(super) fn run(artifact: &Path, subject: Option<String>, target: Option<String>, corpus_root: &Path) -> Outcome {
    let targets = match target.as_deref() {
        Some(t) => vec![target_of(t).ok_or_else(|| {
            let known: Vec<String> = all_targets().into_iter().filter_map(|(o, d)| target_name(o, d)).collect();
            format!("unknown fuzz target {:?} (known: {})", crate::escape::visible(t), known.join(", "))
        })?],
        None => match artifact.parent().and_then(|d| d.file_name()).and_then(|n| n.to_str()).and_then(target_of) {
            Some(t) => vec![t],
            None => all_targets(),
        },
    };
    let bytes = read_capped(artifact, MAX_ARTIFACT_BYTES)?;
    check_folder_writable(corpus_root, &OPS)?;
    let env_subject = std::env::var(knobs::FUZZ_SUBJECT).ok();
    let subject = match (&subject, &env_subject) {
        (Some(s), _) => Some(Names::CommandLine(s)),
        (None, Some(s)) => Some(Names::Environment(s)),
        (None, None) => None,
    };
    let mut last = None;
    for (op, dir) in targets {
        let Some(result) = with_op(op, ImportOp { artifact, bytes: &bytes, dir, subject, corpus: corpus_root }) else {
            continue;
        };
        match result {
            Ok(i) => {
                let r = &i.record;
                eprintln!(
                    "{}: {} fails {} ({}); shrunk from {} to {}",
                    i.target, r.subject, r.property, r.message, r.original_shape, r.shrunk_shape
                );
                eprint!("{}", crate::escape::visible_lines(&r.text()));
                return match &r.save {
                    SaveNote::Saved { path } | SaveNote::Repaired { path } | SaveNote::Known { path } => {
                        emit(&format!("{}\n", path.display()));
                        Ok(0)
                    }
                    SaveNote::NotSaved { reason } => Err(format!("the entry was not saved: {reason}")),
                };
            }
            Err(ImportError::Usage(m)) => {
                // A subject name may belong to another op's target.
                last = Some(Err(m));
            }
            Err(ImportError::NoFailure(m)) => last = Some(Ok(m)),
        }
    }
    match last {
        Some(Ok(m)) => {
            eprintln!("error: {}", crate::escape::visible_lines(&m));
            Ok(1)
        }
        Some(Err(m)) => Err(m),
        None => Err("no fuzz target to judge the artifact with".into()),
    }
}
