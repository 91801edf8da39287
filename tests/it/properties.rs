//! Tier A property suites on the CPU subjects (the profile oracle and the
//! kernel model of every shipped profile) of every op, through proptest:
//! every failure is shrunk by the op's value tree and reported with its case.
//!
//! `PROPTEST_CASES` sets the cases per suite (default 128 for the bitwise
//! properties, a quarter of that, at least 1, for the MPFR ones); 0 is
//! refused, as it would run nothing.

use bitparity::gen::GenConfig;
use bitparity::harness::{available, Harness, Metamorphic};
use bitparity::props::{applies, finite_differences, judge, Property, References};
use bitparity::shrink::CaseStrategy;
use bitparity::subject::SubjectKind;
use oracles::op::moe_combine::MoeCombine;
use oracles::op::router::Router;
use oracles::op::seqwise_loss::SeqwiseLoss;
use oracles::op::shared_expert::SharedExpert;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

fn cases(default: u32, divisor: u32) -> u32 {
    let n = match std::env::var("PROPTEST_CASES") {
        Err(_) => default,
        Ok(s) => s.trim().parse().unwrap_or_else(|_| panic!("PROPTEST_CASES={s:?} is not a number")),
    };
    assert!(n > 0, "PROPTEST_CASES=0 would run nothing");
    (n / divisor).max(1)
}

fn runner(cases: u32) -> TestRunner {
    TestRunner::new(Config { cases, failure_persistence: None, ..Config::default() })
}

/// Runs `property` on every CPU subject of `O` over generated adversarial
/// cases; at least one subject must be judged.
fn suite<O: Harness>(property: Property, n: u32) {
    let cfg = GenConfig { max_te: 1024, ..GenConfig::default() };
    let subjects: Vec<_> = available::<O>().subjects.into_iter().filter(|s| s.kind() != SubjectKind::Device).collect();
    let mut judged = 0;
    for s in subjects.iter().filter(|s| applies(property, s.as_ref()).is_ok()) {
        judged += 1;
        let result = runner(n).run(&CaseStrategy::<O>::new(cfg.clone()), |case| {
            match judge(property, s.as_ref(), &case, &mut References::default()).failure {
                None => Ok(()),
                Some(m) => Err(TestCaseError::fail(m)),
            }
        });
        if let Err(e) = result {
            panic!("{} {property} failed for {}: {e}", O::NAME, s.name());
        }
    }
    if judged == 0 && property == Property::Padding {
        // An op without a padding mask says why, and every subject's row is
        // then n/a with that reason (never counted as passed).
        let why = O::applies(Metamorphic::Padding).expect_err("padding judged nothing, yet the op claims it applies");
        assert!(subjects.iter().all(|s| applies(property, s.as_ref()) == Err(why.clone())), "{why}");
        return;
    }
    assert!(judged > 0, "{} {property}: no CPU subject to judge", O::NAME);
}

fn finite_difference_suite<O: Harness>(n: u32) {
    let cfg = GenConfig { max_te: 512, ..GenConfig::default() };
    let result = runner(n).run(&CaseStrategy::<O>::new(cfg), |case| match finite_differences::<O>(&case).failure {
        None => Ok(()),
        Some(m) => Err(TestCaseError::fail(m)),
    });
    if let Err(e) = result {
        panic!("{}: the analytic gradient disagrees with finite differences: {e}", O::NAME);
    }
}

macro_rules! suites {
    ($module:ident, $op:ty) => {
        mod $module {
            use super::*;
            #[test]
            fn conformance() {
                suite::<$op>(Property::Conformance, cases(128, 1));
            }
            #[test]
            fn padding() {
                suite::<$op>(Property::Padding, cases(128, 1));
            }
            #[test]
            fn offset_stride() {
                suite::<$op>(Property::OffsetStride, cases(128, 1));
            }
            #[test]
            fn validation() {
                suite::<$op>(Property::Validation, cases(64, 1));
            }
            #[test]
            fn accuracy() {
                suite::<$op>(Property::Accuracy, cases(128, 4));
            }
            #[test]
            fn gradient_bound() {
                suite::<$op>(Property::Gradient, cases(128, 4));
            }
            #[test]
            fn gradient_finite_differences() {
                finite_difference_suite::<$op>(cases(128, 4));
            }
        }
    };
}

suites!(seqwise_loss, SeqwiseLoss);
suites!(router, Router);
suites!(shared_expert, SharedExpert);
suites!(moe_combine, MoeCombine);
