//! Adversarial `shared_expert` cases (docs/ops/shared_expert.md, docs/ops/README.md#adversarial-cases).
//!
//! A case is a small shape (tier A runs the MPFR oracle on every case: T
//! mostly <= 8, H and F <= 16; T at the tile edges 16, 32, 64 and 128 only
//! with H and F <= 3; one case in ten T in 9..=17 with H and F in 9..=16, the
//! tensor cores' fragments) and values from one regime:
//!
//! - `plain`: random bf16 mantissas at moderate exponents;
//! - `wide`: exponents over +-20, so that sums round and their order shows;
//! - `dyadic`: short binary fractions, half the gate units saturated, so
//!   that every dot product is exact with few bits; then inputs are nudged
//!   until some h, y, dh or dz lies exactly halfway between two bf16 values
//!   (a tie of the round-to-nearest-even);
//! - `tail`: x >= 0 and gate rows <= 0, scaled so that every g lies in
//!   the sigmoid's lower tail (see below), at every token;
//! - `underflow`: x and w1 near 2^-75 with short mantissas, so that the
//!   products x * w1 fall at integer and half-integer multiples of 2^-149,
//!   inexact in f32 (the one place where a fused multiply-add differs from
//!   mul-then-add on bf16 inputs), and dy near 2^110, so that the tiny u
//!   shows, through dgate, in dz and dX;
//!
//! then optional passes: a gate at the root of dsilu (where dgate
//! magnifies the sigmoid's error), gates moved into the sigmoid's lower tail (where
//! sig ~ e^g keeps exp's relative error through every rounding), cancelling pairs (x and dy columns that cancel
//! against equal weight columns), saturated or zero gates, zero tokens,
//! special values (bf16 subnormals, +-0, near-max, NaN, +-Inf), a layout.
//!
//! [`classify`] reads every class off the values (the intermediates are
//! the serial profile oracle's), never from how the case was made; the tie
//! and tail passes aim from the same intermediates.
//! [`shrink_candidates`] drops tokens, halves H or F consistently across x,
//! w1, w2 and dy, drops the layout, and simplifies values toward 0, 1 and
//! short binary fractions that are still bf16.

use super::common::{nudge_bf16, pick, simplify_fields, variant, write_class_name, Field};
use super::GenConfig;
use crate::knobs::Shapes;
use oracles::bf16::is_tie;
use oracles::case::shared_expert::{is_bf16, SharedExpertCase};
use oracles::case::{Layout, MAX_OFFSET};
use oracles::profile::shared_expert::SharedExpertProfile;
use oracles::profile_oracle::shared_expert::SharedExpertTrace;
use proptest::prelude::{Rng, RngExt};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fmt;

/// The adversarial classes (docs/ops/README.md#adversarial-cases) for the shared expert.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    /// T = 1.
    TOne,
    /// T = 2 or 3.
    TTwoThree,
    /// T odd, 5 or more.
    TOdd,
    /// T = n-1, n or n+1 for a tile size n in {16, 32, 64, 128}.
    TEdge,
    /// H odd.
    HOdd,
    /// F odd.
    FOdd,
    /// Element offset 1, 2 or 3.
    Offset,
    /// Row stride > H.
    RowStride,
    /// A bf16 subnormal among the inputs.
    Subnormal,
    /// -0.0 among the inputs.
    SignedZero,
    /// A finite input of magnitude at least 2^127.
    NearMax,
    /// A NaN or infinite input.
    NonFinite,
    /// A product in some dot product (x.w1, h.w2, dy.w2, dz.w1), non-zero
    /// and below 2^-126, that f32 cannot hold exactly.
    UnderflowProduct,
    /// A dot product whose result is below 2^-8 of its largest term (zero
    /// included), with at least two non-zero terms.
    Cancellation,
    /// (g * sig) * u exactly halfway between two bf16 values.
    TieH,
    /// h . w2 exactly halfway between two bf16 values.
    TieY,
    /// dy . w2 exactly halfway between two bf16 values.
    TieDh,
    /// dgate or dup exactly halfway between two bf16 values.
    TieDz,
    /// A finite g with sigmoid(g) = 1 exactly.
    SigmoidOne,
    /// A finite g with sigmoid(g) = 0 exactly.
    SigmoidZero,
    /// A finite g in (-88, -16): 0 < sig < 2^-23, the sigmoid's lower
    /// tail, where sig ~ e^g carries exp's whole relative error.
    SigmoidTail,
    /// A unit whose 1 + g (1 - sig) (dsilu over sig) is below 2^-8 in
    /// magnitude: g near -1.2785, where dsilu changes sign.
    DsiluCancels,
    /// Some g = +-0.
    GZero,
    /// Every input finite, some intermediate or output infinite or NaN.
    Overflow,
    /// H > 16 or F > 64, T = 1: a GEMM over several K steps (16) or several
    /// column tiles (64) of the GPU kernels' tiling (their tile-loading
    /// mutants lived while H and F stayed within 16).
    TileSpan,
    /// H, F, the offset and the row stride all multiples of 8: every row of
    /// every operand 16-byte aligned, so that `cuda-wgmma` copies every
    /// kernel's operands with TMA (and the others take their 16-byte
    /// copies); in the other cases some of its kernels take cp.async.
    AlignedRows,
}

impl Class {
    pub const ALL: [Class; 26] = [
        Class::TOne,
        Class::TTwoThree,
        Class::TOdd,
        Class::TEdge,
        Class::HOdd,
        Class::FOdd,
        Class::Offset,
        Class::RowStride,
        Class::Subnormal,
        Class::SignedZero,
        Class::NearMax,
        Class::NonFinite,
        Class::UnderflowProduct,
        Class::Cancellation,
        Class::TieH,
        Class::TieY,
        Class::TieDh,
        Class::TieDz,
        Class::SigmoidOne,
        Class::SigmoidZero,
        Class::SigmoidTail,
        Class::DsiluCancels,
        Class::GZero,
        Class::Overflow,
        Class::TileSpan,
        Class::AlignedRows,
    ];
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_class_name(self, f)
    }
}

/// (H, F) of the tile-span class: past one K step (16) of H, past one
/// column tile (64) of F, or both; and past the kernels' tile widths where a
/// tile placed at the wrong column would leave a column unwritten (F = 128:
/// two tiles of 64 units; H = 129 and 256: two output tiles of 128 columns
/// in y and dX).
const TILE_SPANS: [(usize, usize); 9] =
    [(17, 65), (33, 66), (20, 100), (48, 40), (17, 120), (65, 17), (17, 128), (129, 9), (256, 5)];

/// The tile sizes whose edges (n-1, n, n+1) T visits.
const TILES: [usize; 4] = [16, 32, 64, 128];
/// Largest H and F of a tier-A case (the MPFR oracle's cost grows as T H F).
const MAX_WIDTH: usize = 16;
/// Largest H and F of a case whose T is past 8, outside the fragment shapes.
const MAX_WIDTH_LONG: usize = 3;
/// T of the fragment shapes: past the m16n8k16 fragment's first 8 rows.
const FRAGMENT_T: [usize; 4] = [9, 12, 16, 17];

/// T values at the tile edges.
fn tile_edges() -> Vec<usize> {
    TILES.iter().flat_map(|&n| [n - 1, n, n + 1]).collect()
}

// ---------------------------------------------------------------------------
// Values.

/// A bf16 of random sign, exponent in lo..=hi (normal range), and a random
/// 7-bit mantissa, or only its top `bits` mantissa bits random.
fn bf16_value<R: Rng + ?Sized>(rng: &mut R, lo: i32, hi: i32, bits: u32) -> f32 {
    let e = rng.random_range(lo.max(-126)..=hi.min(127));
    let m = (rng.random::<u32>() & 0x7f) >> (7 - bits.min(7)) << (7 - bits.min(7));
    let sign = if rng.random_bool(0.5) { 0x8000_0000u32 } else { 0 };
    f32::from_bits(sign | (((e + 127) as u32) << 23) | (m << 16))
}

/// A special bf16: a subnormal, +-0, near the largest finite, NaN or +-Inf.
fn special<R: Rng + ?Sized>(rng: &mut R) -> f32 {
    let sign = if rng.random_bool(0.5) { 0x8000_0000u32 } else { 0 };
    let bits = match rng.random_range(0..8) {
        // Subnormal: exponent field 0, a non-zero mantissa.
        0 | 1 => (rng.random_range(1u32..=0x7f)) << 16,
        2 => 0,
        // Exponent 127: 2^127 up to the largest bf16 (0x7f7f).
        3 | 4 => 0x7f00_0000 | (rng.random_range(0u32..=0x7f) << 16),
        5 => 0x7fc0_0000,
        _ => 0x7f80_0000,
    };
    f32::from_bits(sign | bits)
}

/// The value regimes of a case (see the module header).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Regime {
    Plain,
    Wide,
    Dyadic,
    Underflow,
    Tail,
}

/// The reference shapes (H x F) of docs/ops/shared_expert.md#shapes-in-practice, tier B's.
pub const REFERENCE_SHAPES: [(usize, usize); 2] = [(4096, 2048), (7168, 2048)];
/// Most elements of x (T x H) in a reference-shape case: T is cut to it.
const REFERENCE_MAX_TH: usize = 1 << 24;

/// A tier-B case (`GenConfig::shapes`): a reference shape, T in 1..=max_t
/// (a third of the time at a tile edge) with T x H <= 2^24, plain or wide
/// random values with sprinkled signed zeros, a random layout (dense for
/// `reference-dense`). None of the passes that trace the profile oracle
/// (ties, tail gates): at these sizes the trace alone takes minutes a case, and tier B
/// compares the subject with itself (batch invariance, determinism,
/// offset/stride), which needs no special values to fail.
fn generate_reference<R: Rng + ?Sized>(rng: &mut R, cfg: &GenConfig) -> SharedExpertCase {
    let (h, f) = pick(rng, &REFERENCE_SHAPES);
    let max_t = cfg.max_t.clamp(1, REFERENCE_MAX_TH / h);
    let t = if rng.random_range(0..3) == 0 { pick(rng, &tile_edges()).min(max_t) } else { rng.random_range(1..=max_t) };
    let (lo, hi) = if rng.random_bool(0.5) { (-3, 2) } else { (-20, 20) };
    let mut x = fill(rng, t * h, lo, hi, 7);
    let w1 = fill(rng, 2 * f * h, -3, 1, 7);
    let w2 = fill(rng, h * f, -3, 1, 7);
    let mut dy = fill(rng, t * h, lo, hi, 7);
    for v in x.iter_mut().chain(dy.iter_mut()) {
        if rng.random_bool(0.01) {
            *v = if rng.random_bool(0.5) { 0.0 } else { -0.0 };
        }
    }
    let layout = if cfg.shapes == Shapes::ReferenceDense { Layout::dense(h) } else { layout(rng, h, f) };
    SharedExpertCase { t, h, f, layout, x, w1, w2, dy }
}

/// Where x and dy lie: an offset of 1..3 in half the cases, a row stride
/// of H + 1..5 in half. Where H and F are multiples of 8, three cases in
/// four keep every row 16-byte aligned instead (offset 0, stride H, H + 8 or
/// H + 16): `cuda-wgmma` copies such rows with TMA, whose tensor maps carry
/// the stride, and no other layout reaches that path with a stride past H.
fn layout<R: Rng + ?Sized>(rng: &mut R, h: usize, f: usize) -> Layout {
    if h.is_multiple_of(8) && f.is_multiple_of(8) && rng.random_bool(0.75) {
        return Layout { offset: 0, row_stride: h + 8 * rng.random_range(0..=2) };
    }
    super::common::layout(rng, h)
}

/// (T, H, F) within the config: T mostly <= 8; at a tile edge H, F <= 3.
/// With `many_units`, T in 4..=8 and F the widest: the tail regime wants
/// many sigmoid evaluations per case (each of its roundings flips under an
/// exp that is off by 2^-19 only about once in 4000).
fn generate_shape<R: Rng + ?Sized>(rng: &mut R, cfg: &GenConfig, many_units: bool) -> (usize, usize, usize) {
    let max_t = cfg.max_t.max(1);
    let budget = cfg.max_te.max(1);
    let max_w = cfg.max_e.clamp(1, MAX_WIDTH);
    // One case in six: a mutant that misplaces a tile hides everywhere else
    // (at 1 in 16, one survived 300 cases on the H200).
    if !many_units && rng.random_range(0..6) == 0 {
        // One token, H x F <= 2178 (the MPFR oracle's cost is T H F).
        let (h, f) = pick(rng, &TILE_SPANS);
        let h = h.min(cfg.max_e.max(1)).min(budget);
        let f = f.min(cfg.max_e.max(1)).min((budget / h).max(1));
        return (1, h, f);
    }
    // One case in ten: both halves of the tensor cores' m16n8k16 fragments
    // at once, rows 8..15 (T >= 9) and K 8..15 (H, F >= 9), which the shapes
    // below never pair; H or F = 14 is a row pitch that is a multiple of 7
    // and not of 8 (the vector loads' alignment test). T H F stays near the
    // tile-span class's cost (at most 17 x 16 x 16). A mutant that fed rows
    // 8..15 the wrong half of K survived 3,000 cases on the H200 without it.
    let (t, mut h, mut f) = if !many_units && rng.random_range(0..10) == 0 {
        let t = pick(rng, &FRAGMENT_T).min(max_t);
        (t, pick(rng, &[9, 14, 16]).min(max_w), pick(rng, &[9, 14, 16]).min(max_w))
    } else {
        let t = match rng.random_range(0..10) {
            _ if many_units => rng.random_range(4..=8),
            0..=3 => rng.random_range(1..=3),
            4..=6 => rng.random_range(4..=8),
            7 => 2 * rng.random_range(2..=7) + 1,
            _ => pick(rng, &tile_edges()),
        }
        .min(max_t);
        let widths: &[usize] = if t > 8 { &[1, 2, MAX_WIDTH_LONG] } else { &[1, 2, 3, 4, 5, 7, 8, 9, 14, 15, 16] };
        let h = pick(rng, if many_units { &[1, 2, 3, 4, 5] } else { widths }).min(max_w);
        (t, h, if many_units { max_w } else { pick(rng, widths).min(max_w) })
    };
    // T x H x F within the budget: narrow the wider of H and F, then T.
    let mut t = t;
    while t * h * f > budget {
        if h.max(f) > 1 {
            if h >= f {
                h -= 1;
            } else {
                f -= 1;
            }
        } else {
            t = (budget / (h * f)).max(1);
        }
    }
    (t, h, f)
}

/// `n` values of a regime.
fn fill<R: Rng + ?Sized>(rng: &mut R, n: usize, lo: i32, hi: i32, bits: u32) -> Vec<f32> {
    (0..n).map(|_| bf16_value(rng, lo, hi, bits)).collect()
}

/// The kinds of bf16 tie aimed at by [`aim_tie`].
#[derive(Clone, Copy, Debug, PartialEq)]
enum Tie {
    H,
    Y,
    Dh,
    Dz,
}

/// The serial profile oracle's intermediates, forward and backward: the
/// values whose bf16 roundings the ties are aimed at.
fn trace(case: &SharedExpertCase) -> Option<SharedExpertTrace> {
    oracles::profile_oracle::shared_expert::trace(case, &SharedExpertProfile::serial()).ok()
}

fn has_tie(tr: &SharedExpertTrace, tie: Tie) -> bool {
    let v = match tie {
        Tie::H => &tr.h_pre,
        Tie::Y => &tr.y_pre,
        Tie::Dh => &tr.dh_pre,
        Tie::Dz => &tr.dz_pre,
    };
    v.iter().any(|&x| is_tie(x))
}

/// Nudges one input at a time (a short binary fraction near its old
/// magnitude) until some value of `tie` is exactly halfway between two
/// bf16 values, trying at most `tries` nudges; keeps the nudge that hits.
/// The inputs nudged are those the value depends on linearly: an up row of
/// w1 for h (with the gate saturated, (g * 1) * u is a product of two
/// short fractions), a w2 entry for y, a dy entry for dh and dz.
fn aim_tie<R: Rng + ?Sized>(rng: &mut R, case: &mut SharedExpertCase, tie: Tie, tries: usize) -> bool {
    let (h, f) = (case.h, case.f);
    for _ in 0..tries {
        let (vec, idx) = match tie {
            Tie::H => (&mut case.w1, (f + rng.random_range(0..f)) * h + rng.random_range(0..h)),
            Tie::Y => (&mut case.w2, rng.random_range(0..h * f)),
            Tie::Dh | Tie::Dz => (&mut case.dy, rng.random_range(0..case.t * h)),
        };
        let old = vec[idx];
        vec[idx] = nudge_bf16(rng, old);
        if trace(case).is_some_and(|tr| has_tie(&tr, tie)) {
            return true;
        }
        let vec = match tie {
            Tie::H => &mut case.w1,
            Tie::Y => &mut case.w2,
            Tie::Dh | Tie::Dz => &mut case.dy,
        };
        vec[idx] = old;
    }
    false
}

/// One adversarial case, from any RNG (proptest's, or a fuzzer's bytes
/// through proptest's pass-through RNG). T within `cfg.max_t`, H and F
/// within `cfg.max_e` (and 16), T x H x F within `cfg.max_te`.
pub fn generate<R: Rng + ?Sized>(rng: &mut R, cfg: &GenConfig) -> SharedExpertCase {
    if cfg.shapes != Shapes::Small {
        return generate_reference(rng, cfg);
    }
    // A first draw of 64 bits (see the router's generator): short fuzz
    // inputs still reach every regime.
    let regime = match rng.random::<u64>() % 20 {
        0..=2 => Regime::Plain,
        3..=5 => Regime::Wide,
        6..=10 => Regime::Dyadic,
        11..=14 => Regime::Underflow,
        _ => Regime::Tail,
    };
    let (t, h, f) = generate_shape(rng, cfg, regime == Regime::Tail);
    let (th, fh) = (t * h, 2 * f * h);
    let (mut x, mut w1, w2, mut dy) = match regime {
        Regime::Plain => {
            (fill(rng, th, -3, 2, 7), fill(rng, fh, -3, 1, 7), fill(rng, h * f, -3, 1, 7), fill(rng, th, -3, 2, 7))
        }
        Regime::Wide => (
            fill(rng, th, -20, 20, 7),
            fill(rng, fh, -20, 20, 7),
            fill(rng, h * f, -20, 20, 7),
            fill(rng, th, -20, 20, 7),
        ),
        Regime::Dyadic => {
            (fill(rng, th, -2, 2, 2), fill(rng, fh, -2, 1, 2), fill(rng, h * f, -2, 1, 2), fill(rng, th, -2, 2, 2))
        }
        Regime::Tail => {
            // x in [1, 2) and gate rows <= 0: every g negative, within a
            // factor of about 2 across the tokens; scaled below.
            let mut x = fill(rng, th, 0, 0, 7);
            x.iter_mut().for_each(|v| *v = v.abs());
            let mut w1 = fill(rng, fh, -3, 1, 7);
            w1[..f * h].iter_mut().for_each(|v| *v = -v.abs());
            (x, w1, fill(rng, h * f, -3, 1, 7), fill(rng, th, -3, 2, 7))
        }
        Regime::Underflow => {
            // Products x * w1 at 2^-152 .. 2^-146: multiples of 2^-151 with
            // 1 to 4 significant bits, around the f32 grid step 2^-149.
            (
                fill(rng, th, -76, -74, 2),
                fill(rng, fh, -76, -74, 1),
                fill(rng, h * f, -2, 1, 7),
                fill(rng, th, 100, 120, 7),
            )
        }
    };
    // Sprinkled zeros of either sign.
    for v in x.iter_mut().chain(dy.iter_mut()) {
        if rng.random_bool(0.04) {
            *v = if rng.random_bool(0.5) { 0.0 } else { -0.0 };
        }
    }
    let mut w2 = w2;
    // Saturated gates: a gate row scaled by 2^7..2^9 (|g| past the
    // sigmoid's saturation at both ends), or zeroed (g = 0). Always in the
    // dyadic regime, for half the units: (g * 1) * u is then exact.
    if regime == Regime::Dyadic || rng.random_bool(0.25) {
        let scale = 2f32.powi(rng.random_range(7..=9));
        for j in 0..f {
            let row = &mut w1[j * h..(j + 1) * h];
            match rng.random_range(0..10) {
                0..=4 => row.iter_mut().for_each(|v| *v *= scale),
                5 if regime != Regime::Dyadic => row.iter_mut().for_each(|v| *v = 0.0),
                _ => {}
            }
        }
    }
    // Cancelling pairs: columns a < b of w1 equal, x[t][b] = -x[t][a] large:
    // every z of the token sums a + (-a) exactly, amid the small terms.
    // Likewise rows a < b of w2 and dy for dh.
    if h >= 2 && rng.random_bool(0.25) {
        let a = rng.random_range(0..h - 1);
        let b = rng.random_range(a + 1..h);
        for r in 0..2 * f {
            w1[r * h + b] = w1[r * h + a];
        }
        for j in 0..f {
            w2[b * f + j] = w2[a * f + j];
        }
        for tok in 0..t {
            if rng.random_bool(0.8) {
                let big = bf16_value(rng, 10, 24, 7);
                x[tok * h + a] = big;
                x[tok * h + b] = -big;
                let big = bf16_value(rng, 10, 24, 7);
                dy[tok * h + a] = big;
                dy[tok * h + b] = -big;
            }
        }
    }
    // A gate at the root of dsilu: 1 + g (1 - sig) = 0 at g = -1.27846...
    // Near it that sum cancels, and dgate = (dh u) dsilu carries sig's
    // error magnified by the cancellation (a sigmoid off by an ulp or two
    // flips the bf16 rounding of dz). g = -1.28125 + c exactly, with c a
    // bf16 near 0.0027855 (the root is 2^-17 or so from g) for
    // tokens whose x is 1 at both columns.
    if h >= 2 && regime != Regime::Underflow && rng.random_bool(0.3) {
        let j = rng.random_range(0..f);
        let a = rng.random_range(0..h - 1);
        let b = rng.random_range(a + 1..h);
        let row = &mut w1[j * h..(j + 1) * h];
        row.fill(0.0);
        row[a] = -1.28125;
        // 0x3b36 and 0x3b37 (bf16 bits) bracket 0.0027855; a step or two
        // either side too.
        row[b] = f32::from_bits((0x3b36u32 + rng.random_range(0..4) - 1) << 16);
        for tok in 0..t {
            if rng.random_bool(0.8) {
                // x_b = 1 + k 2^-7 moves g by about 2^-15.8 a step: each
                // token its own g near the root.
                x[tok * h + a] = 1.0;
                x[tok * h + b] = 1.0 + rng.random_range(-4i32..=4) as f32 / 128.0;
            }
        }
    }
    // A token of zeros: g = u = 0.
    if rng.random_bool(0.08) {
        let tok = rng.random_range(0..t);
        x[tok * h..(tok + 1) * h].iter_mut().for_each(|v| *v = if rng.random_bool(0.5) { 0.0 } else { -0.0 });
    }
    // One near-max input among finite ones: z, h or y overflow.
    if rng.random_bool(0.06) {
        let i = rng.random_range(0..t * h);
        x[i] = f32::from_bits(0x7f00_0000 | (rng.random_range(0u32..=0x7f) << 16));
    }
    // Special values, in any input.
    if rng.random_bool(0.18) {
        let p = rng.random_range(0.05..0.3);
        for v in x.iter_mut().chain(w1.iter_mut()).chain(w2.iter_mut()).chain(dy.iter_mut()) {
            if rng.random_bool(p) {
                *v = special(rng);
            }
        }
    }
    let layout = layout(rng, h, f);
    let mut case = SharedExpertCase { t, h, f, layout, x, w1, w2, dy };
    // Gates in the sigmoid's lower tail: a gate row scaled by a power of
    // two so that g of one token lands in -88..-24, where sig ~ e^g keeps
    // the whole relative error of exp (an exp off by 2^-18 there flips one
    // bf16 rounding of h or dz in about a thousand; a case holds many).
    let tail = regime == Regime::Tail;
    if tail || (matches!(regime, Regime::Plain | Regime::Wide) && rng.random_bool(0.3)) {
        if let Some(tr) = trace(&case) {
            for j in 0..f {
                let tok = rng.random_range(0..t);
                let g = tr.g[tok * f + j];
                if !g.is_normal() || (!tail && rng.random_bool(0.3)) {
                    continue;
                }
                // At every token (the tail regime) aim lower: the other tokens' g
                // spread around it.
                let want = -rng.random_range(if tail { 24.0f32..64.0 } else { 24.0..88.0 });
                let k = (want / g).abs().log2().round() as i32;
                let row = &mut case.w1[j * h..(j + 1) * h];
                let scaled: Vec<f32> = row.iter().map(|&v| v * 2f32.powi(k) * -g.signum()).collect();
                if scaled.iter().all(|&v| v.is_finite() && is_bf16(v)) {
                    row.copy_from_slice(&scaled);
                }
            }
        }
    }
    if regime == Regime::Dyadic {
        let mut ties = [Tie::H, Tie::Y, Tie::Dh, Tie::Dz];
        // Each aim moves one input; a later aim can undo an earlier tie,
        // which classify then does not report.
        for i in (1..ties.len()).rev() {
            ties.swap(i, rng.random_range(0..=i));
        }
        for tie in ties.into_iter().take(rng.random_range(1..=4)) {
            aim_tie(rng, &mut case, tie, 40);
        }
    }
    debug_assert!(case.validate().is_ok());
    case
}

// ---------------------------------------------------------------------------
// Classes.

/// A product a * b that f32 cannot hold, non-zero and below 2^-126 (the
/// product of two bf16 is exact in f64).
fn underflows(a: f32, b: f32) -> bool {
    let exact = a as f64 * b as f64;
    exact.is_finite() && exact != 0.0 && exact.abs() < f32::MIN_POSITIVE as f64 && (a * b) as f64 != exact
}

/// A dot product with result `r` and terms `terms` cancels: two non-zero
/// terms, all finite, |r| at most 2^-8 of the largest term.
fn cancels(r: f32, terms: impl Iterator<Item = f32>) -> bool {
    let (mut max, mut nonzero) = (0.0f32, 0);
    for p in terms {
        if !p.is_finite() {
            return false;
        }
        max = max.max(p.abs());
        nonzero += (p != 0.0) as usize;
    }
    nonzero >= 2 && r.is_finite() && r.abs() <= max * (1.0 / 256.0)
}

/// Largest T x H x F whose value classes [`classify`] computes (they trace
/// the profile oracle and visit every product: seconds at this size); a
/// larger case gets its shape and input classes only.
pub const CLASSIFY_MAX_THF: usize = 1 << 26;

/// The classes a (valid) case exercises, read off its values.
pub fn classify(case: &SharedExpertCase) -> BTreeSet<Class> {
    let mut c = BTreeSet::new();
    let (t, h, f) = (case.t, case.h, case.f);
    let mut add = |cond: bool, class: Class| {
        if cond {
            c.insert(class);
        }
    };
    add(t == 1, Class::TOne);
    add(h > 16 || f > 64, Class::TileSpan);
    add(t == 2 || t == 3, Class::TTwoThree);
    add(t >= 5 && t % 2 == 1, Class::TOdd);
    add(tile_edges().contains(&t), Class::TEdge);
    add(h % 2 == 1, Class::HOdd);
    add(f % 2 == 1, Class::FOdd);
    add(case.layout.offset != 0, Class::Offset);
    add(case.layout.row_stride > h, Class::RowStride);
    let eighths = [h, f, case.layout.offset, case.layout.row_stride];
    add(eighths.iter().all(|v| v % 8 == 0), Class::AlignedRows);
    let inputs = || case.x.iter().chain(&case.w1).chain(&case.w2).chain(&case.dy).copied();
    add(inputs().any(|v| v != 0.0 && v.is_finite() && !v.is_normal()), Class::Subnormal);
    add(inputs().any(|v| v == 0.0 && v.is_sign_negative()), Class::SignedZero);
    add(inputs().any(|v| v.is_finite() && v.abs() >= 2f32.powi(127)), Class::NearMax);
    let finite = inputs().all(|v| v.is_finite());
    add(!finite, Class::NonFinite);
    // The classes below need the profile oracle's intermediates (a whole
    // forward and backward): not for tier B's reference shapes.
    if case.t.saturating_mul(case.h).saturating_mul(case.f) > CLASSIFY_MAX_THF {
        return c;
    }
    let Some(tr) = trace(case) else { return c };
    add(has_tie(&tr, Tie::H), Class::TieH);
    add(has_tie(&tr, Tie::Y), Class::TieY);
    add(has_tie(&tr, Tie::Dh), Class::TieDh);
    add(has_tie(&tr, Tie::Dz), Class::TieDz);
    for (&g, &s) in tr.g.iter().zip(&tr.sig) {
        add(g.is_finite() && s == 1.0, Class::SigmoidOne);
        add(g.is_finite() && s == 0.0, Class::SigmoidZero);
        add(g > -88.0 && g < -16.0, Class::SigmoidTail);
        add((1.0 + g * (1.0 - s)).abs() < 1.0 / 256.0, Class::DsiluCancels);
        add(g == 0.0, Class::GZero);
    }
    let inter = [&tr.g, &tr.u, &tr.h_pre, &tr.y_pre, &tr.dh_pre, &tr.dz_pre, &tr.dx];
    add(finite && inter.iter().any(|v| v.iter().any(|x| !x.is_finite())), Class::Overflow);
    // Every product of every dot product, with its result.
    let (x, w1, w2, dy) = (&case.x, &case.w1, &case.w2, &case.dy);
    let mut under = false;
    let mut cancel = false;
    for tok in 0..t {
        let xr = &x[tok * h..(tok + 1) * h];
        let dyr = &dy[tok * h..(tok + 1) * h];
        for r in 0..2 * f {
            let w = &w1[r * h..(r + 1) * h];
            under |= xr.iter().zip(w).any(|(&a, &b)| underflows(a, b));
            let z = if r < f { tr.g[tok * f + r] } else { tr.u[tok * f + r - f] };
            cancel |= cancels(z, xr.iter().zip(w).map(|(&a, &b)| a * b));
        }
        let hr = &tr.h[tok * f..(tok + 1) * f];
        let dzr = &tr.dz[tok * 2 * f..(tok + 1) * 2 * f];
        for i in 0..h {
            let w = &w2[i * f..(i + 1) * f];
            under |= hr.iter().zip(w).any(|(&a, &b)| underflows(a, b));
            cancel |= cancels(tr.y_pre[tok * h + i], hr.iter().zip(w).map(|(&a, &b)| a * b));
            let col = (0..2 * f).map(|r| w1[r * h + i]);
            under |= dzr.iter().zip(col.clone()).any(|(&a, b)| underflows(a, b));
            cancel |= cancels(tr.dx[tok * h + i], dzr.iter().zip(col).map(|(&a, b)| a * b));
        }
        for j in 0..f {
            let col = (0..h).map(|i| w2[i * f + j]);
            under |= dyr.iter().zip(col.clone()).any(|(&a, b)| underflows(a, b));
            cancel |= cancels(tr.dh_pre[tok * f + j], dyr.iter().zip(col).map(|(&a, b)| a * b));
        }
    }
    add(under, Class::UnderflowProduct);
    add(cancel, Class::Cancellation);
    c
}

// ---------------------------------------------------------------------------
// Shrinking.

/// The tokens `rows` (x and dy together).
fn keep_tokens(case: &SharedExpertCase, rows: &[usize]) -> SharedExpertCase {
    let h = case.h;
    let mut c = case.clone();
    c.t = rows.len();
    c.x = rows.iter().flat_map(|&r| case.x[r * h..(r + 1) * h].to_vec()).collect();
    c.dy = rows.iter().flat_map(|&r| case.dy[r * h..(r + 1) * h].to_vec()).collect();
    c
}

/// The model features `cols` (columns of x, dy and w1, rows of w2).
fn keep_h(case: &SharedExpertCase, cols: &[usize]) -> SharedExpertCase {
    let (h, f) = (case.h, case.f);
    let pick_cols = |v: &[f32], rows: usize| -> Vec<f32> {
        (0..rows).flat_map(|r| cols.iter().map(move |&i| v[r * h + i])).collect()
    };
    let mut c = case.clone();
    c.h = cols.len();
    c.x = pick_cols(&case.x, case.t);
    c.dy = pick_cols(&case.dy, case.t);
    c.w1 = pick_cols(&case.w1, 2 * f);
    c.w2 = cols.iter().flat_map(|&i| case.w2[i * f..(i + 1) * f].to_vec()).collect();
    c.layout.row_stride = case.layout.row_stride - h + cols.len();
    c
}

/// The inner units `units` (their gate and up rows of w1, their columns of w2).
fn keep_f(case: &SharedExpertCase, units: &[usize]) -> SharedExpertCase {
    let (h, f) = (case.h, case.f);
    let mut c = case.clone();
    c.f = units.len();
    let rows: Vec<usize> = units.iter().copied().chain(units.iter().map(|&j| f + j)).collect();
    c.w1 = rows.iter().flat_map(|&r| case.w1[r * h..(r + 1) * h].to_vec()).collect();
    c.w2 = (0..h).flat_map(|i| units.iter().map(move |&j| case.w2[i * f + j])).collect();
    c
}

/// Values in a case (x, w1, w2, dy) above which [`shrink_candidates`] only
/// halves.
pub const SHRINK_HALVES_ABOVE: usize = 1 << 16;

/// Strictly smaller or simpler variants, most aggressive first: tokens,
/// H, F, the layout, then values (whole tensors, each distinct value
/// everywhere, single values). Every candidate is valid.
///
/// A case above [`SHRINK_HALVES_ABOVE`] values (tier B's reference shapes)
/// gets only the halves of T, H and F and the dense layout: each candidate
/// is a copy of the case, and the full list (one per token, per column of
/// H, per unit of F) would take hundreds of GBs there.
pub fn shrink_candidates(case: &SharedExpertCase) -> Vec<SharedExpertCase> {
    let mut out = Vec::new();
    let (t, h, f) = (case.t, case.h, case.f);
    if case.x.len() + case.w1.len() + case.w2.len() + case.dy.len() > SHRINK_HALVES_ABOVE {
        if t > 1 {
            out.push(keep_tokens(case, &(0..t / 2).collect::<Vec<_>>()));
            out.push(keep_tokens(case, &(t / 2..t).collect::<Vec<_>>()));
        }
        if h > 1 {
            out.push(keep_h(case, &(0..h / 2).collect::<Vec<_>>()));
            out.push(keep_h(case, &(h / 2..h).collect::<Vec<_>>()));
        }
        if f > 1 {
            out.push(keep_f(case, &(0..f / 2).collect::<Vec<_>>()));
            out.push(keep_f(case, &(f / 2..f).collect::<Vec<_>>()));
        }
        if case.layout != Layout::dense(h) {
            out.push(SharedExpertCase { layout: Layout::dense(h), ..case.clone() });
        }
        return out;
    }
    if t > 1 {
        out.push(keep_tokens(case, &(0..t / 2).collect::<Vec<_>>()));
        out.push(keep_tokens(case, &(t / 2..t).collect::<Vec<_>>()));
        for r in 0..t.min(64) {
            out.push(keep_tokens(case, &[r]));
        }
        for r in 0..t.min(64) {
            out.push(keep_tokens(case, &(0..t).filter(|&x| x != r).collect::<Vec<_>>()));
        }
    }
    for (n, keep) in [(h, keep_h as fn(&SharedExpertCase, &[usize]) -> SharedExpertCase), (f, keep_f)] {
        if n > 1 {
            out.push(keep(case, &(0..n / 2).collect::<Vec<_>>()));
            out.push(keep(case, &(n / 2..n).collect::<Vec<_>>()));
            for d in 0..n {
                out.push(keep(case, &(0..n).filter(|&x| x != d).collect::<Vec<_>>()));
            }
        }
    }
    if case.layout != Layout::dense(h) {
        out.push(SharedExpertCase { layout: Layout::dense(h), ..case.clone() });
    }
    // Whole tensors toward 0 and 1, then each distinct value everywhere,
    // then single values. simplifications() keeps a bf16 a bf16 (0, 1, 0.5,
    // -x and fewer mantissa bits).
    let fields: [Field<SharedExpertCase>; 4] = [|c| &mut c.x, |c| &mut c.w1, |c| &mut c.w2, |c| &mut c.dy];
    out.extend(simplify_fields(case, &fields));
    out
}

// ---------------------------------------------------------------------------
// Invalid inputs.

/// One invalid variant of `case` per validation rule of
/// docs/ops/shared_expert.md#validation (and the case's own: lengths, layout,
/// storage, bf16 values), each named; every one must fail `validate()`.
pub fn invalid_variants(case: &SharedExpertCase) -> Vec<(&'static str, SharedExpertCase)> {
    vec![
        ("t-zero", variant(case, |c| c.t = 0)),
        ("h-zero", variant(case, |c| c.h = 0)),
        ("f-zero", variant(case, |c| c.f = 0)),
        ("x-length", variant(case, |c| c.x.push(0.0))),
        (
            "w1-length",
            variant(case, |c| {
                c.w1.pop();
            }),
        ),
        ("w2-length", variant(case, |c| c.w2.push(1.0))),
        (
            "dy-length",
            variant(case, |c| {
                c.dy.pop();
            }),
        ),
        ("offset-4", variant(case, |c| c.layout.offset = MAX_OFFSET + 1)),
        ("row-stride-below-h", variant(case, |c| c.layout.row_stride = c.h - 1)),
        ("row-stride-huge", variant(case, |c| c.layout.row_stride = usize::MAX / 4)),
        ("f-huge", variant(case, |c| c.f = usize::MAX / 2)),
        ("x-not-bf16", variant(case, |c| c.x[0] = 1.0 + f32::EPSILON)),
        ("w1-not-bf16", variant(case, |c| c.w1[2 * c.f * c.h - 1] = 0.1)),
        ("w2-not-bf16", variant(case, |c| c.w2[0] = f32::from_bits(0x7f80_0001))),
        ("dy-not-bf16", variant(case, |c| c.dy[c.t * c.h - 1] = f32::from_bits(0x0000_0001))),
    ]
}

/// Whether every value of the case is a bf16 (for tests of the generator).
pub fn all_bf16(case: &SharedExpertCase) -> bool {
    case.x.iter().chain(&case.w1).chain(&case.w2).chain(&case.dy).all(|&v| is_bf16(v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::common::complexity;
    use crate::gen::common::testing::{assert_class_names_round_trip, assert_every_class_reached};
    use proptest::test_runner::{RngAlgorithm, TestRng};

    /// Smaller or simpler, lexicographic: the shape (T, H, F), a non-dense
    /// layout, then the values (none more complex, one less so).
    fn smaller(a: &SharedExpertCase, b: &SharedExpertCase) -> bool {
        let size = |c: &SharedExpertCase| (c.t, c.h, c.f, (c.layout != Layout::dense(c.h)) as u32);
        if size(a) != size(b) {
            return size(a) < size(b);
        }
        let values =
            |c: &SharedExpertCase| -> Vec<f32> { c.x.iter().chain(&c.w1).chain(&c.w2).chain(&c.dy).copied().collect() };
        let (va, vb) = (values(a), values(b));
        va.iter().zip(&vb).all(|(&x, &y)| complexity(x) <= complexity(y))
            && va.iter().zip(&vb).any(|(&x, &y)| complexity(x) < complexity(y))
    }

    fn hand_case() -> SharedExpertCase {
        SharedExpertCase {
            t: 2,
            h: 3,
            f: 2,
            layout: Layout::dense(3),
            x: vec![1.0, -0.5, 0.25, 2.0, 0.75, -1.0],
            w1: (0..12).map(|i| i as f32 / 8.0 - 0.625).collect(),
            w2: (0..6).map(|i| 0.5 - i as f32 / 4.0).collect(),
            dy: vec![1.0, 1.0, -1.0, 0.5, 0.25, 2.0],
        }
    }

    /// Tier A reaches the TMA copies (aligned-rows), with strides past H
    /// too, in a few percent of its cases (without the aligned layouts,
    /// 0.8 %: 78 of 10,000).
    #[test]
    fn aligned_rows_come_with_and_without_a_stride() {
        let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
        let (mut dense, mut strided) = (0, 0);
        for _ in 0..4000 {
            let c = generate(&mut rng, &GenConfig::default());
            if classify(&c).contains(&Class::AlignedRows) {
                if c.layout.row_stride > c.h {
                    strided += 1;
                } else {
                    dense += 1;
                }
            }
        }
        assert!(dense + strided >= 60, "{dense} dense, {strided} strided of 4000");
        assert!(dense >= 20 && strided >= 20, "{dense} dense, {strided} strided of 4000");
    }

    /// aligned-rows needs all four of H, F, the offset and the row stride
    /// to be multiples of 8.
    #[test]
    fn aligned_rows_needs_every_row_aligned() {
        let aligned = |h: usize, f: usize, offset: usize, row_stride: usize| {
            let c = SharedExpertCase {
                t: 1,
                h,
                f,
                layout: Layout { offset, row_stride },
                x: vec![1.0; h],
                w1: vec![0.5; 2 * f * h],
                w2: vec![0.25; h * f],
                dy: vec![1.0; h],
            };
            assert_eq!(c.validate(), Ok(()));
            classify(&c).contains(&Class::AlignedRows)
        };
        assert!(aligned(8, 16, 0, 8));
        assert!(aligned(16, 8, 0, 24));
        assert!(!aligned(8, 16, 1, 8), "offset");
        assert!(!aligned(8, 16, 0, 9), "stride");
        assert!(!aligned(12, 16, 0, 12), "H");
        assert!(!aligned(8, 12, 0, 8), "F");
    }

    #[test]
    fn generated_cases_are_valid_and_within_the_config() {
        let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
        let cfg = GenConfig::default();
        for _ in 0..2000 {
            let c = generate(&mut rng, &cfg);
            assert_eq!(c.validate(), Ok(()), "{c:?}");
            assert!(all_bf16(&c));
            let span = c.t == 1 && TILE_SPANS.contains(&(c.h, c.f));
            assert!(span || (c.h <= MAX_WIDTH && c.f <= MAX_WIDTH && c.t <= 129), "{} {} {}", c.t, c.h, c.f);
            let fragment = FRAGMENT_T.contains(&c.t);
            assert!(c.t <= 8 || c.h.max(c.f) <= MAX_WIDTH_LONG || fragment, "{} {} {}", c.t, c.h, c.f);
            assert!(c.t * c.h * c.f <= cfg.max_te);
        }
        for cfg in [
            GenConfig { max_te: 1, max_e: 1, max_t: 1, ..GenConfig::default() },
            GenConfig { max_te: 30, max_e: 5, max_t: 4, ..GenConfig::default() },
            GenConfig { max_te: 64, max_e: 300, max_t: 1100, ..GenConfig::default() },
        ] {
            for _ in 0..300 {
                let c = generate(&mut rng, &cfg);
                assert_eq!(c.validate(), Ok(()), "{c:?}");
                assert!(c.t <= cfg.max_t && c.h <= cfg.max_e && c.f <= cfg.max_e, "{} {} {}", c.t, c.h, c.f);
                assert!(c.t * c.h * c.f <= cfg.max_te, "{} {} {}", c.t, c.h, c.f);
            }
        }
    }

    /// Rows 8..15 and K 8..15 of the tensor cores' fragments together, in
    /// several percent of the cases, and a row pitch of 14.
    #[test]
    fn fragment_shapes_are_drawn() {
        let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
        let cfg = GenConfig::default();
        let shapes: Vec<_> = (0..2000).map(|_| generate_shape(&mut rng, &cfg, false)).collect();
        let both = shapes.iter().filter(|&&(t, h, f)| t > 8 && h > 8 && f > 8).count();
        assert!(both >= 100, "{both} of 2000");
        assert!(shapes.iter().any(|&(_, h, f)| h == 14 || f == 14));
    }

    #[test]
    fn every_class_is_reached() {
        let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
        assert_every_class_reached(&Class::ALL, 1500, || generate(&mut rng, &GenConfig::default()), classify);
    }

    #[test]
    fn class_names_are_kebab_case_and_all_is_complete() {
        assert_eq!(Class::TieDz.to_string(), "tie-dz");
        assert_eq!(Class::UnderflowProduct.to_string(), "underflow-product");
        assert_class_names_round_trip(&Class::ALL);
    }

    #[test]
    fn classify_is_truthful_on_hand_made_cases() {
        let base = hand_case();
        assert_eq!(base.validate(), Ok(()));
        let c = classify(&base);
        for class in [Class::TTwoThree, Class::HOdd] {
            assert!(c.contains(&class), "{class} missing: {c:?}");
        }
        for class in [
            Class::Subnormal,
            Class::SignedZero,
            Class::NearMax,
            Class::NonFinite,
            Class::UnderflowProduct,
            Class::Overflow,
            Class::SigmoidOne,
            Class::SigmoidZero,
            Class::FOdd,
        ] {
            assert!(!c.contains(&class), "{class} on plain values");
        }
        // One token, H = 1, F = 1: z = x * w1, values by hand.
        let one = |x: f32, wg: f32, wu: f32, w2: f32, dy: f32| SharedExpertCase {
            t: 1,
            h: 1,
            f: 1,
            layout: Layout::dense(1),
            x: vec![x],
            w1: vec![wg, wu],
            w2: vec![w2],
            dy: vec![dy],
        };
        // H = 2, x = (1, 1): g = 32 + 0 (sigmoid(32) = 1 exactly), u = 1 +
        // 2^-8, 9 significant bits with the ninth set; h_pre = 32 * u is a tie.
        let tie = SharedExpertCase {
            t: 1,
            h: 2,
            f: 1,
            layout: Layout::dense(2),
            x: vec![1.0, 1.0],
            w1: vec![32.0, 0.0, 1.0, 2f32.powi(-8)],
            w2: vec![1.0, 1.0],
            dy: vec![0.0, 0.0],
        };
        assert_eq!(tie.validate(), Ok(()));
        let c = classify(&tie);
        assert!(c.contains(&Class::SigmoidOne) && c.contains(&Class::TieH), "{c:?}");
        // y = h * 1 = 32 (the tie went to even): no tie of y, dh or dz.
        assert!(!c.contains(&Class::TieY) && !c.contains(&Class::TieDh) && !c.contains(&Class::TieDz), "{c:?}");
        // One ulp of f32 off the tie: no tie.
        let off = SharedExpertCase { w1: vec![32.0, 0.0, 1.0, 2f32.powi(-8) + 2f32.powi(-16)], ..tie.clone() };
        assert!(!classify(&off).contains(&Class::TieH));
        // The same tie in dh: dy . w2 = 1 + 2^-8.
        let dh = SharedExpertCase { w1: vec![1.0, 0.0, 1.0, 0.0], dy: vec![1.0, 2f32.powi(-8)], ..tie.clone() };
        assert!(classify(&dh).contains(&Class::TieDh));
        // Underflow: 2^-75 * 2^-75 = 2^-150, half of the smallest subnormal.
        let uf = one(2f32.powi(-75), 1.0, 2f32.powi(-75), 1.0, 1.0);
        assert!(classify(&uf).contains(&Class::UnderflowProduct));
        let exact = one(2f32.powi(-70), 1.0, 2f32.powi(-70), 1.0, 1.0);
        assert!(!classify(&exact).contains(&Class::UnderflowProduct), "2^-140 is a subnormal f32, exact");
        // g = -200: sigmoid 0 exactly; g = 0.
        assert!(classify(&one(1.0, -200.0, 1.0, 1.0, 1.0)).contains(&Class::SigmoidZero));
        assert!(classify(&one(0.0, 1.0, 1.0, 1.0, 1.0)).contains(&Class::GZero));
        // Overflow from finite inputs: z = 2^127 * 2 = inf.
        let big = one(2f32.powi(127), 2.0, 1.0, 1.0, 1.0);
        let c = classify(&big);
        assert!(c.contains(&Class::Overflow) && c.contains(&Class::NearMax) && !c.contains(&Class::NonFinite));
        // Cancellation: H = 2, x = (B, -B) against an equal column.
        let cancel = SharedExpertCase {
            t: 1,
            h: 2,
            f: 1,
            layout: Layout::dense(2),
            x: vec![1024.0, -1024.0],
            w1: vec![1.0, 1.0, 0.5, 0.25],
            w2: vec![1.0, 1.0],
            dy: vec![1.0, 1.0],
        };
        assert!(classify(&cancel).contains(&Class::Cancellation));
        let sub = one(f32::from_bits(0x0001_0000), 1.0, 1.0, 1.0, -0.0);
        let c = classify(&sub);
        assert!(c.contains(&Class::Subnormal) && c.contains(&Class::SignedZero));
    }

    /// The one shrinker, greedy, with no budget.
    fn shrink(case: &SharedExpertCase, fails: impl Fn(&SharedExpertCase) -> bool) -> SharedExpertCase {
        crate::shrink::shrink::<oracles::op::shared_expert::SharedExpert>(case, fails, usize::MAX)
    }

    #[test]
    fn reference_shapes_are_the_reference_ones_within_their_bounds() {
        let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
        for max_t in [1, 130] {
            let cfg = GenConfig { max_t, shapes: Shapes::Reference, ..GenConfig::default() };
            let c = generate(&mut rng, &cfg);
            assert_eq!(c.validate(), Ok(()));
            assert!(REFERENCE_SHAPES.contains(&(c.h, c.f)), "{} x {}", c.h, c.f);
            assert!((1..=max_t).contains(&c.t) && c.t * c.h <= REFERENCE_MAX_TH, "T = {}", c.t);
            // Big: halves only, each valid and smaller, and few of them.
            let cands = shrink_candidates(&c);
            assert!(cands.len() <= 7, "{} candidates", cands.len());
            for s in &cands {
                assert_eq!(s.validate(), Ok(()));
                assert!(smaller(s, &c));
            }
            let dense = GenConfig { max_t, shapes: Shapes::ReferenceDense, ..GenConfig::default() };
            let d = generate(&mut rng, &dense);
            assert_eq!(d.layout, Layout::dense(d.h));
            // Past the gate, no class that needs the trace (it would take minutes).
            if c.t * c.h * c.f > CLASSIFY_MAX_THF {
                let classes = classify(&c);
                assert!(classes.iter().all(|k| !matches!(k, Class::TieH | Class::TieY | Class::UnderflowProduct)));
            }
        }
    }

    #[test]
    fn shrink_candidates_are_valid_bf16_and_smaller() {
        let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
        let mut n = 0usize;
        for _ in 0..200 {
            let c = generate(&mut rng, &GenConfig::default());
            for s in shrink_candidates(&c) {
                assert_eq!(s.validate(), Ok(()), "{s:?}");
                assert!(smaller(&s, &c), "not smaller: {s:?}\nfrom {c:?}");
                n += 1;
            }
        }
        assert!(n > 10_000, "{n} candidates");
    }

    #[test]
    fn shrinking_reaches_a_minimal_case() {
        // Fails whenever some dy is above 0.7: one token, H = F = 1, dy = 1,
        // every other value 0, dense.
        let fails = |c: &SharedExpertCase| c.dy.iter().any(|&v| v > 0.7);
        let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
        let mut done = 0;
        while done < 5 {
            let c = generate(&mut rng, &GenConfig::default());
            if !fails(&c) {
                continue;
            }
            let m = shrink(&c, fails);
            assert_eq!((m.t, m.h, m.f, m.layout), (1, 1, 1, Layout::dense(1)), "{m:?}");
            assert_eq!(
                (m.x.clone(), m.w1.clone(), m.w2.clone(), m.dy.clone()),
                (vec![0.0], vec![0.0; 2], vec![0.0], vec![1.0])
            );
            done += 1;
        }
    }

    #[test]
    fn invalid_variants_fail_validation() {
        let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
        let mut cases = vec![hand_case()];
        cases.extend((0..300).map(|_| generate(&mut rng, &GenConfig::default())));
        for c in &cases {
            let vs = invalid_variants(c);
            assert_eq!(vs.len(), 15);
            for (name, v) in vs {
                assert!(v.validate().is_err(), "{name} accepted: {v:?}");
            }
        }
    }
}
