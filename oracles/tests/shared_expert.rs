//! `shared_expert` (SPEC section 5) judged from outside: the f32 profile
//! oracle within its rigorous bound of the exact result, the bf16 roundings
//! as decisions (near ties, contradictions), non-finite inputs, and the
//! finite-difference check of the backward. Expected values come from the
//! exact oracle, from hand derivations or from exact rational arithmetic
//! (Python `fractions`) written out in comments.

use oracles::case::shared_expert::SharedExpertCase;
use oracles::case::Layout;
use oracles::mpfr::reference::{BackwardReference, ForwardReference};
use oracles::op::shared_expert::SharedExpert;
use oracles::op::{backward, forward};
use oracles::profile::shared_expert::SharedExpertProfile;

/// xorshift64*: a fixed, dependency-free source of varied cases.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    /// Uniform in [-1, 1).
    fn signed(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
}

/// x truncated to bf16 (a bf16 value near x).
fn bf16_trunc(x: f32) -> f32 {
    f32::from_bits(x.to_bits() & 0xffff_0000)
}

/// Tier A shapes (T <= 8, H <= 16, F <= 16) and small edge shapes: (T, H, F).
const SHAPES: [(usize, usize, usize); 6] = [(1, 1, 1), (2, 3, 2), (3, 8, 5), (4, 16, 16), (8, 16, 8), (5, 7, 13)];

/// Case `i` of a varied family: weights scaled like a trained layer
/// (1/sqrt(H)), activations of a few units, exact zeros and repeats mixed in.
fn varied(i: usize) -> SharedExpertCase {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (i as u64 + 1).wrapping_mul(0x1234_5678_9abc_def1));
    let (t, h, f) = SHAPES[i % SHAPES.len()];
    let scale = 1.0 / (h as f32).sqrt();
    let mut val = |n: usize, s: f32| -> Vec<f32> {
        (0..n)
            .map(|_| match rng.below(20) {
                0 => 0.0,
                1 => -0.0,
                _ => bf16_trunc(rng.signed() * s),
            })
            .collect()
    };
    let x = val(t * h, 3.0);
    let w1 = val(2 * f * h, 2.0 * scale);
    let w2 = val(h * f, 2.0 * scale);
    let dy = val(t * h, 1.0);
    SharedExpertCase { t, h, f, layout: Layout { offset: i % 4, row_stride: h + i % 3 }, x, w1, w2, dy }
}

#[test]
fn the_profile_oracle_is_within_its_bound_of_the_exact_result() {
    let p = SharedExpertProfile::serial();
    let mut judged = 0;
    for i in 0..24 {
        let c = varied(i);
        let fwd = forward::<SharedExpert>(&c, &p).unwrap();
        let fr = ForwardReference::<SharedExpert>::new(&c, &p).unwrap();
        let acc = fr.judge(&c, &fwd);
        assert!(acc.outside.is_empty(), "case {i}: {:?}", acc.outside);
        assert_eq!((acc.unbounded, acc.undetermined), (0, 0), "case {i}");
        judged += acc.judged;

        let bwd = backward::<SharedExpert>(&c, &p).unwrap();
        let br = BackwardReference::<SharedExpert>::new(&c, &p).unwrap();
        let acc = br.judge(&c, &bwd);
        assert!(acc.outside.is_empty(), "case {i}: {:?}", acc.outside);
        assert_eq!((acc.unbounded, acc.undetermined), (0, 0), "case {i}");
        judged += acc.judged;
    }
    assert!(judged > 500, "{judged}");
}
