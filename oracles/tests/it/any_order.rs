//! The any-order bound ([`oracles::any_order`]) against evaluations a
//! subject may perform: sums in many orders (ascending and descending
//! magnitude, reversed, pairwise, strided, random permutations), dot
//! products with and without FMA contraction, and quotients and products of
//! such sums. Every one must lie within the bound of the exact value
//! (computed in exact rationals); the worst order must come close to it (the
//! bound is tight enough to catch a wrong formula); and a value just outside
//! it must be judged outside.

use oracles::any_order::AnyOrder;
use oracles::mpfr::{judge, Exact, Verdict};
use oracles::num::Num;
use oracles::order::ReductionOrder;
use rug::Rational;

/// A small deterministic generator (splitmix64).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    /// A signed value of magnitude 2^-20 .. 2^20, often nearly cancelling
    /// the previous one.
    fn value(&mut self) -> f32 {
        let m = 1.0 + (self.next() >> 40) as f32 / (1u64 << 24) as f32;
        let e = self.below(41) as i32 - 20;
        let v = m * 2f32.powi(e);
        if self.next() & 1 == 0 {
            -v
        } else {
            v
        }
    }
    fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            v.swap(i, self.below(i + 1));
        }
    }
}

fn rat(x: f32) -> Rational {
    Rational::from_f32(x).expect("finite")
}

/// |v - exact| <= bound, exactly.
fn within(v: f32, exact: &Rational, bound: f64) -> bool {
    let d = (rat(v) - exact).abs();
    bound.is_finite() && d <= Rational::from_f64(bound).expect("finite bound")
}

/// Sums of `xs` in many orders a subject may use, each addition rounded.
fn orders(xs: &[f32], rng: &mut Rng) -> Vec<(String, f32)> {
    let serial = |v: &[f32]| v.iter().fold(0.0f32, |a, &b| a + b);
    let mut out = vec![("ascending index".to_string(), serial(xs))];
    let rev: Vec<f32> = xs.iter().rev().copied().collect();
    out.push(("descending index".into(), serial(&rev)));
    let mut by_mag = xs.to_vec();
    by_mag.sort_by(|a, b| a.abs().total_cmp(&b.abs()));
    out.push(("ascending magnitude".into(), serial(&by_mag)));
    by_mag.reverse();
    out.push(("descending magnitude".into(), serial(&by_mag)));
    out.push(("pairwise".into(), ReductionOrder::Butterfly.reduce(xs)));
    let warp = ReductionOrder::strided(32, ReductionOrder::Serial, ReductionOrder::Butterfly);
    out.push(("warp".into(), warp.reduce(xs)));
    let split = ReductionOrder::chunked(7, ReductionOrder::Butterfly, ReductionOrder::Serial);
    out.push(("chunks of 7".into(), split.reduce(xs)));
    for i in 0..4 {
        let mut p = xs.to_vec();
        rng.shuffle(&mut p);
        out.push((format!("permutation {i}"), serial(&p)));
    }
    out
}

#[test]
fn every_order_of_a_sum_is_within_the_bound() {
    let mut rng = Rng(1);
    for trial in 0..300 {
        let n = 3 + rng.below(300);
        let xs: Vec<f32> = (0..n).map(|_| rng.value()).collect();
        let exact: Rational = xs.iter().map(|&x| rat(x)).sum();
        let any = ReductionOrder::Any.reduce(&xs.iter().map(|&x| AnyOrder::input(x)).collect::<Vec<_>>());
        for (what, v) in orders(&xs, &mut rng) {
            assert!(within(v, &exact, any.err), "trial {trial}, n = {n}, {what}: {v:e} outside {:e}", any.err);
            assert!(within(v, &rat(any.x), any.spread), "trial {trial}, {what}: spread");
        }
    }
}

#[test]
fn dot_products_with_and_without_fma_are_within_the_bound() {
    let mut rng = Rng(2);
    for trial in 0..300 {
        let n = 3 + rng.below(200);
        let a: Vec<f32> = (0..n).map(|_| rng.value()).collect();
        // Some factors tiny, so that products underflow (where an FMA
        // differs from a rounded product the most).
        let b: Vec<f32> =
            (0..n).map(|i| if i % 5 == 0 { rng.value() * 2f32.powi(-120) } else { rng.value() }).collect();
        let exact: Rational = a.iter().zip(&b).map(|(&x, &y)| rat(x) * rat(y)).sum();
        let terms: Vec<AnyOrder> =
            a.iter().zip(&b).map(|(&x, &y)| AnyOrder::input(x).mul(&AnyOrder::input(y))).collect();
        let any = ReductionOrder::Any.reduce(&terms);
        let products: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x * y).collect();
        let mut evaluations = orders(&products, &mut rng);
        let mut idx: Vec<usize> = (0..n).collect();
        for i in 0..4 {
            let fma = idx.iter().fold(0.0f32, |acc, &j| a[j].mul_add(b[j], acc));
            evaluations.push((format!("fma chain {i}"), fma));
            rng.shuffle(&mut idx);
        }
        for (what, v) in evaluations {
            assert!(within(v, &exact, any.err), "trial {trial}, n = {n}, {what}: {v:e} outside {:e}", any.err);
        }
    }
}

#[test]
fn quotients_and_products_of_sums_in_any_order_are_within_the_bound() {
    // (sum a) * (sum b) / (sum c), each sum in any order: the mul and div
    // rules with operands that are not determined.
    let mut rng = Rng(3);
    for trial in 0..200 {
        let n = 3 + rng.below(50);
        let draw = |rng: &mut Rng| (0..n).map(|_| rng.value()).collect::<Vec<f32>>();
        let (a, b) = (draw(&mut rng), draw(&mut rng));
        // A denominator away from zero: positive terms.
        let c: Vec<f32> = draw(&mut rng).iter().map(|x| x.abs()).collect();
        let sum = |v: &[f32]| v.iter().map(|&x| rat(x)).sum::<Rational>();
        let exact = sum(&a) * sum(&b) / sum(&c);
        let any_sum =
            |v: &[f32]| ReductionOrder::Any.reduce(&v.iter().map(|&x| AnyOrder::input(x)).collect::<Vec<_>>());
        let any = any_sum(&a).mul(&any_sum(&b)).div(&any_sum(&c));
        let (oa, ob, oc) = (orders(&a, &mut rng), orders(&b, &mut rng), orders(&c, &mut rng));
        for (i, (_, a)) in oa.iter().enumerate() {
            let j = (i * 3 + 1) % ob.len();
            let k = (i * 5 + 2) % oc.len();
            let v = a * ob[j].1 / oc[k].1;
            assert!(within(v, &exact, any.err), "trial {trial}: {v:e} outside {:e} of {exact}", any.err);
        }
    }
}

/// 1 followed by n - 1 copies of u = 2^-24, summed from 1 upward: each
/// addition is a tie and rounds back to 1 (to even), so the whole tail is
/// lost, (n - 1) u, while the bound is gamma(n - 1) (1 + (n - 1) u): the
/// worst order reaches the bound to within a factor 1 - O(nu).
fn worst_case(n: usize) -> (Vec<f32>, f32) {
    let mut xs = vec![2f32.powi(-24); n];
    xs[0] = 1.0;
    let computed = xs.iter().fold(0.0f32, |a, &b| a + b);
    (xs, computed)
}

#[test]
fn the_worst_order_comes_close_to_the_bound() {
    for n in [3usize, 10, 1000, 4096] {
        let (xs, computed) = worst_case(n);
        assert_eq!(computed, 1.0);
        let exact = Rational::from(1) + Rational::from((n as u64 - 1, 1u64 << 24));
        let any = ReductionOrder::Any.reduce(&xs.iter().map(|&x| AnyOrder::input(x)).collect::<Vec<_>>());
        assert!(within(computed, &exact, any.err));
        let err = (rat(computed) - &exact).abs().to_f64();
        let ratio = err / any.err;
        assert!(ratio > 0.99 && ratio <= 1.0, "n = {n}: error / bound = {ratio}");
    }
}

#[test]
fn a_value_just_outside_the_bound_is_judged_outside() {
    let n = 1000;
    let (xs, computed) = worst_case(n);
    let any = ReductionOrder::Any.reduce(&xs.iter().map(|&x| AnyOrder::input(x)).collect::<Vec<_>>());
    let exact = ReductionOrder::Serial.reduce(&xs.iter().map(|&x| Exact::input(x)).collect::<Vec<_>>());
    assert!(exact.err.is_zero(), "a sum of {n} f32 spanning 24 binades is exact at 128 bits");
    // The f32 nearest below exact - bound, and the one just above it.
    let lo = exact.v.to_f64() - any.err; // both exact in f64 here, up to one rounding
    let mut outside = lo as f32;
    while outside as f64 >= lo {
        outside = outside.next_down();
    }
    let inside = outside.next_up();
    assert!(matches!(judge(computed, any.err, &exact), Verdict::Within { .. }));
    assert!(matches!(judge(inside, any.err, &exact), Verdict::Within { .. }), "{inside:e}");
    assert!(matches!(judge(outside, any.err, &exact), Verdict::Outside { .. }), "{outside:e}");
}

#[test]
fn a_sum_that_some_order_overflows_has_no_bound_and_nan_is_determined() {
    let xs = [f32::MAX, f32::MAX, -f32::MAX, -f32::MAX];
    let any = ReductionOrder::Any.reduce(&xs.map(AnyOrder::input));
    assert!(any.err.is_infinite());
    let with_nan = [1.0, f32::NAN, 2.0, 3.0].map(AnyOrder::input);
    let s = ReductionOrder::Any.reduce(&with_nan);
    assert!(s.x.is_nan() && s.spread == 0.0);
    let with_inf = [1.0, f32::INFINITY, 2.0, 3.0].map(AnyOrder::input);
    let s = ReductionOrder::Any.reduce(&with_inf);
    assert!(s.x == f32::INFINITY && s.spread == 0.0);
    let both = [f32::NEG_INFINITY, f32::INFINITY, 2.0].map(AnyOrder::input);
    assert!(ReductionOrder::Any.reduce(&both).x.is_nan());
}

/// The any-order run's admissible value (`AnyOrder::x`: serial sums, no
/// contraction) is the serial profile's own result, bit for bit, on signed
/// scores (the provided map's denominator is a sum of |s|): the two
/// profiles differ only in the orders they admit (tests/router.rs has the
/// router's). A mutant that left `x` as it was in `AnyOrder::abs` lived
/// without this.
#[test]
fn the_seqwise_any_order_runs_admissible_value_is_the_serial_profiles_result() {
    use oracles::case::seqwise_loss::{Objective, SeqwiseCase};
    use oracles::op::seqwise_loss::SeqwiseLoss;
    use oracles::op::{backward, forward, Op, Values};
    use oracles::padding::PaddingRule;
    use oracles::profile::seqwise_loss::SeqwiseProfile;
    let reals = |g: &[oracles::op::Group<f32>]| -> Vec<u32> {
        g.iter()
            .flat_map(|g| if let Values::Real(v) = &g.values { v.to_vec() } else { vec![] })
            .map(f32::to_bits)
            .collect()
    };
    let xs = |g: &[oracles::op::Group<AnyOrder>]| -> Vec<u32> {
        g.iter()
            .flat_map(|g| if let Values::Real(v) = &g.values { v.to_vec() } else { vec![] })
            .map(|a| a.x.to_bits())
            .collect()
    };
    let (serial, any) = (SeqwiseProfile::serial(), SeqwiseLoss::any_order_profile());
    let mut rng = Rng(7);
    for trial in 0..20 {
        let (t, e) = (1 + rng.below(6), 1 + rng.below(9));
        let scores: Vec<f32> = (0..t * e).map(|_| rng.value()).collect();
        let map = (0..t * e).map(|_| rng.below(2) == 0).collect();
        let mut c = SeqwiseCase::dense(t, e, scores, Objective::ProvidedMap { map });
        c.g = rng.value();
        let f = forward::<SeqwiseLoss>(&c, &serial).unwrap();
        let a = SeqwiseLoss::forward_under::<AnyOrder>(&c, &any, PaddingRule::Skip, None).unwrap().out;
        assert_eq!(reals(&SeqwiseLoss::fwd_groups(&c, &f)), xs(&SeqwiseLoss::fwd_groups(&c, &a)), "trial {trial}");
        let b = backward::<SeqwiseLoss>(&c, &serial).unwrap();
        let a = SeqwiseLoss::backward_under::<AnyOrder>(&c, &any, PaddingRule::Skip, None).unwrap().out;
        assert_eq!(reals(&SeqwiseLoss::bwd_groups(&c, &b)), xs(&SeqwiseLoss::bwd_groups(&c, &a)), "trial {trial}");
    }
}
