//! Adversarial `router` cases (docs/ops/router.md, docs/ops/README.md#adversarial-cases).
//!
//! A case is an adversarial routing shape (DeepSeek-V3 and V2, one group,
//! two experts per group, every group kept, every kept expert chosen, small
//! odd shapes) with rows of logits built from a menu of row kinds (gate-like,
//! wide, saturated, tiny scores, ties and one-ulp near-ties inside a group,
//! between group scores and at the k-th expert, all equal, the fused loss's
//! clamp tie, non-finite values), an expert bias (zero, trained-size, large,
//! repeated, extreme), padding (poisoned or not), a layout, `gw`, the route
//! scale and norm, and the fused loss.
//!
//! Selection compares u = s + bias in f32, with s = 1 / (1 + exp(-x)) as the
//! router computes it (exp correctly rounded). s, u, the group ranking and
//! the choice are the profile oracle's own
//! ([`oracles::profile_oracle::router::choose`]), so a tie aimed or
//! reported here is one the router meets. Generation aims ties at u by
//! searching the logit whose u is a given f32; [`classify`] reads every
//! class off the values (the oracle's s, u and choice), never from how the
//! case was made, so a shrunk or imported case is tagged truthfully too.
//!
//! One module per concept: `choice` (s, u and the choice, the logit
//! searches), `shape`, `rows`, `generate` (the whole case), `classes`,
//! `shrink` and `invalid`.
//!
//! [`shrink_candidates`] drops tokens, groups, positions inside every group,
//! reduces G, L and k (gw columns kept consistent), drops padding, layout
//! and the fused loss, and simplifies values toward 0, 1 and short binary
//! fractions.

mod choice;
mod classes;
mod generate;
mod invalid;
mod rows;
mod shape;
mod shrink;

pub use choice::ONE_MINUS_ULP;
pub use classes::{classify, Class};
pub use generate::generate;
pub use invalid::invalid_variants;
pub use shrink::shrink_candidates;

/// Two tokens of a small grouped shape, plain values: the hand-made case
/// the modules' tests start from.
#[cfg(test)]
fn hand_case() -> oracles::case::router::RouterCase {
    use oracles::case::{router::RouterCase, Layout};
    RouterCase {
        t: 2,
        e: 8,
        layout: Layout::dense(8),
        logits: vec![0.5, -1.0, 2.0, 0.25, -0.75, 1.5, -2.0, 0.125, 1.0, 0.0, -0.5, 0.75, 1.25, -1.5, 0.375, -0.25],
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
