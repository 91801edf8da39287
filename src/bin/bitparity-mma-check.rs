//! The check of the tensor core's MMA model on the GPU: the step that the
//! `mma16-h100` profile (docs/ops/shared_expert.md#profiles, docs/mma.md) runs,
//! built from the published model and confirmed on the H200 with the
//! framework's own generators.
//!
//! The generator's classes (`bitparity::gen::mma`) make cases of chained
//! `mma.sync.m16n8k16` bf16 steps; the GPU runs them (kernels/mma_check.cu)
//! and every output's bits are compared with the model
//! (`oracles::mma::H100_BF16`) and with each of its neighbours
//! (`oracles::mma::ALTERNATIVES`). The model is confirmed when it matches
//! every output and every neighbour is refuted (differs from the GPU on some
//! output): a confirmation by inputs that cannot tell the model from its
//! neighbours would confirm nothing. A mismatch of the model is shrunk on
//! the GPU to a minimal dot product (fewest nonzero terms, simplest values)
//! and printed with its inputs' bits.
//!
//! Usage: bitparity-mma-check [--cases N] [--seed S] [--max-report N]
//!        [--instruction mma|wgmma] [--cpu-only] [--json PATH]
//!
//! - `--instruction`: the steps the GPU runs: `mma` (default,
//!   `mma.sync.m16n8k16`) or `wgmma` (Hopper's `wgmma.mma_async.m64n8k16`,
//!   A from registers, B from shared memory; sm_90 only). The same cases,
//!   the same model.
//! - `--cases`: cases per class (default 500; 128 outputs each).
//! - `--seed`: the generator's seed (default 1).
//! - `--max-report`: mismatches printed and kept in the JSON (default 5; all
//!   are counted), each shrunk.
//! - `--cpu-only`: no GPU; how many outputs each neighbour differs from the
//!   model on (the inputs' power to tell them apart). Confirms nothing, and
//!   says so.
//! - `--json PATH`: a summary, written (atomically) in every case.
//!
//! Exit status: 0 when the model is confirmed (or, under --cpu-only, when
//! the inputs tell every neighbour from the model); 1 on a mismatch, a
//! neighbour not refuted, or a CUDA error during the run; 2 when the check
//! cannot run here (no driver, no GPU, no NVRTC, or a bad argument), with
//! the reason.

use bitparity::fsio::write_report;
use bitparity::gen::mma::{generate, Class, MmaCase};
use bitparity::subject::cuda::mma::{Instruction, MmaBatch, MmaCheckDevice, MAX_CASES};
use bitparity::subject::cuda::DeviceInfo;
use bitparity::subject::SubjectError;
use oracles::mma::{MmaModel, ALTERNATIVES, H100_BF16, M, N};
use proptest::test_runner::{RngAlgorithm, TestRng};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

const USAGE: &str = "usage: bitparity-mma-check [--cases N] [--seed S] [--max-report N] [--instruction mma|wgmma] \
                     [--cpu-only] [--json PATH]";
/// The most cases per class.
const MAX_CASES_PER_CLASS: usize = 100_000;
/// Cases generated, run and compared at a time (what one run holds: at
/// most 6 steps of about 4.6 KiB each a case, about 110 MiB).
const CHUNK: usize = 4096;

struct Args {
    cases: usize,
    seed: u64,
    max_report: usize,
    cpu_only: bool,
    json: Option<PathBuf>,
    instruction: Instruction,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args { cases: 500, seed: 1, max_report: 5, cpu_only: false, json: None, instruction: Instruction::Mma };
    let mut it = std::env::args().skip(1);
    let num = |flag: &str, v: Option<String>| -> Result<u64, String> {
        let v = v.ok_or_else(|| format!("{flag} needs a value"))?;
        v.replace('_', "").parse().map_err(|_| format!("{flag}: not a number: {v}"))
    };
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--cases" => {
                let v = num(&flag, it.next())?;
                a.cases = usize::try_from(v)
                    .ok()
                    .filter(|c| (1..=MAX_CASES_PER_CLASS).contains(c))
                    .ok_or_else(|| format!("--cases {v} is not in 1..={MAX_CASES_PER_CLASS}"))?;
            }
            "--seed" => a.seed = num(&flag, it.next())?,
            "--max-report" => a.max_report = num(&flag, it.next())?.min(1000) as usize,
            "--json" => a.json = Some(it.next().ok_or("--json needs a value")?.into()),
            "--cpu-only" => a.cpu_only = true,
            "--instruction" => {
                let v = it.next().ok_or("--instruction needs a value")?;
                a.instruction =
                    Instruction::by_name(&v).ok_or_else(|| format!("--instruction {v}: not mma or wgmma\n{USAGE}"))?;
            }
            "--help" | "-h" => return Err(USAGE.into()),
            other => return Err(format!("unknown argument {other}\n{USAGE}")),
        }
    }
    Ok(a)
}

/// One output whose GPU bits differ from the model's, shrunk.
#[derive(Clone, Serialize)]
struct Mismatch {
    class: &'static str,
    case: usize,
    output: (usize, usize),
    steps: usize,
    /// The shrunk dot product: its nonzero terms as (k, a bits, b bits).
    terms: Vec<(usize, String, String)>,
    c: String,
    gpu: String,
    model: String,
    /// The neighbours that give the GPU's bits on it.
    agreeing: Vec<&'static str>,
}

#[derive(Default, Clone, Serialize)]
struct ClassTally {
    cases: usize,
    outputs: u64,
    /// Outputs where the GPU (or, under --cpu-only, nothing) differs from the model.
    model_mismatches: u64,
    /// Per neighbour: outputs where it differs from the GPU (under
    /// --cpu-only: from the model).
    refutations: BTreeMap<&'static str, u64>,
}

#[derive(Serialize)]
struct Summary {
    tool: &'static str,
    /// "confirmed", "refuted" (a model mismatch), "weak" (a neighbour not
    /// refuted), "error", "unavailable", "cpu-only" (nothing run on a GPU).
    status: &'static str,
    reason: Option<String>,
    model: String,
    /// The PTX instruction the GPU ran.
    instruction: &'static str,
    device: Option<String>,
    seed: u64,
    cases_per_class: usize,
    classes: BTreeMap<&'static str, ClassTally>,
    mismatches: Vec<Mismatch>,
    seconds: f64,
}

fn show(bits: u32) -> String {
    format!("{bits:#010x} ({:e})", f32::from_bits(bits))
}

fn describe(m: &MmaModel) -> String {
    format!(
        "{}: {} fraction bits, {} product exponents, {:?} output",
        m.name,
        m.frac_bits,
        if m.raw_product_exponent { "raw" } else { "renormalised" },
        m.rounding
    )
}

fn write_json(path: &Option<PathBuf>, summary: &Summary) {
    if let Some(p) = path {
        let text = match serde_json::to_string_pretty(summary) {
            Ok(t) => t + "\n",
            Err(e) => return eprintln!("bitparity-mma-check: encoding the summary: {e}"),
        };
        if let Err(e) = write_report(p, text.as_bytes()) {
            eprintln!("bitparity-mma-check: {e}");
        }
    }
}

/// The generator of a class's cases for a seed.
fn class_rng(class: Class, seed: u64) -> TestRng {
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    key[8] = class as u8;
    TestRng::from_seed(RngAlgorithm::ChaCha, &key)
}

/// A mismatching output as found: where, and its dot product.
struct Found {
    class: Class,
    case: usize,
    output: (usize, usize),
    steps: usize,
    a: Vec<f32>,
    b: Vec<f32>,
    c: f32,
}

/// The GPU's result bits for each case (cases of any number of steps:
/// batched by steps, at most MAX_CASES a launch).
fn run_gpu(dev: &MmaCheckDevice, cases: &[MmaCase]) -> Result<Vec<Vec<u32>>, SubjectError> {
    let mut out: Vec<Vec<u32>> = vec![Vec::new(); cases.len()];
    let mut by_steps: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (i, c) in cases.iter().enumerate() {
        by_steps.entry(c.steps).or_default().push(i);
    }
    for (steps, idx) in by_steps {
        for chunk in idx.chunks(MAX_CASES) {
            let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
            for &i in chunk {
                a.extend(MmaCase::bf16_bits(&cases[i].a));
                b.extend(MmaCase::bf16_bits(&cases[i].b));
                c.extend_from_slice(&cases[i].c);
            }
            let d = dev.run(&MmaBatch { steps, a: &a, b: &b, c: &c })?;
            for (n, &i) in chunk.iter().enumerate() {
                out[i] = d[n * M * N..(n + 1) * M * N].to_vec();
            }
        }
    }
    Ok(out)
}

/// A case holding one dot product at output (0, 0), zeros elsewhere.
fn single(a: &[f32], b: &[f32], c: f32, class: Class) -> MmaCase {
    let steps = a.len() / oracles::mma::K;
    let kk = a.len();
    let mut case = MmaCase { class, steps, a: vec![0.0; M * kk], b: vec![0.0; N * kk], c: vec![0.0; M * N] };
    case.a[..kk].copy_from_slice(a);
    case.b[..kk].copy_from_slice(b);
    case.c[0] = c;
    case
}

/// Simpler candidates for one dot product: a term removed (both factors
/// zero), c zero, a factor with its fraction cleared (a power of two), a
/// factor made positive.
fn candidates(a: &[f32], b: &[f32], c: f32) -> Vec<(Vec<f32>, Vec<f32>, f32)> {
    let mut v = Vec::new();
    for k in 0..a.len() {
        if a[k] != 0.0 || b[k] != 0.0 {
            let (mut x, mut y) = (a.to_vec(), b.to_vec());
            x[k] = 0.0;
            y[k] = 0.0;
            v.push((x, y, c));
        }
    }
    if c != 0.0 {
        v.push((a.to_vec(), b.to_vec(), 0.0));
    }
    let pow2 = |x: f32| {
        if x.is_finite() && x.to_bits() & 0x7f_ffff != 0 {
            Some(f32::from_bits(x.to_bits() & 0xff80_0000))
        } else {
            None
        }
    };
    for k in 0..a.len() {
        for (which, val) in [(0, a[k]), (1, b[k])] {
            for s in [pow2(val), (val < 0.0).then_some(-val)].into_iter().flatten() {
                let (mut x, mut y) = (a.to_vec(), b.to_vec());
                if which == 0 {
                    x[k] = s
                } else {
                    y[k] = s
                }
                v.push((x, y, c));
            }
        }
    }
    v
}

/// Shrinks a mismatching dot product on the GPU: each round evaluates every
/// simpler candidate in one launch and keeps the first that still mismatches.
/// `run` gives output (0, 0)'s bits of each case (the GPU's, in `main`).
fn shrink(
    mut run: impl FnMut(&[MmaCase]) -> Result<Vec<u32>, SubjectError>,
    a: &[f32],
    b: &[f32],
    c: f32,
    class: Class,
) -> Result<(Vec<f32>, Vec<f32>, f32, u32), SubjectError> {
    let (mut a, mut b, mut c) = (a.to_vec(), b.to_vec(), c);
    let mut gpu0 = |cases: &[MmaCase]| -> Result<Vec<u32>, SubjectError> {
        let got = run(cases)?;
        match got.len() == cases.len() {
            true => Ok(got),
            false => Err(SubjectError::Device(format!("{} results for {} cases", got.len(), cases.len()))),
        }
    };
    let mut got = gpu0(&[single(&a, &b, c, class)])?[0];
    for _round in 0..200 {
        let cands = candidates(&a, &b, c);
        let cases: Vec<MmaCase> = cands.iter().map(|(x, y, z)| single(x, y, *z, class)).collect();
        let results = gpu0(&cases)?;
        let found = cands.into_iter().zip(results).find(|((x, y, z), g)| H100_BF16.dot_chain(x, y, *z).to_bits() != *g);
        match found {
            Some(((x, y, z), g)) => {
                (a, b, c, got) = (x, y, z, g);
            }
            None => break,
        }
    }
    Ok((a, b, c, got))
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("bitparity-mma-check: {e}");
            std::process::exit(2);
        }
    };
    let t0 = Instant::now();
    let mut summary = Summary {
        tool: "bitparity-mma-check",
        status: "cpu-only",
        reason: None,
        model: describe(&H100_BF16),
        instruction: args.instruction.ptx(),
        device: None,
        seed: args.seed,
        cases_per_class: args.cases,
        classes: BTreeMap::new(),
        mismatches: Vec::new(),
        seconds: 0.0,
    };
    let dev = if args.cpu_only {
        None
    } else {
        match MmaCheckDevice::open(args.instruction) {
            Ok(d) => Some(d),
            Err(e) => {
                let (status, code, reason) = match e {
                    SubjectError::Unavailable(r) => ("unavailable", 2, r),
                    other => ("error", 1, other.to_string()),
                };
                eprintln!("bitparity-mma-check: {status}: {reason}");
                summary.status = status;
                summary.reason = Some(reason);
                write_json(&args.json, &summary);
                std::process::exit(code);
            }
        }
    };
    if let Some(d) = &dev {
        let i: &DeviceInfo = d.info();
        summary.device = Some(format!("{} (sm_{}{})", i.name, i.compute_capability.0, i.compute_capability.1));
        println!("device: {}", summary.device.as_deref().unwrap_or(""));
    }
    println!("instruction: {}", summary.instruction);
    println!("model: {}", summary.model);
    for alt in &ALTERNATIVES {
        println!("neighbour: {}", describe(alt));
    }
    let mut first: Vec<Found> = Vec::new();
    for class in Class::ALL {
        let mut rng = class_rng(class, args.seed);
        let mut tally = ClassTally { cases: args.cases, ..Default::default() };
        for alt in &ALTERNATIVES {
            tally.refutations.insert(alt.name, 0);
        }
        for start in (0..args.cases).step_by(CHUNK) {
            let cases: Vec<MmaCase> =
                (start..args.cases.min(start + CHUNK)).map(|_| generate(&mut rng, class)).collect();
            let gpu = match &dev {
                Some(d) => match run_gpu(d, &cases) {
                    Ok(g) => Some(g),
                    Err(e) => {
                        eprintln!("bitparity-mma-check: error: {class:?}: {e}");
                        summary.status = "error";
                        summary.reason = Some(e.to_string());
                        summary.seconds = t0.elapsed().as_secs_f64();
                        write_json(&args.json, &summary);
                        std::process::exit(1);
                    }
                },
                None => None,
            };
            for (n, case) in cases.iter().enumerate() {
                let model = case.expected(&H100_BF16);
                // Under --cpu-only the neighbours are compared with the model.
                let truth: Vec<u32> = match &gpu {
                    Some(g) => g[n].clone(),
                    None => model.iter().map(|x| x.to_bits()).collect(),
                };
                tally.outputs += (M * N) as u64;
                for (o, (m, t)) in model.iter().zip(&truth).enumerate() {
                    if m.to_bits() != *t {
                        tally.model_mismatches += 1;
                        if first.len() < args.max_report {
                            let (a, b, c) = case.dot(o / N, o % N);
                            let (a, b) = (a.to_vec(), b.to_vec());
                            first.push(Found {
                                class,
                                case: start + n,
                                output: (o / N, o % N),
                                steps: case.steps,
                                a,
                                b,
                                c,
                            });
                        }
                    }
                }
                for alt in &ALTERNATIVES {
                    let got = case.expected(alt);
                    let differ = got.iter().zip(&truth).filter(|(x, t)| x.to_bits() != **t).count() as u64;
                    *tally.refutations.get_mut(alt.name).expect("inserted above") += differ;
                }
            }
        }
        println!(
            "{:<15} {:>6} cases {:>9} outputs  model mismatches {:>6}  refuted: {}",
            class.name(),
            tally.cases,
            tally.outputs,
            tally.model_mismatches,
            tally.refutations.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ")
        );
        summary.classes.insert(class.name(), tally);
    }
    let total = |f: &dyn Fn(&ClassTally) -> u64| summary.classes.values().map(f).sum::<u64>();
    let mismatches = total(&|t| t.model_mismatches);
    let unrefuted: Vec<&'static str> =
        ALTERNATIVES.iter().map(|a| a.name).filter(|name| total(&|t| t.refutations[name]) == 0).collect();
    if let Some(d) = &dev {
        for f in first {
            let on_gpu = |cases: &[MmaCase]| Ok(run_gpu(d, cases)?.into_iter().map(|r| r[0]).collect());
            match shrink(on_gpu, &f.a, &f.b, f.c, f.class) {
                Ok((a, b, c, gpu)) => {
                    let agreeing = ALTERNATIVES
                        .iter()
                        .filter(|m| m.dot_chain(&a, &b, c).to_bits() == gpu)
                        .map(|m| m.name)
                        .collect();
                    let terms = (0..a.len())
                        .filter(|&k| a[k] != 0.0 || b[k] != 0.0)
                        .map(|k| (k, show(a[k].to_bits()), show(b[k].to_bits())))
                        .collect();
                    summary.mismatches.push(Mismatch {
                        class: f.class.name(),
                        case: f.case,
                        output: f.output,
                        steps: f.steps,
                        terms,
                        c: show(c.to_bits()),
                        gpu: show(gpu),
                        model: show(H100_BF16.dot_chain(&a, &b, c).to_bits()),
                        agreeing,
                    });
                }
                Err(e) => eprintln!("bitparity-mma-check: shrinking a mismatch: {e}"),
            }
        }
        for m in &summary.mismatches {
            println!(
                "mismatch ({} case {}, output {:?}, {} steps), shrunk: c = {}, terms (k, a, b) = {:?}: gpu {}, model {}; neighbours agreeing with the gpu: {:?}",
                m.class, m.case, m.output, m.steps, m.c, m.terms, m.gpu, m.model, m.agreeing
            );
        }
    }
    let (status, code, reason) = match (&dev, mismatches, unrefuted.is_empty()) {
        (None, _, true) => (
            "cpu-only",
            0,
            "no GPU run: the inputs tell every neighbour from the model; nothing is confirmed".to_string(),
        ),
        (None, _, false) => {
            ("cpu-only", 1, format!("the inputs do not tell these neighbours from the model: {unrefuted:?}"))
        }
        (Some(_), 0, true) => {
            ("confirmed", 0, "the GPU matched the model on every output and refuted every neighbour".to_string())
        }
        (Some(_), 0, false) => {
            ("weak", 1, format!("the GPU matched the model, but these neighbours were not refuted: {unrefuted:?}"))
        }
        (Some(_), n, _) => ("refuted", 1, format!("the GPU differs from the model on {n} outputs")),
    };
    summary.status = status;
    summary.reason = Some(reason.clone());
    summary.seconds = t0.elapsed().as_secs_f64();
    println!("{status}: {reason} ({:.1} s)", summary.seconds);
    write_json(&args.json, &summary);
    std::process::exit(code);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With a neighbour standing in for the GPU (24 fraction bits instead of
    /// 25), a wide mismatching dot product shrinks to one whose every term
    /// is needed, still mismatching: c = 1 and products at the 25th
    /// fraction bit, nothing else.
    #[test]
    fn a_mismatch_shrinks_to_the_terms_it_needs() {
        let frac24 = ALTERNATIVES.iter().find(|m| m.frac_bits == 24).copied().expect("a 24-bit neighbour");
        let fake = |cases: &[MmaCase]| -> Result<Vec<u32>, SubjectError> {
            Ok(cases.iter().map(|k| frac24.dot_chain(&k.a[..k.len()], &k.b[..k.len()], k.c[0]).to_bits()).collect())
        };
        let mut a = vec![0.0f32; 16];
        let mut b = vec![0.0f32; 16];
        let p25 = 2f32.powi(-25);
        // Noise the model and the neighbour agree on, and four products of
        // 2^-25 beside c = 1 that they do not (1 + 2^-23 against 1).
        for k in 0..16 {
            (a[k], b[k]) = if k % 4 == 1 { (p25, 1.0) } else { (0.75 * 2f32.powi(-(k as i32) - 2), -1.5) };
        }
        let (a, b, c, got) = shrink(fake, &a, &b, 1.0, Class::GridEdge).expect("no device error");
        assert_ne!(got, H100_BF16.dot_chain(&a, &b, c).to_bits(), "still a mismatch");
        let terms = a.iter().zip(&b).filter(|(x, y)| **x != 0.0 || **y != 0.0).count();
        assert!(terms <= 4, "{terms} terms left: {a:?} {b:?}");
        // Each term left is needed: without it the two agree.
        for k in (0..16).filter(|&k| a[k] != 0.0 || b[k] != 0.0) {
            let (mut x, mut y) = (a.clone(), b.clone());
            (x[k], y[k]) = (0.0, 0.0);
            assert_eq!(frac24.dot_chain(&x, &y, c).to_bits(), H100_BF16.dot_chain(&x, &y, c).to_bits(), "term {k}");
        }
    }

    #[test]
    fn a_short_answer_from_the_device_is_an_error() {
        let short = |_: &[MmaCase]| -> Result<Vec<u32>, SubjectError> { Ok(Vec::new()) };
        assert!(shrink(short, &[1.0; 16], &[1.0; 16], 0.0, Class::Uniform).is_err());
    }
}
