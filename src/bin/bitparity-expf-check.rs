//! The exhaustive check of the GPU's correctly rounded exponential
//! (docs/ops/README.md#the-correctly-rounded-exp: each transcendental's
//! implementation is itself checked, exhaustively over its f32 domain on the
//! GPU, against the CPU reference, which MPFR vouches for).
//!
//! For every f32 bit pattern in the range (all 2^32 by default), the GPU
//! evaluates `bp::exp_cr` (kernels/expf.cuh, through kernels/expf_check.cu)
//! in chunks; the CPU computes the reference `oracles::expf::exp_f32` (a
//! proven f64 fast path, MPFR where it cannot decide) for the same chunk on
//! every core, and the bits are compared (any NaN matches any NaN). With
//! `--verify-cpu`, the reference's answer is also compared with MPFR alone
//! (`exp_f32_mpfr`) on every input, so that the whole chain rests on MPFR.
//!
//! Usage: bitparity-expf-check [--start N] [--count N] [--chunk N]
//!        [--threads N] [--verify-cpu] [--cpu-only] [--max-report N]
//!        [--json PATH]
//!
//! - `--start`, `--count`: the first input's bits and the number of inputs
//!   (decimal or 0x hex; default the whole 2^32).
//! - `--chunk`: inputs per GPU launch (default 2^26; 256 MiB on each side).
//! - `--threads`: CPU threads (default every core).
//! - `--verify-cpu`: also check the CPU reference against MPFR alone (slow:
//!   1 to 2.5 us per input and core, about 7 minutes for 2^32 inputs on 16
//!   cores; docs/expf.md).
//! - `--cpu-only`: no GPU; time the CPU reference, and with `--verify-cpu`
//!   check it against MPFR (a check of the CPU side alone, said so in the
//!   output and the JSON).
//! - `--max-report`: mismatches listed in full (default 10; all are counted).
//! - `--json PATH`: a summary (written in every case, the unavailable one
//!   included).
//!
//! Exit status: 0 when every input matched; 1 on any mismatch or on a CUDA
//! error during the run; 2 when the check cannot run here (no driver, no
//! GPU, no NVRTC, or a bad argument), with the reason.

use bitparity::subject::cuda::expf::{ExpfCheckDevice, MAX_CHUNK};
use bitparity::subject::cuda::DeviceInfo;
use bitparity::subject::SubjectError;
use oracles::expf::{exp_decimal, exp_f32, exp_f32_mpfr};
use oracles::same_bits;
use rayon::prelude::*;
use serde::Serialize;
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

const FULL: u64 = 1 << 32;
/// Inputs per CPU work item inside a chunk.
const CPU_BLOCK: usize = 1 << 14;

struct Args {
    start: u32,
    count: u64,
    chunk: u32,
    threads: Option<usize>,
    verify_cpu: bool,
    cpu_only: bool,
    max_report: usize,
    json: Option<PathBuf>,
}

const USAGE: &str = "usage: bitparity-expf-check [--start N] [--count N] [--chunk N] [--threads N] \
                     [--verify-cpu] [--cpu-only] [--max-report N] [--json PATH]";

fn parse_u64(s: &str) -> Result<u64, String> {
    let parsed = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(&h.replace('_', ""), 16),
        None => s.replace('_', "").parse(),
    };
    parsed.map_err(|_| format!("not a number: {s}"))
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        start: 0,
        count: FULL,
        chunk: 1 << 26,
        threads: None,
        verify_cpu: false,
        cpu_only: false,
        max_report: 10,
        json: None,
    };
    let mut count = None;
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut val = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--start" => {
                let v = parse_u64(&val()?)?;
                a.start = u32::try_from(v).map_err(|_| format!("--start {v:#x} is past the last f32 (0xffffffff)"))?;
            }
            "--count" => count = Some(parse_u64(&val()?)?),
            "--chunk" => {
                let v = parse_u64(&val()?)?;
                a.chunk = u32::try_from(v)
                    .ok()
                    .filter(|&c| (1..=MAX_CHUNK).contains(&c))
                    .ok_or_else(|| format!("--chunk {v} is not in 1..={MAX_CHUNK}"))?;
            }
            "--threads" => a.threads = Some(parse_u64(&val()?)?.max(1) as usize),
            "--max-report" => a.max_report = parse_u64(&val()?)? as usize,
            "--json" => a.json = Some(val()?.into()),
            "--verify-cpu" => a.verify_cpu = true,
            "--cpu-only" => a.cpu_only = true,
            "--help" | "-h" => return Err(USAGE.into()),
            other => return Err(format!("unknown argument {other}\n{USAGE}")),
        }
    }
    let room = FULL - a.start as u64;
    a.count = count.unwrap_or(room);
    if a.count == 0 || a.count > room {
        return Err(format!("--count {} is not in 1..={room} (from --start {:#x})", a.count, a.start));
    }
    Ok(a)
}

/// One input whose two answers differ.
#[derive(Clone, Serialize)]
struct Mismatch {
    /// The input's bits and value.
    input: String,
    x: String,
    /// The side under test (the GPU, or the CPU fast path under --verify-cpu).
    got: String,
    /// The reference's bits (the CPU reference, or MPFR alone).
    want: String,
    /// e^x to 30 digits (MPFR, 128 bits).
    exact: String,
}

fn mismatch(bits: u32, got: u32, want: u32) -> Mismatch {
    let x = f32::from_bits(bits);
    let exact = exp_decimal(x, 30);
    let show = |b: u32| format!("{b:#010x} ({:e})", f32::from_bits(b));
    Mismatch { input: format!("{bits:#010x}"), x: format!("{x:e}"), got: show(got), want: show(want), exact }
}

/// The tally of one comparison.
#[derive(Default, Clone, Serialize)]
struct Tally {
    checked: u64,
    mismatches: u64,
    first: Vec<Mismatch>,
}

impl Tally {
    fn merge(mut self, other: Tally, keep: usize) -> Tally {
        self.checked += other.checked;
        self.mismatches += other.mismatches;
        self.first.extend(other.first);
        self.first.sort_by(|a, b| a.input.cmp(&b.input));
        self.first.truncate(keep);
        self
    }
}

#[derive(Serialize)]
struct Device {
    name: String,
    compute_capability: String,
    driver_cuda_version: i32,
    nvrtc_version: String,
    multiprocessors: i32,
}

impl From<&DeviceInfo> for Device {
    fn from(i: &DeviceInfo) -> Self {
        Device {
            name: i.name.clone(),
            compute_capability: format!("{}.{}", i.compute_capability.0, i.compute_capability.1),
            driver_cuda_version: i.driver_cuda_version,
            nvrtc_version: format!("{}.{}", i.nvrtc_version.0, i.nvrtc_version.1),
            multiprocessors: i.multiprocessors,
        }
    }
}

#[derive(Serialize)]
struct Summary {
    tool: &'static str,
    /// "passed", "failed" (a mismatch), "error" (a CUDA error during the
    /// run, or a kernel that does not compile), "unavailable" (cannot run
    /// here), "timing-only" (--cpu-only without --verify-cpu: nothing
    /// compared).
    status: &'static str,
    reason: Option<String>,
    /// What was compared: "gpu-vs-cpu", with "+cpu-vs-mpfr" under --verify-cpu;
    /// "cpu-only" (timing), "cpu-vs-mpfr" under --cpu-only --verify-cpu.
    mode: String,
    device: Option<Device>,
    start: String,
    count: u64,
    chunk: u32,
    threads: usize,
    /// The GPU against the CPU reference.
    gpu: Option<Tally>,
    /// The CPU reference against MPFR alone (--verify-cpu).
    cpu_vs_mpfr: Option<Tally>,
    seconds: f64,
    gpu_seconds: f64,
    cpu_seconds: f64,
    inputs_per_second: f64,
    /// Wall time of the CPU side times its threads, per input.
    cpu_ns_per_input_per_thread: f64,
    /// CPU time of the whole process (every thread), per input, where the
    /// platform tells it (Linux): the figure to extrapolate from on a busy
    /// machine.
    process_cpu_ns_per_input: Option<f64>,
}

/// CPU time of every thread of this process so far, in ns (Linux: the first
/// field of /proc/self/task/*/schedstat is the time the thread has run).
fn process_cpu_ns() -> Option<u64> {
    let mut total = 0u64;
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let stat = std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok()?;
        total += stat.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(total)
}

/// Compares one chunk: `gpu` holds the GPU's result bits for the inputs
/// start.. (None: no GPU). Returns (GPU vs CPU, CPU vs MPFR).
fn check_chunk(start: u32, n: usize, gpu: Option<&[u32]>, verify: bool, keep: usize) -> (Tally, Tally) {
    (0..n.div_ceil(CPU_BLOCK))
        .into_par_iter()
        .map(|b| {
            let (mut g, mut c) = (Tally::default(), Tally::default());
            for i in b * CPU_BLOCK..((b + 1) * CPU_BLOCK).min(n) {
                let bits = start + i as u32; // < 2^32: the range was checked
                let x = f32::from_bits(bits);
                let want = exp_f32(x);
                if let Some(gpu) = gpu {
                    g.checked += 1;
                    let got = f32::from_bits(gpu[i]);
                    if !same_bits(got, want) {
                        g.mismatches += 1;
                        if g.first.len() < keep {
                            g.first.push(mismatch(bits, got.to_bits(), want.to_bits()));
                        }
                    }
                }
                if verify {
                    c.checked += 1;
                    let exact = exp_f32_mpfr(x);
                    if !same_bits(want, exact) {
                        c.mismatches += 1;
                        if c.first.len() < keep {
                            c.first.push(mismatch(bits, want.to_bits(), exact.to_bits()));
                        }
                    }
                }
            }
            (g, c)
        })
        .reduce(|| (Tally::default(), Tally::default()), |a, b| (a.0.merge(b.0, keep), a.1.merge(b.1, keep)))
}

fn write_json(path: &Option<PathBuf>, summary: &Summary) {
    if let Some(p) = path {
        match serde_json::to_string_pretty(summary) {
            Ok(text) => {
                if let Err(e) = bitparity::fsio::write_report(p, (text + "\n").as_bytes()) {
                    eprintln!("bitparity-expf-check: {e}");
                }
            }
            Err(e) => eprintln!("bitparity-expf-check: encoding the summary: {e}"),
        }
    }
}

fn print_mismatches(what: &str, t: &Tally) {
    if t.mismatches == 0 {
        return;
    }
    println!("{what}: {} mismatches; the first {}:", t.mismatches, t.first.len());
    for m in &t.first {
        println!("  input {} (x = {}): got {}, want {}, e^x = {}", m.input, m.x, m.got, m.want, m.exact);
    }
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("bitparity-expf-check: {e}");
            std::process::exit(2);
        }
    };
    if let Some(n) = args.threads {
        if let Err(e) = rayon::ThreadPoolBuilder::new().num_threads(n).build_global() {
            eprintln!("bitparity-expf-check: {n} threads: {e}");
            std::process::exit(2);
        }
    }
    let threads = rayon::current_num_threads();
    let started = Instant::now();
    let mode = match (args.cpu_only, args.verify_cpu) {
        (false, false) => "gpu-vs-cpu",
        (false, true) => "gpu-vs-cpu+cpu-vs-mpfr",
        (true, false) => "cpu-only",
        (true, true) => "cpu-vs-mpfr",
    };
    let mut summary = Summary {
        tool: "bitparity-expf-check",
        status: "unavailable",
        reason: None,
        mode: mode.into(),
        device: None,
        start: format!("{:#010x}", args.start),
        count: args.count,
        chunk: args.chunk,
        threads,
        gpu: None,
        cpu_vs_mpfr: None,
        seconds: 0.0,
        gpu_seconds: 0.0,
        cpu_seconds: 0.0,
        inputs_per_second: 0.0,
        cpu_ns_per_input_per_thread: 0.0,
        process_cpu_ns_per_input: None,
    };
    let cpu_at_start = process_cpu_ns();
    let chunk = (args.chunk as u64).min(args.count) as u32;
    summary.chunk = chunk;
    let mut device = None;
    if !args.cpu_only {
        match ExpfCheckDevice::open(chunk) {
            Ok(d) => {
                let i = d.info();
                println!(
                    "GPU {} ({}; sm_{}{}, {} SMs, driver CUDA {}, NVRTC {}.{})",
                    i.name,
                    i.ordinal,
                    i.compute_capability.0,
                    i.compute_capability.1,
                    i.multiprocessors,
                    i.driver_cuda_version,
                    i.nvrtc_version.0,
                    i.nvrtc_version.1
                );
                summary.device = Some(Device::from(i));
                device = Some(d);
            }
            Err(e) => {
                // Unavailable: no driver, GPU or NVRTC (exit 2); anything
                // else (the kernel does not compile or load) is a failure.
                let (status, code, reason) = match e {
                    SubjectError::Unavailable(r) => ("unavailable", 2, r),
                    other => ("error", 1, other.to_string()),
                };
                println!("bitparity-expf-check: {status}: {reason}");
                summary.status = status;
                summary.reason = Some(reason);
                summary.seconds = started.elapsed().as_secs_f64();
                write_json(&args.json, &summary);
                std::process::exit(code);
            }
        }
    } else {
        println!("--cpu-only: no GPU; the CPU reference alone{}", if args.verify_cpu { ", against MPFR" } else { "" });
    }
    println!(
        "checking {} inputs from {:#010x} in chunks of {chunk}, {threads} CPU threads{}",
        args.count,
        args.start,
        if args.verify_cpu { ", CPU reference verified against MPFR" } else { "" }
    );
    let mut host = vec![0u32; if device.is_some() { chunk as usize } else { 0 }];
    let (mut gpu_tally, mut cpu_tally) = (Tally::default(), Tally::default());
    let chunks = args.count.div_ceil(chunk as u64);
    let end = args.start as u64 + args.count;
    for (index, s) in (args.start as u64..end).step_by(chunk as usize).enumerate() {
        let n = (end - s).min(chunk as u64) as usize;
        let s = s as u32; // < 2^32: s < end <= 2^32
        let t0 = Instant::now();
        if let Some(d) = device.as_mut() {
            if let Err(e) = d.run(s, &mut host[..n]) {
                println!("bitparity-expf-check: error on inputs {s:#010x}..: {e}");
                summary.status = "error";
                summary.reason = Some(e.to_string());
                summary.seconds = started.elapsed().as_secs_f64();
                summary.gpu = Some(gpu_tally);
                write_json(&args.json, &summary);
                std::process::exit(1);
            }
        }
        let t1 = Instant::now();
        let gpu = device.as_ref().map(|_| &host[..n]);
        let (g, c) = check_chunk(s, n, gpu, args.verify_cpu, args.max_report);
        let t2 = Instant::now();
        summary.gpu_seconds += (t1 - t0).as_secs_f64();
        summary.cpu_seconds += (t2 - t1).as_secs_f64();
        gpu_tally = gpu_tally.merge(g, args.max_report);
        cpu_tally = cpu_tally.merge(c, args.max_report);
        let done = s as u64 + n as u64 - args.start as u64;
        println!(
            "[{:>3}/{chunks}] {s:#010x}..{:#010x}: gpu {:.2} s, cpu {:.2} s; mismatches so far: {}{}; {:.1} M inputs/s",
            index + 1,
            s as u64 + n as u64 - 1,
            (t1 - t0).as_secs_f64(),
            (t2 - t1).as_secs_f64(),
            gpu_tally.mismatches,
            if args.verify_cpu { format!(" (cpu vs mpfr: {})", cpu_tally.mismatches) } else { String::new() },
            done as f64 / started.elapsed().as_secs_f64() / 1e6
        );
        let _ = std::io::stdout().flush();
    }
    let seconds = started.elapsed().as_secs_f64();
    summary.seconds = seconds;
    summary.inputs_per_second = args.count as f64 / seconds;
    summary.cpu_ns_per_input_per_thread = summary.cpu_seconds * 1e9 * threads as f64 / args.count as f64;
    summary.process_cpu_ns_per_input = match (cpu_at_start, process_cpu_ns()) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a) as f64 / args.count as f64),
        _ => None,
    };
    let failed = gpu_tally.mismatches + cpu_tally.mismatches > 0;
    // --cpu-only without --verify-cpu compares nothing: a timing run.
    let compared = device.is_some() || args.verify_cpu;
    summary.status = if failed {
        "failed"
    } else if compared {
        "passed"
    } else {
        "timing-only"
    };
    if device.is_some() {
        print_mismatches("GPU vs CPU reference", &gpu_tally);
        summary.gpu = Some(gpu_tally.clone());
    }
    if args.verify_cpu {
        print_mismatches("CPU reference vs MPFR", &cpu_tally);
        summary.cpu_vs_mpfr = Some(cpu_tally.clone());
    }
    println!(
        "{}: {} inputs in {seconds:.1} s ({:.1} M inputs/s; GPU {:.1} s, CPU {:.1} s = {:.1} ns per input per thread{}); \
         GPU mismatches: {}; CPU-vs-MPFR mismatches: {}",
        summary.status,
        args.count,
        summary.inputs_per_second / 1e6,
        summary.gpu_seconds,
        summary.cpu_seconds,
        summary.cpu_ns_per_input_per_thread,
        summary.process_cpu_ns_per_input.map(|ns| format!(", {ns:.1} ns of process CPU time per input")).unwrap_or_default(),
        if device.is_some() { gpu_tally.mismatches.to_string() } else { "not checked (no GPU)".into() },
        if args.verify_cpu { cpu_tally.mismatches.to_string() } else { "not checked".into() },
    );
    write_json(&args.json, &summary);
    std::process::exit(i32::from(failed));
}
