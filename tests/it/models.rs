//! The kernel models against what they must agree with.
//!
//! - `seqwise_loss`: the model bit for bit equal to the profile oracle (the
//!   oracle may be used here, in tests) over thousands of generated cases,
//!   for both shipped profiles; every planted bug differs from the oracle on
//!   some generated case; an order the model does not implement is refused.
//! - `router`: no oracle yet (one is being written apart); cases whose
//!   expected values are derived by hand (exact binary fractions, noted next
//!   to each), and a case per planted bug on which it differs from the
//!   correct model.

use bitparity::gen::seqwise_loss::{generate, GenConfig};
use bitparity::model::{ModelError, RouterModel, SeqwiseModel};
use bitparity::planted::{RouterBug, SeqwiseBug};
use oracles::case::router::{FusedLoss, RouterBackward, RouterCase, RouterForward};
use oracles::case::seqwise_loss::{Layout, SeqwiseBackward, SeqwiseCase, SeqwiseForward};
use oracles::order::ReductionOrder::{self, Butterfly, Serial};
use oracles::profile::router::RouterProfile;
use oracles::profile::seqwise_loss::SeqwiseProfile;
use oracles::profile_oracle::seqwise_loss as oracle;
use oracles::same_bits;
use oracles::vocab::ClampTie;
use proptest::test_runner::{RngAlgorithm, TestRng};

/// Generated cases per profile in the conformance test.
const CONFORMANCE_CASES: usize = 3000;
/// Generated cases searched for each planted bug.
const BUG_SEARCH: usize = 5000;

/// The first index where two f32 slices differ
/// (docs/ops/README.md#rules-every-profile-keeps: bits, any NaN matching any
/// NaN), with both values.
fn first_difference(a: &[f32], b: &[f32]) -> Option<(usize, f32, f32)> {
    if a.len() != b.len() {
        return Some((a.len().min(b.len()), f32::NAN, f32::NAN));
    }
    a.iter().zip(b).enumerate().find(|(_, (x, y))| !same_bits(**x, **y)).map(|(i, (x, y))| (i, *x, *y))
}

/// Where two seqwise forwards differ, if they do.
fn seqwise_forward_diff(a: &SeqwiseForward<f32>, b: &SeqwiseForward<f32>) -> Option<String> {
    if !same_bits(a.raw, b.raw) {
        return Some(format!("raw {:e} vs {:e}", a.raw, b.raw));
    }
    if let Some(i) = (0..a.counts.len().max(b.counts.len())).find(|&i| a.counts.get(i) != b.counts.get(i)) {
        return Some(format!("counts[{i}] {:?} vs {:?}", a.counts.get(i), b.counts.get(i)));
    }
    first_difference(&a.freq, &b.freq).map(|(i, x, y)| format!("freq[{i}] {x:e} vs {y:e}"))
}

fn seqwise_backward_diff(a: &SeqwiseBackward<f32>, b: &SeqwiseBackward<f32>) -> Option<String> {
    first_difference(&a.grad, &b.grad)
        .map(|(i, x, y)| format!("grad[{i}] {x:e} vs {y:e} ({:#x} vs {:#x})", x.to_bits(), y.to_bits()))
}

/// Where a model and the oracle differ on a case (forward, then backward).
fn seqwise_diff(model: &SeqwiseModel, case: &SeqwiseCase) -> Option<String> {
    let profile = &model.profile;
    let ours = model.forward(case).map_err(|e| e.to_string());
    let theirs = oracle::forward(case, profile).map_err(|e| e.to_string());
    match (ours, theirs) {
        (Ok(a), Ok(b)) => {
            if let Some(d) = seqwise_forward_diff(&a, &b) {
                return Some(format!("forward: {d}"));
            }
        }
        (a, b) if a.is_err() != b.is_err() => return Some(format!("forward: {:?} vs {:?}", a.err(), b.err())),
        _ => {}
    }
    let ours = model.backward(case).map_err(|e| e.to_string());
    let theirs = oracle::backward(case, profile).map_err(|e| e.to_string());
    match (ours, theirs) {
        (Ok(a), Ok(b)) => seqwise_backward_diff(&a, &b).map(|d| format!("backward: {d}")),
        (a, b) if a.is_err() != b.is_err() => Some(format!("backward: {:?} vs {:?}", a.err(), b.err())),
        _ => None,
    }
}

fn rng() -> TestRng {
    TestRng::deterministic_rng(RngAlgorithm::ChaCha)
}

#[test]
fn seqwise_model_matches_the_oracle_bitwise() {
    let cfg = GenConfig::default();
    for profile in SeqwiseProfile::all() {
        let model = SeqwiseModel::new(profile.clone());
        let mut rng = rng();
        for i in 0..CONFORMANCE_CASES {
            let case = generate(&mut rng, &cfg);
            if let Some(d) = seqwise_diff(&model, &case) {
                panic!(
                    "profile {}, case {i} ({}x{}): {d}\n{}",
                    profile.name,
                    case.t,
                    case.e,
                    serde_json::to_string(&case).unwrap()
                );
            }
        }
    }
}

#[test]
fn seqwise_model_matches_the_oracle_on_other_supported_orders() {
    // The profile is data: any lane count and chunk size of the three
    // supported shapes, in any of the four sums, agree too (odd sizes, lanes
    // not a power of two, chunks smaller and larger than T).
    let warp = |lanes| ReductionOrder::strided(lanes, Serial, Butterfly);
    let chunks = |chunk| ReductionOrder::chunked(chunk, Serial, Serial);
    let profiles = [
        SeqwiseProfile { name: "mixed-a".into(), row: warp(5), tokens: chunks(3), raw: chunks(7), q: warp(3) },
        SeqwiseProfile { name: "mixed-b".into(), row: chunks(2), tokens: warp(4), raw: Serial, q: chunks(16) },
        SeqwiseProfile { name: "mixed-c".into(), row: warp(1), tokens: warp(33), raw: warp(64), q: chunks(1) },
    ];
    let cfg = GenConfig::default();
    for profile in profiles {
        let model = SeqwiseModel::new(profile.clone());
        let mut rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]);
        for i in 0..CONFORMANCE_CASES / 3 {
            let case = generate(&mut rng, &cfg);
            if let Some(d) = seqwise_diff(&model, &case) {
                panic!("profile {}, case {i} ({}x{}): {d}", profile.name, case.t, case.e);
            }
        }
    }
}

#[test]
fn seqwise_model_matches_the_oracle_on_hand_cases() {
    // Signed zeros, NaN among the top-k, a clamp tie, padding poisoned,
    // an offset and a stride: the classes the generator mixes, one each.
    use oracles::case::seqwise_loss::Objective;
    use oracles::vocab::EPS;
    let nan = f32::NAN;
    let cases = [
        SeqwiseCase::dense(1, 4, vec![-0.0, 0.0, nan, 0.5], Objective::UnbiasedTopK { k: 2 }),
        SeqwiseCase::dense(
            2,
            2,
            vec![EPS / 2.0, -EPS / 2.0, 0.25, 0.5],
            Objective::ProvidedMap { map: vec![true, false, false, true] },
        ),
        SeqwiseCase {
            layout: Layout { offset: 3, row_stride: 5 },
            padding: Some(vec![false, true, false]),
            ..SeqwiseCase::dense(
                3,
                3,
                vec![0.5, 0.25, 0.125, nan, f32::INFINITY, nan, 0.0, -0.0, 1.0],
                Objective::UnbiasedTopK { k: 1 },
            )
        },
    ];
    for profile in SeqwiseProfile::all() {
        for (i, case) in cases.iter().enumerate() {
            for tie in [ClampTie::Strict, ClampTie::Inclusive] {
                let case = SeqwiseCase { clamp_tie: tie, ..case.clone() };
                let d = seqwise_diff(&SeqwiseModel::new(profile.clone()), &case);
                assert!(d.is_none(), "{} case {i} {tie:?}: {d:?}", profile.name);
            }
        }
    }
}

#[test]
fn every_seqwise_bug_differs_from_the_oracle() {
    let cfg = GenConfig::default();
    let cases: Vec<SeqwiseCase> = {
        let mut rng = rng();
        (0..BUG_SEARCH).map(|_| generate(&mut rng, &cfg)).collect()
    };
    for bug in SeqwiseBug::ALL {
        let model = SeqwiseModel::planted(bug);
        assert_eq!(model.profile, SeqwiseProfile::serial());
        let found = cases.iter().enumerate().find_map(|(i, c)| seqwise_diff(&model, c).map(|d| (i, c, d)));
        match found {
            Some((i, c, d)) => println!("{:<22} case {i:>4} ({}x{}): {d}", bug.name(), c.t, c.e),
            None => panic!("{} agrees with the oracle on {BUG_SEARCH} generated cases", bug.name()),
        }
    }
}

#[test]
fn seqwise_model_refuses_what_it_does_not_implement() {
    let case = SeqwiseCase::dense(1, 2, vec![0.5, 0.25], oracles::case::seqwise_loss::Objective::UnbiasedTopK { k: 1 });
    type Edit = fn(&mut SeqwiseProfile);
    let with = |f: Edit| {
        let mut p = SeqwiseProfile::gpu();
        f(&mut p);
        SeqwiseModel::new(p)
    };
    let unsupported: [(Edit, &str); 3] = [
        (|p| p.q = Butterfly, "Butterfly"),
        (|p| p.tokens = ReductionOrder::chunked(64, Serial, Butterfly), "Chunked{64, Serial, Butterfly}"),
        (|p| p.row = ReductionOrder::strided(32, Butterfly, Butterfly), "Strided{32, Butterfly, Butterfly}"),
    ];
    for (f, name) in unsupported {
        let m = with(f);
        for r in [m.forward(&case).map(|_| ()), m.backward(&case).map(|_| ())] {
            match r {
                Err(ModelError::Unsupported(msg)) => assert!(msg.contains(name), "{msg}"),
                other => panic!("{name}: {other:?}"),
            }
        }
    }
    // A size of 0 makes the profile invalid, not merely unsupported.
    let m = with(|p| p.tokens = ReductionOrder::chunked(0, Serial, Serial));
    assert!(matches!(m.forward(&case), Err(ModelError::Invalid(_))));
    // An invalid case is refused as the oracle refuses it.
    let mut bad = case.clone();
    bad.layout.offset = 4;
    let m = SeqwiseModel::new(SeqwiseProfile::serial());
    assert!(matches!(m.forward(&bad), Err(ModelError::Invalid(_))));
    assert!(matches!(m.backward(&bad), Err(ModelError::Invalid(_))));
    assert!(oracle::forward(&bad, &SeqwiseProfile::serial()).is_err());
}

// ---------------------------------------------------------------- router

/// A router case: T x E logits, dense, no padding, no loss, route_norm,
/// route_scale 2.5, gw all 1.
fn router_case(
    t: usize,
    e: usize,
    groups: usize,
    topk_groups: usize,
    k: usize,
    logits: Vec<f32>,
    bias: Vec<f32>,
) -> RouterCase {
    RouterCase {
        t,
        e,
        layout: Layout::dense(e),
        logits,
        bias,
        groups,
        topk_groups,
        k,
        route_scale: 2.5,
        route_norm: true,
        padding: None,
        gw: vec![1.0; t * k],
        loss: None,
    }
}

fn serial() -> RouterModel {
    RouterModel::new(RouterProfile::serial())
}

fn ids_of(f: &RouterForward<f32>) -> Vec<u32> {
    f.ids.clone()
}

fn bits(xs: &[f32]) -> Vec<u32> {
    xs.iter().map(|x| x.to_bits()).collect()
}

/// Asserts f32 values bit for bit (NaN matching NaN).
#[track_caller]
fn assert_bits(got: &[f32], want: &[f32]) {
    assert!(first_difference(got, want).is_none(), "got {got:?} ({:x?}), want {want:?}", bits(got));
}

#[test]
fn router_selects_groups_then_experts() {
    // E = 8 in G = 4 groups of 2, L = 2, k = 2; every logit 0, so s = 1/2
    // (exp(0) = 1 exactly) and u = 1/2 + bias, all exact:
    // u = (0.75, 0.5 | 0.625, 0.625 | 0.75, 0.5 | 0.0, 1.0).
    // Group scores (two largest, summed): 1.25, 1.25, 1.25, 1.0: a three-way
    // tie, the lower indices win: groups 0 and 1 are kept (expert 7 has the
    // largest u of all, expert 4 ties expert 0: neither is in a kept group).
    // Among experts 0..3: 0 (0.75), then 2 and 3 tie at 0.625: 2.
    let bias = vec![0.25, 0.0, 0.125, 0.125, 0.25, 0.0, -0.5, 0.5];
    let c = router_case(1, 8, 4, 2, 2, vec![0.0; 8], bias.clone());
    for profile in RouterProfile::all() {
        let f = RouterModel::new(profile).forward(&c).unwrap();
        assert_eq!(ids_of(&f), vec![0, 2]);
        // w = s = 1/2 each; D = 1 + 1e-20 = 1 in f32; w / D * 2.5 = 1.25.
        assert_bits(&f.weights, &[1.25, 1.25]);
        assert_eq!(f.map, vec![true, false, true, false, false, false, false, false]);
        assert_eq!(f.counts, vec![1, 0, 1, 0, 0, 0, 0, 0]);
        assert_bits(&f.scores, &[0.5; 8]);
    }
    // L = G: every group kept, the plain top-k of u: 7 (1.0), then 0 and 4
    // tie at 0.75: 0.
    let c = router_case(1, 8, 4, 4, 2, vec![0.0; 8], bias.clone());
    assert_eq!(ids_of(&serial().forward(&c).unwrap()), vec![0, 7]);
    // L = 1 with k = E/G: the whole first of the tied groups.
    let c = router_case(1, 8, 4, 1, 2, vec![0.0; 8], bias);
    assert_eq!(ids_of(&serial().forward(&c).unwrap()), vec![0, 1]);
}

#[test]
fn router_ranks_nan_above_every_number() {
    let nan = f32::NAN;
    let bias = vec![0.25, 0.0, 0.125, 0.125, 0.25, 0.0, -0.5, 0.5];
    // Expert 5's logit is NaN: s, u and group 2's score are NaN, so group 2
    // ranks first; then group 0 (the lower of the 1.25 ties). Among experts
    // 0, 1, 4, 5 (u = 0.75, 0.5, 0.75, NaN): 5 first, then 0 (tie with 4).
    let mut logits = vec![0.0; 8];
    logits[5] = nan;
    let c = router_case(1, 8, 4, 2, 2, logits, bias.clone());
    let f = serial().forward(&c).unwrap();
    assert_eq!(ids_of(&f), vec![0, 5]);
    // D = 1/2 + NaN = NaN: both weights NaN; s[5] NaN.
    assert!(f.weights.iter().all(|w| w.is_nan()));
    assert!(f.scores[5].is_nan() && f.scores[4] == 0.5);
    // Two NaN groups (experts 3 and 6), L = 1: the lower group (1) is kept;
    // in it, NaN (3) above 0.625 (2): k = 1 gives 3.
    let mut logits = vec![0.0; 8];
    logits[3] = nan;
    logits[6] = nan;
    let c = router_case(1, 8, 4, 1, 1, logits.clone(), bias.clone());
    assert_eq!(ids_of(&serial().forward(&c).unwrap()), vec![3]);
    // L = 2 keeps groups 1 and 3, k = 2: the two NaNs, lower index first
    // among equals, both chosen: 3 and 6 (not 7, u = 1.0).
    let c = router_case(1, 8, 4, 2, 2, logits, bias);
    assert_eq!(ids_of(&serial().forward(&c).unwrap()), vec![3, 6]);
    // Three NaNs in one group of 4, k = 2: the two lowest NaN indices.
    let c = router_case(1, 4, 1, 1, 2, vec![0.0, nan, nan, nan], vec![0.0; 4]);
    assert_eq!(ids_of(&serial().forward(&c).unwrap()), vec![1, 2]);
}

#[test]
fn router_weights_by_hand() {
    let inf = f32::INFINITY;
    // s = 1/(1 + exp(-x)): x = 0 gives 1/2; x = +inf gives 1/(1 + 0) = 1;
    // x = -inf gives 1/(1 + inf) = +0.0; x = 100 gives 1 (exp(-100) =
    // 3.7e-44 vanishes next to 1); x = -100 gives +0.0 (exp(100) overflows).
    let c = router_case(1, 4, 2, 2, 3, vec![0.0, inf, -inf, 0.0], vec![0.0; 4]);
    let f = serial().forward(&c).unwrap();
    assert_bits(&f.scores, &[0.5, 1.0, 0.0, 0.5]);
    // Top 3 of u = s: 1 (1.0), then 0 and 3 (0.5). w0 = (0.5, 1, 0.5),
    // D = 2 + 1e-20 = 2, w / D = (0.25, 0.5, 0.25), times 2.5.
    assert_eq!(ids_of(&f), vec![0, 1, 3]);
    assert_bits(&f.weights, &[0.625, 1.25, 0.625]);
    // Without route_norm: s * 2.5.
    let plain = RouterCase { route_norm: false, ..c.clone() };
    assert_bits(&serial().forward(&plain).unwrap().weights, &[1.25, 2.5, 1.25]);
    // A route_scale of 1 and route_norm: w / D.
    let unit = RouterCase { route_scale: 1.0, ..c };
    assert_bits(&serial().forward(&unit).unwrap().weights, &[0.25, 0.5, 0.25]);
    // Every score underflows to +0.0: D = 0 + 1e-20 = 1e-20, w = 0 / 1e-20
    // = +0.0 (not 0/0); ties to the lower indices.
    let c = router_case(1, 4, 2, 1, 2, vec![-inf, -100.0, -inf, -inf], vec![0.0; 4]);
    let f = serial().forward(&c).unwrap();
    assert_bits(&f.scores, &[0.0; 4]);
    assert_eq!(ids_of(&f), vec![0, 1]);
    assert_bits(&f.weights, &[0.0, 0.0]);
    // x = 100 and -100.
    let c = router_case(1, 2, 1, 1, 1, vec![100.0, -100.0], vec![0.0; 2]);
    assert_bits(&serial().forward(&c).unwrap().scores, &[1.0, 0.0]);
}

#[test]
fn router_sigmoid_rounds_each_operation() {
    // s = 1/(1 + e) with e = exp(-x) correctly rounded, then the add, then
    // the division, each rounded to f32. exp_f32 is the verified leaf; the
    // add and the division are checked here in f64, where 1 + e is exact
    // (e in (2^-10, 2^10), 24 bits each) and the f64 quotient is within
    // 2^-53 relative of 1/(1 + e): the f32 result must be the f32 nearest
    // to it, and its neighbours must be farther.
    for x in [0.5f32, -0.5, 1.0, -1.0, 3.25, -3.25, 0.1, -6.0, 6.0] {
        let e = oracles::expf::exp_f32(-x);
        let sum = 1.0f64 + e as f64;
        let sum32 = sum as f32; // the add, rounded once
        let exact = 1.0 / sum32 as f64;
        let c = router_case(1, 2, 1, 1, 1, vec![x, 0.0], vec![0.0; 2]);
        let s = serial().forward(&c).unwrap().scores[0];
        let err = |y: f32| (y as f64 - exact).abs();
        assert!(err(s) < err(s.next_up()) && err(s) < err(s.next_down()), "x = {x}: s = {s}");
    }
}

/// The gradient case: E = 4 in 2 groups of 2, L = 2, k = 2, logits 0
/// (s = 1/2), bias (0.25, 0, 0, 0.125): u = (0.75, 0.5, 0.5, 0.625), group
/// scores 1.25 and 1.125, both kept; experts 0 and 3. gw = (1, 2).
fn gradient_case() -> RouterCase {
    RouterCase { gw: vec![1.0, 2.0], ..router_case(1, 4, 2, 2, 2, vec![0.0; 4], vec![0.25, 0.0, 0.0, 0.125]) }
}

#[test]
fn router_route_gradient_by_hand() {
    let c = gradient_case();
    for profile in RouterProfile::all() {
        let m = RouterModel::new(profile);
        assert_eq!(ids_of(&m.forward(&c).unwrap()), vec![0, 3]);
        // w0 = (1/2, 1/2), D = 1 (+ 1e-20 vanishes); a = 2.5 * gw = (2.5, 5);
        // q = -(2.5 * (1/2 / 1 / 1)) + -(5 * 1/2) = -1.25 - 2.5 = -3.75;
        // r = a / D + q = (-1.25, 1.25). No loss: gs = r + 0 on the chosen,
        // +0.0 elsewhere; grad = (gs * (1 - 1/2)) * 1/2 = gs / 4.
        let b = m.backward(&c).unwrap();
        assert_bits(&b.grad, &[-0.3125, 0.0, 0.0, 0.3125]);
        // Without route_norm: r = 2.5 * gw = (2.5, 5), grad = r / 4.
        let plain = RouterCase { route_norm: false, ..c.clone() };
        assert_bits(&m.backward(&plain).unwrap().grad, &[0.625, 0.0, 0.0, 1.25]);
    }
    // gw = -0.0 without route_norm: r = -0.0, gs = r + (+0.0) = +0.0 (the
    // spec's sum, with l = +0.0), grad +0.0; unchosen +0.0 too.
    let neg = RouterCase { route_norm: false, gw: vec![-0.0, -0.0], ..c };
    assert_eq!(bits(&serial().backward(&neg).unwrap().grad), vec![0; 4]);
}

#[test]
fn router_fused_loss_gradient_by_hand() {
    // Two tokens with the gradient case's logits; token 1 is padding: it is
    // routed (weights, route gradient) but counts nothing and gets no loss
    // gradient.
    let one = gradient_case();
    let c = RouterCase {
        t: 2,
        logits: [one.logits.clone(), one.logits.clone()].concat(),
        gw: vec![1.0, 2.0, 1.0, 2.0],
        padding: Some(vec![false, true]),
        loss: Some(FusedLoss { clamp_tie: ClampTie::Strict, g: 1.0 }),
        ..one
    };
    for profile in RouterProfile::all() {
        let m = RouterModel::new(profile.clone());
        let f = m.forward(&c).unwrap();
        assert_eq!(ids_of(&f), vec![0, 3, 0, 3]);
        assert_eq!(f.counts, vec![1, 0, 0, 1], "padding counts nothing");
        assert_eq!(f.map, vec![true, false, false, true, true, false, false, true], "padding is routed");
        // The loss on token 0: c = (1, 0, 0, 1), C = 2, f = (c / 2) * 4 =
        // (2, 0, 0, 2), a = g * f. n = 4 * 1/2 = 2 > eps: d = 2, gate open.
        // q_t = sum -(a_e * ((1/2 / 2) / 2)) = -(2/8) - 0 - 0 - (2/8) = -0.5;
        // l = a / d + sgn(1/2) * q_t = (1 - 0.5, -0.5, -0.5, 1 - 0.5).
        // gs = (r_0 + l_0, l_1, l_2, r_3 + l_3) = (-0.75, -0.5, -0.5, 1.75);
        // grad = gs / 4. Token 1: the route part alone (as without a loss).
        let b = m.backward(&c).unwrap();
        assert_bits(&b.grad, &[-0.1875, -0.125, -0.125, 0.4375, -0.3125, 0.0, 0.0, 0.3125]);
    }
    // Every token padding: C = 0 (f = 0 / eps * 4 = 0): the loss adds
    // nothing, the route gradient stays.
    let all_pad = RouterCase { padding: Some(vec![true, true]), ..c };
    let b = serial().backward(&all_pad).unwrap();
    assert_bits(&b.grad, &[-0.3125, 0.0, 0.0, 0.3125, -0.3125, 0.0, 0.0, 0.3125]);
    assert_eq!(serial().forward(&all_pad).unwrap().counts, vec![0; 4]);
}

#[test]
fn router_reads_the_real_storage() {
    // The same logits at offset 3, stride E + 3: identical bits (the gaps
    // hold NaN poison, which a misread would carry).
    let c = RouterCase {
        gw: (0..8).map(|i| i as f32 * 0.375 - 1.0).collect(),
        loss: Some(FusedLoss { clamp_tie: ClampTie::Inclusive, g: 0.75 }),
        ..router_case(2, 8, 4, 2, 4, (0..16).map(|i| (i as f32 - 7.5) * 0.4375).collect(), vec![0.0; 8])
    };
    let moved = RouterCase { layout: Layout { offset: 3, row_stride: 11 }, ..c.clone() };
    let (a, b) = (serial().forward(&c).unwrap(), serial().forward(&moved).unwrap());
    assert_eq!(a.ids, b.ids);
    assert_bits(&a.weights, &b.weights);
    assert_bits(&a.scores, &b.scores);
    assert!(a.scores.iter().all(|s| !s.is_nan()));
    assert_bits(&serial().backward(&c).unwrap().grad, &serial().backward(&moved).unwrap().grad);
}

#[test]
fn router_model_refuses_what_it_does_not_implement() {
    let c = gradient_case();
    let mut p = RouterProfile::serial();
    p.norm = Butterfly;
    match RouterModel::new(p).forward(&c) {
        Err(ModelError::Unsupported(m)) => assert!(m.contains("Butterfly") && m.contains("D"), "{m}"),
        other => panic!("{other:?}"),
    }
    let mut p = RouterProfile::gpu();
    p.loss.q = ReductionOrder::chunked(8, Butterfly, Serial);
    assert!(matches!(RouterModel::new(p).backward(&c), Err(ModelError::Unsupported(_))));
    let mut p = RouterProfile::serial();
    p.q = ReductionOrder::strided(0, Serial, Butterfly);
    assert!(matches!(RouterModel::new(p).backward(&c), Err(ModelError::Invalid(_))));
    let bad = RouterCase { groups: 3, ..c.clone() };
    assert!(matches!(serial().forward(&bad), Err(ModelError::Invalid(_))));
    let bad = RouterCase { gw: vec![1.0], ..c };
    assert!(matches!(serial().backward(&bad), Err(ModelError::Invalid(_))));
}

/// Every output in which two router forwards differ, with its first
/// difference.
fn router_forward_diff(a: &RouterForward<f32>, b: &RouterForward<f32>) -> Vec<String> {
    let mut out = Vec::new();
    if a.ids != b.ids {
        out.push(format!("ids {:?} vs {:?}", a.ids, b.ids));
    }
    if a.map != b.map {
        out.push("map".into());
    }
    if a.counts != b.counts {
        out.push(format!("counts {:?} vs {:?}", a.counts, b.counts));
    }
    if let Some((i, x, y)) = first_difference(&a.weights, &b.weights) {
        out.push(format!("weights[{i}] {x:e} vs {y:e}"));
    }
    if let Some((i, x, y)) = first_difference(&a.scores, &b.scores) {
        out.push(format!("scores[{i}] {x:e} vs {y:e}"));
    }
    out
}

fn router_backward_diff(a: &RouterBackward<f32>, b: &RouterBackward<f32>) -> Option<String> {
    first_difference(&a.grad, &b.grad).map(|(i, x, y)| format!("grad[{i}] {x:e} vs {y:e}"))
}

/// A case with nothing special: varied logits, bias, gw, a padding token,
/// a fused loss.
fn varied_case() -> RouterCase {
    let (t, e, k) = (4, 16, 4);
    RouterCase {
        logits: (0..t * e).map(|i| ((i * 37 % 23) as f32 - 11.0) * 0.37 + (i % 5) as f32 * 0.011).collect(),
        bias: (0..e).map(|i| ((i * 7 % 5) as f32 - 2.0) * 0.0625).collect(),
        gw: (0..t * k).map(|i| ((i * 11 % 7) as f32 - 3.0) * 0.3).collect(),
        padding: Some(vec![false, false, true, false]),
        loss: Some(FusedLoss { clamp_tie: ClampTie::Strict, g: 0.7 }),
        ..router_case(t, e, 4, 2, k, vec![], vec![])
    }
}

/// The case each router bug is caught on, and which output shows it.
fn bug_case(bug: RouterBug) -> (RouterCase, &'static str) {
    let inf = f32::INFINITY;
    match bug {
        // bias != 0: w0 = u = (0.75, 0.625) instead of s = (0.5, 0.5).
        RouterBug::BiasInWeights => (gradient_case(), "weights"),
        // u = (0.9, 0.0 | 0.8, 0.7), L = 1, k = 1: the top-2 sums (0.9 vs
        // 1.5) keep group 1 and choose expert 2; the top-1 (0.9 vs 0.8)
        // keeps group 0 and chooses expert 0.
        RouterBug::GroupTop1 => (router_case(1, 4, 2, 1, 1, vec![0.0; 4], vec![0.4, -0.5, 0.3, 0.2]), "ids"),
        // Every u equal: expert 0 (group 0), or expert 3 (group 1) from the top.
        RouterBug::TiesHigh => (router_case(1, 4, 2, 1, 1, vec![0.0; 4], vec![0.0; 4]), "ids"),
        // w0 = (t, 1, t), t = s(-17) in (2^-25, 2^-24): serially (t + 1) + t
        // = 1 (each t is below half an ulp of 1); the butterfly pairs
        // t + t = 2t first, and 1 + 2t rounds up to 1 + 2^-23: D differs.
        RouterBug::NormOrder => (router_case(1, 4, 1, 1, 3, vec![-17.0, 100.0, -17.0, -50.0], vec![0.0; 4]), "weights"),
        // The sigmoid of varied logits through __expf: s differs.
        RouterBug::FastExp => (varied_case(), "scores"),
        // (s * (1 - s)) * gs vs (gs * (1 - s)) * s on varied values.
        RouterBug::SigmoidGradAssoc => (varied_case(), "grad"),
        // Token 2 is padding: its choices counted.
        RouterBug::PaddingCounted => (varied_case(), "counts"),
        // Every score underflows: D = 0 and 0 / 0 = NaN instead of 0 / 1e-20 = 0.
        RouterBug::NormWithoutEps => (router_case(1, 4, 2, 1, 2, vec![-inf; 4], vec![0.0; 4]), "weights"),
        // (w * 2.5) / D vs (w / D) * 2.5 on varied values.
        RouterBug::ScaleBeforeNorm => (varied_case(), "weights"),
    }
}

#[test]
fn every_router_bug_differs_from_the_correct_model() {
    for bug in RouterBug::ALL {
        let (case, output) = bug_case(bug);
        let buggy = RouterModel::planted(bug);
        assert_eq!(buggy.profile, RouterProfile::serial());
        let (good_f, bad_f) = (serial().forward(&case).unwrap(), buggy.forward(&case).unwrap());
        let (good_b, bad_b) = (serial().backward(&case).unwrap(), buggy.backward(&case).unwrap());
        let f = router_forward_diff(&bad_f, &good_f);
        let b = router_backward_diff(&bad_b, &good_b);
        println!("{:<20} forward: {f:?}; backward: {b:?}", bug.name());
        let shown = match output {
            "grad" => b.is_some(),
            _ => f.iter().any(|d| d.starts_with(output)),
        };
        assert!(shown, "{}: no difference in {output} (forward {f:?}, backward {b:?})", bug.name());
    }
}

#[test]
fn the_correct_router_model_is_stable_on_the_bug_cases() {
    // The bug cases themselves: both profiles agree (every sum there is
    // serial in both, or exact), and a second run gives the same bits.
    for bug in RouterBug::ALL {
        let (case, _) = bug_case(bug);
        let (a, b) = (serial().forward(&case).unwrap(), RouterModel::new(RouterProfile::gpu()).forward(&case).unwrap());
        assert_eq!(router_forward_diff(&a, &b), Vec::<String>::new(), "{}", bug.name());
        let again = serial().backward(&case).unwrap();
        assert_eq!(router_backward_diff(&serial().backward(&case).unwrap(), &again), None);
    }
}

// ---------------------------------------------------------- shared_expert

mod shared_expert {
    use super::first_difference;
    use bitparity::gen::shared_expert::generate;
    use bitparity::gen::GenConfig;
    use bitparity::model::{ModelError, SharedExpertModel};
    use bitparity::planted::SharedExpertBug;
    use oracles::case::shared_expert::SharedExpertCase;
    use oracles::op::shared_expert::SharedExpert;
    use oracles::order::ReductionOrder;
    use oracles::profile::shared_expert::SharedExpertProfile;
    use proptest::test_runner::{RngAlgorithm, TestRng};

    /// Where a model and the profile oracle differ on a case (y, then dX).
    fn diff(model: &SharedExpertModel, case: &SharedExpertCase) -> Option<String> {
        let p = &model.profile;
        let (f, b) = (model.forward(case).unwrap(), model.backward(case).unwrap());
        let ef = oracles::op::forward::<SharedExpert>(case, p).unwrap();
        let eb = oracles::op::backward::<SharedExpert>(case, p).unwrap();
        if let Some((i, x, y)) = first_difference(&f.y, &ef.y) {
            return Some(format!("y[{i}] {x:e} vs {y:e}"));
        }
        first_difference(&b.dx, &eb.dx).map(|(i, x, y)| format!("dx[{i}] {x:e} vs {y:e}"))
    }

    fn cases(n: usize) -> Vec<SharedExpertCase> {
        let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
        (0..n).map(|_| generate(&mut rng, &GenConfig::default())).collect()
    }

    #[test]
    fn model_matches_the_oracle_bitwise() {
        let model = SharedExpertModel::new(SharedExpertProfile::serial());
        for (i, c) in cases(2000).iter().enumerate() {
            if let Some(d) = diff(&model, c) {
                panic!("case {i} (T={} H={} F={}): {d}\n{}", c.t, c.h, c.f, serde_json::to_string(c).unwrap());
            }
        }
    }

    /// The tensor-core profile: the model's blocks of 16 (its own loop over
    /// k) against the oracle's chains, every bit, undecided outputs
    /// included (both run the same step). And the profile is not `serial`
    /// under another name: its bits differ on some of these cases.
    #[test]
    fn the_mma_model_matches_the_mma_oracle_bitwise() {
        let model = SharedExpertModel::new(SharedExpertProfile::mma_h100());
        let serial = SharedExpertModel::new(SharedExpertProfile::serial());
        let mut differs_from_serial = 0;
        for (i, c) in cases(500).iter().enumerate() {
            if let Some(d) = diff(&model, c) {
                panic!("case {i} (T={} H={} F={}): {d}\n{}", c.t, c.h, c.f, serde_json::to_string(c).unwrap());
            }
            let (a, b) = (model.backward(c).unwrap(), serial.backward(c).unwrap());
            differs_from_serial += usize::from(first_difference(&a.dx, &b.dx).is_some());
        }
        assert!(differs_from_serial > 50, "{differs_from_serial} of 500 cases tell mma16-h100 from serial");
    }

    #[test]
    fn every_bug_differs_from_the_oracle() {
        let cases = cases(2000);
        for bug in SharedExpertBug::ALL {
            let model = SharedExpertModel::planted(bug);
            match cases.iter().enumerate().find_map(|(i, c)| diff(&model, c).map(|d| (i, d))) {
                Some((i, d)) => println!("{:<18} case {i:>4}: {d}", bug.name()),
                None => panic!("{} agrees with the oracle on 2000 generated cases", bug.name()),
            }
        }
    }

    #[test]
    fn model_refuses_other_orders_and_invalid_cases() {
        let case = cases(1).remove(0);
        let mut p = SharedExpertProfile::serial();
        p.dx = ReductionOrder::chunked(4, ReductionOrder::Serial, ReductionOrder::Serial);
        match SharedExpertModel::new(p).backward(&case) {
            Err(ModelError::Unsupported(m)) => assert!(m.contains("dX") && m.contains("Chunked"), "{m}"),
            other => panic!("{other:?}"),
        }
        let mut p = SharedExpertProfile::serial();
        p.z = ReductionOrder::chunked(0, ReductionOrder::Serial, ReductionOrder::Serial);
        assert!(matches!(SharedExpertModel::new(p).forward(&case), Err(ModelError::Invalid(_))));
        let mut bad = case.clone();
        bad.x[0] = 1.0 + f32::EPSILON;
        let m = SharedExpertModel::new(SharedExpertProfile::serial());
        assert!(matches!(m.forward(&bad), Err(ModelError::Invalid(_))));
        assert!(matches!(m.backward(&bad), Err(ModelError::Invalid(_))));
    }
}

// ------------------------------------------------------------ moe_combine

mod moe_combine {
    use super::first_difference;
    use bitparity::gen::moe_combine::generate;
    use bitparity::gen::GenConfig;
    use bitparity::model::{ModelError, MoeCombineModel};
    use bitparity::planted::MoeCombineBug;
    use oracles::case::moe_combine::MoeCombineCase;
    use oracles::op::moe_combine::MoeCombine;
    use oracles::order::ReductionOrder;
    use oracles::profile::moe_combine::MoeCombineProfile;
    use proptest::test_runner::{RngAlgorithm, TestRng};

    /// Where a model and the profile oracle of its profile differ on a case:
    /// the dispatch, then x_disp, y, dx_exp, dw, dx.
    fn diff(model: &MoeCombineModel, case: &MoeCombineCase) -> Option<String> {
        let p = &model.profile;
        let (f, b) = (model.forward(case).unwrap(), model.backward(case).unwrap());
        let ef = oracles::op::forward::<MoeCombine>(case, p).unwrap();
        let eb = oracles::op::backward::<MoeCombine>(case, p).unwrap();
        if f.slot != ef.slot || f.counts != ef.counts {
            return Some(format!("slots {:?} counts {:?} vs {:?} {:?}", f.slot, f.counts, ef.slot, ef.counts));
        }
        for (name, a, e) in [
            ("x_disp", &f.x_disp, &ef.x_disp),
            ("y", &f.y, &ef.y),
            ("dx_exp", &b.dx_exp, &eb.dx_exp),
            ("dw", &b.dw, &eb.dw),
            ("dx", &b.dx, &eb.dx),
        ] {
            if let Some((i, x, y)) = first_difference(a, e) {
                return Some(format!("{name}[{i}] {x:e} vs {y:e}"));
            }
        }
        None
    }

    fn cases(n: usize) -> Vec<MoeCombineCase> {
        let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
        (0..n).map(|_| generate(&mut rng, &GenConfig::default())).collect()
    }

    /// Every shipped profile, every output, on generated cases; and the
    /// profiles are not one another under other names: by-slot and
    /// serial-bf16 each differ from serial on some of them.
    #[test]
    fn model_matches_the_oracle_bitwise_under_every_profile() {
        let cases = cases(1500);
        let serial = MoeCombineModel::new(MoeCombineProfile::serial());
        for p in MoeCombineProfile::all() {
            let model = MoeCombineModel::new(p.clone());
            let mut differs = 0;
            for (i, c) in cases.iter().enumerate() {
                if let Some(d) = diff(&model, c) {
                    panic!("{} case {i}: {d}\n{}", p.name, serde_json::to_string(c).unwrap());
                }
                let (a, b) = (model.forward(c).unwrap(), serial.forward(c).unwrap());
                differs += usize::from(first_difference(&a.y, &b.y).is_some());
            }
            println!("{}: y differs from serial on {differs} of {} cases", p.name, cases.len());
            if p.name != "serial" {
                assert!(differs > 20, "{}: {differs} cases tell it from serial", p.name);
            }
        }
    }

    #[test]
    fn every_bug_differs_from_the_oracle() {
        let cases = cases(1500);
        for bug in MoeCombineBug::ALL {
            let model = MoeCombineModel::planted(bug);
            let caught = cases.iter().filter(|c| diff(&model, c).is_some()).count();
            println!("{:<22} differs on {caught} of {}", bug.name(), cases.len());
            assert!(
                caught * 20 >= cases.len(),
                "{} differs on {caught} of {} generated cases",
                bug.name(),
                cases.len()
            );
        }
    }

    #[test]
    fn model_refuses_other_orders_and_invalid_cases() {
        let case = cases(1).remove(0);
        let mut p = MoeCombineProfile::serial();
        p.dw = ReductionOrder::Butterfly;
        match MoeCombineModel::new(p).backward(&case) {
            Err(ModelError::Unsupported(m)) => assert!(m.contains("dw") && m.contains("Butterfly"), "{m}"),
            other => panic!("{other:?}"),
        }
        let mut bad = case.clone();
        bad.x[0] = 1.0 + f32::EPSILON;
        let m = MoeCombineModel::new(MoeCombineProfile::serial());
        assert!(matches!(m.forward(&bad), Err(ModelError::Invalid(_))));
        assert!(matches!(m.backward(&bad), Err(ModelError::Invalid(_))));
    }

    /// The worked example of docs/ops/moe_combine.md (T = 4, H = 2, E = 4,
    /// k = 3, C = 2, token 1 padding), read from its page.
    fn worked() -> (MoeCombineCase, serde_json::Value) {
        let page = include_str!("../../docs/ops/moe_combine.md");
        let start = page.find("```json example").expect("the worked example") + "```json example".len();
        let end = start + page[start..].find("```").expect("its end");
        let v: serde_json::Value = serde_json::from_str(&page[start..end]).expect("the example parses");
        let case: MoeCombineCase = serde_json::from_value(v["case"].clone()).expect("the case parses");
        (case, v["profiles"].clone())
    }

    fn hex(v: &serde_json::Value) -> Vec<u32> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| oracles::case::hexf::parse(x.as_str().unwrap()).unwrap().to_bits())
            .collect()
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    #[test]
    fn the_worked_example_bit_for_bit_under_every_profile() {
        let (case, profiles) = worked();
        for p in MoeCombineProfile::all() {
            let want = &profiles[p.name.as_str()];
            let m = MoeCombineModel::new(p.clone());
            let (f, b) = (m.forward(&case).unwrap(), m.backward(&case).unwrap());
            let slot: Vec<i32> = serde_json::from_value(want["forward"]["slot"].clone()).unwrap();
            let counts: Vec<u32> = serde_json::from_value(want["forward"]["counts"].clone()).unwrap();
            assert_eq!((f.slot, f.counts), (slot, counts), "{}", p.name);
            assert_eq!(bits(&f.x_disp), hex(&want["forward"]["x_disp"]), "{}", p.name);
            assert_eq!(bits(&f.y), hex(&want["forward"]["y"]), "{}", p.name);
            assert_eq!(bits(&b.dx_exp), hex(&want["backward"]["dx_exp"]), "{}", p.name);
            assert_eq!(bits(&b.dw), hex(&want["backward"]["dw"]), "{}", p.name);
            assert_eq!(bits(&b.dx), hex(&want["backward"]["dx"]), "{}", p.name);
        }
    }

    /// Each bug on the worked example: the outputs it changes.
    #[test]
    fn each_bug_changes_the_worked_example_where_it_should() {
        let (case, _) = worked();
        let good = MoeCombineModel::new(MoeCombineProfile::serial());
        let (f, b) = (good.forward(&case).unwrap(), good.backward(&case).unwrap());
        let run = |bug| {
            let m = MoeCombineModel::planted(bug);
            (m.forward(&case).unwrap(), m.backward(&case).unwrap())
        };
        // Token 0's slots descending (6, 2, 0) add 1 first, as j order
        // does: the same bits here (see atomic_order_adds_the_slots_descending).
        let (bf, _) = run(MoeCombineBug::AtomicOrder);
        assert_eq!(bits(&bf.y), bits(&f.y));
        // Expert 0 keeps token 3's choice too.
        let (bf, _) = run(MoeCombineBug::CapacityOffByOne);
        assert_eq!(bf.counts, vec![3, 2, 2, 2]);
        // Expert 0: token 0 (j = 1), token 2 (j = 2), token 3 (j = 0): by j
        // first, token 3 takes slot 0.
        let (bf, _) = run(MoeCombineBug::ChoiceMajorSlots);
        assert_eq!(bf.slot[9], 0);
        let (bf, _) = run(MoeCombineBug::PaddingDispatched);
        assert!(bf.slot[3..6].iter().all(|&s| s >= 0), "{:?}", bf.slot);
        // dw over H = 2 is the same in any order: no change here.
        let (_, bb) = run(MoeCombineBug::DwOrder);
        assert_eq!(bits(&bb.dw), bits(&b.dw));
        // Token 3's dropped choice 0 reads expert 0's last kept slot (1):
        // dy[3] . x_exp[1] = -1 * 2^-7 + 3 * -1 = -3.0078125.
        let (_, bb) = run(MoeCombineBug::DroppedGrad);
        assert_eq!(bb.dw[9], -3.0078125);
        assert_eq!(bits(&bb.dw[..9]), bits(&b.dw[..9]));
        // The one inexact product (token 3's 1/3 * 0.75) is its token's
        // first term, which a fused multiply-add onto +0.0 rounds alone.
        let (bf, _) = run(MoeCombineBug::Fma);
        assert_eq!(bits(&bf.y), bits(&f.y));
    }
}
