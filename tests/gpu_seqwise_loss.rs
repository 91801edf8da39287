//! Tier B (SPEC section 6) on the CUDA subject: conformance (bitwise against
//! the profile oracle of warp32-chunk64), offset and stride invariance,
//! padding, determinism, over generated adversarial cases and hand-made edge
//! shapes.
//!
//! A test binary with its own harness (`harness = false`), because libtest
//! cannot skip at run time: without a GPU (or the driver, or NVRTC) every test
//! is reported `ignored` with the reason, in libtest's format, and the summary
//! line counts them as ignored, never as passed. With a GPU they run and
//! report ok or FAILED as usual. Arguments: a name filter, `--list`, `--exact`;
//! libtest's other flags (`--nocapture`, `--test-threads N`, ...) are accepted
//! and ignored.
//!
//! Knobs: `BITPARITY_GPU_CASES` (default 300) generated cases per property;
//! `BITPARITY_GPU_SEED` (default 0x5eed) the seed of the generated cases.

use bitparity::gen::seqwise_loss::{generate, GenConfig};
use bitparity::props::{conformance, judge, Property, References};
use bitparity::subject::cuda::{probe, CudaSeqwise};
use bitparity::subject::{Subject, SubjectError};
use oracles::case::seqwise_loss::{ClampTie, Layout, Objective, SeqwiseCase, EPS};
use oracles::op::seqwise_loss::SeqwiseLoss;
use proptest::test_runner::{RngAlgorithm, TestRng};

type Outcome = Result<(), String>;

fn knob(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

fn rng(salt: u64) -> TestRng {
    let mut seed = [0u8; 32];
    seed[..8].copy_from_slice(&knob("BITPARITY_GPU_SEED", 0x5eed).to_le_bytes());
    seed[8..16].copy_from_slice(&salt.to_le_bytes());
    TestRng::from_seed(RngAlgorithm::ChaCha, &seed)
}

/// Judges `property` on `n` generated cases; fails with every failure.
fn run_generated(cuda: &CudaSeqwise, test: &str, property: Property, salt: u64) -> Outcome {
    let n = knob("BITPARITY_GPU_CASES", 300);
    let mut rng = rng(salt);
    let cfg = GenConfig::default();
    let mut failures = Vec::new();
    for i in 0..n {
        let case = generate(&mut rng, &cfg);
        let j = judge::<SeqwiseLoss>(property, cuda, &case, &mut References::default());
        if let Some(f) = j.failure {
            failures.push(format!("case {i} (T={}, E={}): {f}", case.t, case.e));
        }
    }
    println!("{test}: {n} cases on {}, {} failures", cuda.info().name, failures.len());
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!("{property} failed on the GPU:\n{}", failures.join("\n")))
    }
}

fn conformance_on_generated_cases(cuda: &CudaSeqwise) -> Outcome {
    run_generated(cuda, "conformance_on_generated_cases", Property::Conformance, 1)
}

fn padding_on_generated_cases(cuda: &CudaSeqwise) -> Outcome {
    run_generated(cuda, "padding_on_generated_cases", Property::Padding, 2)
}

fn offset_stride_on_generated_cases(cuda: &CudaSeqwise) -> Outcome {
    run_generated(cuda, "offset_stride_on_generated_cases", Property::OffsetStride, 3)
}

fn determinism_on_generated_cases(cuda: &CudaSeqwise) -> Outcome {
    run_generated(cuda, "determinism_on_generated_cases", Property::Determinism, 4)
}

/// Sigmoid-like scores from a small LCG (no zeros, exact bits reproducible).
fn scores(n: usize, seed: u64) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((x >> 40) as f32 + 1.0) / (1u64 << 24) as f32
        })
        .collect()
}

fn edge_cases() -> Vec<(String, SeqwiseCase)> {
    let mut out = Vec::new();
    let shapes: &[(usize, usize, usize)] = &[
        (1, 1, 1),
        (1, 1024, 1024),
        (3, 1024, 17),
        (2, 1000, 999),
        (65, 33, 32),
        (130, 129, 8),
        (4096, 256, 8),
        (8193, 64, 6),
        (20_000, 7, 3),
        (64 * 300 + 1, 16, 2),
    ];
    for (i, &(t, e, k)) in shapes.iter().enumerate() {
        let s = scores(t * e, i as u64);
        let mut c = SeqwiseCase::dense(t, e, s.clone(), Objective::UnbiasedTopK { k });
        c.g = 0.75;
        out.push((format!("topk {t}x{e}x{k}"), c.clone()));
        let map = oracles::case::seqwise_loss::SeqwiseCase::dense(t, e, s, Objective::UnbiasedTopK { k }).routing_map();
        let mut m = c.clone();
        m.objective = Objective::ProvidedMap { map };
        m.layout = Layout { offset: 3, row_stride: e + 5 };
        m.clamp_tie = ClampTie::Inclusive;
        if t > 2 {
            m.padding = Some((0..t).map(|r| r % 3 == 1).collect());
        }
        out.push((format!("map {t}x{e} offset 3 stride +5 padded"), m));
    }
    // All equal rows (every top-k decided by index), and rows at the clamp tie.
    let mut eq = SeqwiseCase::dense(70, 40, vec![0.5; 70 * 40], Objective::UnbiasedTopK { k: 7 });
    eq.layout = Layout { offset: 1, row_stride: 41 };
    out.push(("all-equal topk".into(), eq));
    let e = 5;
    let mut tie = vec![0.0f32; 3 * e];
    tie[0] = EPS / 2.0;
    tie[1] = -EPS / 2.0;
    tie[e] = EPS;
    tie[2 * e + 4] = f32::from_bits(EPS.to_bits() + 1);
    for clamp in [ClampTie::Strict, ClampTie::Inclusive] {
        let mut c = SeqwiseCase::dense(3, e, tie.clone(), Objective::ProvidedMap { map: vec![true; 3 * e] });
        c.clamp_tie = clamp;
        out.push((format!("clamp tie {clamp:?}"), c));
    }
    out
}

fn conformance_on_edge_shapes(cuda: &CudaSeqwise) -> Outcome {
    let mut failures = Vec::new();
    for (name, case) in edge_cases() {
        if let Some(f) = conformance::<SeqwiseLoss>(cuda, &case).failure {
            failures.push(format!("{name}: {f}"));
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n"))
    }
}

fn invalid_cases_are_refused(cuda: &CudaSeqwise) -> Outcome {
    let mut c = SeqwiseCase::dense(2, 3, vec![0.5; 6], Objective::UnbiasedTopK { k: 4 });
    let mut wrong = Vec::new();
    if !matches!(Subject::<SeqwiseLoss>::forward(cuda, &c), Err(SubjectError::Invalid(_))) {
        wrong.push("k > E was not refused as invalid");
    }
    c.objective = Objective::UnbiasedTopK { k: 1 };
    c.layout.offset = 4;
    if !matches!(Subject::<SeqwiseLoss>::backward(cuda, &c), Err(SubjectError::Invalid(_))) {
        wrong.push("offset 4 was not refused as invalid");
    }
    let big = SeqwiseCase::dense(1, 1025, vec![0.5; 1025], Objective::UnbiasedTopK { k: 1 });
    if !matches!(Subject::<SeqwiseLoss>::forward(cuda, &big), Err(SubjectError::Unavailable(_))) {
        wrong.push("E = 1025 was not refused as unavailable");
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(wrong.join("; "))
    }
}

type Test = (&'static str, fn(&CudaSeqwise) -> Outcome);

const TESTS: [Test; 6] = [
    ("conformance_on_edge_shapes", conformance_on_edge_shapes),
    ("conformance_on_generated_cases", conformance_on_generated_cases),
    ("determinism_on_generated_cases", determinism_on_generated_cases),
    ("invalid_cases_are_refused", invalid_cases_are_refused),
    ("offset_stride_on_generated_cases", offset_stride_on_generated_cases),
    ("padding_on_generated_cases", padding_on_generated_cases),
];

fn main() {
    let start = std::time::Instant::now();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let exact = args.iter().any(|a| a == "--exact");
    let mut filters = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--test-threads" | "--color" | "--format" | "--skip" | "--logfile" => {
                it.next();
            }
            s if s.starts_with('-') => {}
            s => filters.push(s.to_string()),
        }
    }
    let selected: Vec<&Test> = TESTS
        .iter()
        .filter(|(name, _)| {
            filters.is_empty() || filters.iter().any(|f| if exact { name == f } else { name.contains(f.as_str()) })
        })
        .collect();
    let filtered_out = TESTS.len() - selected.len();
    if args.iter().any(|a| a == "--list") {
        for (name, _) in &selected {
            println!("{name}: test");
        }
        return;
    }
    println!("\nrunning {} tests", selected.len());
    let cuda = probe();
    let (mut passed, mut failed, mut ignored) = (0, 0, 0);
    let mut failures = Vec::new();
    for (name, test) in &selected {
        match &cuda {
            Err(reason) => {
                println!("test {name} ... ignored, no CUDA subject: {reason}");
                ignored += 1;
            }
            Ok(c) => {
                let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| test(c)))
                    .unwrap_or_else(|_| Err("panicked".to_string()));
                match outcome {
                    Ok(()) => {
                        println!("test {name} ... ok");
                        passed += 1;
                    }
                    Err(why) => {
                        println!("test {name} ... FAILED");
                        failures.push(format!("---- {name} ----\n{why}"));
                        failed += 1;
                    }
                }
            }
        }
    }
    if !failures.is_empty() {
        println!("\nfailures:\n\n{}", failures.join("\n\n"));
    }
    println!(
        "\ntest result: {}. {passed} passed; {failed} failed; {ignored} ignored; 0 measured; {filtered_out} filtered out; finished in {:.2}s\n",
        if failed == 0 { "ok" } else { "FAILED" },
        start.elapsed().as_secs_f64()
    );
    if failed > 0 {
        std::process::exit(101);
    }
}
