//! `moe_combine` forward and backward, exactly as docs/ops/moe_combine.md
//! associates each formula, with every sum in the order its profile names.
//! Written once over [`Num`]: on `f32` the profile oracle's bits, on
//! [`crate::num::Bounded`] their rigorous bound, on [`crate::mpfr::Exact`]
//! the exact values, on [`crate::mpfr::rational::Rat`] exact rationals.
//!
//! # Decisions
//!
//! The dispatch ([`dispatch`]) is exact integer work on the ids, the padding
//! flags and the capacity: every value type computes the same one, and it is
//! recorded in [`MoeCombineDecisions`] only so that an imposed run can be
//! checked to be about the same case.
//!
//! Under a `bf16_out` profile the one rounding of y to bf16 is a decision of
//! the output, as `shared_expert`'s y is: each value type rounds its own
//! value (the exact oracle rounds the exact y), and the imposed decisions
//! are compared with it only to count near ties (a rounding the profile's
//! bound could not vouch for, landing elsewhere than the exact value's). The
//! exact oracle runs the `serial` profile ([`crate::op::Op::exact_profile`]):
//! the decisions tell it that y is rounded (`y` is `Some`), which the
//! profile's name alone would not.
//!
//! # Padding
//!
//! A padding token is never dispatched, under both padding rules: the
//! dispatch is discrete (like `seqwise_loss`'s counts, it is the same under
//! `skip` and `mask`), so a padding token has no kept choice, and its y, dw
//! and dx are the empty sums, +0.0, with nothing left for a mask to
//! multiply. The rule changes nothing here (docs/ops/moe_combine.md#padding-and-capacity).

use crate::bf16::{same_rounding, Bf16Decision, Rounding};
use crate::case::moe_combine::{
    dispatch, Dispatch, MoeCombineBackward, MoeCombineCase, MoeCombineError, MoeCombineForward,
};
use crate::case::shared_expert::is_bf16;
use crate::num::Num;
use crate::op::Run;
use crate::padding::PaddingRule;
use crate::profile::moe_combine::{MoeCombineProfile, TermOrder};

/// What a run decided: the dispatch, and under a `bf16_out` forward the
/// rounding of each y.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MoeCombineDecisions {
    pub dispatch: Dispatch,
    /// T x H: y's rounding to bf16 (row-major), with whether the run's bound
    /// vouched for it; `None` where y is not rounded (an f32 profile, and
    /// every backward). Compared, never imposed.
    pub y: Option<Vec<Bf16Decision>>,
}

/// Checks the case and the profile: everything below may index freely.
pub fn validate(case: &MoeCombineCase, profile: &MoeCombineProfile) -> Result<(), MoeCombineError> {
    case.validate()?;
    profile.validate().map_err(MoeCombineError::Profile)
}

/// Checks imposed decisions against a validated case and its dispatch `d`;
/// returns whether y is rounded to bf16 (see the module docs).
fn check_decisions(
    case: &MoeCombineCase,
    profile: &MoeCombineProfile,
    d: &Dispatch,
    imposed: Option<&MoeCombineDecisions>,
    backward: bool,
) -> Result<bool, MoeCombineError> {
    let bad = |why: String| Err(MoeCombineError::Decisions(why));
    let Some(i) = imposed else { return Ok(!backward && profile.bf16_out) };
    if i.dispatch != *d {
        return bad("the imposed dispatch is not this case's".into());
    }
    match (&i.y, backward) {
        (Some(_), true) => bad("a backward rounds nothing to bf16".into()),
        (None, false) if profile.bf16_out => {
            bad(format!("profile {} rounds y to bf16, the decisions do not", profile.name))
        }
        (None, _) => Ok(false),
        (Some(v), false) => {
            let n = case.t * case.h;
            if v.len() != n {
                return bad(format!("y holds {} decisions, expected {n}", v.len()));
            }
            if let Some(i) = v.iter().position(|d| !is_bf16(d.value)) {
                return bad(format!("y[{i}] = {:#010x} is not a bf16 value", v[i].value.to_bits()));
            }
            Ok(true)
        }
    }
}

/// Token t's kept choices as (j, slot), listed in the profile's term order:
/// what its sums run over. Empty for a padding token.
pub fn listed(d: &Dispatch, k: usize, t: usize, order: TermOrder) -> Vec<(usize, usize)> {
    let mut v: Vec<(usize, usize)> = d.kept(t, k).map(|j| (j, d.slot[t * k + j] as usize)).collect();
    if order == TermOrder::BySlot {
        v.sort_by_key(|&(_, s)| s);
    }
    v
}

/// Whether a value type's rounding `r` of y lands elsewhere than the imposed
/// decision `d` where one of them is unsure (a near tie). Where both are
/// certain and differ, the accuracy check of y sees it.
fn near_tie<N: Num>(r: &Rounding<N>, d: &Bf16Decision) -> bool {
    match r.decision {
        Some(own) if same_rounding(own, d.value) => false,
        Some(_) if r.certain && d.certain => false,
        _ => true,
    }
}

/// The forward on any value type under padding rule `rule` (which changes
/// nothing: see the module docs). `imposed`: the decisions of the profile
/// being judged (its dispatch, and its y roundings when it rounds y).
///
/// x_disp[s] = x[owner(s)], copied; y[t][h] = the sum, in the profile's
/// `combine` order over the kept choices listed in its `terms` order, of
/// (w[t][j] * x_exp[slot][h]), each product rounded, from +0.0; then one
/// rounding to bf16 under `bf16_out`.
pub fn forward_under<N: Num>(
    case: &MoeCombineCase,
    profile: &MoeCombineProfile,
    _rule: PaddingRule,
    imposed: Option<&MoeCombineDecisions>,
) -> Result<Run<MoeCombineForward<N>, MoeCombineDecisions>, MoeCombineError> {
    validate(case, profile)?;
    let d = dispatch(case)?;
    let round_y = check_decisions(case, profile, &d, imposed, false)?;
    let (t_n, h_n, k) = (case.t, case.h, case.k);
    let mut x_disp = Vec::with_capacity(d.n_slots * h_n);
    for s in 0..d.n_slots {
        let (t, _) = d.owner_of(s, k);
        x_disp.extend(case.x_row(t).iter().map(|&v| N::input(v)));
    }
    let imposed_y = imposed.and_then(|i| i.y.as_ref());
    let mut near = vec![false; t_n];
    let mut decisions_y = Vec::with_capacity(if round_y { t_n * h_n } else { 0 });
    let mut y = Vec::with_capacity(t_n * h_n);
    for t in 0..t_n {
        let kept = listed(&d, k, t, profile.terms);
        let w: Vec<N> = kept.iter().map(|&(j, _)| N::input(case.weights_row(t)[j])).collect();
        for i in 0..h_n {
            let terms: Vec<N> =
                kept.iter().zip(&w).map(|(&(_, s), wj)| wj.mul(&N::input(case.x_exp_row(s)[i]))).collect();
            let acc = profile.combine.reduce(&terms);
            if !round_y {
                y.push(acc);
                continue;
            }
            let r = acc.round_bf16();
            if let Some(dec) = imposed_y.map(|v| &v[t * h_n + i]) {
                near[t] |= near_tie(&r, dec);
            }
            decisions_y
                .push(Bf16Decision { value: r.decision.unwrap_or_else(|| r.value.to_f32()), certain: r.certain });
            y.push(r.value);
        }
    }
    let near_ties = near.iter().filter(|&&n| n).count();
    let out = MoeCombineForward { slot: d.slot.clone(), counts: d.counts.clone(), x_disp, y };
    let decisions = MoeCombineDecisions { dispatch: d, y: round_y.then_some(decisions_y) };
    Ok(Run { out, decisions, near_ties, contradicted: Vec::new() })
}

/// The backward on any value type (see [`forward_under`]).
///
/// dx_exp[slot][h] = w[t][j] * dy[t][h], one product; dw[t][j] = the sum
/// over h, in the profile's `dw` order, of (dy[t][h] * x_exp[slot][h]) for a
/// kept choice, +0.0 for a dropped one; dx[t][h] = the sum of
/// g_disp[slot][h] over the kept choices, listed and reduced as y's terms.
pub fn backward_under<N: Num>(
    case: &MoeCombineCase,
    profile: &MoeCombineProfile,
    _rule: PaddingRule,
    imposed: Option<&MoeCombineDecisions>,
) -> Result<Run<MoeCombineBackward<N>, MoeCombineDecisions>, MoeCombineError> {
    validate(case, profile)?;
    let d = dispatch(case)?;
    check_decisions(case, profile, &d, imposed, true)?;
    let (t_n, h_n, k) = (case.t, case.h, case.k);
    let mut dx_exp = Vec::with_capacity(d.n_slots * h_n);
    for s in 0..d.n_slots {
        let (t, j) = d.owner_of(s, k);
        let w = N::input(case.weights_row(t)[j]);
        dx_exp.extend(case.dy_row(t).iter().map(|&g| w.mul(&N::input(g))));
    }
    let mut dw = Vec::with_capacity(t_n * k);
    let mut dx = Vec::with_capacity(t_n * h_n);
    for t in 0..t_n {
        for j in 0..k {
            let Ok(s) = usize::try_from(d.slot[t * k + j]) else {
                dw.push(N::zero());
                continue;
            };
            let terms: Vec<N> =
                case.dy_row(t).iter().zip(case.x_exp_row(s)).map(|(&g, &x)| N::input(g).mul(&N::input(x))).collect();
            dw.push(profile.dw.reduce(&terms));
        }
        let kept = listed(&d, k, t, profile.terms);
        for i in 0..h_n {
            let terms: Vec<N> = kept.iter().map(|&(_, s)| N::input(case.g_disp_row(s)[i])).collect();
            dx.push(profile.combine.reduce(&terms));
        }
    }
    let out = MoeCombineBackward { dx_exp, dw, dx };
    Ok(Run { out, decisions: MoeCombineDecisions { dispatch: d, y: None }, near_ties: 0, contradicted: Vec::new() })
}

/// [`forward_under`] bitparity's padding rule, `skip`.
#[allow(clippy::type_complexity)]
pub fn forward_on<N: Num>(
    case: &MoeCombineCase,
    profile: &MoeCombineProfile,
    imposed: Option<&MoeCombineDecisions>,
) -> Result<Run<MoeCombineForward<N>, MoeCombineDecisions>, MoeCombineError> {
    forward_under(case, profile, PaddingRule::Skip, imposed)
}

/// [`backward_under`] bitparity's padding rule, `skip`.
#[allow(clippy::type_complexity)]
pub fn backward_on<N: Num>(
    case: &MoeCombineCase,
    profile: &MoeCombineProfile,
    imposed: Option<&MoeCombineDecisions>,
) -> Result<Run<MoeCombineBackward<N>, MoeCombineDecisions>, MoeCombineError> {
    backward_under(case, profile, PaddingRule::Skip, imposed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::Layout;
    use crate::num::Bounded;

    /// T = 1, H = 1, E = 2, k = 2: ids (1, 0), so choice 0 holds slot 1
    /// (expert 1) and choice 1 slot 0 (expert 0).
    fn tiny() -> MoeCombineCase {
        MoeCombineCase {
            t: 1,
            h: 1,
            e: 2,
            k: 2,
            capacity: None,
            layout: Layout::dense(1),
            ids: vec![1, 0],
            weights: vec![1.0, 1.0],
            padding: None,
            x: vec![3.0],
            x_exp: vec![2f32.powi(-24), 1.0],
            dy: vec![1.0],
            g_disp: vec![0.5, 0.25],
        }
    }

    #[test]
    fn imposed_decisions_are_checked() {
        let c = tiny();
        let bf = MoeCombineProfile::serial_bf16();
        let run = forward_on::<Bounded>(&c, &bf, None).unwrap();
        assert_eq!(run.decisions.y.as_ref().map(Vec::len), Some(1));
        assert!(forward_on::<f32>(&c, &bf, Some(&run.decisions)).is_ok());
        // The exact profile, serial, rounds y when the decisions say so.
        let serial = MoeCombineProfile::serial();
        let exact_like = forward_on::<f32>(&c, &serial, Some(&run.decisions)).unwrap();
        assert!(exact_like.decisions.y.is_some());
        // A forward's y roundings are no backward's.
        assert!(matches!(backward_on::<f32>(&c, &serial, Some(&run.decisions)), Err(MoeCombineError::Decisions(_))));
        // A bf16 profile given decisions without y roundings.
        let plain = forward_on::<f32>(&c, &serial, None).unwrap().decisions;
        assert!(matches!(forward_on::<f32>(&c, &bf, Some(&plain)), Err(MoeCombineError::Decisions(_))));
        // Another case's dispatch.
        let mut other = plain.clone();
        other.dispatch.slot.swap(0, 1);
        assert!(matches!(forward_on::<f32>(&c, &serial, Some(&other)), Err(MoeCombineError::Decisions(_))));
        // A y decision that is not a bf16.
        let mut odd = run.decisions.clone();
        odd.y.as_mut().unwrap()[0].value = 1.0 + f32::EPSILON;
        assert!(matches!(forward_on::<f32>(&c, &bf, Some(&odd)), Err(MoeCombineError::Decisions(_))));
        // An invalid case is an error, not a panic.
        let mut bad = c.clone();
        bad.x_exp.pop();
        assert!(forward_on::<f32>(&bad, &serial, None).is_err());
        assert!(backward_on::<f32>(&bad, &serial, None).is_err());
    }

    #[test]
    fn the_term_orders_list_the_kept_choices() {
        let d = dispatch(&tiny()).unwrap();
        assert_eq!(d.slot, vec![1, 0]);
        assert_eq!(listed(&d, 2, 0, TermOrder::ByChoice), vec![(0, 1), (1, 0)]);
        assert_eq!(listed(&d, 2, 0, TermOrder::BySlot), vec![(1, 0), (0, 1)]);
    }
}
