//! `seqwise_loss` (docs/ops/seqwise_loss.md) as an [`Op`].

use super::{GradientCheck, Group, Op, Rows, Run, Values};
use crate::case::seqwise_loss::{Objective, SeqwiseBackward, SeqwiseCase, SeqwiseError, SeqwiseForward};
use crate::mpfr::seqwise_loss::{check_gradient, gradient_entries};
use crate::num::Num;
use crate::padding::PaddingRule;
use crate::profile::seqwise_loss::SeqwiseProfile;
use crate::profile_oracle::seqwise_loss::{self as oracle, Decisions};
use crate::vocab::ClampTie;

/// The DeepSeek-V3 microbatch-wise load-balance loss.
pub struct SeqwiseLoss;

impl Op for SeqwiseLoss {
    const NAME: &'static str = "seqwise_loss";
    type Case = SeqwiseCase;
    type Profile = SeqwiseProfile;
    type Decisions = Decisions;
    type Fwd<N: Num> = SeqwiseForward<N>;
    type Bwd<N: Num> = SeqwiseBackward<N>;
    type Error = SeqwiseError;

    fn validate(case: &SeqwiseCase) -> Result<(), SeqwiseError> {
        case.validate()
    }

    const HAS_CLAMP: bool = true;

    fn with_clamp_tie(case: &SeqwiseCase, tie: ClampTie) -> Option<SeqwiseCase> {
        Some(SeqwiseCase { clamp_tie: tie, ..case.clone() })
    }

    fn footprint(case: &SeqwiseCase) -> usize {
        let te = case.t.saturating_mul(case.e);
        case.layout.storage_len(case.t, case.e).unwrap_or(usize::MAX).max(te)
    }

    fn dims(case: &SeqwiseCase) -> Vec<(&'static str, usize)> {
        let mut d = vec![("T", case.t), ("E", case.e)];
        if let Objective::UnbiasedTopK { k } = case.objective {
            d.push(("k", k));
        }
        d
    }

    fn profiles() -> Vec<SeqwiseProfile> {
        SeqwiseProfile::all()
    }

    fn exact_profile() -> SeqwiseProfile {
        SeqwiseProfile::serial()
    }

    fn any_order_profile() -> SeqwiseProfile {
        SeqwiseProfile::any_order()
    }

    fn forward_under<N: Num>(
        case: &SeqwiseCase,
        profile: &SeqwiseProfile,
        rule: PaddingRule,
        imposed: Option<&Decisions>,
    ) -> Result<Run<SeqwiseForward<N>, Decisions>, SeqwiseError> {
        oracle::forward_under(case, profile, rule, imposed)
    }

    fn backward_under<N: Num>(
        case: &SeqwiseCase,
        profile: &SeqwiseProfile,
        rule: PaddingRule,
        imposed: Option<&Decisions>,
    ) -> Result<Run<SeqwiseBackward<N>, Decisions>, SeqwiseError> {
        oracle::backward_under(case, profile, rule, imposed)
    }

    /// counts, then f, then raw: a bitwise comparison reports the first
    /// difference in that order.
    fn fwd_groups<'a, N: Num>(_case: &SeqwiseCase, f: &'a SeqwiseForward<N>) -> Vec<Group<'a, N>> {
        vec![
            Group {
                name: "counts",
                rows: Rows::Global,
                cols: f.counts.len(),
                values: Values::Int(f.counts.iter().map(|&c| c as i64).collect()),
            },
            Group { name: "f", rows: Rows::Global, cols: f.freq.len(), values: Values::Real(&f.freq) },
            Group { name: "raw", rows: Rows::Global, cols: 1, values: Values::Real(std::slice::from_ref(&f.raw)) },
        ]
    }

    /// The gradient, T x E. Row t depends on every valid row (through f_e):
    /// not local.
    fn bwd_groups<'a, N: Num>(case: &SeqwiseCase, b: &'a SeqwiseBackward<N>) -> Vec<Group<'a, N>> {
        vec![Group { name: "grad", rows: Rows::PerToken { local: false }, cols: case.e, values: Values::Real(&b.grad) }]
    }

    fn check_gradient(case: &SeqwiseCase, max_entries: usize) -> Result<GradientCheck, SeqwiseError> {
        check_gradient(case, &gradient_entries(case, max_entries))
    }
}
