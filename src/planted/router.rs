//! The planted bugs of `router` (see [`crate::model::RouterModel`] for the
//! branches that make them). They run on the `serial` profile. Each is a
//! mistake real routing kernels have shipped or are one edit away from.

/// A deliberate mistake in the router.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RouterBug {
    /// The bias leaks into the weights: w gathered from u = s + bias instead
    /// of s (the biased scores are at hand right after the selection).
    BiasInWeights,
    /// The group score from the group's largest u alone (DeepSeek-V2's
    /// group-limited routing, reused for V3) instead of the sum of the two
    /// largest.
    GroupTop1,
    /// Every selection (the two largest of a group, the kept groups, the
    /// experts) breaks ties toward the higher index (a `>=` in the argmax,
    /// or a scan from the top).
    TiesHigh,
    /// The normalising sum D over the k weights in another order than the
    /// profile's (a warp butterfly over the k lanes for a serial profile,
    /// serial for any other).
    NormOrder,
    /// The sigmoid through CUDA's `__expf` (ex2.approx of x * log2(e), a
    /// 22-bit result, subnormals flushed) instead of a correctly rounded exp.
    FastExp,
    /// The sigmoid's derivative associated as (s * (1 - s)) * gs instead of
    /// (gs * (1 - s)) * s.
    SigmoidGradAssoc,
    /// Padding tokens counted: in the counts, and in the fused loss (its
    /// frequencies and its gradient, which they should not receive).
    PaddingCounted,
    /// D = sum of the weights without the + 1e-20 (vLLM's `grouped_topk`
    /// renormalises by the plain sum): a token whose chosen scores all
    /// underflow to 0 gets NaN weights (0 / 0) instead of 0.
    NormWithoutEps,
    /// route_scale applied before normalising: (w * route_scale) / D
    /// instead of (w / D) * route_scale (the scale folded into the
    /// numerator to save a multiply).
    ScaleBeforeNorm,
}

impl RouterBug {
    pub const ALL: [RouterBug; 9] = [
        RouterBug::BiasInWeights,
        RouterBug::GroupTop1,
        RouterBug::TiesHigh,
        RouterBug::NormOrder,
        RouterBug::FastExp,
        RouterBug::SigmoidGradAssoc,
        RouterBug::PaddingCounted,
        RouterBug::NormWithoutEps,
        RouterBug::ScaleBeforeNorm,
    ];

    pub fn name(self) -> &'static str {
        match self {
            RouterBug::BiasInWeights => "bias-in-weights",
            RouterBug::GroupTop1 => "group-top1",
            RouterBug::TiesHigh => "ties-high",
            RouterBug::NormOrder => "norm-order",
            RouterBug::FastExp => "fast-exp",
            RouterBug::SigmoidGradAssoc => "sigmoid-grad-assoc",
            RouterBug::PaddingCounted => "padding-counted",
            RouterBug::NormWithoutEps => "norm-without-eps",
            RouterBug::ScaleBeforeNorm => "scale-before-norm",
        }
    }

    pub fn by_name(name: &str) -> Option<RouterBug> {
        RouterBug::ALL.into_iter().find(|b| b.name() == name)
    }

    pub fn describe(self) -> &'static str {
        match self {
            RouterBug::BiasInWeights => "weights gathered from the biased scores u = s + bias instead of s",
            RouterBug::GroupTop1 => "group score from the largest u alone instead of the two largest",
            RouterBug::TiesHigh => "selection ties broken toward the higher index",
            RouterBug::NormOrder => "the normalising sum D in another order than the profile's",
            RouterBug::FastExp => "sigmoid through a fast approximate exp (__expf) instead of a correctly rounded one",
            RouterBug::SigmoidGradAssoc => "sigmoid derivative associated as (s * (1 - s)) * gs",
            RouterBug::PaddingCounted => "padding tokens counted in the counts and the fused loss",
            RouterBug::NormWithoutEps => "D = sum of the weights without the + 1e-20 (0/0 = NaN weights)",
            RouterBug::ScaleBeforeNorm => "(w * route_scale) / D instead of (w / D) * route_scale",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_unique() {
        for b in RouterBug::ALL {
            assert_eq!(RouterBug::by_name(b.name()), Some(b));
            assert!(!b.describe().is_empty());
        }
        let mut names: Vec<&str> = RouterBug::ALL.iter().map(|b| b.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), RouterBug::ALL.len());
    }
}
