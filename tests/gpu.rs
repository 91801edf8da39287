//! Tier B (SPEC section 6) on the CUDA subject of every op: conformance
//! (bitwise against the profile oracle of the kernels' profile), padding,
//! offset and stride, batch invariance, determinism and validation, over
//! generated adversarial cases, and conformance on hand-made edge shapes.
//!
//! A test binary with its own harness (`harness = false`), because libtest
//! cannot skip at run time: where an op's CUDA subject cannot run (no GPU, no
//! driver, no NVRTC, its kernels did not compile) each of its tests is
//! reported `ignored` with the reason, in libtest's format, and the summary
//! line counts them as ignored, never as passed. Arguments: a name filter,
//! `--list`, `--exact`; libtest's other flags are accepted and ignored.
//!
//! Knobs: `BITPARITY_GPU_CASES` (default 300) generated cases per property;
//! `BITPARITY_GPU_SEED` (default 0x5eed) the seed of the generated cases.

use bitparity::gen::GenConfig;
use bitparity::harness::{case_at, Harness};
use bitparity::knobs;
use bitparity::props::{applies, conformance, judge, Property, References};
use bitparity::subject::{SubjectError, SubjectRef};
use oracles::case::router::{FusedLoss, RouterCase};
use oracles::case::seqwise_loss::{ClampTie, Layout, Objective, SeqwiseCase, EPS};
use oracles::op::router::Router;
use oracles::op::seqwise_loss::SeqwiseLoss;

type Outcome = Result<(), String>;

/// A test: its name and its body on the op's CUDA subject.
struct Test {
    name: String,
    device: fn() -> Result<(), String>,
    run: Box<dyn Fn() -> Outcome>,
}

/// Judges `property` on the generated cases; fails with every failure.
fn generated<O: Harness>(cuda: &SubjectRef<O>, property: Property, salt: u64) -> Outcome {
    let n: u64 = knobs::get_or(knobs::GPU_CASES, 300)?;
    // A seed, decimal or 0x-hex like its documented default.
    let seed = match knobs::get::<String>(knobs::GPU_SEED)? {
        Some(s) => knobs::parse_seed(&s).map_err(|e| format!("{}: {e}", knobs::GPU_SEED))?,
        None => 0x5eed,
    };
    applies(property, cuda.as_ref())?;
    let cfg = GenConfig::default();
    let mut failures = Vec::new();
    let mut judged = 0;
    for i in 0..n {
        let case = case_at::<O>(seed ^ salt, i, &cfg);
        let j = judge(property, cuda.as_ref(), &case, &mut References::default());
        judged += !j.not_applicable as u64;
        if let Some(f) = j.failure {
            failures.push(format!("case {i} ({}): {f}", bitparity::runner::shape::<O>(&case)));
        }
    }
    println!("{} {property}: {judged} of {n} cases judged, {} failures", O::NAME, failures.len());
    if judged == 0 {
        return Err(format!("{property}: no case was judged"));
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!("{property} failed on the GPU:\n{}", failures.join("\n")))
    }
}

/// Conformance on hand-made edge shapes.
fn edges<O: Harness>(cuda: &SubjectRef<O>, cases: Vec<(String, O::Case)>) -> Outcome {
    let mut failures = Vec::new();
    for (name, case) in cases {
        if let Some(f) = conformance(cuda.as_ref(), &case).failure {
            failures.push(format!("{name}: {f}"));
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n"))
    }
}

/// Sigmoid-like values from a small LCG (no zeros, exact bits reproducible).
fn values(n: usize, seed: u64, scale: f32, shift: f32) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((x >> 40) as f32 + 1.0) / (1u64 << 24) as f32 * scale + shift
        })
        .collect()
}

fn seqwise_edges() -> Vec<(String, SeqwiseCase)> {
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
        let s = values(t * e, i as u64, 1.0, 0.0);
        let mut c = SeqwiseCase::dense(t, e, s.clone(), Objective::UnbiasedTopK { k });
        c.g = 0.75;
        out.push((format!("topk {t}x{e}x{k}"), c.clone()));
        let mut m = c.clone();
        m.objective = Objective::ProvidedMap { map: c.routing_map() };
        m.layout = Layout { offset: 3, row_stride: e + 5 };
        m.clamp_tie = ClampTie::Inclusive;
        if t > 2 {
            m.padding = Some((0..t).map(|r| r % 3 == 1).collect());
        }
        out.push((format!("map {t}x{e} offset 3 stride +5 padded"), m));
    }
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

fn router_case(t: usize, e: usize, g: usize, l: usize, k: usize, seed: u64) -> RouterCase {
    RouterCase {
        t,
        e,
        layout: Layout::dense(e),
        logits: values(t * e, seed, 8.0, -4.0),
        bias: values(e, seed + 100, 0.02, -0.01),
        groups: g,
        topk_groups: l,
        k,
        route_scale: 2.5,
        route_norm: true,
        padding: None,
        gw: values(t * k, seed + 200, 2.0, -1.0),
        loss: None,
    }
}

fn router_edges() -> Vec<(String, RouterCase)> {
    let mut out = Vec::new();
    let shapes: &[(usize, usize, usize, usize, usize)] = &[
        (1, 256, 8, 4, 8),
        (4096, 256, 8, 4, 8),
        (65536, 256, 8, 4, 8),
        (4097, 160, 8, 3, 6),
        (3000, 64, 1, 1, 6),
        (33, 2, 1, 1, 1),
        (17, 1024, 32, 32, 32),
        (5, 6, 3, 3, 6),
    ];
    for (i, &(t, e, g, l, k)) in shapes.iter().enumerate() {
        let c = router_case(t, e, g, l, k, i as u64);
        out.push((format!("{t}x{e} G={g} L={l} k={k}"), c.clone()));
        let mut f = c.clone();
        f.loss = Some(FusedLoss { clamp_tie: ClampTie::Strict, g: 0.75 });
        f.layout = Layout { offset: 3, row_stride: e + 5 };
        f.logits = c.logits.clone();
        if t > 2 {
            f.padding = Some((0..t).map(|r| r % 3 == 1).collect());
        }
        f.route_norm = i % 2 == 0;
        out.push((format!("{t}x{e} fused, offset 3, stride +5, padded"), f));
    }
    out
}

/// The tests of one op, in a fixed order.
fn suite<O: Harness>(edge: fn() -> Vec<(String, O::Case)>, invalid: fn(&SubjectRef<O>) -> Outcome) -> Vec<Test> {
    fn device<O: Harness>() -> Result<(), String> {
        O::device().map(|_| ())
    }
    let cuda = || O::device().expect("checked before running");
    let mut tests = vec![
        Test {
            name: format!("{}_conformance_on_edge_shapes", O::NAME),
            device: device::<O>,
            run: Box::new(move || edges::<O>(&cuda(), edge())),
        },
        Test {
            name: format!("{}_invalid_cases_are_refused", O::NAME),
            device: device::<O>,
            run: Box::new(move || invalid(&cuda())),
        },
    ];
    for (i, p) in [
        Property::Conformance,
        Property::Padding,
        Property::OffsetStride,
        Property::BatchInvariance,
        Property::Determinism,
        Property::Validation,
    ]
    .into_iter()
    .enumerate()
    {
        if O::applies_to_op(p) {
            tests.push(Test {
                name: format!("{}_{}_on_generated_cases", O::NAME, p.name().replace('-', "_")),
                device: device::<O>,
                run: Box::new(move || generated::<O>(&cuda(), p, i as u64 + 1)),
            });
        }
    }
    tests
}

fn seqwise_invalid(cuda: &SubjectRef<SeqwiseLoss>) -> Outcome {
    let mut c = SeqwiseCase::dense(2, 3, vec![0.5; 6], Objective::UnbiasedTopK { k: 4 });
    let mut wrong = Vec::new();
    if !matches!(cuda.forward(&c), Err(SubjectError::Invalid(_))) {
        wrong.push("k > E was not refused as invalid");
    }
    c.objective = Objective::UnbiasedTopK { k: 1 };
    c.layout.offset = 4;
    if !matches!(cuda.backward(&c), Err(SubjectError::Invalid(_))) {
        wrong.push("offset 4 was not refused as invalid");
    }
    let big = SeqwiseCase::dense(1, 1025, vec![0.5; 1025], Objective::UnbiasedTopK { k: 1 });
    if !matches!(cuda.forward(&big), Err(SubjectError::Unavailable(_))) {
        wrong.push("E = 1025 was not refused as unavailable");
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(wrong.join("; "))
    }
}

fn router_invalid(cuda: &SubjectRef<Router>) -> Outcome {
    let mut wrong = Vec::new();
    let mut c = router_case(2, 8, 4, 2, 3, 1);
    c.k = 5;
    if !matches!(cuda.forward(&c), Err(SubjectError::Invalid(_))) {
        wrong.push("k > L*E/G was not refused as invalid");
    }
    let mut c = router_case(2, 8, 4, 2, 3, 1);
    c.bias[0] = f32::NAN;
    if !matches!(cuda.backward(&c), Err(SubjectError::Invalid(_))) {
        wrong.push("a NaN bias was not refused as invalid");
    }
    let big = router_case(1, 2048, 64, 1, 8, 1);
    if !matches!(cuda.forward(&big), Err(SubjectError::Unavailable(_))) {
        wrong.push("E = 2048 was not refused as unavailable");
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(wrong.join("; "))
    }
}

/// Whether a property says anything about an op's outputs at all.
trait AppliesToOp {
    fn applies_to_op(p: Property) -> bool;
}

impl<O: Harness> AppliesToOp for O {
    fn applies_to_op(p: Property) -> bool {
        match p {
            Property::BatchInvariance => O::applies(bitparity::harness::Metamorphic::BatchInvariance).is_ok(),
            _ => true,
        }
    }
}

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
    let mut tests = suite::<SeqwiseLoss>(seqwise_edges, seqwise_invalid);
    tests.extend(suite::<Router>(router_edges, router_invalid));
    let total = tests.len();
    tests.retain(|t| {
        filters.is_empty() || filters.iter().any(|f| if exact { t.name == *f } else { t.name.contains(f.as_str()) })
    });
    if args.iter().any(|a| a == "--list") {
        for t in &tests {
            println!("{}: test", t.name);
        }
        return;
    }
    println!("\nrunning {} tests", tests.len());
    let (mut passed, mut failed, mut ignored) = (0, 0, 0);
    let mut failures = Vec::new();
    for t in &tests {
        if let Err(reason) = (t.device)() {
            println!("test {} ... ignored, no CUDA subject: {reason}", t.name);
            ignored += 1;
            continue;
        }
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (t.run)()))
            .unwrap_or_else(|_| Err("panicked".to_string()));
        match outcome {
            Ok(()) => {
                println!("test {} ... ok", t.name);
                passed += 1;
            }
            Err(why) => {
                println!("test {} ... FAILED", t.name);
                failures.push(format!("---- {} ----\n{why}", t.name));
                failed += 1;
            }
        }
    }
    if !failures.is_empty() {
        println!("\nfailures:\n\n{}", failures.join("\n\n"));
    }
    println!(
        "\ntest result: {}. {passed} passed; {failed} failed; {ignored} ignored; 0 measured; {} filtered out; finished in {:.2}s\n",
        if failed == 0 { "ok" } else { "FAILED" },
        total - tests.len(),
        start.elapsed().as_secs_f64()
    );
    if failed > 0 {
        std::process::exit(101);
    }
}
