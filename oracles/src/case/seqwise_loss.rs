//! `seqwise_loss` (docs/ops/seqwise_loss.md): the DeepSeek-V3 microbatch-wise
//! load-balance loss. The case, its validation and its outputs.

use crate::vocab::{top_k, ClampTie, MAX_COUNT};
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// How the routing map and the row normalisation are defined.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Objective {
    /// The router's actual choices (T x E, row-major); rows normalised by their
    /// L1 norm clamped at eps (F.normalize(p=1, eps=1e-12)).
    ProvidedMap { map: Vec<bool> },
    /// The map is the top-k of each valid row's own scores (ties to the lower
    /// expert index, NaN above every number); rows normalised by sum + eps2.
    UnbiasedTopK { k: usize },
}

pub use super::{Layout, MAX_OFFSET};

/// One input of `seqwise_loss`. Scores are kept logically (T x E, row-major);
/// [`SeqwiseCase::storage`] lays them out as `layout` says. Every field is
/// required in JSON (`padding` may be null) and unknown keys are refused: a
/// typo must not silently change a stored case.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeqwiseCase {
    pub t: usize,
    pub e: usize,
    pub layout: Layout,
    #[serde(with = "crate::case::hex_f32_vec")]
    pub scores: Vec<f32>,
    #[serde(deserialize_with = "crate::case::required")]
    pub padding: Option<Vec<bool>>,
    pub objective: Objective,
    pub clamp_tie: ClampTie,
    /// The gradient of `raw` (backward only).
    #[serde(with = "crate::case::hex_f32")]
    pub g: f32,
}

/// Every way a `seqwise_loss` input can be invalid. Each is an error, never a
/// fallback.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum SeqwiseError {
    #[error("T must be at least 1 (got 0 tokens)")]
    NoTokens,
    #[error("E must be at least 1 (got 0 experts)")]
    NoExperts,
    #[error("k = {k} is outside 1..=E (E = {e})")]
    KOutOfRange { k: usize, e: usize },
    #[error("scores hold {got} values, T x E = {expected}")]
    ScoresLength { expected: usize, got: usize },
    #[error("the routing map holds {got} entries, T x E = {expected}")]
    MapLength { expected: usize, got: usize },
    #[error("padding holds {got} flags, T = {expected}")]
    PaddingLength { expected: usize, got: usize },
    #[error("element offset {0} is unsupported (0..=3 from a 16-byte-aligned base)")]
    Offset(usize),
    #[error("row stride {stride} is smaller than E = {e}")]
    RowStride { stride: usize, e: usize },
    #[error("too large: {0}")]
    TooLarge(String),
    #[error("counts up to {0} would not be exact in f32 (at most 2^24)")]
    CountsInexact(usize),
    #[error("invalid profile: {0}")]
    Profile(String),
    #[error("imposed decisions cover {got} rows, T = {expected}")]
    Decisions { expected: usize, got: usize },
}

impl SeqwiseCase {
    /// A dense case (offset 0, row stride E, no padding, Strict, g = 1).
    pub fn dense(t: usize, e: usize, scores: Vec<f32>, objective: Objective) -> Self {
        SeqwiseCase {
            t,
            e,
            layout: Layout { offset: 0, row_stride: e },
            scores,
            padding: None,
            objective,
            clamp_tie: ClampTie::Strict,
            g: 1.0,
        }
    }

    /// Checks every rule of docs/ops/seqwise_loss.md#validation. Everything
    /// downstream may assume a validated case.
    pub fn validate(&self) -> Result<(), SeqwiseError> {
        let (t, e) = (self.t, self.e);
        if t == 0 {
            return Err(SeqwiseError::NoTokens);
        }
        if e == 0 {
            return Err(SeqwiseError::NoExperts);
        }
        let te = t.checked_mul(e).ok_or_else(|| SeqwiseError::TooLarge(format!("{t} x {e}")))?;
        if self.scores.len() != te {
            return Err(SeqwiseError::ScoresLength { expected: te, got: self.scores.len() });
        }
        if self.layout.offset > MAX_OFFSET {
            return Err(SeqwiseError::Offset(self.layout.offset));
        }
        if self.layout.row_stride < e {
            return Err(SeqwiseError::RowStride { stride: self.layout.row_stride, e });
        }
        self.layout.storage_len(t, e).map_err(SeqwiseError::TooLarge)?;
        if let Some(p) = &self.padding {
            if p.len() != t {
                return Err(SeqwiseError::PaddingLength { expected: t, got: p.len() });
            }
        }
        let max_count = match &self.objective {
            Objective::ProvidedMap { map } => {
                if map.len() != te {
                    return Err(SeqwiseError::MapLength { expected: te, got: map.len() });
                }
                te
            }
            Objective::UnbiasedTopK { k } => {
                if *k == 0 || *k > e {
                    return Err(SeqwiseError::KOutOfRange { k: *k, e });
                }
                t * k
            }
        };
        if max_count > MAX_COUNT {
            return Err(SeqwiseError::CountsInexact(max_count));
        }
        Ok(())
    }

    pub fn is_padding(&self, t: usize) -> bool {
        self.padding.as_ref().is_some_and(|p| p[t])
    }

    pub fn row(&self, t: usize) -> &[f32] {
        &self.scores[t * self.e..(t + 1) * self.e]
    }

    /// The scores as they lie in memory: `layout.offset` elements before the
    /// first row, rows `layout.row_stride` apart. Every element no valid read
    /// touches (the offset, the gaps between rows) is `gap`, so a subject that
    /// reads there reads poison.
    pub fn storage(&self, gap: f32) -> Vec<f32> {
        self.layout.place(&self.scores, self.t, self.e, gap)
    }

    /// The routing map (T x E): the provided one, or the top-k of every valid
    /// row. Padding rows select nothing.
    pub fn routing_map(&self) -> Vec<bool> {
        let mut map = match &self.objective {
            Objective::ProvidedMap { map } => map.clone(),
            Objective::UnbiasedTopK { k } => {
                let mut m = vec![false; self.t * self.e];
                for t in 0..self.t {
                    if !self.is_padding(t) {
                        for i in top_k(self.row(t), *k) {
                            m[t * self.e + i] = true;
                        }
                    }
                }
                m
            }
        };
        for t in 0..self.t {
            if self.is_padding(t) {
                map[t * self.e..(t + 1) * self.e].fill(false);
            }
        }
        map
    }
}

/// Forward outputs: `raw`, the per-expert counts c_e and frequencies f_e.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SeqwiseForward<N> {
    pub raw: N,
    pub counts: Vec<u32>,
    pub freq: Vec<N>,
}

/// Backward output: d raw / d scores times g, T x E row-major (logical
/// layout; padding rows are +0.0).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SeqwiseBackward<N> {
    pub grad: Vec<N>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case() -> SeqwiseCase {
        SeqwiseCase::dense(2, 3, vec![0.5; 6], Objective::UnbiasedTopK { k: 2 })
    }

    /// The clamp tie rules' names are what corpus entries, the wire and
    /// `bitparity.toml` say (written out here), and each is found again.
    #[test]
    fn the_clamp_tie_rules_are_named_as_stored() {
        assert_eq!(ClampTie::Strict.name(), "strict");
        assert_eq!(ClampTie::Inclusive.name(), "inclusive");
        for t in [ClampTie::Strict, ClampTie::Inclusive] {
            assert_eq!(ClampTie::by_name(t.name()), Some(t));
        }
        assert_eq!(ClampTie::by_name("xyzzy"), None);
    }

    #[test]
    fn validation_catches_every_rule() {
        assert_eq!(case().validate(), Ok(()));
        let mut c = case();
        c.t = 0;
        c.scores.clear();
        assert_eq!(c.validate(), Err(SeqwiseError::NoTokens));
        let mut c = case();
        c.objective = Objective::UnbiasedTopK { k: 4 };
        assert_eq!(c.validate(), Err(SeqwiseError::KOutOfRange { k: 4, e: 3 }));
        let mut c = case();
        c.objective = Objective::UnbiasedTopK { k: 0 };
        assert!(c.validate().is_err());
        let mut c = case();
        c.layout.offset = 4;
        assert_eq!(c.validate(), Err(SeqwiseError::Offset(4)));
        let mut c = case();
        c.layout.row_stride = 2;
        assert!(matches!(c.validate(), Err(SeqwiseError::RowStride { .. })));
        let mut c = case();
        c.padding = Some(vec![false]);
        assert!(matches!(c.validate(), Err(SeqwiseError::PaddingLength { .. })));
        let mut c = case();
        c.objective = Objective::ProvidedMap { map: vec![true; 5] };
        assert!(matches!(c.validate(), Err(SeqwiseError::MapLength { .. })));
        let mut c = case();
        c.scores.pop();
        assert!(matches!(c.validate(), Err(SeqwiseError::ScoresLength { .. })));
    }

    #[test]
    fn top_k_ties_go_low_and_nan_goes_first() {
        assert_eq!(top_k(&[1.0, 3.0, 3.0, 2.0], 2), vec![1, 2]);
        assert_eq!(top_k(&[1.0, 3.0, 3.0, 3.0], 2), vec![1, 2]);
        assert_eq!(top_k(&[1.0, f32::NAN, 3.0, f32::INFINITY], 2), vec![1, 3]);
        assert_eq!(top_k(&[-0.0, 0.0], 1), vec![0]);
        assert_eq!(top_k(&[0.0, -0.0], 1), vec![0]);
    }

    #[test]
    fn storage_places_rows_and_poisons_gaps() {
        let mut c = case();
        c.layout = Layout { offset: 2, row_stride: 5 };
        let s = c.storage(f32::NAN);
        assert_eq!(s.len(), 2 + 5 + 3);
        assert_eq!(&s[2..5], c.row(0));
        assert_eq!(&s[7..10], c.row(1));
        assert!(s[0].is_nan() && s[5].is_nan() && s[6].is_nan());
    }
}
