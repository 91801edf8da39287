//! Subjects: anything that computes an op. The profile oracle, a planted bug,
//! a CUDA kernel: the properties judge them all the same way.

use oracles::case::router::RouterError;
use oracles::case::seqwise_loss::{SeqwiseBackward, SeqwiseCase, SeqwiseError, SeqwiseForward};
use oracles::profile::seqwise_loss::SeqwiseProfile;
use thiserror::Error;

/// Why a subject returned no result.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum SubjectError {
    /// The case is invalid: the subject must refuse it (fail closed).
    #[error("invalid input: {0}")]
    Invalid(#[from] SeqwiseError),
    /// A `router` case is invalid: the subject must refuse it (fail closed).
    #[error("invalid input: {0}")]
    InvalidRouter(#[from] RouterError),
    /// The subject cannot run here (no GPU, no driver, no NVRTC).
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// The subject ran and failed (a CUDA error, a kernel that did not compile).
    #[error("device error: {0}")]
    Device(String),
}

/// Anything that computes `seqwise_loss`.
pub trait SeqwiseSubject: Send + Sync {
    /// A short name, used on the command line and in reports (`oracle:serial`,
    /// `cuda`, `bug:fma-quotient`).
    fn name(&self) -> String;
    /// The numeric profile whose bits this subject claims to produce.
    fn profile(&self) -> SeqwiseProfile;
    fn forward(&self, case: &SeqwiseCase) -> Result<SeqwiseForward<f32>, SubjectError>;
    fn backward(&self, case: &SeqwiseCase) -> Result<SeqwiseBackward<f32>, SubjectError>;
}

/// The profile oracle of one profile, as a subject.
pub struct ProfileOracle(pub SeqwiseProfile);

impl SeqwiseSubject for ProfileOracle {
    fn name(&self) -> String {
        format!("oracle:{}", self.0.name)
    }
    fn profile(&self) -> SeqwiseProfile {
        self.0.clone()
    }
    fn forward(&self, case: &SeqwiseCase) -> Result<SeqwiseForward<f32>, SubjectError> {
        case.validate()?;
        Ok(oracles::profile_oracle::seqwise_loss::forward(case, &self.0)?)
    }
    fn backward(&self, case: &SeqwiseCase) -> Result<SeqwiseBackward<f32>, SubjectError> {
        case.validate()?;
        Ok(oracles::profile_oracle::seqwise_loss::backward(case, &self.0)?)
    }
}

pub mod cuda;
pub mod cuda_router;
pub mod planted;

use std::sync::Arc;

/// The subjects that run here, and the suites that cannot, with the reason.
pub struct Available {
    pub subjects: Vec<Arc<dyn SeqwiseSubject>>,
    /// (subject, reason)
    pub skipped: Vec<(String, String)>,
}

/// The correct subjects: the profile oracle and the kernel model of every
/// shipped profile, and the CUDA kernels where a GPU is found.
pub fn available() -> Available {
    let mut subjects: Vec<Arc<dyn SeqwiseSubject>> = Vec::new();
    for p in SeqwiseProfile::all() {
        subjects.push(Arc::new(ProfileOracle(p.clone())));
        subjects.push(Arc::new(planted::KernelModel::new(p)));
    }
    let mut skipped = Vec::new();
    match cuda::probe() {
        Ok(c) => subjects.push(Arc::new(c)),
        Err(reason) => skipped.push(("cuda".to_string(), reason)),
    }
    Available { subjects, skipped }
}

/// Subjects by name: `all` (every available one), `oracle:<profile>`,
/// `model:<profile>`, `cuda`, `bug:<name>`, `bugs` (every planted bug).
pub fn resolve(name: &str) -> Result<Vec<Arc<dyn SeqwiseSubject>>, String> {
    let profile = |p: &str| {
        SeqwiseProfile::by_name(p).ok_or_else(|| {
            let names: Vec<String> = SeqwiseProfile::all().into_iter().map(|p| p.name).collect();
            format!("unknown profile {p:?} (known: {})", names.join(", "))
        })
    };
    let one = |s: Arc<dyn SeqwiseSubject>| Ok(vec![s]);
    match name {
        "all" => Ok(available().subjects),
        "bugs" => Ok(planted::KernelModel::all_planted()
            .into_iter()
            .map(|m| Arc::new(m) as Arc<dyn SeqwiseSubject>)
            .collect()),
        "cuda" => cuda::probe().map(|c| vec![Arc::new(c) as Arc<dyn SeqwiseSubject>]).map_err(|r| format!("cuda: {r}")),
        _ => {
            if let Some(p) = name.strip_prefix("oracle:") {
                one(Arc::new(ProfileOracle(profile(p)?)))
            } else if let Some(p) = name.strip_prefix("model:") {
                one(Arc::new(planted::KernelModel::new(profile(p)?)))
            } else if let Some(b) = name.strip_prefix("bug:") {
                let bug = planted::Bug::by_name(b).ok_or_else(|| {
                    let names: Vec<&str> = planted::Bug::ALL.iter().map(|b| b.name()).collect();
                    format!("unknown planted bug {b:?} (known: {})", names.join(", "))
                })?;
                one(Arc::new(planted::KernelModel::planted(bug)))
            } else {
                Err(format!(
                    "unknown subject {name:?}: use all, cuda, bugs, oracle:<profile>, model:<profile> or bug:<name>"
                ))
            }
        }
    }
}
