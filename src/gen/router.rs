//! Adversarial `router` cases (docs/ops/router.md, docs/ops/README.md#adversarial-cases).
//!
//! A case is an adversarial routing shape (DeepSeek-V3 and V2, one group,
//! two experts per group, every group kept, every kept expert chosen, small
//! odd shapes) with rows of logits built from a menu of row kinds (gate-like,
//! wide, saturated, tiny scores, ties and one-ulp near-ties inside a group,
//! between group scores and at the k-th expert, all equal, the fused loss's
//! clamp tie, non-finite values), an expert bias (zero, trained-size, large,
//! repeated, extreme), padding (poisoned or not), a layout, `gw`, the route
//! scale and norm, and the fused loss.
//!
//! Selection compares u = s + bias in f32, with s = 1 / (1 + exp(-x)) as the
//! router computes it (exp correctly rounded). s, u, the group ranking and
//! the choice are the profile oracle's own ([`sigmoid`], [`choose`]), so a
//! tie aimed or reported here is one the router meets. Generation aims ties
//! at u by searching the logit whose u is a given f32; [`classify`] reads
//! every class off the values (the oracle's s, u and choice), never from how
//! the case was made, so a shrunk or imported case is tagged truthfully too.
//!
//! [`shrink_candidates`] drops tokens, groups, positions inside every group,
//! reduces G, L and k (gw columns kept consistent), drops padding, layout
//! and the fused loss, and simplifies values toward 0, 1 and short binary
//! fractions.

use super::common::{edge_t, pick, simpler, simplifications, wide};
use super::GenConfig;
use crate::knobs::Shapes;
use oracles::case::router::{FusedLoss, RouterCase};
use oracles::case::{Layout, MAX_OFFSET};
use oracles::profile::router::RouterProfile;
use oracles::profile_oracle::router::{choose, scores, sigmoid, Choice, Depth};
use oracles::vocab::{ClampTie, EPS};
use proptest::prelude::{Rng, RngExt};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fmt;
use std::sync::OnceLock;

/// The adversarial classes (docs/ops/README.md#adversarial-cases) for the
/// router, plus the options of the case (so a report shows each was tried).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    /// T in {1, 2, 3}.
    TinyT,
    /// T = n-1, n or n+1 for a power of two n >= 4 or a chunk size (32, 64, 128).
    TEdge,
    /// E = 256, G = 8, L = 4, k = 8 (DeepSeek-V3).
    V3Shape,
    /// E = 160, G = 8, L = 3, k = 6 (DeepSeek-V2).
    V2Shape,
    /// E = 64, G = 1, L = 1, k = 6 (DeepSeek-V2-Lite).
    V2LiteShape,
    /// E <= 8.
    SmallE,
    /// E not a multiple of 4.
    EUnaligned,
    /// E / G odd.
    OddGroupSize,
    /// E / G = 2: a group's score is the sum of all its experts.
    PairGroups,
    /// G = 1: no group limit.
    OneGroup,
    /// L = G > 1: every group kept.
    AllGroupsKept,
    /// k = 1.
    KOne,
    /// k = L * E / G: every expert of the kept groups chosen.
    KAll,
    /// Element offset 1, 2 or 3.
    Offset,
    /// Row stride > E.
    RowStride,
    /// Two of a group's three largest u equal (adjacent places), in some row.
    InGroupTie,
    /// Two of a group's three largest u one ulp apart (adjacent places).
    InGroupNearTie,
    /// L < G and the L-th and (L+1)-th group scores equal.
    GroupScoreTie,
    /// L < G and the L-th and (L+1)-th group scores one ulp apart.
    GroupScoreNearTie,
    /// k < L * E / G and the k-th and (k+1)-th u of the kept experts equal.
    KthTie,
    /// k < L * E / G and the k-th and (k+1)-th u of the kept experts one ulp apart.
    KthNearTie,
    /// Every u of a row equal.
    AllEqual,
    /// The bias changes a row's choice: the group-limited top-k of u differs
    /// from that of s.
    BiasReorders,
    /// A finite logit whose s is exactly +0.0.
    SaturatedZero,
    /// A finite logit whose s is exactly 1.0.
    SaturatedOne,
    /// A logit whose s is 1 - 2^-23 = 1 - ulp(1), the largest s below 1
    /// (1 - 2^-24, the largest f32 below 1, is not reachable: see
    /// [`ONE_MINUS_ULP`]).
    OneMinusUlp,
    /// A logit whose s is non-zero and below 2^-100 (subnormal included).
    TinyScore,
    /// A valid row, with the fused loss, whose L1 norm of s in a shipped
    /// profile's order is eps or one ulp from it (only reachable with s
    /// exactly 0 except one or two tiny values).
    ClampTie,
    /// Every row is padding.
    AllPadding,
    /// Some rows are padding, not all.
    PartialPadding,
    /// A padding row holding a NaN or infinite logit.
    PoisonedPadding,
    /// A NaN or infinite logit in a valid row.
    NonFiniteValid,
    /// route_norm = true.
    RouteNorm,
    /// route_norm = false.
    NoRouteNorm,
    /// route_scale = 2.5 (DeepSeek-V3).
    RouteScaleV3,
    /// route_scale != 2.5.
    RouteScaleOther,
    /// Some gw is 0.
    GwZero,
    /// Some gw is +-1.
    GwUnit,
    /// Some gw is non-zero and below 2^-100 in magnitude.
    GwTiny,
    /// Some gw is above 2^100 in magnitude.
    GwHuge,
    /// The fused `seqwise_loss` gradient is present.
    FusedLoss,
    /// No fused loss.
    NoLoss,
    /// The fused loss's gate is strict (n > eps).
    Strict,
    /// The fused loss's gate is inclusive (n >= eps).
    Inclusive,
    /// The fused loss's g = 0.
    GZero,
    /// The fused loss's g = +-1.
    GUnit,
    /// The fused loss's 0 < |g| < 2^-100.
    GTiny,
    /// The fused loss's |g| > 2^100.
    GHuge,
    /// A freshly initialised router: T >= 2 valid rows, every logit of every
    /// valid row the same value (a zero-initialised gate gives 0), so every
    /// row is a tie of all its experts, row after row.
    FlatRouter,
}

impl Class {
    pub const ALL: [Class; 49] = [
        Class::TinyT,
        Class::TEdge,
        Class::V3Shape,
        Class::V2Shape,
        Class::V2LiteShape,
        Class::SmallE,
        Class::EUnaligned,
        Class::OddGroupSize,
        Class::PairGroups,
        Class::OneGroup,
        Class::AllGroupsKept,
        Class::KOne,
        Class::KAll,
        Class::Offset,
        Class::RowStride,
        Class::InGroupTie,
        Class::InGroupNearTie,
        Class::GroupScoreTie,
        Class::GroupScoreNearTie,
        Class::KthTie,
        Class::KthNearTie,
        Class::AllEqual,
        Class::BiasReorders,
        Class::SaturatedZero,
        Class::SaturatedOne,
        Class::OneMinusUlp,
        Class::TinyScore,
        Class::ClampTie,
        Class::AllPadding,
        Class::PartialPadding,
        Class::PoisonedPadding,
        Class::NonFiniteValid,
        Class::RouteNorm,
        Class::NoRouteNorm,
        Class::RouteScaleV3,
        Class::RouteScaleOther,
        Class::GwZero,
        Class::GwUnit,
        Class::GwTiny,
        Class::GwHuge,
        Class::FusedLoss,
        Class::NoLoss,
        Class::Strict,
        Class::Inclusive,
        Class::GZero,
        Class::GUnit,
        Class::GTiny,
        Class::GHuge,
        Class::FlatRouter,
    ];
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = serde_json::to_value(self).ok().and_then(|v| v.as_str().map(String::from));
        f.write_str(s.as_deref().unwrap_or("?"))
    }
}

// ---------------------------------------------------------------------------
// The router's arithmetic, as far as choosing goes.

/// s of one logit, the profile oracle's (f32).
fn score(x: f32) -> f32 {
    sigmoid::<f32>(x)
}

/// 1 - 2^-23 (1 - ulp(1)): the largest s below 1 that the router computes.
/// 1 - 2^-24, the largest f32 below 1, is never an s: 1 + exp(-x) rounds to
/// 1 (s = 1) or to at least 1 + 2^-23, whose reciprocal rounds to 1 - 2^-23.
pub const ONE_MINUS_ULP: f32 = 1.0 - f32::EPSILON;

/// An integer key that orders the f32s as numbers, one apart for adjacent
/// values (-0.0 and +0.0 share the key 0). Finite or infinite x only.
fn key(x: f32) -> i64 {
    let mag = (x.to_bits() & 0x7fff_ffff) as i64;
    if x.is_sign_negative() {
        -mag
    } else {
        mag
    }
}

fn from_key(k: i64) -> f32 {
    let x = f32::from_bits(k.unsigned_abs() as u32);
    if k < 0 {
        -x
    } else {
        x
    }
}

/// The largest finite f32's key: a search over every finite f32.
const MAX_KEY: i64 = 0x7f7f_ffff;

/// x moved by `d` f32 steps (d > 0 up), within the finite range.
fn step(x: f32, d: i64) -> f32 {
    from_key((key(x) + d).clamp(-MAX_KEY, MAX_KEY))
}

/// a and b are finite, different, and adjacent f32s.
fn one_ulp_apart(a: f32, b: f32) -> bool {
    a.is_finite() && b.is_finite() && a != b && (key(a) - key(b)).abs() == 1
}

/// a and b are equal numbers (not NaN; -0.0 == +0.0).
fn tied(a: f32, b: f32) -> bool {
    a == b
}

/// The smallest key in lo..=hi where `pred` holds, for a predicate that is
/// false then true along the keys; None when it never holds.
fn lower_bound(mut lo: i64, mut hi: i64, pred: impl Fn(i64) -> bool) -> Option<i64> {
    if lo > hi || !pred(hi) {
        return None;
    }
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    Some(lo)
}

/// The smallest finite logit x with fl(s(x) + b) == target, if there is one.
/// u = fl(s(x) + b) never decreases with x (exp, the add, the reciprocal and
/// the bias add are all monotone under rounding), so a binary search over
/// every finite f32 finds it in at most 33 evaluations of s.
fn logit_for_u(target: f32, b: f32) -> Option<f32> {
    if !target.is_finite() {
        return None;
    }
    let u = |k: i64| score(from_key(k)) + b;
    let k = lower_bound(-MAX_KEY, MAX_KEY, |k| u(k) >= target)?;
    (u(k) == target).then(|| from_key(k))
}

/// The simplest f32 in lo..=hi (finite, lo <= hi) in the order of
/// [`simpler`]: 0 if it is inside, else the fewest significant bits.
fn simplest_in(lo: f32, hi: f32) -> f32 {
    if lo <= 0.0 && hi >= 0.0 {
        return 0.0;
    }
    let (neg, a, b) = if hi < 0.0 { (true, -hi, -lo) } else { (false, lo, hi) };
    // b truncated to n significant bits is the largest such value <= b; if it
    // is below a, no value of n bits lies in [a, b] (a power of two between a
    // and b would have been found with one bit).
    let t =
        (0..24).rev().map(|drop| f32::from_bits(b.to_bits() & !((1u32 << drop) - 1))).find(|&t| t >= a).unwrap_or(b);
    if neg {
        -t
    } else {
        t
    }
}

/// The simplest logit x (see [`simplest_in`]) with fl(s(x) + b) == target,
/// if there is one: the logits that give one u form an interval.
fn simplest_logit_for_u(target: f32, b: f32) -> Option<f32> {
    let lo = logit_for_u(target, b)?;
    let u = |k: i64| score(from_key(k)) + b;
    let hi = lower_bound(key(lo), MAX_KEY, |k| u(k) > target).map_or(MAX_KEY, |k| k - 1);
    Some(simplest_in(lo, from_key(hi)))
}

/// Logits at the edges of s, found once by search (every value is checked
/// by the `edges_are_exact` test).
struct Edges {
    /// The largest x with s(x) = +0.0 (every x at most this saturates to 0).
    zero_max: f32,
    /// The smallest x with s(x) = 1.
    one_min: f32,
    /// The x with s(x) = 1 - 2^-23: lo..=hi.
    one_minus_ulp: (f32, f32),
    /// (x1, x2): s(x1) alone, or fl(s(x1) + s(x2)), is eps or one ulp from
    /// it. With every other score exactly 0, every order of the loss's row
    /// norm gives that value.
    clamp: Vec<(f32, Option<f32>)>,
}

fn edges() -> &'static Edges {
    static EDGES: OnceLock<Edges> = OnceLock::new();
    EDGES.get_or_init(|| {
        let first = |pred: &dyn Fn(f32) -> bool| lower_bound(-MAX_KEY, MAX_KEY, |k| pred(from_key(k))).map(from_key);
        // s(-MAX) = 0 and s(MAX) = 1, so each search has an answer.
        let zero_max = step(first(&|x| score(x) > 0.0).unwrap_or(-89.0), -1);
        let one_min = first(&|x| score(x) >= 1.0).unwrap_or(17.0);
        let one_minus_ulp = (first(&|x| score(x) >= ONE_MINUS_ULP).unwrap_or(one_min), step(one_min, -1));
        let mut clamp = Vec::new();
        for target in [step(EPS, -1), EPS, step(EPS, 1)] {
            let Some(hi) = first(&|x| score(x) >= target) else { continue };
            if score(hi) == target {
                clamp.push((hi, None));
            }
            for d in [1, 2, 3, 5, 8, 13] {
                let x1 = step(hi, -d);
                let s1 = score(x1);
                if let Some(x2) = first(&|x| s1 + score(x) >= target) {
                    if s1 + score(x2) == target {
                        clamp.push((x1, Some(x2)));
                    }
                }
            }
        }
        Edges { zero_max, one_min, one_minus_ulp, clamp }
    })
}

/// One row's choice from its scores `s`, every ranking in full: the
/// profile oracle's (see [`choose`]).
fn choice(s: &[f32], bias: &[f32], r: Routing) -> Choice<f32> {
    choose(s, bias, r.groups, r.l, r.k, Depth::Full)
}

/// (expert, u) of `experts`.
fn with_u(u: &[f32], experts: &[usize]) -> Vec<(usize, f32)> {
    experts.iter().map(|&e| (e, u[e])).collect()
}

// ---------------------------------------------------------------------------
// Generation.

/// DeepSeek-V3 (671B): (E, G, L, k).
const V3: (usize, usize, usize, usize) = (256, 8, 4, 8);
/// DeepSeek-V2.
const V2: (usize, usize, usize, usize) = (160, 8, 3, 6);
/// DeepSeek-V2-Lite.
const V2_LITE: (usize, usize, usize, usize) = (64, 1, 1, 6);
/// Two warp-wide groups, one kept, k = 2: the kernels' grouped path at two
/// values per lane (V = 2), whose map store packs two experts per word. A
/// random draw reaches it in about 0.4 % of cases, too rarely: four
/// mutants of that store survived 300 cases (reports/mutants-2026-12-02).
const GROUPED_V2: (usize, usize, usize, usize) = (64, 2, 1, 2);

/// (E, G, L, k). E is at least 2 whatever the config says (the router needs
/// two experts per group).
fn generate_shape<R: Rng + ?Sized>(rng: &mut R, cfg: &GenConfig) -> (usize, usize, usize, usize) {
    let max_e = cfg.max_e.min(cfg.max_te).max(2);
    // A first draw of 64 bits: a 4-byte fuzz input is followed by random
    // tail bytes, so it still reaches every shape (a 32-bit first draw would
    // read the input alone, and small inputs would all pick the same shape).
    let fixed = if rng.random_bool(0.3) { Some(pick(rng, &[V3, V2, V2_LITE, GROUPED_V2])) } else { None };
    if let Some(s) = fixed.filter(|s| s.0 <= max_e) {
        return s;
    }
    // One shape in seven: groups of one warp's width (32 experts), the
    // kernels' fwd_grouped32 path, E = 32 (one group, V = 1) to 256, and to
    // 1024 (the kernels' widest lane count) where max_e allows it; a random
    // E rarely has 32 as its group size. G = V (a power of two) and G < V
    // (3, 5, 6, 7, ...: E = 96 runs at V = 4) take different branches of
    // that path, so both are drawn.
    if 32 <= max_e && rng.random_range(0..7) == 0 {
        let groups: &[usize] =
            if max_e >= 32 * 32 { &[1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 23, 32] } else { &[1, 2, 3, 4, 5, 6, 7, 8] };
        let g = pick(rng, groups).min(max_e / 32);
        // Every group kept, and one expert chosen, each often: the widest
        // case (E = 1024, G = L = 32, k = 1) is the lanes' last reduction.
        let l = match rng.random_range(0..3) {
            0 => g,
            _ => rng.random_range(1..=g),
        };
        let k = match rng.random_range(0..4) {
            0 => 1,
            1 => rng.random_range(1..=2 * l),
            _ => rng.random_range(1..=32 * l),
        };
        return (32 * g, g, l, k);
    }
    let (mut g, mut gs) = if rng.random_bool(0.6) {
        // Small shapes: E = 2, 3, 4, 6, 8, 9, 10, 12, ...
        (pick(rng, &[1, 1, 2, 3, 4, 8]), pick(rng, &[2, 2, 3, 4, 5, 8]))
    } else {
        let e = rng.random_range(2..=max_e);
        let divisors: Vec<usize> = (1..=e / 2).filter(|d| e.is_multiple_of(*d)).collect();
        let g = pick(rng, &divisors);
        (g, e / g)
    };
    gs = gs.min(max_e);
    while g > 1 && g * gs > max_e {
        g -= 1;
    }
    let l = match rng.random_range(0..4) {
        0 => 1,
        1 => g,
        _ => rng.random_range(1..=g),
    };
    let max_k = l * gs;
    let k = match rng.random_range(0..6) {
        0 => 1,
        1 => max_k,
        2 => 6.min(max_k),
        3 => 8.min(max_k),
        _ => rng.random_range(1..=max_k),
    };
    (g * gs, g, l, k)
}

/// E of tier B's reference shapes: the kernels' widest (32 lanes x 32).
const MAX_REFERENCE_E: usize = 1024;
/// Most elements of a reference-shape case: 16384 tokens of DeepSeek-V3's
/// 256 experts.
const REFERENCE_MAX_TE: usize = 1 << 22;

fn generate_t<R: Rng + ?Sized>(rng: &mut R, cfg: &GenConfig, e: usize) -> usize {
    // Tier B's reference shapes (`GenConfig::shapes`), one case in three: T
    // from 2^20 / E to 2^22 / E, past the one wave of blocks the kernels
    // launch on the H200 (132 SMs x at most 6 blocks x 8 warps = 6336 tokens
    // at E <= 64, 1056 at E = 1024), so that most warps take several tokens
    // in turn (the token loop's prefetch, its barriers between tokens).
    if cfg.shapes != Shapes::Small && rng.random_range(0..3) == 0 {
        let cap = REFERENCE_MAX_TE / e;
        return rng.random_range(cap / 4..=cap).max(1);
    }
    let cap = (cfg.max_te / e).clamp(1, cfg.max_t.max(1));
    let t = match rng.random_range(0..10) {
        0..=3 => rng.random_range(1..=3),
        4..=6 => {
            let edges = edge_t(cap);
            if edges.is_empty() {
                1
            } else {
                pick(rng, &edges)
            }
        }
        _ => rng.random_range(1..=cap.min(200)),
    };
    t.min(cap).max(1)
}

fn generate_bias<R: Rng + ?Sized>(rng: &mut R, e: usize, gs: usize) -> Vec<f32> {
    match rng.random_range(0..10) {
        0..=3 => vec![0.0; e],
        // A trained bias: |b| from 2^-12 to 2^-4.
        4 | 5 => (0..e).map(|_| wide(rng, -12, -5)).collect(),
        // Large enough to reorder most rows.
        6 => (0..e).map(|_| wide(rng, -4, 1)).collect(),
        // The same bias at the same place of every group: copying a group's
        // logits into another copies its u.
        7 => {
            let per: Vec<f32> = (0..gs).map(|_| wide(rng, -10, -3)).collect();
            (0..e).map(|i| per[i % gs]).collect()
        }
        // A few repeated values.
        8 => (0..e).map(|_| pick(rng, &[0.0, 0.0, 0.015625, -0.015625, 0.25])).collect(),
        // Extreme: huge (s is absorbed: u = bias) and tiny.
        _ => (0..e)
            .map(|_| match rng.random_range(0..3) {
                0 => 0.0,
                1 => wide(rng, 24, 127),
                _ => wide(rng, -149, -100),
            })
            .collect(),
    }
}

/// The kinds of row the generator writes.
#[derive(Clone, Copy, Debug, PartialEq)]
enum RowKind {
    /// Gate-like logits, |x| < 4.
    Gate,
    /// Any magnitude from 2^-30 to 2^7: saturates at both ends.
    Wide,
    /// s exactly 0 or 1, or 1 - 2^-23.
    Saturated,
    /// s tiny or subnormal.
    Tiny,
    InGroupTie,
    InGroupNearTie,
    GroupScoreTie,
    GroupScoreNearTie,
    KthTie,
    KthNearTie,
    AllEqual,
    ClampTie,
    NonFinite,
}

const ROW_KINDS: [RowKind; 13] = [
    RowKind::Gate,
    RowKind::Wide,
    RowKind::Saturated,
    RowKind::Tiny,
    RowKind::InGroupTie,
    RowKind::InGroupNearTie,
    RowKind::GroupScoreTie,
    RowKind::GroupScoreNearTie,
    RowKind::KthTie,
    RowKind::KthNearTie,
    RowKind::AllEqual,
    RowKind::ClampTie,
    RowKind::NonFinite,
];

/// A random finite f32 in lo..=hi (uniform over the f32s, not the reals).
fn between<R: Rng + ?Sized>(rng: &mut R, lo: f32, hi: f32) -> f32 {
    from_key(rng.random_range(key(lo).min(key(hi))..=key(hi).max(key(lo))))
}

/// A gate-like logit: |x| < 4, random mantissa.
fn gate<R: Rng + ?Sized>(rng: &mut R) -> f32 {
    (rng.random::<u32>() >> 8) as f32 / 2_097_152.0 - 4.0
}

/// A logit whose s is exactly 0, exactly 1, or 1 - 2^-23.
fn saturated<R: Rng + ?Sized>(rng: &mut R) -> f32 {
    let ed = edges();
    match rng.random_range(0..6) {
        0 => pick(rng, &[ed.zero_max, -1.0e4, -f32::MAX]),
        1 => between(rng, -1.0e4, ed.zero_max),
        2 => pick(rng, &[ed.one_min, 1.0e4, f32::MAX]),
        3 => between(rng, ed.one_min, 1.0e4),
        _ => between(rng, ed.one_minus_ulp.0, ed.one_minus_ulp.1),
    }
}

/// Sets x[j] so that u[j] = target (a copy when the biases agree), if some
/// logit gives it.
fn set_u(x: &mut [f32], u: &mut [f32], bias: &[f32], j: usize, target: f32, copy_from: Option<usize>) -> bool {
    if let Some(i) = copy_from.filter(|&i| bias[i] == bias[j] && u[i] == target) {
        x[j] = x[i];
        u[j] = target;
        return true;
    }
    match logit_for_u(target, bias[j]) {
        Some(v) => {
            x[j] = v;
            u[j] = target;
            true
        }
        None => false,
    }
}

/// The shape of the routing, for row generation.
#[derive(Clone, Copy)]
struct Routing {
    e: usize,
    groups: usize,
    l: usize,
    k: usize,
}

fn generate_row<R: Rng + ?Sized>(rng: &mut R, kind: RowKind, r: Routing, bias: &[f32]) -> Vec<f32> {
    let e = r.e;
    let gs = e / r.groups;
    let mut x: Vec<f32> = (0..e).map(|_| gate(rng)).collect();
    let dir = |rng: &mut R| if rng.random_bool(0.5) { 1 } else { -1 };
    match kind {
        RowKind::Gate => {}
        RowKind::Wide => x.iter_mut().for_each(|v| *v = wide(rng, -30, 7)),
        RowKind::Saturated => x.iter_mut().for_each(|v| {
            if rng.random_bool(0.6) {
                *v = saturated(rng)
            }
        }),
        RowKind::Tiny => x.iter_mut().for_each(|v| {
            if rng.random_bool(0.6) {
                *v = between(rng, -104.0, -40.0)
            }
        }),
        RowKind::InGroupTie | RowKind::InGroupNearTie => {
            let Choice { mut u, members, .. } = choice(&scores(&x), bias, r);
            let j = rng.random_range(0..r.groups);
            let m = &members[j];
            let p = if gs >= 3 && rng.random_bool(0.5) { 1 } else { 0 };
            let (a, b) = (m[p], m[p + 1]);
            let target = if kind == RowKind::InGroupTie { u[a] } else { step(u[a], -1) };
            set_u(&mut x, &mut u, bias, b, target, Some(a));
        }
        RowKind::GroupScoreTie | RowKind::GroupScoreNearTie if r.l < r.groups => {
            let Choice { mut u, members, groups, .. } = choice(&scores(&x), bias, r);
            let (ma, mb) = (with_u(&u, &members[groups[r.l - 1]]), with_u(&u, &members[groups[r.l]]));
            // Group b takes group a's best pair; its other members go no
            // higher than the pair's second.
            let (a1, a2) = (ma[0], ma[1]);
            set_u(&mut x, &mut u, bias, mb[0].0, a1.1, Some(a1.0));
            set_u(&mut x, &mut u, bias, mb[1].0, a2.1, Some(a2.0));
            for &(m, _) in &mb[2..] {
                if u[m] > a2.1 {
                    set_u(&mut x, &mut u, bias, m, a2.1, Some(a2.0));
                }
            }
            if kind == RowKind::GroupScoreNearTie {
                // Move b's best by a few ulps until b's score is one ulp from a's.
                let (score_a, d) = (a1.1 + a2.1, dir(rng));
                let want = step(score_a, d);
                if let Some(v) = (1..=8).map(|n| step(a1.1, n * d)).find(|&v| v + a2.1 == want) {
                    set_u(&mut x, &mut u, bias, mb[0].0, v, None);
                }
            }
        }
        RowKind::KthTie | RowKind::KthNearTie | RowKind::GroupScoreTie | RowKind::GroupScoreNearTie => {
            let Choice { mut u, experts, .. } = choice(&scores(&x), bias, r);
            let kept = with_u(&u, &experts);
            if r.k < kept.len() {
                let (i, vi) = kept[r.k - 1];
                let below = kept.len() - r.k;
                let j = kept[r.k + if rng.random_bool(0.5) { 0 } else { rng.random_range(0..below.min(4)) }].0;
                let target = if matches!(kind, RowKind::KthNearTie | RowKind::GroupScoreNearTie) {
                    step(vi, dir(rng))
                } else {
                    vi
                };
                set_u(&mut x, &mut u, bias, j, target, Some(i));
            }
        }
        RowKind::AllEqual => {
            let v = pick(rng, &[x[0], 0.0, 1.0, -2.0, edges().one_min]);
            x.fill(v);
        }
        RowKind::ClampTie => {
            let ed = edges();
            x.iter_mut().for_each(|v| *v = pick(rng, &[ed.zero_max, -100.0, -1.0e4, -f32::MAX]));
            if !ed.clamp.is_empty() {
                let (x1, x2) = pick(rng, &ed.clamp);
                let i = rng.random_range(0..e);
                x[i] = x1;
                if let Some(x2) = x2 {
                    x[(i + rng.random_range(1..e)) % e] = x2;
                }
            }
        }
        RowKind::NonFinite if rng.random_range(0..3) == 0 => {
            // Two NaNs at the end of one group: equal keys at its top.
            let end = (rng.random_range(0..r.groups) + 1) * gs;
            x[end - 2..end].fill(f32::NAN);
        }
        RowKind::NonFinite => {
            for _ in 0..rng.random_range(1..=2) {
                let i = rng.random_range(0..e);
                x[i] = pick(rng, &[f32::NAN, f32::INFINITY, f32::NEG_INFINITY, f32::from_bits(0xffc0_1234)]);
            }
        }
    }
    x
}

/// g of the fused loss, or a gw: 0, +-1, tiny, huge, or ordinary.
fn gradient_value<R: Rng + ?Sized>(rng: &mut R) -> f32 {
    match rng.random_range(0..10) {
        0 => 0.0,
        1 => pick(rng, &[1.0, -1.0]),
        2 => wide(rng, -149, -101),
        3 => wide(rng, 101, 127),
        _ => wide(rng, -3, 3),
    }
}

fn generate_gw<R: Rng + ?Sized>(rng: &mut R, n: usize) -> Vec<f32> {
    match rng.random_range(0..8) {
        0 => vec![0.0; n],
        1 => (0..n).map(|_| pick(rng, &[1.0, -1.0])).collect(),
        2 => (0..n).map(|_| wide(rng, -149, -101)).collect(),
        3 => (0..n).map(|_| wide(rng, 101, 127)).collect(),
        4 => (0..n).map(|_| gradient_value(rng)).collect(),
        _ => (0..n).map(|_| wide(rng, -3, 3)).collect(),
    }
}

/// One adversarial case, from any RNG (proptest's, or a fuzzer's bytes
/// through proptest's pass-through RNG). T x E stays within `cfg.max_te`
/// (E within `cfg.max_e`) wherever E >= 2 allows; tier B's reference shapes
/// (`cfg.shapes`) go past them: E up to 1024, T x E up to 2^22.
pub fn generate<R: Rng + ?Sized>(rng: &mut R, cfg: &GenConfig) -> RouterCase {
    // Tier B's reference shapes reach the kernels' widest E whatever tier
    // A's knob says.
    let reference = GenConfig { max_e: MAX_REFERENCE_E, ..cfg.clone() };
    let cfg = if cfg.shapes == Shapes::Small { cfg } else { &reference };
    let (e, groups, l, k) = generate_shape(rng, cfg);
    let t = generate_t(rng, cfg, e);
    let bias = generate_bias(rng, e, e / groups);
    let routing = Routing { e, groups, l, k };
    // Each case mixes a few row kinds so that one case meets several classes.
    let kinds: Vec<RowKind> = (0..rng.random_range(1..=3)).map(|_| pick(rng, &ROW_KINDS)).collect();
    let mut logits = Vec::with_capacity(t * e);
    for _ in 0..t {
        let kind = if rng.random_bool(0.25) { RowKind::Gate } else { pick(rng, &kinds) };
        logits.extend(generate_row(rng, kind, routing, &bias));
    }
    let padding = match rng.random_range(0..10) {
        0..=5 => None,
        6 => Some(vec![true; t]),
        _ => Some((0..t).map(|_| rng.random_bool(0.3)).collect()),
    };
    if let Some(p) = &padding {
        if rng.random_bool(0.6) {
            for (row, _) in logits.chunks_mut(e).zip(p).filter(|(_, &pad)| pad) {
                for x in row.iter_mut() {
                    if rng.random_bool(0.5) {
                        *x = pick(rng, &[f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -f32::NAN]);
                    }
                }
            }
        }
    }
    let layout = Layout {
        offset: if rng.random_bool(0.5) { rng.random_range(1..=MAX_OFFSET) } else { 0 },
        row_stride: if rng.random_bool(0.5) { e + rng.random_range(1..=5) } else { e },
    };
    let gw = generate_gw(rng, t * k);
    let route_scale = match rng.random_range(0..10) {
        0..=4 => 2.5,
        5 | 6 => 1.0,
        7 => wide(rng, -20, 20).abs(),
        _ => wide(rng, -2, 4).abs(),
    };
    let route_norm = rng.random_bool(0.75);
    let loss = if rng.random_bool(0.5) {
        let clamp_tie = if rng.random_bool(0.5) { ClampTie::Strict } else { ClampTie::Inclusive };
        Some(FusedLoss { clamp_tie, g: gradient_value(rng) })
    } else {
        None
    };
    // One case in sixteen is a freshly initialised router (Class::FlatRouter):
    // every valid row's logits one value. Drawn last, so that the other
    // cases of a seed stay what they were.
    if rng.random_range(0..16) == 0 {
        let v = pick(rng, &[0.0, 0.0, 1.0, -2.0]);
        for (r, row) in logits.chunks_mut(e).enumerate() {
            if !padding.as_ref().is_some_and(|p| p[r]) {
                row.fill(v);
            }
        }
    }
    RouterCase { t, e, layout, logits, bias, groups, topk_groups: l, k, route_scale, route_norm, padding, gw, loss }
}

// ---------------------------------------------------------------------------
// Classes.

/// The classes a (valid) case exercises, read off its values.
pub fn classify(case: &RouterCase) -> BTreeSet<Class> {
    let mut c = BTreeSet::new();
    let (t, e, g, l, k) = (case.t, case.e, case.groups, case.topk_groups, case.k);
    let gs = case.group_size();
    let mut add = |cond: bool, class: Class| {
        if cond {
            c.insert(class);
        }
    };
    add(t <= 3, Class::TinyT);
    add(edge_t(usize::MAX).contains(&t) && t > 3, Class::TEdge);
    add((e, g, l, k) == V3, Class::V3Shape);
    add((e, g, l, k) == V2, Class::V2Shape);
    add((e, g, l, k) == V2_LITE, Class::V2LiteShape);
    add(e <= 8, Class::SmallE);
    add(e % 4 != 0, Class::EUnaligned);
    add(gs % 2 == 1, Class::OddGroupSize);
    add(gs == 2, Class::PairGroups);
    add(g == 1, Class::OneGroup);
    add(l == g && g > 1, Class::AllGroupsKept);
    add(k == 1, Class::KOne);
    add(k == l * gs, Class::KAll);
    add(case.layout.offset != 0, Class::Offset);
    add(case.layout.row_stride > e, Class::RowStride);
    add(case.route_norm, Class::RouteNorm);
    add(!case.route_norm, Class::NoRouteNorm);
    add(case.route_scale == 2.5, Class::RouteScaleV3);
    add(case.route_scale != 2.5, Class::RouteScaleOther);
    add(case.gw.contains(&0.0), Class::GwZero);
    add(case.gw.iter().any(|&w| w.abs() == 1.0), Class::GwUnit);
    add(case.gw.iter().any(|&w| w != 0.0 && w.abs() < 2f32.powi(-100)), Class::GwTiny);
    add(case.gw.iter().any(|&w| w.abs() > 2f32.powi(100)), Class::GwHuge);
    add(case.loss.is_none(), Class::NoLoss);
    if let Some(loss) = &case.loss {
        add(true, Class::FusedLoss);
        add(loss.clamp_tie == ClampTie::Strict, Class::Strict);
        add(loss.clamp_tie == ClampTie::Inclusive, Class::Inclusive);
        add(loss.g == 0.0, Class::GZero);
        add(loss.g.abs() == 1.0, Class::GUnit);
        add(loss.g != 0.0 && loss.g.abs() < 2f32.powi(-100), Class::GTiny);
        add(loss.g.abs() > 2f32.powi(100), Class::GHuge);
    }
    let padding: Vec<bool> = (0..t).map(|r| case.is_padding(r)).collect();
    let n_pad = padding.iter().filter(|&&p| p).count();
    add(n_pad == t, Class::AllPadding);
    add(n_pad > 0 && n_pad < t, Class::PartialPadding);
    let valid: Vec<&[f32]> = (0..t).filter(|&r| !padding[r]).map(|r| case.row(r)).collect();
    add(
        valid.len() >= 2 && valid.iter().all(|row| row.iter().all(|x| x.to_bits() == valid[0][0].to_bits())),
        Class::FlatRouter,
    );
    let biased = case.bias.iter().any(|&b| b != 0.0);
    let unbiased = vec![0.0f32; e];
    let routing = Routing { e, groups: g, l, k };
    let profiles = RouterProfile::all();
    // Padding rows are routed too: the selection classes read every row.
    for (r, &pad) in padding.iter().enumerate() {
        let x = case.row(r);
        let nonfinite = x.iter().any(|v| !v.is_finite());
        add(nonfinite && pad, Class::PoisonedPadding);
        add(nonfinite && !pad, Class::NonFiniteValid);
        let s: Vec<f32> = scores(x);
        for (&xv, &sv) in x.iter().zip(&s) {
            add(xv.is_finite() && sv == 0.0, Class::SaturatedZero);
            add(xv.is_finite() && sv == 1.0, Class::SaturatedOne);
            add(sv == ONE_MINUS_ULP, Class::OneMinusUlp);
            add(sv > 0.0 && sv < 2f32.powi(-100), Class::TinyScore);
        }
        if !pad && case.loss.is_some() {
            let near_eps = |n: f32| n.is_finite() && (key(n) - key(EPS)).abs() <= 1;
            let abs: Vec<f32> = s.iter().map(|v| v.abs()).collect();
            add(profiles.iter().any(|p| near_eps(p.loss.row.reduce(&abs))), Class::ClampTie);
        }
        let ch = choice(&s, &case.bias, routing);
        let u = &ch.u;
        add(u.iter().all(|&v| tied(v, u[0])), Class::AllEqual);
        for m in &ch.members {
            for p in 0..gs.min(3) - 1 {
                add(tied(u[m[p]], u[m[p + 1]]), Class::InGroupTie);
                add(one_ulp_apart(u[m[p]], u[m[p + 1]]), Class::InGroupNearTie);
            }
        }
        if l < g {
            let (a, b) = (ch.group_scores[ch.groups[l - 1]], ch.group_scores[ch.groups[l]]);
            add(tied(a, b), Class::GroupScoreTie);
            add(one_ulp_apart(a, b), Class::GroupScoreNearTie);
        }
        if k < ch.experts.len() {
            let (a, b) = (u[ch.experts[k - 1]], u[ch.experts[k]]);
            add(tied(a, b), Class::KthTie);
            add(one_ulp_apart(a, b), Class::KthNearTie);
        }
        let reorders = || choose(&s, &unbiased, g, l, k, Depth::Chosen).ids != ch.ids;
        add(biased && reorders(), Class::BiasReorders);
    }
    c
}

// ---------------------------------------------------------------------------
// Shrinking.

/// The rows `rows` of the case (logits, padding and gw together).
fn keep_rows(case: &RouterCase, rows: &[usize]) -> RouterCase {
    let k = case.k;
    let mut c = case.clone();
    c.t = rows.len();
    c.logits = rows.iter().flat_map(|&r| case.row(r).to_vec()).collect();
    c.padding = case.padding.as_ref().map(|p| rows.iter().map(|&r| p[r]).collect());
    c.gw = rows.iter().flat_map(|&r| case.gw[r * k..(r + 1) * k].to_vec()).collect();
    c
}

/// The experts `experts` (logits columns and bias), regrouped into `groups`
/// groups with `l` kept and `k` chosen; gw keeps its first k columns.
fn keep_experts(case: &RouterCase, experts: &[usize], groups: usize, l: usize, k: usize) -> RouterCase {
    let (e, e2, k0) = (case.e, experts.len(), case.k);
    let mut c = case.clone();
    c.e = e2;
    c.logits = (0..case.t).flat_map(|r| experts.iter().map(move |&x| case.logits[r * e + x])).collect();
    c.bias = experts.iter().map(|&x| case.bias[x]).collect();
    c.layout.row_stride = case.layout.row_stride - e + e2;
    c.groups = groups;
    c.topk_groups = l;
    c.k = k;
    c.gw = (0..case.t).flat_map(|r| case.gw[r * k0..r * k0 + k].to_vec()).collect();
    c
}

/// Only the groups `kept` (L and k reduced to fit).
fn keep_groups(case: &RouterCase, kept: &[usize]) -> RouterCase {
    let gs = case.group_size();
    let experts: Vec<usize> = kept.iter().flat_map(|&j| j * gs..(j + 1) * gs).collect();
    let l = case.topk_groups.min(kept.len());
    keep_experts(case, &experts, kept.len(), l, case.k.min(l * gs))
}

/// Only the places `places` inside every group (at least 2; k reduced to fit).
fn keep_places(case: &RouterCase, places: &[usize]) -> RouterCase {
    let gs = case.group_size();
    let experts: Vec<usize> = (0..case.groups).flat_map(|j| places.iter().map(move |&p| j * gs + p)).collect();
    let l = case.topk_groups;
    keep_experts(case, &experts, case.groups, l, case.k.min(l * places.len()))
}

/// The same experts in `groups` groups with `l` kept (k reduced to fit).
fn regroup(case: &RouterCase, groups: usize, l: usize) -> RouterCase {
    let all: Vec<usize> = (0..case.e).collect();
    keep_experts(case, &all, groups, l, case.k.min(l * case.e / groups))
}

/// The bias of `experts` set to 0 with every u kept: each of their logits
/// becomes the simplest one whose s is the old u (NaN logits stay). None
/// when some u is not an s, or nothing changes.
fn unbias(case: &RouterCase, experts: &[usize]) -> Option<RouterCase> {
    let mut c = case.clone();
    for &i in experts.iter().filter(|&&i| case.bias[i] != 0.0) {
        for r in 0..case.t {
            let x = case.logits[r * case.e + i];
            if !x.is_nan() {
                c.logits[r * case.e + i] = simplest_logit_for_u(score(x) + case.bias[i], 0.0)?;
            }
        }
        c.bias[i] = 0.0;
    }
    (c.bias != case.bias).then_some(c)
}

/// Strictly smaller or simpler variants of a case, most aggressive first:
/// tokens (halves, windows, singles), whole groups, places inside every
/// group, G, L and k, then padding, layout, the fused loss and its details,
/// then values. Every candidate is valid.
pub fn shrink_candidates(case: &RouterCase) -> Vec<RouterCase> {
    let mut out = Vec::new();
    let (t, e, groups, l, k) = (case.t, case.e, case.groups, case.topk_groups, case.k);
    let gs = case.group_size();
    // Tokens: the first or second half, windows of 1, 2, 4, 8, then drop one.
    if t > 1 {
        out.push(keep_rows(case, &(0..t / 2).collect::<Vec<_>>()));
        out.push(keep_rows(case, &(t / 2..t).collect::<Vec<_>>()));
        for w in [1, 2, 4, 8] {
            if w * 2 <= t {
                for start in (0..=t - w).step_by(w).take(64) {
                    out.push(keep_rows(case, &(start..start + w).collect::<Vec<_>>()));
                }
            }
        }
        for r in 0..t.min(256) {
            out.push(keep_rows(case, &(0..t).filter(|&x| x != r).collect::<Vec<_>>()));
        }
    }
    // Whole groups: halves, single groups, then drop one.
    if groups > 1 {
        out.push(keep_groups(case, &(0..groups / 2).collect::<Vec<_>>()));
        out.push(keep_groups(case, &(groups / 2..groups).collect::<Vec<_>>()));
        for j in 0..groups.min(64) {
            out.push(keep_groups(case, &[j]));
        }
        for j in 0..groups.min(64) {
            out.push(keep_groups(case, &(0..groups).filter(|&x| x != j).collect::<Vec<_>>()));
        }
    }
    // Places inside every group: halves (of at least 2), pairs, drop one.
    if gs > 2 {
        if gs >= 4 {
            out.push(keep_places(case, &(0..gs / 2).collect::<Vec<_>>()));
            out.push(keep_places(case, &(gs / 2..gs).collect::<Vec<_>>()));
        }
        for p in (0..gs - 1).take(32) {
            out.push(keep_places(case, &[p, p + 1]));
        }
        for p in 0..gs.min(64) {
            out.push(keep_places(case, &(0..gs).filter(|&x| x != p).collect::<Vec<_>>()));
        }
    }
    // G, L, k.
    if groups > 1 {
        out.push(regroup(case, 1, 1));
        if groups.is_multiple_of(2) {
            out.push(regroup(case, groups / 2, l.min(groups / 2)));
        }
    }
    if l > 1 {
        out.push(regroup(case, groups, 1));
        out.push(regroup(case, groups, l - 1));
    }
    if k > 1 {
        let all: Vec<usize> = (0..e).collect();
        out.push(keep_experts(case, &all, groups, l, 1));
        out.push(keep_experts(case, &all, groups, l, k - 1));
    }
    // Padding, layout, the fused loss, the options.
    if let Some(p) = &case.padding {
        let mut c = case.clone();
        c.padding = None;
        out.push(c);
        let keep: Vec<usize> = (0..t).filter(|&r| !p[r]).collect();
        if !keep.is_empty() && keep.len() < t {
            out.push(keep_rows(case, &keep));
        }
    }
    if case.layout != Layout::dense(e) {
        let mut c = case.clone();
        c.layout = Layout::dense(e);
        out.push(c);
    }
    if let Some(loss) = case.loss {
        let mut c = case.clone();
        c.loss = None;
        out.push(c);
        if loss.clamp_tie != ClampTie::Strict {
            let mut c = case.clone();
            c.loss = Some(FusedLoss { clamp_tie: ClampTie::Strict, ..loss });
            out.push(c);
        }
        for g in simplifications(loss.g) {
            let mut c = case.clone();
            c.loss = Some(FusedLoss { g, ..loss });
            out.push(c);
        }
    }
    if case.route_norm {
        let mut c = case.clone();
        c.route_norm = false;
        out.push(c);
    }
    for scale in [1.0f32, 2.5] {
        if simpler(scale, case.route_scale) {
            let mut c = case.clone();
            c.route_scale = scale;
            out.push(c);
        }
    }
    // Values. The bias first, keeping every u (a tie in u survives): each
    // biased logit moves to the simplest one whose s is its old u. Searches
    // cost about 66 evaluations of s each: small cases only.
    let biased: Vec<usize> = (0..e).filter(|&i| case.bias[i] != 0.0).collect();
    if !biased.is_empty() && t * biased.len() <= 64 {
        out.extend(unbias(case, &biased));
        if biased.len() > 1 && t <= 16 {
            out.extend(biased.iter().take(16).filter_map(|&i| unbias(case, &[i])));
        }
    }
    // Whole vectors (every value that can move toward the target moves),
    // then each distinct logit everywhere it occurs (ties survive), then
    // each logit to the simplest one with the same u (small cases), then
    // single values.
    let toward = |xs: &[f32], y: f32| -> Option<Vec<f32>> {
        let v: Vec<f32> = xs.iter().map(|&x| if simpler(y, x) { y } else { x }).collect();
        (v.iter().zip(xs).any(|(a, b)| a.to_bits() != b.to_bits())).then_some(v)
    };
    if let Some(bias) = toward(&case.bias, 0.0) {
        out.push(RouterCase { bias, ..case.clone() });
    }
    if let Some(logits) = toward(&case.logits, 0.0) {
        out.push(RouterCase { logits, ..case.clone() });
    }
    for y in [0.0, 1.0] {
        if let Some(gw) = toward(&case.gw, y) {
            out.push(RouterCase { gw, ..case.clone() });
        }
    }
    let mut distinct: Vec<u32> = case.logits.iter().map(|x| x.to_bits()).collect();
    distinct.sort_unstable();
    distinct.dedup();
    if distinct.len() < case.logits.len() {
        for &bits in distinct.iter().take(64) {
            for y in simplifications(f32::from_bits(bits)) {
                let mut c = case.clone();
                c.logits.iter_mut().filter(|x| x.to_bits() == bits).for_each(|x| *x = y);
                out.push(c);
            }
        }
    }
    if t * e <= 64 {
        for (i, &x) in case.logits.iter().enumerate() {
            let b = case.bias[i % e];
            if let Some(y) = (!x.is_nan()).then(|| simplest_logit_for_u(score(x) + b, b)).flatten() {
                if simpler(y, x) {
                    let mut c = case.clone();
                    c.logits[i] = y;
                    out.push(c);
                }
            }
        }
    }
    for i in 0..case.logits.len().min(256) {
        for y in simplifications(case.logits[i]) {
            let mut c = case.clone();
            c.logits[i] = y;
            out.push(c);
        }
    }
    for i in 0..e.min(256) {
        for y in simplifications(case.bias[i]) {
            let mut c = case.clone();
            c.bias[i] = y;
            out.push(c);
        }
    }
    for i in 0..case.gw.len().min(256) {
        for y in simplifications(case.gw[i]) {
            let mut c = case.clone();
            c.gw[i] = y;
            out.push(c);
        }
    }
    out
}

// ---------------------------------------------------------------------------
// Invalid inputs.

/// One invalid variant of `case` per validation rule of
/// docs/ops/router.md#validation, each named; every one must fail `validate()`.
pub fn invalid_variants(case: &RouterCase) -> Vec<(&'static str, RouterCase)> {
    let with = |f: &dyn Fn(&mut RouterCase)| {
        let mut c = case.clone();
        f(&mut c);
        c
    };
    let max_k = case.topk_groups * case.group_size();
    vec![
        ("t-zero", with(&|c| c.t = 0)),
        ("one-expert", with(&|c| c.e = 1)),
        (
            "logits-length",
            with(&|c| {
                c.logits.pop();
            }),
        ),
        (
            "bias-length",
            with(&|c| {
                c.bias.pop();
            }),
        ),
        ("bias-nan", with(&|c| c.bias[0] = f32::NAN)),
        ("bias-inf", with(&|c| c.bias[c.e - 1] = f32::INFINITY)),
        ("bias-neg-inf", with(&|c| c.bias[0] = f32::NEG_INFINITY)),
        ("groups-zero", with(&|c| c.groups = 0)),
        ("groups-not-dividing-e", with(&|c| c.groups = c.e + 1)),
        ("one-expert-per-group", with(&|c| c.groups = c.e)),
        ("topk-groups-zero", with(&|c| c.topk_groups = 0)),
        ("topk-groups-above-g", with(&|c| c.topk_groups = c.groups + 1)),
        ("k-zero", with(&|c| c.k = 0)),
        ("k-above-l-e-over-g", with(&|c| c.k = max_k + 1)),
        ("route-scale-zero", with(&|c| c.route_scale = 0.0)),
        ("route-scale-neg-zero", with(&|c| c.route_scale = -0.0)),
        ("route-scale-negative", with(&|c| c.route_scale = -2.5)),
        ("route-scale-inf", with(&|c| c.route_scale = f32::INFINITY)),
        ("route-scale-nan", with(&|c| c.route_scale = f32::NAN)),
        ("gw-length", with(&|c| c.gw.push(0.0))),
        ("padding-length", with(&|c| c.padding = Some(vec![false; c.t + 1]))),
        ("offset-4", with(&|c| c.layout.offset = MAX_OFFSET + 1)),
        ("row-stride-below-e", with(&|c| c.layout.row_stride = c.e - 1)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::common::complexity;
    use proptest::test_runner::{RngAlgorithm, TestRng};
    use std::collections::BTreeMap;
    use std::time::Instant;

    /// A well-founded "smaller or simpler" order, lexicographic: the shape
    /// (T, E, G, L, k); the number of optional features (padding, a
    /// non-dense layout, the fused loss, an inclusive gate, route_norm); the
    /// bias (no value more complex, one less so); then, at an identical
    /// bias, every other value (logits, gw, route_scale, g) the same way.
    fn smaller(a: &RouterCase, b: &RouterCase) -> bool {
        let features = |c: &RouterCase| {
            c.padding.is_some() as u32
                + (c.layout != Layout::dense(c.e)) as u32
                + c.loss.is_some() as u32
                + c.loss.is_some_and(|l| l.clamp_tie == ClampTie::Inclusive) as u32
                + c.route_norm as u32
        };
        let size = |c: &RouterCase| (c.t, c.e, c.groups, c.topk_groups, c.k, features(c));
        if size(a) != size(b) {
            return size(a) < size(b);
        }
        let pareto = |va: &[f32], vb: &[f32]| {
            va.iter().zip(vb).all(|(&x, &y)| complexity(x) <= complexity(y))
                && va.iter().zip(vb).any(|(&x, &y)| complexity(x) < complexity(y))
        };
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        if bits(&a.bias) != bits(&b.bias) {
            return pareto(&a.bias, &b.bias);
        }
        let values = |c: &RouterCase| {
            let mut v: Vec<f32> = c.logits.iter().chain(&c.gw).copied().collect();
            v.push(c.route_scale);
            v.extend(c.loss.map(|l| l.g));
            v
        };
        pareto(&values(a), &values(b))
    }

    /// Two tokens of a small grouped shape, plain values.
    fn hand_case() -> RouterCase {
        RouterCase {
            t: 2,
            e: 8,
            layout: Layout::dense(8),
            logits: vec![0.5, -1.0, 2.0, 0.25, -0.75, 1.5, -2.0, 0.125, 1.0, 0.0, -0.5, 0.75, 1.25, -1.5, 0.375, -0.25],
            bias: vec![0.0; 8],
            groups: 4,
            topk_groups: 2,
            k: 3,
            route_scale: 2.5,
            route_norm: true,
            padding: None,
            gw: vec![1.0; 6],
            loss: None,
        }
    }

    #[test]
    fn warp_wide_groups_are_drawn_both_paths_and_non_powers_of_two() {
        // The kernels' fwd_grouped32 path (32 experts a group, k <= 2 L) and
        // the general path at the same group size, E = 96 and 160 included.
        let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
        let cfg = GenConfig::default();
        let (mut grouped32, mut below_v, mut general, mut es) = (0, 0, 0, BTreeSet::new());
        for _ in 0..3000 {
            let (e, g, l, k) = generate_shape(&mut rng, &cfg);
            assert!(e % g == 0 && e / g >= 2 && (1..=g).contains(&l) && (1..=l * e / g).contains(&k));
            if e == 32 * g {
                es.insert(e);
                if k <= 2 * l {
                    grouped32 += 1;
                    // G below the lane count V (G not a power of two): the
                    // path's own branch.
                    below_v += usize::from(!g.is_power_of_two());
                } else {
                    general += 1;
                }
            }
        }
        assert!(grouped32 >= 50 && general >= 50 && below_v >= 25, "{grouped32} {below_v} {general}");
        assert!([32, 64, 96, 128, 160, 192, 224, 256].iter().all(|e| es.contains(e)), "{es:?}");
    }

    /// The widest warp-group shape with every group kept and one expert
    /// chosen (the lanes' last reduction over 32 groups) is drawn, not only
    /// possible.
    #[test]
    fn the_widest_all_groups_kept_shape_is_drawn() {
        let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
        let cfg = GenConfig { max_e: 1024, ..GenConfig::default() };
        let hits = (0..20_000).filter(|_| generate_shape(&mut rng, &cfg) == (1024, 32, 32, 1)).count();
        assert!(hits >= 5, "{hits}");
    }

    /// The grouped path at V = 2 (E = 64 in two groups of 32, k <= 2L) in
    /// several percent of cases, not the 0.4 % a random draw gives.
    #[test]
    fn the_grouped_two_values_per_lane_shape_is_drawn_often() {
        let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
        let hits = (0..10_000)
            .filter(|_| matches!(generate_shape(&mut rng, &GenConfig::default()), (64, 2, l, k) if k <= 2 * l))
            .count();
        assert!(hits >= 500, "{hits} of 10000");
    }

    /// A freshly initialised router (every valid row's logits one value) is
    /// a class of its own, drawn at many T, E = 32 included.
    #[test]
    fn flat_routers_are_drawn_and_classified() {
        let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
        let cfg = GenConfig::default();
        let (mut flat, mut long, mut e32) = (0, 0, 0);
        for _ in 0..3000 {
            let case = generate(&mut rng, &cfg);
            if classify(&case).contains(&Class::FlatRouter) {
                flat += 1;
                long += usize::from(case.t >= 16);
                e32 += usize::from(case.e == 32);
            }
        }
        assert!(flat >= 100 && long >= 20 && e32 >= 2, "{flat} {long} {e32}");
        // A case whose valid rows differ somewhere is not flat.
        let mut c = hand_case();
        c.logits.fill(0.0);
        assert!(classify(&c).contains(&Class::FlatRouter));
        c.logits[c.e] = 1.0;
        assert!(!classify(&c).contains(&Class::FlatRouter));
    }

    #[test]
    fn simplest_values_and_logits() {
        assert_eq!(simplest_in(-0.5, 3.0), 0.0);
        assert_eq!(simplest_in(0.3, 0.7), 0.5);
        assert_eq!(simplest_in(1.1, 1.3), 1.25);
        assert_eq!(simplest_in(-1.3, -1.1), -1.25);
        assert_eq!(simplest_in(3.0, 3.0), 3.0);
        // s(x) = 0.5 exactly for every x near 0: the simplest is 0.
        assert_eq!(simplest_logit_for_u(0.5, 0.0), Some(0.0));
        let x = simplest_logit_for_u(0.75 + 0.125, 0.125).unwrap();
        assert_eq!(score(x) + 0.125, 0.875);
        assert!(!simpler(x, logit_for_u(0.875, 0.125).unwrap()) || x != logit_for_u(0.875, 0.125).unwrap());
    }

    #[test]
    fn edges_are_exact() {
        let ed = edges();
        assert_eq!(score(ed.zero_max).to_bits(), 0);
        assert!(score(step(ed.zero_max, 1)) > 0.0);
        assert_eq!(score(ed.one_min), 1.0);
        assert!(score(step(ed.one_min, -1)) < 1.0);
        assert_eq!(score(ed.one_minus_ulp.0), ONE_MINUS_ULP);
        assert_eq!(score(ed.one_minus_ulp.1), ONE_MINUS_ULP);
        assert!(score(step(ed.one_minus_ulp.0, -1)) < ONE_MINUS_ULP);
        // No s lies between 1 - 2^-23 and 1: s never goes from one to the
        // other in a step, and never decreases.
        assert_eq!(step(ed.one_minus_ulp.1, 1), ed.one_min);
        assert_eq!(ONE_MINUS_ULP, step(step(1.0, -1), -1));
        assert!(!ed.clamp.is_empty());
        for &(x1, x2) in &ed.clamp {
            let n = score(x1) + x2.map_or(0.0, score);
            assert!((key(n) - key(EPS)).abs() <= 1, "{x1} {x2:?}: {n:e}");
        }
        assert!(score(f32::NAN).is_nan());
        assert_eq!(score(f32::NEG_INFINITY).to_bits(), 0);
        assert_eq!(score(f32::INFINITY), 1.0);
        assert_eq!(score(0.0), 0.5);
    }

    #[test]
    fn logit_search_hits_its_target() {
        for (target, b) in
            [(0.75f32, 0.0f32), (step(0.5, 1), 0.0), (0.3, 0.125), (1.0625, 1.0), (step(0.45, -1), -0.01)]
        {
            let x = logit_for_u(target, b).unwrap_or_else(|| panic!("{target} - {b}"));
            assert_eq!(score(x) + b, target);
            assert!(score(step(x, -1)) + b < target);
        }
        // Above every u that a bias of 0 can reach.
        assert_eq!(logit_for_u(1.5, 0.0), None);
    }

    #[test]
    fn generated_cases_are_valid() {
        let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
        let cfg = GenConfig::default();
        for _ in 0..3000 {
            let c = generate(&mut rng, &cfg);
            assert_eq!(c.validate(), Ok(()), "{c:?}");
            assert!(c.t * c.e <= cfg.max_te && c.e <= cfg.max_e, "{} x {}", c.t, c.e);
        }
        // At the kernels' widest E, warp-wide groups reach 32 of them (the
        // widest fwd_grouped32 shape).
        let wide = GenConfig { max_e: 1024, ..GenConfig::default() };
        let mut widest = 0;
        for _ in 0..3000 {
            let c = generate(&mut rng, &wide);
            assert_eq!(c.validate(), Ok(()), "{c:?}");
            assert!(c.t * c.e <= wide.max_te && c.e <= wide.max_e, "{} x {}", c.t, c.e);
            widest += usize::from(c.e == 1024 && c.groups == 32);
        }
        assert!(widest > 0, "no case of 32 groups of 32 experts in 3000");
        // Tier B's reference shapes: long T (each warp of the kernels takes
        // several tokens) within 2^22 elements, E up to 1024 whatever the
        // knobs say.
        let reference = GenConfig { shapes: Shapes::Reference, ..GenConfig::default() };
        let (mut long, mut widest_e) = (0, 0);
        for _ in 0..60 {
            let c = generate(&mut rng, &reference);
            assert_eq!(c.validate(), Ok(()), "T={} E={}", c.t, c.e);
            assert!(c.t * c.e <= REFERENCE_MAX_TE && c.e <= MAX_REFERENCE_E, "{} x {}", c.t, c.e);
            long += usize::from(c.t > 4096);
            widest_e = widest_e.max(c.e);
        }
        assert!(long >= 10 && widest_e > 257, "{long} long cases, widest E {widest_e}");
        // Tight configs still give valid cases.
        for cfg in [
            GenConfig { max_te: 2, max_e: 1, max_t: 1, ..GenConfig::default() },
            GenConfig { max_te: 100, max_e: 7, max_t: 5, ..GenConfig::default() },
            GenConfig { max_te: 64, max_e: 300, max_t: 1100, ..GenConfig::default() },
        ] {
            for _ in 0..300 {
                let c = generate(&mut rng, &cfg);
                assert_eq!(c.validate(), Ok(()), "{c:?}");
                assert!(c.t <= cfg.max_t.max(1) && c.e <= cfg.max_e.max(2), "{} x {}", c.t, c.e);
            }
        }
    }

    #[test]
    fn shrink_candidates_are_valid_and_smaller() {
        let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
        let mut n = 0usize;
        for _ in 0..400 {
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
    fn every_class_is_reached() {
        let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
        let mut counts: BTreeMap<Class, usize> = BTreeMap::new();
        let start = Instant::now();
        let cases: Vec<RouterCase> = (0..3000).map(|_| generate(&mut rng, &GenConfig::default())).collect();
        let generated = start.elapsed();
        for c in &cases {
            for class in classify(c) {
                *counts.entry(class).or_default() += 1;
            }
        }
        let classified = start.elapsed() - generated;
        println!("3000 cases: generated in {generated:?}, classified in {classified:?}");
        for class in Class::ALL {
            println!("{:>6}  {class}", counts.get(&class).copied().unwrap_or(0));
        }
        let missing: Vec<_> = Class::ALL.iter().filter(|c| !counts.contains_key(c)).collect();
        assert!(missing.is_empty(), "never generated: {missing:?}");
    }

    #[test]
    fn class_names_are_kebab_case_and_all_is_complete() {
        assert_eq!(Class::KthNearTie.to_string(), "kth-near-tie");
        assert_eq!(Class::V3Shape.to_string(), "v3-shape");
        let set: BTreeSet<Class> = Class::ALL.into_iter().collect();
        assert_eq!(set.len(), Class::ALL.len());
        for c in Class::ALL {
            let back: Class = serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
            assert_eq!(back, c);
        }
    }

    #[test]
    fn classify_is_truthful_on_hand_made_cases() {
        let base = hand_case();
        assert_eq!(base.validate(), Ok(()));
        let c = classify(&base);
        for class in [
            Class::InGroupTie,
            Class::InGroupNearTie,
            Class::GroupScoreTie,
            Class::GroupScoreNearTie,
            Class::KthTie,
            Class::KthNearTie,
            Class::AllEqual,
            Class::BiasReorders,
            Class::SaturatedZero,
            Class::SaturatedOne,
            Class::OneMinusUlp,
            Class::TinyScore,
            Class::ClampTie,
            Class::NonFiniteValid,
            Class::PoisonedPadding,
        ] {
            assert!(!c.contains(&class), "{class} on plain values");
        }
        for class in [Class::TinyT, Class::SmallE, Class::PairGroups, Class::RouteScaleV3, Class::NoLoss] {
            assert!(c.contains(&class), "{class} missing");
        }

        // Row 0 u: groups (0.62, 0.27), (0.88, 0.56), (0.32, 0.82), (0.12, 0.53):
        // groups 1 and 2 kept; k = 3 takes experts 2, 3 and 5 (s(0.25) = 0.562
        // is third above s(0.125) = 0.531 of group 3, not kept).
        // A tie at the k-th expert: expert 4 (group 2) takes expert 3's logit.
        let mut tie = base.clone();
        tie.t = 1;
        tie.logits.truncate(8);
        tie.gw.truncate(3);
        let plain = tie.clone();
        tie.logits[4] = tie.logits[3];
        let c = classify(&tie);
        assert!(c.contains(&Class::KthTie), "{c:?}");
        assert!(!c.contains(&Class::KthNearTie));
        // One ulp apart in u instead (s(0.25) + 0 is u).
        let mut near = plain.clone();
        let u3 = score(near.logits[3]);
        near.logits[4] = logit_for_u(step(u3, -1), 0.0).unwrap();
        let c = classify(&near);
        assert!(c.contains(&Class::KthNearTie) && !c.contains(&Class::KthTie), "{c:?}");
        // Two ulps apart is neither.
        let mut far = plain.clone();
        far.logits[4] = logit_for_u(step(u3, -2), 0.0).unwrap();
        let c = classify(&far);
        assert!(!c.contains(&Class::KthNearTie) && !c.contains(&Class::KthTie), "{c:?}");

        // The tie is read in u, not in x or s: equal logits with different
        // biases are no tie; different logits that meet in u are.
        let mut biased = tie.clone();
        biased.bias[4] = 0.125;
        assert!(!classify(&biased).contains(&Class::KthTie));
        let mut meet = plain.clone();
        meet.bias[4] = 0.125;
        meet.logits[4] = logit_for_u(score(meet.logits[3]), 0.125).unwrap();
        assert!(classify(&meet).contains(&Class::KthTie));

        // A group-score tie: group 3 gets group 2's values, at the L boundary.
        let mut gt = plain.clone();
        gt.logits[6] = gt.logits[4];
        gt.logits[7] = gt.logits[5];
        gt.topk_groups = 1;
        gt.k = 2;
        gt.gw.truncate(2);
        let c = classify(&gt);
        assert!(!c.contains(&Class::GroupScoreTie));
        gt.logits[6] = gt.logits[2];
        gt.logits[7] = gt.logits[3];
        assert!(classify(&gt).contains(&Class::GroupScoreTie), "{:?}", classify(&gt));

        // In-group tie, all equal.
        let mut ig = plain.clone();
        ig.logits[1] = ig.logits[0];
        assert!(classify(&ig).contains(&Class::InGroupTie));
        let mut eq = plain.clone();
        eq.logits.fill(0.75);
        let c = classify(&eq);
        assert!(c.contains(&Class::AllEqual) && c.contains(&Class::KthTie) && c.contains(&Class::GroupScoreTie));

        // The bias reorders: a large bias on expert 0 (group 0, not kept).
        let mut br = plain.clone();
        br.bias[0] = 1.0;
        assert!(classify(&br).contains(&Class::BiasReorders));
        br.bias[0] = 2f32.powi(-30);
        assert!(!classify(&br).contains(&Class::BiasReorders));

        // Saturation and tiny scores.
        let ed = edges();
        let mut sat = plain.clone();
        sat.logits[0] = ed.zero_max;
        sat.logits[1] = ed.one_min;
        sat.logits[2] = ed.one_minus_ulp.0;
        sat.logits[3] = -80.0;
        let c = classify(&sat);
        for class in [Class::SaturatedZero, Class::SaturatedOne, Class::OneMinusUlp, Class::TinyScore] {
            assert!(c.contains(&class), "{class}");
        }
        sat.logits[0] = step(ed.zero_max, 1);
        sat.logits[1] = step(ed.one_minus_ulp.0, -1);
        sat.logits[2] = 0.0;
        sat.logits[3] = -60.0;
        let c = classify(&sat);
        for class in [Class::SaturatedZero, Class::SaturatedOne, Class::OneMinusUlp] {
            assert!(!c.contains(&class), "{class}");
        }
        // s just above zero_max is 1 / (a huge exp), about 2.9e-39: subnormal.
        let s0 = score(sat.logits[0]);
        assert!(s0 > 0.0 && !s0.is_normal(), "{s0:e}");
        assert!(c.contains(&Class::TinyScore));
        sat.logits[0] = 0.0;
        assert!(!classify(&sat).contains(&Class::TinyScore), "s(-60) = 8.8e-27 is not tiny");
        // -inf saturates to 0 but is non-finite, not "saturated".
        let mut inf = plain.clone();
        inf.logits[0] = f32::NEG_INFINITY;
        let c = classify(&inf);
        assert!(c.contains(&Class::NonFiniteValid) && !c.contains(&Class::SaturatedZero));
        inf.padding = Some(vec![true]);
        let c = classify(&inf);
        assert!(c.contains(&Class::PoisonedPadding) && !c.contains(&Class::NonFiniteValid));

        // The clamp tie: s exactly 0 but for one or two tiny values summing to
        // eps, only with the fused loss, only in a valid row.
        let (x1, x2) = ed.clamp[0];
        let mut ct = plain.clone();
        ct.logits.fill(-1.0e4);
        ct.logits[2] = x1;
        if let Some(x2) = x2 {
            ct.logits[6] = x2;
        }
        assert!(!classify(&ct).contains(&Class::ClampTie), "no fused loss");
        ct.loss = Some(FusedLoss { clamp_tie: ClampTie::Inclusive, g: 1.0 });
        assert!(classify(&ct).contains(&Class::ClampTie));
        ct.padding = Some(vec![true]);
        assert!(!classify(&ct).contains(&Class::ClampTie), "padding row");
        ct.padding = None;
        ct.logits[2] = step(x1, -20);
        assert!(!classify(&ct).contains(&Class::ClampTie));
    }

    /// Greedy shrinking: the first candidate that still fails, until none does.
    fn shrink(case: &RouterCase, fails: impl Fn(&RouterCase) -> bool) -> RouterCase {
        let mut current = case.clone();
        'outer: loop {
            for cand in shrink_candidates(&current) {
                if fails(&cand) {
                    current = cand;
                    continue 'outer;
                }
            }
            return current;
        }
    }

    #[test]
    fn shrinking_reaches_a_minimal_case() {
        // Fails whenever a logit is above 0.7: the minimal case is one token,
        // two experts in one group, k = 1, the logits 1.0 and 0.0, every other
        // value 0 (gw) or 1 (route_scale), nothing optional.
        let fails = |c: &RouterCase| c.logits.iter().any(|&x| x > 0.7);
        let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
        let mut done = 0;
        while done < 5 {
            let c = generate(&mut rng, &GenConfig::default());
            if !fails(&c) {
                continue;
            }
            let m = shrink(&c, fails);
            assert_eq!((m.t, m.e, m.groups, m.topk_groups, m.k), (1, 2, 1, 1, 1), "{m:?}");
            let mut logits = m.logits.clone();
            logits.sort_by(f32::total_cmp);
            assert_eq!(logits, vec![0.0, 1.0]);
            assert_eq!((m.bias.clone(), m.gw.clone(), m.route_scale), (vec![0.0, 0.0], vec![0.0], 1.0));
            assert_eq!((m.route_norm, m.loss, m.padding.clone(), m.layout), (false, None, None, Layout::dense(2)));
            done += 1;
        }
    }

    #[test]
    fn shrinking_keeps_a_tie_at_the_kth_expert() {
        // Fails whenever the case has a tie at the k-th expert: the minimal
        // shape is one token, two experts in one group, k = 1. The simplest
        // values are two logits 0.0 (u = 0.5 both) without bias; a tie made
        // by a bias stays biased when no logit gives its u without one (near
        // s = 0.96, say, 1 + exp(-x) steps by 2^-23 and s by about two ulps,
        // so half of the f32s there are no s).
        let fails = |c: &RouterCase| classify(c).contains(&Class::KthTie);
        let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
        let (mut done, mut ideal) = (0, 0);
        while done < 6 {
            let c = generate(&mut rng, &GenConfig::default());
            if c.t * c.e > 512 || !fails(&c) {
                continue;
            }
            let m = shrink(&c, fails);
            assert_eq!((m.t, m.e, m.groups, m.topk_groups, m.k), (1, 2, 1, 1, 1), "{m:?}");
            assert!(fails(&m));
            assert_eq!((m.route_norm, m.loss, m.padding.clone(), m.gw.clone()), (false, None, None, vec![0.0]));
            let u = choice(&scores(&m.logits), &m.bias, Routing { e: 2, groups: 1, l: 1, k: 1 }).u;
            if m.bias == [0.0, 0.0] {
                assert_eq!(m.logits, vec![0.0, 0.0], "{m:?}");
            } else {
                // Kept only because no unbiased logit gives u.
                assert!(u.iter().any(|&v| logit_for_u(v, 0.0).is_none()), "{m:?}");
            }
            ideal += (m.logits == [0.0, 0.0] && m.bias == [0.0, 0.0]) as usize;
            done += 1;
        }
        assert!(ideal >= 2, "{ideal} of 6 shrank to logits 0, 0 without bias");
    }

    #[test]
    fn invalid_variants_fail_validation() {
        let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
        let mut cases = vec![hand_case()];
        cases.extend((0..300).map(|_| generate(&mut rng, &GenConfig::default())));
        for c in &cases {
            let vs = invalid_variants(c);
            assert_eq!(vs.len(), 23);
            for (name, v) in vs {
                assert!(v.validate().is_err(), "{name} accepted: {v:?}");
            }
        }
    }
}
