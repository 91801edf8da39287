//! Subjects: anything that computes an op. The profile oracle, a kernel model,
//! a planted bug, a CUDA kernel: the properties judge them all the same way.

pub mod cuda;

use oracles::op::{self, Op};
use oracles::padding::PaddingRule;
use oracles::vocab::ClampTie;
use std::fmt;
use std::sync::Arc;
use thiserror::Error;

/// Why a subject returned no result.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum SubjectError {
    /// The case is invalid: the subject must refuse it (fail closed).
    #[error("invalid input: {0}")]
    Invalid(String),
    /// The subject cannot run this case here (no GPU, a shape its kernels
    /// do not support).
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// The subject ran and failed: a CUDA error, or kernels that broke
    /// their launch contract (a ticket left for the next launch, a map byte
    /// other than 0 or 1).
    #[error("device error: {0}")]
    Device(String),
    /// An external subject's process crashed, hung past its timeout, or
    /// broke the protocol (garbage, a reply of the wrong size): what
    /// happened, how it ended, its last stderr lines. Always a failure.
    #[error("crashed: {0}")]
    Crashed(String),
    /// A device subject wrote outside its buffers (a guard zone changed:
    /// `subject::cuda::guard`). Always a failure.
    #[error("out of bounds: {0}")]
    OutOfBounds(String),
}

/// What kind of implementation a subject is: it decides which properties can
/// say anything about it (a property that cannot fail on a subject is
/// reported `n/a`, never counted as passed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SubjectKind {
    /// The profile oracle itself: conformance would compare it with itself,
    /// it reads the case's logical values (no memory layout), and it is a pure
    /// function.
    Oracle,
    /// A CPU implementation written as a kernel is (the kernel model, planted
    /// bugs): it reads strided storage, and it is a pure function.
    Model,
    /// Code on a device (a CUDA kernel): every property applies.
    Device,
    /// Another program, judged through the protocol of `docs/protocol.md`
    /// (`exec:`): it reads strided storage and may be nondeterministic, so
    /// every property applies.
    External,
}

/// Anything that computes op `O`.
pub trait Subject<O: Op>: Send + Sync {
    /// A short name, used on the command line and in reports (`oracle:serial`,
    /// `cuda`, `bug:fma-quotient`).
    fn name(&self) -> String;
    /// The numeric profile whose bits this subject claims to produce; `None`
    /// for a subject that claims none (judged by accuracy and the
    /// metamorphic properties only).
    fn profile(&self) -> Option<O::Profile>;
    /// The padding rule it claims (`oracles::padding`, docs/padding.md): what
    /// its padding rows are judged by. Every built-in subject (the oracles, the
    /// models, the planted bugs, CUDA) implements bitparity's `skip`; an
    /// external one says in its handshake.
    fn padding(&self) -> PaddingRule {
        PaddingRule::Skip
    }
    /// The clamp tie rule it implements, when it implements one only
    /// (`Op::with_clamp_tie`): every property judges it on each case with
    /// the case's `clamp_tie` set to this. `None` (every built-in subject):
    /// it follows each case's own rule.
    fn clamp_tie(&self) -> Option<ClampTie> {
        None
    }
    fn kind(&self) -> SubjectKind;
    /// Why this subject can judge nothing more in this run (an external one
    /// hung, the process's GPU context lost); `None` while it works. A lost
    /// subject's failures are kept as found, not shrunk against it.
    fn lost(&self) -> Option<String> {
        None
    }
    fn forward(&self, case: &O::Case) -> Result<O::Fwd<f32>, SubjectError>;
    fn backward(&self, case: &O::Case) -> Result<O::Bwd<f32>, SubjectError>;
}

/// A shared subject.
pub type SubjectRef<O> = Arc<dyn Subject<O>>;

/// The profile oracle of one profile, as a subject.
pub struct ProfileOracle<O: Op>(pub O::Profile);

impl<O: Op> Subject<O> for ProfileOracle<O> {
    fn name(&self) -> String {
        format!("oracle:{}", oracles::op::Profile::name(&self.0))
    }
    fn profile(&self) -> Option<O::Profile> {
        Some(self.0.clone())
    }
    fn kind(&self) -> SubjectKind {
        SubjectKind::Oracle
    }
    fn forward(&self, case: &O::Case) -> Result<O::Fwd<f32>, SubjectError> {
        O::validate(case).map_err(invalid)?;
        op::forward::<O>(case, &self.0).map_err(invalid)
    }
    fn backward(&self, case: &O::Case) -> Result<O::Bwd<f32>, SubjectError> {
        O::validate(case).map_err(invalid)?;
        op::backward::<O>(case, &self.0).map_err(invalid)
    }
}

/// The prefix of a subject's name seen as claiming no profile
/// ([`AnyOrderSubject`]): `anyorder:model:serial`, `anyorder:bug:split-k`.
pub const ANY_ORDER_PREFIX: &str = "anyorder:";

/// A subject with its profile hidden: judged as a subject that claims no
/// profile is (PyTorch eager, cuBLAS, a user's Triton kernel): accuracy and
/// gradient within the bound of every admissible evaluation (any order and
/// association of every sum, products possibly contracted into FMAs;
/// `oracles::any_order`), every metamorphic property, no conformance. It
/// shows what such a subject is held to: a correct subject in any order
/// passes, a wrong formula fails. Its name is the wrapped one's with
/// [`ANY_ORDER_PREFIX`].
pub struct AnyOrderSubject<O: Op>(pub SubjectRef<O>);

impl<O: Op> Subject<O> for AnyOrderSubject<O> {
    fn name(&self) -> String {
        format!("{ANY_ORDER_PREFIX}{}", self.0.name())
    }
    fn profile(&self) -> Option<O::Profile> {
        None
    }
    fn padding(&self) -> PaddingRule {
        self.0.padding()
    }
    fn clamp_tie(&self) -> Option<ClampTie> {
        self.0.clamp_tie()
    }
    fn kind(&self) -> SubjectKind {
        self.0.kind()
    }
    fn lost(&self) -> Option<String> {
        self.0.lost()
    }
    fn forward(&self, case: &O::Case) -> Result<O::Fwd<f32>, SubjectError> {
        self.0.forward(case)
    }
    fn backward(&self, case: &O::Case) -> Result<O::Bwd<f32>, SubjectError> {
        self.0.backward(case)
    }
}

/// The planted bug a subject name stands for (`bug:<name>`, or the same
/// seen as claiming no profile, `anyorder:bug:<name>`): its `<name>`.
pub fn planted_name(subject: &str) -> Option<&str> {
    subject.strip_prefix(ANY_ORDER_PREFIX).unwrap_or(subject).strip_prefix("bug:")
}

/// A kernel model's refusal as a subject's: an invalid case stays invalid; a
/// profile the model does not implement makes it unavailable for the case.
pub fn model_error(e: crate::model::ModelError) -> SubjectError {
    match e {
        crate::model::ModelError::Invalid(m) => SubjectError::Invalid(m),
        crate::model::ModelError::Unsupported(m) => SubjectError::Unavailable(m),
    }
}

/// An op's validation error as a subject's refusal.
pub fn invalid(e: impl fmt::Display) -> SubjectError {
    SubjectError::Invalid(e.to_string())
}

/// Why a subject name gave no subject.
#[derive(Clone, Debug, PartialEq)]
pub enum ResolveError {
    /// No such subject for this op (a usage error).
    Unknown(String),
    /// It exists but cannot run here (no GPU): the run must not pass.
    Unavailable(String),
}

impl fmt::Display for ResolveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResolveError::Unknown(m) | ResolveError::Unavailable(m) => f.write_str(m),
        }
    }
}

/// A suite that cannot run here, and why.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Skip {
    pub suite: String,
    pub reason: String,
}

/// The subjects that run here, and the suites that cannot.
pub struct Available<O: Op> {
    pub subjects: Vec<SubjectRef<O>>,
    pub skipped: Vec<Skip>,
}
