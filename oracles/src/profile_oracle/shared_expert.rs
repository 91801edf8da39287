//! `shared_expert` forward and backward, exactly as docs/ops/shared_expert.md
//! associates each formula, with every dot product in the order its profile
//! names. Written once over [`Num`]: on `f32` the profile oracle's bits, on
//! [`crate::num::Bounded`] their rigorous bound, on [`crate::mpfr::Exact`] the
//! exact values, on [`crate::mpfr::rational::Rat`] exact rationals.
//!
//! # The bf16 roundings are decisions
//!
//! h, y, dh and dz are rounded to bf16. Each rounding is a discrete
//! decision ([`crate::bf16`]), taken by the profile on its f32 value and
//! recorded in [`SharedExpertDecisions`] with whether the profile's bound
//! vouches for it (its whole interval rounds there). The exact oracle, given
//! those decisions:
//!
//! - takes the profile's h, dh and dz (they feed later sums: everything after
//!   them is then judged on the same inputs,
//!   docs/ops/README.md#discrete-decisions), and compares its own rounding of
//!   the exact value with each: where they differ, the row counts as a
//!   `decision-near-tie` when either side's rounding was uncertain, and as a
//!   contradiction ([`Run::contradicted`], a failure) when both were certain;
//! - rounds the output y itself (the exact value's own rounding), which the
//!   accuracy check compares with the profile's: equal where the profile's
//!   bound puts the exact value on one side of every rounding boundary (the
//!   bound of a [`crate::num::Bounded`] rounding is then 0), within the
//!   reach of that bound otherwise (counted as a near tie where they differ).
//!
//! A decision that is not finite and not vouched for (a NaN or an infinity
//! from an f32 overflow the exact value does not have) is no decision
//! between two bf16 neighbours: the exact oracle takes its own rounding
//! there, and the outputs that follow are judged unbounded, not equal NaNs.

use crate::bf16::{same_rounding, Bf16Decision, Rounding};
use crate::case::shared_expert::{
    is_bf16, SharedExpertBackward, SharedExpertCase, SharedExpertError, SharedExpertForward,
};
use crate::mma::MmaModel;
use crate::num::Num;
use crate::op::Run;
use crate::profile::shared_expert::SharedExpertProfile;

/// The bf16 roundings of one run, each T rows of the row-major values named
/// below; a forward takes h and y (dh, dz empty), a backward dh and dz (h, y
/// empty). What the profile decided, and what the exact oracle is given.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SharedExpertDecisions {
    /// T x F: h = bf16((g * sigmoid(g)) * u). Imposed.
    pub h: Vec<Bf16Decision>,
    /// T x H: y = bf16(h w2^T), the forward's output. Compared, never imposed.
    pub y: Vec<Bf16Decision>,
    /// T x F: dh = bf16(dy w2). Imposed.
    pub dh: Vec<Bf16Decision>,
    /// T x 2F: dz = bf16([dgate, dup]), gate block first. Imposed.
    pub dz: Vec<Bf16Decision>,
}

/// Every intermediate value of a profile's f32 run, forward and backward,
/// each T rows of the row-major values named below: what a generator aims
/// its bf16 ties at and classifies cases by, from the oracle's own
/// arithmetic. `*_pre` is the f32 value a bf16 rounding reads.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SharedExpertTrace {
    /// T x F each: the gate and up pre-activations, sigmoid(g).
    pub g: Vec<f32>,
    pub u: Vec<f32>,
    pub sig: Vec<f32>,
    /// T x F: (g * sig) * u, and h = bf16 of it.
    pub h_pre: Vec<f32>,
    pub h: Vec<f32>,
    /// T x H: h . w2 rows, and y.
    pub y_pre: Vec<f32>,
    pub y: Vec<f32>,
    /// T x F: dy . w2 columns, and dh.
    pub dh_pre: Vec<f32>,
    pub dh: Vec<f32>,
    /// T x 2F: [dgate, dup], gate block first, and dz.
    pub dz_pre: Vec<f32>,
    pub dz: Vec<f32>,
    /// T x H: dX.
    pub dx: Vec<f32>,
}

/// The trace of `profile`'s forward and backward on `case` (f32, no decision
/// imposed): the very runs of [`forward_on`] and [`backward_on`], recorded.
pub fn trace(case: &SharedExpertCase, profile: &SharedExpertProfile) -> Result<SharedExpertTrace, SharedExpertError> {
    let mut tr = SharedExpertTrace::default();
    forward_traced::<f32>(case, profile, None, Some(&mut tr))?;
    backward_traced::<f32>(case, profile, None, Some(&mut tr))?;
    Ok(tr)
}

/// Checks the case and the profile: everything below may index freely.
pub fn validate(case: &SharedExpertCase, profile: &SharedExpertProfile) -> Result<(), SharedExpertError> {
    case.validate()?;
    profile.validate().map_err(SharedExpertError::Profile)
}

/// Checks imposed decisions against a validated case: the lengths of the
/// run (`backward` or forward) and the others empty, every value a bf16 (or
/// NaN).
fn check_decisions(
    case: &SharedExpertCase,
    imposed: Option<&SharedExpertDecisions>,
    backward: bool,
) -> Result<(), SharedExpertError> {
    let Some(d) = imposed else { return Ok(()) };
    let (t, h, f) = (case.t, case.h, case.f);
    let want: [(&str, &[Bf16Decision], usize); 4] = if backward {
        [("h", &d.h, 0), ("y", &d.y, 0), ("dh", &d.dh, t * f), ("dz", &d.dz, t * 2 * f)]
    } else {
        [("h", &d.h, t * f), ("y", &d.y, t * h), ("dh", &d.dh, 0), ("dz", &d.dz, 0)]
    };
    for (name, v, n) in want {
        if v.len() != n {
            return Err(SharedExpertError::Decisions(format!("{name} holds {} decisions, expected {n}", v.len())));
        }
        if let Some(i) = v.iter().position(|d| !is_bf16(d.value)) {
            let bits = v[i].value.to_bits();
            return Err(SharedExpertError::Decisions(format!("{name}[{i}] = {bits:#010x} is not a bf16 value")));
        }
    }
    Ok(())
}

/// The near ties (per token) and contradictions met at a run's roundings.
struct Tally {
    near: Vec<bool>,
    contradicted: Vec<String>,
}

impl Tally {
    fn new(t: usize) -> Self {
        Tally { near: vec![false; t], contradicted: Vec::new() }
    }

    /// This type's own rounding `r` against the imposed decision `d` at a
    /// rounding of token t (see the module docs). `report`: a contradiction
    /// is recorded here (an intermediate rounding), rather than left to the
    /// accuracy check's comparison of the output.
    fn compare<N: Num>(
        &mut self,
        t: usize,
        r: &Rounding<N>,
        d: &Bf16Decision,
        report: bool,
        label: impl Fn() -> String,
    ) {
        match r.decision {
            Some(own) if same_rounding(own, d.value) => {}
            Some(own) if r.certain && d.certain => {
                if report {
                    self.contradicted.push(format!(
                        "{}: decided {:e} ({:#06x}) with certainty, the exact value rounds to {:e} ({:#06x})",
                        label(),
                        d.value,
                        d.value.to_bits() >> 16,
                        own,
                        own.to_bits() >> 16
                    ));
                }
            }
            // Differing where one side is not sure, or this side cannot tell.
            _ => self.near[t] = true,
        }
    }

    /// An intermediate rounding (h, dh, dz) of `acc` at token t: the imposed
    /// decision when there is one (a non-finite one only when vouched for),
    /// else this type's own; the value to go on with and the decision taken.
    fn intermediate<N: Num>(
        &mut self,
        t: usize,
        acc: &N,
        imposed: Option<&Bf16Decision>,
        label: impl Fn() -> String,
    ) -> (N, Bf16Decision) {
        let r = acc.round_bf16();
        if let Some(d) = imposed {
            self.compare(t, &r, d, true, label);
            if d.value.is_finite() || d.certain {
                return (N::input(d.value), *d);
            }
        }
        let own = own_decision(&r);
        // A decision taken is exact from here on (the exact oracle takes it
        // too): N::input. Where this type cannot tell, its rounded value
        // keeps a bound reaching both candidates.
        let value = match r.decision {
            Some(d) => N::input(d),
            None => r.value,
        };
        (value, own)
    }

    /// The output rounding (y) of `acc` at token t: always this type's own,
    /// with its bound against the exact value's own rounding; compared with
    /// the imposed decision for the near-tie count only.
    fn output<N: Num>(
        &mut self,
        t: usize,
        acc: &N,
        imposed: Option<&Bf16Decision>,
        label: impl Fn() -> String,
    ) -> (N, Bf16Decision) {
        let r = acc.round_bf16();
        if let Some(d) = imposed {
            self.compare(t, &r, d, false, label);
        }
        let own = own_decision(&r);
        (r.value, own)
    }

    fn near_ties(&self) -> usize {
        self.near.iter().filter(|&&n| n).count()
    }
}

/// The decision a rounding records: its value (the rounded value's own f32
/// where the type cannot tell) and whether it is certain.
fn own_decision<N: Num>(r: &Rounding<N>) -> Bf16Decision {
    Bf16Decision { value: r.decision.unwrap_or_else(|| r.value.to_f32()), certain: r.certain }
}

/// s = 1 / (1 + exp(-x)): exp correctly rounded, then the add, then the
/// division, each rounded (docs/ops/router.md#the-sigmoid).
fn sigmoid<N: Num>(x: &N) -> N {
    let one = N::input(1.0);
    one.div(&one.add(&x.neg().exp()))
}

/// sum over i of a[i] * b[i]: a chain of MMA steps on `mma`'s model when
/// the profile names one, else each product rounded and the products
/// reduced in `order` (ascending index is the order of the terms).
fn dot<N: Num>(
    order: &crate::order::ReductionOrder,
    mma: Option<&MmaModel>,
    a: &[N],
    b: impl Iterator<Item = f32>,
) -> N {
    match mma {
        Some(m) => N::dot_mma(m, a, &b.collect::<Vec<f32>>()),
        None => {
            let terms: Vec<N> = a.iter().zip(b).map(|(a, b)| a.mul(&N::input(b))).collect();
            order.reduce(&terms)
        }
    }
}

/// z = x w1^T for token t: 2F values, the gate block then the up block.
fn z_row<N: Num>(case: &SharedExpertCase, profile: &SharedExpertProfile, mma: Option<&MmaModel>, t: usize) -> Vec<N> {
    let x: Vec<N> = case.x_row(t).iter().map(|&v| N::input(v)).collect();
    (0..2 * case.f).map(|r| dot(&profile.z, mma, &x, case.w1_row(r).iter().copied())).collect()
}

/// The forward on any value type. `imposed` gives h (taken) and y
/// (compared); see the module docs.
pub fn forward_on<N: Num>(
    case: &SharedExpertCase,
    profile: &SharedExpertProfile,
    imposed: Option<&SharedExpertDecisions>,
) -> Result<Run<SharedExpertForward<N>, SharedExpertDecisions>, SharedExpertError> {
    forward_traced(case, profile, imposed, None)
}

/// [`forward_on`], recording its intermediates into `trace` when given.
fn forward_traced<N: Num>(
    case: &SharedExpertCase,
    profile: &SharedExpertProfile,
    imposed: Option<&SharedExpertDecisions>,
    mut trace: Option<&mut SharedExpertTrace>,
) -> Result<Run<SharedExpertForward<N>, SharedExpertDecisions>, SharedExpertError> {
    validate(case, profile)?;
    check_decisions(case, imposed, false)?;
    let mma = profile.mma_model().map_err(SharedExpertError::Profile)?;
    let (t_n, h_n, f_n) = (case.t, case.h, case.f);
    let mut tally = Tally::new(t_n);
    let mut decisions = SharedExpertDecisions {
        h: Vec::with_capacity(t_n * f_n),
        y: Vec::with_capacity(t_n * h_n),
        ..Default::default()
    };
    let mut y = Vec::with_capacity(t_n * h_n);
    for t in 0..t_n {
        let z = z_row::<N>(case, profile, mma.as_ref(), t);
        let mut h = Vec::with_capacity(f_n);
        for j in 0..f_n {
            let (g, u) = (&z[j], &z[f_n + j]);
            let sig = sigmoid(g);
            let a = g.mul(&sig).mul(u);
            let site = imposed.map(|d| &d.h[t * f_n + j]);
            let (v, d) = tally.intermediate(t, &a, site, || format!("h[{t}][{j}]"));
            if let Some(tr) = trace.as_deref_mut() {
                tr.g.push(g.to_f32());
                tr.u.push(u.to_f32());
                tr.sig.push(sig.to_f32());
                tr.h_pre.push(a.to_f32());
                tr.h.push(v.to_f32());
            }
            h.push(v);
            decisions.h.push(d);
        }
        for i in 0..h_n {
            let acc = dot(&profile.y, mma.as_ref(), &h, case.w2_row(i).iter().copied());
            let site = imposed.map(|d| &d.y[t * h_n + i]);
            let (v, d) = tally.output(t, &acc, site, || format!("y[{t}][{i}]"));
            if let Some(tr) = trace.as_deref_mut() {
                tr.y_pre.push(acc.to_f32());
                tr.y.push(v.to_f32());
            }
            y.push(v);
            decisions.y.push(d);
        }
    }
    let near_ties = tally.near_ties();
    Ok(Run { out: SharedExpertForward { y }, decisions, near_ties, contradicted: tally.contradicted })
}

/// The backward (dX only, weights frozen) on any value type. `imposed`
/// gives dh and dz (both taken); see the module docs.
///
/// dh = bf16(dy w2); sig = sigmoid(g); silu = g * sig;
/// dsilu = sig * (1 + g * (1 - sig)); dgate = (dh * u) * dsilu;
/// dup = dh * silu; dz = bf16([dgate, dup]); dX = dz w1, unrounded.
pub fn backward_on<N: Num>(
    case: &SharedExpertCase,
    profile: &SharedExpertProfile,
    imposed: Option<&SharedExpertDecisions>,
) -> Result<Run<SharedExpertBackward<N>, SharedExpertDecisions>, SharedExpertError> {
    backward_traced(case, profile, imposed, None)
}

/// [`backward_on`], recording its intermediates into `trace` when given.
fn backward_traced<N: Num>(
    case: &SharedExpertCase,
    profile: &SharedExpertProfile,
    imposed: Option<&SharedExpertDecisions>,
    mut trace: Option<&mut SharedExpertTrace>,
) -> Result<Run<SharedExpertBackward<N>, SharedExpertDecisions>, SharedExpertError> {
    validate(case, profile)?;
    check_decisions(case, imposed, true)?;
    let mma = profile.mma_model().map_err(SharedExpertError::Profile)?;
    let (t_n, h_n, f_n) = (case.t, case.h, case.f);
    let mut tally = Tally::new(t_n);
    let mut decisions = SharedExpertDecisions {
        dh: Vec::with_capacity(t_n * f_n),
        dz: Vec::with_capacity(t_n * 2 * f_n),
        ..Default::default()
    };
    let one = N::input(1.0);
    let mut dx = Vec::with_capacity(t_n * h_n);
    for t in 0..t_n {
        let z = z_row::<N>(case, profile, mma.as_ref(), t);
        let dy: Vec<N> = case.dy_row(t).iter().map(|&v| N::input(v)).collect();
        let mut dz_gate = Vec::with_capacity(f_n);
        let mut dz_up = Vec::with_capacity(f_n);
        for j in 0..f_n {
            // Column j of w2 (the matrix is H x F, row-major).
            let acc = dot(&profile.dh, mma.as_ref(), &dy, (0..h_n).map(|i| case.w2[i * f_n + j]));
            let site = imposed.map(|d| &d.dh[t * f_n + j]);
            let (dh, d) = tally.intermediate(t, &acc, site, || format!("dh[{t}][{j}]"));
            decisions.dh.push(d);
            if let Some(tr) = trace.as_deref_mut() {
                tr.dh_pre.push(acc.to_f32());
                tr.dh.push(dh.to_f32());
            }

            let (g, u) = (&z[j], &z[f_n + j]);
            let sig = sigmoid(g);
            let silu = g.mul(&sig);
            let dsilu = sig.mul(&one.add(&g.mul(&one.add(&sig.neg()))));
            let dgate = dh.mul(u).mul(&dsilu);
            let dup = dh.mul(&silu);
            dz_gate.push((dgate, j));
            dz_up.push((dup, f_n + j));
        }
        // dz in w1's row order: the gate block, then the up block.
        let mut dz = Vec::with_capacity(2 * f_n);
        for (acc, r) in dz_gate.into_iter().chain(dz_up) {
            let site = imposed.map(|d| &d.dz[t * 2 * f_n + r]);
            let (v, d) = tally.intermediate(t, &acc, site, || format!("dz[{t}][{r}]"));
            if let Some(tr) = trace.as_deref_mut() {
                tr.dz_pre.push(acc.to_f32());
                tr.dz.push(v.to_f32());
            }
            dz.push(v);
            decisions.dz.push(d);
        }
        for i in 0..h_n {
            // Column i of w1 (2F x H, row-major): one chain over all 2F rows.
            let d = dot(&profile.dx, mma.as_ref(), &dz, (0..2 * f_n).map(|r| case.w1[r * h_n + i]));
            if let Some(tr) = trace.as_deref_mut() {
                tr.dx.push(d.to_f32());
            }
            dx.push(d);
        }
    }
    let near_ties = tally.near_ties();
    Ok(Run { out: SharedExpertBackward { dx }, decisions, near_ties, contradicted: tally.contradicted })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::Layout;
    use crate::num::Bounded;
    use crate::op::shared_expert::SharedExpert;
    use crate::op::{backward, forward};

    /// T = 1, H = 2, F = 1: x = (1, 2), gate row (0.5, 0.25), up row (1, -1),
    /// so g = 1 and u = -1 exactly; w2 = (1, 0.5)^T; dy = (1, 1).
    fn tiny() -> SharedExpertCase {
        SharedExpertCase {
            t: 1,
            h: 2,
            f: 1,
            layout: Layout::dense(2),
            x: vec![1.0, 2.0],
            w1: vec![0.5, 0.25, 1.0, -1.0],
            w2: vec![1.0, 0.5],
            dy: vec![1.0, 1.0],
        }
    }

    #[test]
    fn tiny_forward_by_hand() {
        // sigmoid(1) in f32: e^-1 = 0x3ebc5ab2 (correctly rounded), 1 + it =
        // 1.36787939..., 1 / that = 0x3f3b26a8 = 0.73105860; times g = 1 and
        // u = -1, exact: h = bf16(-0x3f3b26a8) = -0x3f3b (low half 0x26a8 <
        // 0x8000) = -0.73046875. y = bf16(h * 1) and bf16(h * 0.5), exact.
        let f = forward::<SharedExpert>(&tiny(), &SharedExpertProfile::serial()).unwrap();
        assert_eq!(f.y, vec![-0.730_468_75, -0.730_468_75 / 2.0]);
    }

    #[test]
    fn the_trace_is_the_runs() {
        // tiny(): g = 1, u = -1; h and y as in tiny_forward_by_hand; dh =
        // bf16(1 * 1 + 1 * 0.5) = 1.5; dX by the backward itself.
        let (c, p) = (tiny(), SharedExpertProfile::serial());
        let tr = trace(&c, &p).unwrap();
        assert_eq!((tr.g.clone(), tr.u.clone(), tr.h.clone()), (vec![1.0], vec![-1.0], vec![-0.730_468_75]));
        assert_eq!(tr.h_pre, vec![-f32::from_bits(0x3f3b_26a8)]);
        assert_eq!((tr.y_pre.len(), tr.dh_pre.clone(), tr.dz_pre.len()), (2, vec![1.5], 2));
        assert_eq!(tr.y, forward::<SharedExpert>(&c, &p).unwrap().y);
        assert_eq!(tr.dx, backward::<SharedExpert>(&c, &p).unwrap().dx);
        let mut bad = c.clone();
        bad.w2.pop();
        assert!(trace(&bad, &p).is_err());
    }

    #[test]
    fn imposed_decisions_are_checked() {
        let c = tiny();
        let p = SharedExpertProfile::serial();
        let run = forward_on::<Bounded>(&c, &p, None).unwrap();
        assert_eq!((run.decisions.h.len(), run.decisions.y.len()), (1, 2));
        assert!(forward_on::<f32>(&c, &p, Some(&run.decisions)).is_ok());
        // A forward's decisions are no backward's, and vice versa.
        assert!(matches!(backward_on::<f32>(&c, &p, Some(&run.decisions)), Err(SharedExpertError::Decisions(_))));
        let mut odd = run.decisions.clone();
        odd.h[0].value = 1.0 + f32::EPSILON;
        assert!(matches!(forward_on::<f32>(&c, &p, Some(&odd)), Err(SharedExpertError::Decisions(_))));
        let b = backward_on::<Bounded>(&c, &p, None).unwrap();
        assert_eq!((b.decisions.dh.len(), b.decisions.dz.len()), (1, 2));
        assert!(backward_on::<f32>(&c, &p, Some(&b.decisions)).is_ok());
        assert!(backward::<SharedExpert>(&c, &p).is_ok());
        // An invalid case is an error, not a panic.
        let mut bad = c.clone();
        bad.w2.pop();
        assert!(forward_on::<f32>(&bad, &p, None).is_err());
    }
}
