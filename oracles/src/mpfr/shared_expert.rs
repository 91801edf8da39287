//! The gradient check of `shared_expert`: the analytic derivative (the exact
//! backward, its bf16 roundings taken as the identity) against central
//! finite differences of the exact forward (its bf16 roundings taken as the
//! identity too), at high precision.
//!
//! # What "the derivative" is here
//!
//! The forward rounds h and y to bf16: as a function of x it is piecewise
//! constant, its derivative 0 almost everywhere and undefined on the steps. The
//! backward of docs/ops/shared_expert.md is not that derivative, and is not
//! meant to be: like every bf16 training kernel, it differentiates through the
//! roundings as if they were the identity (a straight-through estimator), and
//! rounds dh and dz itself for the next matmul. So the function checked is
//!
//! ```text
//! F(x) = sum_t sum_i dy[t][i] y[t][i],  y[t] = h[t] w2^T,
//! h[t][j] = silu(g[t][j]) u[t][j],  [g | u][t] = x[t] w1^T,
//! silu(g) = g / (1 + e^-g),
//! ```
//!
//! with real arithmetic throughout and no rounding at all; dy, w1 and w2 are
//! the case's values (bf16, exact). Its gradient is
//!
//! ```text
//! dF/dx[t] = [dgate | dup][t] w1,  dh = dy w2,  dgate = dh u silu'(g),
//! dup = dh silu(g),  silu'(g) = sig(g) (1 + g (1 - sig(g))).
//! ```
//!
//! The analytic side ([`analytic_gradient`]) is the exact backward of the
//! profile oracle's code ([`crate::profile_oracle::shared_expert`]) run on
//! [`Unrounded`], a value type whose bf16 rounding is the identity: the
//! spec's own formulas (dsilu, dgate, dup, the order of w1's two blocks, the
//! transposes), computed exactly, with its roundings of dh and dz taken as
//! the identity. The finite differences differentiate F as written in this
//! module, in interval arithmetic ([`super::interval`]), never through the
//! profile code.
//!
//! Checked: that the backward's formulas are the derivative of the
//! forward's (a wrong sign, a missing term of dsilu, a transposed weight, a
//! swapped gate and up block, a wrong row of w1 in dX all fail). Not
//! checked here: the bf16 roundings themselves, and the profile's f32
//! rounding errors (the accuracy property judges the profile's dX against
//! the exact backward that takes the profile's dh and dz, within its
//! rigorous bound); the association orders (exactly, every association is
//! the same real: conformance's business).
//!
//! # The step
//!
//! Entry (t, k) moves `x[t][k]` by a real delta: `g[t][j]` moves by
//! `delta w1[j][k]` and `u[t][j]` by `delta w1[F + j][k]`. F is a polynomial in
//! the u and the silu(g), and silu(g) is analytic except at the poles of the
//! sigmoid, g = i pi (2m + 1): as a function of a complex delta, F is
//! analytic within |Im delta| < pi / a, a = `max_j |w1[j][k]|` over the gate
//! rows (everywhere when a = 0). The step is h = 2^-(100 + e) with 2^e >= a
//! (e >= 0): at most 2^-100 / pi of the distance to the nearest pole. The
//! moved point is never formed: z is linear in x, so z at x + delta e_k is
//! `z(x) + delta w1[., k]`, an exact real expression (enclosed), whatever the
//! magnitudes of x and the step.
//!
//! # Kinks and non-finite entries
//!
//! With every rounding the identity, F has no decision and no kink: nothing
//! is counted in [`GradientCheck::kinks`]. An entry whose row (x, dy) or the
//! weights hold a NaN or an infinity, or whose analytic value is not finite
//! with a finite bound, has no derivative to compare: counted as
//! `nonfinite`, not checked.
//!
//! # The criterion
//!
//! As in [`super::router`]: with D(h) the central difference quotient and A
//! the analytic value, an entry passes when |D(h/2) - A| <= 2 |D(h) - D(h/2)|,
//! each side taken at its extreme over the enclosures (A widened by its
//! bound). F is analytic on a disk of radius r > 2^100 h around x, so
//! D(h) - A = sum_m c_m h^2m with Cauchy bounds on c_m, and with c_m the
//! first nonzero coefficient the left side is a 2 (4^m - 1)-th (at most a
//! 6th) of the right one, up to terms some 2^-198 smaller. Where F is linear
//! or quadratic in `x[t][k]` (no gate weight in column k, say) both quotients
//! equal A exactly, up to the enclosures. A wrong derivative is off by an
//! amount that does not shrink with h, and fails by a factor near 2^200.

use super::interval::{lower_abs, upper_abs, Iv, FD_PREC};
use super::{with_precision, Exact};
use crate::bf16::Rounding;
use crate::case::shared_expert::{SharedExpertCase, SharedExpertError};
use crate::num::Num;
use crate::op::GradientCheck;
use crate::profile::shared_expert::SharedExpertProfile;
use crate::profile_oracle::shared_expert::backward_on;
use rug::float::Round;
use rug::Float;
use std::cmp::Ordering;

/// The step is 2^-(STEP_LOG2 + e) for gate weights below 2^e (module docs).
pub const STEP_LOG2: u32 = 100;

/// An exact value for which rounding to bf16 is the identity: it never
/// decides, its value goes on as it is. Every other operation is
/// [`Exact`]'s. The analytic side of the check runs the profile oracle's
/// backward on it (see the module docs).
#[derive(Clone, Debug)]
pub struct Unrounded(pub Exact);

impl Num for Unrounded {
    fn input(x: f32) -> Self {
        Unrounded(Exact::input(x))
    }
    fn add(&self, y: &Self) -> Self {
        Unrounded(self.0.add(&y.0))
    }
    fn mul(&self, y: &Self) -> Self {
        Unrounded(self.0.mul(&y.0))
    }
    fn div(&self, y: &Self) -> Self {
        Unrounded(self.0.div(&y.0))
    }
    fn neg(&self) -> Self {
        Unrounded(self.0.neg())
    }
    fn abs(&self) -> Self {
        Unrounded(self.0.abs())
    }
    fn exp(&self) -> Self {
        Unrounded(self.0.exp())
    }
    fn cmp_f32(&self, c: f32) -> Option<Ordering> {
        self.0.cmp_f32(c)
    }
    fn cmp_num(&self, y: &Self) -> Option<Ordering> {
        self.0.cmp_num(&y.0)
    }
    fn to_f32(&self) -> f32 {
        self.0.to_f32()
    }
    /// The identity: no decision (`None`, which the generic code answers by
    /// going on with `value`), the value itself.
    fn round_bf16(&self) -> Rounding<Self> {
        Rounding { decision: None, certain: false, value: self.clone() }
    }
}

/// The analytic gradient dF/dx (T x H, each with its bound): the exact
/// backward with its bf16 roundings as the identity, at [`FD_PREC`] bits.
pub fn analytic_gradient(case: &SharedExpertCase) -> Result<Vec<Exact>, SharedExpertError> {
    let serial = SharedExpertProfile::serial();
    let run = with_precision(FD_PREC, || backward_on::<Unrounded>(case, &serial, None))?;
    Ok(run.out.dx.into_iter().map(|u| u.0).collect())
}

/// What token t's part of F needs once, at the unmoved x: z = x w1^T
/// (2F enclosures) and c_j = sum_i dy[t][i] w2[i][j], with which
/// sum_i dy_i y_i = sum_i dy_i sum_j h_j w2[i][j] = sum_j h_j c_j (the same
/// real, regrouped).
struct RowParts {
    z: Vec<Iv>,
    c: Vec<Iv>,
}

impl RowParts {
    fn of(case: &SharedExpertCase, t: usize) -> RowParts {
        let (h_n, f_n) = (case.h, case.f);
        let x = case.x_row(t);
        let z = (0..2 * f_n)
            .map(|r| {
                x.iter().zip(case.w1_row(r)).fold(Iv::of(0.0), |acc, (&a, &b)| acc.add(&Iv::of(a).mul(&Iv::of(b))))
            })
            .collect();
        let dy = case.dy_row(t);
        let c = (0..f_n)
            .map(|j| (0..h_n).fold(Iv::of(0.0), |acc, i| acc.add(&Iv::of(dy[i]).mul(&Iv::of(case.w2_row(i)[j])))))
            .collect();
        RowParts { z, c }
    }

    /// Token t's part of F with x[t][k] moved by `delta`: g_j and u_j move
    /// by delta times their weight of column k (z is linear in x, so this
    /// is z at the moved x, exactly as a real), h_j = silu(g_j) u_j with
    /// silu(g) = g / (1 + e^-g), and F_t = sum_j h_j c_j.
    fn objective(&self, case: &SharedExpertCase, k: usize, delta: &Float) -> Iv {
        let f_n = case.f;
        let d = Iv::point(delta.clone());
        let one = Iv::of(1.0);
        let moved = |r: usize| self.z[r].add(&d.mul(&Iv::of(case.w1_row(r)[k])));
        (0..f_n).fold(Iv::of(0.0), |acc, j| {
            let (g, u) = (moved(j), moved(f_n + j));
            let silu = g.div(&one.add(&g.neg().exp()));
            acc.add(&silu.mul(&u).mul(&self.c[j]))
        })
    }
}

/// The exponent e >= 0 of the step 2^-(STEP_LOG2 + e) for column k: 2^e
/// above every gate weight of that column.
fn step_exponent(case: &SharedExpertCase, k: usize) -> u32 {
    (0..case.f)
        .map(|j| case.w1_row(j)[k].abs())
        .filter(|a| *a > 0.0)
        // floor(log2 a) + 1 from the f32 exponent (a subnormal gives <= 0).
        .map(|a| ((a.to_bits() >> 23) as i32 - 127 + 1).max(0) as u32)
        .max()
        .unwrap_or(0)
}

/// Checks the analytic gradient against central finite differences of F at
/// the entries (t, k) of `entries` (those outside T x H are ignored). See
/// the module docs for the function, the step and the criterion. The
/// analytic gradient is computed only for the tokens the entries name, each
/// on its own (row t of the backward depends on token t alone).
pub fn check_gradient(case: &SharedExpertCase, entries: &[(usize, usize)]) -> Result<GradientCheck, SharedExpertError> {
    case.validate()?;
    let mut out = GradientCheck::default();
    for (t, cols) in by_token(case, entries) {
        let analytic = analytic_gradient(&case.rows(t..t + 1))?;
        check_token(case, t, &cols, &analytic, &mut out);
    }
    Ok(out)
}

/// The criterion applied to a claimed gradient `analytic` (T x H values,
/// each with its bound): what [`check_gradient`] does with the analytic
/// one, open to any other claim (a deliberately wrong one shows that the
/// check can fail).
pub fn check_gradient_against(
    case: &SharedExpertCase,
    entries: &[(usize, usize)],
    analytic: &[Exact],
) -> Result<GradientCheck, SharedExpertError> {
    case.validate()?;
    let (t_n, h_n) = (case.t, case.h);
    if analytic.len() != t_n * h_n {
        let got = analytic.len();
        return Err(SharedExpertError::Length { name: "analytic gradient", expected: t_n * h_n, got });
    }
    let mut out = GradientCheck::default();
    for (t, cols) in by_token(case, entries) {
        check_token(case, t, &cols, &analytic[t * h_n..(t + 1) * h_n], &mut out);
    }
    Ok(out)
}

/// The entries inside T x H, grouped by token (ascending), each token's
/// columns in the order given.
fn by_token(case: &SharedExpertCase, entries: &[(usize, usize)]) -> std::collections::BTreeMap<usize, Vec<usize>> {
    let mut m: std::collections::BTreeMap<usize, Vec<usize>> = std::collections::BTreeMap::new();
    for &(t, k) in entries.iter().filter(|&&(t, k)| t < case.t && k < case.h) {
        m.entry(t).or_default().push(k);
    }
    m
}

/// The criterion at the columns `cols` of token t, given that token's
/// claimed gradient `analytic` (H values).
fn check_token(case: &SharedExpertCase, t: usize, cols: &[usize], analytic: &[Exact], out: &mut GradientCheck) {
    let finite = case.w1.iter().chain(&case.w2).chain(case.x_row(t)).chain(case.dy_row(t)).all(|v| v.is_finite());
    let mut parts: Option<RowParts> = None;
    for &k in cols {
        let a = &analytic[k];
        if !finite || !a.v.is_finite() || !a.err.is_finite() {
            out.nonfinite += 1;
            continue;
        }
        let e = step_exponent(case, k);
        let h = Float::with_val(FD_PREC, 1) >> (STEP_LOG2 + e);
        let half = Float::with_val(FD_PREC, &h >> 1u32);
        let parts = parts.get_or_insert_with(|| RowParts::of(case, t));
        let f: Vec<Iv> = [h.clone(), Float::with_val(FD_PREC, -&h), half.clone(), Float::with_val(FD_PREC, -&half)]
            .iter()
            .map(|delta| parts.objective(case, k, delta))
            .collect();
        // D(h) = (F(x+h) - F(x-h)) / 2h, D(h/2) = (F(x+h/2) - F(x-h/2)) / h:
        // exact shifts by the step's exponent.
        let shift = |v: Iv, by: u32| Iv {
            lo: Float::with_val(FD_PREC, &v.lo << by),
            hi: Float::with_val(FD_PREC, &v.hi << by),
        };
        let d1 = shift(f[0].sub(&f[1]), STEP_LOG2 + e - 1);
        let d2 = shift(f[2].sub(&f[3]), STEP_LOG2 + e);
        let a_err = a.err.to_float();
        let claimed = Iv {
            lo: Float::with_val_round(FD_PREC, &a.v - &a_err, Round::Down).0,
            hi: Float::with_val_round(FD_PREC, &a.v + &a_err, Round::Up).0,
        };
        let lhs = lower_abs(&d2.sub(&claimed));
        let rhs = Float::with_val(FD_PREC, upper_abs(&d1.sub(&d2)) << 1u32);
        if d1.is_nan() || d2.is_nan() || lhs > rhs {
            out.failures.push(format!(
                "dF/dx[{t}][{k}]: analytic {:e}, finite difference {:e}",
                a.v.to_f64(),
                d2.lo.to_f64()
            ));
        }
        out.checked += 1;
    }
}

/// Tokens the gradient check visits on a case with more entries than asked
/// for: each costs its own exact backward and its z at [`FD_PREC`] bits
/// (2F H operations each), so the entries gather on a few tokens.
pub const GRADIENT_TOKENS: usize = 4;

/// Entries for the gradient check: every (t, k) of a case with at most
/// `max` of them; else at most `max` entries on up to [`GRADIENT_TOKENS`]
/// tokens spread over the case (the first and the last included), each
/// token's columns spread over H (the first and the last included).
pub fn gradient_entries(case: &SharedExpertCase, max: usize) -> Result<Vec<(usize, usize)>, SharedExpertError> {
    case.validate()?;
    let (t_n, h_n) = (case.t, case.h);
    if t_n * h_n <= max {
        return Ok((0..t_n * h_n).map(|i| (i / h_n, i % h_n)).collect());
    }
    let spread = |i: usize, n: usize, len: usize| if n <= 1 { 0 } else { i * (len - 1) / (n - 1) };
    let n_rows = t_n.min(GRADIENT_TOKENS).min(max);
    let mut out = Vec::with_capacity(max);
    for r in 0..n_rows {
        let t = spread(r, n_rows, t_n);
        // max split as evenly as the tokens allow, at most H per token.
        let per = (max / n_rows + usize::from(r < max % n_rows)).min(h_n);
        out.extend((0..per).map(|j| (t, spread(j, per, h_n))));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::Layout;

    /// T = 1, H = 2, F = 2: w1 column 0 holds `col` (gate rows 0..2, up
    /// rows 2..4), column 1 holds 8.0 (so a step taken from the wrong column
    /// shows).
    fn case_with_column(col: [f32; 4]) -> SharedExpertCase {
        SharedExpertCase {
            t: 1,
            h: 2,
            f: 2,
            layout: Layout::dense(2),
            x: vec![1.0, 1.0],
            w1: col.iter().flat_map(|&a| [a, 8.0]).collect(),
            w2: vec![1.0; 4],
            dy: vec![1.0, 1.0],
        }
    }

    #[test]
    fn the_step_exponent_is_one_above_the_largest_gate_weights_binade() {
        // 2^e > every |gate weight| of the column: e = floor(log2 max|a|) + 1,
        // written out by hand for each; the up rows (2, 3) do not count.
        for (col, e) in [
            ([1.0, 0.5, 0.0, 0.0], 1),
            ([0.75, -0.25, 0.0, 0.0], 0),
            ([-3.0, 1.0, 0.0, 0.0], 2),
            ([0.0, 0.0, 0.0, 0.0], 0),
            ([f32::from_bits(0x0001_0000), 0.0, 0.0, 0.0], 0),
            ([0.5, 0.0, 64.0, -64.0], 0),
        ] {
            assert_eq!(step_exponent(&case_with_column(col), 0), e, "column {col:?}");
        }
        assert_eq!(step_exponent(&case_with_column([0.0; 4]), 1), 4, "column 1: |8| < 2^4");
    }
}
