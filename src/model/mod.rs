//! Kernel models: each op written a second time, as a CUDA kernel writes it,
//! sharing nothing computational with the profile oracle it is compared with.
//!
//! Conformance compares the profile oracle with the kernel model (and both
//! with the real kernels). If the two shared a top-k, a sign function or a
//! reduction, a bug in the shared code would be in both and conformance would
//! be blind to it (a NaN ranked below the numbers in a shared top-k passed
//! `bitparity check` on every seed). So a model shares with the `oracles`
//! crate only what is not computation: the case, profile and output types,
//! their validation, and the one leaf that is verified on its own
//! (`oracles::expf::exp_f32`, checked exhaustively against MPFR). Everything
//! else is here, written as loops the way the kernels are:
//!
//! - [`Sum`]: the reduction orders the shipped profiles use, each as a kernel
//!   loop (a serial loop, lane accumulators and a xor-shuffle butterfly,
//!   chunk partials and a second serial pass); any other order is refused.
//! - [`pick_top`] and [`top_two`]: selections by iterative argmax, ties to the
//!   first index scanned, NaN above every number.
//! - [`sign_factor`]: PyTorch's `(0 < x) - (x < 0)`, NaN for NaN.
//! - [`Strided`]: a T x E matrix read from its real storage (offset, row
//!   stride), the gaps poisoned.
//!
//! `tests/it/model_independence.rs` reads these files and fails if any names an
//! `oracles` item outside its explicit allow-list.

pub mod moe_combine;
pub mod router;
pub mod seqwise_loss;
pub mod shared_expert;

pub use moe_combine::MoeCombineModel;
pub use router::RouterModel;
pub use seqwise_loss::SeqwiseModel;
pub use shared_expert::SharedExpertModel;

use oracles::order::ReductionOrder;
use thiserror::Error;

/// Why a kernel model returned no result.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum ModelError {
    /// The case (or the profile) is invalid: refused, as the oracle refuses it.
    #[error("invalid input: {0}")]
    Invalid(String),
    /// The profile names something this model (as a kernel) does not
    /// implement, a reduction order say.
    #[error("unsupported: {0}")]
    Unsupported(String),
}

/// What device memory holds where nothing valid lies: the gaps between rows
/// and the elements before the offset. A quiet NaN with a payload, so a read
/// there poisons the result.
pub(crate) const POISON: u32 = 0x7fc0_dead;

/// A reduction order as a kernel implements it. Only the orders the shipped
/// profiles use are implemented; [`Sum::of`] refuses every other one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sum {
    /// One thread: `acc = +0.0; for i ascending: acc = acc + x[i]`.
    Serial,
    /// A warp of `lanes` threads: lane l accumulates the indices i with
    /// i % lanes == l serially in a register (from +0.0), then the lane
    /// partials, padded with +0.0 to a power of two, meet in a xor-shuffle
    /// butterfly; lane 0's value is the sum.
    Warp { lanes: usize },
    /// Blocks of `chunk` consecutive indices, each summed serially (from
    /// +0.0), then the chunk partials summed serially in chunk order by a
    /// second pass.
    Chunks { chunk: usize },
}

impl Sum {
    /// The kernel loop for `order`: `Serial`, `Strided{lanes, Serial,
    /// Butterfly}` or `Chunked{chunk, Serial, Serial}` (sizes > 0); every
    /// other order is refused, naming it and `what` sums in it.
    pub(crate) fn of(order: &ReductionOrder, what: &str) -> Result<Sum, ModelError> {
        use ReductionOrder::{Butterfly, Chunked, Serial, Strided};
        match order {
            Serial => Ok(Sum::Serial),
            Strided { lanes, inner, outer } if *lanes > 0 && **inner == Serial && **outer == Butterfly => {
                Ok(Sum::Warp { lanes: *lanes })
            }
            Chunked { chunk, inner, outer } if *chunk > 0 && **inner == Serial && **outer == Serial => {
                Ok(Sum::Chunks { chunk: *chunk })
            }
            other => Err(ModelError::Unsupported(format!(
                "reduction order {other} for {what}: the kernel model implements Serial, \
                 Strided{{lanes, Serial, Butterfly}} and Chunked{{chunk, Serial, Serial}}"
            ))),
        }
    }

    /// The sum of `term(i)` over i in 0..n in this order; a `None` term is
    /// skipped (a padding row: never read, never added).
    pub(crate) fn sum(self, n: usize, term: impl Fn(usize) -> Option<f32>) -> f32 {
        match self {
            Sum::Serial => {
                let mut acc = 0.0f32;
                for i in 0..n {
                    if let Some(x) = term(i) {
                        acc += x;
                    }
                }
                acc
            }
            Sum::Warp { lanes } => {
                let width = lanes.next_power_of_two();
                // Lanes past `lanes` (the padding to a power of two) hold +0.0.
                let mut reg = vec![0.0f32; width];
                for i in 0..n {
                    if let Some(x) = term(i) {
                        reg[i % lanes] += x;
                    }
                }
                // __shfl_xor_sync: every lane adds its partner's value at
                // offsets width/2, ..., 1 (each step reads the previous one).
                let mut offset = width / 2;
                while offset >= 1 {
                    let prev = reg.clone();
                    for (lane, r) in reg.iter_mut().enumerate() {
                        *r = prev[lane] + prev[lane ^ offset];
                    }
                    offset /= 2;
                }
                reg[0]
            }
            Sum::Chunks { chunk } => {
                let blocks = n.div_ceil(chunk);
                let mut partial = vec![0.0f32; blocks];
                for (b, p) in partial.iter_mut().enumerate() {
                    let mut acc = 0.0f32;
                    for i in b * chunk..((b + 1) * chunk).min(n) {
                        if let Some(x) = term(i) {
                            acc += x;
                        }
                    }
                    *p = acc;
                }
                let mut total = 0.0f32;
                for p in partial {
                    total += p;
                }
                total
            }
        }
    }
}

/// PyTorch's sign, `(0 < x) - (x < 0)`: +1, -1, +0.0 for either zero, NaN
/// for NaN.
pub(crate) fn sign_factor(x: f32) -> f32 {
    if x.is_nan() {
        f32::NAN
    } else if x > 0.0 {
        1.0
    } else if x < 0.0 {
        -1.0
    } else {
        0.0
    }
}

/// x ranks strictly above y in a selection: NaN above every number, then the
/// larger value; equal values (-0.0 == +0.0) and two NaNs do not rank above
/// each other, so the index scanned first keeps its place.
pub(crate) fn ranks_above(x: f32, y: f32) -> bool {
    match (x.is_nan(), y.is_nan()) {
        (true, false) => true,
        (false, false) => x > y,
        _ => false,
    }
}

/// The order in which a selection scans its candidates: ascending gives ties
/// to the lower index (the spec), descending to the higher one (a bug).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scan {
    Ascending,
    Descending,
}

impl Scan {
    /// The j-th index visited among n.
    fn index(self, j: usize, n: usize) -> usize {
        match self {
            Scan::Ascending => j,
            Scan::Descending => n - 1 - j,
        }
    }
}

/// The `count` best of `n` candidates (value `value(i)`; `None` is not a
/// candidate), by iterative argmax: one pass per pick over the candidates not
/// yet taken, keeping the first one scanned among equals. Returns a mask of
/// the picks. Fewer than `count` candidates: all of them.
pub(crate) fn pick_top(n: usize, count: usize, scan: Scan, value: impl Fn(usize) -> Option<f32>) -> Vec<bool> {
    let mut taken = vec![false; n];
    for _ in 0..count {
        let mut best: Option<(usize, f32)> = None;
        for j in 0..n {
            let i = scan.index(j, n);
            if taken[i] {
                continue;
            }
            let Some(v) = value(i) else { continue };
            if best.is_none_or(|(_, b)| ranks_above(v, b)) {
                best = Some((i, v));
            }
        }
        match best {
            Some((i, _)) => taken[i] = true,
            None => break,
        }
    }
    taken
}

/// The two best of `values` (at least two), in one pass as a thread keeps
/// them in registers: (the best, the second), ties to the first scanned.
pub(crate) fn top_two(values: &[f32], scan: Scan) -> (f32, f32) {
    let mut best: Option<f32> = None;
    let mut second: Option<f32> = None;
    for j in 0..values.len() {
        let v = values[scan.index(j, values.len())];
        if best.is_none_or(|b| ranks_above(v, b)) {
            second = best;
            best = Some(v);
        } else if second.is_none_or(|s| ranks_above(v, s)) {
            second = Some(v);
        }
    }
    (best.unwrap_or(f32::NAN), second.unwrap_or(f32::NAN))
}

/// A T x E matrix as the kernel reads it: from its storage, element
/// `base + t * stride + e`.
pub(crate) struct Strided {
    pub(crate) buf: Vec<f32>,
    pub(crate) base: usize,
    pub(crate) stride: usize,
}

impl Strided {
    pub(crate) fn at(&self, t: usize, e: usize) -> f32 {
        self.buf[self.base + t * self.stride + e]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warp_butterfly_pads_lanes_to_a_power_of_two() {
        // 3 lanes padded to 4 hold (tiny, 1, tiny, +0.0): offset 2 pairs
        // lane 0 with lane 2 and lane 1 with lane 3, offset 1 the two.
        let tiny = f32::EPSILON / 2.0;
        let xs = [tiny, 1.0, tiny];
        let warp = Sum::Warp { lanes: 3 }.sum(3, |i| Some(xs[i]));
        // (tiny + tiny) + (1 + 0) = 2^-23 + 1, exact.
        assert_eq!(warp, 1.0 + f32::EPSILON);
        // Serially: (tiny + 1) + tiny = 1 + tiny = 1.
        assert_eq!(Sum::Serial.sum(3, |i| Some(xs[i])), 1.0);
    }

    #[test]
    fn empty_sums_are_positive_zero() {
        for s in [Sum::Serial, Sum::Warp { lanes: 32 }, Sum::Chunks { chunk: 64 }] {
            assert_eq!(s.sum(0, |_| Some(1.0)).to_bits(), 0, "{s:?}");
            assert_eq!(s.sum(3, |_| Some(-0.0)).to_bits(), 0, "{s:?}");
            assert_eq!(s.sum(3, |_| None).to_bits(), 0, "{s:?}");
        }
    }

    #[test]
    fn chunks_visit_every_index_once() {
        for s in [Sum::Serial, Sum::Warp { lanes: 5 }, Sum::Chunks { chunk: 7 }, Sum::Warp { lanes: 32 }] {
            assert_eq!(s.sum(100, |i| Some((i + 1) as f32)), 5050.0, "{s:?}");
            assert_eq!(s.sum(100, |i| (i % 2 == 0).then_some(1.0)), 50.0, "{s:?}");
        }
    }

    #[test]
    fn selections_rank_nan_first_and_ties_by_scan() {
        let v = [1.0, f32::NAN, 3.0, 3.0, f32::NAN, -0.0, 0.0];
        let pick = |count, scan| {
            let m = pick_top(v.len(), count, scan, |i| Some(v[i]));
            (0..v.len()).filter(|&i| m[i]).collect::<Vec<_>>()
        };
        assert_eq!(pick(1, Scan::Ascending), vec![1]);
        assert_eq!(pick(3, Scan::Ascending), vec![1, 2, 4]);
        assert_eq!(pick(3, Scan::Descending), vec![1, 3, 4]);
        assert_eq!(pick(7, Scan::Ascending).len(), 7);
        let zeros = [-0.0f32, 0.0];
        let m = pick_top(2, 1, Scan::Ascending, |i| Some(zeros[i]));
        assert_eq!(m, vec![true, false]);
        assert_eq!(top_two(&[2.0, 5.0, 5.0], Scan::Ascending), (5.0, 5.0));
        let (a, b) = top_two(&[1.0, f32::NAN, 7.0], Scan::Ascending);
        assert!(a.is_nan() && b == 7.0);
    }

    #[test]
    fn sign_factor_is_torchs() {
        assert_eq!(sign_factor(2.0), 1.0);
        assert_eq!(sign_factor(-1e-45), -1.0);
        assert_eq!(sign_factor(-0.0).to_bits(), 0);
        assert_eq!(sign_factor(0.0).to_bits(), 0);
        assert!(sign_factor(f32::NAN).is_nan());
    }

    #[test]
    fn other_orders_are_refused_by_name() {
        use ReductionOrder::{Butterfly, Serial};
        assert_eq!(Sum::of(&Serial, "x"), Ok(Sum::Serial));
        assert_eq!(Sum::of(&ReductionOrder::strided(32, Serial, Butterfly), "x"), Ok(Sum::Warp { lanes: 32 }));
        assert_eq!(Sum::of(&ReductionOrder::chunked(64, Serial, Serial), "x"), Ok(Sum::Chunks { chunk: 64 }));
        for o in [
            Butterfly,
            ReductionOrder::chunked(64, Serial, Butterfly),
            ReductionOrder::strided(32, Serial, Serial),
            ReductionOrder::chunked(0, Serial, Serial),
        ] {
            match Sum::of(&o, "q_t") {
                Err(ModelError::Unsupported(m)) => assert!(m.contains(&o.to_string()) && m.contains("q_t"), "{m}"),
                r => panic!("{o}: {r:?}"),
            }
        }
    }
}
