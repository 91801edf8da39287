//! The router's arithmetic as far as choosing goes: s, u and the choice
//! (the profile oracle's own), f32 steps, and the searches for a logit
//! whose u is a given f32 (ties are aimed at u, and shrinking keeps u).

use oracles::profile_oracle::router::{choose, sigmoid, Choice, Depth};
use oracles::vocab::EPS;
use std::sync::OnceLock;

/// s of one logit, the profile oracle's (f32).
pub(super) fn score(x: f32) -> f32 {
    sigmoid::<f32>(x)
}

/// 1 - 2^-23 (1 - ulp(1)): the largest s below 1 that the router computes.
/// 1 - 2^-24, the largest f32 below 1, is never an s: 1 + exp(-x) rounds to
/// 1 (s = 1) or to at least 1 + 2^-23, whose reciprocal rounds to 1 - 2^-23.
pub const ONE_MINUS_ULP: f32 = 1.0 - f32::EPSILON;

/// An integer key that orders the f32s as numbers, one apart for adjacent
/// values (-0.0 and +0.0 share the key 0). Finite or infinite x only.
pub(super) fn key(x: f32) -> i64 {
    let mag = (x.to_bits() & 0x7fff_ffff) as i64;
    if x.is_sign_negative() {
        -mag
    } else {
        mag
    }
}

pub(super) fn from_key(k: i64) -> f32 {
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
pub(super) fn step(x: f32, d: i64) -> f32 {
    from_key((key(x) + d).clamp(-MAX_KEY, MAX_KEY))
}

/// a and b are finite, different, and adjacent f32s.
pub(super) fn one_ulp_apart(a: f32, b: f32) -> bool {
    a.is_finite() && b.is_finite() && a != b && (key(a) - key(b)).abs() == 1
}

/// a and b are equal numbers (not NaN; -0.0 == +0.0).
pub(super) fn tied(a: f32, b: f32) -> bool {
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
pub(super) fn logit_for_u(target: f32, b: f32) -> Option<f32> {
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
pub(super) fn simplest_logit_for_u(target: f32, b: f32) -> Option<f32> {
    let lo = logit_for_u(target, b)?;
    let u = |k: i64| score(from_key(k)) + b;
    let hi = lower_bound(key(lo), MAX_KEY, |k| u(k) > target).map_or(MAX_KEY, |k| k - 1);
    Some(simplest_in(lo, from_key(hi)))
}

/// Logits at the edges of s, found once by search (every value is checked
/// by the `edges_are_exact` test).
pub(super) struct Edges {
    /// The largest x with s(x) = +0.0 (every x at most this saturates to 0).
    pub(super) zero_max: f32,
    /// The smallest x with s(x) = 1.
    pub(super) one_min: f32,
    /// The x with s(x) = 1 - 2^-23: lo..=hi.
    pub(super) one_minus_ulp: (f32, f32),
    /// (x1, x2): s(x1) alone, or fl(s(x1) + s(x2)), is eps or one ulp from
    /// it. With every other score exactly 0, every order of the loss's row
    /// norm gives that value.
    pub(super) clamp: Vec<(f32, Option<f32>)>,
}

pub(super) fn edges() -> &'static Edges {
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
pub(super) fn choice(s: &[f32], bias: &[f32], r: Routing) -> Choice<f32> {
    choose(s, bias, r.groups, r.l, r.k, Depth::Full)
}

/// (expert, u) of `experts`.
pub(super) fn with_u(u: &[f32], experts: &[usize]) -> Vec<(usize, f32)> {
    experts.iter().map(|&e| (e, u[e])).collect()
}

/// The shape of the routing, for row generation.
#[derive(Clone, Copy)]
pub(super) struct Routing {
    pub(super) e: usize,
    pub(super) groups: usize,
    pub(super) l: usize,
    pub(super) k: usize,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::common::simpler;

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
}
