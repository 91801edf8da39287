//! Tier A property suites on the CPU subjects (the profile oracle and the
//! kernel model of every shipped profile), through proptest: every failure is
//! shrunk by the generator's value tree and reported with its case.
//!
//! `PROPTEST_CASES` sets the cases per suite (default 128 for the bitwise
//! properties, a quarter of that for the MPFR ones).

use bitparity::gen::seqwise_loss::{GenConfig, SeqwiseStrategy};
use bitparity::props::seqwise_loss::{finite_differences, judge, References};
use bitparity::props::Property;
use bitparity::subject::{planted::KernelModel, ProfileOracle, SeqwiseSubject};
use oracles::profile::seqwise_loss::SeqwiseProfile;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

fn cpu_subjects() -> Vec<Box<dyn SeqwiseSubject>> {
    let mut v: Vec<Box<dyn SeqwiseSubject>> = Vec::new();
    for p in SeqwiseProfile::all() {
        v.push(Box::new(ProfileOracle(p.clone())));
        v.push(Box::new(KernelModel::new(p)));
    }
    v
}

fn runner(cases: u32) -> TestRunner {
    TestRunner::new(Config { cases, failure_persistence: None, ..Config::default() })
}

/// Runs `property` on every CPU subject over generated adversarial cases.
fn suite(property: Property, n: u32) {
    let cfg = GenConfig { max_te: 1024, ..GenConfig::default() };
    for s in cpu_subjects() {
        let result = runner(n).run(&SeqwiseStrategy(cfg.clone()), |case| {
            let j = judge(property, s.as_ref(), &case, &mut References::default());
            match j.failure {
                None => Ok(()),
                Some(m) => Err(TestCaseError::fail(m)),
            }
        });
        if let Err(e) = result {
            panic!("{property} failed for {}: {e}", s.name());
        }
    }
}

#[test]
fn conformance() {
    suite(Property::Conformance, cases(128));
}

#[test]
fn padding() {
    suite(Property::Padding, cases(128));
}

#[test]
fn offset_stride() {
    suite(Property::OffsetStride, cases(128));
}

#[test]
fn validation() {
    suite(Property::Validation, cases(64));
}

#[test]
fn accuracy() {
    suite(Property::Accuracy, cases(128) / 4);
}

#[test]
fn gradient_bound() {
    suite(Property::Gradient, cases(128) / 4);
}

#[test]
fn gradient_finite_differences() {
    let cfg = GenConfig { max_te: 512, ..GenConfig::default() };
    let result = runner(cases(128) / 4).run(&SeqwiseStrategy(cfg), |case| match finite_differences(&case).failure {
        None => Ok(()),
        Some(m) => Err(TestCaseError::fail(m)),
    });
    if let Err(e) = result {
        panic!("the analytic gradient disagrees with finite differences: {e}");
    }
}
