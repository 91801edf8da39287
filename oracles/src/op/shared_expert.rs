//! `shared_expert` (docs/ops/shared_expert.md) as an [`Op`].

use super::{GradientCheck, Group, Op, Rows, Run, Values};
use crate::case::shared_expert::{SharedExpertBackward, SharedExpertCase, SharedExpertError, SharedExpertForward};
use crate::mpfr::shared_expert::{check_gradient, gradient_entries};
use crate::num::Num;
use crate::padding::PaddingRule;
use crate::profile::shared_expert::SharedExpertProfile;
use crate::profile_oracle::shared_expert::{self as oracle, SharedExpertDecisions};

/// The DeepSeek-V3 shared expert: a SwiGLU MLP on bf16 weights, forward y
/// and backward dX (weights frozen).
pub struct SharedExpert;

impl Op for SharedExpert {
    const NAME: &'static str = "shared_expert";
    type Case = SharedExpertCase;
    type Profile = SharedExpertProfile;
    type Decisions = SharedExpertDecisions;
    type Fwd<N: Num> = SharedExpertForward<N>;
    type Bwd<N: Num> = SharedExpertBackward<N>;
    type Error = SharedExpertError;

    fn validate(case: &SharedExpertCase) -> Result<(), SharedExpertError> {
        case.validate()
    }

    fn footprint(case: &SharedExpertCase) -> usize {
        let (t, h, f) = (case.t, case.h, case.f);
        let storage = case.layout.storage_len(t, h).unwrap_or(usize::MAX);
        [storage, t.saturating_mul(f).saturating_mul(2), f.saturating_mul(2).saturating_mul(h)]
            .into_iter()
            .max()
            .unwrap_or(0)
    }

    /// z = x w1^T and y = h w2^T: 3 T H F multiply-adds (the backward as
    /// many again).
    fn work(case: &SharedExpertCase) -> usize {
        case.t.saturating_mul(case.h).saturating_mul(case.f).saturating_mul(3)
    }

    fn dims(case: &SharedExpertCase) -> Vec<(&'static str, usize)> {
        vec![("T", case.t), ("H", case.h), ("F", case.f)]
    }

    fn profiles() -> Vec<SharedExpertProfile> {
        SharedExpertProfile::all()
    }

    fn exact_profile() -> SharedExpertProfile {
        SharedExpertProfile::serial()
    }

    fn any_order_profile() -> SharedExpertProfile {
        SharedExpertProfile::any_order()
    }

    /// No padding mask (docs/ops/shared_expert.md#padding-rows): every token is
    /// computed.
    const HAS_PADDING: bool = false;

    /// No padding rows: both padding rules are this one op.
    fn forward_under<N: Num>(
        case: &SharedExpertCase,
        profile: &SharedExpertProfile,
        _rule: PaddingRule,
        imposed: Option<&SharedExpertDecisions>,
    ) -> Result<Run<SharedExpertForward<N>, SharedExpertDecisions>, SharedExpertError> {
        oracle::forward_on(case, profile, imposed)
    }

    fn backward_under<N: Num>(
        case: &SharedExpertCase,
        profile: &SharedExpertProfile,
        _rule: PaddingRule,
        imposed: Option<&SharedExpertDecisions>,
    ) -> Result<Run<SharedExpertBackward<N>, SharedExpertDecisions>, SharedExpertError> {
        oracle::backward_on(case, profile, imposed)
    }

    /// y, T x H: row t depends on token t alone (batch invariance,
    /// docs/ops/shared_expert.md#properties).
    fn fwd_groups<'a, N: Num>(case: &SharedExpertCase, f: &'a SharedExpertForward<N>) -> Vec<Group<'a, N>> {
        vec![Group { name: "y", rows: Rows::PerToken { local: true }, cols: case.h, values: Values::Real(&f.y) }]
    }

    /// dX, T x H: row t depends on token t alone (the weights are frozen).
    fn bwd_groups<'a, N: Num>(case: &SharedExpertCase, b: &'a SharedExpertBackward<N>) -> Vec<Group<'a, N>> {
        vec![Group { name: "dx", rows: Rows::PerToken { local: true }, cols: case.h, values: Values::Real(&b.dx) }]
    }

    /// The derivative of the forward with its bf16 roundings as the
    /// identity (see [`crate::mpfr::shared_expert`] for what is and is not
    /// checked).
    fn check_gradient(case: &SharedExpertCase, max_entries: usize) -> Result<GradientCheck, SharedExpertError> {
        check_gradient(case, &gradient_entries(case, max_entries)?)
    }
}
