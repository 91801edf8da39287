//! Shrinking: strictly smaller or simpler variants of a case, every one valid.

use super::choice::{score, simplest_logit_for_u};
use crate::gen::common::{each_distinct, each_value, simpler, simplifications, toward, Field};
use oracles::case::router::{FusedLoss, RouterCase};
use oracles::case::Layout;
use oracles::vocab::ClampTie;

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
    let (logits, bias, gw): (Field<RouterCase>, Field<RouterCase>, Field<RouterCase>) =
        (|c| &mut c.logits, |c| &mut c.bias, |c| &mut c.gw);
    out.extend(toward(case, bias, 0.0));
    out.extend(toward(case, logits, 0.0));
    for y in [0.0, 1.0] {
        out.extend(toward(case, gw, y));
    }
    out.extend(each_distinct(case, logits, 64));
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
    for field in [logits, bias, gw] {
        out.extend(each_value(case, field, 256));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::common::complexity;
    use crate::gen::router::choice::{choice, logit_for_u, Routing};
    use crate::gen::router::{classify, generate, Class};
    use crate::gen::GenConfig;
    use oracles::profile_oracle::router::scores;
    use proptest::test_runner::{RngAlgorithm, TestRng};

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

    /// The one shrinker, greedy, with no budget.
    fn shrink(case: &RouterCase, fails: impl Fn(&RouterCase) -> bool) -> RouterCase {
        crate::shrink::shrink::<oracles::op::router::Router>(case, fails, usize::MAX)
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
}
