//! The subject names of a command line (`--subject`), per op: which name
//! gives which subjects, which an op does not have, which cannot run here.
//! The grammar itself (`oracle:<profile>`, `bug:<name>`, `anyorder:...`,
//! `exec:...`) is the harness's [`crate::harness::resolve_named`]: these
//! names were typed by the user, so they may start an external subject.

use crate::harness::{available, resolve_named, Harness, OpCommand, ResolveError};
use crate::subject::{Skip, SubjectRef};

/// How the subject names of a command resolve for one op.
#[derive(Clone, Debug, Default)]
pub(crate) struct Resolution {
    /// Names that gave subjects here.
    pub(crate) found: Vec<String>,
    /// Names this op has no subject of (fine when another op has), with
    /// why.
    pub(crate) unknown: Vec<(String, String)>,
    /// Names that exist but cannot run here (no GPU).
    pub(crate) unavailable: Vec<Skip>,
}

/// Resolves `names` for an op.
pub(crate) struct ResolveNames<'a>(pub(crate) &'a [String]);

impl OpCommand for ResolveNames<'_> {
    type Output = Resolution;
    fn run<O: Harness>(self) -> Resolution {
        let mut r = Resolution::default();
        for n in self.0 {
            match resolve_named::<O>(n) {
                Ok(_) => r.found.push(n.clone()),
                Err(ResolveError::Unknown(m)) => r.unknown.push((n.clone(), m)),
                Err(ResolveError::Unavailable(m)) => r.unavailable.push(Skip { suite: n.clone(), reason: m }),
            }
        }
        r
    }
}

/// The subjects `names` give for op `O` (each once), or every available
/// correct subject and the suites that cannot run here when none is named.
pub(crate) fn subjects<O: Harness>(names: &[String]) -> (Vec<SubjectRef<O>>, Vec<Skip>) {
    if names.is_empty() {
        let a = available::<O>();
        return (a.subjects, a.skipped);
    }
    let mut subjects: Vec<SubjectRef<O>> = Vec::new();
    for n in names {
        if let Ok(s) = resolve_named::<O>(n) {
            for x in s {
                if !subjects.iter().any(|y| y.name() == x.name()) {
                    subjects.push(x);
                }
            }
        }
    }
    (subjects, Vec::new())
}
