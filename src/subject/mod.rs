//! Subjects: anything that computes an op. The profile oracle, a planted bug,
//! a CUDA kernel: the properties judge them all the same way.

use oracles::case::seqwise_loss::{SeqwiseBackward, SeqwiseCase, SeqwiseError, SeqwiseForward};
use oracles::profile::seqwise_loss::SeqwiseProfile;
use thiserror::Error;

/// Why a subject returned no result.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum SubjectError {
    /// The case is invalid: the subject must refuse it (fail closed).
    #[error("invalid input: {0}")]
    Invalid(#[from] SeqwiseError),
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
        Ok(oracles::profile_oracle::seqwise_loss::forward(case, &self.0))
    }
    fn backward(&self, case: &SeqwiseCase) -> Result<SeqwiseBackward<f32>, SubjectError> {
        case.validate()?;
        Ok(oracles::profile_oracle::seqwise_loss::backward(case, &self.0))
    }
}

pub mod cuda;
pub mod planted;
