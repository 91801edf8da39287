//! Properties (SPEC section 6): each judges one subject on one case.

pub mod seqwise_loss;

use serde::{Deserialize, Serialize};
use std::fmt;

/// The properties of SPEC section 6.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Property {
    /// Tier A: forward outputs within the profile's rigorous bound of MPFR.
    Accuracy,
    /// Tier A: the analytic derivative against high-precision finite
    /// differences (subject `mpfr`), and the backward within its bound of it.
    Gradient,
    /// Tier A: every invalid input gets an error; nothing panics.
    Validation,
    /// Tier A/B: appended padding rows and NaN/Inf-poisoned padding change no bit.
    Padding,
    /// Tier B (tier A for CPU subjects): bitwise equal to the profile oracle.
    Conformance,
    /// Tier B: the same values at another offset or row stride give the same bits.
    OffsetStride,
    /// Tier B: two runs give identical bits.
    Determinism,
}

impl Property {
    pub const ALL: [Property; 7] = [
        Property::Conformance,
        Property::Padding,
        Property::OffsetStride,
        Property::Determinism,
        Property::Validation,
        Property::Accuracy,
        Property::Gradient,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Property::Accuracy => "accuracy",
            Property::Gradient => "gradient",
            Property::Validation => "validation",
            Property::Padding => "padding",
            Property::Conformance => "conformance",
            Property::OffsetStride => "offset-stride",
            Property::Determinism => "determinism",
        }
    }
    pub fn by_name(s: &str) -> Option<Property> {
        Property::ALL.into_iter().find(|p| p.name() == s)
    }
}

impl fmt::Display for Property {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
