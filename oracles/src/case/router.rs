//! `router` (docs/ops/router.md): TorchTitan's `DeepSeekV3Router` on one
//! microbatch, after the gate matmul: sigmoid scores, an expert bias used only
//! to choose, group-limited top-k, normalised and scaled weights; forward and
//! backward, optionally fused with the `seqwise_loss` gradient of its own
//! scores. The case, its validation and its outputs.

use super::{Layout, MAX_OFFSET};
use crate::vocab::{ClampTie, MAX_COUNT};
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The `seqwise_loss` gradient fused into the router's backward (ProvidedMap
/// objective, the map being this router's choice, padding the router's).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FusedLoss {
    pub clamp_tie: ClampTie,
    /// The gradient of the loss's `raw`.
    #[serde(with = "crate::case::hex_f32")]
    pub g: f32,
}

/// One input of `router`. Logits are kept logically (T x E, row-major);
/// [`RouterCase::storage`] lays them out as `layout` says. Every field is
/// required in JSON (`padding` and `loss` may be null); unknown keys are
/// refused.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouterCase {
    pub t: usize,
    pub e: usize,
    pub layout: Layout,
    /// The gate matmul's output, T x E.
    #[serde(with = "crate::case::hex_f32_vec")]
    pub logits: Vec<f32>,
    /// The expert bias (E values, finite), used only to choose.
    #[serde(with = "crate::case::hex_f32_vec")]
    pub bias: Vec<f32>,
    /// G: E/G experts per group, G | E, E/G >= 2.
    pub groups: usize,
    /// L: groups kept per token, 1 <= L <= G.
    pub topk_groups: usize,
    /// Experts chosen per token, 1 <= k <= L * E / G.
    pub k: usize,
    /// Finite and > 0 (2.5 in DeepSeek-V3).
    #[serde(with = "crate::case::hex_f32")]
    pub route_scale: f32,
    pub route_norm: bool,
    #[serde(deserialize_with = "crate::case::required")]
    pub padding: Option<Vec<bool>>,
    /// The gradient of the weights, T x k (backward).
    #[serde(with = "crate::case::hex_f32_vec")]
    pub gw: Vec<f32>,
    /// The fused `seqwise_loss` gradient (backward), or none.
    #[serde(deserialize_with = "crate::case::required")]
    pub loss: Option<FusedLoss>,
}

/// Every way a `router` input can be invalid. Each is an error, never a
/// fallback.
#[derive(Clone, Debug, Error, PartialEq)]
pub enum RouterError {
    #[error("T must be at least 1 (got 0 tokens)")]
    NoTokens,
    #[error("E must be at least 2 (got {0} experts)")]
    TooFewExperts(usize),
    #[error("{name} holds {got} values, expected {expected}")]
    Length { name: &'static str, expected: usize, got: usize },
    #[error("element offset {0} is unsupported (0..=3 from a 16-byte-aligned base)")]
    Offset(usize),
    #[error("row stride {stride} is smaller than E = {e}")]
    RowStride { stride: usize, e: usize },
    #[error("too large: {0}")]
    TooLarge(String),
    #[error("G = {groups} groups must divide E = {e} with at least 2 experts per group")]
    Groups { groups: usize, e: usize },
    #[error("L = {topk_groups} kept groups is outside 1..=G (G = {groups})")]
    TopkGroups { topk_groups: usize, groups: usize },
    #[error("k = {k} is outside 1..=L*E/G = {max}")]
    K { k: usize, max: usize },
    #[error("bias[{index}] = {value} is not finite")]
    Bias { index: usize, value: f32 },
    #[error("route_scale = {0} must be finite and > 0")]
    RouteScale(f32),
    #[error("counts up to T x k = {0} would not be exact in f32 (at most 2^24)")]
    CountsInexact(usize),
    #[error("invalid profile: {0}")]
    Profile(String),
    #[error("imposed decisions: {0}")]
    Decisions(String),
}

impl RouterCase {
    /// Checks every rule of docs/ops/router.md#validation. Everything
    /// downstream may assume a validated case.
    pub fn validate(&self) -> Result<(), RouterError> {
        let (t, e) = (self.t, self.e);
        if t == 0 {
            return Err(RouterError::NoTokens);
        }
        if e < 2 {
            return Err(RouterError::TooFewExperts(e));
        }
        let te = t.checked_mul(e).ok_or_else(|| RouterError::TooLarge(format!("{t} x {e}")))?;
        let len = |name, expected: usize, got: usize| {
            if expected == got {
                Ok(())
            } else {
                Err(RouterError::Length { name, expected, got })
            }
        };
        len("logits", te, self.logits.len())?;
        if self.layout.offset > MAX_OFFSET {
            return Err(RouterError::Offset(self.layout.offset));
        }
        if self.layout.row_stride < e {
            return Err(RouterError::RowStride { stride: self.layout.row_stride, e });
        }
        self.layout.storage_len(t, e).map_err(RouterError::TooLarge)?;
        len("bias", e, self.bias.len())?;
        if let Some((index, &value)) = self.bias.iter().enumerate().find(|(_, b)| !b.is_finite()) {
            return Err(RouterError::Bias { index, value });
        }
        let g = self.groups;
        if g == 0 || e % g != 0 || e / g < 2 {
            return Err(RouterError::Groups { groups: g, e });
        }
        if self.topk_groups == 0 || self.topk_groups > g {
            return Err(RouterError::TopkGroups { topk_groups: self.topk_groups, groups: g });
        }
        let max = self.topk_groups * (e / g);
        if self.k == 0 || self.k > max {
            return Err(RouterError::K { k: self.k, max });
        }
        if !(self.route_scale.is_finite() && self.route_scale > 0.0) {
            return Err(RouterError::RouteScale(self.route_scale));
        }
        if let Some(p) = &self.padding {
            len("padding", t, p.len())?;
        }
        let tk = t * self.k; // k <= E, so T x k <= T x E: no overflow
        len("gw", tk, self.gw.len())?;
        if tk > MAX_COUNT {
            return Err(RouterError::CountsInexact(tk));
        }
        Ok(())
    }

    /// Experts per group, E / G.
    pub fn group_size(&self) -> usize {
        self.e / self.groups
    }

    pub fn is_padding(&self, t: usize) -> bool {
        self.padding.as_ref().is_some_and(|p| p[t])
    }

    pub fn row(&self, t: usize) -> &[f32] {
        &self.logits[t * self.e..(t + 1) * self.e]
    }

    /// The logits as they lie in memory (see [`Layout::place`]).
    pub fn storage(&self, gap: f32) -> Vec<f32> {
        self.layout.place(&self.logits, self.t, self.e, gap)
    }
}

/// Forward outputs, per token t (padding tokens are routed too).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RouterForward<N> {
    /// T x k: the chosen experts of each token, ascending.
    pub ids: Vec<u32>,
    /// T x k: the weight of each chosen expert (ids order).
    pub weights: Vec<N>,
    /// T x E: the routing map (chosen experts).
    pub map: Vec<bool>,
    /// E: the number of valid (non-padding) tokens that chose each expert.
    pub counts: Vec<u32>,
    /// T x E: the sigmoid scores s (what a fused loss reads).
    pub scores: Vec<N>,
}

/// Backward output: the gradient of the logits, T x E (logical layout).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RouterBackward<N> {
    pub grad: Vec<N>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::testing::{each_refused, json_is_strict, Mutation};

    /// DeepSeek-V3's shape on 2 tokens.
    pub fn case() -> RouterCase {
        RouterCase {
            t: 2,
            e: 8,
            layout: Layout::dense(8),
            logits: (0..16).map(|i| i as f32 / 8.0 - 1.0).collect(),
            bias: vec![0.0; 8],
            groups: 4,
            topk_groups: 2,
            k: 3,
            route_scale: 2.5,
            route_norm: true,
            padding: None,
            gw: vec![1.0; 6],
            loss: None,
        }
    }

    #[test]
    fn validation_catches_every_rule() {
        assert_eq!(case().validate(), Ok(()));
        let bad: Vec<Mutation<RouterCase>> = vec![
            (|c| c.t = 0, "T"),
            (|c| c.logits.pop().map(|_| ()).unwrap_or(()), "logits"),
            (|c| c.bias[3] = f32::NAN, "bias"),
            (|c| c.groups = 3, "groups"),
            (|c| c.groups = 8, "E/G"),
            (|c| c.topk_groups = 0, "L"),
            (|c| c.topk_groups = 5, "L"),
            (|c| c.k = 5, "k"),
            (|c| c.k = 0, "k"),
            (|c| c.route_scale = 0.0, "scale"),
            (|c| c.route_scale = f32::INFINITY, "scale"),
            (|c| c.padding = Some(vec![false]), "padding"),
            (|c| c.gw.push(0.0), "gw"),
            (|c| c.layout.offset = 4, "offset"),
            (|c| c.layout.row_stride = 7, "stride"),
            (|c| c.layout.row_stride = usize::MAX / 2, "huge stride"),
        ];
        each_refused(case, RouterCase::validate, bad);
    }

    #[test]
    fn json_refuses_unknown_and_missing_keys() {
        json_is_strict(&case(), ("\"padding\"", "\"paddding\""), &[",\"loss\":null"]);
    }
}
