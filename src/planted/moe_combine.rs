//! The planted bugs of `moe_combine` (see [`crate::model::MoeCombineModel`]
//! for the branches that make them). They run on the `serial` profile. Each
//! is a mistake dispatch and combine kernels have shipped or are one edit
//! away from: the index bugs of capacity, slot order and padding, and the
//! order bugs of a scatter.

/// A deliberate mistake in the dispatch or the combine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MoeCombineBug {
    /// The combine as an atomic scatter: each slot's product added into y
    /// (and each g_disp row into dx) in the order the atomics landed, here
    /// the slots descending, instead of the kept choices by ascending j.
    AtomicOrder,
    /// Each expert keeps C + 1 choices: `rank <= C` where `rank < C` was
    /// meant.
    CapacityOffByOne,
    /// Inside an expert, the slots ordered by choice j before token t (the
    /// flattened ids walked column by column) instead of by token.
    ChoiceMajorSlots,
    /// Padding tokens dispatched like the others: they take slots and
    /// capacity, and their rows reach x_disp.
    PaddingDispatched,
    /// dw summed over h by a warp's butterfly instead of the profile's
    /// serial loop.
    DwOrder,
    /// A choice dropped by the capacity gets a gradient: its rank clamped to
    /// the expert's last kept slot (an index clamp where a drop was meant),
    /// so dw reads that slot's x_exp row.
    DroppedGrad,
    /// The combine's multiply-adds fused (`acc = fma(w, x_exp, acc)`, what
    /// nvcc contracts `acc += w * x` to by default): the product is not
    /// rounded on its own.
    Fma,
}

impl MoeCombineBug {
    pub const ALL: [MoeCombineBug; 7] = [
        MoeCombineBug::AtomicOrder,
        MoeCombineBug::CapacityOffByOne,
        MoeCombineBug::ChoiceMajorSlots,
        MoeCombineBug::PaddingDispatched,
        MoeCombineBug::DwOrder,
        MoeCombineBug::DroppedGrad,
        MoeCombineBug::Fma,
    ];

    pub fn name(self) -> &'static str {
        match self {
            MoeCombineBug::AtomicOrder => "atomic-order",
            MoeCombineBug::CapacityOffByOne => "capacity-off-by-one",
            MoeCombineBug::ChoiceMajorSlots => "choice-major-slots",
            MoeCombineBug::PaddingDispatched => "padding-dispatched",
            MoeCombineBug::DwOrder => "dw-order",
            MoeCombineBug::DroppedGrad => "dropped-grad",
            MoeCombineBug::Fma => "fma",
        }
    }

    pub fn by_name(name: &str) -> Option<MoeCombineBug> {
        MoeCombineBug::ALL.into_iter().find(|b| b.name() == name)
    }

    pub fn describe(self) -> &'static str {
        match self {
            MoeCombineBug::AtomicOrder => "y and dx summed over the slots descending, as atomics may land",
            MoeCombineBug::CapacityOffByOne => "each expert keeps C + 1 choices (rank <= C)",
            MoeCombineBug::ChoiceMajorSlots => "inside an expert, slots ordered by choice j before token",
            MoeCombineBug::PaddingDispatched => "padding tokens dispatched: they take slots and capacity",
            MoeCombineBug::DwOrder => "dw summed by a warp butterfly instead of serially",
            MoeCombineBug::DroppedGrad => "a dropped choice's dw read from its expert's last kept slot",
            MoeCombineBug::Fma => "the combine's multiply-adds fused (fma) instead of rounded apart",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_unique() {
        for b in MoeCombineBug::ALL {
            assert_eq!(MoeCombineBug::by_name(b.name()), Some(b));
            assert!(!b.describe().is_empty());
        }
        let mut names: Vec<&str> = MoeCombineBug::ALL.iter().map(|b| b.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), MoeCombineBug::ALL.len());
    }
}
