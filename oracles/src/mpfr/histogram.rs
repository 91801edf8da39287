//! How close each judged output came to its rigorous bound: the distribution
//! of |computed - exact| / bound, in power-of-two bins.
//!
//! A row's worst ratio says whether the bound held and how tight it is at
//! one output; the distribution says whether that output is typical. It is
//! kept as integer counts in a fixed number of bins, so that it costs the
//! same memory for ten cases as for ten million, and so that adding the
//! histograms of a run's shards (in any order) gives exactly the unsharded
//! run's (`bitparity merge`).

/// Exponent of the lowest bin: every positive ratio at most 2^MIN_EXP lands
/// in it (a ratio that small says only "far inside the bound").
pub const MIN_EXP: i32 = -64;
/// Exponent of the highest bin: every ratio above 2^(MAX_EXP - 1), infinite
/// ones included, lands in it (anything above 1 is a failure anyway).
pub const MAX_EXP: i32 = 16;
/// The number of power-of-two bins.
pub const BINS: usize = (MAX_EXP - MIN_EXP + 1) as usize;

/// Counts of outputs by |error| / bound. Each output judged lands in
/// exactly one of `zero`, `bins`, `undetermined`, `unbounded`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RatioHistogram {
    /// Outputs whose computed value is the exact one (error 0; both NaN,
    /// or the same infinity).
    pub zero: u64,
    /// `bins[i]`: outputs with ratio in (2^(e-1), 2^e], e = MIN_EXP + i.
    /// Bins are closed above so that ratio 1 (exactly at the bound, still
    /// within it) is in the bin of e = 0 and every failure lies above it.
    pub bins: [u64; BINS],
    /// Outputs whose exact value's correct f32 rounding stayed undetermined:
    /// judged like any other, but kept apart so that their ratios (measured
    /// against an exact value known only to within its own bound) do not
    /// mix with the settled ones.
    pub undetermined: u64,
    /// Outputs with no finite bound: counted, not judged.
    pub unbounded: u64,
}

impl Default for RatioHistogram {
    fn default() -> Self {
        RatioHistogram { zero: 0, bins: [0; BINS], undetermined: 0, unbounded: 0 }
    }
}

/// The bin exponent e of a positive ratio r: the least e with r <= 2^e,
/// clamped to [MIN_EXP, MAX_EXP]. Read off the f64's bits, so that exact
/// powers of two land exactly (a `log2` could round 2^-30 + tiny either way).
pub fn bin_exponent(r: f64) -> i32 {
    if r.is_nan() || r > 2f64.powi(MAX_EXP - 1) {
        // Infinite (a zero bound with a non-zero error) or huge: the top bin.
        // NaN never comes from the judging; if it ever did, the top bin (the
        // failures' side) is where it must be seen.
        return MAX_EXP;
    }
    if r <= 2f64.powi(MIN_EXP) {
        return MIN_EXP;
    }
    let bits = r.to_bits();
    // Normal here: 2^MIN_EXP is far above f64's subnormals.
    let exp = ((bits >> 52) & 0x7ff) as i32 - 1023;
    let power_of_two = bits & ((1u64 << 52) - 1) == 0;
    (if power_of_two { exp } else { exp + 1 }).clamp(MIN_EXP, MAX_EXP)
}

impl RatioHistogram {
    /// Counts one judged output's ratio (0: exact).
    pub fn add_ratio(&mut self, r: f64) {
        if r == 0.0 {
            self.zero += 1;
        } else {
            self.bins[(bin_exponent(r) - MIN_EXP) as usize] += 1;
        }
    }

    /// Adds another histogram's counts (a later case, another shard).
    pub fn merge(&mut self, other: &RatioHistogram) {
        self.zero += other.zero;
        for (a, b) in self.bins.iter_mut().zip(other.bins.iter()) {
            *a += b;
        }
        self.undetermined += other.undetermined;
        self.unbounded += other.unbounded;
    }

    /// Every output counted, in whichever bar.
    pub fn total(&self) -> u64 {
        self.zero + self.bins.iter().sum::<u64>() + self.undetermined + self.unbounded
    }

    /// The non-empty bins as (exponent, count), lowest first.
    pub fn nonzero_bins(&self) -> impl Iterator<Item = (i32, u64)> + '_ {
        self.bins.iter().enumerate().filter(|(_, &n)| n > 0).map(|(i, &n)| (MIN_EXP + i as i32, n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_are_closed_above_and_clamped_at_both_ends() {
        assert_eq!(bin_exponent(1.0), 0, "at the bound: still the last bin within it");
        assert_eq!(bin_exponent(1.0 + f64::EPSILON), 1);
        assert_eq!(bin_exponent(0.5), -1);
        assert_eq!(bin_exponent(0.75), 0);
        assert_eq!(bin_exponent(2f64.powi(-30)), -30);
        assert_eq!(bin_exponent(2f64.powi(-30) * 1.5), -29);
        assert_eq!(bin_exponent(1e-300), MIN_EXP);
        assert_eq!(bin_exponent(f64::MIN_POSITIVE / 4.0), MIN_EXP);
        assert_eq!(bin_exponent(f64::INFINITY), MAX_EXP);
        assert_eq!(bin_exponent(1e300), MAX_EXP);
        assert_eq!(bin_exponent(2f64.powi(MAX_EXP - 1)), MAX_EXP - 1);
        assert_eq!(bin_exponent(2f64.powi(MAX_EXP - 1) * 1.5), MAX_EXP);
    }

    #[test]
    fn counts_add_up_and_merge_in_any_order() {
        let (mut a, mut b) = (RatioHistogram::default(), RatioHistogram::default());
        for r in [0.0, 0.3, 1.0, 5.0, f64::INFINITY] {
            a.add_ratio(r);
        }
        b.add_ratio(0.0);
        b.unbounded += 2;
        b.undetermined += 1;
        assert_eq!(a.total(), 5);
        let (mut ab, mut ba) = (a.clone(), b.clone());
        ab.merge(&b);
        ba.merge(&a);
        assert_eq!(ab, ba);
        assert_eq!(ab.total(), 9);
        assert_eq!(ab.zero, 2);
        assert_eq!(ab.nonzero_bins().collect::<Vec<_>>(), vec![(-1, 1), (0, 1), (3, 1), (MAX_EXP, 1)]);
    }
}
