//! `router` (docs/ops/router.md) as an [`Op`].

use super::{GradientCheck, Group, Op, Rows, Run, Values};
use crate::case::router::{FusedLoss, RouterBackward, RouterCase, RouterError, RouterForward};
use crate::mpfr::router::{check_gradient, gradient_entries};
use crate::num::Num;
use crate::padding::PaddingRule;
use crate::profile::router::RouterProfile;
use crate::profile_oracle::router::{self as oracle, RouterDecisions};
use crate::vocab::ClampTie;

/// TorchTitan's DeepSeek-V3 router after the gate matmul, optionally fused
/// with the `seqwise_loss` gradient of its own scores.
pub struct Router;

impl Op for Router {
    const NAME: &'static str = "router";
    type Case = RouterCase;
    type Profile = RouterProfile;
    type Decisions = RouterDecisions;
    type Fwd<N: Num> = RouterForward<N>;
    type Bwd<N: Num> = RouterBackward<N>;
    type Error = RouterError;

    fn validate(case: &RouterCase) -> Result<(), RouterError> {
        case.validate()
    }

    const HAS_CLAMP: bool = true;

    /// The fused loss's rule; a case without the loss has no clamp to tie.
    fn with_clamp_tie(case: &RouterCase, tie: ClampTie) -> Option<RouterCase> {
        let loss = case.loss.map(|l| FusedLoss { clamp_tie: tie, ..l });
        Some(RouterCase { loss, ..case.clone() })
    }

    fn footprint(case: &RouterCase) -> usize {
        let te = case.t.saturating_mul(case.e);
        case.layout.storage_len(case.t, case.e).unwrap_or(usize::MAX).max(te)
    }

    fn dims(case: &RouterCase) -> Vec<(&'static str, usize)> {
        vec![("T", case.t), ("E", case.e), ("G", case.groups), ("L", case.topk_groups), ("k", case.k)]
    }

    fn profiles() -> Vec<RouterProfile> {
        RouterProfile::all()
    }

    fn exact_profile() -> RouterProfile {
        RouterProfile::serial()
    }

    fn any_order_profile() -> RouterProfile {
        RouterProfile::any_order()
    }

    fn forward_under<N: Num>(
        case: &RouterCase,
        profile: &RouterProfile,
        rule: PaddingRule,
        imposed: Option<&RouterDecisions>,
    ) -> Result<Run<RouterForward<N>, RouterDecisions>, RouterError> {
        oracle::forward_under(case, profile, rule, imposed)
    }

    fn backward_under<N: Num>(
        case: &RouterCase,
        profile: &RouterProfile,
        rule: PaddingRule,
        imposed: Option<&RouterDecisions>,
    ) -> Result<Run<RouterBackward<N>, RouterDecisions>, RouterError> {
        oracle::backward_under(case, profile, rule, imposed)
    }

    /// ids, weights, map, counts, s: a bitwise comparison reports the first
    /// difference in that order (a wrong selection before its weights).
    /// Every per-token output depends on its own token alone; the counts
    /// are global.
    fn fwd_groups<'a, N: Num>(case: &RouterCase, f: &'a RouterForward<N>) -> Vec<Group<'a, N>> {
        let local = Rows::PerToken { local: true };
        vec![
            Group {
                name: "ids",
                rows: local,
                cols: case.k,
                values: Values::Int(f.ids.iter().map(|&i| i as i64).collect()),
            },
            Group { name: "weights", rows: local, cols: case.k, values: Values::Real(&f.weights) },
            Group {
                name: "map",
                rows: local,
                cols: case.e,
                values: Values::Int(f.map.iter().map(|&m| m as i64).collect()),
            },
            Group {
                name: "counts",
                rows: Rows::Global,
                cols: case.e,
                values: Values::Int(f.counts.iter().map(|&c| c as i64).collect()),
            },
            Group { name: "s", rows: local, cols: case.e, values: Values::Real(&f.scores) },
        ]
    }

    /// The logits' gradient, T x E. With a fused loss, row t depends on
    /// every valid row (through f_e): local only without one.
    fn bwd_groups<'a, N: Num>(case: &RouterCase, b: &'a RouterBackward<N>) -> Vec<Group<'a, N>> {
        vec![Group {
            name: "grad",
            rows: Rows::PerToken { local: case.loss.is_none() },
            cols: case.e,
            values: Values::Real(&b.grad),
        }]
    }

    fn check_gradient(case: &RouterCase, max_entries: usize) -> Result<GradientCheck, RouterError> {
        check_gradient(case, &gradient_entries(case, max_entries)?)
    }
}
