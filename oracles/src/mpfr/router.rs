//! The gradient check of `router`: the analytic derivative (the exact
//! backward on exact decisions, [`crate::profile_oracle::router`] run on
//! [`Exact`]) against central finite differences of the forward's objective.
//!
//! # Independence
//!
//! The function differentiated here is written again, plainly, in this
//! module: its own sigmoid, its own selection, its own sums, in interval
//! arithmetic on MPFR numbers ([`Iv`]), never through the generic profile
//! code or a profile's reduction orders. A bug in the shared generic code
//! (a wrong selection, a wrong sign, a missing factor or term) then shows
//! up as a disagreement instead of hiding on both sides.
//!
//! # The objective
//!
//! With gw the weights' gradient and, when a loss is fused, g its gradient,
//! the backward claims to be the derivative of
//!
//!   F(x) = sum_t sum_j gw_tj * w_tj  +  g * raw,
//!   raw  = sum_e f_e * P_e,  P_e = sum over valid t of s_te / d_t,
//!
//! with d_t = max(sum_e |s_te|, eps) and f_e from the counts (constant while
//! no selection changes). Moving the logit x_te changes row t's terms only,
//! so each entry evaluates row t's part of F.
//!
//! # The step
//!
//! h = 2^-100, absolute, whatever x is. As a function of the complex x_te,
//! every singularity of F lies at |Im x| >= pi: the sigmoid's poles are at
//! i pi (2m + 1), and the zeros of the denominators D = sum_j s_j + 1e-20 and
//! d_t = sum_e s_e (sums of positive scores) need s_te(x) = -c with c > 0,
//! that is e^-x = -(1 + 1/c), so Im x = pi (2m + 1) too. The step is thus
//! at most 2^-100 of the distance to the nearest pole, far from every one
//! (and no quantity it moves changes by more than 2^-100 relative: ds =
//! s (1 - s) dx, and D, when it holds s_te, and d_t are at least s_te), and no
//! real kink exists besides the decisions (|s| is s: the exact score of a
//! finite logit is positive). A step relative to |x| is not needed (no
//! kink at x = 0), and an absolute one keeps x +- h exact: an f32 spans
//! bits 2^127 to 2^-149, so x +- 2^-100 and x +- 2^-101 need at most 277 of
//! [`FD_PREC`]'s 512 bits.
//!
//! # Kinks
//!
//! A decision (the selected groups or experts, the loss's clamp and gate)
//! that changes within [x - h, x + h] makes F non-differentiable there. u_te
//! is increasing in x_te and the other u are constant, so each comparison
//! with u_te flips at most once: the kept groups, then the chosen experts,
//! change monotonically, and a selection equal at x - h and x + h (and at x,
//! x +- h/2, checked too) is the same throughout the step; the row's sum
//! n_t is increasing too, so the clamp side at both ends holds throughout.
//! Every selection is certified: two values are ordered only when their
//! enclosures are disjoint, or when they are equal by identity (the same
//! logit and bias, or the same pair of those for a group score); where
//! neither holds, or the selections differ, the entry is counted as a kink
//! and not compared. The counts behind f_e are certified the same way on
//! every valid row (an uncertain one makes every fused entry a kink).
//!
//! # The criterion, and why it is rigorous
//!
//! With D(h) the central difference quotient and A the analytic value, an
//! entry passes when |D(h/2) - A| <= 2 |D(h) - D(h/2)|, each side taken at
//! its extreme over the enclosures (the left side's lower end against the
//! right side's upper end; A's own bound widens A): rounding can never raise
//! an alarm, and it is accounted for exactly, not by a tolerance.
//!
//! On a step where no decision changes (above), F equals F_S, the same
//! formula with the selection and the clamp side held fixed, and both
//! quotients and A are those of F_S. F_S is analytic on every disk of radius
//! r < pi around x (see the step), so D(h) - A = sum_m c_m h^2m with
//! |c_m| <= M_r / r^(2m+1) (Cauchy). With c_m the first
//! nonzero coefficient, the left side is |c_m| h^2m / 4^m and the right
//! 2 (1 - 4^-m) |c_m| h^2m, 2 (4^m - 1) >= 6 times larger; the terms after
//! it are smaller by (h / r)^2, some 2^-198, relative to their Cauchy bound,
//! so only a leading coefficient about 2^-190 below its own Cauchy bound
//! could let them reach the margin. Where F is linear in x_te (every c_m
//! zero, an unchosen expert without a loss) both quotients equal A. A wrong
//! derivative is off by an amount that does not shrink with h and fails by
//! a factor near 2^200. The 2 comes from the convergence order, not from a
//! tolerance on the values. What the check cannot see is an association
//! (the order of a product or a sum): exactly, every association is the
//! same number; that is the profile oracle's and conformance's business.

use super::interval::{lower_abs, upper_abs, Iv};
use super::{with_precision, Exact};
use crate::case::router::{RouterCase, RouterError};
use crate::op::GradientCheck;
use crate::profile::router::RouterProfile;
use crate::profile_oracle::router::backward_on;
use crate::vocab::{EPS, EPS2};
use rug::float::Round;
use rug::Float;
use std::cmp::Ordering;
use std::collections::BTreeSet;

/// Precision of the finite differences (bits), shared with the other ops'
/// checks (see [`super::interval`]).
pub use super::interval::FD_PREC;

/// The step is h = 2^-STEP_LOG2 (see the module docs).
pub const STEP_LOG2: u32 = 100;

/// s = 1 / (1 + e^-x).
fn sigmoid(x: &Float) -> Iv {
    let one = Iv::of(1.0);
    one.div(&one.add(&Iv::point(x.clone()).neg().exp()))
}

/// A value to select on: its enclosure and its identity (the logit and bias
/// of an expert, the sorted pair of those of a group's two best experts):
/// equal identities mean equal exact values.
#[derive(Clone, Debug)]
struct Ranked {
    v: Iv,
    id: Option<Vec<(Float, f32)>>,
}

/// Whether item `a` comes before item `b` in the selection order (NaN
/// first, NaNs by index, then larger first, equal values by index), where
/// that is certain.
fn before(items: &[Ranked], a: usize, b: usize) -> Option<bool> {
    let (x, y) = (&items[a], &items[b]);
    match (x.v.is_nan(), y.v.is_nan()) {
        (true, true) => return Some(a < b),
        (true, false) => return Some(true),
        (false, true) => return Some(false),
        (false, false) => {}
    }
    if x.id.is_some() && x.id == y.id {
        return Some(a < b);
    }
    if x.v.lo > y.v.hi {
        Some(true)
    } else if y.v.lo > x.v.hi {
        Some(false)
    } else {
        None
    }
}

/// The first `m` of `cands` in the selection order, when certain: every one
/// chosen certainly comes before every one left. Candidates are sorted by
/// their lower ends (NaN first, then by index): where a certain choice
/// exists, that sort finds it.
fn certain_best(items: &[Ranked], cands: &[usize], m: usize) -> Option<Vec<usize>> {
    let mut order = cands.to_vec();
    order.sort_by(|&a, &b| {
        let (x, y) = (&items[a].v, &items[b].v);
        match (x.is_nan(), y.is_nan()) {
            (true, true) => a.cmp(&b),
            (true, false) => Ordering::Less,
            (false, true) => Ordering::Greater,
            (false, false) => y.lo.partial_cmp(&x.lo).unwrap_or(Ordering::Equal).then(a.cmp(&b)),
        }
    });
    let (top, rest) = order.split_at(m.min(order.len()));
    let certain = top.iter().all(|&i| rest.iter().all(|&j| before(items, i, j) == Some(true)));
    certain.then(|| top.to_vec())
}

/// A group's score: the sum of its two largest u. That sum is increasing in
/// each u, so the sums of the two largest lower ends and of the two largest
/// upper ends enclose it, whichever two are the largest.
fn group_score(u: &[Ranked], members: std::ops::Range<usize>) -> Ranked {
    if u[members.clone()].iter().any(|r| r.v.is_nan()) {
        return Ranked { v: Iv::nan(), id: None };
    }
    let two_largest = |end: fn(&Iv) -> &Float, r: Round| {
        let mut ends: Vec<&Float> = u[members.clone()].iter().map(|x| end(&x.v)).collect();
        ends.sort_by(|a, b| b.partial_cmp(a).unwrap_or(Ordering::Equal));
        Float::with_val_round(FD_PREC, ends[0] + ends[1], r).0
    };
    let v = Iv { lo: two_largest(|v| &v.lo, Round::Down), hi: two_largest(|v| &v.hi, Round::Up) };
    let cands: Vec<usize> = members.collect();
    let id = certain_best(u, &cands, 2).and_then(|top| {
        let mut id: Vec<(Float, f32)> = Vec::new();
        for i in top {
            id.extend(u[i].id.clone()?);
        }
        id.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap_or(Ordering::Equal).then(a.1.total_cmp(&b.1)));
        Some(id)
    });
    Ranked { v, id }
}

/// One token's logits (as exact values) and score enclosures.
#[derive(Clone, Debug)]
struct Row {
    x: Vec<Float>,
    s: Vec<Iv>,
}

impl Row {
    fn of(case: &RouterCase, t: usize) -> Row {
        let x: Vec<Float> = case.row(t).iter().map(|&v| Float::with_val(FD_PREC, v)).collect();
        let s = x.iter().map(sigmoid).collect();
        Row { x, s }
    }

    /// This row with logit `e` moved by `step`; `None` if x + step is not
    /// exact (it always is, see the module docs).
    fn moved(&self, e: usize, step: &Float) -> Option<Row> {
        let (x, dir) = Float::with_val_round(FD_PREC, &self.x[e] + step, Round::Nearest);
        if dir != Ordering::Equal {
            return None;
        }
        let mut row = self.clone();
        row.s[e] = sigmoid(&x);
        row.x[e] = x;
        Some(row)
    }

    /// The chosen experts (ascending) where the selection is certain: u =
    /// s + bias, group scores, the L best groups, the k best of their experts.
    fn selection(&self, case: &RouterCase) -> Option<Vec<usize>> {
        let u: Vec<Ranked> = (0..case.e)
            .map(|e| Ranked {
                v: self.s[e].add(&Iv::of(case.bias[e])),
                id: Some(vec![(self.x[e].clone(), case.bias[e])]),
            })
            .collect();
        let size = case.group_size();
        let groups: Vec<Ranked> = (0..case.groups).map(|g| group_score(&u, g * size..(g + 1) * size)).collect();
        let kept = certain_best(&groups, &(0..case.groups).collect::<Vec<_>>(), case.topk_groups)?;
        let cands: Vec<usize> = kept.iter().flat_map(|&g| g * size..(g + 1) * size).collect();
        let mut ids = certain_best(&u, &cands, case.k)?;
        ids.sort_unstable();
        Some(ids)
    }

    /// The fused loss's d_t = max(n_t, eps), n_t = sum_e |s_te| = sum_e s_te
    /// (exact scores are >= 0), where the side of eps is certain: `Some(true)`
    /// for n_t > eps (d = n_t, the gate open under either clamp tie),
    /// `Some(false)` for n_t < eps (d = eps, the gate closed).
    fn clamp(&self) -> Option<(bool, Iv)> {
        let n = self.s.iter().fold(Iv::of(0.0), |acc, s| acc.add(s));
        let eps = Float::with_val(FD_PREC, EPS);
        if n.lo > eps {
            Some((true, n))
        } else if n.hi < eps {
            Some((false, Iv::of(EPS)))
        } else {
            None
        }
    }

    /// Row t's part of F (see the module docs), given its chosen experts and,
    /// for a valid row with a fused loss, (g, f, d).
    fn objective(&self, case: &RouterCase, t: usize, ids: &[usize], loss: Option<(&Iv, &[Iv], &Iv)>) -> Iv {
        let scale = Iv::of(case.route_scale);
        let w0: Vec<&Iv> = ids.iter().map(|&i| &self.s[i]).collect();
        let d = case.route_norm.then(|| w0.iter().fold(Iv::of(0.0), |acc, w| acc.add(w)).add(&Iv::of(EPS2)));
        let mut acc = Iv::of(0.0);
        for (j, w) in w0.iter().enumerate() {
            let w = match &d {
                Some(d) => w.div(d).mul(&scale),
                None => w.mul(&scale),
            };
            acc = acc.add(&Iv::of(case.gw[t * case.k + j]).mul(&w));
        }
        if let Some((g, f, d)) = loss {
            // Row t's part of raw, sum_e f_e * s_te / d_t, as (sum_e f_e s_te) / d_t:
            // the same real number, in fewer operations.
            let weighted = self.s.iter().zip(f).fold(Iv::of(0.0), |acc, (s, f_e)| acc.add(&f_e.mul(s)));
            acc = acc.add(&g.mul(&weighted.div(d)));
        }
        acc
    }
}

/// f_e = (c_e / C) * E exactly (C > 0: some valid row exists), from the
/// certain selections of every valid row; `None` where one is uncertain.
fn frequencies(case: &RouterCase, rows: &mut Rows) -> Option<Vec<Iv>> {
    let mut counts = vec![0u64; case.e];
    for t in (0..case.t).filter(|&t| !case.is_padding(t)) {
        for i in rows.get(case, t).selection(case)? {
            counts[i] += 1;
        }
    }
    let total: u64 = counts.iter().sum();
    let c = Iv::point(Float::with_val(FD_PREC, total));
    Some(counts.iter().map(|&n| Iv::point(Float::with_val(FD_PREC, n * case.e as u64)).div(&c)).collect())
}

/// The rows evaluated so far (each once).
struct Rows(Vec<Option<Row>>);

impl Rows {
    fn get(&mut self, case: &RouterCase, t: usize) -> &Row {
        self.0[t].get_or_insert_with(|| Row::of(case, t))
    }
}

/// Checks the analytic derivative (the exact backward on exact decisions)
/// against central finite differences of the objective, entry (t, e) of the
/// logits for each pair of `entries` (those outside T x E are ignored). See
/// the module docs for the step, the kinks and the criterion.
pub fn check_gradient(case: &RouterCase, entries: &[(usize, usize)]) -> Result<GradientCheck, RouterError> {
    let serial = RouterProfile::serial();
    let analytic = with_precision(FD_PREC, || backward_on::<Exact>(case, &serial, None))?.out.grad;
    check_gradient_against(case, entries, &analytic)
}

/// The criterion applied to a claimed derivative `analytic` (T x E values,
/// each with its bound): what [`check_gradient`] does with the exact
/// backward, open to any other claim (a deliberately wrong one shows that
/// the check can fail).
pub fn check_gradient_against(
    case: &RouterCase,
    entries: &[(usize, usize)],
    analytic: &[Exact],
) -> Result<GradientCheck, RouterError> {
    case.validate()?;
    if analytic.len() != case.t * case.e {
        let got = analytic.len();
        return Err(RouterError::Length { name: "analytic gradient", expected: case.t * case.e, got });
    }
    let mut out = GradientCheck::default();
    let mut rows = Rows(vec![None; case.t]);
    let freq = case.loss.and_then(|_| frequencies(case, &mut rows));
    let h = Float::with_val(FD_PREC, 1) >> STEP_LOG2;
    let half = Float::with_val(FD_PREC, &h >> 1u32);
    let steps = [Float::new(FD_PREC), h.clone(), Float::with_val(FD_PREC, -&h), half.clone(), -half];
    for &(t, e) in entries.iter().filter(|&&(t, e)| t < case.t && e < case.e) {
        let loss = case.loss.filter(|_| !case.is_padding(t));
        let gw = &case.gw[t * case.k..(t + 1) * case.k];
        let a = &analytic[t * case.e + e];
        let finite_inputs = case.row(t).iter().chain(gw).chain(loss.as_ref().map(|l| &l.g)).all(|v| v.is_finite());
        if !finite_inputs || !a.v.is_finite() || !a.err.is_finite() {
            out.nonfinite += 1;
            continue;
        }
        let freq = match (&loss, &freq) {
            (None, _) => None,
            (Some(_), Some(f)) => Some(f.as_slice()),
            (Some(_), None) => {
                out.kinks += 1;
                continue;
            }
        };
        // The row at x, x + h, x - h, x + h/2, x - h/2: one selection and one
        // clamp side, certain, at all five, or the entry is a kink.
        let base = rows.get(case, t);
        let moved: Option<Vec<Row>> = steps.iter().map(|st| base.moved(e, st)).collect();
        let Some(moved) = moved else {
            out.kinks += 1;
            continue;
        };
        let ids: Option<Vec<Vec<usize>>> = moved.iter().map(|r| r.selection(case)).collect();
        let clamps: Option<Vec<(bool, Iv)>> = match loss {
            Some(_) => moved.iter().map(Row::clamp).collect(),
            None => Some(Vec::new()),
        };
        let (Some(ids), Some(clamps)) = (ids, clamps) else {
            out.kinks += 1;
            continue;
        };
        if ids.iter().any(|i| *i != ids[0]) || clamps.iter().any(|c| c.0 != clamps[0].0) {
            out.kinks += 1;
            continue;
        }
        let g = loss.map(|l| Iv::of(l.g));
        let f_at = |i: usize| -> Iv {
            let part = match (&g, freq) {
                (Some(g), Some(f)) => Some((g, f, &clamps[i].1)),
                _ => None,
            };
            moved[i].objective(case, t, &ids[0], part)
        };
        // D(h) = (F(x+h) - F(x-h)) / 2h, D(h/2) = (F(x+h/2) - F(x-h/2)) / h:
        // the divisions are exact shifts.
        let shift = |v: Iv, by: u32| Iv {
            lo: Float::with_val(FD_PREC, &v.lo << by),
            hi: Float::with_val(FD_PREC, &v.hi << by),
        };
        let d1 = shift(f_at(1).sub(&f_at(2)), STEP_LOG2 - 1);
        let d2 = shift(f_at(3).sub(&f_at(4)), STEP_LOG2);
        // A's bound as an MPFR number at least as large (exact in MPFR's range).
        let a_err = a.err.to_float();
        let claimed = Iv {
            lo: Float::with_val_round(FD_PREC, &a.v - &a_err, Round::Down).0,
            hi: Float::with_val_round(FD_PREC, &a.v + &a_err, Round::Up).0,
        };
        let lhs = lower_abs(&d2.sub(&claimed));
        let rhs = Float::with_val(FD_PREC, upper_abs(&d1.sub(&d2)) << 1u32);
        if d1.is_nan() || d2.is_nan() || lhs > rhs {
            out.failures.push(format!(
                "dF/dx[{t}][{e}]: analytic {:e}, finite difference {:e}",
                a.v.to_f64(),
                d2.lo.to_f64()
            ));
        }
        out.checked += 1;
    }
    Ok(out)
}

/// Entries for the gradient check: every one of a small case; else up to
/// `max`, first in rows spread over the case (first and last included):
/// each one's chosen experts (where the route part lives; none where its
/// selection is uncertain) and its first and last expert; then spread over
/// the whole case.
pub fn gradient_entries(case: &RouterCase, max: usize) -> Result<Vec<(usize, usize)>, RouterError> {
    case.validate()?;
    let (t_n, e_n) = (case.t, case.e);
    let all = t_n * e_n;
    if all <= max {
        return Ok((0..all).map(|i| (i / e_n, i % e_n)).collect());
    }
    if max == 0 {
        return Ok(Vec::new());
    }
    let spread = |i: usize, n: usize, len: usize| if n <= 1 { 0 } else { i * (len - 1) / (n - 1) };
    let n_rows = (max / (case.k + 2)).clamp(1, t_n);
    let mut wanted = Vec::new();
    for i in 0..n_rows {
        let t = spread(i, n_rows, t_n);
        let chosen = Row::of(case, t).selection(case).unwrap_or_default();
        wanted.extend(chosen.into_iter().chain([0, e_n - 1]).map(|e| (t, e)));
    }
    wanted.extend((0..max).map(|i| {
        let flat = spread(i, max, all);
        (flat / e_n, flat % e_n)
    }));
    let mut seen = BTreeSet::new();
    wanted.retain(|p| seen.insert(*p));
    wanted.truncate(max);
    Ok(wanted)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::Layout;

    #[test]
    fn touching_enclosures_leave_the_order_open() {
        // Item 1's enclosure starts where item 0's ends: the exact values may
        // be equal, and equal values go by index (0 first), so "1 before 0"
        // is not certain; nor is either order of two equal point values.
        let ranked = |lo: f32, hi: f32| Ranked { v: Iv { lo: Iv::of(lo).lo, hi: Iv::of(hi).hi }, id: None };
        let touching = [ranked(0.0, 1.0), ranked(1.0, 2.0)];
        assert_eq!(before(&touching, 1, 0), None);
        assert_eq!(before(&touching, 0, 1), None);
        let equal = [ranked(1.0, 1.0), ranked(1.0, 1.0)];
        assert_eq!(before(&equal, 1, 0), None);
        // Apart, the order is certain both ways.
        let apart = [ranked(0.0, 1.0), ranked(1.5, 2.0)];
        assert_eq!(before(&apart, 1, 0), Some(true));
        assert_eq!(before(&apart, 0, 1), Some(false));
    }

    fn case(e: usize, groups: usize, topk_groups: usize, k: usize, logits: Vec<f32>) -> RouterCase {
        let t = logits.len() / e;
        RouterCase {
            t,
            e,
            layout: Layout::dense(e),
            logits,
            bias: vec![0.0; e],
            groups,
            topk_groups,
            k,
            route_scale: 1.0,
            route_norm: true,
            padding: None,
            gw: (0..t * k).map(|i| 1.0 + i as f32 / 4.0).collect(),
            loss: None,
        }
    }

    #[test]
    fn intervals_enclose_the_exact_value_and_stay_narrow() {
        let at = |x: f32| sigmoid(&Float::with_val(FD_PREC, x));
        // s(0) = 1/2 exactly: every operation on the way is exact.
        let half = at(0.0);
        assert!(half.lo == 0.5 && half.hi == 0.5);
        // s(1) against 2000 bits: inside, and the width is some 2^-512.
        let s1 = at(1.0);
        let one = Float::with_val(2000, 1);
        let exact = Float::with_val(2000, &one / Float::with_val(2000, &one + Float::with_val(2000, -1).exp()));
        assert!(s1.lo <= exact && exact <= s1.hi);
        let width = Float::with_val(FD_PREC, &s1.hi - &s1.lo);
        assert!(width > 0 && width < Float::with_val(64, 1) >> 500u32);
        // Saturated beyond MPFR's own range: still an enclosure, [0, tiny].
        let far = at(-1e30);
        assert!(far.lo == 0 && far.hi > 0 && far.hi < 1e-300);
        assert!(at(f32::NEG_INFINITY).hi == 0 && at(f32::INFINITY).lo == 1);
        assert!(at(f32::NAN).is_nan());
        // No enclosure of a quotient by an interval holding zero.
        let around_zero = Iv { lo: Float::with_val(FD_PREC, -1), hi: Float::with_val(FD_PREC, 1) };
        assert!(Iv::of(1.0).div(&around_zero).is_nan());
        // Signs: [-2, 3] * [-5, 1] = [-15, 10].
        let (a, b) = (Iv::of(-2.0).add(&Iv { lo: Float::new(FD_PREC), hi: Float::with_val(FD_PREC, 5) }), Iv::of(-5.0));
        let b = Iv { lo: b.lo, hi: Float::with_val(FD_PREC, 1) };
        let p = a.mul(&b);
        assert!(p.lo == -15 && p.hi == 10);
    }

    #[test]
    fn selections_are_certain_only_when_the_order_is() {
        // Equal logits are equal scores by identity: the tie goes to the lower
        // index, certainly.
        let c = case(4, 2, 1, 1, vec![0.5, 0.25, 0.5, 0.25]);
        assert_eq!(Row::of(&c, 0).selection(&c), Some(vec![0]));
        // -0.0 and +0.0 are one value.
        let c = case(4, 2, 2, 1, vec![-0.0, -1.0, 0.0, -1.0]);
        assert_eq!(Row::of(&c, 0).selection(&c), Some(vec![0]));
        // s(x) + s(-x) = 1 for every x: groups (1, -1) and (2, -2) score 1
        // exactly, from different inputs. No enclosure separates them, so
        // with one group kept the choice is not certain.
        let c = case(4, 2, 1, 1, vec![1.0, -1.0, 2.0, -2.0]);
        assert_eq!(Row::of(&c, 0).selection(&c), None);
        // ... and every entry of that row is a kink, not a failure.
        let r = check_gradient(&c, &gradient_entries(&c, 8).unwrap()).unwrap();
        assert_eq!((r.checked, r.kinks, r.failures.len()), (0, 4, 0));
        // With both groups kept the group tie no longer matters: 2 is chosen.
        let c = case(4, 2, 2, 1, vec![1.0, -1.0, 2.0, -2.0]);
        assert_eq!(Row::of(&c, 0).selection(&c), Some(vec![2]));
        let r = check_gradient(&c, &gradient_entries(&c, 8).unwrap()).unwrap();
        assert_eq!((r.checked, r.failures.len()), (4, 0), "{r:?}");
    }

    #[test]
    fn entries_cover_chosen_experts_and_the_corners() {
        let logits: Vec<f32> = (0..6 * 16).map(|i| ((i * 37) % 23) as f32 / 8.0 - 1.0).collect();
        let c = case(16, 4, 2, 3, logits);
        let v = gradient_entries(&c, 30).unwrap();
        assert!(v.len() <= 30);
        for corner in [(0, 0), (0, 15), (5, 0), (5, 15)] {
            assert!(v.contains(&corner), "{corner:?} in {v:?}");
        }
        let chosen = Row::of(&c, 0).selection(&c).unwrap();
        assert!(chosen.iter().all(|&e| v.contains(&(0, e))));
        assert!(gradient_entries(&c, 0).unwrap().is_empty());
        assert_eq!(gradient_entries(&c, 1000).unwrap().len(), 96);
    }
}
