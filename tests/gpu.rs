//! Tier B (docs/ops/README.md#properties) on the CUDA subject of every op:
//! conformance (bitwise against the profile oracle of the kernels' profile),
//! padding, offset and stride, batch invariance, determinism and validation,
//! over generated adversarial cases, and conformance on hand-made edge shapes.
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
use oracles::case::seqwise_loss::{Layout, Objective, SeqwiseCase};
use oracles::op::router::Router;
use oracles::op::seqwise_loss::SeqwiseLoss;
use oracles::op::shared_expert::SharedExpert;
use oracles::vocab::{ClampTie, EPS};

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
        // Groups of 32 with k <= 2L take the forward's group-size-32 path,
        // whose per-warp scratch is 128 words: E = 32 had only 2E = 64 of
        // them, and warp 7 wrote past the block's shared memory (an illegal
        // address found by `check --subject cuda`, case 4657 of seed
        // 1796056563680363038: T=118 E=32 G=1 L=1 k=1).
        (118, 32, 1, 1, 1),
        (64, 32, 1, 1, 2),
        (129, 64, 2, 1, 2),
        (300, 96, 3, 2, 4),
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

fn se_invalid(_: &SubjectRef<SharedExpert>) -> Outcome {
    se::invalid_cases_are_refused()
}

/// Whether a property says anything about an op's outputs at all.
trait AppliesToOp {
    fn applies_to_op(p: Property) -> bool;
}

impl<O: Harness> AppliesToOp for O {
    fn applies_to_op(p: Property) -> bool {
        match p {
            Property::BatchInvariance => O::applies(bitparity::harness::Metamorphic::BatchInvariance).is_ok(),
            // shared_expert has no padding input: n/a, not a test.
            Property::Padding => O::applies(bitparity::harness::Metamorphic::Padding).is_ok(),
            _ => true,
        }
    }
}

// ---------------------------------------------------------------------------
// shared_expert (docs/ops/shared_expert.md): the CUDA subject's kernels,
// profile `serial`, against the profile oracle, bitwise; batch invariance,
// determinism and offset/stride invariance on the kernels themselves. The
// generic suite (`suite::<SharedExpert>`) runs the harness's generated cases
// and these edge cases; the tests below add value classes at wider shapes (with
// counts of what they reached) and the reference shapes.

mod se {
    use super::Outcome;
    use bitparity::knobs;
    use bitparity::subject::cuda::shared_expert::{probe, CudaSharedExpert, Variant};
    use bitparity::subject::{Subject, SubjectError};
    use oracles::case::shared_expert::SharedExpertCase;
    use oracles::case::Layout;
    use oracles::op::{self, shared_expert::SharedExpert};
    use oracles::profile::shared_expert::SharedExpertProfile;

    pub fn device() -> Result<(), String> {
        probe(Variant::Strict).map(|_| ())
    }

    pub fn device_wgmma() -> Result<(), String> {
        probe(Variant::Wgmma).map(|_| ())
    }

    fn cuda() -> CudaSharedExpert {
        probe(Variant::Strict).expect("checked before running")
    }

    /// SplitMix64: the cases' values, reproducible from a seed.
    pub struct Rng(u64);

    impl Rng {
        pub fn new(seed: u64) -> Self {
            Rng(seed)
        }
        pub fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
        pub fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
        /// Uniform in [-1, 1).
        pub fn unit(&mut self) -> f32 {
            (self.next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        }
    }

    /// x as a bf16 (its upper half: truncation, which is enough to draw
    /// values).
    fn bf16(x: f32) -> f32 {
        f32::from_bits(x.to_bits() & 0xffff_0000)
    }

    /// The value classes of docs/ops/README.md#adversarial-cases that matter here.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Class {
        /// Signed values of a trained model's scale.
        Plain,
        /// Small integers: short sums, so bf16 roundings hit exact ties.
        Ties,
        /// Tiny activations and weights: subnormal and underflowing
        /// products (a bf16 x bf16 product below 2^-126 is not exact).
        Tiny,
        /// Plain, with NaN, +-inf, +-0 and subnormals sprinkled anywhere.
        Specials,
        /// Large activations: saturated sigmoid (g of +-hundreds), h and y
        /// overflowing to inf.
        Huge,
    }

    pub const CLASSES: [Class; 5] = [Class::Plain, Class::Ties, Class::Tiny, Class::Specials, Class::Huge];

    fn value(rng: &mut Rng, class: Class, scale: f32) -> f32 {
        let v = match class {
            Class::Plain => rng.unit() * scale,
            Class::Ties => (rng.below(9) as f32 - 4.0) * if rng.below(4) == 0 { 0.5 } else { 1.0 },
            Class::Tiny => {
                let e = -(60 + rng.below(20) as i32);
                let tiny = rng.unit() * 2f32.powi(e);
                if rng.below(3) == 0 {
                    rng.unit() * scale
                } else {
                    tiny
                }
            }
            Class::Specials => match rng.below(64) {
                0 => f32::NAN,
                1 => f32::INFINITY,
                2 => f32::NEG_INFINITY,
                3 => 0.0,
                4 => -0.0,
                5 => f32::from_bits(0x0001_0000 * (1 + rng.below(127) as u32)),
                _ => rng.unit() * scale,
            },
            Class::Huge => rng.unit() * scale * 2f32.powi(rng.below(100) as i32),
        };
        bf16(v)
    }

    /// A case of shape t x h x f, layout (offset, stride - h), values of
    /// `class`.
    pub fn case(t: usize, h: usize, f: usize, offset: usize, gap: usize, class: Class, seed: u64) -> SharedExpertCase {
        let mut rng = Rng::new(seed);
        let ws = 2.0 / (h as f32).sqrt();
        let w2s = 2.0 / (f as f32).sqrt();
        let mut fill = |n: usize, scale: f32| (0..n).map(|_| value(&mut rng, class, scale)).collect::<Vec<f32>>();
        let x = fill(t * h, 2.0);
        let w1 = fill(2 * f * h, ws);
        let w2 = fill(h * f, w2s);
        let dy = fill(t * h, 1.0);
        SharedExpertCase { t, h, f, layout: Layout { offset, row_stride: h + gap }, x, w1, w2, dy }
    }

    /// Bitwise equality, any NaN matching any NaN; the first differences.
    fn diff(what: &str, got: &[f32], want: &[f32], h: usize) -> Option<String> {
        if got.len() != want.len() {
            return Some(format!("{what}: {} values, expected {}", got.len(), want.len()));
        }
        let bad: Vec<usize> = (0..got.len())
            .filter(|&i| !(got[i].to_bits() == want[i].to_bits() || (got[i].is_nan() && want[i].is_nan())))
            .collect();
        if bad.is_empty() {
            return None;
        }
        let first: Vec<String> = bad
            .iter()
            .take(4)
            .map(|&i| {
                format!(
                    "[{}, {}] {:e} ({:#010x}) != {:e} ({:#010x})",
                    i / h,
                    i % h,
                    got[i],
                    got[i].to_bits(),
                    want[i],
                    want[i].to_bits()
                )
            })
            .collect();
        Some(format!("{what}: {} of {} differ: {}", bad.len(), got.len(), first.join("; ")))
    }

    /// The profile oracle of the kernels' profile: y and dX.
    fn reference(c: &SharedExpertCase) -> Result<(Vec<f32>, Vec<f32>), String> {
        let p = SharedExpertProfile::serial();
        let y = op::forward::<SharedExpert>(c, &p).map_err(|e| e.to_string())?.y;
        let dx = op::backward::<SharedExpert>(c, &p).map_err(|e| e.to_string())?.dx;
        Ok((y, dx))
    }

    /// The kernels' y and dX (through the subject) against the profile
    /// oracle's of the profile the subject claims.
    fn conform(cuda: &CudaSharedExpert, c: &SharedExpertCase) -> Result<(), String> {
        if cuda.profile() != Some(SharedExpertProfile::serial()) {
            return Err("the cuda subject does not claim the serial profile".into());
        }
        let (y_want, dx_want) = reference(c)?;
        let y = cuda.forward(c).map_err(|e| format!("forward: {e}"))?.y;
        let dx = cuda.backward(c).map_err(|e| format!("backward: {e}"))?.dx;
        let mut bad = Vec::new();
        bad.extend(diff("y", &y, &y_want, c.h));
        bad.extend(diff("dX", &dx, &dx_want, c.h));
        if bad.is_empty() {
            Ok(())
        } else {
            Err(bad.join("\n  "))
        }
    }

    pub fn edge_cases() -> Vec<(String, SharedExpertCase)> {
        let mut out = Vec::new();
        let shapes: &[(usize, usize, usize, usize, usize)] = &[
            (1, 1, 1, 0, 0),
            (1, 2, 1, 3, 1),
            (2, 3, 2, 1, 0),
            (3, 17, 5, 2, 3),
            (1, 4096, 2048, 0, 0),
            (3, 4096, 2048, 3, 5),
            (2, 7168, 2048, 1, 0),
            (129, 129, 65, 3, 5),
            (130, 257, 129, 2, 1),
            (128, 128, 64, 0, 0),
            (127, 16, 63, 1, 7),
            (5, 1000, 999, 3, 2),
            (257, 33, 17, 0, 4),
        ];
        for (i, &(t, h, f, off, gap)) in shapes.iter().enumerate() {
            for (k, class) in CLASSES.into_iter().enumerate() {
                if h * f > 1 << 20 && k > 1 && class != Class::Specials {
                    continue; // the reference shapes: plain, ties and specials
                }
                let c = case(t, h, f, off, gap, class, (i * 16 + k) as u64);
                out.push((format!("{t}x{h}x{f} offset {off} stride +{gap} {class:?}"), c));
            }
        }
        // Exact zeros of both signs: -0.0 sums must stay -0.0 (no padding
        // term is ever added to an accumulator).
        let mut z = case(3, 5, 4, 0, 0, Class::Plain, 99);
        for v in z.x.iter_mut() {
            *v = -0.0;
        }
        out.push(("x all -0.0".into(), z.clone()));
        for v in z.w1.iter_mut().step_by(2) {
            *v = -0.0;
        }
        for v in z.dy.iter_mut() {
            *v = -0.0;
        }
        out.push(("x, dy all -0.0, w1 half -0.0".into(), z));
        // g = -inf, +inf, NaN in single places.
        let mut s = case(4, 8, 3, 1, 2, Class::Plain, 7);
        s.x[0] = f32::INFINITY;
        s.x[9] = f32::NEG_INFINITY;
        s.w1[3] = f32::NAN;
        s.dy[20] = f32::INFINITY;
        out.push(("single inf/NaN".into(), s));
        out
    }

    /// A drawn shape: small and odd sizes, sizes around the tiles (16, 64,
    /// 128), offsets and strides.
    fn dim(rng: &mut Rng, max: usize) -> usize {
        const NEAR: [usize; 12] = [1, 2, 3, 15, 16, 17, 63, 64, 65, 127, 128, 129];
        match rng.below(3) {
            0 => NEAR[rng.below(NEAR.len())].min(max),
            _ => 1 + rng.below(max),
        }
    }

    pub fn generated_case(seed: u64, i: u64) -> (SharedExpertCase, Class) {
        let mut rng = Rng::new(seed ^ i.wrapping_mul(0x2545_f491_4f6c_dd1d));
        let class = CLASSES[rng.below(CLASSES.len())];
        let (t, h, f) = (dim(&mut rng, 200), dim(&mut rng, 300), dim(&mut rng, 160));
        let (off, gap) = (rng.below(4), if rng.below(2) == 0 { 0 } else { rng.below(9) });
        (case(t, h, f, off, gap, class, rng.next()), class)
    }

    /// How often the cases reached what the classes aim at (counted on the
    /// values, independently of the kernels): products of z that underflow
    /// (nonzero, below 2^-126: not exact in f32), dh sums exactly halfway
    /// between two bf16 (the RNE tie rule decides), NaN/inf inputs.
    #[derive(Debug, Default)]
    struct Met {
        underflowing_products: usize,
        dh_ties: usize,
        specials: usize,
    }

    impl Met {
        fn add(&mut self, c: &SharedExpertCase) {
            let (h, f) = (c.h, c.f);
            for t in 0..c.t {
                let x = c.x_row(t);
                for r in 0..2 * f {
                    self.underflowing_products += x
                        .iter()
                        .zip(c.w1_row(r))
                        .filter(|&(a, b)| {
                            let p = (*a as f64) * (*b as f64);
                            p != 0.0 && p.abs() < f32::MIN_POSITIVE as f64
                        })
                        .count();
                }
                let dy = c.dy_row(t);
                for j in 0..f {
                    let acc = (0..h).fold(0.0f32, |acc, i| acc + dy[i] * c.w2[i * f + j]);
                    self.dh_ties += (acc.is_finite() && acc.to_bits() & 0xffff == 0x8000) as usize;
                }
            }
            for v in [&c.x, &c.w1, &c.w2, &c.dy] {
                self.specials += v.iter().filter(|x| !x.is_finite()).count();
            }
        }
    }

    pub fn conformance_on_generated_cases() -> Outcome {
        let n: u64 = knobs::get_or(knobs::GPU_CASES, 300)?;
        let seed: u64 = knobs::get_or(knobs::GPU_SEED, 0x5eed)?;
        let cuda = cuda();
        let mut failures = Vec::new();
        let mut per_class = [0usize; CLASSES.len()];
        let mut met = Met::default();
        for i in 0..n {
            let (c, class) = generated_case(seed, i);
            per_class[CLASSES.iter().position(|&k| k == class).unwrap_or(0)] += 1;
            met.add(&c);
            if let Err(e) = conform(&cuda, &c) {
                failures.push(format!("case {i} ({}x{}x{} {:?} {class:?}): {e}", c.t, c.h, c.f, c.layout));
            }
        }
        let classes: Vec<String> = CLASSES.iter().zip(per_class).map(|(c, n)| format!("{c:?} {n}")).collect();
        println!(
            "shared_expert conformance: {n} generated cases ({}), {} failures; met: {} z products below 2^-126 \
             (nonzero, inexact in f32), {} exact bf16 ties in dh, {} NaN/inf inputs",
            classes.join(", "),
            failures.len(),
            met.underflowing_products,
            met.dh_ties,
            met.specials
        );
        if met.underflowing_products == 0 || met.dh_ties == 0 || met.specials == 0 {
            failures.push(format!("the generated cases missed a value class: {met:?}"));
        }
        if failures.is_empty() {
            Ok(())
        } else {
            Err(failures.join("\n"))
        }
    }

    fn rows(v: &[f32], h: usize, r: std::ops::Range<usize>) -> &[f32] {
        &v[r.start * h..r.end * h]
    }

    /// Row t of y and dX is the same whatever the batch: the full batch's
    /// rows against sub-batches (single rows, prefixes, windows), on the
    /// kernels alone, at a small and at the reference shape.
    pub fn batch_invariance() -> Outcome {
        let cuda = cuda();
        let mut failures = Vec::new();
        let mut judged = 0;
        for (t, h, f, class, ranges) in [
            (70usize, 200usize, 96usize, Class::Specials, vec![0..1, 1..2, 69..70, 0..2, 0..3, 3..8, 5..69, 64..70]),
            (300, 4096, 2048, Class::Plain, vec![0..1, 299..300, 0..2, 0..3, 1..130, 128..257, 2..300]),
            (129, 7168, 2048, Class::Tiny, vec![0..1, 128..129, 0..128, 5..6]),
        ] {
            let full = case(t, h, f, 1, 3, class, (t * h) as u64);
            let y = cuda.forward_y(&full).map_err(|e| e.to_string())?;
            let dx = cuda.backward_dx(&full).map_err(|e| e.to_string())?;
            for r in ranges {
                let sub = full.rows(r.clone());
                let ys = cuda.forward_y(&sub).map_err(|e| e.to_string())?;
                let dxs = cuda.backward_dx(&sub).map_err(|e| e.to_string())?;
                judged += 1;
                for (what, a, b) in [("y", &ys, &y), ("dX", &dxs, &dx)] {
                    if let Some(d) = diff(what, a, rows(b, h, r.clone()), h) {
                        failures.push(format!("{t}x{h}x{f} rows {r:?}: {d}"));
                    }
                }
            }
        }
        println!("shared_expert batch invariance: {judged} sub-batches, {} failures", failures.len());
        if failures.is_empty() {
            Ok(())
        } else {
            Err(failures.join("\n"))
        }
    }

    /// A window of the uploaded rows (`DeviceSharedExpertCase::window`,
    /// what `gpu_shared_expert --sweep-t` runs on) gives the bits of the
    /// same rows uploaded as a case of their own, at an offset and a row
    /// stride; `read_rows` gives those rows; a window or a row past the
    /// batch is refused.
    pub fn windows() -> Outcome {
        windows_of(Variant::Strict)
    }

    /// `cuda-wgmma` keeps z from the forward: a window's backward launched
    /// before its forward must compute z itself, never read the previous
    /// window's.
    pub fn windows_wgmma() -> Outcome {
        windows_of(Variant::Wgmma)
    }

    fn windows_of(variant: Variant) -> Outcome {
        let cuda = probe(variant).expect("checked before running");
        let e = |x: SubjectError| x.to_string();
        let c = case(9, 131, 67, 3, 5, Class::Plain, 11);
        let mut dc = cuda.upload(&c).map_err(e)?;
        let mut failures = Vec::new();
        for (i, (first, t)) in [(0usize, 9usize), (2, 3), (8, 1), (0, 1), (4, 5)].into_iter().enumerate() {
            let sub = c.rows(first..first + t);
            let (y, dx) = (cuda.forward_y(&sub).map_err(e)?, cuda.backward_dx(&sub).map_err(e)?);
            dc.window(first, t).map_err(e)?;
            if i % 2 == 0 {
                dc.launch_forward().map_err(e)?;
                dc.launch_backward().map_err(e)?;
            } else {
                dc.launch_backward().map_err(e)?;
                dc.launch_forward().map_err(e)?;
            }
            let rows: Vec<usize> = (0..t).rev().collect();
            let (yw, dxw) = dc.read_rows(&rows).map_err(e)?;
            let pick =
                |v: &[f32]| -> Vec<f32> { rows.iter().flat_map(|&r| v[r * 131..(r + 1) * 131].to_vec()).collect() };
            failures.extend(diff(&format!("y of window {first}+{t}"), &yw, &pick(&y), 131));
            failures.extend(diff(&format!("dX of window {first}+{t}"), &dxw, &pick(&dx), 131));
        }
        for (first, t) in [(0usize, 0usize), (5, 5), (9, 1), (usize::MAX, 2)] {
            if !matches!(dc.window(first, t), Err(SubjectError::Invalid(_))) {
                failures.push(format!("window({first}, {t}) of 9 rows was not refused"));
            }
        }
        dc.window(2, 3).map_err(e)?;
        if !matches!(dc.read_rows(&[3]), Err(SubjectError::Invalid(_))) {
            failures.push("row 3 of a window of 3 was not refused".into());
        }
        if failures.is_empty() {
            Ok(())
        } else {
            Err(failures.join("\n"))
        }
    }

    /// Two launches give the same bits; the same values at another offset
    /// and row stride give the same bits.
    pub fn determinism_and_layout() -> Outcome {
        let cuda = cuda();
        let mut failures = Vec::new();
        for (t, h, f) in [(300usize, 4096usize, 2048usize), (77, 131, 67)] {
            let c = case(t, h, f, 0, 0, Class::Plain, 3);
            let mut dc = cuda.upload(&c).map_err(|e| e.to_string())?;
            let mut outs = Vec::new();
            for _ in 0..2 {
                dc.launch_forward().map_err(|e| e.to_string())?;
                dc.launch_backward().map_err(|e| e.to_string())?;
                outs.push((
                    dc.read_forward().map_err(|e| e.to_string())?,
                    dc.read_backward().map_err(|e| e.to_string())?,
                ));
            }
            failures.extend(diff("y (second launch)", &outs[1].0, &outs[0].0, h));
            failures.extend(diff("dX (second launch)", &outs[1].1, &outs[0].1, h));
            for (off, gap) in [(1, 0), (3, 5), (2, 64)] {
                let mut moved = c.clone();
                moved.layout = Layout { offset: off, row_stride: h + gap };
                let y = cuda.forward_y(&moved).map_err(|e| e.to_string())?;
                let dx = cuda.backward_dx(&moved).map_err(|e| e.to_string())?;
                failures.extend(diff(&format!("y at offset {off} stride +{gap}"), &y, &outs[0].0, h));
                failures.extend(diff(&format!("dX at offset {off} stride +{gap}"), &dx, &outs[0].1, h));
            }
        }
        if failures.is_empty() {
            Ok(())
        } else {
            Err(failures.join("\n"))
        }
    }

    pub fn invalid_cases_are_refused() -> Outcome {
        let cuda = cuda();
        let mut wrong = Vec::new();
        let mut c = case(2, 3, 2, 0, 0, Class::Plain, 1);
        c.x[1] = 0.1;
        if !matches!(cuda.forward_y(&c), Err(SubjectError::Invalid(_))) {
            wrong.push("a non-bf16 x was not refused as invalid");
        }
        let mut c = case(2, 3, 2, 0, 0, Class::Plain, 1);
        c.layout.offset = 4;
        if !matches!(cuda.backward_dx(&c), Err(SubjectError::Invalid(_))) {
            wrong.push("offset 4 was not refused as invalid");
        }
        let mut c = case(2, 3, 2, 0, 0, Class::Plain, 1);
        c.w2.pop();
        if !matches!(cuda.forward_y(&c), Err(SubjectError::Invalid(_))) {
            wrong.push("a short w2 was not refused as invalid");
        }
        let t = 65_536 * 128;
        let big = SharedExpertCase {
            t,
            h: 1,
            f: 1,
            layout: Layout::dense(1),
            x: vec![1.0; t],
            w1: vec![1.0; 2],
            w2: vec![1.0],
            dy: vec![1.0; t],
        };
        if !matches!(cuda.forward_y(&big), Err(SubjectError::Unavailable(_))) {
            wrong.push("T = 2^23 (past the grid) was not refused as unavailable");
        }
        if wrong.is_empty() {
            Ok(())
        } else {
            Err(wrong.join("; "))
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
    tests.extend(suite::<SharedExpert>(se::edge_cases, se_invalid));
    for (name, run) in [
        ("shared_expert_conformance_on_value_classes", se::conformance_on_generated_cases as fn() -> Outcome),
        ("shared_expert_batch_invariance_at_reference_shapes", se::batch_invariance),
        ("shared_expert_determinism_and_offset_stride_at_reference_shapes", se::determinism_and_layout),
        ("shared_expert_windows_of_an_uploaded_case", se::windows),
    ] {
        tests.push(Test { name: name.into(), device: se::device, run: Box::new(run) });
    }
    tests.push(Test {
        name: "shared_expert_wgmma_windows_of_an_uploaded_case".into(),
        device: se::device_wgmma,
        run: Box::new(se::windows_wgmma),
    });
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
