//! `router` forward and backward, exactly as docs/ops/router.md associates each
//! formula, with every sum in the order its profile names. Written once over
//! [`Num`]: on `f32` the profile oracle's bits, on [`crate::num::Bounded`]
//! their rigorous bound, on [`crate::mpfr::Exact`] the exact values.
//!
//! The backward needs the forward's scores and selection: it recomputes them
//! (the oracle is a pure function of the case, and the recomputation is
//! bit-identical by construction).

use super::seqwise_loss::{frequencies_of, l1_denominator, row_gradient, Decisions};
use crate::case::router::{RouterBackward, RouterCase, RouterError, RouterForward};
use crate::num::Num;
use crate::op::Run;
use crate::padding::{masked, PaddingRule};
use crate::profile::router::RouterProfile;
use crate::vocab::EPS2;
use std::cmp::Ordering;

/// The discrete decisions of `router`, per token: what the profile decided on
/// its computed values, and what the exact oracle is made to take
/// (docs/ops/README.md#discrete-decisions).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RouterDecisions {
    /// T x k: each token's chosen experts, ascending (the group choice is
    /// not kept: only the experts it lets through reach an output).
    pub ids: Vec<u32>,
    /// The fused loss's clamp and gate of each row: present exactly in a
    /// backward with a fused loss (padding rows hold `true, true`, unread).
    pub loss: Option<Decisions>,
}

/// Checks the case and the profile: everything below may index freely.
pub fn validate(case: &RouterCase, profile: &RouterProfile) -> Result<(), RouterError> {
    case.validate()?;
    profile.validate().map_err(RouterError::Profile)
}

/// Checks imposed decisions against a validated case: k distinct experts
/// below E per token, ascending; loss decisions for every row exactly when
/// this is a backward (`backward`) of a case with a fused loss.
fn check_decisions(case: &RouterCase, imposed: Option<&RouterDecisions>, backward: bool) -> Result<(), RouterError> {
    let Some(d) = imposed else { return Ok(()) };
    let bad = |why: String| Err(RouterError::Decisions(why));
    if d.ids.len() != case.t * case.k {
        return bad(format!("{} ids, T x k = {}", d.ids.len(), case.t * case.k));
    }
    for (t, row) in d.ids.chunks(case.k).enumerate() {
        let ascending = row.windows(2).all(|w| w[0] < w[1]);
        if !ascending || row.iter().any(|&i| i as usize >= case.e) {
            return bad(format!("token {t}: ids {row:?} are not k distinct experts below E = {} ascending", case.e));
        }
    }
    let wanted = backward && case.loss.is_some();
    match &d.loss {
        None if wanted => bad("a backward with a fused loss needs its clamp and gate decisions".into()),
        Some(_) if !wanted => bad("clamp and gate decisions for a fused loss this run does not have".into()),
        Some(l) if l.keep_norm.len() != case.t || l.gate.len() != case.t => {
            bad(format!("loss decisions cover {} rows, T = {}", l.keep_norm.len().min(l.gate.len()), case.t))
        }
        _ => Ok(()),
    }
}

/// The selection order (docs/ops/router.md#selection-order), for groups and
/// experts alike: NaN above every number (NaNs among themselves by lower
/// index), then the larger value first, equal values (-0.0 == +0.0) to the
/// lower index. A total order, so sorting by it never panics.
fn selection_order<N: Num>(a: (usize, &N), b: (usize, &N)) -> Ordering {
    let is_nan = |x: &N| x.cmp_num(x).is_none();
    match (is_nan(a.1), is_nan(b.1)) {
        (true, true) => a.0.cmp(&b.0),
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        (false, false) => b.1.cmp_num(a.1).unwrap_or(Ordering::Equal).then(a.0.cmp(&b.0)),
    }
}

/// The first `m` of `candidates` (indices into `values`) in the selection
/// order, first the largest (all of them when `m` is at least their count).
pub fn ranked<N: Num>(values: &[N], candidates: impl Iterator<Item = usize>, m: usize) -> Vec<usize> {
    let mut idx: Vec<usize> = candidates.collect();
    let order = |a: &usize, b: &usize| selection_order((*a, &values[*a]), (*b, &values[*b]));
    if m < idx.len() {
        // The m best in front (in some order), in linear time: k is 8 of 128
        // candidates in DeepSeek-V3.
        idx.select_nth_unstable_by(m, order);
        idx.truncate(m);
    }
    idx.sort_by(order);
    idx
}

/// How far [`choose`] ranks: as far as the choice needs (the oracle's
/// runs), or every group and every candidate expert (what a generator aims
/// ties at and classifies by). The first places are the same either way:
/// the selection order is total.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Depth {
    /// A group's two best experts, the L best groups, the k best experts.
    Chosen,
    /// Every expert of a group, every group, every expert of the kept groups.
    Full,
}

/// One row's choice (docs/ops/router.md#forward, steps 2-5), with the
/// rankings it was made from.
#[derive(Clone, Debug, PartialEq)]
pub struct Choice<N> {
    /// u = s + bias, one per expert.
    pub u: Vec<N>,
    /// Each group's experts, best u first: the two that make its score
    /// (all of them at [`Depth::Full`]).
    pub members: Vec<Vec<usize>>,
    /// Each group's score, by group: the sum of its two largest u, the
    /// larger first.
    pub group_scores: Vec<N>,
    /// The groups, best score first: the L kept (all G at [`Depth::Full`]).
    pub groups: Vec<usize>,
    /// The kept groups' experts, best u first: the k chosen (all of them at
    /// [`Depth::Full`]).
    pub experts: Vec<usize>,
    /// The k chosen experts, ascending.
    pub ids: Vec<u32>,
}

/// Steps 2-5 of the forward on one row of scores `s`: u = s + bias, group
/// scores from the two largest u (larger first), the `topk_groups` best
/// groups of `groups`, the `k` best u among their experts.
pub fn choose<N: Num>(s: &[N], bias: &[f32], groups: usize, topk_groups: usize, k: usize, depth: Depth) -> Choice<N> {
    let u: Vec<N> = s.iter().zip(bias).map(|(s, &b)| s.add(&N::input(b))).collect();
    let size = u.len() / groups;
    let full = depth == Depth::Full;
    let members: Vec<Vec<usize>> =
        (0..groups).map(|g| ranked(&u, g * size..(g + 1) * size, if full { size } else { 2 })).collect();
    let group_scores: Vec<N> = members.iter().map(|top| u[top[0]].add(&u[top[1]])).collect();
    let ranked_groups = ranked(&group_scores, 0..groups, if full { groups } else { topk_groups });
    let kept = ranked_groups[..topk_groups].iter().flat_map(|&g| g * size..(g + 1) * size);
    let experts = ranked(&u, kept, if full { topk_groups * size } else { k });
    let mut ids: Vec<u32> = experts[..k].iter().map(|&i| i as u32).collect();
    ids.sort_unstable();
    Choice { u, members, group_scores, groups: ranked_groups, experts, ids }
}

/// The chosen experts of one row of scores, ascending.
fn select<N: Num>(case: &RouterCase, s: &[N]) -> Vec<u32> {
    choose(s, &case.bias, case.groups, case.topk_groups, case.k, Depth::Chosen).ids
}

/// Step 1: s = 1 / (1 + exp(-x)), each operation rounded.
pub fn sigmoid<N: Num>(x: f32) -> N {
    let one = N::input(1.0);
    one.div(&one.add(&N::input(x).neg().exp()))
}

/// Step 1 on a row of logits.
pub fn scores<N: Num>(logits: &[f32]) -> Vec<N> {
    logits.iter().map(|&x| sigmoid(x)).collect()
}

/// One token's scores and chosen experts: the imposed ones when given, with
/// whether this value type's own choice differs (a near tie).
struct RoutedRow<N> {
    s: Vec<N>,
    ids: Vec<u32>,
    near: bool,
}

fn route_row<N: Num>(case: &RouterCase, t: usize, imposed: Option<&RouterDecisions>) -> RoutedRow<N> {
    let s: Vec<N> = scores(case.row(t));
    let own = select(case, &s);
    match imposed {
        Some(d) => {
            let ids = d.ids[t * case.k..(t + 1) * case.k].to_vec();
            let near = ids != own;
            RoutedRow { s, ids, near }
        }
        None => RoutedRow { s, ids: own, near: false },
    }
}

/// D = (sum of the gathered scores in the profile's `norm` order) + 1e-20.
fn route_denominator<N: Num>(w0: &[N], profile: &RouterProfile) -> N {
    profile.norm.reduce(w0).add(&N::input(EPS2))
}

/// The forward on any value type. `imposed` replaces the selections this
/// value type would make (the exact oracle takes the profile's); its
/// `loss` must be `None` (the forward takes no loss decision).
pub fn forward_on<N: Num>(
    case: &RouterCase,
    profile: &RouterProfile,
    imposed: Option<&RouterDecisions>,
) -> Result<Run<RouterForward<N>, RouterDecisions>, RouterError> {
    forward_under(case, profile, PaddingRule::Skip, imposed)
}

/// [`forward_on`] under padding rule `rule`: the same under both (padding
/// tokens are routed alike and counted by neither; the forward has no loss
/// output), so `rule` is unused.
pub fn forward_under<N: Num>(
    case: &RouterCase,
    profile: &RouterProfile,
    _rule: PaddingRule,
    imposed: Option<&RouterDecisions>,
) -> Result<Run<RouterForward<N>, RouterDecisions>, RouterError> {
    validate(case, profile)?;
    check_decisions(case, imposed, false)?;
    let (t_n, e_n, k) = (case.t, case.e, case.k);
    let scale = N::input(case.route_scale);
    let mut out = RouterForward {
        ids: Vec::with_capacity(t_n * k),
        weights: Vec::with_capacity(t_n * k),
        map: vec![false; t_n * e_n],
        counts: vec![0u32; e_n],
        scores: Vec::with_capacity(t_n * e_n),
    };
    let mut near_ties = 0;
    for t in 0..t_n {
        let row = route_row::<N>(case, t, imposed);
        near_ties += row.near as usize;
        let w0: Vec<N> = row.ids.iter().map(|&i| row.s[i as usize].clone()).collect();
        let d = case.route_norm.then(|| route_denominator(&w0, profile));
        for w in &w0 {
            let normed = match &d {
                Some(d) => w.div(d),
                None => w.clone(),
            };
            out.weights.push(normed.mul(&scale));
        }
        for &i in &row.ids {
            out.map[t * e_n + i as usize] = true;
            // Padding tokens are routed but never counted.
            if !case.is_padding(t) {
                out.counts[i as usize] += 1;
            }
        }
        out.ids.extend_from_slice(&row.ids);
        out.scores.extend(row.s);
    }
    let decisions = RouterDecisions { ids: out.ids.clone(), loss: None };
    Ok(Run { out, decisions, near_ties, contradicted: Vec::new() })
}

/// The route part of one token's backward, r_j for each chosen expert j:
/// with a_j = route_scale * gw_j, r_j = (a_j / D) + q where
/// q = sum_j -(a_j * ((w0_j / D) / D)) in the profile's `q` order
/// (route_norm), or r_j = a_j (no route_norm).
fn route_gradient<N: Num>(case: &RouterCase, profile: &RouterProfile, w0: &[N], gw: &[f32]) -> Vec<N> {
    let scale = N::input(case.route_scale);
    let a: Vec<N> = gw.iter().map(|&g| scale.mul(&N::input(g))).collect();
    if !case.route_norm {
        return a;
    }
    let d = route_denominator(w0, profile);
    let terms: Vec<N> = a.iter().zip(w0).map(|(a_j, w)| a_j.mul(&w.div(&d).div(&d)).neg()).collect();
    let q = profile.q.reduce(&terms);
    a.iter().map(|a_j| a_j.div(&d).add(&q)).collect()
}

/// The backward on any value type (see [`forward_on`] for `imposed`; with a
/// fused loss it must also hold each row's clamp and gate).
///
/// grad_te = (gs_te * (1 - s_te)) * s_te with gs_te = r_j + l_te for a
/// chosen expert (j its place in ids), l_te otherwise; l_te is the fused
/// `seqwise_loss` ProvidedMap gradient of s with this router's map and
/// padding (+0.0 on padding rows and without a fused loss).
pub fn backward_on<N: Num>(
    case: &RouterCase,
    profile: &RouterProfile,
    imposed: Option<&RouterDecisions>,
) -> Result<Run<RouterBackward<N>, RouterDecisions>, RouterError> {
    backward_under(case, profile, PaddingRule::Skip, imposed)
}

/// [`backward_on`] under padding rule `rule` (docs/padding.md). Under
/// [`PaddingRule::Mask`] a padding row's fused loss part l_te is computed
/// like a valid row's with a_e * 0.0 in place of a_e (the fused loss's
/// autograd through p_te * m_t); its route part is the same under both
/// rules (padding tokens are routed).
pub fn backward_under<N: Num>(
    case: &RouterCase,
    profile: &RouterProfile,
    rule: PaddingRule,
    imposed: Option<&RouterDecisions>,
) -> Result<Run<RouterBackward<N>, RouterDecisions>, RouterError> {
    validate(case, profile)?;
    check_decisions(case, imposed, true)?;
    let (t_n, e_n, k) = (case.t, case.e, case.k);
    let rows: Vec<RoutedRow<N>> = (0..t_n).map(|t| route_row(case, t, imposed)).collect();
    let mut near: Vec<bool> = rows.iter().map(|r| r.near).collect();

    // The fused loss's a_e = g * f_e, f_e from the counts of the valid rows.
    let loss_a: Option<Vec<N>> = case.loss.map(|loss| {
        let mut counts = vec![0u32; e_n];
        for (t, r) in rows.iter().enumerate() {
            if !case.is_padding(t) {
                r.ids.iter().for_each(|&i| counts[i as usize] += 1);
            }
        }
        let g = N::input(loss.g);
        frequencies_of::<N>(&counts).iter().map(|f| g.mul(f)).collect()
    });
    // The mask rule's a_e * 0.0, for padding rows.
    let loss_a_masked: Option<Vec<N>> = loss_a.as_ref().map(|a| a.iter().map(masked).collect());
    let mut loss_decisions = Decisions { keep_norm: vec![true; t_n], gate: vec![true; t_n] };

    let one = N::input(1.0);
    let mut grad = Vec::with_capacity(t_n * e_n);
    for (t, r) in rows.iter().enumerate() {
        let mut gs: Vec<N> = vec![N::zero(); e_n];
        if let (Some(loss), Some(a), Some(a_masked)) = (&case.loss, &loss_a, &loss_a_masked) {
            let padding = case.is_padding(t);
            if !padding || rule == PaddingRule::Mask {
                let a = if padding { a_masked } else { a };
                let imposed_row = imposed.and_then(|d| d.loss.as_ref()).map(|l| (l.keep_norm[t], l.gate[t]));
                let (d, keep, gate, differs) = l1_denominator(&r.s, &profile.loss, loss.clamp_tie, imposed_row);
                near[t] |= differs;
                loss_decisions.keep_norm[t] = keep;
                loss_decisions.gate[t] = gate;
                gs = row_gradient(&r.s, a, &d, Some(gate), &profile.loss);
            }
        }
        let w0: Vec<N> = r.ids.iter().map(|&i| r.s[i as usize].clone()).collect();
        let route = route_gradient(case, profile, &w0, &case.gw[t * k..(t + 1) * k]);
        for (&i, r_j) in r.ids.iter().zip(route) {
            // r_j + l_te, l_te = +0.0 without a fused loss (so -0.0 becomes +0.0).
            gs[i as usize] = r_j.add(&gs[i as usize]);
        }
        grad.extend(gs.iter().zip(&r.s).map(|(g, s)| g.mul(&one.add(&s.neg())).mul(s)));
    }
    let ids = rows.into_iter().flat_map(|r| r.ids).collect();
    let decisions = RouterDecisions { ids, loss: case.loss.map(|_| loss_decisions) };
    let near_ties = near.iter().filter(|&&n| n).count();
    Ok(Run { out: RouterBackward { grad }, decisions, near_ties, contradicted: Vec::new() })
}

#[cfg(test)]
mod tests {
    //! Hand-derived cases. Logits are 0 (s = 1/(1 + 1) = 0.5 exactly), 100
    //! (e^-100 is a subnormal f32 and 1 + it rounds to 1, so s = 1) and -100
    //! (e^100 overflows to inf, s = 1/inf = +0.0): every score is exact, and
    //! the bias sets the order.
    use super::*;
    use crate::case::router::FusedLoss;
    use crate::case::Layout;
    use crate::num::Bounded;
    use crate::op::router::Router;
    use crate::op::{backward, forward};
    use crate::vocab::ClampTie;

    fn case(e: usize, groups: usize, topk_groups: usize, k: usize, logits: Vec<f32>, bias: Vec<f32>) -> RouterCase {
        let t = logits.len() / e;
        RouterCase {
            t,
            e,
            layout: Layout::dense(e),
            logits,
            bias,
            groups,
            topk_groups,
            k,
            route_scale: 1.0,
            route_norm: true,
            padding: None,
            gw: vec![1.0; t * k],
            loss: None,
        }
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    /// 1/3 rounded to f32 (0.0101...b rounds up in its last place).
    const THIRD: u32 = 0x3eaa_aaab;

    #[test]
    fn groups_limit_the_choice_and_ties_go_low() {
        // u = 0.5 + bias = [4.5, -3.5 | 1.5, 1.5 | 2.5, 1.0 | 0.5, 0.5];
        // group scores (two largest u) = [1.0, 3.0, 3.5, 1.0].
        let bias = vec![4.0, -4.0, 1.0, 1.0, 2.0, 0.5, 0.0, 0.0];
        let mut c = case(8, 4, 2, 3, vec![0.0; 8], bias);
        for p in RouterProfile::all() {
            // L = 2 keeps groups 2 and 1: expert 0, the largest u, is out;
            // the top 3 of experts 2..=5 are 4, then 2 and 3 (tied, both in).
            let f = forward::<Router>(&c, &p).unwrap();
            assert_eq!(f.ids, vec![2, 3, 4], "{}", p.name);
            assert_eq!(f.counts, vec![0, 0, 1, 1, 1, 0, 0, 0]);
            assert_eq!(f.map, vec![false, false, true, true, true, false, false, false]);
            // D = 0.5 * 3 + 1e-20 = 1.5 (1e-20 is far below half an ulp);
            // w = 0.5 / 1.5 = fl(1/3), times route_scale 1.
            assert_eq!(bits(&f.weights), vec![THIRD; 3]);
            assert_eq!(bits(&f.scores), vec![0.5f32.to_bits(); 8]);
        }
        // L = 3: groups 2, 1, then 0 and 3 tie at 1.0 and 0, the lower, is
        // kept; top 3 of experts 0..=5: 0 (4.5), 4 (2.5), 2 (1.5, tied with
        // 3, lower index).
        c.topk_groups = 3;
        assert_eq!(forward::<Router>(&c, &RouterProfile::serial()).unwrap().ids, vec![0, 2, 4]);
        // L = G: no limit, the same three.
        c.topk_groups = 4;
        assert_eq!(forward::<Router>(&c, &RouterProfile::serial()).unwrap().ids, vec![0, 2, 4]);
    }

    #[test]
    fn nan_orders_above_every_number_and_nans_by_index() {
        // NaN logits at experts 5 (group 2) and 6 (group 3); expert 0 has a
        // huge bias. Groups 2 and 3 score NaN, above group 0's 1e30.
        let mut logits = vec![0.0; 8];
        logits[5] = f32::NAN;
        logits[6] = f32::NAN;
        let mut bias = vec![0.0; 8];
        bias[0] = 1e30;
        let mut c = case(8, 4, 1, 2, logits, bias);
        // L = 1: the NaN groups tie, group 2 (the lower) is kept; its
        // experts 4 (0.5) and 5 (NaN) are both chosen.
        let f = forward::<Router>(&c, &RouterProfile::serial()).unwrap();
        assert_eq!(f.ids, vec![4, 5]);
        // D = 0.5 + NaN is NaN: both weights NaN.
        assert!(f.weights.iter().all(|w| w.is_nan()));
        assert!(f.scores[5].is_nan() && f.scores[6].is_nan());
        // L = 2, k = 1: groups 2 and 3; NaN experts 5 and 6 tie, 5 wins.
        c.topk_groups = 2;
        c.k = 1;
        c.gw = vec![1.0];
        assert_eq!(forward::<Router>(&c, &RouterProfile::serial()).unwrap().ids, vec![5]);
        // L = 3, k = 3: groups 2, 3, then 0 (1e30 + 0.5 = 1e30, above group
        // 1's 1.0);
        // NaN 5, NaN 6, then expert 0.
        c.topk_groups = 3;
        c.k = 3;
        c.gw = vec![1.0; 3];
        assert_eq!(forward::<Router>(&c, &RouterProfile::serial()).unwrap().ids, vec![0, 5, 6]);
    }

    #[test]
    fn signed_zeros_are_equal_in_the_order() {
        assert_eq!(ranked(&[-0.0f32, 0.0], 0..2, 1), vec![0]);
        assert_eq!(ranked(&[0.0f32, -0.0], 0..2, 1), vec![0]);
        assert_eq!(ranked(&[1.0f32, f32::NAN, f32::INFINITY, f32::NAN], 0..4, 4), vec![1, 3, 2, 0]);
    }

    #[test]
    fn weights_with_and_without_route_norm() {
        // s = [1, 0.5 | 0.5, 0]; groups score 1.5 and 0.5, both kept;
        // top 2: expert 0 (1), then 1 (0.5, tied with 2, lower index).
        let mut c = case(4, 2, 2, 2, vec![100.0, 0.0, 0.0, -100.0], vec![0.0; 4]);
        c.route_scale = 2.5;
        let f = forward::<Router>(&c, &RouterProfile::serial()).unwrap();
        assert_eq!(bits(&f.scores), bits(&[1.0, 0.5, 0.5, 0.0]));
        assert_eq!(f.ids, vec![0, 1]);
        // D = 1.5; fl(1/1.5) = fl(2/3) = 0x3f2aaaab = 0.666666686534881591796875,
        // times 2.5 = 1.6666667163372039794921875: between 0x3fd55555
        // (1.66666662693...) and 0x3fd55556 (1.66666674613...), nearer the
        // latter. fl(0.5/1.5) = fl(1/3) = 0.3333333432674407958984375, times
        // 2.5 = 0.83333335816860198974609375: nearest 0x3f555556.
        assert_eq!(bits(&f.weights), vec![0x3fd5_5556, 0x3f55_5556]);
        // Without route_norm: w = s * 2.5.
        c.route_norm = false;
        let f = forward::<Router>(&c, &RouterProfile::serial()).unwrap();
        assert_eq!(f.weights, vec![2.5, 1.25]);
        // Every chosen score +0.0: D = 0 + 1e-20, w = 0 / 1e-20 = +0.0 (no NaN).
        let c = case(2, 1, 1, 2, vec![-100.0, -100.0], vec![0.0; 2]);
        assert_eq!(bits(&forward::<Router>(&c, &RouterProfile::serial()).unwrap().weights), vec![0, 0]);
    }

    #[test]
    fn route_gradient_by_hand() {
        // s = 0.5 everywhere, ids [0, 1] (all tied: the lowest two); D = 1.
        // gw = [1, 0.5], scale 2: a = [2, 1];
        // q = -(2 * ((0.5 / 1) / 1)) + -(1 * 0.5) = -1.5; r = [2 - 1.5, 1 - 1.5];
        // grad = (r * (1 - 0.5)) * 0.5 = r / 4; unchosen (+0.0 * 0.5) * 0.5 = +0.0.
        let mut c = case(4, 1, 1, 2, vec![0.0; 4], vec![0.0; 4]);
        c.route_scale = 2.0;
        c.gw = vec![1.0, 0.5];
        for p in RouterProfile::all() {
            let b = backward::<Router>(&c, &p).unwrap();
            assert_eq!(bits(&b.grad), bits(&[0.125, -0.125, 0.0, 0.0]), "{}", p.name);
        }
        // Without route_norm r = a = [2, 1]: grad = [0.5, 0.25, 0, 0].
        c.route_norm = false;
        assert_eq!(backward::<Router>(&c, &RouterProfile::serial()).unwrap().grad, vec![0.5, 0.25, 0.0, 0.0]);
        // gw = -0.0: r = 2 * -0.0 = -0.0, and gs = r + (+0.0) = +0.0: the
        // gradient is +0.0, not -0.0.
        c.gw = vec![-0.0, 1.0];
        assert_eq!(backward::<Router>(&c, &RouterProfile::serial()).unwrap().grad[0].to_bits(), 0);
    }

    #[test]
    fn fused_loss_gradient_by_hand() {
        // One token, s = [0.5, 0.5], k = 1: ids [0] (tie, lower index).
        // Loss: counts [1, 0], C = 1, f = [(1/1) * 2, 0] = [2, 0], g = 1:
        // a = [2, 0]; n = 1, d = 1, gate open; q_t = -(2 * 0.5) + -(0 * 0.5) = -1;
        // l = [2/1 + 1 * -1, 0/1 + 1 * -1] = [1, -1].
        // Route: D = 0.5 + 1e-20 = 0.5, a = 1, q = -(1 * ((0.5/0.5)/0.5)) = -2,
        // r = 1/0.5 - 2 = 0. gs = [0 + 1, -1]; grad = (gs * 0.5) * 0.5.
        let mut c = case(2, 1, 1, 1, vec![0.0, 0.0], vec![0.0; 2]);
        c.loss = Some(FusedLoss { clamp_tie: ClampTie::Strict, g: 1.0 });
        for p in RouterProfile::all() {
            assert_eq!(backward::<Router>(&c, &p).unwrap().grad, vec![0.25, -0.25], "{}", p.name);
        }
        // A second, padding token poisoned with NaN: routed (NaN first: ids
        // [0]), but not counted and given no loss part. Token 0 is unchanged;
        // token 1 gets its route part only: D = NaN, so a NaN for its chosen
        // expert, and (+0.0 * 0.5) * 0.5 = +0.0 for the other.
        c.t = 2;
        c.logits = vec![0.0, 0.0, f32::NAN, 0.0];
        c.padding = Some(vec![false, true]);
        c.gw = vec![1.0, 1.0];
        let f = forward::<Router>(&c, &RouterProfile::serial()).unwrap();
        assert_eq!(f.ids, vec![0, 0]);
        assert_eq!(f.counts, vec![1, 0]);
        let g = backward::<Router>(&c, &RouterProfile::serial()).unwrap().grad;
        assert_eq!(&g[..2], &[0.25, -0.25]);
        assert!(g[2].is_nan());
        assert_eq!(g[3].to_bits(), 0);
    }

    #[test]
    fn sigmoid_edges() {
        let s = |x: f32| sigmoid::<f32>(x);
        assert_eq!(s(0.0), 0.5);
        assert_eq!(s(f32::NEG_INFINITY).to_bits(), 0);
        assert_eq!(s(f32::INFINITY), 1.0);
        assert!(s(f32::NAN).is_nan());
        assert_eq!(s(-100.0).to_bits(), 0, "e^100 overflows: 1 / inf");
        // Far past where exp saturates (a generator's searches over every
        // f32 reach these): the same ends.
        assert_eq!(s(f32::MAX), 1.0);
        assert_eq!(s(-f32::MAX).to_bits(), 0);
    }

    #[test]
    fn a_full_ranking_extends_the_choice() {
        // Ties, near ties, NaN and a bias that reorders, at several shapes:
        // the full ranking starts with what the choice ranks, and chooses
        // the same experts.
        let x = [0.0f32, 0.0, 1.0, -1.0, f32::NAN, 2.0, 0.5, 0.5, -100.0, 100.0, 0.25, 0.0];
        let bias = [0.0f32, 0.125, 0.0, 1.0, 0.0, 0.0, -0.5, 0.0, 2.0, 0.0, 0.0, 0.0];
        let s: Vec<f32> = scores(&x);
        for (groups, l, k) in [(1, 1, 1), (1, 1, 12), (2, 1, 3), (3, 2, 5), (4, 2, 6), (6, 3, 2), (6, 6, 12)] {
            let chosen = choose(&s, &bias, groups, l, k, Depth::Chosen);
            let full = choose(&s, &bias, groups, l, k, Depth::Full);
            assert_eq!(chosen.ids, full.ids, "{groups} {l} {k}");
            assert_eq!(chosen.groups[..], full.groups[..l]);
            assert_eq!(chosen.experts[..], full.experts[..k]);
            assert_eq!((full.groups.len(), full.experts.len()), (groups, l * 12 / groups));
            for (c, f) in chosen.members.iter().zip(&full.members) {
                assert_eq!((c.len(), f.len()), (2, 12 / groups));
                assert_eq!(c[..], f[..2]);
            }
            assert_eq!(bits(&chosen.group_scores), bits(&full.group_scores));
            // What the oracle's forward chooses on the same row.
            let mut c = case(12, groups, l, k, x.to_vec(), bias.to_vec());
            c.gw = vec![1.0; k];
            assert_eq!(forward::<Router>(&c, &RouterProfile::serial()).unwrap().ids, full.ids);
        }
    }

    #[test]
    fn imposed_decisions_are_validated() {
        let mut c = case(4, 2, 1, 2, vec![0.0; 8], vec![0.0; 4]);
        let p = RouterProfile::serial();
        let good = RouterDecisions { ids: vec![0, 1, 2, 3], loss: None };
        assert!(forward_on::<f32>(&c, &p, Some(&good)).is_ok());
        for ids in [vec![0, 1, 2], vec![1, 0, 2, 3], vec![0, 0, 2, 3], vec![0, 4, 2, 3]] {
            let d = RouterDecisions { ids, loss: None };
            assert!(matches!(forward_on::<f32>(&c, &p, Some(&d)), Err(RouterError::Decisions(_))), "{d:?}");
        }
        // Loss decisions: required by a fused backward, refused elsewhere.
        let loss = Decisions { keep_norm: vec![true; 2], gate: vec![true; 2] };
        let with_loss = RouterDecisions { ids: good.ids.clone(), loss: Some(loss.clone()) };
        assert!(forward_on::<f32>(&c, &p, Some(&with_loss)).is_err());
        assert!(backward_on::<f32>(&c, &p, Some(&with_loss)).is_err());
        c.loss = Some(FusedLoss { clamp_tie: ClampTie::Strict, g: 1.0 });
        assert!(backward_on::<f32>(&c, &p, Some(&good)).is_err());
        assert!(backward_on::<f32>(&c, &p, Some(&with_loss)).is_ok());
        let short = RouterDecisions {
            ids: good.ids.clone(),
            loss: Some(Decisions { keep_norm: vec![true], gate: vec![true] }),
        };
        assert!(backward_on::<f32>(&c, &p, Some(&short)).is_err());
        // An invalid profile and an invalid case are errors, not panics.
        let mut bad = RouterProfile::gpu();
        bad.norm = crate::order::ReductionOrder::chunked(
            0,
            crate::order::ReductionOrder::Serial,
            crate::order::ReductionOrder::Serial,
        );
        assert!(matches!(forward_on::<f32>(&c, &bad, None), Err(RouterError::Profile(_))));
        c.k = 5;
        assert!(matches!(backward_on::<Bounded>(&c, &p, None), Err(RouterError::K { .. })));
    }

    #[test]
    fn imposed_decisions_are_taken_and_own_ones_counted() {
        // Imposing expert 3 where the row would pick expert 0 (all tied):
        // the weight is taken at expert 3 and the row counts as a near tie.
        let c = case(4, 1, 1, 1, vec![0.0, 0.0, 0.0, 0.0], vec![0.0; 4]);
        let d = RouterDecisions { ids: vec![3], loss: None };
        let run = forward_on::<f32>(&c, &RouterProfile::serial(), Some(&d)).unwrap();
        assert_eq!(run.out.ids, vec![3]);
        assert_eq!(run.out.counts, vec![0, 0, 0, 1]);
        assert_eq!(run.near_ties, 1);
        let own = forward_on::<f32>(&c, &RouterProfile::serial(), None).unwrap();
        assert_eq!((own.out.ids, own.near_ties), (vec![0], 0));
    }
}
