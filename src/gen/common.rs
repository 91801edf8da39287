//! Helpers every op's generator shares: random draws (a pick from a menu, a
//! float across the exponent range), the T values at the profiles' edges,
//! and the simplicity order that shrinking walks down. (The size limits and
//! the fuzzer's byte stream live in the parent module.)
//!
//! Moving a helper here must not change a single draw: the generators'
//! cases for a given seed (and a fuzz artifact's case) stay bit-identical.

use oracles::profile::seqwise_loss::{GPU_LANES, GPU_TOKEN_CHUNK};
use proptest::prelude::{Rng, RngExt};

/// One element of `xs`, uniformly.
pub fn pick<T: Copy, R: Rng + ?Sized>(rng: &mut R, xs: &[T]) -> T {
    xs[rng.random_range(0..xs.len())]
}

/// T values next to the edges of the GPU profiles and powers of two: n-1, n,
/// n+1 for n = 4 .. 2^16, the warp (32 lanes) and the token chunk (64, 128),
/// at most `max_t`, ascending.
pub fn edge_t(max_t: usize) -> Vec<usize> {
    let mut ns: Vec<usize> = (2..=16).map(|b| 1usize << b).collect();
    ns.extend([GPU_TOKEN_CHUNK, GPU_LANES, 2 * GPU_TOKEN_CHUNK]);
    let mut v: Vec<usize> = ns.iter().flat_map(|&n| [n - 1, n, n + 1]).filter(|&t| t <= max_t).collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// A random f32 of either sign across the whole exponent range (subnormals,
/// huge values), mantissa random.
pub fn wide<R: Rng + ?Sized>(rng: &mut R, min_exp: i32, max_exp: i32) -> f32 {
    let exp = rng.random_range(min_exp..=max_exp);
    let m: f32 = 1.0 + rng.random::<u32>() as f32 / 4_294_967_296.0;
    let x = (m as f64 * 2f64.powi(exp)) as f32;
    if rng.random_bool(0.5) {
        -x
    } else {
        x
    }
}

pub fn is_prime(n: usize) -> bool {
    n >= 2 && (2..).take_while(|d| d * d <= n).all(|d| !n.is_multiple_of(d))
}

/// Simpler values than x: 0, 1, 0.5, -x toward positive, then x with fewer
/// mantissa bits. Each is strictly [`simpler`] than x, and finite.
pub fn simplifications(x: f32) -> Vec<f32> {
    let mut v = Vec::new();
    for y in [0.0f32, 1.0, 0.5] {
        if simpler(y, x) {
            v.push(y);
        }
    }
    if x.is_finite() && x != 0.0 {
        let bits = x.to_bits();
        let trailing = (bits & 0x7f_ffff).trailing_zeros().min(23);
        if trailing < 23 {
            // Round the mantissa to half as many significant bits.
            let drop = (23 - trailing).div_ceil(2) + trailing;
            let mask = !((1u32 << drop) - 1);
            let y = f32::from_bits(bits & mask);
            if y.to_bits() != bits {
                v.push(y);
            }
        }
        if x < 0.0 {
            v.push(-x);
        }
    }
    v
}

/// A total "simplicity" order: finite before non-finite, fewer mantissa bits,
/// smaller magnitude exponent distance from 1.
pub fn complexity(x: f32) -> (u32, u32, u32, u32) {
    if x.is_nan() {
        return (3, 0, 0, 0);
    }
    if x.is_infinite() {
        return (2, 0, 0, 0);
    }
    let bits = x.to_bits();
    let mant = 24 - (bits & 0x7f_ffff).trailing_zeros().min(23) * (x != 0.0) as u32;
    let exp = ((bits >> 23) & 0xff) as i32;
    (if x == 0.0 { 0 } else { 1 }, mant, (exp - 127).unsigned_abs(), bits >> 31)
}

pub fn simpler(y: f32, x: f32) -> bool {
    complexity(y) < complexity(x)
}
