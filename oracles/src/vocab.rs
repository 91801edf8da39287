//! The numeric vocabulary the ops share: the clamp's eps and its tie rule,
//! the router's and the loss's eps2, the top-k selection order, the name of
//! the any-order profile, the exact-count limit. Each op's module uses
//! these; none owns them.

use serde::{Deserialize, Serialize};
use std::cmp::Ordering;

/// eps = 1e-12 as f32 (0x2B8CBCCC): the clamp of the L1 norm and of C.
pub const EPS: f32 = 1e-12;
/// eps2 = 1e-20 as f32: added to a plain sum before it divides (the
/// unbiased objective's row sum, the router's normalisation).
pub const EPS2: f32 = 1e-20;
/// Counts are exact integers in f32 up to 2^24; larger ones would round.
pub const MAX_COUNT: usize = 1 << 24;

/// The name of every op's profile whose sums are all
/// [`crate::order::ReductionOrder::Any`].
pub const ANY_ORDER: &str = "any-order";

/// Which side of the clamp tie n == eps passes the backward's gradient gate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClampTie {
    /// gate = n > eps (PyTorch >= 2.15).
    #[default]
    Strict,
    /// gate = n >= eps (PyTorch <= 2.11).
    Inclusive,
}

impl ClampTie {
    /// Its name in corpus entries, on the wire and in `bitparity.toml`.
    pub fn name(self) -> &'static str {
        match self {
            ClampTie::Strict => "strict",
            ClampTie::Inclusive => "inclusive",
        }
    }

    /// The rule a name stands for.
    pub fn by_name(name: &str) -> Option<ClampTie> {
        [ClampTie::Strict, ClampTie::Inclusive].into_iter().find(|t| t.name() == name)
    }
}

/// The selection order of top-k: NaN above every number, then larger values,
/// then (ties, -0.0 == +0.0 included) the lower index first.
pub fn topk_order(a: (usize, f32), b: (usize, f32)) -> Ordering {
    let rank = |x: f32| if x.is_nan() { (1, 0.0) } else { (0, x) };
    let (ra, rb) = (rank(a.1), rank(b.1));
    rb.0.cmp(&ra.0).then(rb.1.partial_cmp(&ra.1).unwrap_or(Ordering::Equal)).then(a.0.cmp(&b.0))
}

/// The indices of the k largest values under [`topk_order`], ascending.
pub fn top_k(row: &[f32], k: usize) -> Vec<usize> {
    let mut idx: Vec<(usize, f32)> = row.iter().copied().enumerate().collect();
    idx.sort_by(|&a, &b| topk_order(a, b));
    let mut chosen: Vec<usize> = idx.iter().take(k).map(|p| p.0).collect();
    chosen.sort_unstable();
    chosen
}
