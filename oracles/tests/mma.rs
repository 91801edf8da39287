//! The MMA model against exact arithmetic: whatever its rules, a step that
//! truncates each of its n + 1 terms on a grid no coarser than 2^-25 times
//! the largest term, then truncates the sum to f32, stays within
//! (n + 1) 2^-25 max|term| + 2^-23 |sum| (+ the smallest subnormal) of the
//! exact sum, and never lies beyond it (truncation moves toward zero: the
//! result's magnitude is at most the aligned sum's, which is at most the
//! exact sum's plus the alignment error). The exact sum is rug's rational,
//! independent of the model's integer arithmetic.

use oracles::mma::{H100_BF16, K};
use rug::Rational;

mod common;
use common::Rng;

/// A bf16 of random sign and fraction, exponent in -e..=e around `base`.
fn bf16(rng: &mut Rng, base: i32, e: i32) -> f32 {
    let r = rng.next();
    let exp = base + (r % (2 * e as u64 + 1)) as i32 - e;
    let bits = (((exp + 127) as u32) << 23) | (((r >> 8) & 0x7f) as u32) << 16 | ((r >> 20) as u32 & 1) << 31;
    f32::from_bits(bits)
}

fn rat(x: f32) -> Rational {
    Rational::from_f32(x).expect("finite")
}

#[test]
fn a_step_stays_within_its_truncation_bound_of_the_exact_sum() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let two = Rational::from(2);
    let pow = |k: i32| -> Rational {
        let mut r = Rational::from(1);
        for _ in 0..k.unsigned_abs() {
            if k > 0 {
                r *= &two
            } else {
                r /= &two
            }
        }
        r
    };
    let (u25, u23, tiny) = (pow(-25), pow(-23), pow(-149));
    for case in 0..3000 {
        let spread = [0, 3, 12, 30][case % 4];
        let a: Vec<f32> = (0..K).map(|_| bf16(&mut rng, 0, spread)).collect();
        let b: Vec<f32> = (0..K).map(|_| bf16(&mut rng, 0, spread)).collect();
        let c = if case % 3 == 0 { 0.0 } else { bf16(&mut rng, 0, spread) };
        let d = H100_BF16.dot_add(&a, &b, c);
        assert!(d.is_finite(), "{a:?} {b:?} {c}");
        let terms: Vec<Rational> =
            a.iter().zip(&b).map(|(x, y)| rat(*x) * rat(*y)).chain(std::iter::once(rat(c))).collect();
        let exact: Rational = terms.iter().fold(Rational::new(), |s, t| s + t);
        let max = terms.iter().map(|t| t.clone().abs()).max().expect("terms");
        let align = Rational::from(K + 1) * &u25 * &max;
        let bound = align.clone() + &u23 * (exact.clone().abs() + &align) + &tiny;
        let err = (rat(d) - &exact).abs();
        assert!(err <= bound, "case {case}: |{d:e} - exact| = {} > {}", err.to_f64(), bound.to_f64());
        assert!(rat(d).abs() <= exact.clone().abs() + &align, "case {case}: {d:e} lies beyond the aligned sum");
    }
}
