//! Adversarial `moe_combine` cases (docs/ops/moe_combine.md; the classes of
//! SPEC.md section 9 and docs/ops/README.md#adversarial-cases).
//!
//! A case is drawn in three steps, in the order the op reads it:
//!
//! 1. a shape: T (tiny, small, at the edges of the dispatch kernel's
//!    64-token chunks), E (1 to 9, or wide and odd: 16, 17, 31, 64, 129,
//!    257), k (1, E, and mostly 3 or more: the sums whose order shows), H
//!    (small, odd, at the dw warp's 32 lanes and at the gather's 256-column
//!    tile);
//! 2. the routing: ids, distinct within a token (random order; ascending, as
//!    the router gives them; one hot expert in every token; or a few
//!    experts taking every choice, so that the others stay empty), padding
//!    (none, some, trailing, all) and a capacity aimed at the loads the ids
//!    give (none, 0, 1, one below the hottest expert's load, exactly one
//!    expert's load, above every load, past 2^31);
//! 3. the values, in one regime: `plain` (router-like weights in (0, 1]
//!    with full f32 mantissas, so that a sum of three terms or more rounds
//!    and its order shows), `wide` (exponents over +-20, either sign),
//!    `dyadic` (short binary fractions: exact sums, where signed zeros and
//!    bf16 ties of y show; ties are then aimed at) or `cascade` (terms near
//!    1 beside terms near 2^-24, as in the op's worked example: the order
//!    decides whether the small ones survive); then optional passes: zero
//!    and tied weights, signed zeros, subnormals, non-finite values, poison
//!    in what the op must not read (the weights of dropped and padding
//!    choices, the x and dy rows of padding tokens) and products that
//!    overflow.
//!
//! The slots come from the oracles' [`dispatch`] (exact integer work, the
//! same for every profile and every conforming kernel): N_slots sizes x_exp
//! and g_disp, and the passes aim at kept, dropped and padding choices
//! through it. [`classify`] reads every class off the values and that
//! dispatch, never off how the case was made, so a shrunk or imported case
//! is tagged truthfully. [`shrink_candidates`] drops tokens, choices,
//! columns and unchosen experts (each x_exp and g_disp row follows its
//! owner choice to the slot the new dispatch gives it), lowers or removes
//! the capacity, drops the layout, and simplifies values toward 0, 1 and
//! short binary fractions that are still bf16 where they must be.

use super::common::{layout, nudge_bf16, pick, simplify_fields, variant, write_class_name, Field};
use super::GenConfig;
use crate::knobs::Shapes;
use oracles::bf16::is_tie;
use oracles::case::moe_combine::{dispatch, Dispatch, MoeCombineCase};
use oracles::case::{Layout, MAX_OFFSET};
use oracles::same_bits;
use proptest::prelude::{Rng, RngExt};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fmt;

/// The adversarial classes of `moe_combine`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    /// T = 1.
    TOne,
    /// T = 2 or 3.
    TTwoThree,
    /// T = n-1, n or n+1 for n = 64 or 128: the dispatch kernel ranks
    /// choices in chunks of 64 tokens, and a chunk's base is carried across.
    TChunkEdge,
    /// k = 1: one term, no order to get wrong.
    KOne,
    /// k = E >= 2: every token chooses every expert.
    KAll,
    /// H odd, 3 or more.
    HOdd,
    /// H = n-1, n or n+1 for n = 32 (the warp that sums dw) or 256 (the
    /// gather kernels' column tile).
    HEdge,
    /// Element offset 1, 2 or 3.
    Offset,
    /// Row stride > H.
    RowStride,
    /// No capacity: every valid choice is kept.
    NoCapacity,
    /// Capacity 0: every choice dropped, N_slots = 0.
    CapacityZero,
    /// A capacity of 1 or more that drops some choice.
    CapacityDrops,
    /// A capacity of 1 or more that some expert's load meets exactly (its
    /// last choice is the last one kept).
    CapacityExact,
    /// Some token is padding, some is not.
    Padding,
    /// Every token is padding: no slot at all.
    AllPadding,
    /// A valid token whose every choice is dropped: y and dx +0.0.
    NoKeptChoice,
    /// A token with three kept choices or more whose ids are not ascending
    /// in choice order: the one place where `serial` and `by-slot` list
    /// its terms differently.
    IdsUnsorted,
    /// E >= 2 and an expert with no slot beside one with some.
    EmptyExpert,
    /// Two valid tokens or more, and an expert every one of them chose.
    HotExpert,
    /// `serial` and `by-slot` give y or dx different bits.
    ByChoiceNotBySlot,
    /// A sum of y, dx (three kept terms or more) or dw (H >= 3) whose bits
    /// change when its terms are added in the reverse order.
    OrderSensitive,
    /// Two equal non-zero weights among a token's kept choices.
    TiedWeights,
    /// A kept choice of weight +0.0 or -0.0.
    ZeroWeight,
    /// -0.0 among the values the op reads.
    SignedZero,
    /// A subnormal among the values the op reads.
    Subnormal,
    /// A NaN or an infinity among the values the op reads.
    NonFinite,
    /// A NaN or an infinity where the op must not look: the weight of a
    /// dropped or padding choice, or a padding token's x or dy.
    PoisonUnread,
    /// Every value the op reads finite, and a product or a sum of y or dw
    /// infinite or NaN.
    Overflow,
    /// A `serial` y exactly halfway between two bf16 values (the rounding
    /// `serial-bf16` decides).
    Bf16Tie,
}

impl Class {
    pub const ALL: [Class; 29] = [
        Class::TOne,
        Class::TTwoThree,
        Class::TChunkEdge,
        Class::KOne,
        Class::KAll,
        Class::HOdd,
        Class::HEdge,
        Class::Offset,
        Class::RowStride,
        Class::NoCapacity,
        Class::CapacityZero,
        Class::CapacityDrops,
        Class::CapacityExact,
        Class::Padding,
        Class::AllPadding,
        Class::NoKeptChoice,
        Class::IdsUnsorted,
        Class::EmptyExpert,
        Class::HotExpert,
        Class::ByChoiceNotBySlot,
        Class::OrderSensitive,
        Class::TiedWeights,
        Class::ZeroWeight,
        Class::SignedZero,
        Class::Subnormal,
        Class::NonFinite,
        Class::PoisonUnread,
        Class::Overflow,
        Class::Bf16Tie,
    ];
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_class_name(self, f)
    }
}

/// T at the edges of the dispatch kernel's token chunks (64) and of two.
const T_EDGES: [usize; 6] = [63, 64, 65, 127, 128, 129];
/// H at the edges of the dw warp (32 lanes) and of the gather's column tile (256).
const H_EDGES: [usize; 6] = [31, 32, 33, 255, 256, 257];
/// Wide E: powers of two, their neighbours, and DeepSeek-V3's 256 routed experts.
const WIDE_E: [usize; 8] = [16, 17, 31, 32, 64, 129, 256, 257];
/// A capacity past i32: the kernels' `cap` is min(C, T), never C itself.
const HUGE_CAPACITY: usize = (1 << 31) + 5;

// ---------------------------------------------------------------------------
// Values.

/// A random sign.
fn sign<R: Rng + ?Sized>(rng: &mut R) -> u32 {
    if rng.random_bool(0.5) {
        0x8000_0000
    } else {
        0
    }
}

/// An f32 of random sign, exponent in lo..=hi (normal range), the top
/// `bits` (at most 23) of its mantissa random and the rest zero.
fn f32_value<R: Rng + ?Sized>(rng: &mut R, lo: i32, hi: i32, bits: u32) -> f32 {
    let e = rng.random_range(lo.max(-126)..=hi.min(127));
    let b = bits.min(23);
    let m = if b == 0 { 0 } else { (rng.random::<u32>() & 0x7f_ffff) >> (23 - b) << (23 - b) };
    f32::from_bits(sign(rng) | (((e + 127) as u32) << 23) | m)
}

/// A bf16 (as its f32) of random sign, exponent in lo..=hi, the top `bits`
/// (at most 7) of its mantissa random.
fn bf16_value<R: Rng + ?Sized>(rng: &mut R, lo: i32, hi: i32, bits: u32) -> f32 {
    let x = f32_value(rng, lo, hi, bits.min(7));
    f32::from_bits(x.to_bits() & 0xffff_0000)
}

/// Non-finite values of each kind, every one a bf16 too (x and x_exp must
/// hold bf16 values): quiet NaNs with and without a payload in the upper
/// half, and both infinities.
const NON_FINITE: [f32; 4] =
    [f32::from_bits(0x7fc0_0000), f32::from_bits(0xffc1_0000), f32::INFINITY, f32::NEG_INFINITY];

/// A subnormal: a bf16 one (exponent field 0, a non-zero 7-bit mantissa)
/// when `bf16`, else any f32 one.
fn subnormal<R: Rng + ?Sized>(rng: &mut R, bf16: bool) -> f32 {
    let m = if bf16 { rng.random_range(1u32..=0x7f) << 16 } else { rng.random_range(1u32..=0x7f_ffff) };
    f32::from_bits(sign(rng) | m)
}

/// The value regimes (see the module header).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Regime {
    Plain,
    Wide,
    Dyadic,
    Cascade,
}

/// One value of a regime: a bf16 when `bf16` (x, x_exp), an f32 otherwise.
fn value<R: Rng + ?Sized>(rng: &mut R, regime: Regime, bf16: bool) -> f32 {
    let (lo, hi, bits) = match regime {
        Regime::Plain => (-3, 2, 23),
        Regime::Wide => (-20, 20, 23),
        Regime::Dyadic => (-2, 2, 2),
        Regime::Cascade => {
            // About 1, or about 2^-24: a term of one beside terms of the
            // other survives or vanishes by the order of the sum.
            if rng.random_bool(0.5) {
                (0, 0, 3)
            } else {
                (-25, -23, 1)
            }
        }
    };
    if bf16 {
        bf16_value(rng, lo, hi, bits)
    } else {
        f32_value(rng, lo, hi, bits)
    }
}

/// A weight of a regime: router-like (positive, at most 1, a full
/// mantissa) in `plain`, short in `cascade`.
fn weight<R: Rng + ?Sized>(rng: &mut R, regime: Regime) -> f32 {
    match regime {
        Regime::Plain => f32_value(rng, -4, -1, 23).abs() * 2.0,
        Regime::Cascade => pick(rng, &[1.0, 0.5, 2.0, -1.0, 0.75]),
        r => value(rng, r, false),
    }
}

// ---------------------------------------------------------------------------
// Shapes and routing.

/// (T, H, E, k) within the config: T x k x H (the case's size, the work of
/// its sums) at most `max_te`, T at most `max_t`, E at most `max_e`.
fn shape<R: Rng + ?Sized>(rng: &mut R, cfg: &GenConfig) -> (usize, usize, usize, usize) {
    let budget = cfg.max_te.max(1);
    let e = if rng.random_range(0..4) < 3 { rng.random_range(1..=9) } else { pick(rng, &WIDE_E) };
    let e = e.min(cfg.max_e.max(1));
    let k = match rng.random_range(0..10) {
        0 => 1,
        1 => e,
        2 | 3 => rng.random_range(1..=e.min(8)),
        _ => rng.random_range(3usize.min(e)..=e.min(8)),
    };
    let t = match rng.random_range(0..20) {
        0..=6 => rng.random_range(1..=3),
        7..=14 => rng.random_range(4..=12),
        15 | 16 => pick(rng, &T_EDGES),
        _ => rng.random_range(13..=32),
    }
    .min(cfg.max_t.max(1));
    let h = match rng.random_range(0..20) {
        0..=12 => pick(rng, &[1, 2, 3, 4, 5, 6, 8]),
        13..=16 => pick(rng, &[7, 9, 11, 13]),
        _ => pick(rng, &H_EDGES),
    };
    // Narrow H first, then T, then k (k stays within 1..=E).
    let (mut t, mut h, mut k) = (t, h, k);
    while t * k * h > budget {
        if h > 1 {
            h = (budget / (t * k)).clamp(1, h - 1);
        } else if t > 1 {
            t = (budget / k).clamp(1, t - 1);
        } else {
            k = budget.min(k - 1).max(1);
        }
    }
    (t, h, e, k)
}

/// `k` distinct values of `pool`, in a random order (a partial Fisher-Yates).
fn sample<R: Rng + ?Sized>(rng: &mut R, mut pool: Vec<u32>, k: usize) -> Vec<u32> {
    for i in 0..k.min(pool.len()) {
        let j = rng.random_range(i..pool.len());
        pool.swap(i, j);
    }
    pool.truncate(k);
    pool
}

/// T x k ids, distinct within each token (see the module header).
fn routing<R: Rng + ?Sized>(rng: &mut R, t: usize, e: usize, k: usize) -> Vec<u32> {
    let mode = rng.random_range(0..20);
    let hot = rng.random_range(0..e) as u32;
    let few = (k + 1).min(e) as u32;
    let mut ids = Vec::with_capacity(t * k);
    for _ in 0..t {
        let row = match mode {
            0..=8 => sample(rng, (0..e as u32).collect(), k),
            9..=12 => {
                let mut r = sample(rng, (0..e as u32).collect(), k);
                r.sort_unstable();
                r
            }
            13..=15 => {
                let mut r = sample(rng, (0..e as u32).filter(|&x| x != hot).collect(), k - 1);
                let at = rng.random_range(0..=r.len());
                r.insert(at, hot);
                r
            }
            _ => sample(rng, (0..few).collect(), k),
        };
        ids.extend(row);
    }
    ids
}

/// Padding flags: none, some, trailing (a padded batch), all, or given and
/// all false.
fn padding<R: Rng + ?Sized>(rng: &mut R, t: usize) -> Option<Vec<bool>> {
    match rng.random_range(0..20) {
        0..=10 => None,
        11..=15 => Some((0..t).map(|_| rng.random_bool(0.3)).collect()),
        16 | 17 => {
            let from = rng.random_range(1..=t);
            Some((0..t).map(|i| i >= from).collect())
        }
        18 => Some(vec![true; t]),
        _ => Some(vec![false; t]),
    }
}

/// The valid choices of each expert (its load, before any capacity).
fn loads(case: &MoeCombineCase) -> Vec<usize> {
    let mut l = vec![0usize; case.e];
    for t in (0..case.t).filter(|&t| !case.is_padding(t)) {
        for &id in case.ids_row(t) {
            l[id as usize] += 1;
        }
    }
    l
}

/// A capacity aimed at the loads (see the module header).
fn capacity<R: Rng + ?Sized>(rng: &mut R, case: &MoeCombineCase) -> Option<usize> {
    let l = loads(case);
    let max = l.iter().copied().max().unwrap_or(0);
    let used: Vec<usize> = l.iter().copied().filter(|&x| x > 0).collect();
    Some(match rng.random_range(0..20) {
        0..=7 => return None,
        8 => 0,
        9 => 1,
        10..=12 => max.saturating_sub(1),
        13 | 14 => {
            if used.is_empty() {
                max
            } else {
                pick(rng, &used)
            }
        }
        15..=17 => rng.random_range(1..=max.max(1)),
        18 => max + rng.random_range(0..=3),
        _ => HUGE_CAPACITY,
    })
}

// ---------------------------------------------------------------------------
// Generation.

/// The reference shapes (H, E, k) of docs/ops/moe_combine.md#shapes-in-practice
/// (DeepSeek-V3's routed experts, and the same at H = 4096), tier B's.
pub const REFERENCE_SHAPES: [(usize, usize, usize); 2] = [(7168, 256, 8), (4096, 256, 8)];
/// Most values of x_exp (T x k x H) in a reference-shape case: T is cut to it.
const REFERENCE_MAX_TKH: usize = 1 << 24;

/// A tier-B case (`GenConfig::shapes`): a reference shape, T in 1..=max_t
/// with T x k x H <= 2^24, the router's ascending ids, no capacity (as
/// DeepSeek-V3 trains) or the capacity of a factor 1.25, plain values with
/// sprinkled signed zeros, a random layout (dense for `reference-dense`).
/// No aims: tier B compares a subject with itself (batch invariance,
/// determinism, offset/stride), which needs no special values to fail.
fn generate_reference<R: Rng + ?Sized>(rng: &mut R, cfg: &GenConfig) -> MoeCombineCase {
    let (h, e, k) = pick(rng, &REFERENCE_SHAPES);
    let t = rng.random_range(1..=cfg.max_t.clamp(1, REFERENCE_MAX_TKH / (k * h)));
    let mut ids = Vec::with_capacity(t * k);
    for _ in 0..t {
        let mut r = sample(rng, (0..e as u32).collect(), k);
        r.sort_unstable();
        ids.extend(r);
    }
    let capacity = rng.random_bool(1.0 / 3.0).then(|| (5 * t * k).div_ceil(4 * e));
    let layout = if cfg.shapes == Shapes::ReferenceDense { Layout::dense(h) } else { layout(rng, h) };
    let mut case = MoeCombineCase {
        t,
        h,
        e,
        k,
        capacity,
        layout,
        ids,
        weights: (0..t * k).map(|_| weight(rng, Regime::Plain)).collect(),
        padding: None,
        x: (0..t * h).map(|_| value(rng, Regime::Plain, true)).collect(),
        x_exp: Vec::new(),
        dy: (0..t * h).map(|_| value(rng, Regime::Plain, false)).collect(),
        g_disp: Vec::new(),
    };
    let n = dispatch(&case).unwrap_or_default().n_slots;
    case.x_exp = (0..n * h).map(|_| value(rng, Regime::Plain, true)).collect();
    case.g_disp = (0..n * h).map(|_| value(rng, Regime::Plain, false)).collect();
    for v in case.x_exp.iter_mut().chain(case.dy.iter_mut()) {
        if rng.random_bool(0.01) {
            *v = if rng.random_bool(0.5) { 0.0 } else { -0.0 };
        }
    }
    case
}

/// One adversarial case, from any RNG (proptest's, or a fuzzer's bytes
/// through proptest's pass-through RNG). T within `cfg.max_t`, E within
/// `cfg.max_e`, T x k x H within `cfg.max_te`.
pub fn generate<R: Rng + ?Sized>(rng: &mut R, cfg: &GenConfig) -> MoeCombineCase {
    if cfg.shapes != Shapes::Small {
        return generate_reference(rng, cfg);
    }
    // A first draw of 64 bits (see the router's generator): short fuzz
    // inputs still reach every regime.
    let regime = match rng.random::<u64>() % 20 {
        0..=6 => Regime::Plain,
        7..=10 => Regime::Wide,
        11..=15 => Regime::Dyadic,
        _ => Regime::Cascade,
    };
    let (t, h, e, k) = shape(rng, cfg);
    let ids = routing(rng, t, e, k);
    let padding = padding(rng, t);
    let mut case = MoeCombineCase {
        t,
        h,
        e,
        k,
        capacity: None,
        layout: Layout::dense(h),
        ids,
        weights: Vec::new(),
        padding,
        x: Vec::new(),
        x_exp: Vec::new(),
        dy: Vec::new(),
        g_disp: Vec::new(),
    };
    case.capacity = capacity(rng, &case);
    // Valid by construction (distinct ids below E, T flags).
    let d = dispatch(&case).unwrap_or_default();
    let n = d.n_slots;
    case.weights = (0..t * k).map(|_| weight(rng, regime)).collect();
    case.x = (0..t * h).map(|_| value(rng, regime, true)).collect();
    case.x_exp = (0..n * h).map(|_| value(rng, regime, true)).collect();
    case.dy = (0..t * h).map(|_| value(rng, regime, false)).collect();
    case.g_disp = (0..n * h).map(|_| value(rng, regime, false)).collect();
    passes(rng, &mut case, &d);
    case.layout = layout(rng, h);
    if regime == Regime::Dyadic && rng.random_bool(0.7) {
        aim_tie(rng, &mut case, &d, 40);
    }
    debug_assert_eq!(case.validate(), Ok(()));
    case
}

/// The optional passes of the module header, each on some of the cases.
fn passes<R: Rng + ?Sized>(rng: &mut R, case: &mut MoeCombineCase, d: &Dispatch) {
    let (t_n, h, k) = (case.t, case.h, case.k);
    // Zero weights of either sign.
    if rng.random_bool(0.12) {
        for w in case.weights.iter_mut() {
            if rng.random_bool(0.3) {
                *w = if rng.random_bool(0.5) { 0.0 } else { -0.0 };
            }
        }
    }
    // Tied weights: one choice's weight copied to another of its token.
    if k >= 2 && rng.random_bool(0.15) {
        for t in 0..t_n {
            if rng.random_bool(0.5) {
                let a = rng.random_range(0..k);
                let b = (a + rng.random_range(1..k)) % k;
                case.weights[t * k + b] = case.weights[t * k + a];
            }
        }
    }
    // Signed zeros among the rows.
    if rng.random_bool(0.12) {
        for v in case.x_exp.iter_mut().chain(case.dy.iter_mut()).chain(case.g_disp.iter_mut()) {
            if rng.random_bool(0.1) {
                *v = if rng.random_bool(0.5) { 0.0 } else { -0.0 };
            }
        }
    }
    // Subnormals.
    if rng.random_bool(0.08) {
        for v in case.x_exp.iter_mut() {
            if rng.random_bool(0.1) {
                *v = subnormal(rng, true);
            }
        }
        for v in case.weights.iter_mut().chain(case.dy.iter_mut()).chain(case.g_disp.iter_mut()) {
            if rng.random_bool(0.1) {
                *v = subnormal(rng, false);
            }
        }
    }
    // Non-finite values anywhere (they are valid, and propagate).
    if rng.random_bool(0.1) {
        let fields = [&mut case.weights, &mut case.x, &mut case.x_exp, &mut case.dy, &mut case.g_disp];
        for v in fields.into_iter().flat_map(|f| f.iter_mut()) {
            if rng.random_bool(0.08) {
                *v = pick(rng, &NON_FINITE);
            }
        }
    }
    // Poison where the op must not look: dropped and padding choices'
    // weights, padding tokens' x and dy.
    if rng.random_bool(0.5) {
        for (i, w) in case.weights.iter_mut().enumerate() {
            if d.slot[i] < 0 && rng.random_bool(0.7) {
                *w = pick(rng, &NON_FINITE);
            }
        }
        let padded: Vec<usize> = (0..t_n).filter(|&t| case.is_padding(t)).collect();
        for t in padded {
            for i in t * h..(t + 1) * h {
                case.x[i] = pick(rng, &NON_FINITE);
                case.dy[i] = pick(rng, &NON_FINITE);
            }
        }
    }
    // A product that overflows: a kept weight near 2^100 against its slot's
    // row near 2^30.
    if d.n_slots > 0 && rng.random_bool(0.06) {
        let s = rng.random_range(0..d.n_slots);
        case.weights[d.owner[s]] = f32_value(rng, 100, 110, 23);
        for v in &mut case.x_exp[s * h..(s + 1) * h] {
            *v = bf16_value(rng, 28, 40, 7);
        }
    }
}

/// y[t][i] of the `serial` profile: the kept choices' products in
/// ascending j, each rounded, added from +0.0 (the op's definition, for
/// aiming and classifying; no subject is asked).
fn serial_y(case: &MoeCombineCase, d: &Dispatch, t: usize, i: usize) -> f32 {
    let mut acc = 0.0f32;
    for j in d.kept(t, case.k) {
        let s = d.slot[t * case.k + j] as usize;
        acc += case.weights[t * case.k + j] * case.x_exp[s * case.h + i];
    }
    acc
}

/// Nudges one kept x_exp value at a time (a short binary fraction near its
/// old magnitude) until some `serial` y lies exactly halfway between two
/// bf16 values, trying at most `tries` nudges; keeps the nudge that hits.
fn aim_tie<R: Rng + ?Sized>(rng: &mut R, case: &mut MoeCombineCase, d: &Dispatch, tries: usize) -> bool {
    if d.n_slots == 0 {
        return false;
    }
    for _ in 0..tries {
        let s = rng.random_range(0..d.n_slots);
        let (t, _) = d.owner_of(s, case.k);
        let i = rng.random_range(0..case.h);
        let at = s * case.h + i;
        let old = case.x_exp[at];
        case.x_exp[at] = nudge_bf16(rng, old);
        if is_tie(serial_y(case, d, t, i)) {
            return true;
        }
        case.x_exp[at] = old;
    }
    false
}

// ---------------------------------------------------------------------------
// Classes.

/// Largest T x k x H whose value classes [`classify`] computes (each sum
/// three ways); a larger case gets its shape and routing classes only.
pub const CLASSIFY_MAX_TKH: usize = 1 << 22;

/// The classes a (valid) case exercises, read off its values and its
/// dispatch.
pub fn classify(case: &MoeCombineCase) -> BTreeSet<Class> {
    let mut c = BTreeSet::new();
    let Ok(d) = dispatch(case) else { return c };
    let (t_n, h, e, k) = (case.t, case.h, case.e, case.k);
    let mut add = |cond: bool, class: Class| {
        if cond {
            c.insert(class);
        }
    };
    add(t_n == 1, Class::TOne);
    add(t_n == 2 || t_n == 3, Class::TTwoThree);
    add(T_EDGES.contains(&t_n), Class::TChunkEdge);
    add(k == 1, Class::KOne);
    add(k == e && e >= 2, Class::KAll);
    add(h % 2 == 1 && h >= 3, Class::HOdd);
    add(H_EDGES.contains(&h), Class::HEdge);
    add(case.layout.offset != 0, Class::Offset);
    add(case.layout.row_stride > h, Class::RowStride);
    let valid: Vec<usize> = (0..t_n).filter(|&t| !case.is_padding(t)).collect();
    let l = loads(case);
    let choices: usize = valid.len() * k;
    match case.capacity {
        None => add(true, Class::NoCapacity),
        Some(0) => add(true, Class::CapacityZero),
        Some(cap) => {
            add(d.n_slots < choices, Class::CapacityDrops);
            add(l.contains(&cap), Class::CapacityExact);
        }
    }
    add(!valid.is_empty() && valid.len() < t_n, Class::Padding);
    add(valid.is_empty(), Class::AllPadding);
    add(valid.iter().any(|&t| d.kept(t, k).next().is_none()), Class::NoKeptChoice);
    add(e >= 2 && d.counts.contains(&0) && d.n_slots > 0, Class::EmptyExpert);
    add(valid.len() >= 2 && l.contains(&valid.len()), Class::HotExpert);
    // The kept choices of each token as (j, slot), in j order.
    let kept: Vec<Vec<(usize, usize)>> =
        (0..t_n).map(|t| d.kept(t, k).map(|j| (j, d.slot[t * k + j] as usize)).collect()).collect();
    add(
        kept.iter()
            .enumerate()
            .any(|(t, kj)| kj.len() >= 3 && kj.windows(2).any(|w| case.ids[t * k + w[0].0] > case.ids[t * k + w[1].0])),
        Class::IdsUnsorted,
    );
    let kept_weights = |t: usize| kept[t].iter().map(move |&(j, _)| case.weights[t * k + j]);
    add(
        (0..t_n).any(|t| {
            let w: Vec<f32> = kept_weights(t).filter(|w| w.is_finite() && *w != 0.0).collect();
            w.iter().enumerate().any(|(a, x)| w[a + 1..].contains(x))
        }),
        Class::TiedWeights,
    );
    add((0..t_n).any(|t| kept_weights(t).any(|w| w == 0.0)), Class::ZeroWeight);
    // The values the op reads: kept weights, the x and dy rows of tokens
    // with a kept choice, every x_exp and g_disp row.
    let read: Vec<f32> = (0..t_n)
        .filter(|&t| !kept[t].is_empty())
        .flat_map(|t| kept_weights(t).chain(case.x_row(t).iter().copied()).chain(case.dy_row(t).iter().copied()))
        .chain(case.x_exp.iter().copied())
        .chain(case.g_disp.iter().copied())
        .collect();
    add(read.iter().any(|v| *v == 0.0 && v.is_sign_negative()), Class::SignedZero);
    add(read.iter().any(|v| v.is_subnormal()), Class::Subnormal);
    let finite = read.iter().all(|v| v.is_finite());
    add(!finite, Class::NonFinite);
    let unread_weight = (0..t_n * k).any(|i| d.slot[i] < 0 && !case.weights[i].is_finite());
    let unread_rows = (0..t_n)
        .filter(|&t| case.is_padding(t))
        .any(|t| case.x_row(t).iter().chain(case.dy_row(t)).any(|v| !v.is_finite()));
    add(unread_weight || unread_rows, Class::PoisonUnread);
    if t_n.saturating_mul(k).saturating_mul(h) > CLASSIFY_MAX_TKH {
        return c;
    }
    // Each sum of the op in its order, reversed, and (y, dx) by slot.
    let sum = |terms: &mut dyn Iterator<Item = f32>| terms.fold(0.0f32, |acc, x| acc + x);
    let (mut order, mut by_slot, mut overflow, mut tie) = (false, false, false, false);
    for (t, kj) in kept.iter().enumerate() {
        let mut ks = kj.clone();
        ks.sort_by_key(|&(_, s)| s);
        let w = |j: usize| case.weights[t * k + j];
        for i in 0..h {
            let y_term = |&(j, s): &(usize, usize)| w(j) * case.x_exp[s * h + i];
            let dx_term = |&(_, s): &(usize, usize)| case.g_disp[s * h + i];
            let y = sum(&mut kj.iter().map(y_term));
            let dx = sum(&mut kj.iter().map(dx_term));
            if kj.len() >= 3 {
                order |= !same_bits(y, sum(&mut kj.iter().rev().map(y_term)))
                    || !same_bits(dx, sum(&mut kj.iter().rev().map(dx_term)));
            }
            by_slot |=
                !same_bits(y, sum(&mut ks.iter().map(y_term))) || !same_bits(dx, sum(&mut ks.iter().map(dx_term)));
            overflow |= !y.is_finite() || kj.iter().any(|p| !y_term(p).is_finite());
            tie |= is_tie(y);
        }
        for &(_, s) in kj {
            let dw_term = |i: usize| case.dy[t * h + i] * case.x_exp[s * h + i];
            let dw = sum(&mut (0..h).map(dw_term));
            overflow |= !dw.is_finite();
            if h >= 3 {
                order |= !same_bits(dw, sum(&mut (0..h).rev().map(dw_term)));
            }
        }
    }
    add(order, Class::OrderSensitive);
    add(by_slot, Class::ByChoiceNotBySlot);
    add(finite && overflow, Class::Overflow);
    add(tie, Class::Bf16Tie);
    c
}

// ---------------------------------------------------------------------------
// Shrinking.

/// A case made of `case`'s tokens `tokens` (old indices, in order), its
/// choices `choices` (the old j of each new j), its columns `cols` of H,
/// with each id relabelled by `relabel` among `e` experts, and capacity
/// `capacity`. Every kept choice of the new case keeps the x_exp and g_disp
/// rows its old choice had (1.0 where the old choice had no slot), at the
/// slot the new dispatch gives it.
fn rebuild(
    case: &MoeCombineCase,
    tokens: &[usize],
    choices: &[usize],
    cols: &[usize],
    e: usize,
    relabel: &dyn Fn(u32) -> u32,
    capacity: Option<usize>,
) -> MoeCombineCase {
    let old = dispatch(case).unwrap_or_default();
    let (k0, h0) = (case.k, case.h);
    let per_token = |v: &[f32], w: usize, idx: &[usize]| -> Vec<f32> {
        tokens.iter().flat_map(|&t| idx.iter().map(move |&i| v[t * w + i])).collect()
    };
    let mut c = MoeCombineCase {
        t: tokens.len(),
        h: cols.len(),
        e,
        k: choices.len(),
        capacity,
        layout: Layout { offset: case.layout.offset, row_stride: case.layout.row_stride - h0 + cols.len() },
        ids: tokens.iter().flat_map(|&t| choices.iter().map(move |&j| relabel(case.ids[t * k0 + j]))).collect(),
        weights: per_token(&case.weights, k0, choices),
        padding: case.padding.as_ref().map(|p| tokens.iter().map(|&t| p[t]).collect()),
        x: per_token(&case.x, h0, cols),
        x_exp: Vec::new(),
        dy: per_token(&case.dy, h0, cols),
        g_disp: Vec::new(),
    };
    let new = dispatch(&c).unwrap_or_default();
    for s in 0..new.n_slots {
        let (t, j) = new.owner_of(s, c.k);
        let from = old.slot.get(tokens[t] * k0 + choices[j]).and_then(|&s| usize::try_from(s).ok());
        for &i in cols {
            let (x, g) = from.map_or((1.0, 1.0), |o| (case.x_exp[o * h0 + i], case.g_disp[o * h0 + i]));
            c.x_exp.push(x);
            c.g_disp.push(g);
        }
    }
    c
}

/// Values in a case above which [`shrink_candidates`] only halves.
pub const SHRINK_HALVES_ABOVE: usize = 1 << 16;

/// Strictly smaller or simpler variants, most aggressive first: tokens,
/// choices, columns, unchosen experts, the capacity, the padding flags, the
/// layout, then values (whole fields, each distinct value everywhere, single
/// values). Every candidate is valid.
///
/// A case above [`SHRINK_HALVES_ABOVE`] values (tier B's reference shapes)
/// gets only the halves of T and H and the dense layout: each candidate is a
/// copy of the case, and the full list would take GBs there.
pub fn shrink_candidates(case: &MoeCombineCase) -> Vec<MoeCombineCase> {
    let mut out = Vec::new();
    let (t, h, e, k) = (case.t, case.h, case.e, case.k);
    let all = |n: usize| (0..n).collect::<Vec<_>>();
    let but = |n: usize, skip: usize| (0..n).filter(|&x| x != skip).collect::<Vec<_>>();
    let same = |id: u32| id;
    let keep = |tokens: &[usize], choices: &[usize], cols: &[usize]| {
        rebuild(case, tokens, choices, cols, e, &same, case.capacity)
    };
    let values = case.x.len() + case.x_exp.len() + case.dy.len() + case.g_disp.len() + case.weights.len();
    if values > SHRINK_HALVES_ABOVE {
        if t > 1 {
            out.push(keep(&(0..t / 2).collect::<Vec<_>>(), &all(k), &all(h)));
            out.push(keep(&(t / 2..t).collect::<Vec<_>>(), &all(k), &all(h)));
        }
        if h > 1 {
            out.push(keep(&all(t), &all(k), &(0..h / 2).collect::<Vec<_>>()));
            out.push(keep(&all(t), &all(k), &(h / 2..h).collect::<Vec<_>>()));
        }
        if case.layout != Layout::dense(h) {
            out.push(MoeCombineCase { layout: Layout::dense(h), ..case.clone() });
        }
        return out;
    }
    if t > 1 {
        out.push(keep(&(0..t / 2).collect::<Vec<_>>(), &all(k), &all(h)));
        out.push(keep(&(t / 2..t).collect::<Vec<_>>(), &all(k), &all(h)));
        for r in 0..t.min(64) {
            out.push(keep(&[r], &all(k), &all(h)));
        }
        for r in 0..t.min(64) {
            out.push(keep(&but(t, r), &all(k), &all(h)));
        }
    }
    if k > 1 {
        for j in 0..k.min(64) {
            out.push(keep(&all(t), &but(k, j), &all(h)));
        }
    }
    if h > 1 {
        out.push(keep(&all(t), &all(k), &(0..h / 2).collect::<Vec<_>>()));
        out.push(keep(&all(t), &all(k), &(h / 2..h).collect::<Vec<_>>()));
        for i in 0..h.min(64) {
            out.push(keep(&all(t), &all(k), &but(h, i)));
        }
    }
    // Experts no token chooses (padding tokens included: their ids are
    // validated too): all of them at once, then one at a time.
    let mut chosen = vec![false; e];
    case.ids.iter().for_each(|&id| chosen[id as usize] = true);
    let used: Vec<u32> = (0..e as u32).filter(|&x| chosen[x as usize]).collect();
    if used.len() < e && used.len() >= k {
        let rank = |id: u32| used.partition_point(|&u| u < id) as u32;
        out.push(rebuild(case, &all(t), &all(k), &all(h), used.len().max(1), &rank, case.capacity));
        if e > k {
            for gone in (0..e as u32).filter(|&x| !chosen[x as usize]).take(16) {
                let down = move |id: u32| if id > gone { id - 1 } else { id };
                out.push(rebuild(case, &all(t), &all(k), &all(h), e - 1, &down, case.capacity));
            }
        }
    }
    if let Some(cap) = case.capacity {
        let mut caps = vec![None, Some(0), Some(cap / 2), Some(cap.saturating_sub(1))];
        caps.dedup();
        for c in caps.into_iter().filter(|&c| c.is_none() || c < Some(cap)) {
            out.push(rebuild(case, &all(t), &all(k), &all(h), e, &same, c));
        }
    }
    if case.padding.as_ref().is_some_and(|p| p.iter().all(|&x| !x)) {
        out.push(MoeCombineCase { padding: None, ..case.clone() });
    }
    if case.layout != Layout::dense(h) {
        out.push(MoeCombineCase { layout: Layout::dense(h), ..case.clone() });
    }
    // Whole fields toward 0 and 1, then each distinct value everywhere,
    // then single values. simplifications() keeps a bf16 a bf16.
    let fields: [Field<MoeCombineCase>; 5] =
        [|c| &mut c.weights, |c| &mut c.x_exp, |c| &mut c.dy, |c| &mut c.g_disp, |c| &mut c.x];
    out.extend(simplify_fields(case, &fields));
    out
}

// ---------------------------------------------------------------------------
// Invalid inputs.

/// Invalid variants of `case`, one per rule of
/// docs/ops/moe_combine.md#validation that the case can break (the list the
/// page asks the validation property to try), each named; every one must
/// fail `validate()`.
pub fn invalid_variants(case: &MoeCombineCase) -> Vec<(&'static str, MoeCombineCase)> {
    let (h, k) = (case.h, case.k);
    let n_slots = case.x_exp.len() / h.max(1);
    let mut out = vec![
        ("t-zero", variant(case, |c| c.t = 0)),
        ("h-zero", variant(case, |c| c.h = 0)),
        ("e-zero", variant(case, |c| c.e = 0)),
        ("k-zero", variant(case, |c| c.k = 0)),
        ("k-above-e", variant(case, |c| c.k = c.e + 1)),
        ("id-equal-to-e", variant(case, |c| c.ids[0] = c.e as u32)),
        ("ids-one-long", variant(case, |c| c.ids.push(0))),
        ("weights-one-long", variant(case, |c| c.weights.push(1.0))),
        ("padding-one-long", variant(case, |c| c.padding = Some(vec![false; c.t + 1]))),
        ("offset-4", variant(case, |c| c.layout.offset = MAX_OFFSET + 1)),
        ("row-stride-below-h", variant(case, |c| c.layout.row_stride = c.h - 1)),
        ("x-not-bf16", variant(case, |c| c.x[0] = 1.0 + f32::EPSILON)),
        ("dy-one-long", variant(case, |c| c.dy.push(0.0))),
        (
            "g-disp-one-short-or-long",
            variant(case, |c| {
                if c.g_disp.pop().is_none() {
                    c.g_disp.push(0.0)
                }
            }),
        ),
    ];
    if k >= 2 {
        out.push(("id-twice-in-a-token", variant(case, |c| c.ids[1] = c.ids[0])));
        // The same in a padding token: its ids are validated too.
        out.push((
            "id-twice-in-a-padding-token",
            variant(case, |c| {
                let mut p = c.padding.clone().unwrap_or_else(|| vec![false; c.t]);
                p[c.t - 1] = true;
                c.padding = Some(p);
                c.ids[(c.t - 1) * k + 1] = c.ids[(c.t - 1) * k];
            }),
        ));
    }
    out.push((
        "x-exp-one-row-off",
        variant(case, |c| {
            if n_slots > 0 {
                c.x_exp.truncate((n_slots - 1) * h);
            } else {
                c.x_exp.extend(vec![1.0; h]);
            }
        }),
    ));
    if n_slots > 0 {
        out.push(("x-exp-not-bf16", variant(case, |c| c.x_exp[n_slots * h - 1] = f32::from_bits(0x7f80_0001))));
    }
    // x_exp sized for another capacity: where another capacity changes N_slots.
    let other = if case.capacity.is_none() { Some(0) } else { None };
    let resized = variant(case, |c| c.capacity = other);
    if oracles::case::moe_combine::slot_count(&resized).is_ok_and(|n| n != n_slots) {
        out.push(("x-exp-sized-for-another-capacity", resized));
    }
    out
}

/// Whether x and x_exp hold bf16 values only, their low 16 bits zero (for
/// tests of the generator).
pub fn all_bf16(case: &MoeCombineCase) -> bool {
    case.x.iter().chain(&case.x_exp).all(|&v| v.to_bits() & 0xffff == 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::common::complexity;
    use crate::gen::common::testing::{assert_class_names_round_trip, assert_every_class_reached};
    use proptest::test_runner::{RngAlgorithm, TestRng};

    /// The shape of a case, in the order shrinking reduces it: T, k, H, E,
    /// the capacity (none simplest, then by size), the padding flags (none,
    /// then by how many), a non-dense layout.
    fn shape_key(c: &MoeCombineCase) -> (usize, usize, usize, usize, usize, usize, bool) {
        let cap = c.capacity.map_or(0, |x| x.saturating_add(1));
        let pad = c.padding.as_ref().map_or(0, |p| 1 + p.iter().filter(|&&x| x).count());
        (c.t, c.k, c.h, c.e, cap, pad, c.layout != Layout::dense(c.h))
    }

    /// Smaller or simpler: a smaller shape key, or the same shape and values
    /// none more complex, one less so.
    fn smaller(a: &MoeCombineCase, b: &MoeCombineCase) -> bool {
        if shape_key(a) != shape_key(b) {
            return shape_key(a) < shape_key(b);
        }
        let values = |c: &MoeCombineCase| -> Vec<f32> {
            c.weights.iter().chain(&c.x).chain(&c.x_exp).chain(&c.dy).chain(&c.g_disp).copied().collect()
        };
        let (va, vb) = (values(a), values(b));
        va.len() == vb.len()
            && va.iter().zip(&vb).all(|(&x, &y)| complexity(x) <= complexity(y))
            && va.iter().zip(&vb).any(|(&x, &y)| complexity(x) < complexity(y))
    }

    fn cases(n: usize) -> Vec<MoeCombineCase> {
        let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
        (0..n).map(|_| generate(&mut rng, &GenConfig::default())).collect()
    }

    /// T = 3, H = 2, E = 3, k = 3, no capacity, dense: every token chooses
    /// every expert, token 1 in descending order.
    fn hand_case() -> MoeCombineCase {
        let mut c = MoeCombineCase {
            t: 3,
            h: 2,
            e: 3,
            k: 3,
            capacity: None,
            layout: Layout::dense(2),
            ids: vec![0, 1, 2, 2, 1, 0, 1, 2, 0],
            weights: vec![0.5; 9],
            padding: None,
            x: vec![1.0; 6],
            x_exp: vec![1.0; 18],
            dy: vec![1.0; 6],
            g_disp: vec![1.0; 18],
        };
        c.weights[4] = 0.25;
        assert_eq!(c.validate(), Ok(()));
        c
    }

    #[test]
    fn generated_cases_are_valid_and_within_the_config() {
        let cfg = GenConfig::default();
        for c in cases(1500) {
            assert_eq!(c.validate(), Ok(()), "{c:?}");
            assert!(all_bf16(&c));
            assert!(c.t <= cfg.max_t && c.e <= cfg.max_e && c.t * c.k * c.h <= cfg.max_te);
        }
        let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
        for cfg in [
            GenConfig { max_te: 1, max_e: 1, max_t: 1, ..GenConfig::default() },
            GenConfig { max_te: 30, max_e: 5, max_t: 4, ..GenConfig::default() },
            GenConfig { max_te: 64, max_e: 300, max_t: 1100, ..GenConfig::default() },
        ] {
            for _ in 0..300 {
                let c = generate(&mut rng, &cfg);
                assert_eq!(c.validate(), Ok(()), "{c:?}");
                assert!(c.t <= cfg.max_t && c.e <= cfg.max_e, "T={} E={}", c.t, c.e);
                assert!(c.t * c.k * c.h <= cfg.max_te, "T={} k={} H={}", c.t, c.k, c.h);
            }
        }
    }

    #[test]
    fn every_class_is_reached() {
        let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
        assert_every_class_reached(&Class::ALL, 2000, || generate(&mut rng, &GenConfig::default()), classify);
    }

    #[test]
    fn class_names_are_kebab_case_and_all_is_complete() {
        assert_eq!(Class::ByChoiceNotBySlot.to_string(), "by-choice-not-by-slot");
        assert_eq!(Class::Bf16Tie.to_string(), "bf16-tie");
        assert_class_names_round_trip(&Class::ALL);
    }

    #[test]
    fn classify_is_truthful_on_hand_made_cases() {
        let base = hand_case();
        let c = classify(&base);
        for class in [Class::TTwoThree, Class::KAll, Class::NoCapacity, Class::HotExpert, Class::IdsUnsorted] {
            assert!(c.contains(&class), "{class} missing: {c:?}");
        }
        // Every term 0.5 * 1 (token 1: 0.25 once): every sum exact in any order.
        for class in [
            Class::OrderSensitive,
            Class::ByChoiceNotBySlot,
            Class::Overflow,
            Class::NonFinite,
            Class::SignedZero,
            Class::Padding,
            Class::EmptyExpert,
            Class::Bf16Tie,
        ] {
            assert!(!c.contains(&class), "{class} on plain values: {c:?}");
        }
        assert!(c.contains(&Class::TiedWeights), "0.5 twice in token 0");
        // Token 1 lists its slots as experts 2, 1, 0: 1, 2^-24, 2^-24 in j
        // order is 1, by slot 1 + 2^-23 (the worked example's token 0).
        let mut order = base.clone();
        order.weights = vec![1.0; 9];
        let d = dispatch(&order).unwrap();
        for (j, v) in [(0, 1.0), (1, 2f32.powi(-24)), (2, 2f32.powi(-24))] {
            let s = d.slot[3 + j] as usize;
            order.x_exp[s * 2] = v;
        }
        let c = classify(&order);
        assert!(c.contains(&Class::OrderSensitive) && c.contains(&Class::ByChoiceNotBySlot), "{c:?}");
        // A capacity of 2: each expert's third choice (token 2's) dropped; the
        // load 3 of every expert is not met exactly.
        let capped = rebuild(&base, &[0, 1, 2], &[0, 1, 2], &[0, 1], 3, &|x| x, Some(2));
        let c = classify(&capped);
        assert!(c.contains(&Class::CapacityDrops) && c.contains(&Class::NoKeptChoice), "{c:?}");
        assert!(!c.contains(&Class::CapacityExact), "{c:?}");
        let exact = rebuild(&base, &[0, 1, 2], &[0, 1, 2], &[0, 1], 3, &|x| x, Some(3));
        assert!(classify(&exact).contains(&Class::CapacityExact));
        // A NaN weight on a dropped choice is poison the op must not read.
        let mut poisoned = capped.clone();
        poisoned.weights[6] = f32::NAN;
        let c = classify(&poisoned);
        assert!(c.contains(&Class::PoisonUnread) && !c.contains(&Class::NonFinite), "{c:?}");
        // 2^100 * 2^30 overflows from finite inputs.
        let mut big = base.clone();
        big.weights[0] = 2f32.powi(100);
        big.x_exp[0] = 2f32.powi(30);
        let c = classify(&big);
        assert!(c.contains(&Class::Overflow) && !c.contains(&Class::NonFinite), "{c:?}");
        // y = 1 + 2^-8: nine significant bits, the ninth set: a bf16 tie.
        let mut tie = base.clone();
        // Token 0: 1 * 1 + 2^-8 * 1 + 0 * 1 (every x_exp is 1).
        tie.weights = vec![1.0, 2f32.powi(-8), 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0];
        let c = classify(&tie);
        assert!(c.contains(&Class::Bf16Tie) && c.contains(&Class::ZeroWeight), "{c:?}");
    }

    #[test]
    fn shrink_candidates_are_valid_and_smaller() {
        let mut n = 0usize;
        for c in cases(25) {
            for s in shrink_candidates(&c) {
                assert_eq!(s.validate(), Ok(()), "{s:?}");
                assert!(all_bf16(&s));
                assert!(smaller(&s, &c), "not smaller: {s:?}\nfrom {c:?}");
                n += 1;
            }
        }
        assert!(n > 1_500, "{n} candidates");
    }

    /// Rows follow their owner choice: dropping a token keeps every other
    /// token's kept choices on the rows they had.
    #[test]
    fn rebuilt_cases_keep_each_choice_on_its_rows() {
        for c in cases(200).into_iter().filter(|c| c.t >= 2) {
            let d = dispatch(&c).unwrap();
            let rest: Vec<usize> = (1..c.t).collect();
            let r = rebuild(&c, &rest, &(0..c.k).collect::<Vec<_>>(), &(0..c.h).collect::<Vec<_>>(), c.e, &|x| x, None);
            let nd = dispatch(&r).unwrap();
            for t in 1..c.t {
                for j in 0..c.k {
                    let (Ok(a), Ok(b)) =
                        (usize::try_from(d.slot[t * c.k + j]), usize::try_from(nd.slot[(t - 1) * c.k + j]))
                    else {
                        continue;
                    };
                    let same = c.x_exp_row(a).iter().zip(r.x_exp_row(b)).all(|(x, y)| same_bits(*x, *y));
                    assert!(same, "token {t} choice {j}");
                }
            }
        }
    }

    /// The one shrinker, greedy, with no budget.
    fn shrink(case: &MoeCombineCase, fails: impl Fn(&MoeCombineCase) -> bool) -> MoeCombineCase {
        crate::shrink::shrink::<oracles::op::moe_combine::MoeCombine>(case, fails, usize::MAX)
    }

    #[test]
    fn shrinking_reaches_a_minimal_case() {
        // Fails whenever a capacity drops a valid choice: one token, one
        // choice, one column, one expert, capacity 0, values 0.
        let fails = |c: &MoeCombineCase| {
            let d = dispatch(c).unwrap();
            (0..c.t).any(|t| !c.is_padding(t) && (0..c.k).any(|j| d.slot[t * c.k + j] < 0))
        };
        let mut done = 0;
        for c in cases(400).into_iter().filter(|c| fails(c)).take(5) {
            let m = shrink(&c, fails);
            assert_eq!((m.t, m.k, m.h, m.e, m.capacity, m.padding.clone()), (1, 1, 1, 1, Some(0), None), "{m:?}");
            assert_eq!(m.layout, Layout::dense(1));
            assert_eq!((m.weights.clone(), m.x.clone(), m.dy.clone()), (vec![0.0], vec![0.0], vec![0.0]));
            done += 1;
        }
        assert_eq!(done, 5);
    }

    #[test]
    fn invalid_variants_fail_validation() {
        let mut all = vec![hand_case()];
        all.extend(cases(300));
        let mut names = BTreeSet::new();
        for c in &all {
            for (name, v) in invalid_variants(c) {
                assert!(v.validate().is_err(), "{name} accepted: {v:?}");
                names.insert(name);
            }
        }
        assert_eq!(names.len(), 19, "{names:?}");
    }

    #[test]
    fn reference_shapes_are_the_reference_ones_within_their_bounds() {
        let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
        for max_t in [1, 40] {
            let cfg = GenConfig { max_t, shapes: Shapes::Reference, ..GenConfig::default() };
            let c = generate(&mut rng, &cfg);
            assert_eq!(c.validate(), Ok(()));
            assert!(REFERENCE_SHAPES.contains(&(c.h, c.e, c.k)), "{} {} {}", c.h, c.e, c.k);
            assert!((1..=max_t).contains(&c.t));
            let cands = shrink_candidates(&c);
            assert!(cands.len() <= 5, "{} candidates", cands.len());
            for s in &cands {
                assert_eq!(s.validate(), Ok(()));
                assert!(smaller(s, &c));
            }
            let dense = GenConfig { max_t, shapes: Shapes::ReferenceDense, ..GenConfig::default() };
            let d = generate(&mut rng, &dense);
            assert_eq!(d.layout, Layout::dense(d.h));
        }
    }
}
