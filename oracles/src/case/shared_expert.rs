//! `shared_expert` (docs/ops/shared_expert.md): the DeepSeek-V3 shared expert,
//! a SwiGLU MLP on bf16 weights; forward y and backward dX (weights frozen).
//! The case, its validation and its outputs.
//!
//! bf16 values are kept as the f32 values they are exactly (a bf16 is the
//! upper half of an f32): every arithmetic type reads them as inputs without
//! conversion, and a corpus entry spells them as hex floats. Validation
//! refuses any value that is not exactly a bf16.

use super::{Layout, MAX_OFFSET, MAX_STORAGE};
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// One input of `shared_expert`. x and dy are T x H, kept logically
/// (row-major) and laid out in memory as `layout` says (the same layout for
/// both); the weights are dense row-major. Every field is required in JSON;
/// unknown keys are refused.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SharedExpertCase {
    /// Tokens.
    pub t: usize,
    /// The model width (x's row length).
    pub h: usize,
    /// The MLP's inner width (w1 holds 2F rows: F gate rows, then F up rows).
    pub f: usize,
    pub layout: Layout,
    /// T x H, bf16.
    #[serde(with = "crate::case::hex_f32_vec")]
    pub x: Vec<f32>,
    /// 2F x H, bf16: rows 0..F the gate, rows F..2F the up projection.
    #[serde(with = "crate::case::hex_f32_vec")]
    pub w1: Vec<f32>,
    /// H x F, bf16: the down projection.
    #[serde(with = "crate::case::hex_f32_vec")]
    pub w2: Vec<f32>,
    /// T x H, bf16: the gradient of y (backward).
    #[serde(with = "crate::case::hex_f32_vec")]
    pub dy: Vec<f32>,
}

/// Every way a `shared_expert` input can be invalid. Each is an error, never
/// a fallback.
#[derive(Clone, Debug, Error, PartialEq)]
pub enum SharedExpertError {
    #[error("T must be at least 1 (got 0 tokens)")]
    NoTokens,
    #[error("{name} must be at least 1")]
    EmptyDim { name: &'static str },
    #[error("{name} holds {got} values, expected {expected}")]
    Length { name: &'static str, expected: usize, got: usize },
    #[error("element offset {0} is unsupported (0..=3 from a 16-byte-aligned base)")]
    Offset(usize),
    #[error("row stride {stride} is smaller than H = {h}")]
    RowStride { stride: usize, h: usize },
    #[error("too large: {0}")]
    TooLarge(String),
    #[error("{name}[{index}] = {bits:#010x} is not a bf16 value (its low 16 bits must be zero)")]
    NotBf16 { name: &'static str, index: usize, bits: u32 },
    #[error("invalid profile: {0}")]
    Profile(String),
    #[error("imposed decisions: {0}")]
    Decisions(String),
}

/// True when `x` is exactly a bf16 value: the upper half of its f32 bits.
pub fn is_bf16(x: f32) -> bool {
    x.to_bits() & 0xFFFF == 0
}

impl SharedExpertCase {
    /// Checks every rule of docs/ops/shared_expert.md#validation and bounds the
    /// storage every buffer implies by [`MAX_STORAGE`] before anything is
    /// allocated.
    pub fn validate(&self) -> Result<(), SharedExpertError> {
        let (t, h, f) = (self.t, self.h, self.f);
        if t == 0 {
            return Err(SharedExpertError::NoTokens);
        }
        for (name, n) in [("H", h), ("F", f)] {
            if n == 0 {
                return Err(SharedExpertError::EmptyDim { name });
            }
        }
        let product = |a: usize, b: usize, what: &str| {
            a.checked_mul(b)
                .filter(|&n| n <= MAX_STORAGE)
                .ok_or_else(|| SharedExpertError::TooLarge(format!("{what}: {a} x {b} values (at most {MAX_STORAGE})")))
        };
        let th = product(t, h, "x")?;
        let w1 = product(f.saturating_mul(2), h, "w1")?;
        let w2 = product(h, f, "w2")?;
        // z and the backward's dz are T x 2F f32 intermediates.
        product(t, f.saturating_mul(2), "z")?;
        if self.layout.offset > MAX_OFFSET {
            return Err(SharedExpertError::Offset(self.layout.offset));
        }
        if self.layout.row_stride < h {
            return Err(SharedExpertError::RowStride { stride: self.layout.row_stride, h });
        }
        self.layout.storage_len(t, h).map_err(SharedExpertError::TooLarge)?;
        for (name, v, n) in [("x", &self.x, th), ("w1", &self.w1, w1), ("w2", &self.w2, w2), ("dy", &self.dy, th)] {
            if v.len() != n {
                return Err(SharedExpertError::Length { name, expected: n, got: v.len() });
            }
            if let Some(index) = v.iter().position(|&x| !is_bf16(x)) {
                return Err(SharedExpertError::NotBf16 { name, index, bits: v[index].to_bits() });
            }
        }
        Ok(())
    }

    /// Row t of x.
    pub fn x_row(&self, t: usize) -> &[f32] {
        &self.x[t * self.h..(t + 1) * self.h]
    }

    /// Row t of dy.
    pub fn dy_row(&self, t: usize) -> &[f32] {
        &self.dy[t * self.h..(t + 1) * self.h]
    }

    /// Row r of w1 (H values): the gate of unit r for r < F, the up
    /// projection of unit r - F after.
    pub fn w1_row(&self, r: usize) -> &[f32] {
        &self.w1[r * self.h..(r + 1) * self.h]
    }

    /// Row i of w2 (F values): output feature i.
    pub fn w2_row(&self, i: usize) -> &[f32] {
        &self.w2[i * self.f..(i + 1) * self.f]
    }

    /// x as it lies in memory (see [`Layout::place`]).
    pub fn x_storage(&self, gap: f32) -> Vec<f32> {
        self.layout.place(&self.x, self.t, self.h, gap)
    }

    /// dy as it lies in memory (see [`Layout::place`]).
    pub fn dy_storage(&self, gap: f32) -> Vec<f32> {
        self.layout.place(&self.dy, self.t, self.h, gap)
    }

    /// Tokens `range` alone, as a case of their own (the batch-invariance
    /// property compares a row's outputs in both).
    pub fn rows(&self, range: std::ops::Range<usize>) -> SharedExpertCase {
        let h = self.h;
        SharedExpertCase {
            t: range.len(),
            h,
            f: self.f,
            layout: Layout::dense(h),
            x: self.x[range.start * h..range.end * h].to_vec(),
            w1: self.w1.clone(),
            w2: self.w2.clone(),
            dy: self.dy[range.start * h..range.end * h].to_vec(),
        }
    }
}

/// Forward output: y, T x H, bf16 values (logical layout, dense).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SharedExpertForward<N> {
    pub y: Vec<N>,
}

/// Backward output: dX, T x H, f32 unrounded (logical layout, dense).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SharedExpertBackward<N> {
    pub dx: Vec<N>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::testing::{each_refused, json_is_strict, Mutation};

    /// T = 2, H = 3, F = 2, every value a bf16.
    pub fn case() -> SharedExpertCase {
        SharedExpertCase {
            t: 2,
            h: 3,
            f: 2,
            layout: Layout::dense(3),
            x: vec![1.0, -0.5, 0.25, 2.0, 0.0, -1.0],
            w1: (0..12).map(|i| i as f32 / 8.0 - 0.75).collect(),
            w2: (0..6).map(|i| 0.5 - i as f32 / 4.0).collect(),
            dy: vec![1.0, 1.0, -1.0, 0.5, 0.0, 2.0],
        }
    }

    #[test]
    fn bf16_values_are_the_upper_half() {
        assert!(is_bf16(1.0) && is_bf16(-0.0) && is_bf16(f32::INFINITY) && is_bf16(f32::from_bits(0x7fc0_0000)));
        assert!(!is_bf16(1.0 + f32::EPSILON), "1 + 2^-23 needs 23 bits of mantissa");
        assert!(!is_bf16(f32::from_bits(0x7f80_0001)), "a NaN whose payload is in the low half");
        assert!(is_bf16(f32::from_bits(0x0001_0000)), "the smallest bf16 subnormal");
    }

    #[test]
    fn validation_catches_every_rule() {
        assert_eq!(case().validate(), Ok(()));
        let bad: Vec<Mutation<SharedExpertCase>> = vec![
            (|c| c.t = 0, "T"),
            (|c| c.h = 0, "H"),
            (|c| c.f = 0, "F"),
            (|c| c.x.pop().map(|_| ()).unwrap_or(()), "x length"),
            (|c| c.w1.push(0.0), "w1 length"),
            (|c| c.w2.pop().map(|_| ()).unwrap_or(()), "w2 length"),
            (|c| c.dy.push(0.0), "dy length"),
            (|c| c.x[1] = 1.0 + f32::EPSILON, "x not bf16"),
            (|c| c.w1[0] = 0.1, "w1 not bf16"),
            (|c| c.w2[5] = f32::from_bits(0x7f80_0001), "w2 not bf16"),
            (|c| c.dy[0] = 1e-40, "dy not bf16"),
            (|c| c.layout.offset = 4, "offset"),
            (|c| c.layout.row_stride = 2, "stride"),
            (|c| c.layout.row_stride = usize::MAX / 2, "huge stride"),
            (|c| c.f = usize::MAX / 2, "huge F"),
            (|c| c.t = usize::MAX, "huge T"),
        ];
        each_refused(case, SharedExpertCase::validate, bad);
    }

    #[test]
    fn json_refuses_unknown_and_missing_keys() {
        json_is_strict(&case(), ("\"dy\"", "\"dyy\""), &[",\"layout\":{\"offset\":0,\"row_stride\":3}"]);
    }

    #[test]
    fn rows_cut_a_sub_batch() {
        let c = case();
        let r = c.rows(1..2);
        assert_eq!((r.t, r.x_row(0), r.dy_row(0)), (1, c.x_row(1), c.dy_row(1)));
        assert_eq!(r.validate(), Ok(()));
    }
}
