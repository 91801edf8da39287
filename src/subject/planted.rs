//! A kernel model: `seqwise_loss` written a second time, as a kernel is
//! (reading strided storage, a rank per expert for the top-k, one loop per
//! formula), for any profile; and the planted bugs: the model with one
//! deliberate mistake each, shipped as subjects so that users can see what
//! the properties catch (`bitparity selftest`).
//!
//! Without a bug the model must agree bitwise with the profile oracle, a
//! conformance test of two implementations written apart. The planted bugs
//! run on the `serial` profile, the profile of the simplest kernel (a thread
//! per row), where each mistake shows on the smallest inputs.

use super::{invalid, Subject, SubjectError, SubjectKind};
use oracles::case::seqwise_loss::{
    topk_order, ClampTie, Objective, SeqwiseBackward, SeqwiseCase, SeqwiseForward, EPS, EPS2,
};
use oracles::op::seqwise_loss::SeqwiseLoss;
use oracles::order::ReductionOrder;
use oracles::profile::seqwise_loss::{SeqwiseProfile, GPU_LANES};

/// A deliberate mistake, each one that real kernels have shipped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Bug {
    /// The unbiased objective's backward uses the L1 formula (abs-sum
    /// denominator, sign factor, clamp gate) while its forward divides by
    /// the plain sum.
    UnbiasedL1Backward,
    /// The clamp gate on the wrong side of the tie (>= for Strict, > for Inclusive).
    GateWrongSide,
    /// The backward's quotient term contracted into an FMA: acc = fma(-a_e, x, acc).
    FmaQuotient,
    /// Padding rows' map entries counted in C.
    PaddingCountedInC,
    /// Padding rows' scores read into the token sums P_e (NaN poisoning).
    PaddingRead,
    /// Top-k ties broken toward the higher expert index.
    TopkTiesHigh,
    /// The storage offset ignored: rows read from the aligned base.
    OffsetIgnored,
    /// q_t summed in another order than the profile says.
    WrongOrder,
    /// f_e computed as c_e * (E / C) instead of (c_e / C) * E.
    FreqReassociated,
}

impl Bug {
    pub const ALL: [Bug; 9] = [
        Bug::UnbiasedL1Backward,
        Bug::GateWrongSide,
        Bug::FmaQuotient,
        Bug::PaddingCountedInC,
        Bug::PaddingRead,
        Bug::TopkTiesHigh,
        Bug::OffsetIgnored,
        Bug::WrongOrder,
        Bug::FreqReassociated,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Bug::UnbiasedL1Backward => "unbiased-l1-backward",
            Bug::GateWrongSide => "gate-wrong-side",
            Bug::FmaQuotient => "fma-quotient",
            Bug::PaddingCountedInC => "padding-counted-in-c",
            Bug::PaddingRead => "padding-read",
            Bug::TopkTiesHigh => "topk-ties-high",
            Bug::OffsetIgnored => "offset-ignored",
            Bug::WrongOrder => "wrong-order",
            Bug::FreqReassociated => "freq-reassociated",
        }
    }

    pub fn by_name(name: &str) -> Option<Bug> {
        Bug::ALL.into_iter().find(|b| b.name() == name)
    }

    pub fn describe(self) -> &'static str {
        match self {
            Bug::UnbiasedL1Backward => "unbiased backward with the L1 formula (abs-sum, sign, gate)",
            Bug::GateWrongSide => "clamp gate on the wrong side of the tie",
            Bug::FmaQuotient => "FMA contraction in the backward's quotient term",
            Bug::PaddingCountedInC => "padding rows counted in C",
            Bug::PaddingRead => "padding rows' scores read into the sums (NaN poisoning)",
            Bug::TopkTiesHigh => "top-k ties broken toward the higher expert index",
            Bug::OffsetIgnored => "storage offset ignored",
            Bug::WrongOrder => "q_t reduced in another order than the profile's",
            Bug::FreqReassociated => "f_e = c_e * (E / C) instead of (c_e / C) * E",
        }
    }
}

/// The kernel model of a profile, with or without a planted bug.
#[derive(Clone, Debug)]
pub struct KernelModel {
    pub profile: SeqwiseProfile,
    pub bug: Option<Bug>,
}

impl KernelModel {
    /// The correct model of `profile`.
    pub fn new(profile: SeqwiseProfile) -> Self {
        KernelModel { profile, bug: None }
    }

    /// A planted bug, on the serial profile.
    pub fn planted(bug: Bug) -> Self {
        KernelModel { profile: SeqwiseProfile::serial(), bug: Some(bug) }
    }

    /// Every planted bug.
    pub fn all_planted() -> Vec<KernelModel> {
        Bug::ALL.into_iter().map(KernelModel::planted).collect()
    }
}

/// The scores as the kernel reads them: from strided storage.
struct View {
    buf: Vec<f32>,
    base: usize,
    stride: usize,
}

impl View {
    fn s(&self, t: usize, e: usize) -> f32 {
        self.buf[self.base + t * self.stride + e]
    }
}

impl KernelModel {
    fn has(&self, b: Bug) -> bool {
        self.bug == Some(b)
    }

    fn view(&self, case: &SeqwiseCase) -> View {
        // Poison between rows and before the first, as device memory might hold.
        let buf = case.storage(f32::from_bits(0x7fc0_dead));
        let base = if self.has(Bug::OffsetIgnored) { 0 } else { case.layout.offset };
        View { buf, base, stride: case.layout.row_stride }
    }

    fn selected(&self, v: &View, case: &SeqwiseCase, t: usize) -> Vec<bool> {
        let e_n = case.e;
        match &case.objective {
            Objective::ProvidedMap { map } => map[t * e_n..(t + 1) * e_n].to_vec(),
            Objective::UnbiasedTopK { k } => {
                // The experts in selection order (a total order: indices
                // break every tie), the first k selected. The bug breaks
                // ties toward the higher index (indices mirrored).
                let idx = |j: usize| if self.has(Bug::TopkTiesHigh) { e_n - 1 - j } else { j };
                let mut order: Vec<usize> = (0..e_n).collect();
                order.sort_unstable_by(|&a, &b| topk_order((idx(a), v.s(t, a)), (idx(b), v.s(t, b))));
                let mut selected = vec![false; e_n];
                for &e in &order[..*k] {
                    selected[e] = true;
                }
                selected
            }
        }
    }

    /// counts and f_e.
    fn frequencies(&self, v: &View, case: &SeqwiseCase) -> (Vec<u32>, Vec<f32>) {
        let mut counts = vec![0u32; case.e];
        let mut total = 0u64;
        for t in 0..case.t {
            let sel = self.selected(v, case, t);
            let n = sel.iter().filter(|&&b| b).count() as u64;
            if case.is_padding(t) {
                if self.has(Bug::PaddingCountedInC) {
                    total += n;
                }
                continue;
            }
            total += n;
            for (c, b) in counts.iter_mut().zip(sel) {
                *c += b as u32;
            }
        }
        let denom = if total == 0 { EPS } else { total as f32 };
        let e = case.e as f32;
        let freq = counts
            .iter()
            .map(|&c| if self.has(Bug::FreqReassociated) { c as f32 * (e / denom) } else { (c as f32 / denom) * e })
            .collect();
        (counts, freq)
    }

    /// The row denominator and the gate.
    fn denominator(&self, v: &View, case: &SeqwiseCase, t: usize, backward: bool) -> (f32, bool) {
        let e_n = case.e;
        let l1 =
            matches!(case.objective, Objective::ProvidedMap { .. }) || (backward && self.has(Bug::UnbiasedL1Backward));
        if !l1 {
            let row: Vec<f32> = (0..e_n).map(|e| v.s(t, e)).collect();
            return (self.profile.row.reduce(&row) + EPS2, false);
        }
        let abs: Vec<f32> = (0..e_n).map(|e| v.s(t, e).abs()).collect();
        let n = self.profile.row.reduce(&abs);
        let d = if n.is_nan() || n >= EPS { n } else { EPS };
        let strict = (case.clamp_tie == ClampTie::Strict) != self.has(Bug::GateWrongSide);
        (d, if strict { n > EPS } else { n >= EPS })
    }

    fn run_forward(&self, case: &SeqwiseCase) -> SeqwiseForward<f32> {
        let v = self.view(case);
        let (counts, freq) = self.frequencies(&v, case);
        let reads = |t: usize| !case.is_padding(t) || self.has(Bug::PaddingRead);
        let d: Vec<f32> =
            (0..case.t).map(|t| if reads(t) { self.denominator(&v, case, t, false).0 } else { 0.0 }).collect();
        let p_sum: Vec<f32> = (0..case.e)
            .map(|e| {
                let column: Vec<f32> = (0..case.t).map(|t| if reads(t) { v.s(t, e) / d[t] } else { 0.0 }).collect();
                self.profile.tokens.reduce(&column)
            })
            .collect();
        let terms: Vec<f32> = freq.iter().zip(&p_sum).map(|(f, p)| f * p).collect();
        let raw = self.profile.raw.reduce(&terms);
        SeqwiseForward { raw, counts, freq }
    }

    fn run_backward(&self, case: &SeqwiseCase) -> SeqwiseBackward<f32> {
        let v = self.view(case);
        let (_, freq) = self.frequencies(&v, case);
        let a: Vec<f32> = freq.iter().map(|f| case.g * f).collect();
        let e_n = case.e;
        let mut grad = vec![0.0f32; case.t * e_n];
        let l1 = matches!(case.objective, Objective::ProvidedMap { .. }) || self.has(Bug::UnbiasedL1Backward);
        for t in 0..case.t {
            if case.is_padding(t) {
                continue;
            }
            let (d, gate) = self.denominator(&v, case, t, true);
            let x = |e: usize| (v.s(t, e) / d) / d;
            let terms: Vec<f32> = (0..e_n).map(|e| -(a[e] * x(e))).collect();
            let q = if self.has(Bug::FmaQuotient) {
                // What --fmad=true makes of `acc + -(a * x)` in a serial loop.
                (0..e_n).fold(0.0f32, |acc, e| (-a[e]).mul_add(x(e), acc))
            } else if self.has(Bug::WrongOrder) {
                let other = if self.profile.q == ReductionOrder::Serial {
                    ReductionOrder::strided(GPU_LANES, ReductionOrder::Serial, ReductionOrder::Butterfly)
                } else {
                    ReductionOrder::Serial
                };
                other.reduce(&terms)
            } else {
                self.profile.q.reduce(&terms)
            };
            for k in 0..e_n {
                let s = v.s(t, k);
                grad[t * e_n + k] = if l1 {
                    let r = if gate { q } else { 0.0 };
                    a[k] / d + oracles::profile_oracle::seqwise_loss::sgn(s) * r
                } else {
                    a[k] / d + q
                };
            }
        }
        SeqwiseBackward { grad }
    }
}

impl Subject<SeqwiseLoss> for KernelModel {
    fn name(&self) -> String {
        match self.bug {
            None => format!("model:{}", self.profile.name),
            Some(b) => format!("bug:{}", b.name()),
        }
    }
    fn profile(&self) -> Option<SeqwiseProfile> {
        Some(self.profile.clone())
    }
    fn kind(&self) -> SubjectKind {
        SubjectKind::Model
    }
    fn forward(&self, case: &SeqwiseCase) -> Result<SeqwiseForward<f32>, SubjectError> {
        case.validate().map_err(invalid)?;
        Ok(self.run_forward(case))
    }
    fn backward(&self, case: &SeqwiseCase) -> Result<SeqwiseBackward<f32>, SubjectError> {
        case.validate().map_err(invalid)?;
        Ok(self.run_backward(case))
    }
}
