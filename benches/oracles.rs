//! Criterion benches of both oracles, forward and backward, at three shapes:
//! T x E in {33 x 129, 4096 x 256, 8193 x 64}, UnbiasedTopK k = 8,
//! sigmoid-like scores. The profile oracle runs the GPU profile in plain f32;
//! the MPFR oracle is the exact result (with Ziv's rounding check) on the
//! profile's decisions, which is what every accuracy judgement costs.
//!
//! `cargo bench --bench oracles --features bench` (one core: criterion runs one
//! bench at a time).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use oracles::case::seqwise_loss::{Objective, SeqwiseCase};
use oracles::mpfr::reference::{exact_backward, exact_forward};
use oracles::op::seqwise_loss::SeqwiseLoss;
use oracles::profile::seqwise_loss::SeqwiseProfile;
use oracles::profile_oracle::seqwise_loss::{backward, forward};
use std::hint::black_box;
use std::time::Duration;

const SHAPES: [(usize, usize); 3] = [(33, 129), (4096, 256), (8193, 64)];

/// Deterministic sigmoid-like scores in (0, 1) (a xorshift stream).
fn case(t: usize, e: usize) -> SeqwiseCase {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let scores = (0..t * e)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ((x >> 40) as f32 + 0.5) / 16_777_216.0
        })
        .collect();
    let mut c = SeqwiseCase::dense(t, e, scores, Objective::UnbiasedTopK { k: 8 });
    c.g = 0.75;
    c
}

fn profile_oracle(c: &mut Criterion) {
    let p = SeqwiseProfile::gpu();
    let mut g = c.benchmark_group("profile_oracle");
    for (t, e) in SHAPES {
        let case = case(t, e);
        let id = format!("{t}x{e}");
        g.bench_with_input(BenchmarkId::new("forward", &id), &case, |b, c| b.iter(|| forward(black_box(c), &p)));
        g.bench_with_input(BenchmarkId::new("backward", &id), &case, |b, c| b.iter(|| backward(black_box(c), &p)));
    }
    g.finish();
}

fn mpfr_oracle(c: &mut Criterion) {
    let mut g = c.benchmark_group("mpfr_oracle");
    g.sample_size(10).measurement_time(Duration::from_secs(20));
    for (t, e) in SHAPES {
        let case = case(t, e);
        let id = format!("{t}x{e}");
        g.bench_with_input(BenchmarkId::new("forward", &id), &case, |b, c| {
            b.iter(|| exact_forward::<SeqwiseLoss>(black_box(c), None).map(|r| r.prec))
        });
        g.bench_with_input(BenchmarkId::new("backward", &id), &case, |b, c| {
            b.iter(|| exact_backward::<SeqwiseLoss>(black_box(c), None).map(|r| r.prec))
        });
    }
    g.finish();
}

criterion_group!(benches, profile_oracle, mpfr_oracle);
criterion_main!(benches);
