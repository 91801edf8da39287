//! The kernel model of `seqwise_loss` (docs/ops/seqwise_loss.md), written as
//! the CUDA kernels are: scores read from their strided storage, the top-k by
//! iterative argmax, one loop per formula, every sum the kernel loop of its
//! profile's order ([`Sum`]). It shares with the profile oracle the case,
//! profile and output types and their validation, nothing else.
//!
//! Without a bug it must agree with the profile oracle bit for bit (any NaN
//! matching any NaN, the sign of zero counting) on every valid case. With a
//! [`SeqwiseBug`] it makes that one mistake.

use super::{pick_top, sign_factor, ModelError, Scan, Strided, Sum, POISON};
use crate::planted::SeqwiseBug;
use oracles::case::seqwise_loss::{Objective, SeqwiseBackward, SeqwiseCase, SeqwiseForward};
use oracles::profile::seqwise_loss::{SeqwiseProfile, GPU_LANES};
use oracles::vocab::{ClampTie, EPS, EPS2};

/// The kernel model of a profile, with or without a planted bug.
#[derive(Clone, Debug, PartialEq)]
pub struct SeqwiseModel {
    pub profile: SeqwiseProfile,
    pub bug: Option<SeqwiseBug>,
}

/// The kernel loops of a profile's four sums.
#[derive(Clone, Copy, Debug)]
struct Loops {
    row: Sum,
    tokens: Sum,
    raw: Sum,
    q: Sum,
}

/// One row's denominator: d_t (L1, clamped) or D_t (plain sum + eps2), and
/// the backward's gate (L1 only).
#[derive(Clone, Copy, Debug)]
struct Denominator {
    d: f32,
    gate: bool,
}

impl SeqwiseModel {
    /// The correct model of `profile`.
    pub fn new(profile: SeqwiseProfile) -> Self {
        SeqwiseModel { profile, bug: None }
    }

    /// A planted bug, on the serial profile.
    pub fn planted(bug: SeqwiseBug) -> Self {
        SeqwiseModel { profile: SeqwiseProfile::serial(), bug: Some(bug) }
    }

    /// raw, the counts c_e and the frequencies f_e.
    pub fn forward(&self, case: &SeqwiseCase) -> Result<SeqwiseForward<f32>, ModelError> {
        let loops = self.prepare(case)?;
        let scores = self.read(case);
        let (counts, freq) = self.frequencies(&scores, case);
        let (t_n, e_n) = (case.t, case.e);
        let reads = |t: usize| !case.is_padding(t) || self.has(SeqwiseBug::PaddingRead);
        let d: Vec<f32> =
            (0..t_n).map(|t| if reads(t) { self.denominator(&scores, case, t, false, loops).d } else { 0.0 }).collect();
        // P_e: a sum over the tokens per expert, padding rows skipped.
        let p_sum: Vec<f32> =
            (0..e_n).map(|e| loops.tokens.sum(t_n, |t| reads(t).then(|| scores.at(t, e) / d[t]))).collect();
        let raw = loops.raw.sum(e_n, |e| Some(freq[e] * p_sum[e]));
        Ok(SeqwiseForward { raw, counts, freq })
    }

    /// d raw / d scores, times g (padding rows +0.0).
    pub fn backward(&self, case: &SeqwiseCase) -> Result<SeqwiseBackward<f32>, ModelError> {
        let loops = self.prepare(case)?;
        let scores = self.read(case);
        let (_, freq) = self.frequencies(&scores, case);
        let a: Vec<f32> = freq.iter().map(|&f| case.g * f).collect();
        let e_n = case.e;
        let l1 = self.l1(case, true);
        let mut grad = vec![0.0f32; case.t * e_n];
        for t in 0..case.t {
            if case.is_padding(t) {
                continue;
            }
            let den = self.denominator(&scores, case, t, true, loops);
            let d = den.d;
            let x = |e: usize| (scores.at(t, e) / d) / d;
            let q = if self.has(SeqwiseBug::FmaQuotient) {
                // What --fmad=true makes of `acc + -(a * x)` in a serial loop.
                let mut acc = 0.0f32;
                for (e, &a_e) in a.iter().enumerate() {
                    acc = (-a_e).mul_add(x(e), acc);
                }
                acc
            } else {
                let order = if self.has(SeqwiseBug::WrongOrder) {
                    if loops.q == Sum::Serial {
                        Sum::Warp { lanes: GPU_LANES }
                    } else {
                        Sum::Serial
                    }
                } else {
                    loops.q
                };
                order.sum(e_n, |e| Some(-(a[e] * x(e))))
            };
            for (k, g) in grad[t * e_n..(t + 1) * e_n].iter_mut().enumerate() {
                *g = if l1 {
                    let r = if den.gate { q } else { 0.0 };
                    a[k] / d + sign_factor(scores.at(t, k)) * r
                } else {
                    a[k] / d + q
                };
            }
        }
        Ok(SeqwiseBackward { grad })
    }

    fn has(&self, bug: SeqwiseBug) -> bool {
        self.bug == Some(bug)
    }

    /// Validates the case and the profile (shared validation) and finds the
    /// kernel loop of each of the profile's orders, refusing any order the
    /// model does not implement (before computing anything, as a kernel
    /// library refuses a profile it was not built for).
    fn prepare(&self, case: &SeqwiseCase) -> Result<Loops, ModelError> {
        case.validate().map_err(|e| ModelError::Invalid(e.to_string()))?;
        self.profile.validate().map_err(|e| ModelError::Invalid(format!("invalid profile: {e}")))?;
        let p = &self.profile;
        let of = |order, what: &str| Sum::of(order, &format!("{what} (profile {})", p.name));
        Ok(Loops {
            row: of(&p.row, "the row sums")?,
            tokens: of(&p.tokens, "the token sums P_e")?,
            raw: of(&p.raw, "raw")?,
            q: of(&p.q, "q_t")?,
        })
    }

    /// The scores as they lie in device memory: poison in the gaps, rows
    /// at the real offset and stride.
    fn read(&self, case: &SeqwiseCase) -> Strided {
        let buf = case.storage(f32::from_bits(POISON));
        let base = if self.has(SeqwiseBug::OffsetIgnored) { 0 } else { case.layout.offset };
        Strided { buf, base, stride: case.layout.row_stride }
    }

    /// Whether a row is normalised by its L1 norm (with the sign factor and
    /// the gate in the backward).
    fn l1(&self, case: &SeqwiseCase, backward: bool) -> bool {
        matches!(case.objective, Objective::ProvidedMap { .. })
            || (backward && self.has(SeqwiseBug::UnbiasedL1Backward))
    }

    /// The experts row t routes to (padding rows too: the caller skips them).
    fn selected(&self, scores: &Strided, case: &SeqwiseCase, t: usize) -> Vec<bool> {
        let e_n = case.e;
        match &case.objective {
            Objective::ProvidedMap { map } => map[t * e_n..(t + 1) * e_n].to_vec(),
            Objective::UnbiasedTopK { k } if *k == e_n => vec![true; e_n],
            Objective::UnbiasedTopK { k } => {
                let scan = if self.has(SeqwiseBug::TopkTiesHigh) { Scan::Descending } else { Scan::Ascending };
                pick_top(e_n, *k, scan, |e| Some(scores.at(t, e)))
            }
        }
    }

    /// The counts c_e (valid rows) and f_e = (c_e / max(C, eps)) * E.
    fn frequencies(&self, scores: &Strided, case: &SeqwiseCase) -> (Vec<u32>, Vec<f32>) {
        let mut counts = vec![0u32; case.e];
        let mut total = 0u64;
        for t in 0..case.t {
            let sel = self.selected(scores, case, t);
            let chosen = sel.iter().filter(|&&b| b).count() as u64;
            if case.is_padding(t) {
                if self.has(SeqwiseBug::PaddingCountedInC) {
                    total += chosen;
                }
                continue;
            }
            total += chosen;
            for (c, b) in counts.iter_mut().zip(sel) {
                *c += b as u32;
            }
        }
        // C <= 2^24 (validated): exact in f32.
        let denom = if total == 0 { EPS } else { total as f32 };
        let experts = case.e as f32;
        let freq = counts
            .iter()
            .map(|&c| {
                if self.has(SeqwiseBug::FreqReassociated) {
                    c as f32 * (experts / denom)
                } else {
                    (c as f32 / denom) * experts
                }
            })
            .collect();
        (counts, freq)
    }

    /// Row t's denominator: d_t = max(n_t, eps) with n_t = sum |s| (NaN
    /// propagates) and the gate on n_t, or D_t = (sum s) + eps2.
    fn denominator(&self, scores: &Strided, case: &SeqwiseCase, t: usize, backward: bool, loops: Loops) -> Denominator {
        let e_n = case.e;
        if !self.l1(case, backward) {
            let sum = loops.row.sum(e_n, |e| Some(scores.at(t, e)));
            return Denominator { d: sum + EPS2, gate: false };
        }
        let n = loops.row.sum(e_n, |e| Some(scores.at(t, e).abs()));
        // max(n, eps) with NaN propagating: eps only where n < eps.
        let d = if n < EPS { EPS } else { n };
        let strict = (case.clamp_tie == ClampTie::Strict) != self.has(SeqwiseBug::GateWrongSide);
        Denominator { d, gate: if strict { n > EPS } else { n >= EPS } }
    }
}
