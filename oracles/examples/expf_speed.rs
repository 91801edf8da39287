//! Time per call of the CPU reference's two paths, on one thread:
//!
//! ```text
//! cargo run --release -p oracles --example expf_speed
//! ```
//!
//! `exp_f32` (the proven f64 fast path, MPFR where it cannot decide) and
//! `exp_f32_mpfr` (MPFR alone), on the same pseudo-random inputs spread over
//! the range where e^x is finite and nonzero, and the fast path on every input
//! of a dense window; also the extrapolated time of a pass over all 2^32
//! inputs on 16 threads (the exhaustive check's CPU side) for each.

use oracles::expf::{exp_f32, exp_f32_mpfr};
use std::hint::black_box;
use std::time::Instant;

fn inputs(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            let u = (s >> 11) as f64 / (1u64 << 53) as f64;
            (-104.0 + u * 193.0) as f32
        })
        .collect()
}

/// This thread's CPU time in ns (Linux: /proc/thread-self/schedstat, whose
/// first field is the time spent running), so that a busy shared machine
/// does not inflate the figures; `None` elsewhere.
fn thread_cpu_ns() -> Option<u64> {
    std::fs::read_to_string("/proc/thread-self/schedstat").ok()?.split_whitespace().next()?.parse().ok()
}

/// ns per call: CPU time where the platform tells it, else wall time.
fn ns_per_call(xs: &[f32], f: impl Fn(f32) -> f32) -> f64 {
    let (t, c) = (Instant::now(), thread_cpu_ns());
    let mut acc = 0u32;
    for &x in xs {
        acc ^= black_box(f(black_box(x))).to_bits();
    }
    black_box(acc);
    let ns = match (c, thread_cpu_ns()) {
        (Some(a), Some(b)) => (b - a) as f64,
        _ => t.elapsed().as_secs_f64() * 1e9,
    };
    ns / xs.len() as f64
}

fn main() {
    let fast_in = inputs(4_000_000, 1);
    let mpfr_in = inputs(200_000, 2);
    // Warm up (page in, MPFR's constant caches).
    ns_per_call(&fast_in[..10_000], exp_f32);
    ns_per_call(&mpfr_in[..1_000], exp_f32_mpfr);
    let fast = ns_per_call(&fast_in, exp_f32);
    let fast_same = ns_per_call(&mpfr_in, exp_f32);
    let mpfr = ns_per_call(&mpfr_in, exp_f32_mpfr);
    // A dense window: every f32 from 1.0 up, 2^22 of them.
    let dense: Vec<f32> = (0..1u32 << 22).map(|i| f32::from_bits(1.0f32.to_bits() + i)).collect();
    let dense_ns = ns_per_call(&dense, exp_f32);
    let all = (1u64 << 32) as f64 / 16.0 * 1e-9;
    let clock = if thread_cpu_ns().is_some() { "thread CPU time" } else { "wall time" };
    println!("(per call, by {clock})");
    println!("exp_f32 (fast path + MPFR fallback): {fast:.1} ns/call (random, 4M inputs), {fast_same:.1} ns/call (the MPFR set), {dense_ns:.1} ns/call (dense window)");
    println!("exp_f32_mpfr (MPFR only):            {mpfr:.1} ns/call (200k inputs)");
    println!("speed-up: {:.0}x", mpfr / fast_same);
    println!(
        "2^32 inputs on 16 threads (at these single-thread costs): {:.0} s with exp_f32, {:.0} s with exp_f32_mpfr",
        fast * all,
        mpfr * all
    );
}
