//! Adversarial `seqwise_loss` cases (docs/ops/README.md#adversarial-cases).
//!
//! A case is built row by row from a menu of row kinds (sigmoid-like, signed,
//! subnormal, zeros, saturated, clamp ties, top-k ties, near-ties, cancelling
//! rows, non-finite values), on an adversarial shape and layout. Which classes
//! a case exercises is read off its values by [`classify`], not taken from
//! how it was made, so a shrunk or imported case is tagged truthfully too.
//!
//! [`crate::shrink::CaseStrategy`] is its proptest `Strategy`; its
//! `ValueTree` shrinks with [`shrink_candidates`]: drop rows, drop experts (k and the map kept
//! consistent), drop padding and layout, simplify values toward 0, 1 and
//! short binary fractions.

use super::common::{
    each_value, edge_t, is_prime, layout, padding_flags, pick, poison_padding, simpler, wide, write_class_name,
};
use crate::knobs::Shapes;
use oracles::case::seqwise_loss::{Layout, Objective, SeqwiseCase};
use oracles::profile::seqwise_loss::{SeqwiseProfile, GPU_TOKEN_CHUNK};
use oracles::vocab::{ClampTie, EPS};
use proptest::prelude::{Rng, RngExt};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fmt;

/// The adversarial classes of docs/ops/README.md#adversarial-cases, plus the
/// objective and clamp tie of the case (so a report shows both were tried).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    /// T in {1, 2, 3}.
    TinyT,
    /// T = n-1, n or n+1 for a power of two n >= 4 or a chunk size of the GPU profile.
    TEdge,
    /// E odd (1, 3, 129, 257 and the like).
    OddE,
    /// E prime.
    PrimeE,
    /// E not a multiple of 4.
    EUnaligned,
    /// UnbiasedTopK with k = 1.
    KOne,
    /// UnbiasedTopK with k = E.
    KAll,
    /// UnbiasedTopK with 8 < k < E: past the small k a top-k kernel keeps in
    /// registers, short of taking the whole row (the mutants of the GPU
    /// kernel's radix selection, used above k = 16, lived without it).
    KMid,
    /// Element offset 1, 2 or 3.
    Offset,
    /// Row stride > E.
    RowStride,
    /// Negative scores in valid rows.
    Signed,
    /// Subnormal or tiny (< 2^-100) non-zero scores in valid rows.
    Subnormal,
    /// -0.0 among the valid scores.
    SignedZero,
    /// Saturated sigmoid values (1.0 or 1 - 2^-24) in valid rows.
    Saturated,
    /// A valid ProvidedMap row whose L1 norm, in a shipped profile's order,
    /// is eps or one ulp from it.
    ClampTie,
    /// A valid top-k row tied at the k-th place, or all equal.
    TopkTie,
    /// A valid top-k row whose k-th and (k+1)-th values are one ulp apart.
    NearTie,
    /// A valid row whose sum cancels: |sum| < 2^-10 sum |s|.
    Cancel,
    /// Every row is padding.
    AllPadding,
    /// A padding row holding NaN or Inf.
    PoisonedPadding,
    /// NaN or Inf in a valid row.
    NonFiniteValid,
    /// g = 0.
    GZero,
    /// g = +-1.
    GUnit,
    /// 0 < |g| < 2^-100.
    GTiny,
    /// |g| > 2^100.
    GHuge,
    ProvidedMap,
    UnbiasedTopK,
    Strict,
    Inclusive,
}

impl Class {
    pub const ALL: [Class; 29] = [
        Class::TinyT,
        Class::TEdge,
        Class::OddE,
        Class::PrimeE,
        Class::EUnaligned,
        Class::KOne,
        Class::KAll,
        Class::KMid,
        Class::Offset,
        Class::RowStride,
        Class::Signed,
        Class::Subnormal,
        Class::SignedZero,
        Class::Saturated,
        Class::ClampTie,
        Class::TopkTie,
        Class::NearTie,
        Class::Cancel,
        Class::AllPadding,
        Class::PoisonedPadding,
        Class::NonFiniteValid,
        Class::GZero,
        Class::GUnit,
        Class::GTiny,
        Class::GHuge,
        Class::ProvidedMap,
        Class::UnbiasedTopK,
        Class::Strict,
        Class::Inclusive,
    ];
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_class_name(self, f)
    }
}

pub use super::GenConfig;

/// Small Es that matter: 1, primes, odd, around warp multiples, not multiples of 4.
const INTERESTING_E: [usize; 20] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 16, 31, 32, 33, 63, 64, 65, 129, 256, 257];

/// The forward's finalize stages the chunk partials in batches of 32 x 8
/// chunks (kernels/seqwise_loss.cu, BP_FIN_BATCH): a sequence of more than
/// this many tokens crosses a batch, which tier A's T x E <= 4096 never does.
const FINALIZE_BATCH_TOKENS: usize = 32 * 8 * GPU_TOKEN_CHUNK;
/// Most elements of a reference-shape case: DeepSeek-V3's 4096 tokens x 256
/// experts, a sequence's loss at its real size.
const REFERENCE_MAX_TE: usize = 1 << 20;

/// A tier-B shape (`GenConfig::shapes`): the sizes the GPU meets that tier
/// A's small budget cannot reach. Half the time T is next to a multiple of
/// the finalize batch (1 to 4 batches, E small enough for T x E <= 2^20),
/// else E is a real one, up to the kernels' 1024 (past the forward's 512
/// threads a block), with T as large as 2^20 / E allows. The size knobs
/// (`BITPARITY_MAX_T`, `_TE`, `_E`) are tier A's and do not apply.
fn generate_reference_shape<R: Rng + ?Sized>(rng: &mut R) -> (usize, usize) {
    if rng.random_bool(0.5) {
        let t = FINALIZE_BATCH_TOKENS * rng.random_range(1..=4) + pick(rng, &[0, 1, 2, 63, 64, 65]) - 1;
        (t, rng.random_range(1..=REFERENCE_MAX_TE / t))
    } else {
        let e = pick(rng, &[8, 16, 31, 32, 33, 64, 65, 128, 256, 257, 511, 512, 513, 1024]);
        let cap = REFERENCE_MAX_TE / e;
        let t = if rng.random_bool(0.5) { pick(rng, &edge_t(cap)) } else { rng.random_range(1..=cap) };
        (t, e)
    }
}

fn generate_shape<R: Rng + ?Sized>(rng: &mut R, cfg: &GenConfig) -> (usize, usize) {
    if cfg.shapes != Shapes::Small {
        return generate_reference_shape(rng);
    }
    let e = if rng.random_bool(0.75) { pick(rng, &INTERESTING_E) } else { rng.random_range(1..=cfg.max_e.max(1)) }
        .min(cfg.max_e.max(1));
    let cap = (cfg.max_te / e).clamp(1, cfg.max_t.max(1));
    let t = match rng.random_range(0..10) {
        0..=3 => rng.random_range(1..=3),
        4..=6 => {
            let edges: Vec<usize> = edge_t(cap);
            if edges.is_empty() {
                1
            } else {
                pick(rng, &edges)
            }
        }
        _ => rng.random_range(1..=cap.min(200)),
    };
    (t.min(cap).max(1), e)
}

fn sigmoid_like<R: Rng + ?Sized>(rng: &mut R) -> f32 {
    // A random f32 in (0, 1), also near the ends.
    match rng.random_range(0..8) {
        0 => 1.0 - rng.random_range(1..16) as f32 * f32::EPSILON / 2.0,
        1 => wide(rng, -30, -1).abs(),
        _ => (rng.random::<u32>() >> 8) as f32 / 16_777_216.0,
    }
}

/// The kinds of row the generator writes.
#[derive(Clone, Copy, Debug)]
enum RowKind {
    Sigmoid,
    Signed,
    Wide,
    Subnormal,
    Zeros,
    Saturated,
    ClampTie,
    TopkTie,
    AllEqual,
    NearTie,
    Cancel,
    NonFinite,
    LaneTies,
}

const ROW_KINDS: [RowKind; 13] = [
    RowKind::Sigmoid,
    RowKind::Signed,
    RowKind::Wide,
    RowKind::Subnormal,
    RowKind::Zeros,
    RowKind::Saturated,
    RowKind::ClampTie,
    RowKind::TopkTie,
    RowKind::AllEqual,
    RowKind::NearTie,
    RowKind::Cancel,
    RowKind::NonFinite,
    RowKind::LaneTies,
];

fn generate_row<R: Rng + ?Sized>(rng: &mut R, kind: RowKind, e: usize, k: usize) -> Vec<f32> {
    let mut row: Vec<f32> = (0..e).map(|_| sigmoid_like(rng)).collect();
    match kind {
        RowKind::Sigmoid => {}
        RowKind::Signed => row.iter_mut().for_each(|x| *x = (*x - 0.5) * 4.0),
        RowKind::Wide => row.iter_mut().for_each(|x| *x = wide(rng, -149, 100)),
        RowKind::Subnormal => row.iter_mut().for_each(|x| {
            *x = match rng.random_range(0..3) {
                0 => f32::from_bits(rng.random_range(1..0x0080_0000)) * if rng.random_bool(0.3) { -1.0 } else { 1.0 },
                1 => wide(rng, -126, -100),
                _ => *x,
            }
        }),
        RowKind::Zeros => row.iter_mut().for_each(|x| {
            *x = match rng.random_range(0..3) {
                0 => 0.0,
                1 => -0.0,
                _ => *x,
            }
        }),
        RowKind::Saturated => {
            row.iter_mut().for_each(|x| *x = pick(rng, &[0.0, 1.0, 1.0 - f32::EPSILON / 2.0, f32::EPSILON / 2.0, *x]))
        }
        RowKind::ClampTie => {
            // L1 norm exactly eps or one ulp off, in every summation order:
            // at most two non-zero magnitudes a + b = target, both exact.
            let target = pick(rng, &[EPS, EPS, f32::from_bits(EPS.to_bits() - 1), f32::from_bits(EPS.to_bits() + 1)]);
            row.iter_mut().for_each(|x| *x = if rng.random_bool(0.5) { 0.0 } else { -0.0 });
            let i = rng.random_range(0..e);
            let split = e > 1 && rng.random_bool(0.6);
            let b = if split { f32::from_bits(rng.random_range(1..(target.to_bits() - 0x0400_0000))) } else { 0.0 };
            let b = if target - b + b == target && target - b > 0.0 { b } else { 0.0 };
            let sign = |r: &mut R| if r.random_bool(0.5) { -1.0f32 } else { 1.0 };
            row[i] = (target - b) * sign(rng);
            if b != 0.0 {
                let j = (i + rng.random_range(1..e)) % e;
                row[j] = b * sign(rng);
            }
        }
        RowKind::TopkTie | RowKind::NearTie => {
            // The (k+1)-th largest made equal to (or one ulp below) the k-th.
            if k < e {
                let mut idx: Vec<usize> = (0..e).collect();
                idx.sort_by(|&a, &b| row[b].total_cmp(&row[a]));
                let kth = row[idx[k - 1]];
                let tie = if matches!(kind, RowKind::TopkTie) { kth } else { f32::from_bits(kth.to_bits() - 1) };
                // Put the tied value on either side of the k-th index.
                let j = idx[rng.random_range(k..e)];
                row[j] = tie;
            } else if e > 1 {
                let v = row[0];
                row[1] = v;
            }
        }
        RowKind::LaneTies => {
            // A floor everywhere (more than 32 elements at the k-th largest
            // lane maximum: the warp top-k of the GPU profile falls back to
            // k rounds of arg-max), and in one lane (indices 32 apart) the
            // row's best and two equal runners-up: once the best is taken,
            // that lane's rescan must keep the lower index of the tie.
            // floor < 0.125 < tie < 0.375 < 0.5 <= best, whatever the draws round to.
            row.fill(sigmoid_like(rng) * 0.125);
            // A lane with three elements or more (E > 64).
            let lane = rng.random_range(0..e.saturating_sub(64).clamp(1, 32));
            let mut slots: Vec<usize> = (lane..e).step_by(32).collect();
            if slots.len() >= 3 {
                for i in 0..3 {
                    let j = rng.random_range(i..slots.len());
                    slots.swap(i, j);
                }
                let tie = 0.25 + sigmoid_like(rng) * 0.0625;
                row[slots[0]] = 0.5 + sigmoid_like(rng) * 0.25;
                row[slots[1]] = tie;
                row[slots[2]] = tie;
            }
        }
        RowKind::AllEqual => {
            let v = pick(rng, &[row[0], 0.0, 1.0, 0.125]);
            row.fill(v);
        }
        RowKind::Cancel => {
            // Large terms that cancel, plus small ones; sometimes the row sum
            // is exactly -eps2 so that D_t = sum + eps2 is zero.
            if e >= 2 {
                let big = wide(rng, 10, 60).abs();
                let i = rng.random_range(0..e);
                let j = (i + rng.random_range(1..e)) % e;
                row[i] = big;
                row[j] = -big;
                if rng.random_bool(0.3) {
                    row.iter_mut().enumerate().filter(|(n, _)| *n != i && *n != j).for_each(|(_, x)| *x = 0.0);
                    if e >= 3 {
                        let m = (0..e).find(|n| *n != i && *n != j).unwrap_or(0);
                        row[m] = -oracles::vocab::EPS2;
                    }
                }
            } else {
                row[0] = -0.0;
            }
        }
        RowKind::NonFinite => {
            for _ in 0..rng.random_range(1..=2) {
                let i = rng.random_range(0..e);
                row[i] = pick(rng, &[f32::NAN, f32::INFINITY, f32::NEG_INFINITY, f32::from_bits(0xffc0_1234)]);
            }
        }
    }
    row
}

/// One adversarial case, from any RNG (proptest's, or a fuzzer's bytes
/// through proptest's pass-through RNG).
pub fn generate<R: Rng + ?Sized>(rng: &mut R, cfg: &GenConfig) -> SeqwiseCase {
    let (t, e) = generate_shape(rng, cfg);
    // Small k, k = E, any k, and k around the sizes where top-k kernels
    // change algorithm (a warp's lanes, a register budget).
    let k = match rng.random_range(0..8) {
        0 => 1,
        1 => e,
        2 => rng.random_range(1..=e),
        3 => pick(rng, &[9, 15, 16, 17, 31, 32, 33, e / 2, e.saturating_sub(1)]).clamp(1, e),
        _ => pick(rng, &[1, 2, 6, 8]).min(e),
    };
    let provided = rng.random_bool(0.5);
    // Each case mixes a few row kinds so that one case meets several classes.
    let kinds: Vec<RowKind> = (0..rng.random_range(1..=3)).map(|_| pick(rng, &ROW_KINDS)).collect();
    let mut scores = Vec::with_capacity(t * e);
    for _ in 0..t {
        let kind = if rng.random_bool(0.25) { RowKind::Sigmoid } else { pick(rng, &kinds) };
        scores.extend(generate_row(rng, kind, e, k));
    }
    let objective = if provided {
        let density = pick(rng, &[0.0, 0.1, 0.5, 1.0, k as f64 / e as f64]);
        Objective::ProvidedMap { map: (0..t * e).map(|_| rng.random_bool(density)).collect() }
    } else {
        Objective::UnbiasedTopK { k }
    };
    let padding = padding_flags(rng, t);
    poison_padding(rng, &mut scores, e, padding.as_deref());
    let layout = layout(rng, e);
    let g = match rng.random_range(0..10) {
        // Both zeros: g = -0.0 is a valid seed, and its sign reaches the
        // backward's zero terms.
        0 => pick(rng, &[0.0, -0.0]),
        1 => pick(rng, &[1.0, -1.0]),
        2 => wide(rng, -149, -101),
        3 => wide(rng, 101, 127),
        _ => wide(rng, -3, 3),
    };
    SeqwiseCase {
        t,
        e,
        layout,
        scores,
        padding,
        objective,
        clamp_tie: if rng.random_bool(0.5) { ClampTie::Strict } else { ClampTie::Inclusive },
        g,
    }
}

/// The classes a (valid) case exercises, read off its values.
pub fn classify(case: &SeqwiseCase) -> BTreeSet<Class> {
    let mut c = BTreeSet::new();
    let (t, e) = (case.t, case.e);
    let mut add = |cond: bool, class: Class| {
        if cond {
            c.insert(class);
        }
    };
    add(t <= 3, Class::TinyT);
    add(edge_t(usize::MAX).contains(&t) && t > 3, Class::TEdge);
    add(e % 2 == 1, Class::OddE);
    add(is_prime(e), Class::PrimeE);
    add(e % 4 != 0, Class::EUnaligned);
    add(case.layout.offset != 0, Class::Offset);
    add(case.layout.row_stride > e, Class::RowStride);
    add(case.g == 0.0, Class::GZero);
    add(case.g.abs() == 1.0, Class::GUnit);
    add(case.g != 0.0 && case.g.abs() < 2f32.powi(-100), Class::GTiny);
    add(case.g.abs() > 2f32.powi(100), Class::GHuge);
    add(case.clamp_tie == ClampTie::Strict, Class::Strict);
    add(case.clamp_tie == ClampTie::Inclusive, Class::Inclusive);
    let padding: Vec<bool> = (0..t).map(|r| case.is_padding(r)).collect();
    add(padding.iter().all(|&p| p), Class::AllPadding);
    let k = match &case.objective {
        Objective::ProvidedMap { .. } => {
            add(true, Class::ProvidedMap);
            None
        }
        Objective::UnbiasedTopK { k } => {
            add(true, Class::UnbiasedTopK);
            add(*k == 1, Class::KOne);
            add(*k == e, Class::KAll);
            add(8 < *k && *k < e, Class::KMid);
            Some(*k)
        }
    };
    let profiles = SeqwiseProfile::all();
    for (r, &pad) in padding.iter().enumerate() {
        let row = case.row(r);
        if pad {
            add(row.iter().any(|x| !x.is_finite()), Class::PoisonedPadding);
            continue;
        }
        add(row.iter().any(|&x| x < 0.0), Class::Signed);
        add(row.iter().any(|&x| x != 0.0 && x.abs() < 2f32.powi(-100)), Class::Subnormal);
        add(row.iter().any(|&x| x == 0.0 && x.is_sign_negative()), Class::SignedZero);
        add(row.iter().any(|&x| x == 1.0 || x == 1.0 - f32::EPSILON / 2.0), Class::Saturated);
        add(row.iter().any(|x| !x.is_finite()), Class::NonFiniteValid);
        let abs_sum: f64 = row.iter().map(|x| x.abs() as f64).sum();
        let sum: f64 = row.iter().map(|&x| x as f64).sum();
        add(abs_sum.is_finite() && abs_sum > 0.0 && sum.abs() < abs_sum / 1024.0, Class::Cancel);
        match k {
            None => {
                let abs: Vec<f32> = row.iter().map(|x| x.abs()).collect();
                let near_eps = |n: f32| n.is_finite() && (n.to_bits() as i64 - EPS.to_bits() as i64).abs() <= 1;
                add(profiles.iter().any(|p| near_eps(p.row.reduce(&abs))), Class::ClampTie);
            }
            Some(k) => {
                let mut sorted: Vec<f32> = row.to_vec();
                sorted.sort_by(|a, b| b.total_cmp(a));
                let all_equal = row.iter().all(|&x| x == row[0]) && e > 1;
                if k < e {
                    let (a, b) = (sorted[k - 1], sorted[k]);
                    add(a == b || all_equal, Class::TopkTie);
                    add(
                        a.is_finite()
                            && b.is_finite()
                            && a != b
                            && (a.to_bits() as i64 - b.to_bits() as i64).abs() == 1,
                        Class::NearTie,
                    );
                } else {
                    add(all_equal, Class::TopkTie);
                }
            }
        }
    }
    c
}

/// Strictly smaller or simpler variants of a case, most aggressive first:
/// halve and drop rows, drop experts, drop padding and layout, then simplify
/// values. Every candidate is valid.
pub fn shrink_candidates(case: &SeqwiseCase) -> Vec<SeqwiseCase> {
    let mut out = Vec::new();
    let (t, e) = (case.t, case.e);
    // Rows: keep the first or second half, then drop each row.
    if t > 1 {
        out.push(keep_rows(case, &(0..t / 2).collect::<Vec<_>>()));
        out.push(keep_rows(case, &(t / 2..t).collect::<Vec<_>>()));
        for r in 0..t.min(64) {
            out.push(keep_rows(case, &[r]));
        }
        for r in 0..t.min(256) {
            out.push(keep_rows(case, &(0..t).filter(|&x| x != r).collect::<Vec<_>>()));
        }
    }
    // Experts: halves, small windows of experts, then each one. Windows get
    // past local minima where dropping any single expert changes C, hence
    // every f_e, and hides the failure.
    if e > 1 {
        out.push(keep_experts(case, &(0..e / 2).collect::<Vec<_>>()));
        out.push(keep_experts(case, &(e / 2..e).collect::<Vec<_>>()));
        for w in [1, 2, 3, 4, 8, 16] {
            if w * 2 <= e {
                for start in (0..=e - w).step_by(w.max(1)) {
                    out.push(keep_experts(case, &(start..start + w).collect::<Vec<_>>()));
                }
            }
        }
        for x in 0..e {
            out.push(keep_experts(case, &(0..e).filter(|&y| y != x).collect::<Vec<_>>()));
        }
    }
    // Layout, padding, objective details, g.
    if case.layout != (Layout { offset: 0, row_stride: e }) {
        let mut c = case.clone();
        c.layout = Layout { offset: 0, row_stride: e };
        out.push(c);
    }
    if case.padding.is_some() {
        let mut c = case.clone();
        c.padding = None;
        out.push(c);
        if let Some(p) = &case.padding {
            let keep: Vec<usize> = (0..t).filter(|&r| !p[r]).collect();
            if !keep.is_empty() && keep.len() < t {
                out.push(keep_rows(case, &keep));
            }
        }
    }
    if let Objective::UnbiasedTopK { k } = case.objective {
        if k > 1 {
            let mut c = case.clone();
            c.objective = Objective::UnbiasedTopK { k: k - 1 };
            out.push(c);
        }
    }
    if case.clamp_tie != ClampTie::Strict {
        let mut c = case.clone();
        c.clamp_tie = ClampTie::Strict;
        out.push(c);
    }
    for g in [1.0f32, 0.5, 2.0] {
        if case.g.to_bits() != g.to_bits() && simpler(g, case.g) {
            let mut c = case.clone();
            c.g = g;
            out.push(c);
        }
    }
    // The map: clear one selected entry (fewer counts, a simpler map).
    if let Objective::ProvidedMap { map } = &case.objective {
        for i in map.iter().enumerate().filter(|(_, &m)| m).map(|(i, _)| i).take(256) {
            let mut m = map.clone();
            m[i] = false;
            let mut c = case.clone();
            c.objective = Objective::ProvidedMap { map: m };
            out.push(c);
        }
    }
    // Values: each toward 0, 1, 0.5 and shorter mantissas.
    out.extend(each_value(case, |c| &mut c.scores, 256));
    out
}

fn keep_rows(case: &SeqwiseCase, rows: &[usize]) -> SeqwiseCase {
    let e = case.e;
    let mut c = case.clone();
    c.t = rows.len();
    c.scores = rows.iter().flat_map(|&r| case.row(r).to_vec()).collect();
    c.padding = case.padding.as_ref().map(|p| rows.iter().map(|&r| p[r]).collect());
    if let Objective::ProvidedMap { map } = &case.objective {
        c.objective =
            Objective::ProvidedMap { map: rows.iter().flat_map(|&r| map[r * e..(r + 1) * e].to_vec()).collect() };
    }
    c
}

fn keep_experts(case: &SeqwiseCase, experts: &[usize]) -> SeqwiseCase {
    let e2 = experts.len();
    let mut c = case.clone();
    c.e = e2;
    c.scores = (0..case.t).flat_map(|r| experts.iter().map(move |&x| case.scores[r * case.e + x])).collect();
    c.layout.row_stride = c.layout.row_stride - case.e + e2;
    c.objective = match &case.objective {
        Objective::ProvidedMap { map } => Objective::ProvidedMap {
            map: (0..case.t).flat_map(|r| experts.iter().map(move |&x| map[r * case.e + x])).collect(),
        },
        Objective::UnbiasedTopK { k } => Objective::UnbiasedTopK { k: (*k).min(e2) },
    };
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::common::testing::assert_every_class_reached;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

    #[test]
    fn generated_cases_are_valid() {
        let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
        let cfg = GenConfig::default();
        for _ in 0..2000 {
            let c = generate(&mut rng, &cfg);
            assert_eq!(c.validate(), Ok(()), "{c:?}");
            assert!(c.t * c.e <= cfg.max_te);
            for s in shrink_candidates(&c) {
                assert_eq!(s.validate(), Ok(()));
            }
        }
    }

    #[test]
    fn reference_shapes_cross_the_finalize_batches_within_their_bound() {
        let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
        let mut batches = BTreeSet::new();
        let mut widest = 0;
        for _ in 0..400 {
            let (t, e) = generate_reference_shape(&mut rng);
            assert!(t >= 1 && (1..=1024).contains(&e) && t * e <= REFERENCE_MAX_TE, "{t} x {e}");
            batches.insert(t.div_ceil(FINALIZE_BATCH_TOKENS));
            widest = widest.max(e);
        }
        // One to five batches of chunk partials at least (4 batches + 64
        // tokens; E = 8 takes T to 2^17), and E past the forward's block.
        assert!((1..=5).all(|b| batches.contains(&b)), "{batches:?}");
        assert_eq!(widest, 1024);
    }

    #[test]
    fn lane_ties_put_a_tie_below_the_best_of_one_lane() {
        let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
        for e in [65, 96, 128, 257, 1024] {
            for _ in 0..50 {
                let row = generate_row(&mut rng, RowKind::LaneTies, e, 2);
                let floor = row.iter().copied().fold(f32::INFINITY, f32::min);
                let above: Vec<usize> = (0..e).filter(|&i| row[i] > floor).collect();
                assert_eq!(above.len(), 3, "{row:?}");
                assert!(above.iter().all(|i| i % 32 == above[0] % 32), "{above:?}");
                let mut v: Vec<f32> = above.iter().map(|&i| row[i]).collect();
                v.sort_by(f32::total_cmp);
                assert!(v[0] == v[1] && v[1] < v[2], "{v:?}");
            }
        }
    }

    #[test]
    fn every_class_is_reached() {
        let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
        assert_every_class_reached(&Class::ALL, 3000, || generate(&mut rng, &GenConfig::default()), classify);
    }

    #[test]
    fn shrinking_reaches_a_minimal_case() {
        // A property that fails whenever a row holds a value > 0.7: the
        // minimal failing case is 1 x 1 with the value 1.0.
        let mut runner = TestRunner::new(Config { failure_persistence: None, ..Config::default() });
        let strategy = crate::shrink::CaseStrategy::<oracles::op::seqwise_loss::SeqwiseLoss>::new(GenConfig::default());
        let r = runner.run(&strategy, |c| {
            proptest::prop_assert!(c.scores.iter().all(|&x| x.is_nan() || x <= 0.7));
            Ok(())
        });
        match r {
            Err(proptest::test_runner::TestError::Fail(_, c)) => {
                assert_eq!((c.t, c.e), (1, 1), "{c:?}");
                assert_eq!(c.scores, vec![1.0]);
            }
            other => panic!("expected a failure, got {other:?}"),
        }
    }
}
