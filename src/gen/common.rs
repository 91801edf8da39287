//! Helpers every op's generator shares: random draws (a pick from a menu, a
//! float across the exponent range, a layout, padding and its poison), the
//! T values at the profiles' edges, the simplicity order that shrinking
//! walks down and the candidates that walk a case's values down it, a
//! class's name, and the checks every generator's tests make. (The size
//! limits and the fuzzer's byte stream live in the parent module.)
//!
//! Moving a helper here must not change a single draw: the generators'
//! cases for a given seed (and a fuzz artifact's case) stay bit-identical.

use oracles::case::{Layout, MAX_OFFSET};
use oracles::profile::seqwise_loss::{GPU_LANES, GPU_TOKEN_CHUNK};
use proptest::prelude::{Rng, RngExt};
use serde::Serialize;
use std::fmt;

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

/// Where a case's rows lie: an element offset of 1..=MAX_OFFSET in half the
/// cases, a row stride of `width` + 1..5 in half.
pub fn layout<R: Rng + ?Sized>(rng: &mut R, width: usize) -> Layout {
    Layout {
        offset: if rng.random_bool(0.5) { rng.random_range(1..=MAX_OFFSET) } else { 0 },
        row_stride: if rng.random_bool(0.5) { width + rng.random_range(1..=5) } else { width },
    }
}

/// Padding flags for `t` tokens: none in six cases of ten, every token in
/// one, each token with probability 0.3 in three.
pub fn padding_flags<R: Rng + ?Sized>(rng: &mut R, t: usize) -> Option<Vec<bool>> {
    match rng.random_range(0..10) {
        0..=5 => None,
        6 => Some(vec![true; t]),
        _ => Some((0..t).map(|_| rng.random_bool(0.3)).collect()),
    }
}

/// Poison in what the op must not read: given padding, in six cases of ten
/// each value of the padding rows of `values` (rows of `width`) becomes NaN,
/// -NaN or an infinity with probability 0.5. Without padding, no draw.
pub fn poison_padding<R: Rng + ?Sized>(rng: &mut R, values: &mut [f32], width: usize, padding: Option<&[bool]>) {
    let Some(p) = padding else { return };
    if rng.random_bool(0.6) {
        for (row, _) in values.chunks_mut(width).zip(p).filter(|(_, &pad)| pad) {
            for x in row.iter_mut() {
                if rng.random_bool(0.5) {
                    *x = pick(rng, &[f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -f32::NAN]);
                }
            }
        }
    }
}

/// A bf16 near `old` for aiming at a bf16 tie: an odd mantissa of 1 to 8
/// bits, either sign, at an exponent within one of old's (0 for a zero,
/// subnormal or non-finite old), kept within 2^-20..2^20.
pub fn nudge_bf16<R: Rng + ?Sized>(rng: &mut R, old: f32) -> f32 {
    let e = if old.is_normal() { old.abs().log2().floor() as i32 } else { 0 };
    let e = (e + rng.random_range(-1..=1)).clamp(-20, 20);
    let m = 2 * rng.random_range(0u32..128) + 1;
    let v = (m as f32) * 2f32.powi(e - 7) * if rng.random_bool(0.5) { -1.0 } else { 1.0 };
    f32::from_bits(v.to_bits() & 0xffff_0000)
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

/// A case's field of f32 values, for the shrink candidates that walk them.
pub type Field<C> = fn(&mut C) -> &mut Vec<f32>;

/// `case` with every value of `field` less simple than `y` set to `y`;
/// `None` when none is.
pub fn toward<C: Clone>(case: &C, field: Field<C>, y: f32) -> Option<C> {
    let mut c = case.clone();
    let mut changed = false;
    for x in field(&mut c).iter_mut() {
        if simpler(y, *x) {
            *x = y;
            changed = true;
        }
    }
    changed.then_some(c)
}

/// Where some value of `field` repeats: for each of its first `most`
/// distinct values (by bits, ascending), `case` with that value replaced
/// everywhere by each of its [`simplifications`] (a tie between equal
/// values survives).
pub fn each_distinct<C: Clone>(case: &C, field: Field<C>, most: usize) -> Vec<C> {
    let values = field(&mut case.clone()).clone();
    let mut distinct: Vec<u32> = values.iter().map(|x| x.to_bits()).collect();
    distinct.sort_unstable();
    distinct.dedup();
    let mut out = Vec::new();
    if distinct.len() < values.len() {
        for &bits in distinct.iter().take(most) {
            for y in simplifications(f32::from_bits(bits)) {
                let mut c = case.clone();
                field(&mut c).iter_mut().filter(|x| x.to_bits() == bits).for_each(|x| *x = y);
                out.push(c);
            }
        }
    }
    out
}

/// For each of the first `most` values of `field`, `case` with that value
/// replaced by each of its [`simplifications`].
pub fn each_value<C: Clone>(case: &C, field: Field<C>, most: usize) -> Vec<C> {
    let values = field(&mut case.clone()).clone();
    let mut out = Vec::new();
    for (i, &x) in values.iter().enumerate().take(most) {
        for y in simplifications(x) {
            let mut c = case.clone();
            field(&mut c)[i] = y;
            out.push(c);
        }
    }
    out
}

/// The value candidates of a case made of f32 fields: each field toward 0
/// and 1 ([`toward`]), then each field's repeated values everywhere (32 at
/// most a field, [`each_distinct`]), then single values (256 at most a
/// field, [`each_value`]). A bf16 stays a bf16.
pub fn simplify_fields<C: Clone>(case: &C, fields: &[Field<C>]) -> Vec<C> {
    let mut out = Vec::new();
    for &field in fields {
        out.extend([0.0, 1.0].into_iter().filter_map(|y| toward(case, field, y)));
    }
    for &field in fields {
        out.extend(each_distinct(case, field, 32));
    }
    for &field in fields {
        out.extend(each_value(case, field, 256));
    }
    out
}

/// `case` changed by `f`: an invalid variant, or a shrink candidate.
pub fn variant<C: Clone>(case: &C, f: impl FnOnce(&mut C)) -> C {
    let mut c = case.clone();
    f(&mut c);
    c
}

/// A class's name: its serde name (kebab-case), as reports and the corpus
/// write it.
pub fn write_class_name<C: Serialize>(class: &C, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let s = serde_json::to_value(class).ok().and_then(|v| v.as_str().map(String::from));
    f.write_str(s.as_deref().unwrap_or("?"))
}

/// The checks every generator's tests make of its classes.
#[cfg(test)]
pub mod testing {
    use serde::de::DeserializeOwned;
    use serde::Serialize;
    use std::collections::{BTreeMap, BTreeSet};
    use std::fmt::{Debug, Display};
    use std::time::Instant;

    /// Classifies `n` cases of `generate`, prints the time each half took
    /// and the count of each class of `all`, and fails naming the classes
    /// never met.
    pub fn assert_every_class_reached<Case, C: Ord + Copy + Debug + Display>(
        all: &[C],
        n: usize,
        mut generate: impl FnMut() -> Case,
        classify: impl Fn(&Case) -> BTreeSet<C>,
    ) {
        let start = Instant::now();
        let cases: Vec<Case> = (0..n).map(|_| generate()).collect();
        let generated = start.elapsed();
        let classified: Vec<BTreeSet<C>> = cases.iter().map(classify).collect();
        println!("{n} cases: generated in {generated:?}, classified in {:?}", start.elapsed() - generated);
        let mut counts: BTreeMap<C, usize> = BTreeMap::new();
        for class in classified.into_iter().flatten() {
            *counts.entry(class).or_default() += 1;
        }
        for class in all {
            println!("{:>6}  {class}", counts.get(class).copied().unwrap_or(0));
        }
        let missing: Vec<_> = all.iter().filter(|c| !counts.contains_key(c)).collect();
        assert!(missing.is_empty(), "never generated: {missing:?}");
    }

    /// `all` lists each class once, and each name reads back as its class.
    pub fn assert_class_names_round_trip<C: Ord + Copy + Debug + Serialize + DeserializeOwned>(all: &[C]) {
        let set: BTreeSet<C> = all.iter().copied().collect();
        assert_eq!(set.len(), all.len());
        for &c in all {
            let back: C = serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
            assert_eq!(back, c);
        }
    }
}
