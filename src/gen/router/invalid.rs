//! Invalid inputs: one variant per validation rule.

use crate::gen::common::variant;
use oracles::case::router::RouterCase;
use oracles::case::MAX_OFFSET;

/// One invalid variant of `case` per validation rule of
/// docs/ops/router.md#validation, each named; every one must fail `validate()`.
pub fn invalid_variants(case: &RouterCase) -> Vec<(&'static str, RouterCase)> {
    let max_k = case.topk_groups * case.group_size();
    vec![
        ("t-zero", variant(case, |c| c.t = 0)),
        ("one-expert", variant(case, |c| c.e = 1)),
        (
            "logits-length",
            variant(case, |c| {
                c.logits.pop();
            }),
        ),
        (
            "bias-length",
            variant(case, |c| {
                c.bias.pop();
            }),
        ),
        ("bias-nan", variant(case, |c| c.bias[0] = f32::NAN)),
        ("bias-inf", variant(case, |c| c.bias[c.e - 1] = f32::INFINITY)),
        ("bias-neg-inf", variant(case, |c| c.bias[0] = f32::NEG_INFINITY)),
        ("groups-zero", variant(case, |c| c.groups = 0)),
        ("groups-not-dividing-e", variant(case, |c| c.groups = c.e + 1)),
        ("one-expert-per-group", variant(case, |c| c.groups = c.e)),
        ("topk-groups-zero", variant(case, |c| c.topk_groups = 0)),
        ("topk-groups-above-g", variant(case, |c| c.topk_groups = c.groups + 1)),
        ("k-zero", variant(case, |c| c.k = 0)),
        ("k-above-l-e-over-g", variant(case, |c| c.k = max_k + 1)),
        ("route-scale-zero", variant(case, |c| c.route_scale = 0.0)),
        ("route-scale-neg-zero", variant(case, |c| c.route_scale = -0.0)),
        ("route-scale-negative", variant(case, |c| c.route_scale = -2.5)),
        ("route-scale-inf", variant(case, |c| c.route_scale = f32::INFINITY)),
        ("route-scale-nan", variant(case, |c| c.route_scale = f32::NAN)),
        ("gw-length", variant(case, |c| c.gw.push(0.0))),
        ("padding-length", variant(case, |c| c.padding = Some(vec![false; c.t + 1]))),
        ("offset-4", variant(case, |c| c.layout.offset = MAX_OFFSET + 1)),
        ("row-stride-below-e", variant(case, |c| c.layout.row_stride = c.e - 1)),
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
