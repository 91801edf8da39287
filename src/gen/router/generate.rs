//! One whole case: a shape, T, a bias, rows of a few kinds, then padding, a
//! layout, gw, the route scale and norm, and the fused loss.

use super::choice::Routing;
use super::rows::{generate_bias, generate_row, RowKind, ROW_KINDS};
use super::shape::{generate_shape, generate_t, MAX_REFERENCE_E};
use crate::gen::common::{layout, padding_flags, pick, poison_padding, wide};
use crate::gen::GenConfig;
use crate::knobs::Shapes;
use oracles::case::router::{FusedLoss, RouterCase};
use oracles::vocab::ClampTie;
use proptest::prelude::{Rng, RngExt};

/// g of the fused loss, or a gw: 0, +-1, tiny, huge, or ordinary.
fn gradient_value<R: Rng + ?Sized>(rng: &mut R) -> f32 {
    match rng.random_range(0..10) {
        0 => 0.0,
        1 => pick(rng, &[1.0, -1.0]),
        2 => wide(rng, -149, -101),
        3 => wide(rng, 101, 127),
        _ => wide(rng, -3, 3),
    }
}

fn generate_gw<R: Rng + ?Sized>(rng: &mut R, n: usize) -> Vec<f32> {
    match rng.random_range(0..8) {
        0 => vec![0.0; n],
        1 => (0..n).map(|_| pick(rng, &[1.0, -1.0])).collect(),
        2 => (0..n).map(|_| wide(rng, -149, -101)).collect(),
        3 => (0..n).map(|_| wide(rng, 101, 127)).collect(),
        4 => (0..n).map(|_| gradient_value(rng)).collect(),
        _ => (0..n).map(|_| wide(rng, -3, 3)).collect(),
    }
}

/// One adversarial case, from any RNG (proptest's, or a fuzzer's bytes
/// through proptest's pass-through RNG). T x E stays within `cfg.max_te`
/// (E within `cfg.max_e`) wherever E >= 2 allows; tier B's reference shapes
/// (`cfg.shapes`) go past them: E up to 1024, T x E up to 2^22.
pub fn generate<R: Rng + ?Sized>(rng: &mut R, cfg: &GenConfig) -> RouterCase {
    // Tier B's reference shapes reach the kernels' widest E whatever tier
    // A's knob says.
    let reference = GenConfig { max_e: MAX_REFERENCE_E, ..cfg.clone() };
    let cfg = if cfg.shapes == Shapes::Small { cfg } else { &reference };
    let (e, groups, l, k) = generate_shape(rng, cfg);
    let t = generate_t(rng, cfg, e);
    let bias = generate_bias(rng, e, e / groups);
    let routing = Routing { e, groups, l, k };
    // Each case mixes a few row kinds so that one case meets several classes.
    let kinds: Vec<RowKind> = (0..rng.random_range(1..=3)).map(|_| pick(rng, &ROW_KINDS)).collect();
    let mut logits = Vec::with_capacity(t * e);
    for _ in 0..t {
        let kind = if rng.random_bool(0.25) { RowKind::Gate } else { pick(rng, &kinds) };
        logits.extend(generate_row(rng, kind, routing, &bias));
    }
    let padding = padding_flags(rng, t);
    poison_padding(rng, &mut logits, e, padding.as_deref());
    let layout = layout(rng, e);
    let gw = generate_gw(rng, t * k);
    let route_scale = match rng.random_range(0..10) {
        0..=4 => 2.5,
        5 | 6 => 1.0,
        7 => wide(rng, -20, 20).abs(),
        _ => wide(rng, -2, 4).abs(),
    };
    let route_norm = rng.random_bool(0.75);
    let loss = if rng.random_bool(0.5) {
        let clamp_tie = if rng.random_bool(0.5) { ClampTie::Strict } else { ClampTie::Inclusive };
        Some(FusedLoss { clamp_tie, g: gradient_value(rng) })
    } else {
        None
    };
    // One case in sixteen is a freshly initialised router (Class::FlatRouter):
    // every valid row's logits one value. Drawn last, so that the other
    // cases of a seed stay what they were.
    if rng.random_range(0..16) == 0 {
        let v = pick(rng, &[0.0, 0.0, 1.0, -2.0]);
        for (r, row) in logits.chunks_mut(e).enumerate() {
            if !padding.as_ref().is_some_and(|p| p[r]) {
                row.fill(v);
            }
        }
    }
    RouterCase { t, e, layout, logits, bias, groups, topk_groups: l, k, route_scale, route_norm, padding, gw, loss }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::router::shape::REFERENCE_MAX_TE;
    use proptest::test_runner::{RngAlgorithm, TestRng};

    #[test]
    fn generated_cases_are_valid() {
        let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
        let cfg = GenConfig::default();
        for _ in 0..3000 {
            let c = generate(&mut rng, &cfg);
            assert_eq!(c.validate(), Ok(()), "{c:?}");
            assert!(c.t * c.e <= cfg.max_te && c.e <= cfg.max_e, "{} x {}", c.t, c.e);
        }
        // At the kernels' widest E, warp-wide groups reach 32 of them (the
        // widest fwd_grouped32 shape).
        let wide = GenConfig { max_e: 1024, ..GenConfig::default() };
        let mut widest = 0;
        for _ in 0..3000 {
            let c = generate(&mut rng, &wide);
            assert_eq!(c.validate(), Ok(()), "{c:?}");
            assert!(c.t * c.e <= wide.max_te && c.e <= wide.max_e, "{} x {}", c.t, c.e);
            widest += usize::from(c.e == 1024 && c.groups == 32);
        }
        assert!(widest > 0, "no case of 32 groups of 32 experts in 3000");
        // Tier B's reference shapes: long T (each warp of the kernels takes
        // several tokens) within 2^22 elements, E up to 1024 whatever the
        // knobs say.
        let reference = GenConfig { shapes: Shapes::Reference, ..GenConfig::default() };
        let (mut long, mut widest_e) = (0, 0);
        for _ in 0..60 {
            let c = generate(&mut rng, &reference);
            assert_eq!(c.validate(), Ok(()), "T={} E={}", c.t, c.e);
            assert!(c.t * c.e <= REFERENCE_MAX_TE && c.e <= MAX_REFERENCE_E, "{} x {}", c.t, c.e);
            long += usize::from(c.t > 4096);
            widest_e = widest_e.max(c.e);
        }
        assert!(long >= 10 && widest_e > 257, "{long} long cases, widest E {widest_e}");
        // Tight configs still give valid cases.
        for cfg in [
            GenConfig { max_te: 2, max_e: 1, max_t: 1, ..GenConfig::default() },
            GenConfig { max_te: 100, max_e: 7, max_t: 5, ..GenConfig::default() },
            GenConfig { max_te: 64, max_e: 300, max_t: 1100, ..GenConfig::default() },
        ] {
            for _ in 0..300 {
                let c = generate(&mut rng, &cfg);
                assert_eq!(c.validate(), Ok(()), "{c:?}");
                assert!(c.t <= cfg.max_t.max(1) && c.e <= cfg.max_e.max(2), "{} x {}", c.t, c.e);
            }
        }
    }
}
