//! `seqwise_loss` forward and backward, exactly as docs/ops/seqwise_loss.md
//! associates each formula, with every sum in the order its profile names.

use crate::case::seqwise_loss::{Objective, SeqwiseBackward, SeqwiseCase, SeqwiseError, SeqwiseForward};
use crate::num::Num;
use crate::padding::{masked, PaddingRule};
use crate::profile::seqwise_loss::SeqwiseProfile;
use crate::vocab::{ClampTie, EPS, EPS2};
use std::cmp::Ordering;

/// The discrete decisions the profile takes on computed values, per row
/// (ProvidedMap only; the top-k is decided on exact inputs and needs none).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Decisions {
    /// d_t = max(n_t, eps) took n_t (true; also when n_t is NaN) or eps.
    pub keep_norm: Vec<bool>,
    /// The backward's gradient gate on n_t.
    pub gate: Vec<bool>,
}

/// A result with the decisions taken (see [`crate::op::Run`]).
pub type Run<T> = crate::op::Run<T, Decisions>;

/// The profile oracle: forward in plain f32.
pub fn forward(case: &SeqwiseCase, profile: &SeqwiseProfile) -> Result<SeqwiseForward<f32>, SeqwiseError> {
    Ok(forward_on::<f32>(case, profile, None)?.out)
}

/// The profile oracle: backward in plain f32.
pub fn backward(case: &SeqwiseCase, profile: &SeqwiseProfile) -> Result<SeqwiseBackward<f32>, SeqwiseError> {
    Ok(backward_on::<f32>(case, profile, None)?.out)
}

/// Checks the case and the profile: everything below may index freely.
pub fn validate(case: &SeqwiseCase, profile: &SeqwiseProfile) -> Result<(), SeqwiseError> {
    case.validate()?;
    profile.validate().map_err(SeqwiseError::Profile)
}

/// The L1 denominator of one row (ProvidedMap): d = max(n, eps) with n the
/// row's sum of |s| in the profile's `row` order (NaN propagates), and the
/// backward's gate on n. Returns (d, keep_norm, gate, near_tie): the
/// decisions are `imposed` when given (near_tie: this value type's own
/// decisions differ), else this value type's own.
pub(crate) fn l1_denominator<N: Num>(
    row: &[N],
    profile: &SeqwiseProfile,
    clamp_tie: ClampTie,
    imposed: Option<(bool, bool)>,
) -> (N, bool, bool, bool) {
    let abs: Vec<N> = row.iter().map(N::abs).collect();
    let n = profile.row.reduce(&abs);
    let cmp = n.cmp_f32(EPS);
    // max(n, eps) with NaN propagating: eps only where n < eps.
    let own_keep = cmp != Some(Ordering::Less);
    let own_gate = match clamp_tie {
        ClampTie::Strict => cmp == Some(Ordering::Greater),
        ClampTie::Inclusive => matches!(cmp, Some(Ordering::Greater | Ordering::Equal)),
    };
    let (keep, gate) = imposed.unwrap_or((own_keep, own_gate));
    let d = if keep { n } else { N::input(EPS) };
    (d, keep, gate, (keep, gate) != (own_keep, own_gate))
}

/// sgn(s): +1, -1, +0.0 for either zero (PyTorch's (0 < x) - (x < 0)), NaN
/// for NaN; read off the value's sign (an exact value's, for the exact type).
pub(crate) fn sgn_of<N: Num>(s: &N) -> N {
    N::input(match s.cmp_f32(0.0) {
        None => f32::NAN,
        Some(Ordering::Greater) => 1.0,
        Some(Ordering::Less) => -1.0,
        Some(Ordering::Equal) => 0.0,
    })
}

/// One valid row's gradient, given a_e = g * f_e and the row's denominator d:
/// q = sum_e ( -(a_e * ((s_e / d) / d)) ) in the profile's `q` order, then
/// grad_k = a_k / d + sgn(s_k) * r with r = (gate ? q : +0.0) (ProvidedMap:
/// `gate` is Some), or grad_k = a_k / d + q (UnbiasedTopK: `gate` is None).
pub(crate) fn row_gradient<N: Num>(row: &[N], a: &[N], d: &N, gate: Option<bool>, profile: &SeqwiseProfile) -> Vec<N> {
    let terms: Vec<N> = row.iter().zip(a).map(|(s, a_e)| a_e.mul(&s.div(d).div(d)).neg()).collect();
    let q = profile.q.reduce(&terms);
    row.iter()
        .zip(a)
        .map(|(s, a_k)| {
            let first = a_k.div(d);
            match gate {
                Some(open) => {
                    let r = if open { q.clone() } else { N::zero() };
                    first.add(&sgn_of(s).mul(&r))
                }
                None => first.add(&q),
            }
        })
        .collect()
}

/// f_e = (c_e / max(C, eps)) * E, in f32: divide, then multiply.
pub(crate) fn frequencies_of<N: Num>(counts: &[u32]) -> Vec<N> {
    let total: u64 = counts.iter().map(|&c| c as u64).sum();
    // C <= 2^24 (validated), so `as f32` is exact.
    let denom = N::input(if total == 0 { EPS } else { total as f32 });
    let experts = N::input(counts.len() as f32);
    counts.iter().map(|&c| N::input(c as f32).div(&denom).mul(&experts)).collect()
}

/// Per-row denominators: d_t (ProvidedMap) or D_t (UnbiasedTopK), with the
/// decisions taken for each row. Under [`PaddingRule::Skip`] padding rows
/// get +0.0 and are never read; under [`PaddingRule::Mask`] they are
/// computed like valid rows (their clamp and gate decided on their values).
struct Denominators<N> {
    d: Vec<N>,
    decisions: Decisions,
    near_ties: usize,
}

fn denominators<N: Num>(
    case: &SeqwiseCase,
    profile: &SeqwiseProfile,
    rule: PaddingRule,
    imposed: Option<&Decisions>,
) -> Denominators<N> {
    let mut d = Vec::with_capacity(case.t);
    let mut decisions = Decisions { keep_norm: vec![true; case.t], gate: vec![true; case.t] };
    let mut near_ties = 0;
    let provided = matches!(case.objective, Objective::ProvidedMap { .. });
    for t in 0..case.t {
        if case.is_padding(t) && rule == PaddingRule::Skip {
            d.push(N::zero());
            continue;
        }
        let row: Vec<N> = case.row(t).iter().map(|&s| N::input(s)).collect();
        if !provided {
            let sum = profile.row.reduce(&row);
            d.push(sum.add(&N::input(EPS2)));
            continue;
        }
        let imposed_row = imposed.map(|dec| (dec.keep_norm[t], dec.gate[t]));
        let (dt, keep, gate, near) = l1_denominator(&row, profile, case.clamp_tie, imposed_row);
        near_ties += near as usize;
        decisions.keep_norm[t] = keep;
        decisions.gate[t] = gate;
        d.push(dt);
    }
    Denominators { d, decisions, near_ties }
}

/// The exact counts c_e of the routing map (valid rows only).
fn counts_of(case: &SeqwiseCase) -> Vec<u32> {
    let map = case.routing_map();
    let mut counts = vec![0u32; case.e];
    for row in map.chunks(case.e) {
        for (c, &m) in counts.iter_mut().zip(row) {
            *c += m as u32;
        }
    }
    counts
}

/// Forward on any value type. `imposed` replaces the decisions the value type
/// would take (the exact oracle takes the profile's); it must hold a decision
/// for every row.
pub fn forward_on<N: Num>(
    case: &SeqwiseCase,
    profile: &SeqwiseProfile,
    imposed: Option<&Decisions>,
) -> Result<Run<SeqwiseForward<N>>, SeqwiseError> {
    forward_under(case, profile, PaddingRule::Skip, imposed)
}

/// [`forward_on`] under padding rule `rule` (docs/padding.md): under
/// [`PaddingRule::Mask`] a padding row's p_te is computed and multiplied by
/// 0.0 before the token sum, P_e = sum over every t of (p_te * m_t).
pub fn forward_under<N: Num>(
    case: &SeqwiseCase,
    profile: &SeqwiseProfile,
    rule: PaddingRule,
    imposed: Option<&Decisions>,
) -> Result<Run<SeqwiseForward<N>>, SeqwiseError> {
    validate(case, profile)?;
    check_decisions(case, imposed)?;
    Ok(forward_unchecked(case, profile, rule, imposed))
}

pub(crate) fn check_decisions(case: &SeqwiseCase, imposed: Option<&Decisions>) -> Result<(), SeqwiseError> {
    match imposed {
        Some(d) if d.keep_norm.len() != case.t || d.gate.len() != case.t => {
            Err(SeqwiseError::Decisions { expected: case.t, got: d.keep_norm.len().min(d.gate.len()) })
        }
        _ => Ok(()),
    }
}

/// [`forward_on`] on a case and decisions already checked.
pub(crate) fn forward_unchecked<N: Num>(
    case: &SeqwiseCase,
    profile: &SeqwiseProfile,
    rule: PaddingRule,
    imposed: Option<&Decisions>,
) -> Run<SeqwiseForward<N>> {
    let counts = counts_of(case);
    let freq = frequencies_of::<N>(&counts);
    let den = denominators::<N>(case, profile, rule, imposed);
    let (t_n, e_n) = (case.t, case.e);
    // p stored expert-major so each P_e reduces a contiguous column.
    let mut p = vec![N::zero(); t_n * e_n];
    for t in 0..t_n {
        let padding = case.is_padding(t);
        if padding && rule == PaddingRule::Skip {
            continue;
        }
        for (e, &s) in case.row(t).iter().enumerate() {
            let p_te = N::input(s).div(&den.d[t]);
            // Mask: p_te * m_t with m_t = 0.0 (1.0 on a valid row, not
            // multiplied in: exact).
            p[e * t_n + t] = if padding { masked(&p_te) } else { p_te };
        }
    }
    let terms: Vec<N> = (0..e_n).map(|e| freq[e].mul(&profile.tokens.reduce(&p[e * t_n..(e + 1) * t_n]))).collect();
    let raw = profile.raw.reduce(&terms);
    Run {
        out: SeqwiseForward { raw, counts, freq },
        decisions: den.decisions,
        near_ties: den.near_ties,
        contradicted: Vec::new(),
    }
}

/// sgn(s): +1, -1, +0.0 for either zero (PyTorch's (0 < x) - (x < 0)), NaN
/// for NaN.
pub fn sgn(s: f32) -> f32 {
    sgn_of(&s)
}

/// Backward on any value type (see [`forward_on`] for `imposed`).
pub fn backward_on<N: Num>(
    case: &SeqwiseCase,
    profile: &SeqwiseProfile,
    imposed: Option<&Decisions>,
) -> Result<Run<SeqwiseBackward<N>>, SeqwiseError> {
    backward_under(case, profile, PaddingRule::Skip, imposed)
}

/// [`backward_on`] under padding rule `rule` (docs/padding.md): under
/// [`PaddingRule::Mask`] a padding row's gradient is the valid row's formula
/// with a_e * 0.0 in place of a_e (autograd of p_te * m_t: the gradient
/// reaching p_te is a_e * m_t).
pub fn backward_under<N: Num>(
    case: &SeqwiseCase,
    profile: &SeqwiseProfile,
    rule: PaddingRule,
    imposed: Option<&Decisions>,
) -> Result<Run<SeqwiseBackward<N>>, SeqwiseError> {
    validate(case, profile)?;
    check_decisions(case, imposed)?;
    Ok(backward_unchecked(case, profile, rule, imposed))
}

/// [`backward_on`] on a case and decisions already checked.
pub(crate) fn backward_unchecked<N: Num>(
    case: &SeqwiseCase,
    profile: &SeqwiseProfile,
    rule: PaddingRule,
    imposed: Option<&Decisions>,
) -> Run<SeqwiseBackward<N>> {
    let freq = frequencies_of::<N>(&counts_of(case));
    let g = N::input(case.g);
    let a: Vec<N> = freq.iter().map(|f| g.mul(f)).collect();
    // The mask rule's a_e * 0.0, for padding rows.
    let a_masked: Vec<N> = a.iter().map(masked).collect();
    let den = denominators::<N>(case, profile, rule, imposed);
    let provided = matches!(case.objective, Objective::ProvidedMap { .. });
    let mut grad = vec![N::zero(); case.t * case.e];
    for t in 0..case.t {
        let padding = case.is_padding(t);
        if padding && rule == PaddingRule::Skip {
            continue;
        }
        let row: Vec<N> = case.row(t).iter().map(|&s| N::input(s)).collect();
        let gate = provided.then_some(den.decisions.gate[t]);
        let a_row = if padding { &a_masked } else { &a };
        let g_row = row_gradient(&row, a_row, &den.d[t], gate, profile);
        grad[t * case.e..(t + 1) * case.e].clone_from_slice(&g_row);
    }
    Run { out: SeqwiseBackward { grad }, decisions: den.decisions, near_ties: den.near_ties, contradicted: Vec::new() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::seqwise_loss::Objective;

    #[test]
    fn uniform_rows_give_raw_one() {
        // 4 tokens, 4 experts, every score 0.25, top-2: P_e = 1 (4 rows of
        // 0.25/1), c = (4,4,0,0), f = (2,2,0,0): raw = 4. Derived by hand.
        let c = SeqwiseCase::dense(4, 4, vec![0.25; 16], Objective::UnbiasedTopK { k: 2 });
        for p in SeqwiseProfile::all() {
            let f = forward(&c, &p).unwrap();
            assert_eq!(f.counts, vec![4, 4, 0, 0]);
            assert_eq!(f.freq, vec![2.0, 2.0, 0.0, 0.0]);
            assert_eq!(f.raw, 4.0, "{}", p.name);
        }
    }

    #[test]
    fn padding_rows_get_positive_zero_gradient() {
        let mut c = SeqwiseCase::dense(2, 2, vec![0.5, 0.5, f32::NAN, -1.0], Objective::UnbiasedTopK { k: 1 });
        c.padding = Some(vec![false, true]);
        let b = backward(&c, &SeqwiseProfile::serial()).unwrap();
        assert_eq!(b.grad[2].to_bits(), 0);
        assert_eq!(b.grad[3].to_bits(), 0);
        assert!(b.grad[0].is_finite());
    }

    #[test]
    fn invalid_cases_and_profiles_are_errors() {
        let mut c = SeqwiseCase::dense(1, 2, vec![0.5, 0.5], Objective::UnbiasedTopK { k: 3 });
        assert!(matches!(forward(&c, &SeqwiseProfile::serial()), Err(SeqwiseError::KOutOfRange { .. })));
        c.objective = Objective::UnbiasedTopK { k: 1 };
        let mut p = SeqwiseProfile::gpu();
        p.tokens = crate::order::ReductionOrder::chunked(
            0,
            crate::order::ReductionOrder::Serial,
            crate::order::ReductionOrder::Serial,
        );
        assert!(matches!(backward(&c, &p), Err(SeqwiseError::Profile(_))));
        let short = Decisions { keep_norm: vec![], gate: vec![] };
        assert!(forward_on::<f32>(&c, &SeqwiseProfile::serial(), Some(&short)).is_err());
    }

    #[test]
    fn gate_follows_the_clamp_tie() {
        // One row whose L1 norm is exactly eps: Strict closes the gate,
        // Inclusive opens it, so only Inclusive has a q term.
        let map = Objective::ProvidedMap { map: vec![true, false] };
        let mut c = SeqwiseCase::dense(1, 2, vec![EPS / 2.0, -EPS / 2.0], map);
        let strict = backward(&c, &SeqwiseProfile::serial()).unwrap().grad;
        c.clamp_tie = ClampTie::Inclusive;
        let inclusive = backward(&c, &SeqwiseProfile::serial()).unwrap().grad;
        assert_ne!(strict[0].to_bits(), inclusive[0].to_bits());
    }
}
