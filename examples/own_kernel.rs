//! Putting your own kernel through bitparity's properties, as a kernel crate
//! would from its `cargo test` (`cargo run --release --example own_kernel`).
//!
//! A subject is anything that computes an op on one case. Here "your kernel"
//! is a stand-in: it calls bitparity's own kernel model of `seqwise_loss`
//! where your crate would call its CUDA or Triton kernel (upload the case's
//! storage, launch, read back). A second subject has a deliberate mistake (a
//! padding row's gradient written as -0.0 instead of +0.0) to show what a
//! failure looks like: the shrunk case, the first differing bits, and how to
//! reproduce it.

use bitparity::model::SeqwiseModel;
use bitparity::subject::{Subject, SubjectError, SubjectKind};
use bitparity::testing::{check, Settings};
use oracles::case::seqwise_loss::{SeqwiseBackward, SeqwiseCase, SeqwiseForward};
use oracles::op::seqwise_loss::SeqwiseLoss;
use oracles::profile::seqwise_loss::SeqwiseProfile;
use std::sync::Arc;

/// Your kernel, claiming the `serial` profile's bits.
struct MyKernel {
    /// Writes -0.0 into padding rows' gradient (the mistake, when set).
    negative_zero_padding: bool,
}

impl MyKernel {
    fn model() -> SeqwiseModel {
        SeqwiseModel::new(SeqwiseProfile::serial())
    }
}

impl Subject<SeqwiseLoss> for MyKernel {
    fn name(&self) -> String {
        if self.negative_zero_padding {
            "my-kernel-with-a-bug".into()
        } else {
            "my-kernel".into()
        }
    }
    fn profile(&self) -> Option<SeqwiseProfile> {
        Some(SeqwiseProfile::serial())
    }
    /// A kernel on a device: every property applies (determinism too).
    fn kind(&self) -> SubjectKind {
        SubjectKind::Device
    }
    fn forward(&self, case: &SeqwiseCase) -> Result<SeqwiseForward<f32>, SubjectError> {
        // Your crate: case.storage(gap) is the row-major buffer at the case's
        // offset and row stride; launch your forward on it.
        Self::model().forward(case).map_err(|e| SubjectError::Invalid(e.to_string()))
    }
    fn backward(&self, case: &SeqwiseCase) -> Result<SeqwiseBackward<f32>, SubjectError> {
        let mut b = Self::model().backward(case).map_err(|e| SubjectError::Invalid(e.to_string()))?;
        if self.negative_zero_padding {
            for t in (0..case.t).filter(|&t| case.is_padding(t)) {
                b.grad[t * case.e..(t + 1) * case.e].fill(-0.0);
            }
        }
        Ok(b)
    }
}

fn main() {
    let settings = Settings { cases: 200, ..Settings::default() };
    match check::<SeqwiseLoss>(Arc::new(MyKernel { negative_zero_padding: false }), &settings) {
        Ok(s) => println!("my-kernel: every property held ({} cases)", s.cases),
        Err(report) => println!("{report}"),
    }
    match check::<SeqwiseLoss>(Arc::new(MyKernel { negative_zero_padding: true }), &settings) {
        Ok(_) => println!("my-kernel-with-a-bug: passed (the mistake went unseen)"),
        Err(report) => println!("{report}"),
    }
}
