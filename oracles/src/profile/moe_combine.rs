//! Profiles of `moe_combine`: the order in which a token's kept choices are
//! listed and summed (the combine y, and the dispatch's backward dx in the
//! same order), the order of dw's sum over H, and whether y is rounded once
//! to bf16 at the end. The dispatch, x_disp and dx_exp have no sum: they
//! are the same in every profile.

use crate::order::ReductionOrder::{self, Serial};
use crate::vocab::ANY_ORDER;
use serde::{Deserialize, Serialize};

/// The order in which the kept choices of one token are listed for the
/// combine's sum (and dx's); the profile's [`ReductionOrder`] then reduces
/// that list. A dropped choice is not in the list: it is not added, not
/// added as a zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TermOrder {
    /// Ascending choice index j (the ids' order in the case).
    ByChoice,
    /// Ascending slot. Slots are grouped by expert in ascending id, and a
    /// token holds at most one slot of an expert, so this is ascending
    /// expert id among the token's kept choices: what a kernel that walks
    /// the dispatched rows in memory order gets.
    BySlot,
}

/// The orders of every sum `moe_combine` performs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MoeCombineProfile {
    pub name: String,
    /// How a token's kept choices are listed, for y and for dx.
    pub terms: TermOrder,
    /// Over the listed kept choices of a token:
    /// `y[t][h] = sum of (w[t][j] * x_exp[slot][h])` and
    /// `dx[t][h] = sum of g_disp[slot][h]`.
    pub combine: ReductionOrder,
    /// Over h: `dw[t][j] = sum of (dy[t][h] * x_exp[slot][h])`.
    pub dw: ReductionOrder,
    /// y rounded once to bf16 (round to nearest even) after its sum; still
    /// an f32 output holding a bf16 value.
    pub bf16_out: bool,
}

impl MoeCombineProfile {
    /// `serial`: the kept choices by ascending j, every sum `Serial`, y in f32.
    pub fn serial() -> Self {
        MoeCombineProfile {
            name: "serial".into(),
            terms: TermOrder::ByChoice,
            combine: Serial,
            dw: Serial,
            bf16_out: false,
        }
    }

    /// `by-slot`: the kept choices by ascending slot, every sum `Serial`.
    pub fn by_slot() -> Self {
        MoeCombineProfile { name: "by-slot".into(), terms: TermOrder::BySlot, ..Self::serial() }
    }

    /// `serial-bf16`: `serial`, then y rounded once to bf16.
    pub fn serial_bf16() -> Self {
        MoeCombineProfile { name: "serial-bf16".into(), bf16_out: true, ..Self::serial() }
    }

    /// Every sum in no known order ([`ReductionOrder::Any`]), y in f32: what
    /// a subject that claims no profile is judged by. Not a shipped profile.
    pub fn any_order() -> Self {
        use ReductionOrder::Any;
        MoeCombineProfile { name: ANY_ORDER.into(), terms: TermOrder::ByChoice, combine: Any, dw: Any, bf16_out: false }
    }

    /// Every shipped profile.
    pub fn all() -> Vec<Self> {
        vec![Self::serial(), Self::by_slot(), Self::serial_bf16()]
    }

    pub fn by_name(name: &str) -> Option<Self> {
        Self::all().into_iter().find(|p| p.name == name)
    }

    pub fn validate(&self) -> Result<(), String> {
        for o in [&self.combine, &self.dw] {
            o.validate().map_err(|e| format!("profile {}: {e}", self.name))?;
        }
        Ok(())
    }
}

impl crate::op::Profile for MoeCombineProfile {
    fn name(&self) -> &str {
        &self.name
    }
    fn validate(&self) -> Result<(), String> {
        MoeCombineProfile::validate(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_profiles_are_found_by_name_and_a_zero_chunk_is_refused() {
        for p in MoeCombineProfile::all() {
            assert_eq!(MoeCombineProfile::by_name(&p.name), Some(p.clone()));
            assert!(p.validate().is_ok());
        }
        assert!(MoeCombineProfile::by_name("any-order").is_none(), "not a shipped profile");
        let mut p = MoeCombineProfile::serial();
        p.dw = ReductionOrder::chunked(0, Serial, Serial);
        assert!(p.validate().unwrap_err().contains("a size of 0"));
    }
}
