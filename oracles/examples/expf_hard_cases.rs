//! Generates `kernels/expf_hard.cuh`, the table with which the GPU's
//! `bp::exp_cr` settles the inputs its double evaluation cannot:
//!
//! ```text
//! cargo run --release -p oracles --example expf_hard_cases > kernels/expf_hard.cuh
//! ```
//!
//! The table must hold every f32 x in [-110, 89] whose e^x lies within
//! W e^x of a rounding boundary of f32 (a midpoint between neighbouring f32,
//! 2^-150, or 2^128 - 2^103), with W = 2^-49 (`kernels/expf.cuh` says why that
//! covers every input whose test fails on the GPU). Finding them all takes a
//! scan of every such x, about 2.2e9, in two steps:
//!
//! 1. Candidates, with the CPU's own evaluation y = exp_eval(x),
//!    |y - e^x| <= 2^-51 y (oracles/src/expf.rs). A boundary m within W e^x of
//!    e^x is within W (1 + 2^-51) y + 2^-51 y < (2^-48 - 2u) y of y, strictly
//!    inside the interval that `settle(y, 2^-48)` certifies, so settle fails:
//!    every x it fails on is a candidate, and no member of the table is
//!    missed.
//! 2. Confirmation, with MPFR: e^x at 128 bits (error below 2^-128 e^x), its
//!    correct f32 r (Ziv, `exp_f32_mpfr`) and r's two boundaries; x is kept
//!    when the nearer is within (W + 2^-120) v of the MPFR value v, which
//!    includes every x within W e^x (and perhaps a few a hair farther:
//!    harmless, each entry is the correct result).
//!
//! Two cross-checks make a broken proof fail the run instead of producing a
//! table with a hole: exp_eval must be defined on every x of the range, and
//! every x on which the fast path itself fails (`exp_f32_fast` returns None:
//! the GPU computes the same double, so these are exactly the inputs that
//! reach its table) must be in the table.
//!
//! Statistics go to stderr, the header to stdout; the output is identical on
//! every run (sorted by input bits).

use oracles::expf::{exp_eval, exp_f32_fast, exp_f32_mpfr, rounding_interval, settle, OVERFLOW_X, UNDERFLOW_X};
use rug::Float;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// The table's window (relative to e^x): 2^-49.
const W: f64 = 1.0 / 562_949_953_421_312.0;
/// The candidate window handed to settle: 2^-48 (step 1 above).
const CANDIDATE: f64 = 1.0 / 281_474_976_710_656.0;
/// Inputs per work item.
const BLOCK: u32 = 1 << 20;

/// A candidate after the MPFR step.
struct Confirmed {
    x: u32,
    result: u32,
    /// Distance to the nearest boundary over e^x.
    rel_dist: f64,
    in_table: bool,
}

fn confirm(bits: u32) -> Confirmed {
    let x = f32::from_bits(bits);
    let r = exp_f32_mpfr(x);
    let v = Float::with_val(128, Float::with_val(24, x).exp_ref());
    let (lo, hi) = rounding_interval(r);
    let mut dist: Option<Float> = None;
    for b in [lo, hi].into_iter().flatten() {
        let d = Float::with_val(128, &v - b).abs();
        if dist.as_ref().is_none_or(|cur| d < *cur) {
            dist = Some(d);
        }
    }
    // Every finite nonzero e^x has at least one boundary beside it.
    let rel = dist.map(|d| Float::with_val(128, d / &v)).unwrap_or_else(|| Float::with_val(128, f64::INFINITY));
    let in_table = rel <= W + 2f64.powi(-120);
    Confirmed { x: bits, result: r.to_bits(), rel_dist: rel.to_f64(), in_table }
}

/// The f32 bit patterns of [UNDERFLOW_X, OVERFLOW_X]: +0.0 up to 89.0, and
/// -0.0 down to -110.0.
fn ranges() -> [(u32, u32); 2] {
    [(0, OVERFLOW_X.to_bits()), (0x8000_0000, UNDERFLOW_X.to_bits())]
}

fn main() -> ExitCode {
    let start = Instant::now();
    let blocks: Vec<(u32, u32)> = ranges()
        .iter()
        .flat_map(|&(lo, hi)| (lo..=hi).step_by(BLOCK as usize).map(move |b| (b, hi.min(b.saturating_add(BLOCK - 1)))))
        .collect();
    let next = AtomicU32::new(0);
    let scanned = AtomicU64::new(0);
    let candidates = Mutex::new(Vec::<u32>::new());
    let fast_failures = Mutex::new(Vec::<u32>::new());
    let undefined = Mutex::new(Vec::<u32>::new());
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                let Some(&(lo, hi)) = blocks.get(i) else { break };
                let (mut cand, mut fast, mut undef) = (Vec::new(), Vec::new(), Vec::new());
                for bits in lo..=hi {
                    let x = f32::from_bits(bits);
                    match exp_eval(x) {
                        None => undef.push(bits),
                        Some(y) if settle(y, CANDIDATE).is_none() => {
                            cand.push(bits);
                            if exp_f32_fast(x).is_none() {
                                fast.push(bits);
                            }
                        }
                        // The fast path settles y with the narrower window
                        // 2^-50, whose ends lie between the ends of this one:
                        // if these round alike, so do those (monotone), and
                        // the fast path succeeds; no need to run it.
                        Some(_) => {}
                    }
                }
                scanned.fetch_add((hi - lo) as u64 + 1, Ordering::Relaxed);
                candidates.lock().unwrap_or_else(|e| e.into_inner()).extend(cand);
                fast_failures.lock().unwrap_or_else(|e| e.into_inner()).extend(fast);
                undefined.lock().unwrap_or_else(|e| e.into_inner()).extend(undef);
            });
        }
    });
    let scanned = scanned.into_inner();
    let mut candidates = candidates.into_inner().unwrap_or_else(|e| e.into_inner());
    let mut fast_failures = fast_failures.into_inner().unwrap_or_else(|e| e.into_inner());
    let undefined = undefined.into_inner().unwrap_or_else(|e| e.into_inner());
    candidates.sort_unstable();
    fast_failures.sort_unstable();
    let scan_s = start.elapsed().as_secs_f64();
    if !undefined.is_empty() {
        eprintln!("error: exp_eval is undefined on {} inputs of the range (first {:#010x}): the reduction bound R_MAX does not hold", undefined.len(), undefined[0]);
        return ExitCode::FAILURE;
    }
    let confirmed: Vec<Confirmed> = candidates.iter().map(|&b| confirm(b)).collect();
    let table: Vec<&Confirmed> = confirmed.iter().filter(|c| c.in_table).collect();
    let missing: Vec<u32> =
        fast_failures.iter().copied().filter(|b| table.binary_search_by_key(b, |c| c.x).is_err()).collect();
    if !missing.is_empty() {
        eprintln!(
            "error: {} inputs where the fast path cannot decide are not in the table (first {:#010x}): the error analysis is wrong",
            missing.len(),
            missing[0]
        );
        return ExitCode::FAILURE;
    }
    if table.is_empty() {
        eprintln!("error: an empty table (x = -2^-25 belongs in it): something is wrong with the scan");
        return ExitCode::FAILURE;
    }
    let closest = table.iter().map(|c| c.rel_dist).fold(f64::INFINITY, f64::min);
    eprintln!(
        "expf_hard_cases: scanned {scanned} inputs in {scan_s:.1} s on {threads} threads; {} candidates, {} in the table \
         (window 2^-49), {} where the fast path itself cannot decide (all in the table); closest: {closest:.3e} e^x \
         from a boundary; {:.1} s in all",
        candidates.len(),
        table.len(),
        fast_failures.len(),
        start.elapsed().as_secs_f64()
    );
    let mut out = String::new();
    out.push_str(&format!(
        "// GENERATED by `cargo run --release -p oracles --example expf_hard_cases > kernels/expf_hard.cuh`:\n\
         // do not edit. The method and its proof: oracles/examples/expf_hard_cases.rs.\n\
         //\n\
         // Every f32 x in [-110, 89] whose e^x lies within 2^-49 e^x of a rounding\n\
         // boundary of f32, with the bits of e^x correctly rounded (MPFR): the inputs\n\
         // that bp::exp_cr (expf.cuh) cannot settle with its double evaluation are\n\
         // among them. Sorted by input bits (as unsigned), for a binary search.\n\
         // Scanned {scanned} inputs; {} candidates (2^-48 window of the CPU's double);\n\
         // {} entries; {} of them are inputs on which the fast path itself fails.\n\n\
         #pragma once\n\n\
         #define BP_EXP_HARD_COUNT {}\n\n\
         namespace bp {{\n\
         namespace exp_hard_table {{\n\n",
        candidates.len(),
        table.len(),
        fast_failures.len(),
        table.len()
    ));
    // One line per entry: the value, then a comment.
    let column = |name: &str, f: &dyn Fn(&Confirmed) -> (u32, String)| {
        let mut s = format!("__device__ const unsigned int {name}[BP_EXP_HARD_COUNT] = {{\n");
        for c in &table {
            let (bits, comment) = f(c);
            s.push_str(&format!("    0x{bits:08x}u,  // {comment}\n"));
        }
        s.push_str("};\n\n");
        s
    };
    out.push_str(
        "// The inputs' bits; in the comments, x, e^x's distance to the nearest\n\
         // boundary over e^x, and whether exp_cr's fast path reaches the entry (the\n\
         // others are kept: the window covers any double within the proven bound).\n",
    );
    let reached = |c: &Confirmed| fast_failures.binary_search(&c.x).is_ok();
    out.push_str(&column("input", &|c| {
        let note = if reached(c) { " (the fast path cannot decide)" } else { "" };
        (c.x, format!("{:e}: {:.3e}{note}", f32::from_bits(c.x), c.rel_dist))
    }));
    out.push_str("// e^x correctly rounded to f32, as bits.\n");
    out.push_str(&column("result", &|c| (c.result, format!("{:e}", f32::from_bits(c.result)))));
    out.push_str("}  // namespace exp_hard_table\n}  // namespace bp\n");
    print!("{out}");
    ExitCode::SUCCESS
}
