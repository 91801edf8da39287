//! The properties of `seqwise_loss`, for any subject.

use super::Property;
use crate::subject::{SeqwiseSubject, SubjectError};
use oracles::case::hexf;
use oracles::case::seqwise_loss::{Layout, Objective, SeqwiseBackward, SeqwiseCase, SeqwiseForward};
use oracles::mpfr::seqwise_loss::{check_gradient, gradient_entries, BackwardReference, ForwardReference};
use oracles::profile::seqwise_loss::SeqwiseProfile;
use oracles::profile_oracle::seqwise_loss as oracle;
use oracles::same_bits;
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Entries per case whose derivative is checked by finite differences.
pub const FD_ENTRIES: usize = 16;

/// One property's judgement of one subject on one case.
#[derive(Clone, Debug, Default)]
pub struct Judgement {
    /// Why it failed; `None` when it held.
    pub failure: Option<String>,
    /// Worst |error| / bound over the outputs (accuracy and gradient).
    pub ratio: Option<f64>,
    /// Rows where the exact value would have decided the clamp or gate otherwise.
    pub near_ties: usize,
    /// Outputs with no finite bound (overflow, NaN, a denominator's bound
    /// reaching zero): counted, not judged.
    pub unbounded: usize,
    /// Finite-difference entries skipped at a kink.
    pub kinks: usize,
}

impl Judgement {
    fn fail(msg: impl Into<String>) -> Self {
        Judgement { failure: Some(msg.into()), ..Default::default() }
    }
    pub fn passed(&self) -> bool {
        self.failure.is_none()
    }
}

/// Per case, the references of each profile, computed once and shared by
/// every subject that claims that profile.
#[derive(Default)]
pub struct References {
    fwd: HashMap<String, ForwardReference>,
    bwd: HashMap<String, BackwardReference>,
}

impl References {
    fn forward(&mut self, case: &SeqwiseCase, p: &SeqwiseProfile) -> Result<&ForwardReference, String> {
        if !self.fwd.contains_key(&p.name) {
            let r = ForwardReference::new(case, p).map_err(|e| format!("the oracles refused the case: {e}"))?;
            self.fwd.insert(p.name.clone(), r);
        }
        Ok(&self.fwd[&p.name])
    }
    fn backward(&mut self, case: &SeqwiseCase, p: &SeqwiseProfile) -> Result<&BackwardReference, String> {
        if !self.bwd.contains_key(&p.name) {
            let r = BackwardReference::new(case, p).map_err(|e| format!("the oracles refused the case: {e}"))?;
            self.bwd.insert(p.name.clone(), r);
        }
        Ok(&self.bwd[&p.name])
    }
}

fn bits(x: f32) -> String {
    format!("{:#010x} ({})", x.to_bits(), hexf::format(x))
}

/// A subject call that may not panic: a panic is reported as a failure.
fn call<T>(what: &str, f: impl FnOnce() -> Result<T, SubjectError>) -> Result<T, String> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(format!("{what}: {e}")),
        Err(p) => {
            let msg = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()));
            Err(format!("{what} panicked: {}", msg.unwrap_or_default()))
        }
    }
}

fn forward(s: &dyn SeqwiseSubject, case: &SeqwiseCase) -> Result<SeqwiseForward<f32>, String> {
    call("forward", || s.forward(case))
}
fn backward(s: &dyn SeqwiseSubject, case: &SeqwiseCase) -> Result<SeqwiseBackward<f32>, String> {
    call("backward", || s.backward(case))
}

/// The first bit difference between two forward results, if any.
pub fn diff_forward(expected: &SeqwiseForward<f32>, got: &SeqwiseForward<f32>) -> Option<String> {
    if expected.counts != got.counts {
        return Some(format!("counts: expected {:?}, got {:?}", expected.counts, got.counts));
    }
    if expected.freq.len() != got.freq.len() {
        return Some(format!("{} frequencies, expected {}", got.freq.len(), expected.freq.len()));
    }
    for (e, (a, b)) in expected.freq.iter().zip(&got.freq).enumerate() {
        if !same_bits(*a, *b) {
            return Some(format!("f[{e}]: expected {}, got {}", bits(*a), bits(*b)));
        }
    }
    (!same_bits(expected.raw, got.raw)).then(|| format!("raw: expected {}, got {}", bits(expected.raw), bits(got.raw)))
}

/// The first bit difference between two backward results (row-major T x E).
pub fn diff_backward(expected: &SeqwiseBackward<f32>, got: &SeqwiseBackward<f32>, e: usize) -> Option<String> {
    if expected.grad.len() != got.grad.len() {
        return Some(format!("{} gradient entries, expected {}", got.grad.len(), expected.grad.len()));
    }
    expected
        .grad
        .iter()
        .zip(&got.grad)
        .enumerate()
        .find(|(_, (a, b))| !same_bits(**a, **b))
        .map(|(i, (a, b))| format!("grad[{}][{}]: expected {}, got {}", i / e, i % e, bits(*a), bits(*b)))
}

/// Forward and backward of `s` on `a` and `b` must agree bitwise; the first
/// `a.t` rows of b's gradient are compared, and b's extra rows must be +0.0.
fn same_results(s: &dyn SeqwiseSubject, a: &SeqwiseCase, b: &SeqwiseCase, what: &str) -> Judgement {
    let run = || -> Result<Option<String>, String> {
        let (fa, fb) = (forward(s, a)?, forward(s, b)?);
        if let Some(d) = diff_forward(&fa, &fb) {
            return Ok(Some(format!("{what}: {d}")));
        }
        let (ba, bb) = (backward(s, a)?, backward(s, b)?);
        let n = a.t * a.e;
        if bb.grad.len() < n {
            return Ok(Some(format!("{what}: {} gradient entries, expected {}", bb.grad.len(), b.t * b.e)));
        }
        let head = SeqwiseBackward { grad: bb.grad[..n].to_vec() };
        if let Some(d) = diff_backward(&ba, &head, a.e) {
            return Ok(Some(format!("{what}: {d}")));
        }
        if let Some(i) = bb.grad[n..].iter().position(|g| g.to_bits() != 0) {
            return Ok(Some(format!(
                "{what}: appended padding gradient [{}] = {}, expected +0.0",
                a.t + i / a.e,
                bits(bb.grad[n + i])
            )));
        }
        Ok(None)
    };
    match run() {
        Ok(None) => Judgement::default(),
        Ok(Some(m)) | Err(m) => Judgement::fail(m),
    }
}

/// Judges `property` for subject `s` on `case` (a valid case).
pub fn judge(property: Property, s: &dyn SeqwiseSubject, case: &SeqwiseCase, refs: &mut References) -> Judgement {
    match property {
        Property::Conformance => conformance(s, case),
        Property::Accuracy => accuracy(s, case, refs),
        Property::Gradient => gradient(s, case, refs),
        Property::Validation => validation(s, case),
        Property::Padding => padding(s, case),
        Property::OffsetStride => offset_stride(s, case),
        Property::Determinism => same_results(s, case, case, "second run"),
    }
}

/// Bitwise equality with the profile oracle of the subject's profile.
pub fn conformance(s: &dyn SeqwiseSubject, case: &SeqwiseCase) -> Judgement {
    let p = s.profile();
    let run = || -> Result<Option<String>, String> {
        let refused =
            |e: oracles::case::seqwise_loss::SeqwiseError| format!("the profile oracle refused the case: {e}");
        let f = forward(s, case)?;
        if let Some(d) = diff_forward(&oracle::forward(case, &p).map_err(refused)?, &f) {
            return Ok(Some(format!("forward {d}")));
        }
        let b = backward(s, case)?;
        Ok(diff_backward(&oracle::backward(case, &p).map_err(refused)?, &b, case.e).map(|d| format!("backward {d}")))
    };
    match run() {
        Ok(None) => Judgement::default(),
        Ok(Some(m)) | Err(m) => Judgement::fail(m),
    }
}

fn accuracy(s: &dyn SeqwiseSubject, case: &SeqwiseCase, refs: &mut References) -> Judgement {
    let judged = forward(s, case).and_then(|f| Ok(refs.forward(case, &s.profile())?.judge(&f)));
    bounded("forward", judged)
}

fn gradient(s: &dyn SeqwiseSubject, case: &SeqwiseCase, refs: &mut References) -> Judgement {
    let judged = backward(s, case).and_then(|b| Ok(refs.backward(case, &s.profile())?.judge(&b, case.e)));
    bounded("backward", judged)
}

/// A judgement from an accuracy verdict (or the reason there is none).
fn bounded(what: &str, judged: Result<oracles::mpfr::seqwise_loss::Accuracy, String>) -> Judgement {
    match judged {
        Err(m) => Judgement::fail(m),
        Ok(acc) => Judgement {
            failure: acc.outside.first().map(|m| format!("{what} outside its bound: {m}")),
            ratio: Some(acc.worst_ratio),
            near_ties: acc.near_ties,
            unbounded: acc.unbounded,
            kinks: 0,
        },
    }
}

/// The analytic derivative (exact backward) against finite differences of
/// the exact forward: a property of the spec's formulas, judged once a case.
pub fn finite_differences(case: &SeqwiseCase) -> Judgement {
    let r = match check_gradient(case, &gradient_entries(case, FD_ENTRIES)) {
        Ok(r) => r,
        Err(e) => return Judgement::fail(format!("the MPFR oracle refused the case: {e}")),
    };
    Judgement { failure: r.failures.first().cloned(), kinks: r.kinks, unbounded: r.nonfinite, ..Default::default() }
}

/// Invalid variants of a valid case, each with what makes it invalid.
pub fn invalid_variants(case: &SeqwiseCase) -> Vec<(&'static str, SeqwiseCase)> {
    let mut v = Vec::new();
    let mut c = case.clone();
    c.t = 0;
    c.scores.clear();
    c.padding = None;
    c.objective = Objective::UnbiasedTopK { k: 1 };
    v.push(("T = 0", c));
    let mut c = case.clone();
    c.e = 0;
    c.scores.clear();
    c.objective = Objective::UnbiasedTopK { k: 1 };
    v.push(("E = 0", c));
    for k in [0, case.e + 1] {
        let mut c = case.clone();
        c.objective = Objective::UnbiasedTopK { k };
        v.push(("k outside 1..=E", c));
    }
    let mut c = case.clone();
    c.objective = Objective::ProvidedMap { map: vec![true; case.t * case.e + 1] };
    v.push(("map length", c));
    let mut c = case.clone();
    c.padding = Some(vec![false; case.t + 1]);
    v.push(("padding length", c));
    let mut c = case.clone();
    c.layout.offset = 4;
    v.push(("offset 4", c));
    let mut c = case.clone();
    c.layout.row_stride = case.e - 1;
    v.push(("row stride < E", c));
    let mut c = case.clone();
    c.scores.push(0.5);
    v.push(("scores length", c));
    v
}

fn validation(s: &dyn SeqwiseSubject, case: &SeqwiseCase) -> Judgement {
    for (what, bad) in invalid_variants(case) {
        if bad.validate().is_ok() {
            return Judgement::fail(format!("{what}: the spec's validation accepted it"));
        }
        let outcomes = [
            catch_unwind(AssertUnwindSafe(|| s.forward(&bad).map(|_| ()))),
            catch_unwind(AssertUnwindSafe(|| s.backward(&bad).map(|_| ()))),
        ];
        for (dir, o) in ["forward", "backward"].iter().zip(outcomes) {
            match o {
                Ok(Err(SubjectError::Invalid(_))) => {}
                Ok(Ok(())) => return Judgement::fail(format!("{dir} accepted an invalid input ({what})")),
                Ok(Err(e)) => {
                    return Judgement::fail(format!("{dir} on {what}: {e} (expected an invalid-input error)"))
                }
                Err(_) => return Judgement::fail(format!("{dir} panicked on an invalid input ({what})")),
            }
        }
    }
    Judgement::default()
}

const POISON: [f32; 4] = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -1e30];

/// Appended padding rows (poisoned, map entries all set), and the case's own
/// padding rows poisoned: no output bit may change.
fn padding(s: &dyn SeqwiseSubject, case: &SeqwiseCase) -> Judgement {
    let extra = 2;
    let mut c = case.clone();
    c.t += extra;
    c.scores.extend((0..extra * case.e).map(|i| POISON[i % POISON.len()]));
    let mut pad = case.padding.clone().unwrap_or_else(|| vec![false; case.t]);
    pad.extend([true; 2]);
    c.padding = Some(pad);
    if let Objective::ProvidedMap { map } = &mut c.objective {
        map.extend(vec![true; extra * case.e]);
    }
    let j = same_results(s, case, &c, "appended padding");
    if !j.passed() {
        return j;
    }
    if let Some(p) = &case.padding {
        let mut c = case.clone();
        for (t, _) in p.iter().enumerate().filter(|(_, &x)| x) {
            for (i, x) in c.scores[t * case.e..(t + 1) * case.e].iter_mut().enumerate() {
                *x = POISON[(t + i) % POISON.len()];
            }
        }
        return same_results(s, case, &c, "poisoned padding");
    }
    Judgement::default()
}

/// The same values at the next offset and a wider row stride.
fn offset_stride(s: &dyn SeqwiseSubject, case: &SeqwiseCase) -> Judgement {
    let mut c = case.clone();
    c.layout = Layout { offset: (case.layout.offset + 1) % 4, row_stride: case.layout.row_stride + 3 };
    same_results(s, case, &c, "relaid out")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::seqwise_loss::{generate, GenConfig};
    use crate::subject::planted::{Bug, KernelModel};
    use crate::subject::ProfileOracle;
    use proptest::test_runner::{RngAlgorithm, TestRng};

    #[test]
    fn correct_subjects_pass_the_cheap_properties() {
        let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
        let subjects: Vec<Box<dyn SeqwiseSubject>> = vec![
            Box::new(ProfileOracle(SeqwiseProfile::serial())),
            Box::new(KernelModel::new(SeqwiseProfile::serial())),
            Box::new(KernelModel::new(SeqwiseProfile::gpu())),
        ];
        let mut refs = References::default();
        for _ in 0..200 {
            let case = generate(&mut rng, &GenConfig::default());
            for s in &subjects {
                for p in [Property::Conformance, Property::Padding, Property::OffsetStride, Property::Validation] {
                    let j = judge(p, s.as_ref(), &case, &mut refs);
                    assert!(j.passed(), "{} {p}: {:?}\n{case:?}", s.name(), j.failure);
                }
            }
        }
    }

    #[test]
    fn planted_offset_bug_fails_conformance() {
        let mut case =
            SeqwiseCase::dense(2, 3, vec![0.5, 0.25, 0.125, 0.3, 0.2, 0.1], Objective::UnbiasedTopK { k: 1 });
        case.layout.offset = 1;
        let j = conformance(&KernelModel::planted(Bug::OffsetIgnored), &case);
        assert!(!j.passed());
    }
}
