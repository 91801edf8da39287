//! The gradient check of `moe_combine`: the analytic derivative (the exact
//! backward, [`crate::profile_oracle::moe_combine`] run on [`Exact`]) against
//! central finite differences of the functions it claims to differentiate.
//! The exact forward and backward themselves need nothing of their own:
//! [`super::reference`] runs the generic code on [`Exact`] (Ziv's loop) and
//! on [`super::rational::Rat`].
//!
//! # The functions
//!
//! The backward claims to be the derivative of two scalar functions, with
//! real arithmetic and no rounding (a `bf16_out` profile's rounding of y is
//! taken as the identity, as bf16 training does: the backward is the same
//! in every profile):
//!
//! ```text
//! F(w, x_exp) = sum over valid t, h of dy[t][h] y[t][h],
//!               y[t][h] = sum over kept j of w[t][j] x_exp[slot(t, j)][h]
//! G(x)        = sum over slots s, h of g_disp[s][h] x_disp[s][h],
//!               x_disp[s] = x[t] for the token t that owns s
//! dF/dw[t][j] = dw[t][j],  dF/dx_exp[s][h] = dx_exp[s][h],  dG/dx[t][h] = dx[t][h]
//! ```
//!
//! A padding token is never read (its dy, weights and x take part in
//! nothing), a dropped choice's weight takes part in nothing: their
//! derivatives are 0, which the backward's +0.0 must match.
//!
//! # Independence
//!
//! F and G are written again here, plainly, in interval arithmetic on MPFR
//! numbers ([`Iv`]), with the dispatch computed again another way (every
//! valid choice sorted by (expert, token, choice), each expert's first C
//! kept, slots numbered in that order: [`Slots`]), never through the
//! generic profile code, the profile's orders or [`crate::case::moe_combine::dispatch`]:
//! a wrong slot, a missing term or a gradient given to a dropped choice
//! shows up as a disagreement instead of hiding on both sides.
//!
//! # The step, kinks and non-finite entries
//!
//! No decision depends on a value: the dispatch reads the ids, the padding
//! flags and the capacity only. F is linear in each w[t][j] and each
//! x_exp[s][h], G in each x[t][h], so the central difference quotient is the
//! derivative exactly, for any step: nothing is a kink
//! ([`GradientCheck::kinks`] stays 0). The step is h = 2^-100, absolute, so
//! that a moved value v +- h is exact at [`FD_PREC`] bits (an f32 spans bits
//! 2^127 to 2^-149). Each entry evaluates only the part of F or G the moved
//! value appears in (token t's terms; for x_exp[s][h] and x[t][h], their
//! column h): the other terms do not depend on it. An entry whose part
//! reads a NaN or an infinity, or whose claimed value is not finite with a
//! finite bound, has no derivative to compare: counted `nonfinite`.
//!
//! # The criterion
//!
//! The one of [`super::shared_expert`] and [`super::router`]: with D(h) the
//! central difference quotient and A the claimed value, an entry passes when
//! |D(h/2) - A| <= 2 |D(h) - D(h/2)|, each side at its extreme over the
//! enclosures (A widened by its bound). Here D(h) and D(h/2) are the same
//! real, so the right side is the enclosures' width alone: a right
//! derivative passes, and one that is off by more than the enclosures (some
//! 2^-400 relative) fails.

use super::interval::{lower_abs, upper_abs, Iv, FD_PREC};
use super::{with_precision, Exact};
use crate::case::moe_combine::{dispatch, MoeCombineBackward, MoeCombineCase, MoeCombineError};
use crate::op::GradientCheck;
use crate::profile::moe_combine::MoeCombineProfile;
use crate::profile_oracle::moe_combine::backward_on;
use rug::float::Round;
use rug::Float;

/// The step is h = 2^-STEP_LOG2 (see the module docs).
pub const STEP_LOG2: u32 = 100;

/// One entry of the backward the check compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Entry {
    /// dw[t][j] = dF/dw[t][j].
    Dw { t: usize, j: usize },
    /// dx_exp[s][h] = dF/dx_exp[s][h].
    DxExp { s: usize, h: usize },
    /// dx[t][h] = dG/dx[t][h].
    Dx { t: usize, h: usize },
}

/// The analytic gradient: the exact backward (`serial`; every association
/// is the same real) at [`FD_PREC`] bits, each value with its bound.
pub fn analytic_gradient(case: &MoeCombineCase) -> Result<MoeCombineBackward<Exact>, MoeCombineError> {
    let serial = MoeCombineProfile::serial();
    Ok(with_precision(FD_PREC, || backward_on::<Exact>(case, &serial, None))?.out)
}

/// Checks the analytic gradient against central finite differences at
/// `entries` (see the module docs); entries outside the case are ignored.
pub fn check_gradient(case: &MoeCombineCase, entries: &[Entry]) -> Result<GradientCheck, MoeCombineError> {
    case.validate()?;
    check_gradient_against(case, entries, &analytic_gradient(case)?)
}

/// The dispatch, computed again another way (see the module docs): the slot
/// of each choice (flat t k + j) and the owner of each slot.
struct Slots {
    of_choice: Vec<Option<usize>>,
    owner: Vec<(usize, usize)>,
}

impl Slots {
    fn of(case: &MoeCombineCase) -> Slots {
        let k = case.k;
        let mut choices: Vec<(u32, usize, usize)> = (0..case.t)
            .filter(|&t| !case.is_padding(t))
            .flat_map(|t| (0..k).map(move |j| (t, j)))
            .map(|(t, j)| (case.ids[t * k + j], t, j))
            .collect();
        choices.sort_unstable();
        let cap = case.capacity.unwrap_or(usize::MAX);
        let mut of_choice = vec![None; case.t * k];
        let mut owner = Vec::new();
        let mut rank = 0usize;
        for (i, &(e, t, j)) in choices.iter().enumerate() {
            rank = if i > 0 && choices[i - 1].0 == e { rank + 1 } else { 0 };
            if rank < cap {
                of_choice[t * k + j] = Some(owner.len());
                owner.push((t, j));
            }
        }
        Slots { of_choice, owner }
    }

    /// Token t's kept choices as (j, slot).
    fn kept(&self, t: usize, k: usize) -> Vec<(usize, usize)> {
        (0..k).filter_map(|j| self.of_choice[t * k + j].map(|s| (j, s))).collect()
    }
}

/// A value the part of F or G reads, moved by `delta` when it is the entry's
/// own value.
fn value(v: f32, moved: bool, delta: &Float) -> Iv {
    let x = Iv::of(v);
    if moved {
        x.add(&Iv::point(delta.clone()))
    } else {
        x
    }
}

/// Which value of F an entry moves: w[t][j] or x_exp[s][h].
#[derive(Clone, Copy, PartialEq)]
enum Moved {
    Weight(usize, usize),
    ExpertOutput(usize, usize),
}

/// The part of F that holds token t's terms, restricted to the columns
/// `cols`: sum over h in cols of dy[t][h] y[t][h] (0 without a kept choice),
/// with the value `moved` moved by `delta`; and whether every value it read
/// is finite.
fn part_f(case: &MoeCombineCase, slots: &Slots, t: usize, cols: &[usize], moved: Moved, delta: &Float) -> (Iv, bool) {
    let kept = slots.kept(t, case.k);
    let mut finite = true;
    let mut acc = Iv::of(0.0);
    if kept.is_empty() {
        return (acc, finite);
    }
    for &h in cols {
        let mut y = Iv::of(0.0);
        for &(j, s) in &kept {
            let (w, x) = (case.weights_row(t)[j], case.x_exp_row(s)[h]);
            finite &= w.is_finite() && x.is_finite();
            let w = value(w, moved == Moved::Weight(t, j), delta);
            let x = value(x, moved == Moved::ExpertOutput(s, h), delta);
            y = y.add(&w.mul(&x));
        }
        let dy = case.dy_row(t)[h];
        finite &= dy.is_finite();
        acc = acc.add(&Iv::of(dy).mul(&y));
    }
    (acc, finite)
}

/// The part of G that holds x[t][h]: sum over the slots s token t owns of
/// g_disp[s][h] x[t][h] (0 without one), x[t][h] moved by `delta`; and
/// whether every value it read is finite.
fn part_g(case: &MoeCombineCase, slots: &Slots, t: usize, h: usize, delta: &Float) -> (Iv, bool) {
    let kept = slots.kept(t, case.k);
    let mut finite = true;
    let mut acc = Iv::of(0.0);
    for &(_, s) in &kept {
        let (g, x) = (case.g_disp_row(s)[h], case.x_row(t)[h]);
        finite &= g.is_finite() && x.is_finite();
        acc = acc.add(&Iv::of(g).mul(&value(x, true, delta)));
    }
    (acc, finite)
}

/// The criterion applied to a claimed gradient (any backward, given as
/// exact values with bounds): what [`check_gradient`] does with the
/// analytic one, open to any other claim (a deliberately wrong one shows
/// that the check can fail).
pub fn check_gradient_against(
    case: &MoeCombineCase,
    entries: &[Entry],
    claimed: &MoeCombineBackward<Exact>,
) -> Result<GradientCheck, MoeCombineError> {
    case.validate()?;
    let (t_n, h_n, k) = (case.t, case.h, case.k);
    let slots = Slots::of(case);
    let n = slots.owner.len();
    for (name, got, expected) in [
        ("claimed dx_exp", claimed.dx_exp.len(), n * h_n),
        ("claimed dw", claimed.dw.len(), t_n * k),
        ("claimed dx", claimed.dx.len(), t_n * h_n),
    ] {
        if got != expected {
            return Err(MoeCombineError::Length { name, expected, got });
        }
    }
    let all_cols: Vec<usize> = (0..h_n).collect();
    let slots = &slots;
    let mut out = GradientCheck::default();
    for &entry in entries {
        match entry {
            Entry::Dw { t, j } if t < t_n && j < k => judge(
                &|d: &Float| part_f(case, slots, t, &all_cols, Moved::Weight(t, j), d),
                &claimed.dw[t * k + j],
                &format!("dw[{t}][{j}]"),
                &mut out,
            ),
            Entry::DxExp { s, h } if s < n && h < h_n => judge(
                &|d: &Float| part_f(case, slots, slots.owner[s].0, &[h], Moved::ExpertOutput(s, h), d),
                &claimed.dx_exp[s * h_n + h],
                &format!("dx_exp[{s}][{h}]"),
                &mut out,
            ),
            Entry::Dx { t, h } if t < t_n && h < h_n => judge(
                &|d: &Float| part_g(case, slots, t, h, d),
                &claimed.dx[t * h_n + h],
                &format!("dx[{t}][{h}]"),
                &mut out,
            ),
            _ => {}
        }
    }
    Ok(out)
}

/// The criterion at one entry (see the module docs).
fn judge(part: &dyn Fn(&Float) -> (Iv, bool), a: &Exact, label: &str, out: &mut GradientCheck) {
    let h = Float::with_val(FD_PREC, 1) >> STEP_LOG2;
    let half = Float::with_val(FD_PREC, &h >> 1u32);
    let steps = [h.clone(), Float::with_val(FD_PREC, -&h), half.clone(), Float::with_val(FD_PREC, -&half)];
    let parts: Vec<(Iv, bool)> = steps.iter().map(part).collect();
    if parts.iter().any(|(_, finite)| !finite) || !a.v.is_finite() || !a.err.is_finite() {
        out.nonfinite += 1;
        return;
    }
    // D(h) = (F(x+h) - F(x-h)) / 2h, D(h/2) = (F(x+h/2) - F(x-h/2)) / h:
    // exact shifts by the step's exponent.
    let shift =
        |v: Iv, by: u32| Iv { lo: Float::with_val(FD_PREC, &v.lo << by), hi: Float::with_val(FD_PREC, &v.hi << by) };
    let d1 = shift(parts[0].0.sub(&parts[1].0), STEP_LOG2 - 1);
    let d2 = shift(parts[2].0.sub(&parts[3].0), STEP_LOG2);
    let a_err = a.err.to_float();
    let claimed = Iv {
        lo: Float::with_val_round(FD_PREC, &a.v - &a_err, Round::Down).0,
        hi: Float::with_val_round(FD_PREC, &a.v + &a_err, Round::Up).0,
    };
    let lhs = lower_abs(&d2.sub(&claimed));
    let rhs = Float::with_val(FD_PREC, upper_abs(&d1.sub(&d2)) << 1u32);
    if d1.is_nan() || d2.is_nan() || lhs > rhs {
        out.failures.push(format!("{label}: analytic {:e}, finite difference {:e}", a.v.to_f64(), d2.lo.to_f64()));
    }
    out.checked += 1;
}

/// `n` indices spread over 0..len, the first and the last included (n <= len).
fn spread(n: usize, len: usize) -> impl Iterator<Item = usize> {
    (0..n).map(move |i| if n <= 1 { 0 } else { i * (len - 1) / (n - 1) })
}

/// Entries for the gradient check: every entry of a case with at most `max`;
/// else `max` shared between dw, dx_exp and dx as evenly as their sizes
/// allow (a kind with fewer entries than its share gives the rest to the
/// others), each kind's entries spread over its flat index from the first
/// to the last.
pub fn gradient_entries(case: &MoeCombineCase, max: usize) -> Result<Vec<Entry>, MoeCombineError> {
    case.validate()?;
    let (t_n, h_n, k) = (case.t, case.h, case.k);
    let n = dispatch(case)?.n_slots;
    let lens = [t_n * k, n * h_n, t_n * h_n];
    let total: usize = lens.iter().sum();
    let shares = if total <= max {
        lens
    } else {
        let mut shares = [0usize; 3];
        let mut by_len = [0usize, 1, 2];
        by_len.sort_by_key(|&i| lens[i]);
        let mut left = max;
        for (r, &i) in by_len.iter().enumerate() {
            shares[i] = lens[i].min(left / (3 - r));
            left -= shares[i];
        }
        shares
    };
    let mut out = Vec::with_capacity(shares.iter().sum());
    out.extend(spread(shares[0], lens[0]).map(|f| Entry::Dw { t: f / k, j: f % k }));
    out.extend(spread(shares[1], lens[1]).map(|f| Entry::DxExp { s: f / h_n, h: f % h_n }));
    out.extend(spread(shares[2], lens[2]).map(|f| Entry::Dx { t: f / h_n, h: f % h_n }));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::Layout;

    /// T = 4, H = 1, E = 2, k = 2, capacity 1, token 1 padding: ids
    /// (0, 1 | 1, 0 | 1, 0 | 0, 1). Valid choices sorted by expert: expert 0
    /// gets (0, 0) then (2, 1) then (3, 0); expert 1 gets (0, 1), (2, 0),
    /// (3, 1). With C = 1 each keeps its first: slot 0 = (0, 0), slot 1 =
    /// (0, 1).
    #[test]
    fn the_independent_dispatch_agrees_with_a_hand_count() {
        let c = MoeCombineCase {
            t: 4,
            h: 1,
            e: 2,
            k: 2,
            capacity: Some(1),
            layout: Layout::dense(1),
            ids: vec![0, 1, 1, 0, 1, 0, 0, 1],
            weights: vec![1.0; 8],
            padding: Some(vec![false, true, false, false]),
            x: vec![1.0; 4],
            x_exp: vec![1.0; 2],
            dy: vec![1.0; 4],
            g_disp: vec![1.0; 2],
        };
        let s = Slots::of(&c);
        assert_eq!(s.owner, vec![(0, 0), (0, 1)]);
        assert_eq!(s.of_choice, vec![Some(0), Some(1), None, None, None, None, None, None]);
        assert_eq!(dispatch(&c).unwrap().slot, vec![0, 1, -1, -1, -1, -1, -1, -1]);
    }

    #[test]
    fn entries_are_shared_between_the_kinds_and_spread() {
        // T = 3, H = 4, k = 1, E = 1, capacity 1: dw has 3 entries, dx_exp 4
        // (one slot), dx 12. max = 9: dw (smallest) takes min(3, 9/3) = 3,
        // dx_exp min(4, 6/2) = 3, dx the 3 left.
        let c = MoeCombineCase {
            t: 3,
            h: 4,
            e: 1,
            k: 1,
            capacity: Some(1),
            layout: Layout::dense(4),
            ids: vec![0; 3],
            weights: vec![1.0; 3],
            padding: None,
            x: vec![1.0; 12],
            x_exp: vec![1.0; 4],
            dy: vec![1.0; 12],
            g_disp: vec![1.0; 4],
        };
        let e = gradient_entries(&c, 9).unwrap();
        assert_eq!(
            e,
            vec![
                Entry::Dw { t: 0, j: 0 },
                Entry::Dw { t: 1, j: 0 },
                Entry::Dw { t: 2, j: 0 },
                Entry::DxExp { s: 0, h: 0 },
                Entry::DxExp { s: 0, h: 1 },
                Entry::DxExp { s: 0, h: 3 },
                Entry::Dx { t: 0, h: 0 },
                Entry::Dx { t: 1, h: 1 },
                Entry::Dx { t: 2, h: 3 },
            ]
        );
        assert_eq!(gradient_entries(&c, 100).unwrap().len(), 3 + 4 + 12);
    }
}
