//! Profiles of `router`: the order of the route-norm sum, of the route
//! gradient's q, and the orders of the fused `seqwise_loss` gradient.

use super::seqwise_loss::SeqwiseProfile;
use crate::order::ReductionOrder::{self, Serial};
use serde::{Deserialize, Serialize};

/// The order of every sum `router` performs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouterProfile {
    pub name: String,
    /// Over the k chosen experts of a token: D = sum_j w_j (+ 1e-20 after).
    pub norm: ReductionOrder,
    /// Over the k chosen experts, in the backward: q.
    pub q: ReductionOrder,
    /// The fused loss gradient's orders: its `row` (n_t over E) and `q`
    /// (q_t over E); its token sums are not used by a backward.
    pub loss: SeqwiseProfile,
}

impl RouterProfile {
    /// Every sum serial, ascending.
    pub fn serial() -> Self {
        RouterProfile { name: "serial".into(), norm: Serial, q: Serial, loss: SeqwiseProfile::serial() }
    }

    /// The profile of the CUDA kernels (kernels/router.cu): one warp per
    /// token; the k chosen weights summed serially by one lane (k is small);
    /// the fused loss in the `warp32-chunk64` orders of kernels/seqwise_loss.cu.
    pub fn gpu() -> Self {
        RouterProfile { name: "warp32".into(), norm: Serial, q: Serial, loss: SeqwiseProfile::gpu() }
    }

    /// Every sum in no known order, the fused loss's too (see
    /// [`SeqwiseProfile::any_order`]).
    pub fn any_order() -> Self {
        RouterProfile {
            name: crate::vocab::ANY_ORDER.into(),
            norm: ReductionOrder::Any,
            q: ReductionOrder::Any,
            loss: SeqwiseProfile::any_order(),
        }
    }

    /// Every shipped profile.
    pub fn all() -> Vec<Self> {
        vec![Self::serial(), Self::gpu()]
    }

    pub fn by_name(name: &str) -> Option<Self> {
        Self::all().into_iter().find(|p| p.name == name)
    }

    pub fn validate(&self) -> Result<(), String> {
        for o in [&self.norm, &self.q] {
            o.validate().map_err(|e| format!("profile {}: {e}", self.name))?;
        }
        self.loss.validate()
    }
}

impl crate::op::Profile for RouterProfile {
    fn name(&self) -> &str {
        &self.name
    }
    fn validate(&self) -> Result<(), String> {
        RouterProfile::validate(self)
    }
}
