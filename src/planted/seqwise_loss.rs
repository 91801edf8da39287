//! The planted bugs of `seqwise_loss` (see [`crate::model::SeqwiseModel`]
//! for the branches that make them). They run on the `serial` profile, the
//! profile of the simplest kernel (a thread per row), where each mistake
//! shows on the smallest inputs.

/// A deliberate mistake, each one that real kernels have shipped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SeqwiseBug {
    /// The unbiased objective's backward uses the L1 formula (abs-sum
    /// denominator, sign factor, clamp gate) while its forward divides by
    /// the plain sum.
    UnbiasedL1Backward,
    /// The clamp gate on the wrong side of the tie (>= for Strict, > for Inclusive).
    GateWrongSide,
    /// The backward's quotient term contracted into an FMA: acc = fma(-a_e, x, acc).
    FmaQuotient,
    /// Padding rows' map entries counted in C.
    PaddingCountedInC,
    /// Padding rows' scores read into the token sums P_e (NaN poisoning).
    PaddingRead,
    /// Top-k ties broken toward the higher expert index.
    TopkTiesHigh,
    /// The storage offset ignored: rows read from the aligned base.
    OffsetIgnored,
    /// q_t summed in another order than the profile says.
    WrongOrder,
    /// f_e computed as c_e * (E / C) instead of (c_e / C) * E.
    FreqReassociated,
}

impl SeqwiseBug {
    pub const ALL: [SeqwiseBug; 9] = [
        SeqwiseBug::UnbiasedL1Backward,
        SeqwiseBug::GateWrongSide,
        SeqwiseBug::FmaQuotient,
        SeqwiseBug::PaddingCountedInC,
        SeqwiseBug::PaddingRead,
        SeqwiseBug::TopkTiesHigh,
        SeqwiseBug::OffsetIgnored,
        SeqwiseBug::WrongOrder,
        SeqwiseBug::FreqReassociated,
    ];

    pub fn name(self) -> &'static str {
        match self {
            SeqwiseBug::UnbiasedL1Backward => "unbiased-l1-backward",
            SeqwiseBug::GateWrongSide => "gate-wrong-side",
            SeqwiseBug::FmaQuotient => "fma-quotient",
            SeqwiseBug::PaddingCountedInC => "padding-counted-in-c",
            SeqwiseBug::PaddingRead => "padding-read",
            SeqwiseBug::TopkTiesHigh => "topk-ties-high",
            SeqwiseBug::OffsetIgnored => "offset-ignored",
            SeqwiseBug::WrongOrder => "wrong-order",
            SeqwiseBug::FreqReassociated => "freq-reassociated",
        }
    }

    pub fn by_name(name: &str) -> Option<SeqwiseBug> {
        SeqwiseBug::ALL.into_iter().find(|b| b.name() == name)
    }

    pub fn describe(self) -> &'static str {
        match self {
            SeqwiseBug::UnbiasedL1Backward => "unbiased backward with the L1 formula (abs-sum, sign, gate)",
            SeqwiseBug::GateWrongSide => "clamp gate on the wrong side of the tie",
            SeqwiseBug::FmaQuotient => "FMA contraction in the backward's quotient term",
            SeqwiseBug::PaddingCountedInC => "padding rows counted in C",
            SeqwiseBug::PaddingRead => "padding rows' scores read into the sums (NaN poisoning)",
            SeqwiseBug::TopkTiesHigh => "top-k ties broken toward the higher expert index",
            SeqwiseBug::OffsetIgnored => "storage offset ignored",
            SeqwiseBug::WrongOrder => "q_t reduced in another order than the profile's",
            SeqwiseBug::FreqReassociated => "f_e = c_e * (E / C) instead of (c_e / C) * E",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_unique() {
        for b in SeqwiseBug::ALL {
            assert_eq!(SeqwiseBug::by_name(b.name()), Some(b));
            assert!(!b.describe().is_empty());
        }
        let mut names: Vec<&str> = SeqwiseBug::ALL.iter().map(|b| b.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), SeqwiseBug::ALL.len());
        assert_eq!(SeqwiseBug::by_name("no-such-bug"), None);
    }
}
