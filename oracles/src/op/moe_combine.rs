//! `moe_combine` (docs/ops/moe_combine.md) as an [`Op`].

use super::{GradientCheck, Group, Op, Rows, Run, Values};
use crate::case::moe_combine::{slot_count, MoeCombineBackward, MoeCombineCase, MoeCombineError, MoeCombineForward};
use crate::mpfr::moe_combine::{check_gradient, gradient_entries};
use crate::num::Num;
use crate::padding::PaddingRule;
use crate::profile::moe_combine::MoeCombineProfile;
use crate::profile_oracle::moe_combine::{self as oracle, MoeCombineDecisions};

/// The dispatch of routed tokens to expert slots and the weighted combine
/// of the experts' outputs, forward and backward.
pub struct MoeCombine;

/// Whether token t's per-token outputs (y, dw, dx) depend on its own inputs
/// alone: without a capacity, yes (its kept choices are all its valid ones,
/// and it reads only the x_exp and g_disp rows of its own slots); with one,
/// the other tokens decide which of its choices are dropped.
fn local(case: &MoeCombineCase) -> Rows {
    Rows::PerToken { local: case.capacity.is_none() }
}

impl Op for MoeCombine {
    const NAME: &'static str = "moe_combine";
    type Case = MoeCombineCase;
    type Profile = MoeCombineProfile;
    type Decisions = MoeCombineDecisions;
    type Fwd<N: Num> = MoeCombineForward<N>;
    type Bwd<N: Num> = MoeCombineBackward<N>;
    type Error = MoeCombineError;

    fn validate(case: &MoeCombineCase) -> Result<(), MoeCombineError> {
        case.validate()
    }

    /// The largest of: x's (and dy's) storage, x_exp's (and g_disp's) with
    /// its N_slots rows (T x k rows where the routing does not validate: a
    /// bound), the T x k choices and the E counts.
    fn footprint(case: &MoeCombineCase) -> usize {
        let (t, h) = (case.t, case.h);
        let tk = t.saturating_mul(case.k);
        let slots = slot_count(case).unwrap_or(tk);
        let storage = |rows: usize| case.layout.storage_len(rows, h).unwrap_or(usize::MAX);
        [storage(t), storage(slots), t.saturating_mul(h), slots.saturating_mul(h), tk, case.e]
            .into_iter()
            .max()
            .unwrap_or(0)
    }

    /// The combine, dw and dx each touch T k H values: 3 T k H.
    fn work(case: &MoeCombineCase) -> usize {
        case.t.saturating_mul(case.k).saturating_mul(case.h).saturating_mul(3)
    }

    fn dims(case: &MoeCombineCase) -> Vec<(&'static str, usize)> {
        vec![("T", case.t), ("H", case.h), ("E", case.e), ("k", case.k)]
    }

    fn profiles() -> Vec<MoeCombineProfile> {
        MoeCombineProfile::all()
    }

    /// `serial`; a `bf16_out` profile's rounding of y reaches the exact
    /// oracle through its decisions ([`crate::profile_oracle::moe_combine`]).
    fn exact_profile() -> MoeCombineProfile {
        MoeCombineProfile::serial()
    }

    fn any_order_profile() -> MoeCombineProfile {
        MoeCombineProfile::any_order()
    }

    /// Padding tokens are never dispatched, under either rule: both rules
    /// are this one op (docs/ops/moe_combine.md#padding-and-capacity).
    fn forward_under<N: Num>(
        case: &MoeCombineCase,
        profile: &MoeCombineProfile,
        rule: PaddingRule,
        imposed: Option<&MoeCombineDecisions>,
    ) -> Result<Run<MoeCombineForward<N>, MoeCombineDecisions>, MoeCombineError> {
        oracle::forward_under(case, profile, rule, imposed)
    }

    fn backward_under<N: Num>(
        case: &MoeCombineCase,
        profile: &MoeCombineProfile,
        rule: PaddingRule,
        imposed: Option<&MoeCombineDecisions>,
    ) -> Result<Run<MoeCombineBackward<N>, MoeCombineDecisions>, MoeCombineError> {
        oracle::backward_under(case, profile, rule, imposed)
    }

    /// slot, counts, x_disp, y: the dispatch before the values it moves, so
    /// that a bitwise comparison reports a wrong slot before its
    /// consequences. slot is per token but never local: a slot's index
    /// counts the other tokens' choices. x_disp is indexed by slot, not by
    /// token: global.
    fn fwd_groups<'a, N: Num>(case: &MoeCombineCase, f: &'a MoeCombineForward<N>) -> Vec<Group<'a, N>> {
        vec![
            Group {
                name: "slot",
                rows: Rows::PerToken { local: false },
                cols: case.k,
                values: Values::Int(f.slot.iter().map(|&s| s as i64).collect()),
            },
            Group {
                name: "counts",
                rows: Rows::Global,
                cols: case.e,
                values: Values::Int(f.counts.iter().map(|&c| c as i64).collect()),
            },
            Group { name: "x_disp", rows: Rows::Global, cols: case.h, values: Values::Real(&f.x_disp) },
            Group { name: "y", rows: local(case), cols: case.h, values: Values::Real(&f.y) },
        ]
    }

    /// dx_exp (by slot: global), dw, dx.
    fn bwd_groups<'a, N: Num>(case: &MoeCombineCase, b: &'a MoeCombineBackward<N>) -> Vec<Group<'a, N>> {
        vec![
            Group { name: "dx_exp", rows: Rows::Global, cols: case.h, values: Values::Real(&b.dx_exp) },
            Group { name: "dw", rows: local(case), cols: case.k, values: Values::Real(&b.dw) },
            Group { name: "dx", rows: local(case), cols: case.h, values: Values::Real(&b.dx) },
        ]
    }

    /// dw and dx_exp as the derivative of sum dy y, dx as that of
    /// sum g_disp x_disp (see [`crate::mpfr::moe_combine`]).
    fn check_gradient(case: &MoeCombineCase, max_entries: usize) -> Result<GradientCheck, MoeCombineError> {
        check_gradient(case, &gradient_entries(case, max_entries)?)
    }
}
