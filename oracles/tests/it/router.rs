//! `router` (docs/ops/router.md) judged from outside: the f32 profile oracle
//! within its rigorous bound of the exact result, the decisions and their near
//! ties, padding, the two profiles, and the finite-difference check of the
//! backward, including a demonstration that it fails on wrong derivatives.
//! Every expected value here comes from the exact oracle, from MPFR arithmetic
//! written in this file, or from a hand derivation.

use oracles::case::router::{FusedLoss, RouterCase};
use oracles::case::Layout;
use oracles::expf::exp_f32;
use oracles::mpfr::reference::{exact_backward, exact_forward, BackwardReference, ForwardReference};
use oracles::mpfr::router::{check_gradient, check_gradient_against, gradient_entries, FD_PREC};
use oracles::mpfr::{correctly_rounded, with_precision, Exact, START_PREC};
use oracles::num::Num;
use oracles::op::router::Router;
use oracles::op::{backward, forward, Op};
use oracles::profile::router::RouterProfile;
use oracles::profile_oracle::router::{backward_on, forward_on};
use oracles::vocab::{ClampTie, EPS};
use std::time::Instant;

use crate::common::Rng;

/// The shapes of docs/ops/router.md#shapes-in-practice (on a few tokens) and
/// small edge shapes: (T, E, G, L, k).
const SHAPES: [(usize, usize, usize, usize, usize); 7] = [
    (2, 256, 8, 4, 8), // DeepSeek-V3
    (3, 160, 8, 3, 6), // DeepSeek-V2
    (3, 64, 1, 1, 6),  // DeepSeek-V2-Lite
    (3, 8, 4, 2, 3),
    (4, 6, 3, 3, 6), // k = L * E / G: every kept expert chosen
    (4, 4, 2, 1, 1),
    (1, 2, 1, 1, 1),
];

/// Logits as a router sees them, with ties (a repeated value, exact zeros)
/// and saturated scores (|x| up to 40) mixed in; finite unless `specials`.
fn logits(rng: &mut Rng, n: usize, specials: bool) -> Vec<f32> {
    let mut v: Vec<f32> = Vec::with_capacity(n);
    for i in 0..n {
        let x = match rng.below(40) {
            0 if i > 0 => v[rng.below(i)],
            1 => 0.0,
            2 => rng.signed() * 40.0,
            3 if specials => [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -100.0][rng.below(4)],
            _ => rng.normal(1.5),
        };
        v.push(x);
    }
    v
}

/// Case `i` of a varied family: cycles through the shapes, route_norm,
/// route_scale (1 and DeepSeek-V3's 2.5), fused loss (none, Strict,
/// Inclusive), padding and biases.
fn varied(i: usize, specials: bool) -> RouterCase {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (i as u64 + 1).wrapping_mul(0x1234_5678_9abc_def1));
    let (t, e, groups, topk_groups, k) = SHAPES[i % SHAPES.len()];
    let bias = (0..e).map(|_| if rng.below(4) == 0 { 0.0 } else { rng.normal(0.05) }).collect();
    let loss = match i % 3 {
        0 => None,
        1 => Some(FusedLoss { clamp_tie: ClampTie::Strict, g: [1.0, 0.75, -1.0, 1e-3][rng.below(4)] }),
        _ => Some(FusedLoss { clamp_tie: ClampTie::Inclusive, g: rng.normal(1.0) }),
    };
    let padding = (i % 4 == 3).then(|| (0..t).map(|r| r % 2 == 1).collect());
    RouterCase {
        t,
        e,
        layout: Layout { offset: i % 4, row_stride: e + i % 3 },
        logits: logits(&mut rng, t * e, specials),
        bias,
        groups,
        topk_groups,
        k,
        route_scale: if i.is_multiple_of(2) { 2.5 } else { 1.0 },
        route_norm: i % 5 != 4,
        padding,
        gw: (0..t * k).map(|_| rng.normal(1.0)).collect(),
        loss,
    }
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn the_profile_oracle_is_within_its_bound_of_the_exact_result() {
    let mut judged = 0;
    for i in 0..36 {
        let c = varied(i, false);
        for p in RouterProfile::all() {
            let fwd = forward::<Router>(&c, &p).unwrap();
            let fr = ForwardReference::<Router>::new(&c, &p).unwrap();
            // The bounded run executes the same profile: its f32 half is the oracle's bits.
            let b = &fr.bounded.out;
            assert_eq!(bits(&fwd.weights), bits(&b.weights.iter().map(|w| w.x).collect::<Vec<_>>()));
            assert_eq!(bits(&fwd.scores), bits(&b.scores.iter().map(|s| s.x).collect::<Vec<_>>()));
            let acc = fr.judge(&c, &fwd);
            assert!(acc.outside.is_empty(), "case {i} {}: {:?}", p.name, acc.outside);
            assert_eq!((acc.unbounded, acc.undetermined), (0, 0), "case {i}");
            judged += acc.judged;

            let bwd = backward::<Router>(&c, &p).unwrap();
            let br = BackwardReference::<Router>::new(&c, &p).unwrap();
            let grads: Vec<f32> = br.bounded.out.grad.iter().map(|g| g.x).collect();
            assert_eq!(bits(&bwd.grad), bits(&grads));
            let acc = br.judge(&c, &bwd);
            assert!(acc.outside.is_empty(), "case {i} {}: {:?}", p.name, acc.outside);
            judged += acc.judged;

            // The bound is tight enough to see a few ulps: a weight off by 64
            // ulps is outside it.
            let mut wrong = fwd.clone();
            wrong.weights[0] *= 1.0 + 64.0 * f32::EPSILON;
            assert!(!fr.judge(&c, &wrong).outside.is_empty(), "case {i}");
        }
    }
    assert!(judged > 20_000, "{judged}");
}

#[test]
fn non_finite_logits_are_unbounded_never_outside() {
    // NaN and +-inf logits, and -100 (e^100 overflows f32: s = 1/inf).
    let mut unbounded = 0;
    for i in 0..14 {
        let c = varied(i, true);
        for p in RouterProfile::all() {
            let fr = ForwardReference::<Router>::new(&c, &p).unwrap();
            let acc = fr.judge(&c, &forward::<Router>(&c, &p).unwrap());
            assert!(acc.outside.is_empty(), "case {i}: {:?}", acc.outside);
            unbounded += acc.unbounded;
            let br = BackwardReference::<Router>::new(&c, &p).unwrap();
            let acc = br.judge(&c, &backward::<Router>(&c, &p).unwrap());
            assert!(acc.outside.is_empty(), "case {i}: {:?}", acc.outside);
        }
    }
    assert!(unbounded > 0);
}

#[test]
fn saturated_logits_leave_nothing_undetermined() {
    // Logits whose e^-x lies far outside f64's range (-10000: e^10000 is about
    // 2^14427) or MPFR's (-f32::MAX, -1e30), in every place of a row (chosen
    // or not), with a fused loss: the exact s is a tiny positive real whose
    // f32 rounding is +0.0 (s < e^x < 2^-150), or 1.0 (x >= 200: 1 - s <
    // e^-x < 2^-25), and every output settles, the forward at the first
    // precision, none undetermined, none outside its bound.
    let row = [-10000.0, 0.5, -f32::MAX, 10000.0, -1e30, f32::MAX, -200.0, -1.25];
    let mut logits = row.to_vec();
    logits.extend(row.iter().rev());
    let c = RouterCase {
        t: 2,
        e: 8,
        layout: Layout::dense(8),
        logits,
        bias: vec![0.0, 0.25, 0.0, -0.5, 0.125, 0.0, 0.0, 0.0],
        groups: 2,
        topk_groups: 2,
        k: 3,
        route_scale: 2.5,
        route_norm: true,
        padding: None,
        gw: vec![1.0, -0.5, 0.25, 2.0, 1.0, -1.0],
        loss: Some(FusedLoss { clamp_tie: ClampTie::Strict, g: 0.75 }),
    };
    for p in RouterProfile::all() {
        let fr = ForwardReference::<Router>::new(&c, &p).unwrap();
        assert_eq!((fr.exact.prec, fr.exact.undetermined), (START_PREC, 0), "{}", p.name);
        for (x, s) in c.logits.iter().zip(&fr.exact.out.scores) {
            let want = if *x <= -200.0 {
                0.0
            } else if *x >= 200.0 {
                1.0
            } else {
                exp_f32(0.0) / (1.0 + exp_f32(-x))
            };
            assert_eq!(correctly_rounded(s).map(f32::to_bits), Some(want.to_bits()), "s({x}) = {s:?}");
            assert!(s.err.is_finite(), "s({x}) = {s:?}");
        }
        let acc = fr.judge(&c, &forward::<Router>(&c, &p).unwrap());
        assert!(acc.outside.is_empty(), "{:?}", acc.outside);
        // The backward takes one doubling: for x = 10000, 1 - s (about
        // e^-10000) is 1 - 1 = 0 at 128 bits, with s's bound of some 2^-127,
        // so grad = (gs (1 - s)) s is 0 +- |gs| 2^-127, which holds f32
        // subnormals; at 256 bits the interval holds only zeros.
        let br = BackwardReference::<Router>::new(&c, &p).unwrap();
        assert_eq!((br.exact.prec, br.exact.undetermined), (2 * START_PREC, 0), "{}", p.name);
        assert!(br.exact.out.grad.iter().all(|g| g.err.is_finite()));
        let acc = br.judge(&c, &backward::<Router>(&c, &p).unwrap());
        assert!(acc.outside.is_empty(), "{:?}", acc.outside);
    }
}

#[test]
fn a_rounded_tie_is_a_near_tie() {
    // s(20) and s(21) both round to 1.0 in f32 (e^-20 = 2.1e-9 is below half
    // an ulp of 1), so the profile sees a tie and takes expert 0; exactly,
    // s(21) > s(20) and expert 1 would be chosen.
    let c = RouterCase {
        t: 1,
        e: 2,
        layout: Layout::dense(2),
        logits: vec![20.0, 21.0],
        bias: vec![0.0; 2],
        groups: 1,
        topk_groups: 1,
        k: 1,
        route_scale: 1.0,
        route_norm: true,
        padding: None,
        gw: vec![1.0],
        loss: None,
    };
    let p = RouterProfile::serial();
    assert_eq!(forward::<Router>(&c, &p).unwrap().ids, vec![0]);
    let own = with_precision(128, || forward_on::<Exact>(&c, &p, None).unwrap());
    assert_eq!(own.out.ids, vec![1]);
    let fr = ForwardReference::<Router>::new(&c, &p).unwrap();
    assert_eq!(fr.exact.near_ties, 1);
    assert_eq!(fr.exact.out.ids, vec![0], "the exact oracle takes the profile's decision");
    assert!(fr.judge(&c, &forward::<Router>(&c, &p).unwrap()).outside.is_empty());
    let br = BackwardReference::<Router>::new(&c, &p).unwrap();
    assert_eq!(br.exact.near_ties, 1);
}

#[test]
fn a_rounded_clamp_tie_is_a_near_tie() {
    // Two logits whose f32 scores (1 / (1 + e^-x), e^-x correctly rounded)
    // add up to eps exactly in f32, found by search around ln(eps / 2) =
    // -28.324168 (e^x there is eps / 2, and 1 + e^-x is e^-x): the profile's n_t is
    // eps (Strict: kept, gate closed), while the exact n_t, a sum of
    // transcendental numbers, is not eps, so exactly the clamp and the gate
    // agree with each other and one of them differs from the profile's.
    // Unequal f32 scores (or one logit twice) keep the selection out of it:
    // the f32 sigmoid is nondecreasing, so the larger score has the larger
    // logit.
    let sig = |x: f32| 1.0 / (1.0 + exp_f32(-x));
    let xs: Vec<f32> = (0..1500u32).map(|i| f32::from_bits((-28.324_168f32).to_bits() - 750 + i)).collect();
    let ss: Vec<f32> = xs.iter().map(|&x| sig(x)).collect();
    let pair = (0..xs.len())
        .flat_map(|i| (i..xs.len()).map(move |j| (i, j)))
        .find(|&(i, j)| ss[i] + ss[j] == EPS && (ss[i] != ss[j] || i == j));
    let (i, j) = pair.expect("some pair of scores adds up to eps");
    let mut c = RouterCase {
        t: 1,
        e: 2,
        layout: Layout::dense(2),
        logits: vec![xs[i], xs[j]],
        bias: vec![0.0; 2],
        groups: 1,
        topk_groups: 1,
        k: 1,
        route_scale: 1.0,
        route_norm: true,
        padding: None,
        gw: vec![1.0],
        loss: Some(FusedLoss { clamp_tie: ClampTie::Strict, g: 1.0 }),
    };
    let p = RouterProfile::serial();
    let run = backward_on::<f32>(&c, &p, None).unwrap();
    let loss = run.decisions.loss.clone().unwrap();
    assert_eq!((loss.keep_norm[0], loss.gate[0]), (true, false));
    // The selection is no near tie (the forward has none), the clamp is.
    assert_eq!(ForwardReference::<Router>::new(&c, &p).unwrap().exact.near_ties, 0);
    let br = BackwardReference::<Router>::new(&c, &p).unwrap();
    assert_eq!(br.exact.near_ties, 1);
    assert!(br.judge(&c, &run.out).outside.is_empty());
    // Inclusive opens the gate at n == eps: the profile's gate differs.
    c.loss = Some(FusedLoss { clamp_tie: ClampTie::Inclusive, g: 1.0 });
    let run = backward_on::<f32>(&c, &p, None).unwrap();
    assert!(run.decisions.loss.unwrap().gate[0]);
}

#[test]
fn padding_rows_change_no_other_output_bit() {
    for i in 0..14 {
        let c = varied(i, false);
        let mut padded = c.clone();
        let poison = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 1e30, -1e30];
        padded.t = c.t + 2;
        padded.logits.extend((0..2 * c.e).map(|j| poison[j % poison.len()]));
        padded.gw.extend((0..2 * c.k).map(|j| poison[j % poison.len()]));
        let mut flags = c.padding.clone().unwrap_or(vec![false; c.t]);
        flags.extend([true, true]);
        padded.padding = Some(flags);
        for p in RouterProfile::all() {
            let (a, b) = (forward::<Router>(&c, &p).unwrap(), forward::<Router>(&padded, &p).unwrap());
            assert_eq!(a.counts, b.counts, "case {i}");
            assert_eq!(a.ids[..], b.ids[..c.t * c.k]);
            assert_eq!(a.map[..], b.map[..c.t * c.e]);
            assert_eq!(bits(&a.weights), bits(&b.weights[..c.t * c.k]));
            assert_eq!(bits(&a.scores), bits(&b.scores[..c.t * c.e]));
            let (ga, gb) = (backward::<Router>(&c, &p).unwrap(), backward::<Router>(&padded, &p).unwrap());
            assert_eq!(bits(&ga.grad), bits(&gb.grad[..c.t * c.e]), "case {i} {}", p.name);
            // The padding tokens themselves are routed: k experts each.
            assert_eq!(b.ids.len(), padded.t * c.k);
        }
    }
}

#[test]
fn the_profiles_differ_only_where_their_orders_do() {
    // serial and warp32 share the route orders (serial over the k chosen)
    // and differ in the fused loss's row and q orders over E.
    let (serial, gpu) = (RouterProfile::serial(), RouterProfile::gpu());
    assert_eq!((&serial.norm, &serial.q), (&gpu.norm, &gpu.q));
    let mut loss_differs = 0;
    for i in 0..36 {
        let c = varied(i, false);
        let (a, b) = (forward::<Router>(&c, &serial).unwrap(), forward::<Router>(&c, &gpu).unwrap());
        assert_eq!((bits(&a.weights), bits(&a.scores), &a.ids), (bits(&b.weights), bits(&b.scores), &b.ids));
        let (ga, gb) = (backward::<Router>(&c, &serial).unwrap(), backward::<Router>(&c, &gpu).unwrap());
        if c.loss.is_none() {
            assert_eq!(bits(&ga.grad), bits(&gb.grad), "case {i}");
        } else if bits(&ga.grad) != bits(&gb.grad) {
            loss_differs += 1;
        }
    }
    assert!(loss_differs > 0, "the loss orders never mattered");
}

#[test]
fn the_gradient_check_passes_on_varied_cases() {
    let mut total = oracles::op::GradientCheck::default();
    for i in 0..21 {
        let c = varied(i, false);
        let r = Router::check_gradient(&c, 40).unwrap();
        assert!(r.failures.is_empty(), "case {i}: {:?}", r.failures);
        total.checked += r.checked;
        total.kinks += r.kinks;
    }
    // Ties between repeated logits straddling the k-th place are kinks;
    // nearly everything else is checked.
    eprintln!("gradient check over 21 cases: {total:?}");
    assert!(total.checked > 500, "{total:?}");
}

#[test]
fn the_gradient_check_covers_the_clamped_side_and_counts_kinks_and_nonfinite_rows() {
    // Row 0: scores near 1e-13, n_t < eps: d = eps, the gate closed.
    // Row 1: all equal: a tie at the k-th place, every entry a kink.
    // Row 2: a NaN: no derivative.
    let mut c = RouterCase {
        t: 3,
        e: 4,
        layout: Layout::dense(4),
        logits: vec![-30.0, -30.5, -31.0, -29.5, 0.25, 0.25, 0.25, 0.25, 0.5, f32::NAN, 0.0, 1.0],
        bias: vec![0.0; 4],
        groups: 2,
        topk_groups: 2,
        k: 2,
        route_scale: 2.5,
        route_norm: true,
        padding: None,
        gw: vec![1.0, -0.5, 0.25, 2.0, 1.0, 1.0],
        loss: Some(FusedLoss { clamp_tie: ClampTie::Strict, g: 0.5 }),
    };
    let all = gradient_entries(&c, 100).unwrap();
    let r = check_gradient(&c, &all).unwrap();
    assert!(r.failures.is_empty(), "{:?}", r.failures);
    assert_eq!((r.checked, r.kinks, r.nonfinite), (4, 4, 4));
    // A padding row keeps its route part (and is checked); its loss part is gone.
    c.padding = Some(vec![false, false, true]);
    c.logits[9] = 0.75;
    let r = check_gradient(&c, &all).unwrap();
    assert!(r.failures.is_empty(), "{:?}", r.failures);
    assert_eq!((r.checked, r.kinks, r.nonfinite), (8, 4, 0));
}

/// Ways to get the backward wrong, for [`claimed_gradient`].
#[derive(Clone, Copy, Debug, PartialEq)]
enum Claim {
    Right,
    /// (s * (1 - s)) * gs: another association, the same real number.
    SigmoidAssociatedOtherwise,
    /// q = sum_j +(a_j * ((w0_j / D) / D)).
    RouteQSignFlipped,
    /// gs * s: the factor (1 - s) forgotten.
    NoOneMinusS,
    /// q_t = sum_e +(a_e * ((s_e / d) / d)).
    LossQSignFlipped,
}

/// The backward written again here, in exact arithmetic (Exact at the check's
/// precision), with the selection taken from the exact forward, and with
/// the change `claim` names. For cases whose valid rows have n_t > eps.
fn claimed_gradient(c: &RouterCase, claim: Claim) -> Vec<Exact> {
    with_precision(FD_PREC, || {
        let ids = forward_on::<Exact>(c, &RouterProfile::serial(), None).unwrap().out.ids;
        let x = Exact::input;
        let one = x(1.0);
        let s: Vec<Exact> = c.logits.iter().map(|&l| one.div(&one.add(&x(l).neg().exp()))).collect();
        let mut counts = vec![0u32; c.e];
        for t in (0..c.t).filter(|&t| !c.is_padding(t)) {
            ids[t * c.k..(t + 1) * c.k].iter().for_each(|&i| counts[i as usize] += 1);
        }
        let total = x(counts.iter().sum::<u32>() as f32);
        let f: Vec<Exact> = counts.iter().map(|&n| x(n as f32).div(&total).mul(&x(c.e as f32))).collect();
        let sum = |v: Vec<Exact>| v.into_iter().fold(x(0.0), |acc, y| acc.add(&y));
        let mut grad = Vec::new();
        for t in 0..c.t {
            let row = &s[t * c.e..(t + 1) * c.e];
            let mut gs = vec![x(0.0); c.e];
            if let (Some(l), false) = (c.loss, c.is_padding(t)) {
                let a: Vec<Exact> = f.iter().map(|f_e| x(l.g).mul(f_e)).collect();
                let d = sum(row.to_vec());
                let sign = if claim == Claim::LossQSignFlipped { one.clone() } else { one.neg() };
                let q = sum(row.iter().zip(&a).map(|(s_e, a_e)| sign.mul(&a_e.mul(&s_e.div(&d).div(&d)))).collect());
                gs = a.iter().map(|a_e| a_e.div(&d).add(&q)).collect();
            }
            let chosen: Vec<usize> = ids[t * c.k..(t + 1) * c.k].iter().map(|&i| i as usize).collect();
            let a: Vec<Exact> = (0..c.k).map(|j| x(c.route_scale).mul(&x(c.gw[t * c.k + j]))).collect();
            let w0: Vec<Exact> = chosen.iter().map(|&i| row[i].clone()).collect();
            let big_d = sum(w0.clone()).add(&x(1e-20));
            let sign = if claim == Claim::RouteQSignFlipped { one.clone() } else { one.neg() };
            let q = sum(a.iter().zip(&w0).map(|(a_j, w)| sign.mul(&a_j.mul(&w.div(&big_d).div(&big_d)))).collect());
            for (j, &i) in chosen.iter().enumerate() {
                let r = if c.route_norm { a[j].div(&big_d).add(&q) } else { a[j].clone() };
                gs[i] = gs[i].add(&r);
            }
            for (g, s) in gs.iter().zip(row) {
                let one_minus = one.add(&s.neg());
                grad.push(match claim {
                    Claim::SigmoidAssociatedOtherwise => s.mul(&one_minus).mul(g),
                    Claim::NoOneMinusS => g.mul(s),
                    _ => g.mul(&one_minus).mul(s),
                });
            }
        }
        grad
    })
}

#[test]
fn the_gradient_check_fails_on_wrong_derivatives() {
    for i in [0, 1, 2, 7, 10] {
        let mut c = varied(i, false);
        c.padding = None;
        c.loss = Some(FusedLoss { clamp_tie: ClampTie::Strict, g: 0.75 });
        let entries = gradient_entries(&c, 40).unwrap();
        let verdict = |claim| check_gradient_against(&c, &entries, &claimed_gradient(&c, claim)).unwrap();
        // The test's own backward, right, passes; so does another association
        // of the same real number: association is conformance's business.
        for claim in [Claim::Right, Claim::SigmoidAssociatedOtherwise] {
            let r = verdict(claim);
            assert!(r.failures.is_empty() && r.checked > 0, "case {i} {claim:?}: {r:?}");
        }
        // Each wrong derivative fails on every entry it changes: the route
        // q on the chosen experts' entries, the others everywhere (with a
        // fused loss every gs is nonzero).
        let map = forward::<Router>(&c, &RouterProfile::serial()).unwrap().map;
        let chosen = entries.iter().filter(|&&(t, e)| map[t * c.e + e]).count();
        for (claim, changed) in [
            (Claim::RouteQSignFlipped, chosen),
            (Claim::NoOneMinusS, entries.len()),
            (Claim::LossQSignFlipped, entries.len()),
        ] {
            let r = verdict(claim);
            assert_eq!((r.kinks, r.nonfinite), (0, 0), "case {i}");
            assert_eq!(r.failures.len(), changed, "case {i} {claim:?}: {r:?}");
        }
    }
}

#[test]
fn invalid_input_is_an_error_everywhere() {
    let mut c = varied(3, false);
    c.k = 0;
    assert!(forward::<Router>(&c, &RouterProfile::serial()).is_err());
    assert!(check_gradient(&c, &[(0, 0)]).is_err());
    assert!(gradient_entries(&c, 10).is_err());
    assert!(Router::check_gradient(&c, 10).is_err());
    let c = varied(3, false);
    assert!(check_gradient_against(&c, &[(0, 0)], &[]).is_err());
}

/// The exact forward and backward (Ziv's loop, fused loss) and the
/// gradient check at DeepSeek-V3's width (E = 256, 8 groups, top-4 groups,
/// k = 8): T = 8 in CI; `ROUTER_EXACT_T=64 cargo test --release -p oracles
/// --test it router::exact_oracle_at_real_width -- --nocapture` prints the time
/// at T = 64 (minutes in a debug build).
#[test]
fn exact_oracle_at_real_width() {
    let mut rng = Rng(7);
    let t: usize = std::env::var("ROUTER_EXACT_T").ok().and_then(|v| v.parse().ok()).unwrap_or(8);
    let (e, k) = (256, 8);
    let c = RouterCase {
        t,
        e,
        layout: Layout::dense(e),
        logits: logits(&mut rng, t * e, false),
        bias: (0..e).map(|_| rng.normal(0.05)).collect(),
        groups: 8,
        topk_groups: 4,
        k,
        route_scale: 2.5,
        route_norm: true,
        padding: None,
        gw: (0..t * k).map(|_| rng.normal(1.0)).collect(),
        loss: Some(FusedLoss { clamp_tie: ClampTie::Strict, g: 1.0 }),
    };
    let start = Instant::now();
    let f = exact_forward::<Router>(&c, None).unwrap();
    let b = exact_backward::<Router>(&c, None).unwrap();
    let exact = start.elapsed();
    let start = Instant::now();
    let fd = Router::check_gradient(&c, 100).unwrap();
    let check = start.elapsed();
    println!(
        "exact forward + backward, T = {t}, E = 256: {exact:?} (precision {} / {}); gradient check of {} entries: {check:?}",
        f.prec, b.prec, fd.checked
    );
    assert!(fd.failures.is_empty());
}

/// `storage` is what the GPU subject uploads: row r of the logits at
/// offset + r * row_stride, the gap value everywhere else (index arithmetic
/// written out here, not taken from `Layout::place`).
#[test]
fn storage_lays_the_logits_out_as_the_layout_says() {
    let gap = -7.5f32;
    for i in 0..8 {
        let mut c = varied(i, false);
        let (off, stride) = (1 + i % 3, c.e + i % 4);
        c.layout = Layout { offset: off, row_stride: stride };
        let s = c.storage(gap);
        assert_eq!(s.len(), off + (c.t - 1) * stride + c.e, "case {i}");
        for (j, v) in s.iter().enumerate() {
            let want = match j.checked_sub(off) {
                Some(q) if q % stride < c.e => c.logits[(q / stride) * c.e + q % stride],
                _ => gap,
            };
            assert_eq!(v.to_bits(), want.to_bits(), "case {i}, element {j}");
        }
    }
    let c = varied(1, false);
    let dense = RouterCase { layout: Layout::dense(c.e), ..c };
    assert_eq!(bits(&dense.storage(gap)), bits(&dense.logits));
}

/// The real outputs of some groups, as bits (AnyOrder: its admissible value
/// `x`), and the integer ones.
fn group_bits<N>(groups: &[oracles::op::Group<N>], x: impl Fn(&N) -> f32) -> Vec<(Vec<u32>, Vec<i64>)> {
    use oracles::op::Values;
    groups
        .iter()
        .map(|g| match &g.values {
            Values::Real(v) => (v.iter().map(|n| x(n).to_bits()).collect(), vec![]),
            Values::Int(v) => (vec![], v.clone()),
        })
        .collect()
}

/// The any-order run's admissible value (`AnyOrder::x`: serial sums, no
/// contraction) is the serial profile's own f32 result, bit for bit, forward
/// and backward: the two profiles differ only in the orders they admit. (A
/// mutant that left `x` un-negated in `AnyOrder::neg` lived without this.)
#[test]
fn the_any_order_runs_admissible_value_is_the_serial_profiles_result() {
    use oracles::any_order::AnyOrder;
    use oracles::padding::PaddingRule;
    let (serial, any) = (RouterProfile::serial(), Router::any_order_profile());
    for i in 0..21 {
        let c = varied(i, i % 2 == 1);
        let f = forward::<Router>(&c, &serial).unwrap();
        let a = Router::forward_under::<AnyOrder>(&c, &any, PaddingRule::Skip, None).unwrap().out;
        assert_eq!(
            group_bits(&Router::fwd_groups(&c, &f), |v| *v),
            group_bits(&Router::fwd_groups(&c, &a), |v| v.x),
            "case {i} forward"
        );
        let b = backward::<Router>(&c, &serial).unwrap();
        let a = Router::backward_under::<AnyOrder>(&c, &any, PaddingRule::Skip, None).unwrap().out;
        assert_eq!(
            group_bits(&Router::bwd_groups(&c, &b), |v| *v),
            group_bits(&Router::bwd_groups(&c, &a), |v| v.x),
            "case {i} backward"
        );
    }
}

/// With more entries than `max`, the rows checked spread over the case from
/// the first to the last: T = 10, k = 2, max = 12 gives 12 / (k + 2) = 3 rows,
/// i (T - 1) / 2 for i = 0, 1, 2: rows 0, 4 and 9.
#[test]
fn gradient_entries_spread_their_rows_from_the_first_to_the_last() {
    let c = RouterCase {
        t: 10,
        e: 4,
        layout: Layout::dense(4),
        logits: (0..40).map(|i| (i % 7) as f32 * 0.25 - 0.5).collect(),
        bias: vec![0.0; 4],
        groups: 1,
        topk_groups: 1,
        k: 2,
        route_scale: 1.0,
        route_norm: true,
        padding: None,
        gw: vec![1.0; 20],
        loss: None,
    };
    let entries = gradient_entries(&c, 12).unwrap();
    assert!(entries.iter().all(|&(t, e)| t < 10 && e < 4), "{entries:?}");
    let rows: std::collections::BTreeSet<usize> = entries.iter().map(|&(t, _)| t).collect();
    for t in [0, 4, 9] {
        assert!(rows.contains(&t), "row {t} in {rows:?}");
    }
}
