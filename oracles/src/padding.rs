//! The padding rule: what a padding row of an op that has them
//! (`seqwise_loss`, `router`'s fused loss) contributes. Two rules, named,
//! because two kinds of implementation exist and each is right by its own
//! contract (docs/padding.md has the formulas per op):
//!
//! - [`PaddingRule::Skip`], bitparity's (docs/ops/seqwise_loss.md#padding-rows,
//!   docs/ops/router.md#padding-rows): a padding row is never read; it adds
//!   nothing to any sum and its gradient is +0.0, whatever its values (NaN and
//!   Inf included).
//! - [`PaddingRule::Mask`], native TorchTitan's: the padding row's per-token
//!   terms are computed like a valid row's and multiplied by its mask, 0.0,
//!   before the token sum; autograd then gives the row the gradient of the
//!   same formula with g * f_e * 0.0 in place of g * f_e. IEEE arithmetic
//!   decides the rest: NaN or Inf in a padding row makes the loss NaN
//!   (NaN * 0 and Inf * 0 are NaN), and (-x) * 0 = -0.0 reaches the
//!   padding gradient.
//!
//! A valid row is the same under both (its mask is 1.0 and x * 1.0 is x,
//! bit for bit, NaN included), so only padding rows differ, and a case
//! without padding gives identical bits under both.
//!
//! The rule is what a subject claims beside its profile (a profile names
//! orders; the rule names which rows take part): the oracles take it as a
//! parameter (`forward_under`, `backward_under`), the default being `Skip`.

use crate::num::Num;
use serde::{Deserialize, Serialize};
use std::fmt;

/// How a padding row contributes to an op's outputs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PaddingRule {
    /// Never read; gradient +0.0 (bitparity's rule,
    /// docs/ops/seqwise_loss.md#padding-rows and
    /// docs/ops/router.md#padding-rows).
    #[default]
    Skip,
    /// Computed, then multiplied by the mask 0.0 (native TorchTitan's rule).
    Mask,
}

impl PaddingRule {
    pub const ALL: [PaddingRule; 2] = [PaddingRule::Skip, PaddingRule::Mask];

    /// `skip` or `mask`: the name in `bitparity.toml`, the handshake and
    /// the reports.
    pub fn name(self) -> &'static str {
        match self {
            PaddingRule::Skip => "skip",
            PaddingRule::Mask => "mask",
        }
    }

    pub fn by_name(name: &str) -> Option<PaddingRule> {
        PaddingRule::ALL.into_iter().find(|r| r.name() == name)
    }

    pub fn is_skip(&self) -> bool {
        *self == PaddingRule::Skip
    }
}

impl fmt::Display for PaddingRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A padding row's term times its mask: x * +0.0, rounded as every product
/// is (+-0.0 for a finite x, its sign IEEE's; NaN for NaN or +-Inf). A valid
/// row's mask, 1.0, is never multiplied in: x * 1.0 is x exactly, and on the
/// bounded value types the product would only widen the bound.
pub fn masked<N: Num>(x: &N) -> N {
    x.mul(&N::zero())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rules' names are what `bitparity.toml`, the handshake and the
    /// reports say (written out here), and each is found again.
    #[test]
    fn the_rules_are_named_as_configured() {
        assert_eq!(PaddingRule::Skip.name(), "skip");
        assert_eq!(PaddingRule::Mask.name(), "mask");
        assert_eq!(PaddingRule::Mask.to_string(), "mask");
        for r in PaddingRule::ALL {
            assert_eq!(PaddingRule::by_name(r.name()), Some(r));
        }
        assert_eq!(PaddingRule::by_name("xyzzy"), None);
        assert!(PaddingRule::Skip.is_skip() && !PaddingRule::Mask.is_skip());
    }
}
