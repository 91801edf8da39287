//! The library face (`bitparity::testing`): a correct subject passes, a
//! subject with one wrong bit fails with its shrunk case in the report.

use bitparity::subject::{Subject, SubjectError, SubjectKind, SubjectRef};
use bitparity::testing::{check, Settings};
use oracles::case::seqwise_loss::{SeqwiseBackward, SeqwiseCase, SeqwiseForward};
use oracles::op::seqwise_loss::SeqwiseLoss;
use oracles::profile::seqwise_loss::SeqwiseProfile;
use std::sync::Arc;

/// The profile oracle behind a device-like face, optionally with raw's
/// lowest bit flipped.
struct Kernel(bool);

impl Subject<SeqwiseLoss> for Kernel {
    fn name(&self) -> String {
        format!("kernel-{}", self.0)
    }
    fn profile(&self) -> Option<SeqwiseProfile> {
        Some(SeqwiseProfile::serial())
    }
    fn kind(&self) -> SubjectKind {
        SubjectKind::Device
    }
    fn forward(&self, case: &SeqwiseCase) -> Result<SeqwiseForward<f32>, SubjectError> {
        case.validate().map_err(|e| SubjectError::Invalid(e.to_string()))?;
        let mut f = oracles::op::forward::<SeqwiseLoss>(case, &SeqwiseProfile::serial())
            .map_err(|e| SubjectError::Invalid(e.to_string()))?;
        if self.0 && f.raw.is_finite() && f.raw != 0.0 {
            f.raw = f32::from_bits(f.raw.to_bits() ^ 1);
        }
        Ok(f)
    }
    fn backward(&self, case: &SeqwiseCase) -> Result<SeqwiseBackward<f32>, SubjectError> {
        case.validate().map_err(|e| SubjectError::Invalid(e.to_string()))?;
        oracles::op::backward::<SeqwiseLoss>(case, &SeqwiseProfile::serial())
            .map_err(|e| SubjectError::Invalid(e.to_string()))
    }
}

fn settings() -> Settings {
    // The cheap bitwise properties: the MPFR ones would judge the oracle again.
    use bitparity::props::Property::*;
    Settings { cases: 60, properties: vec![Conformance, Padding, Determinism, Validation], ..Settings::default() }
}

#[test]
fn a_correct_kernel_passes_and_a_wrong_bit_is_reported() {
    let good: SubjectRef<SeqwiseLoss> = Arc::new(Kernel(false));
    let s = check::<SeqwiseLoss>(good, &settings()).unwrap();
    assert!(s.judged() > 0);
    let bad: SubjectRef<SeqwiseLoss> = Arc::new(Kernel(true));
    let report = check::<SeqwiseLoss>(bad, &settings()).unwrap_err();
    assert!(report.contains("conformance") && report.contains("forward raw: expected"), "{report}");
    assert!(report.contains("reproduce: bitparity check --op seqwise_loss"), "{report}");
}
