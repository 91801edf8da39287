//! Profiles of `shared_expert`: the order of each of its four dot products.
//!
//! Every product is rounded on its own before it is added (no contraction): a
//! bf16 x bf16 product is exact in f32 unless it falls below 2^-126, where an
//! FMA would differ (docs/ops/shared_expert.md#forward). A fused kernel
//! declares a profile of its own (`serial-fma`), which this type does not
//! describe yet.

use crate::order::ReductionOrder::{self, Serial};
use serde::{Deserialize, Serialize};

/// What the seed (RL-Kernel's strict providers) calls the `serial` profile:
/// split-K 1, serial ascending K, mul then add, no workspace
/// (docs/ops/shared_expert.md#profiles).
pub const SEED_SERIAL: &str = "oracle-fp32-serial-v1";

/// The order of every sum `shared_expert` performs. Each is a dot product
/// whose terms (products, rounded separately) are listed by ascending inner
/// index and reduced in the named order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharedExpertProfile {
    pub name: String,
    /// `z[t][r] = sum over i < H of x[t][i] * w1[r][i]` (gate rows r < F, up
    /// rows F..2F alike).
    pub z: ReductionOrder,
    /// The forward's `y[t][i] = sum over j < F of h[t][j] * w2[i][j]`.
    pub y: ReductionOrder,
    /// The backward's `dh[t][j] = sum over i < H of dy[t][i] * w2[i][j]`.
    pub dh: ReductionOrder,
    /// `dX[t][i] = sum over r < 2F of dz[t][r] * w1[r][i]`: one sum over both
    /// blocks, the gate block (r < F) first.
    pub dx: ReductionOrder,
    /// The tensor core's model (`crate::mma`, by name) when every dot
    /// product is a chain of its MMA steps: blocks of 16 along the inner
    /// index, ascending, from +0, each step's f32 result the next step's c
    /// (a fixed K tiling, no split-K). The orders above are then not used.
    /// None: the orders above, each product rounded on its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mma: Option<String>,
}

impl SharedExpertProfile {
    /// `serial` (docs/ops/shared_expert.md#profiles; the seed's
    /// `oracle-fp32-serial-v1`): every dot product serial ascending over its
    /// inner index, split-K 1, mul then add; dX one chain over all 2F.
    pub fn serial() -> Self {
        SharedExpertProfile { name: "serial".into(), z: Serial, y: Serial, dh: Serial, dx: Serial, mma: None }
    }

    /// A kernel on the tensor cores with a fixed K tiling and no split-K
    /// (docs/ops/shared_expert.md#profiles): every dot product a chain of
    /// `mma.m16n8k16` steps in ascending K on the H100's model
    /// ([`crate::mma::H100_BF16`]); the element-wise steps as in `serial`.
    /// Claimed by the tensor-core kernels (`kernels/shared_expert_tc.cu`). The
    /// model is open for steps whose result falls below 2^-126 (docs/mma.md):
    /// the outputs they flow into are undecided ([`crate::undecided`]), counted
    /// apart by conformance.
    pub fn mma_h100() -> Self {
        SharedExpertProfile {
            name: "mma16-h100".into(),
            mma: Some(crate::mma::H100_BF16.name.into()),
            ..Self::serial()
        }
    }

    /// The MMA model every dot product runs on, if any (see [`Self::mma`]).
    pub fn mma_model(&self) -> Result<Option<crate::mma::MmaModel>, String> {
        match &self.mma {
            None => Ok(None),
            Some(n) => crate::mma::by_name(n)
                .map(Some)
                .ok_or_else(|| format!("profile {}: no MMA model named {n:?}", self.name)),
        }
    }

    /// Every dot product in no known order, products possibly contracted
    /// into FMAs (see [`crate::any_order`]): split-K, tiles, cuBLAS's
    /// choices alike. Not a shipped profile: no subject claims it.
    pub fn any_order() -> Self {
        use ReductionOrder::Any;
        SharedExpertProfile { name: crate::vocab::ANY_ORDER.into(), z: Any, y: Any, dh: Any, dx: Any, mma: None }
    }

    /// Every shipped profile.
    pub fn all() -> Vec<Self> {
        vec![Self::serial(), Self::mma_h100()]
    }

    /// A shipped profile by its name; the seed's name of `serial`
    /// ([`SEED_SERIAL`]) is accepted too.
    pub fn by_name(name: &str) -> Option<Self> {
        let name = if name == SEED_SERIAL { "serial" } else { name };
        Self::all().into_iter().find(|p| p.name == name)
    }

    pub fn validate(&self) -> Result<(), String> {
        for o in [&self.z, &self.y, &self.dh, &self.dx] {
            o.validate().map_err(|e| format!("profile {}: {e}", self.name))?;
        }
        self.mma_model().map(|_| ())
    }
}

impl crate::op::Profile for SharedExpertProfile {
    fn name(&self) -> &str {
        &self.name
    }
    fn validate(&self) -> Result<(), String> {
        SharedExpertProfile::validate(self)
    }
    /// The MMA model is open for steps whose result falls below 2^-126.
    fn may_leave_undecided(&self) -> bool {
        self.mma.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serial_is_found_by_name_and_a_zero_chunk_is_refused() {
        assert_eq!(SharedExpertProfile::by_name("serial"), Some(SharedExpertProfile::serial()));
        assert_eq!(SharedExpertProfile::by_name(SEED_SERIAL), Some(SharedExpertProfile::serial()));
        assert!(SharedExpertProfile::by_name("nope").is_none());
        assert!(SharedExpertProfile::serial().validate().is_ok());
        let mut p = SharedExpertProfile::serial();
        p.dx = ReductionOrder::chunked(0, Serial, Serial);
        assert!(p.validate().unwrap_err().contains("a size of 0"));
    }

    #[test]
    fn the_mma_profile_names_its_model_and_may_leave_outputs_undecided() {
        use crate::op::Profile;
        let p = SharedExpertProfile::mma_h100();
        assert_eq!(p.name, "mma16-h100");
        assert_eq!(p.mma_model(), Ok(Some(crate::mma::H100_BF16)));
        assert!(p.validate().is_ok());
        assert_eq!(SharedExpertProfile::serial().mma_model(), Ok(None));
        assert_eq!(SharedExpertProfile::by_name("mma16-h100"), Some(p.clone()));
        assert!(p.may_leave_undecided() && !SharedExpertProfile::serial().may_leave_undecided());
        let mut bad = p.clone();
        bad.mma = Some("h999".into());
        assert!(bad.validate().unwrap_err().contains("no MMA model named"));
    }
}
