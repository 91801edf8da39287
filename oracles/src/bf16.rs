//! Rounding to bf16 as a discrete decision
//! (docs/ops/README.md#discrete-decisions, docs/ops/shared_expert.md#forward).
//!
//! bf16 is the upper half of an f32: 8 significant bits, f32's exponent
//! range. Rounding is round-to-nearest-even; a value at or beyond the
//! midpoint between the largest bf16 (2^128 - 2^120) and 2^128 becomes
//! +-inf; NaN stays NaN; subnormals (down to 2^-133) are kept; a value that
//! rounds to zero keeps its sign (IEEE).
//!
//! `shared_expert` rounds four quantities to bf16 (h, y, dh, dz). Each
//! rounding is a *decision*, like the router's selections: the profile takes
//! it on its f32 value, and the exact oracle takes the profile's (for h, dh
//! and dz, which feed later sums) or compares its own with it (for the output
//! y). A value type reports a rounding as a [`Rounding`]: what its own value
//! rounds to, and whether every real within its bound rounds there too,
//! which is what tells a `decision-near-tie` from a contradiction.

/// The bf16 nearest to `x` (ties to even), as the f32 it is exactly. One
/// rounding, from the f64 value itself: an f32 argument (exactly an f64)
/// gives the same bits a GPU's `__float2bfloat16_rn` does.
///
/// The bf16 grid near |x| has the quantum 2^k, k = max(e, -126) - 7 for
/// 2^e <= |x| < 2^(e+1): |x| / 2^k is an exact power-of-two scaling, its
/// round-half-even integer n <= 2^8, and n 2^k is on the bf16 grid (exact in
/// f64 and in f32), or 2^128, which `as f32` turns into inf as IEEE does.
pub fn round_f64(x: f64) -> f32 {
    if x.is_nan() {
        return f32::NAN;
    }
    if x.is_infinite() || x == 0.0 {
        return x as f32;
    }
    let a = x.abs();
    // 2^-134 is the midpoint between +0 and the smallest bf16 subnormal
    // 2^-133 and rounds to even (zero); everything below it too.
    if a <= pow2(-134) {
        return if x < 0.0 { -0.0 } else { 0.0 };
    }
    if a >= pow2(128) {
        return if x < 0.0 { f32::NEG_INFINITY } else { f32::INFINITY };
    }
    // a is a normal f64 here (a > 2^-134): e from its exponent bits.
    let e = ((a.to_bits() >> 52) & 0x7ff) as i32 - 1023;
    let k = e.max(-126) - 7;
    let n = (a * pow2(-k)).round_ties_even();
    let r = (n * pow2(k)) as f32;
    if x < 0.0 {
        -r
    } else {
        r
    }
}

/// 2^k as an f64, exactly, for -1022 <= k <= 1023.
fn pow2(k: i32) -> f64 {
    debug_assert!((-1022..=1023).contains(&k));
    f64::from_bits(((1023 + k) as u64) << 52)
}

/// `x` rounded to bf16 (see [`round_f64`]).
pub fn round_f32(x: f32) -> f32 {
    round_f64(x as f64)
}

/// Whether `x` lies exactly halfway between two bf16 neighbours (its low 16
/// bits are 0x8000): the one case where the rule's ties-to-even decides.
/// A generator aims at these and classifies by them.
pub fn is_tie(x: f32) -> bool {
    x.is_finite() && x.to_bits() & 0xffff == 0x8000
}

/// Whether two bf16 decisions are the same rounding: equal bits, any NaN
/// matching any NaN, and +0.0 matching -0.0 (the sign of an exact zero is
/// not the real value's: see [`crate::mpfr::correctly_rounded`]).
pub fn same_rounding(a: f32, b: f32) -> bool {
    crate::same_bits(a, b) || (a == 0.0 && b == 0.0)
}

/// A value type's rounding of one of its values to bf16 (see the module
/// docs and [`crate::num::Num::round_bf16`]).
#[derive(Clone, Debug)]
pub struct Rounding<N> {
    /// The bf16 this type's value rounds to (as an f32); `None` where the
    /// type cannot tell: an exact value whose bound holds a rounding
    /// boundary at this precision, a rational that is not a finite one.
    pub decision: Option<f32>,
    /// Every real within the value's bound rounds to `decision` (to a zero
    /// of either sign, for a bound around zero). Never true for plain f32,
    /// which carries no bound.
    pub certain: bool,
    /// The rounded value where this type decides for itself, with a bound on
    /// its distance from the rounding of the exact value: 0 when `certain`,
    /// otherwise as far as the rounding of the bound's ends reaches.
    pub value: N,
}

/// A bf16 rounding taken by a run: the value it took and whether the run's
/// value type vouched that the exact value rounds there too ([`Rounding`]'s
/// `certain`). What the profile's run records and the exact run is given.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bf16Decision {
    /// A bf16 value (as the f32 it is exactly), or NaN.
    pub value: f32,
    pub certain: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(bits: u16) -> f32 {
        f32::from_bits((bits as u32) << 16)
    }

    #[test]
    fn ties_go_to_even() {
        // 1 + 2^-8 is halfway between 1 (0x3f80, even) and 1 + 2^-7
        // (0x3f81, odd): down. 1 + 3 2^-8 is halfway between 0x3f81 (odd)
        // and 0x3f82 (even): up.
        assert_eq!(round_f32(1.0 + 2f32.powi(-8)), 1.0);
        assert_eq!(round_f32(1.0 + 3.0 * 2f32.powi(-8)), b(0x3f82));
        assert_eq!(round_f32(-(1.0 + 3.0 * 2f32.powi(-8))), b(0xbf82));
        // One f32 ulp off the midpoint decides it.
        assert_eq!(round_f32(1.0 + 2f32.powi(-8) + 2f32.powi(-23)), b(0x3f81));
        assert_eq!(round_f32(1.0 + 3.0 * 2f32.powi(-8) - 2f32.powi(-23)), b(0x3f81));
    }

    #[test]
    fn subnormals_zeros_overflow_and_nan() {
        // The smallest bf16 subnormal is 2^-133 (bits 0x0001); 2^-134 is
        // the midpoint to zero (even): zero; 3 2^-134 is between 0x0001
        // (odd) and 0x0002 (even): 0x0002.
        assert_eq!(round_f64(2f64.powi(-133)), b(0x0001));
        assert_eq!(round_f64(2f64.powi(-134)).to_bits(), 0);
        assert_eq!(round_f64(-(2f64.powi(-134))).to_bits(), 0x8000_0000);
        assert_eq!(round_f64(2f64.powi(-134) * 1.0000001), b(0x0001));
        assert_eq!(round_f64(3.0 * 2f64.powi(-134)), b(0x0002));
        assert_eq!(round_f64(1e-300).to_bits(), 0);
        // The largest subnormal 0x007f = 127 2^-133; 127.5 2^-133 ties to
        // 128 2^-133 = 2^-126 (even), the smallest normal.
        assert_eq!(round_f64(127.5 * 2f64.powi(-133)), f32::MIN_POSITIVE);
        assert_eq!(round_f64(127.25 * 2f64.powi(-133)), b(0x007f));
        // The largest bf16 is 0x7f7f = 2^128 - 2^120; the midpoint to 2^128
        // rounds to 2^128 (even): inf. f32::MAX is above it.
        let max = 2f64.powi(128) - 2f64.powi(120);
        assert_eq!(round_f64(max), b(0x7f7f));
        assert_eq!(round_f64(max + 2f64.powi(119) - 2f64.powi(100)), b(0x7f7f));
        assert_eq!(round_f64(max + 2f64.powi(119)), f32::INFINITY);
        assert_eq!(round_f32(f32::MAX), f32::INFINITY);
        assert_eq!(round_f32(f32::MIN), f32::NEG_INFINITY);
        assert_eq!(round_f64(1e300), f32::INFINITY);
        assert_eq!(round_f32(-0.0).to_bits(), 0x8000_0000);
        assert!(round_f32(f32::NAN).is_nan());
        assert_eq!(round_f32(f32::NEG_INFINITY), f32::NEG_INFINITY);
    }

    #[test]
    fn every_bf16_is_fixed_and_every_f32_rounds_to_a_neighbour() {
        // Independent of round_f64: the nearest of the two bf16 values that
        // truncation and truncation + 1 give, ties by the even low bit.
        for hi in 0..=0xffffu32 {
            let x = f32::from_bits(hi << 16);
            if x.is_nan() {
                continue;
            }
            assert_eq!(round_f32(x).to_bits(), x.to_bits(), "{x:e}");
            for lo in [1u32, 0x7fff, 0x8000, 0x8001, 0xffff] {
                let y = f32::from_bits((hi << 16) | lo);
                if y.is_nan() {
                    continue;
                }
                let up = (hi + 1) << 16; // the next bf16 away from zero (inf past the largest)
                let want = match lo.cmp(&0x8000) {
                    std::cmp::Ordering::Less => hi << 16,
                    std::cmp::Ordering::Greater => up,
                    std::cmp::Ordering::Equal => {
                        if hi & 1 == 0 {
                            hi << 16
                        } else {
                            up
                        }
                    }
                };
                assert_eq!(round_f32(y).to_bits(), want, "{:#010x}", y.to_bits());
            }
        }
    }

    #[test]
    fn ties_are_the_midpoints_only() {
        assert!(is_tie(1.0 + 2f32.powi(-8)) && is_tie(-(1.0 + 3.0 * 2f32.powi(-8))));
        assert!(is_tie(f32::from_bits(0x0000_8000)), "between +0 and the smallest subnormal");
        assert!(!is_tie(1.0) && !is_tie(1.0 + 2f32.powi(-8) + 2f32.powi(-23)));
        assert!(!is_tie(f32::from_bits(0x7f80_8000)), "a NaN is no tie");
    }

    #[test]
    fn same_rounding_ignores_zero_signs_and_nan_payloads() {
        assert!(same_rounding(0.0, -0.0));
        assert!(same_rounding(f32::NAN, f32::from_bits(0xffc0_0000)));
        assert!(!same_rounding(1.0, b(0x3f81)));
        assert!(!same_rounding(f32::NAN, 0.0));
    }
}
