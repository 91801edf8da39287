//! The tensor core's MMA step as a bit-level model (docs/mma.md,
//! docs/ops/shared_expert.md#profiles).
//!
//! `mma.sync.m16n8k16.f32.bf16.bf16.f32` computes each of its 16 x 8
//! outputs as one fused inner product `d = c + sum_k a_k b_k` over k = 16.
//! The hardware does not round like IEEE arithmetic. The published models
//! (Khattak and Mikaitis, "Accurate Models of NVIDIA Tensor Cores", arXiv
//! 2512.07004; Xie et al., MMA-Sim, arXiv 2511.10909, each validated against
//! the hardware on random vectors) describe the H100 as follows, and the
//! H200 has the H100's SM:
//!
//! 1. Every product is exact, and keeps its *raw* exponent ea + eb: its
//!    significand is the product of the two significands, in [1, 4) for
//!    normal inputs (not renormalised), and subnormal bf16 inputs enter
//!    with exponent -126 and their significand below 1.
//! 2. The largest exponent among the nonzero terms, c included, sets the
//!    alignment: every term is truncated toward zero onto the grid
//!    2^(max_e - 25) (25 fraction bits: 23 + 2 extra), and the truncated
//!    terms are summed exactly.
//! 3. The sum is normalised and truncated toward zero to f32 (subnormal
//!    results on f32's subnormal grid); a result of 2^128 or more is
//!    infinite.
//! 4. A NaN input, inf * 0 or inf - inf gives the NaN 0x7fffffff; otherwise
//!    an infinite input gives that infinity. A result of zero is +0, whether
//!    the sum is exactly zero or a negative one truncated to zero.
//!
//! The model is parameterised ([`MmaModel`]) so that the check on the GPU
//! (`bitparity-mma-check`) can show that its inputs tell the H100 model
//! apart from its neighbours ([`ALTERNATIVES`]: one fraction bit fewer or
//! more, renormalised products, round-to-nearest output): a confirmation
//! means something only if the same inputs refute the alternatives.
//!
//! Points 3 and 4 at the edges (overflow to inf rather than to the largest
//! f32, the NaN's bits, the sign of a zero result) are the models' reading,
//! not documented by NVIDIA; the check's generator has a class for each.
//!
//! On the H200 (reports/mma-2026-12-02/: 33.8 million outputs) every normal,
//! zero, infinite and NaN result matched this model, and every neighbour
//! was refuted; 44 of 168,275 subnormal results did not (one subnormal ulp
//! larger in magnitude than point 3's truncation). Point 3 is open for
//! subnormal results (docs/mma.md).
//!
//! Inputs are f32 values; bf16 inputs are f32 values with the low 16 bits
//! zero. Everything is exact integer arithmetic: no f32 or f64 operation
//! decides a bit.

/// How the aligned sum becomes an f32.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutRounding {
    /// Truncation: the f32 next to the sum toward zero.
    TowardZero,
    /// Round to nearest, ties to even (IEEE's default).
    NearestEven,
}

/// One hypothesis of how the tensor core computes `c + sum_k a_k b_k`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MmaModel {
    /// A short name, as reports print it.
    pub name: &'static str,
    /// Fraction bits kept below the largest term's exponent when the terms
    /// are aligned (the H100: 25).
    pub frac_bits: u32,
    /// Whether a product aligns by its raw exponent ea + eb (significand in
    /// [1, 4)), the H100's, or by its own leading bit (renormalised).
    pub raw_product_exponent: bool,
    /// How the sum becomes an f32.
    pub rounding: OutRounding,
}

/// The products one MMA step sums (k of m16n8k16).
pub const K: usize = 16;
/// The rows and columns of one step's output (m and n of m16n8k16).
pub const M: usize = 16;
pub const N: usize = 8;

/// The H100's (and H200's) bf16 MMA with an f32 accumulator.
pub const H100_BF16: MmaModel =
    MmaModel { name: "h100-bf16", frac_bits: 25, raw_product_exponent: true, rounding: OutRounding::TowardZero };

/// The neighbours of [`H100_BF16`] that the check must refute.
pub const ALTERNATIVES: [MmaModel; 5] = [
    MmaModel { name: "frac-23 (V100)", frac_bits: 23, ..H100_BF16 },
    MmaModel { name: "frac-24 (A100)", frac_bits: 24, ..H100_BF16 },
    MmaModel { name: "frac-26", frac_bits: 26, ..H100_BF16 },
    MmaModel { name: "renormalised products", raw_product_exponent: false, ..H100_BF16 },
    MmaModel { name: "round-to-nearest output", rounding: OutRounding::NearestEven, ..H100_BF16 },
];

/// A model by its name: the H100's or one of its neighbours.
pub fn by_name(name: &str) -> Option<MmaModel> {
    std::iter::once(H100_BF16).chain(ALTERNATIVES).find(|m| m.name == name)
}

/// The NaN the models give (MMA-Sim's reading of the hardware).
pub const NAN_BITS: u32 = 0x7fff_ffff;

/// A finite nonzero term: value = sign * mag * 2^(exp - frac), aligned by
/// `align` (its exponent in the model's sense).
#[derive(Clone, Copy, Debug)]
struct Term {
    negative: bool,
    mag: u64,
    exp: i32,
    frac: i32,
    align: i32,
}

/// A finite f32 as (negative, significand, exponent): value = sig * 2^(e - 23),
/// subnormals with e = -126 and sig < 2^23. None for zero.
fn decode(x: f32) -> Option<(bool, u64, i32)> {
    let bits = x.to_bits();
    let negative = bits >> 31 == 1;
    let field = ((bits >> 23) & 0xff) as i32;
    let frac = (bits & 0x7f_ffff) as u64;
    match (field, frac) {
        (0, 0) => None,
        (0, f) => Some((negative, f, -126)),
        (e, f) => Some((negative, f | 1 << 23, e - 127)),
    }
}

/// floor(log2(mag * 2^(exp - frac))) for mag > 0.
fn leading_exponent(mag: u64, exp: i32, frac: i32) -> i32 {
    (63 - mag.leading_zeros() as i32) - frac + exp
}

impl MmaModel {
    /// `c + sum_k a[k] b[k]` as this model computes it in one step. `a` and
    /// `b` have the same length (the hardware's is [`K`]; zeros pad a short
    /// step without changing it).
    pub fn dot_add(&self, a: &[f32], b: &[f32], c: f32) -> f32 {
        self.step(a, b, c).0
    }

    /// [`Self::dot_add`], and whether its result is one the model does not
    /// decide: the aligned sum is nonzero and below 2^-126 in magnitude
    /// (an f32 subnormal, or a sum that truncates to zero). On the H200,
    /// 44 of 168,275 such results were one subnormal ulp larger in
    /// magnitude than the model's (reports/mma-2026-12-02/); no other
    /// result differed. A profile oracle calls an output that depends on
    /// such a step undecided ([`crate::undecided`]).
    pub fn step(&self, a: &[f32], b: &[f32], c: f32) -> (f32, bool) {
        assert_eq!(a.len(), b.len(), "a and b of one step have the same length");
        if let Some(special) = special(a, b, c) {
            return (special, false);
        }
        let mut terms: Vec<Term> = Vec::with_capacity(a.len() + 1);
        if let Some((negative, mag, exp)) = decode(c) {
            terms.push(Term { negative, mag, exp, frac: 23, align: exp });
        }
        for (&x, &y) in a.iter().zip(b) {
            if let (Some((nx, mx, ex)), Some((ny, my, ey))) = (decode(x), decode(y)) {
                let (mag, exp, frac) = (mx * my, ex + ey, 46);
                let align = if self.raw_product_exponent { exp } else { leading_exponent(mag, exp, frac) };
                terms.push(Term { negative: nx != ny, mag, exp, frac, align });
            }
        }
        let Some(max_align) = terms.iter().map(|t| t.align).max() else {
            return (0.0, false);
        };
        // The grid: quantum 2^q. Each term's magnitude in quanta, truncated.
        let q = max_align - self.frac_bits as i32;
        let mut sum: i128 = 0;
        for t in &terms {
            let shift = t.exp - t.frac - q;
            let quanta: i128 = if shift >= 0 {
                (t.mag as i128) << shift
            } else if -shift < 64 {
                (t.mag >> -shift) as i128
            } else {
                0
            };
            sum += if t.negative { -quanta } else { quanta };
        }
        // |sum| * 2^q < 2^-126: the leading bit of |sum| below 2^(-126 - q).
        let open = sum != 0 && 127 - (sum.unsigned_abs().leading_zeros() as i32) + q < -126;
        (self.to_f32(sum, q), open)
    }

    /// `sum * 2^q` as an f32, by this model's rounding. A result of zero is
    /// +0, a negative sum's included (MMA-Sim's reading: its truncation
    /// yields an integer zero, which has no sign).
    fn to_f32(self, sum: i128, q: i32) -> f32 {
        let negative = sum < 0;
        let mag = sum.unsigned_abs();
        // floor(log2 |value|); the f32 grid at |value| has the quantum 2^t,
        // t = max(top, -126) - 23.
        let top = 127 - mag.leading_zeros() as i32 + q;
        let t = top.max(-126) - 23;
        let drop = t - q;
        // |sum| < 2^127: a drop of 128 or more leaves nothing, and nothing
        // that rounds up (the remainder is below half a quantum).
        if sum == 0 || drop >= 128 {
            return 0.0;
        }
        let mut m: u128 = if drop <= 0 { mag << -drop } else { mag >> drop };
        if drop > 0 && self.rounding == OutRounding::NearestEven {
            let rem = mag & ((1u128 << drop) - 1);
            let half = 1u128 << (drop - 1);
            if rem > half || (rem == half && m & 1 == 1) {
                m += 1;
            }
        }
        // m <= 2^24 and t >= -149: m * 2^t is exact in f64, and f64 -> f32
        // is exact below 2^128 (m has at most 24 significant bits) and
        // infinite from 2^128 on.
        let v = (m as f64 * pow2(t)) as f32;
        if negative && m != 0 {
            -v
        } else {
            v
        }
    }

    /// A chain of steps in ascending order: `d = c`, then for each block of
    /// [`K`] (the last one padded with zeros) `d = dot_add(block, d)`, the
    /// order a kernel with a fixed K tiling and no split-K runs.
    pub fn dot_chain(&self, a: &[f32], b: &[f32], c: f32) -> f32 {
        self.chain_step(a, b, c).0
    }

    /// [`Self::dot_chain`], and whether any of its steps is open (see
    /// [`Self::step`]).
    pub fn chain_step(&self, a: &[f32], b: &[f32], c: f32) -> (f32, bool) {
        assert_eq!(a.len(), b.len(), "a and b have the same length");
        a.chunks(K).zip(b.chunks(K)).fold((c, false), |(d, open), (x, y)| {
            let (next, o) = self.step(x, y, d);
            (next, open || o)
        })
    }

    /// One `m16n8k16` step on whole tiles: `a` is 16 x 16 row-major (m, k),
    /// `b` is 8 x 16 (n, k: each output column's vector), `c` and the
    /// result are 16 x 8 row-major (m, n).
    pub fn mma(&self, a: &[f32; M * K], b: &[f32; N * K], c: &[f32; M * N]) -> [f32; M * N] {
        let mut d = [0.0f32; M * N];
        for i in 0..M {
            for j in 0..N {
                d[i * N + j] = self.dot_add(&a[i * K..(i + 1) * K], &b[j * K..(j + 1) * K], c[i * N + j]);
            }
        }
        d
    }
}

/// The result when an input is NaN or infinite (MMA-Sim: the f64 sum of the
/// products and c decides whether it is NaN or infinite; a finite bf16
/// product cannot overflow f64, so only infinite inputs make it so).
fn special(a: &[f32], b: &[f32], c: f32) -> Option<f32> {
    let (mut pos_inf, mut neg_inf, mut nan) = (false, false, c.is_nan());
    let mut infinite = |v: f32| {
        if v > 0.0 {
            pos_inf = true
        } else {
            neg_inf = true
        }
    };
    if c.is_infinite() {
        infinite(c);
    }
    for (&x, &y) in a.iter().zip(b) {
        if x.is_nan() || y.is_nan() || (x.is_infinite() && y == 0.0) || (y.is_infinite() && x == 0.0) {
            nan = true;
        } else if x.is_infinite() || y.is_infinite() {
            infinite(x * y);
        }
    }
    if nan || (pos_inf && neg_inf) {
        Some(f32::from_bits(NAN_BITS))
    } else if pos_inf {
        Some(f32::INFINITY)
    } else if neg_inf {
        Some(f32::NEG_INFINITY)
    } else {
        None
    }
}

/// 2^k as an f64, exactly, for -1022 <= k <= 1023.
fn pow2(k: i32) -> f64 {
    debug_assert!((-1022..=1023).contains(&k));
    f64::from_bits(((1023 + k) as u64) << 52)
}

/// The exponent a finite f32 enters a step with: floor(log2 |x|), and -126
/// for a subnormal (the exponent `decode` gives it). A product's raw
/// exponent is the sum of its factors'; the model never aligns a term by
/// more, so 2^(max raw - frac_bits) bounds a step's quantum.
pub fn raw_exponent(x: f32) -> i32 {
    (((x.to_bits() >> 23) & 0xff) as i32).max(1) - 127
}

#[cfg(test)]
mod tests {
    //! Each expected value below is worked out by hand in its comment, from
    //! the model's four rules, not computed by the code under test.
    use super::*;

    fn p(k: i32) -> f32 {
        2f32.powi(k)
    }

    fn model(frac_bits: u32) -> MmaModel {
        MmaModel { frac_bits, ..H100_BF16 }
    }

    /// Each neighbour changes one rule of the H100 model, is named for it
    /// (the names reports print, written out here), and a hand vector of
    /// the tests below tells it from the model.
    #[test]
    fn every_neighbour_changes_one_rule_and_a_hand_vector_tells_it_apart() {
        let names: Vec<&str> = ALTERNATIVES.iter().map(|m| m.name).collect();
        assert_eq!(
            names,
            ["frac-23 (V100)", "frac-24 (A100)", "frac-26", "renormalised products", "round-to-nearest output"]
        );
        assert_eq!(H100_BF16.name, "h100-bf16");
        let rules = |m: &MmaModel| {
            [m.frac_bits != 25, !m.raw_product_exponent, m.rounding != OutRounding::TowardZero]
                .iter()
                .filter(|&&d| d)
                .count()
        };
        // (a, b, c) from the tests below: the 25th and 26th fraction bits,
        // the raw exponent of 1.5 * 1.5, a negative sum between two f32.
        let mut raw_a = vec![p(-25); 16];
        raw_a[0] = 1.5;
        let mut raw_b = vec![1.0; 16];
        raw_b[0] = 1.5;
        let vectors: Vec<(Vec<f32>, Vec<f32>, f32)> = vec![
            (vec![p(-25); 4], vec![1.0; 4], 1.0),
            (vec![p(-26); 8], vec![1.0; 8], 1.0),
            (raw_a, raw_b, 0.0),
            (vec![1.5 * p(-24)], vec![-1.0], -1.0),
        ];
        for alt in &ALTERNATIVES {
            assert_eq!(rules(alt), 1, "{}", alt.name);
            assert!(
                vectors
                    .iter()
                    .any(|(a, b, c)| alt.dot_add(a, b, *c).to_bits() != H100_BF16.dot_add(a, b, *c).to_bits()),
                "{} is not told apart",
                alt.name
            );
        }
        assert_eq!(rules(&H100_BF16), 0);
    }

    #[test]
    fn products_of_ones_sum_exactly() {
        assert_eq!(H100_BF16.dot_add(&[1.0; 16], &[1.0; 16], 0.0), 16.0);
        assert_eq!(H100_BF16.dot_add(&[1.0; 16], &[-1.0; 16], 0.5), -15.5);
    }

    /// c = 1 (e = 0): the grid is 2^-25 with 25 fraction bits. Four
    /// products of 2^-25 are on it: 1 + 4 * 2^-25 = 1 + 2^-23, an f32. With
    /// 24 bits each truncates to 0, and the result is 1.
    #[test]
    fn the_25th_fraction_bit_is_kept_and_the_26th_is_not() {
        let a = [p(-25), p(-25), p(-25), p(-25)];
        let b = [1.0; 4];
        assert_eq!(H100_BF16.dot_add(&a, &b, 1.0), 1.0 + p(-23));
        assert_eq!(model(24).dot_add(&a, &b, 1.0), 1.0);
        // Eight products of 2^-26 (sum 2^-23) are below the 25-bit grid: 1.
        // With 26 bits they are kept: 1 + 2^-23.
        let a = [p(-26); 8];
        let b = [1.0; 8];
        assert_eq!(H100_BF16.dot_add(&a, &b, 1.0), 1.0);
        assert_eq!(model(26).dot_add(&a, &b, 1.0), 1.0 + p(-23));
    }

    /// 2^10 - 2^10 + 2^-20: the largest exponent is 10, the grid 2^-15, and
    /// 2^-20 truncates to 0 although the big terms cancel: +0, where the
    /// exact sum is 2^-20.
    #[test]
    fn a_cancelled_term_still_sets_the_grid() {
        let a = [p(10), p(10), p(-20)];
        let b = [1.0, -1.0, 1.0];
        assert_eq!(H100_BF16.dot_add(&a, &b, 0.0).to_bits(), 0.0f32.to_bits());
        // A grid of 2^-15 keeps 2^-15 itself.
        let a = [p(10), p(10), p(-15)];
        assert_eq!(H100_BF16.dot_add(&a, &b, 0.0), p(-15));
    }

    /// 1.5 * 1.5 = 2.25 has the raw exponent 0 (significand 2.25): the grid
    /// is 2^-25 and fifteen products of 2^-25 are kept, 15 * 2^-25 =
    /// 1.875 * 2^-22; 2.25 + that truncates to 2.25 + 2^-22 (f32's quantum
    /// at 2.25 is 2^-22). Renormalised, 2.25 has exponent 1, the grid is
    /// 2^-24, the small products truncate to 0 and the result is 2.25.
    #[test]
    fn a_product_aligns_by_its_raw_exponent() {
        let mut a = [p(-25); 16];
        let mut b = [1.0; 16];
        a[0] = 1.5;
        b[0] = 1.5;
        assert_eq!(H100_BF16.dot_add(&a, &b, 0.0), 2.25 + p(-22));
        let renormalised = MmaModel { raw_product_exponent: false, ..H100_BF16 };
        assert_eq!(renormalised.dot_add(&a, &b, 0.0), 2.25);
    }

    /// -1 - 1.5 * 2^-24 = -(1 + 0.75 * 2^-23): toward zero -1, to nearest
    /// -(1 + 2^-23). The term 1.5 * 2^-24 = 3 * 2^-25 is on the 25-bit grid.
    #[test]
    fn the_output_truncates_toward_zero() {
        let a = [1.5 * p(-24)];
        let b = [-1.0];
        assert_eq!(H100_BF16.dot_add(&a, &b, -1.0), -1.0);
        let nearest = MmaModel { rounding: OutRounding::NearestEven, ..H100_BF16 };
        assert_eq!(nearest.dot_add(&a, &b, -1.0), -(1.0 + p(-23)));
    }

    /// The round-to-nearest neighbour rounds ties to even and stays below
    /// half: 1 + 2^-24 (a tie, 1 even) is 1; 1 + 2^-23 + 2^-24 (a tie, the
    /// odd 1 + 2^-23) is 1 + 2^-22; 1 + 2^-25 (below half) is 1. Truncated,
    /// all three keep their f32 below.
    #[test]
    fn round_to_nearest_breaks_ties_to_even() {
        let nearest = MmaModel { rounding: OutRounding::NearestEven, ..H100_BF16 };
        assert_eq!(nearest.dot_add(&[p(-24)], &[1.0], 1.0), 1.0);
        assert_eq!(nearest.dot_add(&[p(-24)], &[1.0], 1.0 + p(-23)), 1.0 + p(-22));
        assert_eq!(nearest.dot_add(&[p(-25)], &[1.0], 1.0), 1.0);
        assert_eq!(H100_BF16.dot_add(&[p(-24)], &[1.0], 1.0 + p(-23)), 1.0 + p(-23));
    }

    /// 1.5 * 2^-150 is three quarters of the smallest subnormal 2^-149:
    /// truncated, 0; to nearest, 2^-149. Three products of 2^-140 (each
    /// 2^-70 * 2^-70) sum to 3 * 2^-140, on the subnormal grid.
    #[test]
    fn subnormal_results_truncate_on_the_subnormal_grid() {
        assert_eq!(H100_BF16.dot_add(&[1.5 * p(-75)], &[p(-75)], 0.0), 0.0);
        let nearest = MmaModel { rounding: OutRounding::NearestEven, ..H100_BF16 };
        assert_eq!(nearest.dot_add(&[1.5 * p(-75)], &[p(-75)], 0.0), p(-149));
        assert_eq!(H100_BF16.dot_add(&[p(-70); 3], &[p(-70); 3], 0.0), 3.0 * p(-140));
    }

    /// A subnormal bf16 input (2^-130 = 2^-4 * 2^-126) enters with exponent
    /// -126 and significand 2^-4: times 1 the result is the input itself,
    /// and times 2^100 it is 2^-30, exactly.
    #[test]
    fn subnormal_inputs_enter_with_the_minimum_exponent() {
        assert_eq!(H100_BF16.dot_add(&[p(-130)], &[1.0], 0.0), p(-130));
        // 2^-130 * 2^100 = 2^-30, exact.
        assert_eq!(H100_BF16.dot_add(&[p(-130)], &[p(100)], 0.0), p(-30));
    }

    /// 2^100 * 2^100 = 2^200 is beyond f32: infinite, with its sign.
    #[test]
    fn a_sum_beyond_f32_is_infinite() {
        assert_eq!(H100_BF16.dot_add(&[p(100)], &[p(100)], 0.0), f32::INFINITY);
        assert_eq!(H100_BF16.dot_add(&[p(100)], &[-p(100)], 0.0), f32::NEG_INFINITY);
        // 2^127 + 2^127 = 2^128: infinite too.
        assert_eq!(H100_BF16.dot_add(&[p(127), p(127)], &[1.0, 1.0], 0.0), f32::INFINITY);
    }

    #[test]
    fn nan_and_infinities() {
        let nan = H100_BF16.dot_add(&[f32::INFINITY], &[0.0], 1.0);
        assert_eq!(nan.to_bits(), NAN_BITS);
        let nan = H100_BF16.dot_add(&[f32::INFINITY, 1.0], &[1.0, 1.0], f32::NEG_INFINITY);
        assert_eq!(nan.to_bits(), NAN_BITS);
        assert_eq!(H100_BF16.dot_add(&[1.0], &[1.0], f32::NAN).to_bits(), NAN_BITS);
        assert_eq!(H100_BF16.dot_add(&[f32::NAN, 1.0], &[1.0, 1.0], 0.0).to_bits(), NAN_BITS);
        assert_eq!(H100_BF16.dot_add(&[1.0, 1.0], &[2.0, f32::NAN], 0.0).to_bits(), NAN_BITS);
        assert_eq!(H100_BF16.dot_add(&[-2.0], &[f32::INFINITY], 5.0), f32::NEG_INFINITY);
        assert_eq!(H100_BF16.dot_add(&[2.0], &[f32::INFINITY], 5.0), f32::INFINITY);
        assert_eq!(H100_BF16.dot_add(&[f32::NEG_INFINITY], &[-0.5], -5.0), f32::INFINITY);
    }

    /// A zero result is +0: from -0 inputs, from an exact cancellation, and
    /// from a negative sum truncated to zero, on the subnormal grid
    /// (-1.5 * 2^-150) or far below it (-2^-280) (the models' reading).
    #[test]
    fn a_zero_result_is_positive() {
        assert_eq!(H100_BF16.dot_add(&[-0.0], &[1.0], -0.0).to_bits(), 0);
        assert_eq!(H100_BF16.dot_add(&[1.0], &[-1.0], 1.0).to_bits(), 0);
        assert_eq!(H100_BF16.dot_add(&[1.5 * p(-75)], &[-p(-75)], 0.0).to_bits(), 0);
        assert_eq!(H100_BF16.dot_add(&[p(-140)], &[-p(-140)], 0.0).to_bits(), 0);
        // Two subnormal factors of 2^-127 (raw exponents -126 each): the
        // product 2^-254 stays on its grid (2^-277) and truncates to zero
        // only at the output, 128 binades below f32's last bit.
        assert_eq!(H100_BF16.dot_add(&[p(-127)], &[-p(-127)], 0.0).to_bits(), 0);
        assert_eq!(H100_BF16.dot_add(&[p(-127)], &[p(-127)], 0.0).to_bits(), 0);
    }

    /// Renormalised, a product below 2 (1 * 1) aligns by exponent 0: four
    /// products of 2^-25 stay on the grid, 1 + 2^-23. (Raw, the same.)
    #[test]
    fn a_renormalised_product_below_two_keeps_its_exponent() {
        let renormalised = MmaModel { raw_product_exponent: false, ..H100_BF16 };
        let (a, b) = ([1.0, p(-25), p(-25), p(-25), p(-25)], [1.0; 5]);
        assert_eq!(renormalised.dot_add(&a, &b, 0.0), 1.0 + p(-23));
        assert_eq!(H100_BF16.dot_add(&a, &b, 0.0), 1.0 + p(-23));
    }

    /// A chain of 40 products: blocks of 16, 16 and 8 (padded), each step
    /// starting from the last step's f32. Forty products of 1 give 40; with
    /// c = 2^24, each step adds 16 (then 8) exactly: 2^24 + 40.
    #[test]
    fn a_chain_steps_through_blocks_of_16_in_order() {
        assert_eq!(H100_BF16.dot_chain(&[1.0; 40], &[1.0; 40], 0.0), 40.0);
        assert_eq!(H100_BF16.dot_chain(&[1.0; 40], &[1.0; 40], p(24)), p(24) + 40.0);
        // Order matters: 2^25 then sixteen products of 1 in one step is
        // 2^25 + 16 (the grid at 2^25 is 2^0); one product of 1 per step
        // would lose each one (f32's quantum at 2^25 is 4, truncated).
        let mut a = vec![0.0f32; 32];
        a[16..].fill(1.0);
        assert_eq!(H100_BF16.dot_chain(&a, &[1.0; 32], p(25)), p(25) + 16.0);
    }

    /// The tile form puts row i of a and row j of b (column j of B) into
    /// output (i, j).
    #[test]
    fn the_tile_step_pairs_rows_of_a_with_columns_of_b() {
        let mut a = [0.0f32; M * K];
        let mut b = [0.0f32; N * K];
        // c (i, j) = 8 i + j: each output keeps its own c.
        let c: [f32; M * N] = std::array::from_fn(|n| n as f32);
        a[3 * K + 5] = 2.0; // a[3][5]
        b[6 * K + 5] = 4.0; // B[5][6]
        let d = H100_BF16.mma(&a, &b, &c);
        for i in 0..M {
            for j in 0..N {
                let want = (8 * i + j) as f32 + if (i, j) == (3, 6) { 8.0 } else { 0.0 };
                assert_eq!(d[i * N + j], want, "({i}, {j})");
            }
        }
    }
}
