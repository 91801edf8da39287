//! `moe_combine` (docs/ops/moe_combine.md): the dispatch of T tokens to the
//! routed experts (the permutation into per-expert slots, with an optional
//! capacity per expert) and the weighted combine of the experts' outputs
//! back into one row per token; forward and backward. The case, its
//! validation, the dispatch (exact: the same for every profile and value
//! type) and the outputs.
//!
//! bf16 values (x, x_exp) are kept as the f32 values they are exactly, as in
//! [`super::shared_expert`]; validation refuses any that is not a bf16.

use super::shared_expert::is_bf16;
use super::{Layout, MAX_OFFSET, MAX_STORAGE};
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Slot indices (and counts) stay exact in f32 and in i32 up to 2^24: T x k
/// at most that, so a kernel may carry a slot in either.
pub const MAX_CHOICES: usize = 1 << 24;

/// One input of `moe_combine`. The four matrices of width H (x, dy: T rows;
/// x_exp, g_disp: N_slots rows) are kept logically (row-major, no gaps) and
/// laid out in memory as `layout` says, the same layout for all four. Every
/// field is required in JSON (`capacity` and `padding` may be null); unknown
/// keys are refused.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MoeCombineCase {
    /// Tokens.
    pub t: usize,
    /// The width of a token (x's row length, and every expert output's).
    pub h: usize,
    /// Experts.
    pub e: usize,
    /// Choices per token, 1 <= k <= E.
    pub k: usize,
    /// The most slots one expert takes (`null`: unlimited).
    #[serde(deserialize_with = "crate::case::required")]
    pub capacity: Option<usize>,
    pub layout: Layout,
    /// T x k expert ids in [0, E), no id twice in one token's row.
    pub ids: Vec<u32>,
    /// T x k f32 weights, any values (NaN and infinities propagate).
    #[serde(with = "crate::case::hex_f32_vec")]
    pub weights: Vec<f32>,
    #[serde(deserialize_with = "crate::case::required")]
    pub padding: Option<Vec<bool>>,
    /// T x H, bf16: the tokens to dispatch.
    #[serde(with = "crate::case::hex_f32_vec")]
    pub x: Vec<f32>,
    /// N_slots x H, bf16: the experts' outputs, one row per slot of the
    /// dispatch ([`dispatch`]); the combine's input.
    #[serde(with = "crate::case::hex_f32_vec")]
    pub x_exp: Vec<f32>,
    /// T x H f32: the gradient of y (backward).
    #[serde(with = "crate::case::hex_f32_vec")]
    pub dy: Vec<f32>,
    /// N_slots x H f32: the gradient of x_disp (the dispatch's backward).
    #[serde(with = "crate::case::hex_f32_vec")]
    pub g_disp: Vec<f32>,
}

/// Every way a `moe_combine` input can be invalid. Each is an error, never a
/// fallback.
#[derive(Clone, Debug, Error, PartialEq)]
pub enum MoeCombineError {
    #[error("T must be at least 1 (got 0 tokens)")]
    NoTokens,
    #[error("{name} must be at least 1")]
    EmptyDim { name: &'static str },
    #[error("k = {k} is outside 1..=E (E = {e})")]
    K { k: usize, e: usize },
    #[error("T x k = {0} choices: slots and counts would not be exact in f32 (at most 2^24)")]
    CountsInexact(usize),
    #[error("{name} holds {got} values, expected {expected}")]
    Length { name: &'static str, expected: usize, got: usize },
    #[error("ids[{t}][{j}] = {id} is not an expert id (E = {e})")]
    IdOutOfRange { t: usize, j: usize, id: u32, e: usize },
    #[error("token {t} chooses expert {id} twice (choices {first} and {j})")]
    DuplicateId { t: usize, first: usize, j: usize, id: u32 },
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

/// The dispatch of a case: where each choice goes. Exact, a function of the
/// ids, the padding flags and the capacity alone (no value is read), so
/// every profile, every value type and every conforming kernel computes the
/// same one (docs/ops/moe_combine.md#dispatch).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Dispatch {
    /// T x k: the slot of choice j of token t, or -1 (a padding token's
    /// choice, or one beyond its expert's capacity).
    pub slot: Vec<i32>,
    /// E: the slots expert e uses, min(load_e, C), load_e its choices by
    /// valid tokens.
    pub counts: Vec<u32>,
    /// E: the first slot of expert e, the exclusive prefix sum of `counts`.
    pub offsets: Vec<u32>,
    /// The slots in all: sum of `counts`, the rows of x_disp and x_exp.
    pub n_slots: usize,
    /// N_slots: the choice that owns each slot, as the flat index t k + j
    /// (every slot has exactly one).
    pub owner: Vec<usize>,
}

impl Dispatch {
    /// The token and choice that own slot `s`.
    pub fn owner_of(&self, s: usize, k: usize) -> (usize, usize) {
        (self.owner[s] / k, self.owner[s] % k)
    }

    /// The kept choices of token t in ascending j (none for a padding token).
    pub fn kept(&self, t: usize, k: usize) -> impl Iterator<Item = usize> + '_ {
        (0..k).filter(move |&j| self.slot[t * k + j] >= 0)
    }
}

/// The dispatch of `case` (docs/ops/moe_combine.md#dispatch): slots grouped
/// by expert in ascending expert id; inside an expert, ascending token
/// index, then ascending choice j; a padding token's choices are never
/// dispatched and use no capacity; an expert's choices beyond its first C
/// in that order are dropped. Checks the rules it reads (the sizes, the
/// ids, the padding flags: [`MoeCombineCase::validate_routing`]) and
/// nothing else, so a generator may call it before it has x_exp.
pub fn dispatch(case: &MoeCombineCase) -> Result<Dispatch, MoeCombineError> {
    case.validate_routing()?;
    let (t_n, k, e_n) = (case.t, case.k, case.e);
    // The load of each expert (its valid tokens' choices), then capped.
    // Loads <= T x k <= 2^24: exact in u32, and so are their sums.
    let mut counts = vec![0u32; e_n];
    for t in (0..t_n).filter(|&t| !case.is_padding(t)) {
        for &id in case.ids_row(t) {
            counts[id as usize] += 1;
        }
    }
    if let Some(cap) = case.capacity {
        counts.iter_mut().for_each(|c| *c = (*c as usize).min(cap) as u32);
    }
    let mut offsets = Vec::with_capacity(e_n);
    let mut n_slots = 0usize;
    for &c in &counts {
        offsets.push(n_slots as u32);
        n_slots += c as usize;
    }
    // Visiting tokens ascending, then j ascending, meets each expert's
    // choices in the dispatch order: the r-th met is kept iff r < C.
    let mut taken = vec![0u32; e_n];
    let mut slot = vec![-1i32; t_n * k];
    let mut owner = vec![0usize; n_slots];
    for t in (0..t_n).filter(|&t| !case.is_padding(t)) {
        for (j, &id) in case.ids_row(t).iter().enumerate() {
            let e = id as usize;
            if taken[e] < counts[e] {
                let s = (offsets[e] + taken[e]) as usize;
                slot[t * k + j] = s as i32;
                owner[s] = t * k + j;
                taken[e] += 1;
            }
        }
    }
    Ok(Dispatch { slot, counts, offsets, n_slots, owner })
}

/// The first choice of `row` that repeats an earlier one, as (the earlier
/// choice, the repeating choice): the smallest such j. Sorting keeps it
/// O(k log k) (a scan of the earlier choices for each would be O(k^2), and
/// k may reach 2^24).
fn first_repeat(row: &[u32]) -> Option<(usize, usize)> {
    let mut sorted: Vec<(u32, usize)> = row.iter().copied().zip(0..).collect();
    sorted.sort_unstable();
    // Within a run of equal ids the indices ascend: the run's first is the
    // earliest choice, its second the earliest repeat.
    sorted.windows(2).filter(|w| w[0].0 == w[1].0).map(|w| (w[0].1, w[1].1)).min_by_key(|&(_, j)| j)
}

/// N_slots, the rows of x_exp: [`dispatch`]'s count without its per-expert
/// tables, from the valid choices' ids sorted (memory O(T k), whatever E:
/// validation allocates nothing an entry's E alone could make huge).
pub fn slot_count(case: &MoeCombineCase) -> Result<usize, MoeCombineError> {
    case.validate_routing()?;
    let mut ids: Vec<u32> =
        (0..case.t).filter(|&t| !case.is_padding(t)).flat_map(|t| case.ids_row(t)).copied().collect();
    ids.sort_unstable();
    let cap = case.capacity.unwrap_or(usize::MAX);
    Ok(ids.chunk_by(|a, b| a == b).map(|run| run.len().min(cap)).sum())
}

impl MoeCombineCase {
    /// The rules the dispatch reads, in the order of
    /// docs/ops/moe_combine.md#validation (steps 1 to 4): the sizes, the
    /// ids and the padding flags.
    pub fn validate_routing(&self) -> Result<(), MoeCombineError> {
        let (t, h, e, k) = (self.t, self.h, self.e, self.k);
        if t == 0 {
            return Err(MoeCombineError::NoTokens);
        }
        for (name, n) in [("H", h), ("E", e)] {
            if n == 0 {
                return Err(MoeCombineError::EmptyDim { name });
            }
        }
        if k == 0 || k > e {
            return Err(MoeCombineError::K { k, e });
        }
        let tk = t.checked_mul(k).ok_or_else(|| MoeCombineError::TooLarge(format!("T x k = {t} x {k}")))?;
        if tk > MAX_CHOICES {
            return Err(MoeCombineError::CountsInexact(tk));
        }
        // The counts and offsets are E values each.
        if e > MAX_STORAGE {
            return Err(MoeCombineError::TooLarge(format!("E = {e} experts (at most {MAX_STORAGE})")));
        }
        if self.ids.len() != tk {
            return Err(MoeCombineError::Length { name: "ids", expected: tk, got: self.ids.len() });
        }
        if let Some(flat) = self.ids.iter().position(|&id| id as usize >= e) {
            return Err(MoeCombineError::IdOutOfRange { t: flat / k, j: flat % k, id: self.ids[flat], e });
        }
        for r in 0..t {
            if let Some((first, j)) = first_repeat(self.ids_row(r)) {
                return Err(MoeCombineError::DuplicateId { t: r, first, j, id: self.ids[r * k + j] });
            }
        }
        if let Some(p) = &self.padding {
            if p.len() != t {
                return Err(MoeCombineError::Length { name: "padding", expected: t, got: p.len() });
            }
        }
        Ok(())
    }

    /// Checks every rule of docs/ops/moe_combine.md#validation, in its order,
    /// and bounds the storage every buffer implies by [`MAX_STORAGE`] before
    /// anything the case's values imply is allocated. Everything downstream
    /// may index freely.
    pub fn validate(&self) -> Result<(), MoeCombineError> {
        let n_slots = slot_count(self)?;
        let (t, h) = (self.t, self.h);
        if self.layout.offset > MAX_OFFSET {
            return Err(MoeCombineError::Offset(self.layout.offset));
        }
        if self.layout.row_stride < h {
            return Err(MoeCombineError::RowStride { stride: self.layout.row_stride, h });
        }
        // storage_len bounds the span, so T x H and N_slots x H fit too.
        self.layout.storage_len(t, h).map_err(MoeCombineError::TooLarge)?;
        self.layout.storage_len(n_slots, h).map_err(|e| MoeCombineError::TooLarge(format!("x_exp: {e}")))?;
        let tk = t * self.k;
        if self.weights.len() != tk {
            return Err(MoeCombineError::Length { name: "weights", expected: tk, got: self.weights.len() });
        }
        let (th, nh) = (t * h, n_slots * h);
        let matrices: [(&'static str, &Vec<f32>, usize, bool); 4] = [
            ("x", &self.x, th, true),
            ("dy", &self.dy, th, false),
            ("x_exp", &self.x_exp, nh, true),
            ("g_disp", &self.g_disp, nh, false),
        ];
        for (name, v, n, bf16) in matrices {
            if v.len() != n {
                return Err(MoeCombineError::Length { name, expected: n, got: v.len() });
            }
            if bf16 {
                if let Some(index) = v.iter().position(|&x| !is_bf16(x)) {
                    return Err(MoeCombineError::NotBf16 { name, index, bits: v[index].to_bits() });
                }
            }
        }
        Ok(())
    }

    pub fn is_padding(&self, t: usize) -> bool {
        self.padding.as_ref().is_some_and(|p| p[t])
    }

    /// Token t's k expert ids.
    pub fn ids_row(&self, t: usize) -> &[u32] {
        &self.ids[t * self.k..(t + 1) * self.k]
    }

    /// Token t's k weights.
    pub fn weights_row(&self, t: usize) -> &[f32] {
        &self.weights[t * self.k..(t + 1) * self.k]
    }

    /// Row t of x.
    pub fn x_row(&self, t: usize) -> &[f32] {
        &self.x[t * self.h..(t + 1) * self.h]
    }

    /// Row t of dy.
    pub fn dy_row(&self, t: usize) -> &[f32] {
        &self.dy[t * self.h..(t + 1) * self.h]
    }

    /// Row s (a slot) of x_exp.
    pub fn x_exp_row(&self, s: usize) -> &[f32] {
        &self.x_exp[s * self.h..(s + 1) * self.h]
    }

    /// Row s (a slot) of g_disp.
    pub fn g_disp_row(&self, s: usize) -> &[f32] {
        &self.g_disp[s * self.h..(s + 1) * self.h]
    }

    /// x as it lies in memory (see [`Layout::place`]).
    pub fn x_storage(&self, gap: f32) -> Vec<f32> {
        self.layout.place(&self.x, self.t, self.h, gap)
    }

    /// dy as it lies in memory.
    pub fn dy_storage(&self, gap: f32) -> Vec<f32> {
        self.layout.place(&self.dy, self.t, self.h, gap)
    }

    /// x_exp as it lies in memory (its rows: its length over H).
    pub fn x_exp_storage(&self, gap: f32) -> Vec<f32> {
        self.layout.place(&self.x_exp, self.x_exp.len() / self.h.max(1), self.h, gap)
    }

    /// g_disp as it lies in memory.
    pub fn g_disp_storage(&self, gap: f32) -> Vec<f32> {
        self.layout.place(&self.g_disp, self.g_disp.len() / self.h.max(1), self.h, gap)
    }

    /// Tokens `range` alone, as a dense case of their own, for the batch
    /// invariance property (docs/ops/moe_combine.md#properties): each kept
    /// choice of those tokens keeps its expert output and its g_disp row,
    /// moved to the slot the sub-batch's own dispatch gives it. `None` with
    /// a capacity (which choices an expert keeps depends on the other
    /// tokens: batch invariance does not apply), for an empty range or one
    /// past T, and for an invalid case.
    pub fn sub_batch(&self, range: std::ops::Range<usize>) -> Option<MoeCombineCase> {
        if self.capacity.is_some() || range.is_empty() || range.end > self.t || self.validate().is_err() {
            return None;
        }
        let full = dispatch(self).ok()?;
        let (h, k) = (self.h, self.k);
        let rows = |v: &[f32], w: usize| v[range.start * w..range.end * w].to_vec();
        let mut sub = MoeCombineCase {
            t: range.len(),
            h,
            e: self.e,
            k,
            capacity: None,
            layout: Layout::dense(h),
            ids: self.ids[range.start * k..range.end * k].to_vec(),
            weights: rows(&self.weights, k),
            padding: self.padding.as_ref().map(|p| p[range.clone()].to_vec()),
            x: rows(&self.x, h),
            x_exp: Vec::new(),
            dy: rows(&self.dy, h),
            g_disp: Vec::new(),
        };
        let part = dispatch(&sub).ok()?;
        sub.x_exp = vec![0.0; part.n_slots * h];
        sub.g_disp = vec![0.0; part.n_slots * h];
        for (s, &flat) in part.owner.iter().enumerate() {
            // Without a capacity every valid choice is kept in both.
            let old = usize::try_from(full.slot[range.start * k + flat]).ok()?;
            sub.x_exp[s * h..(s + 1) * h].copy_from_slice(self.x_exp_row(old));
            sub.g_disp[s * h..(s + 1) * h].copy_from_slice(self.g_disp_row(old));
        }
        Some(sub)
    }
}

/// Forward outputs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MoeCombineForward<N> {
    /// T x k: the dispatch's slot of each choice, -1 where it is dropped.
    pub slot: Vec<i32>,
    /// E: the slots each expert uses.
    pub counts: Vec<u32>,
    /// N_slots x H: x_disp[slot[t][j]] = x[t], bit for bit (bf16 values).
    pub x_disp: Vec<N>,
    /// T x H: the combine (bf16 values under a `bf16_out` profile).
    pub y: Vec<N>,
}

/// Backward outputs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MoeCombineBackward<N> {
    /// N_slots x H: the gradient of x_exp.
    pub dx_exp: Vec<N>,
    /// T x k: the gradient of the weights (+0.0 for a dropped choice and a
    /// padding token).
    pub dw: Vec<N>,
    /// T x H: the gradient of x through the dispatch (+0.0 for a padding
    /// token and a token with no kept choice).
    pub dx: Vec<N>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::testing::{each_refused, json_is_strict, Mutation};

    /// T = 3, H = 2, E = 3, k = 2, no capacity: token 0 -> (2, 0), token 1
    /// -> (0, 1), token 2 -> (1, 2). Expert 0 takes (0, 1) then (1, 0),
    /// expert 1 takes (1, 1) then (2, 0), expert 2 takes (0, 0) then (2, 1).
    pub fn case() -> MoeCombineCase {
        MoeCombineCase {
            t: 3,
            h: 2,
            e: 3,
            k: 2,
            capacity: None,
            layout: Layout::dense(2),
            ids: vec![2, 0, 0, 1, 1, 2],
            weights: vec![0.5, 0.25, 1.0, -1.0, 2.0, 0.75],
            padding: None,
            x: vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
            x_exp: (0..12).map(|i| i as f32).collect(),
            dy: vec![1.0; 6],
            g_disp: vec![1.0; 12],
        }
    }

    #[test]
    fn dispatch_groups_by_expert_then_token() {
        let d = dispatch(&case()).unwrap();
        // Slots: expert 0 = {0, 1}, expert 1 = {2, 3}, expert 2 = {4, 5}.
        assert_eq!(d.slot, vec![4, 0, 1, 2, 3, 5]);
        assert_eq!((d.counts, d.offsets, d.n_slots), (vec![2, 2, 2], vec![0, 2, 4], 6));
        assert_eq!(d.owner, vec![1, 2, 3, 4, 0, 5]);
    }

    #[test]
    fn validation_catches_every_rule() {
        assert_eq!(case().validate(), Ok(()));
        let bad: Vec<Mutation<MoeCombineCase>> = vec![
            (|c| c.t = 0, "T"),
            (|c| c.h = 0, "H"),
            (|c| c.e = 0, "E"),
            (|c| c.k = 0, "k = 0"),
            (|c| c.k = 4, "k > E"),
            (|c| c.e = MAX_STORAGE + 1, "huge E"),
            (|c| c.t = usize::MAX, "huge T"),
            (|c| c.ids.pop().map(|_| ()).unwrap_or(()), "ids length"),
            (|c| c.ids[3] = 3, "id out of range"),
            (|c| c.ids[3] = 0, "id twice"),
            (|c| c.padding = Some(vec![false; 2]), "padding length"),
            (|c| c.layout.offset = 4, "offset"),
            (|c| c.layout.row_stride = 1, "stride"),
            (|c| c.layout.row_stride = usize::MAX / 2, "huge stride"),
            (|c| c.weights.push(0.0), "weights length"),
            (|c| c.x.pop().map(|_| ()).unwrap_or(()), "x length"),
            (|c| c.x[0] = 1.0 + f32::EPSILON, "x not bf16"),
            (|c| c.dy.push(0.0), "dy length"),
            (|c| c.x_exp.truncate(10), "x_exp length"),
            (|c| c.x_exp[11] = f32::from_bits(0x7f80_0001), "x_exp not bf16"),
            (|c| c.g_disp.push(0.0), "g_disp length"),
            (|c| c.capacity = Some(1), "x_exp sized for no capacity"),
        ];
        each_refused(case, MoeCombineCase::validate, bad);
    }

    #[test]
    fn a_repeat_is_reported_at_its_earliest_repeating_choice() {
        assert_eq!(first_repeat(&[1, 2, 2, 1]), Some((1, 2)));
        assert_eq!(first_repeat(&[3, 0, 1, 3, 0]), Some((0, 3)));
        assert_eq!(first_repeat(&[3, 0, 1]), None);
        // Out of range goes first, over every row; then repeats.
        let mut c = case();
        c.ids = vec![1, 1, 0, 7, 0, 1];
        assert_eq!(c.validate(), Err(MoeCombineError::IdOutOfRange { t: 1, j: 1, id: 7, e: 3 }));
        c.ids[3] = 2;
        assert_eq!(c.validate(), Err(MoeCombineError::DuplicateId { t: 0, first: 0, j: 1, id: 1 }));
    }

    /// One token choosing all of 2^20 experts: validation and the slot count
    /// are O(T k log k), where a pairwise repeat check would take 2^39 steps.
    #[test]
    fn a_long_row_is_validated_quickly() {
        let k = 1 << 20;
        let mut c = MoeCombineCase {
            t: 1,
            h: 1,
            e: k,
            k,
            capacity: None,
            layout: Layout::dense(1),
            ids: (0..k as u32).rev().collect(),
            weights: vec![1.0; k],
            padding: None,
            x: vec![1.0],
            x_exp: vec![1.0; k],
            dy: vec![1.0],
            g_disp: vec![1.0; k],
        };
        assert_eq!(c.validate(), Ok(()));
        assert_eq!(slot_count(&c), Ok(k));
        c.ids[k - 1] = c.ids[0];
        assert_eq!(c.validate(), Err(MoeCombineError::DuplicateId { t: 0, first: 0, j: k - 1, id: (k - 1) as u32 }));
        c.ids[k - 1] = 0;
        c.capacity = Some(0);
        assert_eq!(slot_count(&c), Ok(0));
    }

    #[test]
    fn json_refuses_unknown_and_missing_keys() {
        json_is_strict(&case(), ("\"g_disp\"", "\"g_dispp\""), &["\"capacity\":null,", "\"padding\":null,"]);
    }
}
