//! Adversarial inputs for the check of the tensor core's MMA model
//! (`oracles::mma`, `bitparity-mma-check`), in tagged classes.
//!
//! A case is a chain of `steps` m16n8k16 steps: a (16 rows of 16 * steps
//! bf16), b (8 columns of 16 * steps bf16) and c (16 x 8 f32); each of its
//! 128 outputs is one dot product. Each class aims at one rule of the model
//! and at the neighbours the check must refute (`oracles::mma::ALTERNATIVES`):
//! where the aligned terms' grid falls (25 fraction bits or 24 or 26), what
//! exponent a product aligns by (raw or renormalised), how the sum becomes an
//! f32 (truncated or to nearest), and the edges the models read without
//! NVIDIA's word: subnormals, overflow, NaN and infinities, signed zeros.

use oracles::mma::{MmaModel, K, M, N};
use proptest::prelude::{Rng, RngExt};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Class {
    /// Inputs of exponent -8..8, random signs.
    Uniform,
    /// Each row's terms spread over 40 binades below its largest.
    WideSpread,
    /// c the largest term, the products 22 to 28 binades below it: the
    /// grid's last bits decide.
    GridEdge,
    /// A pair of large products that cancel exactly, smaller terms beside:
    /// the cancelled pair still sets the grid.
    Cancel,
    /// Products of significands near 2 (product near 4) beside terms at the
    /// grid's edge: raw and renormalised alignment differ.
    RawExponent,
    /// c of exponent 0, products far below it with random signs: the sum's
    /// remainder below f32's last bit (truncation against nearest).
    BelowLastBit,
    /// bf16 subnormal inputs, products and sums in f32's subnormal range.
    Subnormal,
    /// Products near and beyond 2^128.
    Overflow,
    /// NaN and infinite inputs, inf * 0, inf - inf.
    Special,
    /// Zeros of both signs and exact cancellations.
    SignedZero,
    /// Chains of 2 to 6 steps: each step's f32 result the next one's c.
    Chain,
    /// c far above the products, or far below them.
    CDominant,
}

impl Class {
    pub const ALL: [Class; 12] = [
        Class::Uniform,
        Class::WideSpread,
        Class::GridEdge,
        Class::Cancel,
        Class::RawExponent,
        Class::BelowLastBit,
        Class::Subnormal,
        Class::Overflow,
        Class::Special,
        Class::SignedZero,
        Class::Chain,
        Class::CDominant,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Class::Uniform => "uniform",
            Class::WideSpread => "wide-spread",
            Class::GridEdge => "grid-edge",
            Class::Cancel => "cancel",
            Class::RawExponent => "raw-exponent",
            Class::BelowLastBit => "below-last-bit",
            Class::Subnormal => "subnormal",
            Class::Overflow => "overflow",
            Class::Special => "special",
            Class::SignedZero => "signed-zero",
            Class::Chain => "chain",
            Class::CDominant => "c-dominant",
        }
    }
}

/// One case: `steps` steps; `a` is M x (K * steps) row-major, `b` is
/// N x (K * steps) (B's columns), `c` is M x N row-major. Every a and b
/// value is a bf16 (an f32 with its low 16 bits zero).
#[derive(Clone, Debug, PartialEq)]
pub struct MmaCase {
    pub class: Class,
    pub steps: usize,
    pub a: Vec<f32>,
    pub b: Vec<f32>,
    pub c: Vec<f32>,
}

impl MmaCase {
    fn zeros(class: Class, steps: usize) -> Self {
        let kk = K * steps;
        MmaCase { class, steps, a: vec![0.0; M * kk], b: vec![0.0; N * kk], c: vec![0.0; M * N] }
    }

    /// The length of each dot product.
    pub fn len(&self) -> usize {
        K * self.steps
    }

    /// Never: a case has at least one step.
    pub fn is_empty(&self) -> bool {
        self.steps == 0
    }

    /// Output (i, j)'s dot product: row i of a, column j of B, and c.
    pub fn dot(&self, i: usize, j: usize) -> (&[f32], &[f32], f32) {
        let kk = self.len();
        (&self.a[i * kk..(i + 1) * kk], &self.b[j * kk..(j + 1) * kk], self.c[i * N + j])
    }

    /// Every output as `model` computes it, row-major (M x N).
    pub fn expected(&self, model: &MmaModel) -> Vec<f32> {
        let mut d = Vec::with_capacity(M * N);
        for i in 0..M {
            for j in 0..N {
                let (a, b, c) = self.dot(i, j);
                d.push(model.dot_chain(a, b, c));
            }
        }
        d
    }

    /// The a and b values as the kernel reads them: bf16 bits.
    pub fn bf16_bits(xs: &[f32]) -> Vec<u16> {
        xs.iter().map(|x| (x.to_bits() >> 16) as u16).collect()
    }
}

/// The bf16 of sign `neg`, exponent `e` (-126..=127) and a random 7-bit
/// fraction; below -126, a subnormal bf16 (2^-133 at the least) or zero.
fn bf16<R: Rng + ?Sized>(rng: &mut R, neg: bool, e: i32) -> f32 {
    let frac = rng.random_range(0..128u32);
    let bits = if e >= -126 {
        ((e.min(127) + 127) as u32) << 23 | frac << 16
    } else {
        // Subnormal: the value frac' * 2^-133 with frac' below 2^(e + 134).
        let width = (e + 134).max(0) as u32;
        let f = if width == 0 { 0 } else { (1 << (width - 1)) | (frac & ((1 << (width - 1)) - 1)) };
        f << 16
    };
    let x = f32::from_bits(bits);
    if neg {
        -x
    } else {
        x
    }
}

/// A random-signed bf16 with exponent in lo..=hi.
fn rb<R: Rng + ?Sized>(rng: &mut R, lo: i32, hi: i32) -> f32 {
    let e = rng.random_range(lo..=hi);
    let neg = rng.random_bool(0.5);
    bf16(rng, neg, e)
}

/// A random-signed f32 with exponent in lo..=hi (-126..=127) and a random
/// 23-bit fraction.
fn rf<R: Rng + ?Sized>(rng: &mut R, lo: i32, hi: i32) -> f32 {
    let e = rng.random_range(lo..=hi).clamp(-126, 127);
    let bits = ((e + 127) as u32) << 23 | rng.random_range(0..1u32 << 23);
    let x = f32::from_bits(bits);
    if rng.random_bool(0.5) {
        -x
    } else {
        x
    }
}

/// A case of `class`.
pub fn generate<R: Rng + ?Sized>(rng: &mut R, class: Class) -> MmaCase {
    let steps = if class == Class::Chain { rng.random_range(2..=6) } else { 1 };
    let mut case = MmaCase::zeros(class, steps);
    let kk = case.len();
    match class {
        Class::Uniform => {
            case.a.iter_mut().for_each(|x| *x = rb(rng, -8, 8));
            case.b.iter_mut().for_each(|x| *x = rb(rng, -8, 8));
            case.c.iter_mut().for_each(|x| *x = if rng.random_range(0..8) == 0 { 0.0 } else { rf(rng, -8, 8) });
        }
        Class::WideSpread | Class::Chain => {
            for i in 0..M {
                let top = rng.random_range(-20..=20);
                for x in &mut case.a[i * kk..(i + 1) * kk] {
                    *x = rb(rng, top - 40, top);
                }
            }
            case.b.iter_mut().for_each(|x| *x = rb(rng, -1, 1));
            for i in 0..M {
                for j in 0..N {
                    case.c[i * N + j] = if rng.random_bool(0.5) { 0.0 } else { rf(rng, -40, 20) };
                }
            }
        }
        Class::GridEdge | Class::BelowLastBit => {
            let (near, far) = if class == Class::GridEdge { (22, 28) } else { (24, 34) };
            for i in 0..M {
                let e = rng.random_range(-5..=5);
                for j in 0..N {
                    case.c[i * N + j] = rf(rng, e, e);
                }
                for x in &mut case.a[i * kk..(i + 1) * kk] {
                    *x = if rng.random_range(0..4) == 0 { 0.0 } else { rb(rng, e - far, e - near) };
                }
            }
            for x in case.b.iter_mut() {
                let neg = rng.random_bool(0.2);
                *x = bf16(rng, neg, 0);
            }
        }
        Class::Cancel => {
            case.b.iter_mut().for_each(|x| *x = rb(rng, -1, 1));
            for j in 0..N {
                case.b[j * kk + 1] = case.b[j * kk];
            }
            for i in 0..M {
                let e = rng.random_range(-10..=10);
                let row = &mut case.a[i * kk..(i + 1) * kk];
                row.iter_mut().for_each(|x| *x = rb(rng, e - 30, e));
                let big = rb(rng, e + 5, e + 20);
                row[0] = big;
                row[1] = -big;
                for j in 0..N {
                    case.c[i * N + j] = if rng.random_bool(0.5) { 0.0 } else { rf(rng, e - 30, e) };
                }
            }
        }
        Class::RawExponent => {
            for i in 0..M {
                let row = &mut case.a[i * kk..(i + 1) * kk];
                row[0] = f32::from_bits((127 << 23) | rng.random_range(0x60..0x80u32) << 16);
                for x in &mut row[1..] {
                    *x = rb(rng, -27, -23);
                }
            }
            for j in 0..N {
                let col = &mut case.b[j * kk..(j + 1) * kk];
                col[0] = f32::from_bits((127 << 23) | rng.random_range(0x60..0x80u32) << 16);
                for x in &mut col[1..] {
                    *x = bf16(rng, false, 0);
                }
            }
            case.c.iter_mut().for_each(|x| *x = if rng.random_bool(0.5) { 0.0 } else { rf(rng, -26, -22) });
        }
        Class::Subnormal => {
            case.a.iter_mut().for_each(|x| *x = rb(rng, -133, -100));
            case.b
                .iter_mut()
                .for_each(|x| *x = if rng.random_bool(0.5) { rb(rng, -40, 0) } else { rb(rng, -133, -120) });
            case.c.iter_mut().for_each(|x| {
                *x = match rng.random_range(0..3) {
                    0 => 0.0,
                    1 => {
                        f32::from_bits(rng.random_range(1..1u32 << 23)) * if rng.random_bool(0.5) { -1.0 } else { 1.0 }
                    }
                    _ => rf(rng, -126, -120),
                }
            });
        }
        Class::Overflow => {
            // Products 2^95 to 2^138: sums on both sides of 2^128.
            case.a.iter_mut().for_each(|x| *x = rb(rng, 100, 127));
            case.b.iter_mut().for_each(|x| *x = rb(rng, -5, 10));
            case.c.iter_mut().for_each(|x| *x = if rng.random_bool(0.5) { 0.0 } else { rf(rng, 100, 127) });
        }
        Class::Special => {
            case.a.iter_mut().for_each(|x| *x = rb(rng, -8, 8));
            case.b.iter_mut().for_each(|x| *x = rb(rng, -8, 8));
            case.c.iter_mut().for_each(|x| *x = rf(rng, -8, 8));
            let menu = [f32::INFINITY, f32::NEG_INFINITY, f32::NAN, 0.0, -0.0];
            for _ in 0..rng.random_range(1..=6) {
                let v = menu[rng.random_range(0..menu.len())];
                match rng.random_range(0..3) {
                    0 => case.a[rng.random_range(0..M * kk)] = v,
                    1 => case.b[rng.random_range(0..N * kk)] = v,
                    _ => case.c[rng.random_range(0..M * N)] = v,
                }
            }
        }
        Class::SignedZero => {
            let z = |rng: &mut R| if rng.random_bool(0.5) { -0.0f32 } else { 0.0 };
            case.a.iter_mut().for_each(|x| *x = z(rng));
            case.b.iter_mut().for_each(|x| *x = z(rng));
            case.c.iter_mut().for_each(|x| *x = z(rng));
            // Some rows get a pair that cancels exactly (equal b in both k).
            for i in 0..M {
                if rng.random_bool(0.5) {
                    let v = rb(rng, -8, 8);
                    case.a[i * kk + 2] = v;
                    case.a[i * kk + 3] = -v;
                }
            }
            for j in 0..N {
                let v = rb(rng, -4, 4);
                case.b[j * kk + 2] = v;
                case.b[j * kk + 3] = v;
            }
        }
        Class::CDominant => {
            for i in 0..M {
                let e = rng.random_range(-30..=30);
                let c_far_above = rng.random_bool(0.5);
                for j in 0..N {
                    case.c[i * N + j] = if c_far_above { rf(rng, e + 30, e + 60) } else { rf(rng, e - 60, e - 30) };
                }
                for x in &mut case.a[i * kk..(i + 1) * kk] {
                    *x = rb(rng, e - 2, e);
                }
            }
            case.b.iter_mut().for_each(|x| *x = rb(rng, -1, 1));
        }
    }
    case
}

#[cfg(test)]
mod tests {
    use super::*;
    use oracles::mma::{ALTERNATIVES, H100_BF16};
    use proptest::test_runner::{RngAlgorithm, TestRng};

    fn rng(seed: u8) -> TestRng {
        TestRng::from_seed(RngAlgorithm::ChaCha, &[seed; 32])
    }

    #[test]
    fn every_input_is_a_bf16_and_the_shapes_agree() {
        let mut r = rng(1);
        for class in Class::ALL {
            for _ in 0..20 {
                let case = generate(&mut r, class);
                assert!(case.steps >= 1 && case.steps <= 6);
                assert_eq!(case.a.len(), M * case.len());
                assert_eq!(case.b.len(), N * case.len());
                assert_eq!(case.c.len(), M * N);
                for x in case.a.iter().chain(&case.b) {
                    assert!(x.is_nan() || x.to_bits() & 0xffff == 0, "{class:?}: {x:e} is not a bf16");
                }
            }
        }
    }

    /// A confirmation on the GPU means something only if the same inputs
    /// refute every neighbour of the model: on a few cases of each class,
    /// each alternative differs from the H100 model on some output, and the
    /// classes named for a rule do refute the alternative that breaks it.
    #[test]
    fn the_classes_refute_every_alternative() {
        let mut r = rng(2);
        let mut refuted_by: Vec<Vec<Class>> = vec![Vec::new(); ALTERNATIVES.len()];
        for class in Class::ALL {
            for _ in 0..8 {
                let case = generate(&mut r, class);
                let want = case.expected(&H100_BF16);
                for (k, alt) in ALTERNATIVES.iter().enumerate() {
                    let got = case.expected(alt);
                    if want.iter().zip(&got).any(|(x, y)| x.to_bits() != y.to_bits()) && !refuted_by[k].contains(&class)
                    {
                        refuted_by[k].push(class);
                    }
                }
            }
        }
        for (alt, classes) in ALTERNATIVES.iter().zip(&refuted_by) {
            assert!(!classes.is_empty(), "no class refutes {}", alt.name);
        }
        let by = |name: &str| &refuted_by[ALTERNATIVES.iter().position(|a| a.name.starts_with(name)).unwrap()];
        assert!(by("frac-24").contains(&Class::GridEdge));
        assert!(by("frac-26").contains(&Class::GridEdge));
        assert!(by("renormalised").contains(&Class::RawExponent));
        assert!(by("round-to-nearest").contains(&Class::BelowLastBit));
    }

    /// The edge classes reach the edges they are named for.
    #[test]
    fn the_edge_classes_reach_their_edges() {
        let mut r = rng(3);
        let outputs = |class: Class, r: &mut TestRng| -> Vec<f32> {
            (0..8).flat_map(|_| generate(r, class).expected(&H100_BF16)).collect()
        };
        let sub = outputs(Class::Subnormal, &mut r);
        assert!(sub.iter().any(|x| *x != 0.0 && x.abs() < f32::MIN_POSITIVE));
        assert!(outputs(Class::Overflow, &mut r).iter().any(|x| x.is_infinite()));
        let special = outputs(Class::Special, &mut r);
        assert!(special.iter().any(|x| x.is_nan()) && special.iter().any(|x| x.is_infinite()));
        // Negative zeros in, exact cancellations, every sum exactly zero.
        let zeros = generate(&mut r, Class::SignedZero);
        let negative_zero = |xs: &[f32]| xs.iter().any(|x| x.to_bits() == (-0.0f32).to_bits());
        assert!(negative_zero(&zeros.a) && negative_zero(&zeros.c));
        assert!(zeros.a.iter().any(|x| *x != 0.0));
        assert!(zeros.expected(&H100_BF16).iter().all(|x| *x == 0.0));
    }
}
