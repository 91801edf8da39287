//! The two padding rules (oracles/src/padding.rs, docs/padding.md) on cases
//! small enough to derive by hand: what `mask` (native TorchTitan's) gives
//! where it differs from `skip` (bitparity's), the same bits where it must
//! not, and the MPFR and any-order references under `mask` agreeing with the
//! f32 oracle. Every expected value is derived in the comments.

use oracles::any_order::AnyOrder;
use oracles::case::router::{FusedLoss, RouterCase};
use oracles::case::seqwise_loss::{Objective, SeqwiseCase};
use oracles::case::Layout;
use oracles::mpfr::reference::{exact_forward_under, BackwardReference, ForwardReference};
use oracles::op::router::Router;
use oracles::op::seqwise_loss::SeqwiseLoss;
use oracles::op::{backward_under, forward_under, Op};
use oracles::padding::PaddingRule::{self, Mask, Skip};
use oracles::profile::router::RouterProfile;
use oracles::profile::seqwise_loss::SeqwiseProfile;
use oracles::vocab::ClampTie;

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Every profile a subject may claim, and the any-order one's f32 value.
fn seqwise_profiles() -> Vec<SeqwiseProfile> {
    let mut v = SeqwiseProfile::all();
    v.push(SeqwiseProfile::any_order());
    v
}

/// Row 0 valid [0.5, 0.5], row 1 padding `pad`, top-1 (row 0's tie goes to
/// expert 0): c = [1, 0], f = [2, 0], D_0 = 1 + 1e-20 = 1 in f32, so
/// P = [0.5, 0.5] from row 0 and skip's raw = 2 * 0.5 + 0 * 0.5 = 1.
fn poisoned(pad: [f32; 2]) -> SeqwiseCase {
    let mut c = SeqwiseCase::dense(2, 2, vec![0.5, 0.5, pad[0], pad[1]], Objective::UnbiasedTopK { k: 1 });
    c.padding = Some(vec![false, true]);
    c
}

#[test]
fn a_nan_or_inf_in_a_padding_row_makes_the_mask_loss_nan() {
    // Mask: the padding row's p_1e = s_1e / D_1 with D_1 NaN (NaN in the
    // row) or, for [inf, 1], D_1 = inf and p_10 = inf / inf = NaN; times 0.0
    // it stays NaN (NaN * 0 = NaN), so P_0 and raw are NaN. The counts and f
    // come from valid rows only: unchanged.
    for pad in [[f32::NAN, 1.0], [f32::INFINITY, 1.0], [1.0, f32::NAN]] {
        let c = poisoned(pad);
        for p in seqwise_profiles() {
            let skip = forward_under::<SeqwiseLoss>(&c, &p, Skip).unwrap();
            let mask = forward_under::<SeqwiseLoss>(&c, &p, Mask).unwrap();
            assert_eq!(skip.raw, 1.0, "{pad:?} {}", p.name);
            assert!(mask.raw.is_nan(), "{pad:?} {}: mask raw {}", p.name, mask.raw);
            assert_eq!((mask.counts, bits(&mask.freq)), (vec![1, 0], bits(&[2.0, 0.0])));
            // The padding row's gradient: a_e * 0.0 = +-0.0 over a NaN
            // denominator: NaN under mask, +0.0 under skip; the valid row's
            // is the same bits under both.
            let skip = backward_under::<SeqwiseLoss>(&c, &p, Skip).unwrap().grad;
            let mask = backward_under::<SeqwiseLoss>(&c, &p, Mask).unwrap().grad;
            assert_eq!(bits(&skip[2..]), [0, 0]);
            assert!(mask[2].is_nan() && mask[3].is_nan(), "{pad:?} {}: {mask:?}", p.name);
            assert_eq!(bits(&skip[..2]), bits(&mask[..2]));
        }
    }
    // The exact oracle under mask agrees: NaN.
    let x = exact_forward_under::<SeqwiseLoss>(&poisoned([f32::NAN, 1.0]), Mask, None).unwrap();
    assert!(x.out.raw.v.is_nan());
}

/// ProvidedMap, g = -1. Row 0 valid [0.5, 0.5] mapping expert 0, row 1
/// padding [-0.5, 0.25]: c = [1, 0], f = [2, 0], a = g * f = [-2, -0.0].
/// Mask, padding row: a' = a * 0.0 = [-0.0, -0.0]; n = 0.75 = d, gate
/// open; q = sum of -(a'_e * ((s_e / d) / d)) = -(+-0 * x) from +0.0 = +0.0
/// (every term +-0.0 and the serial sum starts at +0.0); grad_k = a'_k / d +
/// sgn(s_k) * q = -0.0 + (-1 * +0.0) = -0.0 for s = -0.5, and -0.0 +
/// (+1 * +0.0) = +0.0 for s = 0.25. Skip: +0.0 both.
fn negative_padding(g: f32) -> SeqwiseCase {
    let map = Objective::ProvidedMap { map: vec![true, false, true, true] };
    let mut c = SeqwiseCase::dense(2, 2, vec![0.5, 0.5, -0.5, 0.25], map);
    c.padding = Some(vec![false, true]);
    c.g = g;
    c
}

#[test]
fn a_negative_padding_score_with_a_negative_g_gives_minus_zero_under_mask() {
    let c = negative_padding(-1.0);
    let minus_zero = (-0.0f32).to_bits();
    for p in SeqwiseProfile::all() {
        let skip = backward_under::<SeqwiseLoss>(&c, &p, Skip).unwrap().grad;
        let mask = backward_under::<SeqwiseLoss>(&c, &p, Mask).unwrap().grad;
        assert_eq!(bits(&skip[2..]), [0, 0], "{}", p.name);
        assert_eq!(bits(&mask[2..]), [minus_zero, 0], "{}", p.name);
        assert_eq!(bits(&skip[..2]), bits(&mask[..2]), "{}: valid rows differ", p.name);
        // The forward: p_1e * 0.0 = [-0.0, +0.0] added to P_e changes no
        // bit (P_0 = 0.5 + -0.0 = 0.5, P_1 = 0.5 + 0.0).
        let (fs, fm) =
            (forward_under::<SeqwiseLoss>(&c, &p, Skip).unwrap(), forward_under::<SeqwiseLoss>(&c, &p, Mask).unwrap());
        assert_eq!((fs.raw.to_bits(), bits(&fs.freq)), (fm.raw.to_bits(), bits(&fm.freq)));
    }
    // g = +1: a' = [+0.0, +0.0], q = -(+0 * x) = [+0.0, -0.0] summed from
    // +0.0 = +0.0, grad = +0.0 + (-1 * +0.0) = +0.0 + -0.0 = +0.0: the
    // sign comes from g, not from the score alone.
    let mask = backward_under::<SeqwiseLoss>(&negative_padding(1.0), &SeqwiseProfile::serial(), Mask).unwrap();
    assert_eq!(bits(&mask.grad[2..]), [0, 0]);
}

#[test]
fn the_references_under_mask_hold_the_mask_oracle() {
    // The profile's bound (Bounded) and the any-order bound, each with the
    // exact result under mask, accept the f32 oracle's mask outputs.
    for c in [negative_padding(-1.0), negative_padding(3.0), poisoned([f32::NAN, 1.0])] {
        for p in SeqwiseProfile::all() {
            let f = forward_under::<SeqwiseLoss>(&c, &p, Mask).unwrap();
            let b = backward_under::<SeqwiseLoss>(&c, &p, Mask).unwrap();
            let fr = ForwardReference::<SeqwiseLoss>::under(&c, &p, Mask).unwrap().judge(&c, &f);
            let br = BackwardReference::<SeqwiseLoss>::under(&c, &p, Mask).unwrap().judge(&c, &b);
            assert!(fr.outside.is_empty() && br.outside.is_empty(), "{}: {fr:?} {br:?}", p.name);
        }
        let f = forward_under::<SeqwiseLoss>(&c, &SeqwiseProfile::any_order(), Mask).unwrap();
        let fr = ForwardReference::<SeqwiseLoss, AnyOrder>::any_order_under(&c, Mask).unwrap().judge(&c, &f);
        assert!(fr.outside.is_empty(), "{fr:?}");
        let b = backward_under::<SeqwiseLoss>(&c, &SeqwiseProfile::any_order(), Mask).unwrap();
        let br = BackwardReference::<SeqwiseLoss, AnyOrder>::any_order_under(&c, Mask).unwrap().judge(&c, &b);
        assert!(br.outside.is_empty(), "{br:?}");
    }
    // The rules differ only by a zero's sign (which accuracy does not judge)
    // or by NaN against a number (p * 0.0 is +-0.0 or NaN), which the
    // accuracy verdict counts as unbounded, never as passed: telling the
    // rules apart is conformance's job, bitwise.
    let c = poisoned([f32::NAN, 1.0]);
    let skip = forward_under::<SeqwiseLoss>(&c, &SeqwiseProfile::serial(), Skip).unwrap();
    let acc = ForwardReference::<SeqwiseLoss>::under(&c, &SeqwiseProfile::serial(), Mask).unwrap().judge(&c, &skip);
    assert!(acc.outside.is_empty() && acc.unbounded > 0, "{acc:?}");
}

/// Logits 0 give s = 0.5 exactly, -100 give s = +0.0 (e^100 overflows).
fn router_case(g: f32) -> RouterCase {
    RouterCase {
        t: 2,
        e: 2,
        layout: Layout::dense(2),
        logits: vec![0.0, -100.0, 0.0, -100.0],
        bias: vec![0.0, 0.0],
        groups: 1,
        topk_groups: 1,
        k: 1,
        route_scale: 1.0,
        route_norm: true,
        padding: Some(vec![false, true]),
        gw: vec![1.0, 1.0],
        loss: Some(FusedLoss { clamp_tie: ClampTie::Strict, g }),
    }
}

#[test]
fn the_router_fused_loss_under_mask_reaches_the_padding_row() {
    // Both tokens choose expert 0 (0.5 > 0); c = [1, 0] from the valid
    // token, f = [2, 0]. g = f32::MAX: a = [MAX * 2 = inf, MAX * 0 = +0].
    // Mask, padding token: a' = [inf * 0 = NaN, +0], so its loss part is
    // NaN (a'_0 / d, and q sums a NaN), and grad = (gs * (1 - s)) * s is
    // NaN. Skip: its loss part is absent; route part r = 1/D + q with
    // D = 0.5, q = -((1 * (0.5 / 0.5)) / 0.5) = -2: r = 0, grad_0 =
    // (0 * 0.5) * 0.5 = +0.0, grad_1 = (+0 * 1) * 0 = +0.0.
    let c = router_case(f32::MAX);
    for p in RouterProfile::all() {
        let skip = backward_under::<Router>(&c, &p, Skip).unwrap().grad;
        let mask = backward_under::<Router>(&c, &p, Mask).unwrap().grad;
        assert_eq!(bits(&skip[2..]), [0, 0], "{}", p.name);
        assert!(mask[2].is_nan() && mask[3].is_nan(), "{}: {mask:?}", p.name);
        assert_eq!(bits(&skip[..2]), bits(&mask[..2]), "{}: the valid token differs", p.name);
        // The forward has no loss output: the same under both rules.
        let (fs, fm) = (forward_under::<Router>(&c, &p, Skip).unwrap(), forward_under::<Router>(&c, &p, Mask).unwrap());
        assert_eq!((bits(&fs.weights), fs.counts), (bits(&fm.weights), fm.counts));
    }
    // A finite a: a' = +-0 and every s >= 0, so the padding token's loss
    // part is +0.0 (-0.0 / d + (sgn(s) * +0.0) = +0.0) and mask = skip.
    let c = router_case(-1.0);
    let p = RouterProfile::serial();
    let (skip, mask) =
        (backward_under::<Router>(&c, &p, Skip).unwrap(), backward_under::<Router>(&c, &p, Mask).unwrap());
    assert_eq!(bits(&skip.grad), bits(&mask.grad));
}

/// Both rules give the same bits wherever no row is padding.
fn same_without_padding<O: Op>(cases: &[O::Case], profiles: &[O::Profile]) {
    for c in cases {
        for p in profiles {
            let under = |r: PaddingRule| {
                let f = O::forward_under::<f32>(c, p, r, None).unwrap().out;
                let b = O::backward_under::<f32>(c, p, r, None).unwrap().out;
                format!("{:?}", (O::fwd_groups(c, &f), O::bwd_groups(c, &b)))
            };
            assert_eq!(under(Skip), under(Mask), "{c:?}");
        }
    }
}

#[test]
fn without_padding_rows_the_rules_agree() {
    let mut a = negative_padding(-1.0);
    a.padding = None;
    let mut b = poisoned([-3.0, 1e30]);
    b.padding = Some(vec![false, false]);
    same_without_padding::<SeqwiseLoss>(&[a, b], &SeqwiseProfile::all());
    let mut r = router_case(f32::MAX);
    r.padding = None;
    same_without_padding::<Router>(&[r], &RouterProfile::all());
}
