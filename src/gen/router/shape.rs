//! The routing shape (E, G, L, k) and T: DeepSeek's, the kernels' warp-wide
//! groups, small and odd ones; tier B's reference shapes.

use crate::gen::common::{edge_t, pick};
use crate::gen::GenConfig;
use crate::knobs::Shapes;
use proptest::prelude::{Rng, RngExt};

/// DeepSeek-V3 (671B): (E, G, L, k).
pub(super) const V3: (usize, usize, usize, usize) = (256, 8, 4, 8);
/// DeepSeek-V2.
pub(super) const V2: (usize, usize, usize, usize) = (160, 8, 3, 6);
/// DeepSeek-V2-Lite.
pub(super) const V2_LITE: (usize, usize, usize, usize) = (64, 1, 1, 6);
/// Two warp-wide groups, one kept, k = 2: the kernels' grouped path at two
/// values per lane (V = 2), whose map store packs two experts per word. A
/// random draw reaches it in about 0.4 % of cases, too rarely: four
/// mutants of that store survived 300 cases (reports/mutants-2026-12-02).
const GROUPED_V2: (usize, usize, usize, usize) = (64, 2, 1, 2);

/// (E, G, L, k). E is at least 2 whatever the config says (the router needs
/// two experts per group).
pub(super) fn generate_shape<R: Rng + ?Sized>(rng: &mut R, cfg: &GenConfig) -> (usize, usize, usize, usize) {
    let max_e = cfg.max_e.min(cfg.max_te).max(2);
    // A first draw of 64 bits: a 4-byte fuzz input is followed by random
    // tail bytes, so it still reaches every shape (a 32-bit first draw would
    // read the input alone, and small inputs would all pick the same shape).
    let fixed = if rng.random_bool(0.3) { Some(pick(rng, &[V3, V2, V2_LITE, GROUPED_V2])) } else { None };
    if let Some(s) = fixed.filter(|s| s.0 <= max_e) {
        return s;
    }
    // One shape in seven: groups of one warp's width (32 experts), the
    // kernels' fwd_grouped32 path, E = 32 (one group, V = 1) to 256, and to
    // 1024 (the kernels' widest lane count) where max_e allows it; a random
    // E rarely has 32 as its group size. G = V (a power of two) and G < V
    // (3, 5, 6, 7, ...: E = 96 runs at V = 4) take different branches of
    // that path, so both are drawn.
    if 32 <= max_e && rng.random_range(0..7) == 0 {
        let groups: &[usize] =
            if max_e >= 32 * 32 { &[1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 23, 32] } else { &[1, 2, 3, 4, 5, 6, 7, 8] };
        let g = pick(rng, groups).min(max_e / 32);
        // Every group kept, and one expert chosen, each often: the widest
        // case (E = 1024, G = L = 32, k = 1) is the lanes' last reduction.
        let l = match rng.random_range(0..3) {
            0 => g,
            _ => rng.random_range(1..=g),
        };
        let k = match rng.random_range(0..4) {
            0 => 1,
            1 => rng.random_range(1..=2 * l),
            _ => rng.random_range(1..=32 * l),
        };
        return (32 * g, g, l, k);
    }
    let (mut g, mut gs) = if rng.random_bool(0.6) {
        // Small shapes: E = 2, 3, 4, 6, 8, 9, 10, 12, ...
        (pick(rng, &[1, 1, 2, 3, 4, 8]), pick(rng, &[2, 2, 3, 4, 5, 8]))
    } else {
        let e = rng.random_range(2..=max_e);
        let divisors: Vec<usize> = (1..=e / 2).filter(|d| e.is_multiple_of(*d)).collect();
        let g = pick(rng, &divisors);
        (g, e / g)
    };
    gs = gs.min(max_e);
    while g > 1 && g * gs > max_e {
        g -= 1;
    }
    let l = match rng.random_range(0..4) {
        0 => 1,
        1 => g,
        _ => rng.random_range(1..=g),
    };
    let max_k = l * gs;
    let k = match rng.random_range(0..6) {
        0 => 1,
        1 => max_k,
        2 => 6.min(max_k),
        3 => 8.min(max_k),
        _ => rng.random_range(1..=max_k),
    };
    (g * gs, g, l, k)
}

/// E of tier B's reference shapes: the kernels' widest (32 lanes x 32).
pub(super) const MAX_REFERENCE_E: usize = 1024;
/// Most elements of a reference-shape case: 16384 tokens of DeepSeek-V3's
/// 256 experts.
pub(super) const REFERENCE_MAX_TE: usize = 1 << 22;

pub(super) fn generate_t<R: Rng + ?Sized>(rng: &mut R, cfg: &GenConfig, e: usize) -> usize {
    // Tier B's reference shapes (`GenConfig::shapes`), one case in three: T
    // from 2^20 / E to 2^22 / E, past the one wave of blocks the kernels
    // launch on the H200 (132 SMs x at most 6 blocks x 8 warps = 6336 tokens
    // at E <= 64, 1056 at E = 1024), so that most warps take several tokens
    // in turn (the token loop's prefetch, its barriers between tokens).
    if cfg.shapes != Shapes::Small && rng.random_range(0..3) == 0 {
        let cap = REFERENCE_MAX_TE / e;
        return rng.random_range(cap / 4..=cap).max(1);
    }
    let cap = (cfg.max_te / e).clamp(1, cfg.max_t.max(1));
    let t = match rng.random_range(0..10) {
        0..=3 => rng.random_range(1..=3),
        4..=6 => {
            let edges = edge_t(cap);
            if edges.is_empty() {
                1
            } else {
                pick(rng, &edges)
            }
        }
        _ => rng.random_range(1..=cap.min(200)),
    };
    t.min(cap).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::test_runner::{RngAlgorithm, TestRng};
    use std::collections::BTreeSet;

    #[test]
    fn warp_wide_groups_are_drawn_both_paths_and_non_powers_of_two() {
        // The kernels' fwd_grouped32 path (32 experts a group, k <= 2 L) and
        // the general path at the same group size, E = 96 and 160 included.
        let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
        let cfg = GenConfig::default();
        let (mut grouped32, mut below_v, mut general, mut es) = (0, 0, 0, BTreeSet::new());
        for _ in 0..3000 {
            let (e, g, l, k) = generate_shape(&mut rng, &cfg);
            assert!(e % g == 0 && e / g >= 2 && (1..=g).contains(&l) && (1..=l * e / g).contains(&k));
            if e == 32 * g {
                es.insert(e);
                if k <= 2 * l {
                    grouped32 += 1;
                    // G below the lane count V (G not a power of two): the
                    // path's own branch.
                    below_v += usize::from(!g.is_power_of_two());
                } else {
                    general += 1;
                }
            }
        }
        assert!(grouped32 >= 50 && general >= 50 && below_v >= 25, "{grouped32} {below_v} {general}");
        assert!([32, 64, 96, 128, 160, 192, 224, 256].iter().all(|e| es.contains(e)), "{es:?}");
    }

    /// The widest warp-group shape with every group kept and one expert
    /// chosen (the lanes' last reduction over 32 groups) is drawn, not only
    /// possible.
    #[test]
    fn the_widest_all_groups_kept_shape_is_drawn() {
        let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
        let cfg = GenConfig { max_e: 1024, ..GenConfig::default() };
        let hits = (0..20_000).filter(|_| generate_shape(&mut rng, &cfg) == (1024, 32, 32, 1)).count();
        assert!(hits >= 5, "{hits}");
    }

    /// The grouped path at V = 2 (E = 64 in two groups of 32, k <= 2L) in
    /// several percent of cases, not the 0.4 % a random draw gives.
    #[test]
    fn the_grouped_two_values_per_lane_shape_is_drawn_often() {
        let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
        let hits = (0..10_000)
            .filter(|_| matches!(generate_shape(&mut rng, &GenConfig::default()), (64, 2, l, k) if k <= 2 * l))
            .count();
        assert!(hits >= 500, "{hits} of 10000");
    }
}
