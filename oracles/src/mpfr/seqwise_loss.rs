//! The gradient check of `seqwise_loss`: the analytic derivative (the exact
//! backward, [`crate::profile_oracle::seqwise_loss`] run on [`Exact`])
//! against central finite differences of the exact forward. The exact
//! results and what a profile is judged against are the generic ones, for
//! every op ([`super::reference`]).

use super::{with_precision, Bound, Exact};
use crate::case::seqwise_loss::SeqwiseError;
use crate::case::seqwise_loss::{Objective, SeqwiseCase};
use crate::num::Num;
use crate::op::GradientCheck;
use crate::padding::PaddingRule;
use crate::profile::seqwise_loss::SeqwiseProfile;
use crate::profile_oracle::seqwise_loss::{backward_unchecked, forward_unchecked};
use crate::vocab::{EPS, EPS2};
use rug::float::Round;
use rug::Float;
use std::cmp::Ordering;

/// Precision of the finite differences (bits). The step is 2^-100 of the
/// entry's magnitude, so s +- h is exact at this precision and the
/// quotient's rounding noise (2^-512 / 2^-100) stays far below its
/// truncation error.
pub const FD_PREC: u32 = 512;

/// Checks the analytic derivative (the exact backward, on exact decisions)
/// against central finite differences of the exact forward, entry (t, k)
/// for each pair of `entries`.
///
/// Criterion, with D(h) the central difference quotient and A the analytic
/// value: |D(h/2) - A| <= 2 |D(h) - D(h/2)|, on the exact values: the
/// computed ones differ from them by at most their rigorous bounds, which
/// widen the right side (see the code). Where the function is smooth, D(h) - A = c h^2 + O(h^4): the
/// left side is about |c| h^2 / 4, the right 3 |c| h^2 / 2. At s_tk = 0 the
/// |s| inside the L1 norm leaves only D(h) - A = c h + O(h^2) (the one-sided
/// second derivatives differ): left |c| h / 2, right |c| h. Either way a
/// right derivative passes with a margin of 2 or more, and a wrong one fails
/// by a factor near 2^100. The 2 comes from the convergence order, not from
/// a tolerance on the values.
/// Entries outside T x E are ignored.
pub fn check_gradient(case: &SeqwiseCase, entries: &[(usize, usize)]) -> Result<GradientCheck, SeqwiseError> {
    case.validate()?;
    let entries: Vec<(usize, usize)> = entries.iter().copied().filter(|&(t, k)| t < case.t && k < case.e).collect();
    Ok(with_precision(FD_PREC, || check_gradient_at(case, &entries)))
}

fn check_gradient_at(case: &SeqwiseCase, entries: &[(usize, usize)]) -> GradientCheck {
    let mut out = GradientCheck::default();
    let serial = SeqwiseProfile::serial();
    // Valid rows only (padding rows are skipped below): their formula is
    // the same under both padding rules (docs/padding.md).
    let fwd = forward_unchecked::<Exact>(case, &serial, PaddingRule::Skip, None).out;
    let analytic = backward_unchecked::<Exact>(case, &serial, PaddingRule::Skip, None).out;
    let g = Exact::input(case.g);
    let a: Vec<Exact> = fwd.freq.iter().map(|f| g.mul(f)).collect();
    let map = case.routing_map();
    let provided = matches!(case.objective, Objective::ProvidedMap { .. });
    for &(t, k) in entries {
        if case.is_padding(t) {
            continue;
        }
        let row = case.row(t);
        if !case.g.is_finite() || row.iter().any(|s| !s.is_finite()) {
            out.nonfinite += 1;
            continue;
        }
        // The step: 2^-100 of |s_tk| (so s_tk +- h keeps its sign: |s| has a
        // kink at 0), or of the row's largest magnitude when s_tk is zero
        // (the central difference of |s| at 0 is 0, as sgn(0) = 0 says).
        // It is also at most 2^-100 of the row's denominator, far from its pole.
        let max = row.iter().fold(0f32, |m, s| m.max(s.abs()));
        let scale = Float::with_val(FD_PREC, if row[k] != 0.0 { row[k].abs() } else { max });
        let den = row_denominator(row, provided);
        if den.is_zero() {
            out.nonfinite += 1;
            continue;
        }
        let scale = if scale.is_zero() { den } else { scale.min(&den) };
        let h = scale >> 100u32;
        if is_kink(case, t, k, &h, &map[t * case.e..(t + 1) * case.e], provided) {
            out.kinks += 1;
            continue;
        }
        let quotient = |step: &Float| -> Exact {
            let plus = row_objective(row, k, step, &a, provided);
            let minus = row_objective(row, k, &Float::with_val(FD_PREC, -step), &a, provided);
            let two_h = Exact::new(Float::with_val(FD_PREC, step * 2u32), Bound::ZERO);
            plus.add(&minus.neg()).div(&two_h)
        };
        let d1 = quotient(&h);
        let d2 = quotient(&Float::with_val(FD_PREC, &h >> 1u32));
        let am = &analytic.grad[t * case.e + k];
        if breaks_criterion(&d1, &d2, am) {
            out.failures.push(format!(
                "d raw/d s[{t}][{k}]: analytic {:e}, finite difference {:e}",
                am.v.to_f64(),
                d2.v.to_f64()
            ));
        }
        out.checked += 1;
    }
    out
}

/// Whether the analytic derivative `am` certainly breaks the criterion
/// |D2 - A| <= 2 |D1 - D2| against the central differences `d1` (step h)
/// and `d2` (step h/2): only where the exact values certainly break it,
/// |D2 - A| >= |d2 - am| - e2 - ea (rounded toward zero) against
/// 2 |D1 - D2| <= 2 |d1 - d2| + 2 e1 + 2 e2 (rounded up), the bounds moved
/// to the right: 2 e1 + 3 e2 + ea.
fn breaks_criterion(d1: &Exact, d2: &Exact, am: &Exact) -> bool {
    let lhs = Float::with_val_round(FD_PREC, &d2.v - &am.v, Round::Zero).0.abs();
    let spread = Float::with_val_round(FD_PREC, &d1.v - &d2.v, Round::AwayZero).0.abs();
    // The bounds as Bounds (any magnitude), summed upward, then as an MPFR
    // number at least as large (+inf where nothing is known: no failure).
    let (two, three) = (Bound::from_f64(2.0), Bound::from_f64(3.0));
    let slack = two.mul_up(d1.err).add_up(three.mul_up(d2.err)).add_up(am.err).to_float();
    let doubled = spread * 2u32; // exact
    let rhs = Float::with_val_round(FD_PREC, &doubled + &slack, Round::Up).0;
    lhs > rhs
}

/// g * (row t's contribution to raw) with s_tk moved by `step`: the function
/// whose derivative the backward claims to be.
fn row_objective(row: &[f32], k: usize, step: &Float, a: &[Exact], provided: bool) -> Exact {
    let s: Vec<Exact> = row
        .iter()
        .enumerate()
        .map(|(e, &x)| {
            let mut v = Exact::input(x);
            if e == k {
                // s + h is exact at FD_PREC unless h lies far below s (a
                // tiny top-k denominator); its rounding error, if any, is
                // then carried as the input's bound, so the quotient's
                // bound covers f(s + h), not f(the rounded s + h).
                let (moved, dir) = Float::with_val_round(FD_PREC, &v.v + step, Round::Nearest);
                let err = if dir == Ordering::Equal {
                    Bound::ZERO
                } else {
                    Bound::pow2(-(FD_PREC as i64)).mul_up(Bound::abs_up(&moved))
                };
                v = Exact::new(moved, err);
            }
            v
        })
        .collect();
    let serial = crate::order::ReductionOrder::Serial;
    let d = if provided {
        let n = serial.reduce(&s.iter().map(Num::abs).collect::<Vec<_>>());
        if n.cmp_f32(EPS) == Some(Ordering::Less) {
            Exact::input(EPS)
        } else {
            n
        }
    } else {
        serial.reduce(&s).add(&Exact::input(EPS2))
    };
    let terms: Vec<Exact> = s.iter().zip(a).map(|(x, a_e)| a_e.mul(&x.div(&d))).collect();
    serial.reduce(&terms)
}

/// |d_t| or |D_t| of a row, exactly.
fn row_denominator(row: &[f32], provided: bool) -> Float {
    let mut acc = Float::with_val(FD_PREC, 0);
    for &s in row {
        if provided {
            acc += s.abs();
        } else {
            acc += s;
        }
    }
    if provided {
        acc.max(&Float::with_val(FD_PREC, EPS))
    } else {
        (acc + EPS2).abs()
    }
}

/// Whether moving s_tk by up to h can change a decision: the clamp or gate
/// of n_t against eps, or (top-k) the selection of k against a value within h.
fn is_kink(case: &SeqwiseCase, t: usize, k: usize, h: &Float, selected: &[bool], provided: bool) -> bool {
    let row = case.row(t);
    if provided {
        let n = row.iter().fold(Float::with_val(FD_PREC, 0), |acc, s| acc + s.abs());
        let dist = Float::with_val(FD_PREC, &n - EPS).abs();
        return dist <= *h;
    }
    let sk = Float::with_val(FD_PREC, row[k]);
    row.iter()
        .enumerate()
        .any(|(j, &sj)| j != k && selected[j] != selected[k] && Float::with_val(FD_PREC, &sk - sj).abs() <= *h)
}

/// Entries for the gradient check: every one of a small case, else up to
/// `max` spread over the case (first and last rows and experts included).
pub fn gradient_entries(case: &SeqwiseCase, max: usize) -> Vec<(usize, usize)> {
    let all = case.t * case.e;
    if all <= max {
        return (0..all).map(|i| (i / case.e, i % case.e)).collect();
    }
    let mut v: Vec<(usize, usize)> = (0..max)
        .map(|i| {
            let flat = i * (all - 1) / (max - 1).max(1);
            (flat / case.e, flat % case.e)
        })
        .collect();
    v.dedup();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A selected and an unselected score within the step of each other are
    /// a kink (the step may swap them); a score far from every score of the
    /// other side is not. Scores 0.5 + 2^-22 (chosen, k = 1), 0.5 and 0.25,
    /// step 2^-20.
    #[test]
    fn a_selection_edge_within_the_step_is_a_kink() {
        let c = SeqwiseCase::dense(1, 3, vec![0.5, 0.5 + 2f32.powi(-22), 0.25], Objective::UnbiasedTopK { k: 1 });
        let h = Float::with_val(FD_PREC, 2f64.powi(-20));
        let selected = [false, true, false];
        assert!(is_kink(&c, 0, 1, &h, &selected, false));
        assert!(is_kink(&c, 0, 0, &h, &selected, false));
        assert!(!is_kink(&c, 0, 2, &h, &selected, false));
    }

    /// |d_t| = |sum of s + 1e-20| for the loss's own map, max(sum |s|, eps) for
    /// a provided one (docs/ops/seqwise_loss.md#forward), exactly: the signs of
    /// the scores count in the first and not in the second.
    #[test]
    fn row_denominators_follow_the_spec() {
        let f = |v: f32| Float::with_val(FD_PREC, v);
        assert_eq!(row_denominator(&[1.0, 2.0], false), f(3.0) + f(EPS2));
        assert_eq!(row_denominator(&[-1.0, -2.0], false), f(3.0) - f(EPS2));
        assert_eq!(row_denominator(&[-1.0, 2.0], true), f(3.0));
        assert_eq!(row_denominator(&[0.0, 0.0], true), f(EPS));
    }

    #[test]
    fn the_criterion_allows_twice_the_spread_and_no_more() {
        // d1 = 1, d2 = 1.125: |D1 - D2| = 1/8, so A may be 1/4 from d2.
        let x = |v: f64| Exact::new(Float::with_val(FD_PREC, v), Bound::ZERO);
        let (d1, d2) = (x(1.0), x(1.125));
        assert!(!breaks_criterion(&d1, &d2, &x(1.125)));
        assert!(!breaks_criterion(&d1, &d2, &x(1.3125))); // 3/16 off: within 1/4
        assert!(!breaks_criterion(&d1, &d2, &x(0.875))); // exactly 1/4 off
        assert!(breaks_criterion(&d1, &d2, &x(1.5)));
        assert!(breaks_criterion(&d1, &d2, &x(0.8)));
        // An error bound on A widens the allowance by itself.
        let wide = Exact::new(Float::with_val(FD_PREC, 1.5), Bound::from_f64(0.25));
        assert!(!breaks_criterion(&d1, &d2, &wide));
    }
    use crate::mpfr::reference::{exact_forward, BackwardReference, ForwardReference};
    use crate::op::seqwise_loss::SeqwiseLoss;
    use crate::profile_oracle::seqwise_loss::{backward, backward_on, forward};
    use crate::vocab::ClampTie;

    fn sample_case(objective: Objective) -> SeqwiseCase {
        let scores = vec![0.9, 0.1, 0.4, 0.3, 0.05, 0.7, 0.2, 0.6, 0.33, 0.25, 0.125, 0.8];
        let mut c = SeqwiseCase::dense(3, 4, scores, objective);
        c.g = 0.75;
        c
    }

    #[test]
    fn gradient_entries_spread_over_the_rows_and_experts() {
        // T = 10, E = 4, max 5: flat indices i * 39 / 4 = 0, 9, 19, 29, 39,
        // that is (row, expert) = (0, 0), (2, 1), (4, 3), (7, 1), (9, 3).
        let c = SeqwiseCase::dense(10, 4, vec![0.5; 40], Objective::UnbiasedTopK { k: 1 });
        assert_eq!(gradient_entries(&c, 5), [(0, 0), (2, 1), (4, 3), (7, 1), (9, 3)]);
        // A small case: every entry.
        let small = SeqwiseCase::dense(2, 2, vec![0.5; 4], Objective::UnbiasedTopK { k: 1 });
        assert_eq!(gradient_entries(&small, 5), [(0, 0), (0, 1), (1, 0), (1, 1)]);
    }

    #[test]
    fn both_profiles_are_within_their_bounds() {
        for obj in [
            Objective::UnbiasedTopK { k: 2 },
            Objective::ProvidedMap {
                map: vec![true, false, false, true, false, true, true, false, true, true, false, false],
            },
        ] {
            let c = sample_case(obj);
            for p in SeqwiseProfile::all() {
                let fr = ForwardReference::<SeqwiseLoss>::new(&c, &p).unwrap();
                // The bounded run executes the same profile: its f32 half is
                // the profile oracle's bits.
                let oracle = forward(&c, &p).unwrap();
                let b = &fr.bounded.out;
                assert_eq!(oracle.raw.to_bits(), b.raw.x.to_bits());
                assert_eq!(oracle.counts, b.counts);
                assert!(oracle.freq.iter().zip(&b.freq).all(|(o, f)| o.to_bits() == f.x.to_bits()));
                let f = fr.judge(&c, &oracle);
                assert!(f.outside.is_empty(), "{:?}", f.outside);
                assert!(f.worst_ratio > 0.0, "rounding happened, so some error is nonzero");
                let br = BackwardReference::<SeqwiseLoss>::new(&c, &p).unwrap();
                let grad = backward(&c, &p).unwrap();
                assert!(grad.grad.iter().zip(&br.bounded.out.grad).all(|(o, g)| o.to_bits() == g.x.to_bits()));
                let b = br.judge(&c, &grad);
                assert!(b.outside.is_empty(), "{:?}", b.outside);
                // A result off by a few ulps in raw is outside the bound.
                let mut wrong = oracle.clone();
                wrong.raw *= 1.0 + 64.0 * f32::EPSILON;
                assert!(!fr.judge(&c, &wrong).outside.is_empty());
            }
        }
    }

    #[test]
    fn analytic_gradient_matches_finite_differences() {
        for obj in [Objective::UnbiasedTopK { k: 2 }, Objective::ProvidedMap { map: vec![true; 12] }] {
            let c = sample_case(obj);
            let r = check_gradient(&c, &gradient_entries(&c, 100)).unwrap();
            assert_eq!(r.checked, 12);
            assert!(r.failures.is_empty(), "{:?}", r.failures);
        }
    }

    #[test]
    fn the_ops_gradient_check_checks_every_entry_it_can() {
        // Through the Op trait, as the harness calls it: 3 x 4 = 12 entries
        // (all of them, fewer than the 40 asked for), none at a kink; a NaN
        // score makes its row's 4 entries have no derivative.
        use crate::op::Op;
        let c = sample_case(Objective::ProvidedMap { map: vec![true; 12] });
        let r = SeqwiseLoss::check_gradient(&c, 40).unwrap();
        assert_eq!((r.checked, r.kinks, r.nonfinite), (12, 0, 0));
        assert!(r.failures.is_empty(), "{:?}", r.failures);
        let mut nan = c.clone();
        nan.scores[5] = f32::NAN;
        let r = SeqwiseLoss::check_gradient(&nan, 40).unwrap();
        assert_eq!((r.checked, r.nonfinite), (8, 4), "{r:?}");
    }

    #[test]
    fn a_wrong_derivative_fails_the_check() {
        // Perturb the analytic side by checking against another case's
        // gradient: the criterion must reject it.
        let c = sample_case(Objective::UnbiasedTopK { k: 2 });
        let mut other = c.clone();
        other.g = 0.5;
        let fd = check_gradient(&c, &[(0, 0)]).unwrap();
        assert!(fd.failures.is_empty());
        let serial = SeqwiseProfile::serial();
        let a = with_precision(FD_PREC, || backward_on::<Exact>(&other, &serial, None).unwrap().out.grad[0].v.to_f64());
        let b = with_precision(FD_PREC, || backward_on::<Exact>(&c, &serial, None).unwrap().out.grad[0].v.to_f64());
        assert_ne!(a, b);
    }

    #[test]
    fn clamp_tie_rows_are_kinks() {
        let mut c =
            SeqwiseCase::dense(1, 2, vec![EPS / 2.0, EPS / 2.0], Objective::ProvidedMap { map: vec![true, false] });
        c.clamp_tie = ClampTie::Inclusive;
        let r = check_gradient(&c, &gradient_entries(&c, 10)).unwrap();
        assert_eq!(r.kinks, 2);
        assert_eq!(r.checked, 0);
    }

    #[test]
    fn exact_forward_rounds_correctly() {
        let c = sample_case(Objective::UnbiasedTopK { k: 2 });
        let x = exact_forward::<SeqwiseLoss>(&c, None).unwrap();
        assert_eq!(x.undetermined, 0);
        assert_eq!(x.prec, super::super::START_PREC);
    }
}
