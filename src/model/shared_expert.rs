//! The kernel model of `shared_expert` (docs/ops/shared_expert.md), written as
//! a naive CUDA kernel is: one thread per output, x and dy read from their
//! strided storage (poison in the gaps), every dot product a serial
//! mul-then-add loop from +0.0 in ascending K, the sigmoid from the correctly
//! rounded exp, and bf16 rounding done on the f32 bits (add 0x7fff plus the
//! kept half's lowest bit, drop the low half), as `__float2bfloat16_rn` does.
//! It shares with the oracles the case, profile and output types, their
//! validation, and `exp_f32`; nothing else.
//!
//! Under a profile naming an MMA model (`mma16-h100`) each dot product is
//! instead a chain of the model's steps over blocks of 16 (the step is
//! shared with the oracles, as the exp is).
//!
//! Without a bug it computes the `serial` profile bit for bit (any NaN
//! matching any NaN); with a [`SharedExpertBug`] it makes that one mistake.
//! [`SharedExpertModel::trace`] also hands out the intermediates (z, h, dh,
//! dz before and after rounding).

use super::router::fast_exp;
use super::{ModelError, Strided, POISON};
use crate::planted::shared_expert::{SharedExpertBug, SMALL_T};
use oracles::case::shared_expert::{SharedExpertBackward, SharedExpertCase, SharedExpertForward};
// The one computational leaf shared with the oracles (see the router
// model): the correctly rounded exp, verified on its own against MPFR.
use oracles::expf::exp_f32;
use oracles::mma::MmaModel;
use oracles::order::ReductionOrder;
use oracles::profile::shared_expert::SharedExpertProfile;

/// The kernel model of a profile, with or without a planted bug. It
/// implements the serial order of each dot product (one thread's chain),
/// or the MMA chain of a profile naming an MMA model; a profile naming
/// another order is refused as unsupported.
#[derive(Clone, Debug, PartialEq)]
pub struct SharedExpertModel {
    pub profile: SharedExpertProfile,
    pub bug: Option<SharedExpertBug>,
}

/// Every intermediate of one run, per token, logical layout (T rows).
/// `*_pre` is the f32 value a bf16 rounding reads.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Trace {
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
    /// T x F (backward only): dy . w2 columns, and dh.
    pub dh_pre: Vec<f32>,
    pub dh: Vec<f32>,
    /// T x 2F (backward only): [dgate, dup], and dz.
    pub dz_pre: Vec<f32>,
    pub dz: Vec<f32>,
    /// T x H (backward only): dX.
    pub dx: Vec<f32>,
}

/// bf16 round-to-nearest-even from the f32 bits: add 0x7fff plus the kept
/// half's lowest bit (a tie goes to the even kept half), drop the low 16
/// bits. The carry rounds past the largest bf16 to infinity and into the
/// next binade correctly. A NaN stays a NaN (the add could carry a NaN
/// whose payload is in the low half into infinity).
pub fn bf16_rne(x: f32) -> f32 {
    if x.is_nan() {
        return f32::NAN;
    }
    let b = x.to_bits();
    f32::from_bits(b.wrapping_add(0x7fff + ((b >> 16) & 1)) & 0xffff_0000)
}

impl SharedExpertModel {
    /// The correct model of `profile`.
    pub fn new(profile: SharedExpertProfile) -> Self {
        SharedExpertModel { profile, bug: None }
    }

    /// A planted bug, on the serial profile.
    pub fn planted(bug: SharedExpertBug) -> Self {
        SharedExpertModel { profile: SharedExpertProfile::serial(), bug: Some(bug) }
    }

    /// Validates the case and the profile (shared validation) and refuses
    /// any order but the serial chain this kernel runs (a profile naming an
    /// MMA model keeps Serial in its order fields, which it does not use).
    fn prepare(&self, case: &SharedExpertCase) -> Result<(), ModelError> {
        case.validate().map_err(|e| ModelError::Invalid(e.to_string()))?;
        let p = &self.profile;
        p.validate().map_err(|e| ModelError::Invalid(format!("invalid profile: {e}")))?;
        for (order, what) in [(&p.z, "z"), (&p.y, "y"), (&p.dh, "dh"), (&p.dx, "dX")] {
            if *order != ReductionOrder::Serial {
                return Err(ModelError::Unsupported(format!(
                    "reduction order {order} for {what} (shared_expert profile {}): the kernel model implements Serial",
                    p.name
                )));
            }
        }
        Ok(())
    }

    fn has(&self, bug: SharedExpertBug) -> bool {
        self.bug == Some(bug)
    }

    /// y, T x H, bf16.
    pub fn forward(&self, case: &SharedExpertCase) -> Result<SharedExpertForward<f32>, ModelError> {
        Ok(SharedExpertForward { y: self.trace(case, false)?.y })
    }

    /// dX, T x H, f32.
    pub fn backward(&self, case: &SharedExpertCase) -> Result<SharedExpertBackward<f32>, ModelError> {
        Ok(SharedExpertBackward { dx: self.trace(case, true)?.dx })
    }

    /// The kernel's bf16 rounding.
    fn to_bf16(&self, x: f32) -> f32 {
        if self.has(SharedExpertBug::Bf16Truncate) {
            f32::from_bits(x.to_bits() & 0xffff_0000)
        } else if self.has(SharedExpertBug::Bf16HalfAway) {
            f32::from_bits(x.to_bits().wrapping_add(0x8000) & 0xffff_0000)
        } else {
            bf16_rne(x)
        }
    }

    /// sigmoid(g) = 1 / (1 + exp(-g)), each operation rounded.
    fn sigmoid(&self, g: f32) -> f32 {
        let e = if self.has(SharedExpertBug::FastExp) { fast_exp(-g) } else { exp_f32(-g) };
        1.0 / (1.0 + e)
    }

    /// One thread's dot product over k in lo..hi: acc = +0.0, then
    /// acc = acc + a(k) * b(k) ascending (a fused multiply-add under the
    /// `fma` bug). Under a profile naming an MMA model, the tensor core's
    /// steps instead: blocks of 16 from lo, each step's f32 the next one's
    /// c (the step itself is the model's, shared with the oracles as the
    /// exp is).
    fn chain(
        &self,
        mma: Option<&MmaModel>,
        lo: usize,
        hi: usize,
        a: &dyn Fn(usize) -> f32,
        b: &dyn Fn(usize) -> f32,
    ) -> f32 {
        if let Some(m) = mma {
            let (mut xa, mut xb) = ([0.0f32; oracles::mma::K], [0.0f32; oracles::mma::K]);
            let mut acc = 0.0f32;
            for k in (lo..hi).step_by(oracles::mma::K) {
                let n = oracles::mma::K.min(hi - k);
                for i in 0..n {
                    (xa[i], xb[i]) = (a(k + i), b(k + i));
                }
                acc = m.dot_add(&xa[..n], &xb[..n], acc);
            }
            return acc;
        }
        let mut acc = 0.0f32;
        for k in lo..hi {
            acc = if self.has(SharedExpertBug::Fma) { a(k).mul_add(b(k), acc) } else { acc + a(k) * b(k) };
        }
        acc
    }

    /// A dot product of length n in a batch of t_n tokens: one chain, or
    /// under a split-K bug two chains over the halves of K added at the end.
    fn dot(
        &self,
        mma: Option<&MmaModel>,
        t_n: usize,
        n: usize,
        a: &dyn Fn(usize) -> f32,
        b: &dyn Fn(usize) -> f32,
    ) -> f32 {
        let split = self.has(SharedExpertBug::SplitK) || (self.has(SharedExpertBug::SmallTSplitK) && t_n <= SMALL_T);
        if split {
            let mid = n / 2;
            self.chain(mma, 0, mid, a, b) + self.chain(mma, mid, n, a, b)
        } else {
            self.chain(mma, 0, n, a, b)
        }
    }

    /// Every intermediate of the forward (and of the backward when
    /// `backward`), as the kernels compute them.
    pub fn trace(&self, case: &SharedExpertCase, backward: bool) -> Result<Trace, ModelError> {
        self.prepare(case)?;
        // The profile's MMA model, looked up once (prepare validated it).
        let mma = self.profile.mma_model().ok().flatten();
        let mma = mma.as_ref();
        let (t_n, h_n, f_n) = (case.t, case.h, case.f);
        let poison = f32::from_bits(POISON);
        let x = Strided { buf: case.x_storage(poison), base: case.layout.offset, stride: case.layout.row_stride };
        let dy = Strided { buf: case.dy_storage(poison), base: case.layout.offset, stride: case.layout.row_stride };
        let w1 = |r: usize, i: usize| case.w1[r * h_n + i];
        let w2 = |i: usize, j: usize| case.w2[i * f_n + j];
        // The w1 rows the kernel takes for unit j's gate and up.
        let (gate0, up0) = if self.has(SharedExpertBug::GateUpSwapped) { (f_n, 0) } else { (0, f_n) };
        let mut tr = Trace::default();
        for t in 0..t_n {
            let xt = |i: usize| x.at(t, i);
            let mut h = vec![0.0f32; f_n];
            let mut silu = vec![0.0f32; f_n];
            for j in 0..f_n {
                let g = self.dot(mma, t_n, h_n, &xt, &|i| w1(gate0 + j, i));
                let u = self.dot(mma, t_n, h_n, &xt, &|i| w1(up0 + j, i));
                let sig = self.sigmoid(g);
                silu[j] = g * sig;
                let h_pre =
                    if self.has(SharedExpertBug::HRoundedTwice) { self.to_bf16(silu[j]) * u } else { silu[j] * u };
                h[j] = self.to_bf16(h_pre);
                tr.g.push(g);
                tr.u.push(u);
                tr.sig.push(sig);
                tr.h_pre.push(h_pre);
                tr.h.push(h[j]);
            }
            for i in 0..h_n {
                let y_pre = self.dot(mma, t_n, f_n, &|j| h[j], &|j| w2(i, j));
                tr.y_pre.push(y_pre);
                tr.y.push(self.to_bf16(y_pre));
            }
            if !backward {
                continue;
            }
            let dyt = |i: usize| dy.at(t, i);
            let base = t * f_n;
            // [dgate block, dup block], before and after rounding.
            let mut dz_pre = vec![0.0f32; 2 * f_n];
            for j in 0..f_n {
                let dh_pre = self.dot(mma, t_n, h_n, &dyt, &|i| w2(i, j));
                let dh = self.to_bf16(dh_pre);
                let (g, u, sig) = (tr.g[base + j], tr.u[base + j], tr.sig[base + j]);
                let dsilu = sig * (1.0 + g * (1.0 - sig));
                dz_pre[j] = (dh * u) * dsilu;
                dz_pre[f_n + j] = dh * silu[j];
                tr.dh_pre.push(dh_pre);
                tr.dh.push(dh);
            }
            let dz: Vec<f32> = dz_pre.iter().map(|&v| self.to_bf16(v)).collect();
            tr.dz_pre.extend_from_slice(&dz_pre);
            tr.dz.extend_from_slice(&dz);
            // dX: one chain over all 2F, the gate block first.
            let row = |k: usize| if k < f_n { gate0 + k } else { up0 + k - f_n };
            for i in 0..h_n {
                let d = self.dot(mma, t_n, 2 * f_n, &|k| dz[k], &|k| w1(row(k), i));
                tr.dx.push(if self.has(SharedExpertBug::DxRounded) { self.to_bf16(d) } else { d });
            }
        }
        Ok(tr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bf16_rounding_is_to_nearest_even() {
        let r = |bits: u32| bf16_rne(f32::from_bits(bits)).to_bits();
        // Below, at and above the tie; ties to the even kept half.
        assert_eq!(r(0x3f80_7fff), 0x3f80_0000);
        assert_eq!(r(0x3f80_8000), 0x3f80_0000, "tie, kept half even: down");
        assert_eq!(r(0x3f81_8000), 0x3f82_0000, "tie, kept half odd: up");
        assert_eq!(r(0x3f80_8001), 0x3f81_0000);
        assert_eq!(r(0xbf81_8000), 0xbf82_0000, "sign kept");
        // Carry into the exponent; past the largest bf16 to infinity.
        assert_eq!(r(0x3fff_8000), 0x4000_0000);
        assert_eq!(r(0x7f7f_8000), 0x7f80_0000);
        assert_eq!(r(0x7f7f_7fff), 0x7f7f_0000);
        assert_eq!(r(f32::MAX.to_bits()), 0x7f80_0000);
        // Subnormals: the same rule on the same bits.
        assert_eq!(r(0x0000_8000), 0x0000_0000);
        assert_eq!(r(0x0001_8000), 0x0002_0000);
        assert_eq!(r(0x8000_0001), 0x8000_0000, "-0.0 kept");
        assert!(bf16_rne(f32::from_bits(0x7f80_0001)).is_nan(), "a NaN with a low payload stays NaN");
        assert_eq!(r(f32::INFINITY.to_bits()), f32::INFINITY.to_bits());
    }

    #[test]
    fn the_buggy_roundings_differ_where_they_should() {
        let t = SharedExpertModel::planted(SharedExpertBug::Bf16Truncate);
        let a = SharedExpertModel::planted(SharedExpertBug::Bf16HalfAway);
        let x = f32::from_bits(0x3f80_c000);
        assert_eq!(
            (t.to_bf16(x).to_bits(), a.to_bf16(x).to_bits(), bf16_rne(x).to_bits()),
            (0x3f80_0000, 0x3f81_0000, 0x3f81_0000)
        );
        // The half-away rounding differs from RNE only on a tie with an even kept half.
        let tie = f32::from_bits(0x3f80_8000);
        assert_eq!((a.to_bf16(tie).to_bits(), bf16_rne(tie).to_bits()), (0x3f81_0000, 0x3f80_0000));
        let odd_tie = f32::from_bits(0x3f81_8000);
        assert_eq!(a.to_bf16(odd_tie).to_bits(), bf16_rne(odd_tie).to_bits());
    }
}
