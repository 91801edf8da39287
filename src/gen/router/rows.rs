//! The expert bias and the rows of logits, one row kind at a time: gate-like,
//! wide, saturated, tiny scores, ties and near ties aimed at u (inside a
//! group, between group scores, at the k-th expert), all equal, the fused
//! loss's clamp tie, non-finite values.

use super::choice::{choice, edges, from_key, key, logit_for_u, step, with_u, Routing};
use crate::gen::common::{pick, wide};
use oracles::profile_oracle::router::{scores, Choice};
use proptest::prelude::{Rng, RngExt};

/// The expert bias: zero, trained-size, large, repeated per group place, a
/// few repeated values, or extreme (huge or tiny).
pub(super) fn generate_bias<R: Rng + ?Sized>(rng: &mut R, e: usize, gs: usize) -> Vec<f32> {
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
pub(super) enum RowKind {
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

pub(super) const ROW_KINDS: [RowKind; 13] = [
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

pub(super) fn generate_row<R: Rng + ?Sized>(rng: &mut R, kind: RowKind, r: Routing, bias: &[f32]) -> Vec<f32> {
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
