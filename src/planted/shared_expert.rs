//! The planted bugs of `shared_expert` (see
//! [`crate::model::SharedExpertModel`] for the branches that make them).
//! They run on the `serial` profile. Each is a mistake a GEMM/SwiGLU kernel
//! author has shipped or is one edit away from.

/// The T at and below which the `small-t-split-k` bug splits K (see
/// [`SharedExpertBug::SmallTSplitK`]).
pub const SMALL_T: usize = 4;

/// A deliberate mistake in the shared expert.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SharedExpertBug {
    /// Every dot product contracted into fused multiply-adds
    /// (`acc = fma(a, b, acc)`): the same bits as mul-then-add only while
    /// every product is exact, which a bf16 x bf16 product is unless it
    /// falls below 2^-126.
    Fma,
    /// Split-K of 2: every dot product as two partial sums over the two
    /// halves of K (each from +0.0), added at the end.
    SplitK,
    /// bf16 rounding by truncation (the low 16 bits dropped) instead of
    /// round-to-nearest-even.
    Bf16Truncate,
    /// h rounded twice: silu = g * sig rounded to bf16 before the multiply
    /// by u (an "activation in bf16" epilogue).
    HRoundedTwice,
    /// dX rounded to bf16 (it is returned in f32, unrounded).
    DxRounded,
    /// The sigmoid through CUDA's `__expf` (ex2.approx) instead of a
    /// correctly rounded exp.
    FastExp,
    /// Gate and up halves of w1 swapped: g from rows F..2F, u from 0..F.
    GateUpSwapped,
    /// Split-K of 2 only when T <= [`SMALL_T`]: a small batch has too few
    /// output tiles to fill the GPU, so the kernel splits K there. Each
    /// row then depends on the batch size.
    SmallTSplitK,
    /// bf16 rounding as `(bits + 0x8000) & 0xffff0000`: round half away
    /// from zero instead of to even, the hand-rolled conversion; wrong only
    /// on exact ties.
    Bf16HalfAway,
}

impl SharedExpertBug {
    pub const ALL: [SharedExpertBug; 9] = [
        SharedExpertBug::Fma,
        SharedExpertBug::SplitK,
        SharedExpertBug::Bf16Truncate,
        SharedExpertBug::HRoundedTwice,
        SharedExpertBug::DxRounded,
        SharedExpertBug::FastExp,
        SharedExpertBug::GateUpSwapped,
        SharedExpertBug::SmallTSplitK,
        SharedExpertBug::Bf16HalfAway,
    ];

    pub fn name(self) -> &'static str {
        match self {
            SharedExpertBug::Fma => "fma",
            SharedExpertBug::SplitK => "split-k",
            SharedExpertBug::Bf16Truncate => "bf16-truncate",
            SharedExpertBug::HRoundedTwice => "h-rounded-twice",
            SharedExpertBug::DxRounded => "dx-rounded",
            SharedExpertBug::FastExp => "fast-exp",
            SharedExpertBug::GateUpSwapped => "gate-up-swapped",
            SharedExpertBug::SmallTSplitK => "small-t-split-k",
            SharedExpertBug::Bf16HalfAway => "bf16-half-away",
        }
    }

    pub fn by_name(name: &str) -> Option<SharedExpertBug> {
        SharedExpertBug::ALL.into_iter().find(|b| b.name() == name)
    }

    pub fn describe(self) -> &'static str {
        match self {
            SharedExpertBug::Fma => "dot products with fused multiply-adds (inexact on underflowing products)",
            SharedExpertBug::SplitK => "split-K of 2: each dot product as two half sums added at the end",
            SharedExpertBug::Bf16Truncate => "bf16 rounding by truncation instead of round-to-nearest-even",
            SharedExpertBug::HRoundedTwice => "silu rounded to bf16 before the multiply by u (h rounded twice)",
            SharedExpertBug::DxRounded => "dX rounded to bf16 (it is returned unrounded)",
            SharedExpertBug::FastExp => "sigmoid through a fast approximate exp (__expf)",
            SharedExpertBug::GateUpSwapped => "gate and up halves of w1 swapped",
            SharedExpertBug::SmallTSplitK => "split-K of 2 only when T <= 4 (rows depend on the batch size)",
            SharedExpertBug::Bf16HalfAway => "bf16 rounding (bits + 0x8000): ties away from zero, not to even",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_unique() {
        for b in SharedExpertBug::ALL {
            assert_eq!(SharedExpertBug::by_name(b.name()), Some(b));
            assert!(!b.describe().is_empty());
        }
        let mut names: Vec<&str> = SharedExpertBug::ALL.iter().map(|b| b.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), SharedExpertBug::ALL.len());
    }
}
