//! Invalid inputs: one variant per validation rule.

use oracles::case::router::RouterCase;
use oracles::case::MAX_OFFSET;

/// One invalid variant of `case` per validation rule of
/// docs/ops/router.md#validation, each named; every one must fail `validate()`.
pub fn invalid_variants(case: &RouterCase) -> Vec<(&'static str, RouterCase)> {
    let with = |f: &dyn Fn(&mut RouterCase)| {
        let mut c = case.clone();
        f(&mut c);
        c
    };
    let max_k = case.topk_groups * case.group_size();
    vec![
        ("t-zero", with(&|c| c.t = 0)),
        ("one-expert", with(&|c| c.e = 1)),
        (
            "logits-length",
            with(&|c| {
                c.logits.pop();
            }),
        ),
        (
            "bias-length",
            with(&|c| {
                c.bias.pop();
            }),
        ),
        ("bias-nan", with(&|c| c.bias[0] = f32::NAN)),
        ("bias-inf", with(&|c| c.bias[c.e - 1] = f32::INFINITY)),
        ("bias-neg-inf", with(&|c| c.bias[0] = f32::NEG_INFINITY)),
        ("groups-zero", with(&|c| c.groups = 0)),
        ("groups-not-dividing-e", with(&|c| c.groups = c.e + 1)),
        ("one-expert-per-group", with(&|c| c.groups = c.e)),
        ("topk-groups-zero", with(&|c| c.topk_groups = 0)),
        ("topk-groups-above-g", with(&|c| c.topk_groups = c.groups + 1)),
        ("k-zero", with(&|c| c.k = 0)),
        ("k-above-l-e-over-g", with(&|c| c.k = max_k + 1)),
        ("route-scale-zero", with(&|c| c.route_scale = 0.0)),
        ("route-scale-neg-zero", with(&|c| c.route_scale = -0.0)),
        ("route-scale-negative", with(&|c| c.route_scale = -2.5)),
        ("route-scale-inf", with(&|c| c.route_scale = f32::INFINITY)),
        ("route-scale-nan", with(&|c| c.route_scale = f32::NAN)),
        ("gw-length", with(&|c| c.gw.push(0.0))),
        ("padding-length", with(&|c| c.padding = Some(vec![false; c.t + 1]))),
        ("offset-4", with(&|c| c.layout.offset = MAX_OFFSET + 1)),
        ("row-stride-below-e", with(&|c| c.layout.row_stride = c.e - 1)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::router::{generate, hand_case};
    use crate::gen::GenConfig;
    use proptest::test_runner::{RngAlgorithm, TestRng};

    #[test]
    fn invalid_variants_fail_validation() {
        let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
        let mut cases = vec![hand_case()];
        cases.extend((0..300).map(|_| generate(&mut rng, &GenConfig::default())));
        for c in &cases {
            let vs = invalid_variants(c);
            assert_eq!(vs.len(), 23);
            for (name, v) in vs {
                assert!(v.validate().is_err(), "{name} accepted: {v:?}");
            }
        }
    }
}
