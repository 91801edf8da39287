//! The router's adversarial classes, read off a case's values (the
//! oracle's s, u and choice), never from how it was made.

use super::choice::{choice, key, one_ulp_apart, tied, Routing, ONE_MINUS_ULP};
use super::shape::{V2, V2_LITE, V3};
use crate::gen::common::{edge_t, write_class_name};
use oracles::case::router::RouterCase;
use oracles::profile::router::RouterProfile;
use oracles::profile_oracle::router::{choose, scores, Depth};
use oracles::vocab::{ClampTie, EPS};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fmt;

/// The adversarial classes (docs/ops/README.md#adversarial-cases) for the
/// router, plus the options of the case (so a report shows each was tried).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    /// T in {1, 2, 3}.
    TinyT,
    /// T = n-1, n or n+1 for a power of two n >= 4 or a chunk size (32, 64, 128).
    TEdge,
    /// E = 256, G = 8, L = 4, k = 8 (DeepSeek-V3).
    V3Shape,
    /// E = 160, G = 8, L = 3, k = 6 (DeepSeek-V2).
    V2Shape,
    /// E = 64, G = 1, L = 1, k = 6 (DeepSeek-V2-Lite).
    V2LiteShape,
    /// E <= 8.
    SmallE,
    /// E not a multiple of 4.
    EUnaligned,
    /// E / G odd.
    OddGroupSize,
    /// E / G = 2: a group's score is the sum of all its experts.
    PairGroups,
    /// G = 1: no group limit.
    OneGroup,
    /// L = G > 1: every group kept.
    AllGroupsKept,
    /// k = 1.
    KOne,
    /// k = L * E / G: every expert of the kept groups chosen.
    KAll,
    /// Element offset 1, 2 or 3.
    Offset,
    /// Row stride > E.
    RowStride,
    /// Two of a group's three largest u equal (adjacent places), in some row.
    InGroupTie,
    /// Two of a group's three largest u one ulp apart (adjacent places).
    InGroupNearTie,
    /// L < G and the L-th and (L+1)-th group scores equal.
    GroupScoreTie,
    /// L < G and the L-th and (L+1)-th group scores one ulp apart.
    GroupScoreNearTie,
    /// k < L * E / G and the k-th and (k+1)-th u of the kept experts equal.
    KthTie,
    /// k < L * E / G and the k-th and (k+1)-th u of the kept experts one ulp apart.
    KthNearTie,
    /// Every u of a row equal.
    AllEqual,
    /// The bias changes a row's choice: the group-limited top-k of u differs
    /// from that of s.
    BiasReorders,
    /// A finite logit whose s is exactly +0.0.
    SaturatedZero,
    /// A finite logit whose s is exactly 1.0.
    SaturatedOne,
    /// A logit whose s is 1 - 2^-23 = 1 - ulp(1), the largest s below 1
    /// (1 - 2^-24, the largest f32 below 1, is not reachable: see
    /// [`ONE_MINUS_ULP`]).
    OneMinusUlp,
    /// A logit whose s is non-zero and below 2^-100 (subnormal included).
    TinyScore,
    /// A valid row, with the fused loss, whose L1 norm of s in a shipped
    /// profile's order is eps or one ulp from it (only reachable with s
    /// exactly 0 except one or two tiny values).
    ClampTie,
    /// Every row is padding.
    AllPadding,
    /// Some rows are padding, not all.
    PartialPadding,
    /// A padding row holding a NaN or infinite logit.
    PoisonedPadding,
    /// A NaN or infinite logit in a valid row.
    NonFiniteValid,
    /// route_norm = true.
    RouteNorm,
    /// route_norm = false.
    NoRouteNorm,
    /// route_scale = 2.5 (DeepSeek-V3).
    RouteScaleV3,
    /// route_scale != 2.5.
    RouteScaleOther,
    /// Some gw is 0.
    GwZero,
    /// Some gw is +-1.
    GwUnit,
    /// Some gw is non-zero and below 2^-100 in magnitude.
    GwTiny,
    /// Some gw is above 2^100 in magnitude.
    GwHuge,
    /// The fused `seqwise_loss` gradient is present.
    FusedLoss,
    /// No fused loss.
    NoLoss,
    /// The fused loss's gate is strict (n > eps).
    Strict,
    /// The fused loss's gate is inclusive (n >= eps).
    Inclusive,
    /// The fused loss's g = 0.
    GZero,
    /// The fused loss's g = +-1.
    GUnit,
    /// The fused loss's 0 < |g| < 2^-100.
    GTiny,
    /// The fused loss's |g| > 2^100.
    GHuge,
    /// A freshly initialised router: T >= 2 valid rows, every logit of every
    /// valid row the same value (a zero-initialised gate gives 0), so every
    /// row is a tie of all its experts, row after row.
    FlatRouter,
}

impl Class {
    pub const ALL: [Class; 49] = [
        Class::TinyT,
        Class::TEdge,
        Class::V3Shape,
        Class::V2Shape,
        Class::V2LiteShape,
        Class::SmallE,
        Class::EUnaligned,
        Class::OddGroupSize,
        Class::PairGroups,
        Class::OneGroup,
        Class::AllGroupsKept,
        Class::KOne,
        Class::KAll,
        Class::Offset,
        Class::RowStride,
        Class::InGroupTie,
        Class::InGroupNearTie,
        Class::GroupScoreTie,
        Class::GroupScoreNearTie,
        Class::KthTie,
        Class::KthNearTie,
        Class::AllEqual,
        Class::BiasReorders,
        Class::SaturatedZero,
        Class::SaturatedOne,
        Class::OneMinusUlp,
        Class::TinyScore,
        Class::ClampTie,
        Class::AllPadding,
        Class::PartialPadding,
        Class::PoisonedPadding,
        Class::NonFiniteValid,
        Class::RouteNorm,
        Class::NoRouteNorm,
        Class::RouteScaleV3,
        Class::RouteScaleOther,
        Class::GwZero,
        Class::GwUnit,
        Class::GwTiny,
        Class::GwHuge,
        Class::FusedLoss,
        Class::NoLoss,
        Class::Strict,
        Class::Inclusive,
        Class::GZero,
        Class::GUnit,
        Class::GTiny,
        Class::GHuge,
        Class::FlatRouter,
    ];
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_class_name(self, f)
    }
}

/// The classes a (valid) case exercises, read off its values.
pub fn classify(case: &RouterCase) -> BTreeSet<Class> {
    let mut c = BTreeSet::new();
    let (t, e, g, l, k) = (case.t, case.e, case.groups, case.topk_groups, case.k);
    let gs = case.group_size();
    let mut add = |cond: bool, class: Class| {
        if cond {
            c.insert(class);
        }
    };
    add(t <= 3, Class::TinyT);
    add(edge_t(usize::MAX).contains(&t) && t > 3, Class::TEdge);
    add((e, g, l, k) == V3, Class::V3Shape);
    add((e, g, l, k) == V2, Class::V2Shape);
    add((e, g, l, k) == V2_LITE, Class::V2LiteShape);
    add(e <= 8, Class::SmallE);
    add(e % 4 != 0, Class::EUnaligned);
    add(gs % 2 == 1, Class::OddGroupSize);
    add(gs == 2, Class::PairGroups);
    add(g == 1, Class::OneGroup);
    add(l == g && g > 1, Class::AllGroupsKept);
    add(k == 1, Class::KOne);
    add(k == l * gs, Class::KAll);
    add(case.layout.offset != 0, Class::Offset);
    add(case.layout.row_stride > e, Class::RowStride);
    add(case.route_norm, Class::RouteNorm);
    add(!case.route_norm, Class::NoRouteNorm);
    add(case.route_scale == 2.5, Class::RouteScaleV3);
    add(case.route_scale != 2.5, Class::RouteScaleOther);
    add(case.gw.contains(&0.0), Class::GwZero);
    add(case.gw.iter().any(|&w| w.abs() == 1.0), Class::GwUnit);
    add(case.gw.iter().any(|&w| w != 0.0 && w.abs() < 2f32.powi(-100)), Class::GwTiny);
    add(case.gw.iter().any(|&w| w.abs() > 2f32.powi(100)), Class::GwHuge);
    add(case.loss.is_none(), Class::NoLoss);
    if let Some(loss) = &case.loss {
        add(true, Class::FusedLoss);
        add(loss.clamp_tie == ClampTie::Strict, Class::Strict);
        add(loss.clamp_tie == ClampTie::Inclusive, Class::Inclusive);
        add(loss.g == 0.0, Class::GZero);
        add(loss.g.abs() == 1.0, Class::GUnit);
        add(loss.g != 0.0 && loss.g.abs() < 2f32.powi(-100), Class::GTiny);
        add(loss.g.abs() > 2f32.powi(100), Class::GHuge);
    }
    let padding: Vec<bool> = (0..t).map(|r| case.is_padding(r)).collect();
    let n_pad = padding.iter().filter(|&&p| p).count();
    add(n_pad == t, Class::AllPadding);
    add(n_pad > 0 && n_pad < t, Class::PartialPadding);
    let valid: Vec<&[f32]> = (0..t).filter(|&r| !padding[r]).map(|r| case.row(r)).collect();
    add(
        valid.len() >= 2 && valid.iter().all(|row| row.iter().all(|x| x.to_bits() == valid[0][0].to_bits())),
        Class::FlatRouter,
    );
    let biased = case.bias.iter().any(|&b| b != 0.0);
    let unbiased = vec![0.0f32; e];
    let routing = Routing { e, groups: g, l, k };
    let profiles = RouterProfile::all();
    // Padding rows are routed too: the selection classes read every row.
    for (r, &pad) in padding.iter().enumerate() {
        let x = case.row(r);
        let nonfinite = x.iter().any(|v| !v.is_finite());
        add(nonfinite && pad, Class::PoisonedPadding);
        add(nonfinite && !pad, Class::NonFiniteValid);
        let s: Vec<f32> = scores(x);
        for (&xv, &sv) in x.iter().zip(&s) {
            add(xv.is_finite() && sv == 0.0, Class::SaturatedZero);
            add(xv.is_finite() && sv == 1.0, Class::SaturatedOne);
            add(sv == ONE_MINUS_ULP, Class::OneMinusUlp);
            add(sv > 0.0 && sv < 2f32.powi(-100), Class::TinyScore);
        }
        if !pad && case.loss.is_some() {
            let near_eps = |n: f32| n.is_finite() && (key(n) - key(EPS)).abs() <= 1;
            let abs: Vec<f32> = s.iter().map(|v| v.abs()).collect();
            add(profiles.iter().any(|p| near_eps(p.loss.row.reduce(&abs))), Class::ClampTie);
        }
        let ch = choice(&s, &case.bias, routing);
        let u = &ch.u;
        add(u.iter().all(|&v| tied(v, u[0])), Class::AllEqual);
        for m in &ch.members {
            for p in 0..gs.min(3) - 1 {
                add(tied(u[m[p]], u[m[p + 1]]), Class::InGroupTie);
                add(one_ulp_apart(u[m[p]], u[m[p + 1]]), Class::InGroupNearTie);
            }
        }
        if l < g {
            let (a, b) = (ch.group_scores[ch.groups[l - 1]], ch.group_scores[ch.groups[l]]);
            add(tied(a, b), Class::GroupScoreTie);
            add(one_ulp_apart(a, b), Class::GroupScoreNearTie);
        }
        if k < ch.experts.len() {
            let (a, b) = (u[ch.experts[k - 1]], u[ch.experts[k]]);
            add(tied(a, b), Class::KthTie);
            add(one_ulp_apart(a, b), Class::KthNearTie);
        }
        let reorders = || choose(&s, &unbiased, g, l, k, Depth::Chosen).ids != ch.ids;
        add(biased && reorders(), Class::BiasReorders);
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::common::testing::{assert_class_names_round_trip, assert_every_class_reached};
    use crate::gen::router::choice::{edges, logit_for_u, score, step};
    use crate::gen::router::{generate, hand_case};
    use crate::gen::GenConfig;
    use oracles::case::router::FusedLoss;
    use proptest::test_runner::{RngAlgorithm, TestRng};

    /// A freshly initialised router (every valid row's logits one value) is
    /// a class of its own, drawn at many T, E = 32 included.
    #[test]
    fn flat_routers_are_drawn_and_classified() {
        let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
        let cfg = GenConfig::default();
        let (mut flat, mut long, mut e32) = (0, 0, 0);
        for _ in 0..3000 {
            let case = generate(&mut rng, &cfg);
            if classify(&case).contains(&Class::FlatRouter) {
                flat += 1;
                long += usize::from(case.t >= 16);
                e32 += usize::from(case.e == 32);
            }
        }
        assert!(flat >= 100 && long >= 20 && e32 >= 2, "{flat} {long} {e32}");
        // A case whose valid rows differ somewhere is not flat.
        let mut c = hand_case();
        c.logits.fill(0.0);
        assert!(classify(&c).contains(&Class::FlatRouter));
        c.logits[c.e] = 1.0;
        assert!(!classify(&c).contains(&Class::FlatRouter));
    }

    #[test]
    fn every_class_is_reached() {
        let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
        assert_every_class_reached(&Class::ALL, 3000, || generate(&mut rng, &GenConfig::default()), classify);
    }

    #[test]
    fn class_names_are_kebab_case_and_all_is_complete() {
        assert_eq!(Class::KthNearTie.to_string(), "kth-near-tie");
        assert_eq!(Class::V3Shape.to_string(), "v3-shape");
        assert_class_names_round_trip(&Class::ALL);
    }

    #[test]
    fn classify_is_truthful_on_hand_made_cases() {
        let base = hand_case();
        assert_eq!(base.validate(), Ok(()));
        let c = classify(&base);
        for class in [
            Class::InGroupTie,
            Class::InGroupNearTie,
            Class::GroupScoreTie,
            Class::GroupScoreNearTie,
            Class::KthTie,
            Class::KthNearTie,
            Class::AllEqual,
            Class::BiasReorders,
            Class::SaturatedZero,
            Class::SaturatedOne,
            Class::OneMinusUlp,
            Class::TinyScore,
            Class::ClampTie,
            Class::NonFiniteValid,
            Class::PoisonedPadding,
        ] {
            assert!(!c.contains(&class), "{class} on plain values");
        }
        for class in [Class::TinyT, Class::SmallE, Class::PairGroups, Class::RouteScaleV3, Class::NoLoss] {
            assert!(c.contains(&class), "{class} missing");
        }

        // Row 0 u: groups (0.62, 0.27), (0.88, 0.56), (0.32, 0.82), (0.12, 0.53):
        // groups 1 and 2 kept; k = 3 takes experts 2, 3 and 5 (s(0.25) = 0.562
        // is third above s(0.125) = 0.531 of group 3, not kept).
        // A tie at the k-th expert: expert 4 (group 2) takes expert 3's logit.
        let mut tie = base.clone();
        tie.t = 1;
        tie.logits.truncate(8);
        tie.gw.truncate(3);
        let plain = tie.clone();
        tie.logits[4] = tie.logits[3];
        let c = classify(&tie);
        assert!(c.contains(&Class::KthTie), "{c:?}");
        assert!(!c.contains(&Class::KthNearTie));
        // One ulp apart in u instead (s(0.25) + 0 is u).
        let mut near = plain.clone();
        let u3 = score(near.logits[3]);
        near.logits[4] = logit_for_u(step(u3, -1), 0.0).unwrap();
        let c = classify(&near);
        assert!(c.contains(&Class::KthNearTie) && !c.contains(&Class::KthTie), "{c:?}");
        // Two ulps apart is neither.
        let mut far = plain.clone();
        far.logits[4] = logit_for_u(step(u3, -2), 0.0).unwrap();
        let c = classify(&far);
        assert!(!c.contains(&Class::KthNearTie) && !c.contains(&Class::KthTie), "{c:?}");

        // The tie is read in u, not in x or s: equal logits with different
        // biases are no tie; different logits that meet in u are.
        let mut biased = tie.clone();
        biased.bias[4] = 0.125;
        assert!(!classify(&biased).contains(&Class::KthTie));
        let mut meet = plain.clone();
        meet.bias[4] = 0.125;
        meet.logits[4] = logit_for_u(score(meet.logits[3]), 0.125).unwrap();
        assert!(classify(&meet).contains(&Class::KthTie));

        // A group-score tie: group 3 gets group 2's values, at the L boundary.
        let mut gt = plain.clone();
        gt.logits[6] = gt.logits[4];
        gt.logits[7] = gt.logits[5];
        gt.topk_groups = 1;
        gt.k = 2;
        gt.gw.truncate(2);
        let c = classify(&gt);
        assert!(!c.contains(&Class::GroupScoreTie));
        gt.logits[6] = gt.logits[2];
        gt.logits[7] = gt.logits[3];
        assert!(classify(&gt).contains(&Class::GroupScoreTie), "{:?}", classify(&gt));

        // In-group tie, all equal.
        let mut ig = plain.clone();
        ig.logits[1] = ig.logits[0];
        assert!(classify(&ig).contains(&Class::InGroupTie));
        let mut eq = plain.clone();
        eq.logits.fill(0.75);
        let c = classify(&eq);
        assert!(c.contains(&Class::AllEqual) && c.contains(&Class::KthTie) && c.contains(&Class::GroupScoreTie));

        // The bias reorders: a large bias on expert 0 (group 0, not kept).
        let mut br = plain.clone();
        br.bias[0] = 1.0;
        assert!(classify(&br).contains(&Class::BiasReorders));
        br.bias[0] = 2f32.powi(-30);
        assert!(!classify(&br).contains(&Class::BiasReorders));

        // Saturation and tiny scores.
        let ed = edges();
        let mut sat = plain.clone();
        sat.logits[0] = ed.zero_max;
        sat.logits[1] = ed.one_min;
        sat.logits[2] = ed.one_minus_ulp.0;
        sat.logits[3] = -80.0;
        let c = classify(&sat);
        for class in [Class::SaturatedZero, Class::SaturatedOne, Class::OneMinusUlp, Class::TinyScore] {
            assert!(c.contains(&class), "{class}");
        }
        sat.logits[0] = step(ed.zero_max, 1);
        sat.logits[1] = step(ed.one_minus_ulp.0, -1);
        sat.logits[2] = 0.0;
        sat.logits[3] = -60.0;
        let c = classify(&sat);
        for class in [Class::SaturatedZero, Class::SaturatedOne, Class::OneMinusUlp] {
            assert!(!c.contains(&class), "{class}");
        }
        // s just above zero_max is 1 / (a huge exp), about 2.9e-39: subnormal.
        let s0 = score(sat.logits[0]);
        assert!(s0 > 0.0 && !s0.is_normal(), "{s0:e}");
        assert!(c.contains(&Class::TinyScore));
        sat.logits[0] = 0.0;
        assert!(!classify(&sat).contains(&Class::TinyScore), "s(-60) = 8.8e-27 is not tiny");
        // -inf saturates to 0 but is non-finite, not "saturated".
        let mut inf = plain.clone();
        inf.logits[0] = f32::NEG_INFINITY;
        let c = classify(&inf);
        assert!(c.contains(&Class::NonFiniteValid) && !c.contains(&Class::SaturatedZero));
        inf.padding = Some(vec![true]);
        let c = classify(&inf);
        assert!(c.contains(&Class::PoisonedPadding) && !c.contains(&Class::NonFiniteValid));

        // The clamp tie: s exactly 0 but for one or two tiny values summing to
        // eps, only with the fused loss, only in a valid row.
        let (x1, x2) = ed.clamp[0];
        let mut ct = plain.clone();
        ct.logits.fill(-1.0e4);
        ct.logits[2] = x1;
        if let Some(x2) = x2 {
            ct.logits[6] = x2;
        }
        assert!(!classify(&ct).contains(&Class::ClampTie), "no fused loss");
        ct.loss = Some(FusedLoss { clamp_tie: ClampTie::Inclusive, g: 1.0 });
        assert!(classify(&ct).contains(&Class::ClampTie));
        ct.padding = Some(vec![true]);
        assert!(!classify(&ct).contains(&Class::ClampTie), "padding row");
        ct.padding = None;
        ct.logits[2] = step(x1, -20);
        assert!(!classify(&ct).contains(&Class::ClampTie));
    }
}
