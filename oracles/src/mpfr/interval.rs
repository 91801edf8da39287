//! Closed intervals of reals at [`FD_PREC`] bits, their ends rounded
//! outward at every operation: the arithmetic of the finite-difference
//! gradient checks ([`super::router`], [`super::shared_expert`]), kept apart
//! from [`super::Exact`] and from the generic profile code, so that a bug
//! there cannot hide on both sides of a check.

use rug::float::Round;
use rug::Float;

/// Precision of the finite differences (bits): the enclosures' widths
/// (2^-512 relative) divided by the step stay some 2^-400 below the values.
pub const FD_PREC: u32 = 512;

/// A closed interval [lo, hi] of reals at [`FD_PREC`] bits, its ends
/// rounded outward at every operation, so it holds the exact value of the
/// expression it was computed from. A NaN end stands for a NaN value.
#[derive(Clone, Debug)]
pub(crate) struct Iv {
    pub(crate) lo: Float,
    pub(crate) hi: Float,
}

impl Iv {
    pub(crate) fn point(x: Float) -> Iv {
        Iv { lo: x.clone(), hi: x }
    }
    pub(crate) fn of(x: f32) -> Iv {
        Iv::point(Float::with_val(FD_PREC, x))
    }
    pub(crate) fn nan() -> Iv {
        Iv::of(f32::NAN)
    }
    pub(crate) fn is_nan(&self) -> bool {
        self.lo.is_nan() || self.hi.is_nan()
    }
    pub(crate) fn add(&self, y: &Iv) -> Iv {
        Iv {
            lo: Float::with_val_round(FD_PREC, &self.lo + &y.lo, Round::Down).0,
            hi: Float::with_val_round(FD_PREC, &self.hi + &y.hi, Round::Up).0,
        }
    }
    pub(crate) fn sub(&self, y: &Iv) -> Iv {
        Iv {
            lo: Float::with_val_round(FD_PREC, &self.lo - &y.hi, Round::Down).0,
            hi: Float::with_val_round(FD_PREC, &self.hi - &y.lo, Round::Up).0,
        }
    }
    pub(crate) fn neg(&self) -> Iv {
        Iv { lo: Float::with_val(FD_PREC, -&self.hi), hi: Float::with_val(FD_PREC, -&self.lo) }
    }
    /// The extremes of `op` over the four pairs of ends (a product or a
    /// quotient is monotone in each argument where it is defined).
    pub(crate) fn corners(&self, y: &Iv, op: impl Fn(&Float, &Float, Round) -> Float) -> Iv {
        let pairs = [(&self.lo, &y.lo), (&self.lo, &y.hi), (&self.hi, &y.lo), (&self.hi, &y.hi)];
        let lows: Vec<Float> = pairs.iter().map(|(a, b)| op(a, b, Round::Down)).collect();
        let highs: Vec<Float> = pairs.iter().map(|(a, b)| op(a, b, Round::Up)).collect();
        if lows.iter().chain(&highs).any(Float::is_nan) {
            return Iv::nan();
        }
        let min = lows.into_iter().reduce(|a, b| if b < a { b } else { a });
        let max = highs.into_iter().reduce(|a, b| if b > a { b } else { a });
        match (min, max) {
            (Some(lo), Some(hi)) => Iv { lo, hi },
            _ => Iv::nan(),
        }
    }
    pub(crate) fn nonnegative(&self) -> bool {
        self.lo >= 0
    }
    pub(crate) fn mul(&self, y: &Iv) -> Iv {
        if self.nonnegative() && y.nonnegative() {
            // Increasing in both: the common case (scores, frequencies), in
            // two roundings instead of eight.
            return Iv {
                lo: Float::with_val_round(FD_PREC, &self.lo * &y.lo, Round::Down).0,
                hi: Float::with_val_round(FD_PREC, &self.hi * &y.hi, Round::Up).0,
            };
        }
        self.corners(y, |a, b, r| Float::with_val_round(FD_PREC, a * b, r).0)
    }
    /// Only by an interval that excludes zero (else NaN: no enclosure).
    pub(crate) fn div(&self, y: &Iv) -> Iv {
        let zero = Float::new(FD_PREC);
        if !(y.lo > zero || y.hi < zero) {
            return Iv::nan();
        }
        if self.nonnegative() && y.lo > zero {
            // Increasing in the dividend, decreasing in the divisor.
            return Iv {
                lo: Float::with_val_round(FD_PREC, &self.lo / &y.hi, Round::Down).0,
                hi: Float::with_val_round(FD_PREC, &self.hi / &y.lo, Round::Up).0,
            };
        }
        self.corners(y, |a, b, r| Float::with_val_round(FD_PREC, a / b, r).0)
    }
    /// exp is increasing; MPFR rounds it in the direction asked, an
    /// overflow to +inf upward and to the largest finite value downward.
    pub(crate) fn exp(&self) -> Iv {
        Iv {
            lo: Float::with_val_round(FD_PREC, self.lo.exp_ref(), Round::Down).0,
            hi: Float::with_val_round(FD_PREC, self.hi.exp_ref(), Round::Up).0,
        }
    }
}

/// |v| at its smallest over the interval.
pub(crate) fn lower_abs(v: &Iv) -> Float {
    let zero = Float::new(FD_PREC);
    if v.lo > zero {
        v.lo.clone()
    } else if v.hi < zero {
        Float::with_val(FD_PREC, -&v.hi)
    } else {
        zero
    }
}

/// |v| at its largest over the interval.
pub(crate) fn upper_abs(v: &Iv) -> Float {
    let (a, b) = (Float::with_val(FD_PREC, &*v.lo.as_abs()), Float::with_val(FD_PREC, &*v.hi.as_abs()));
    if a > b {
        a
    } else {
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(lo: f32, hi: f32) -> Iv {
        Iv { lo: Float::with_val(FD_PREC, lo), hi: Float::with_val(FD_PREC, hi) }
    }

    /// One NaN end is enough to make an interval no enclosure.
    #[test]
    fn an_interval_with_a_nan_end_is_nan() {
        assert!(iv(f32::NAN, 1.0).is_nan());
        assert!(iv(1.0, f32::NAN).is_nan());
        assert!(Iv::nan().is_nan());
        assert!(!iv(1.0, 2.0).is_nan());
    }

    #[test]
    fn a_divisor_must_exclude_zero_its_ends_included() {
        // 1 / [0, 2] and 1 / [-2, 0] have no enclosure (the quotient is
        // unbounded at the zero end): NaN, as documented. 1 / [1, 2] is
        // [1/2, 1] and 1 / [-2, -1] is [-1, -1/2], exactly.
        assert!(Iv::of(1.0).div(&iv(0.0, 2.0)).is_nan());
        assert!(Iv::of(1.0).div(&iv(-2.0, 0.0)).is_nan());
        assert!(iv(1.0, 1.0).div(&iv(-0.0, 0.0)).is_nan());
        let q = Iv::of(1.0).div(&iv(1.0, 2.0));
        assert_eq!((q.lo.to_f64(), q.hi.to_f64()), (0.5, 1.0));
        let q = Iv::of(1.0).div(&iv(-2.0, -1.0));
        assert_eq!((q.lo.to_f64(), q.hi.to_f64()), (-1.0, -0.5));
        // Wide dividends, by hand: [1, 2] / [1, 2] = [1/2, 2];
        // [1, 2] / [-2, -1] = [2 / -1, 1 / -2] = [-2, -1/2].
        let q = iv(1.0, 2.0).div(&iv(1.0, 2.0));
        assert_eq!((q.lo.to_f64(), q.hi.to_f64()), (0.5, 2.0));
        let q = iv(1.0, 2.0).div(&iv(-2.0, -1.0));
        assert_eq!((q.lo.to_f64(), q.hi.to_f64()), (-2.0, -0.5));
    }
}
