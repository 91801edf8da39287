//! Subjects that claim no profile (docs/ops/README.md#the-accuracy-bound):
//! judged by accuracy and gradient within the bound of every admissible
//! evaluation (any order and association of each sum, products possibly
//! contracted into FMAs; `oracles::any_order`). A correct subject in another
//! order, or with FMA, must pass; a wrong formula must fail; and what cannot be
//! judged (a clamp tie that either branch may take) is counted, never passed.

use bitparity::gen::GenConfig;
use bitparity::harness::{case_at, resolve, Harness, ResolveError};
use bitparity::props::{applies, judge, Property, References};
use bitparity::subject::{AnyOrderSubject, ProfileOracle, SubjectRef};
use oracles::op::router::Router;
use oracles::op::seqwise_loss::SeqwiseLoss;
use oracles::op::shared_expert::SharedExpert;
use oracles::order::ReductionOrder::{self, Butterfly, Serial};
use oracles::profile::router::RouterProfile;
use oracles::profile::seqwise_loss::SeqwiseProfile;
use oracles::profile::shared_expert::SharedExpertProfile;
use std::sync::Arc;

const SEED: u64 = 0xa11_0de5;

fn cfg() -> GenConfig {
    GenConfig { max_te: 512, ..GenConfig::default() }
}

fn hide<O: Harness>(s: SubjectRef<O>) -> SubjectRef<O> {
    Arc::new(AnyOrderSubject(s))
}

fn planted<O: Harness>(name: &str) -> SubjectRef<O> {
    match O::planted().into_iter().find(|b| b.name == name) {
        Some(b) => b.subject,
        None => panic!("{}: no planted bug {name}", O::NAME),
    }
}

/// The profile oracle of a profile no kernel ships (another order), seen
/// as claiming no profile.
fn other_order<O: Harness>(p: O::Profile) -> SubjectRef<O> {
    hide(Arc::new(ProfileOracle::<O>(p)))
}

/// Judged cases per property, and how many outputs were counted
/// undetermined.
#[derive(Default)]
struct Tally {
    judged: [usize; 2],
    undetermined: usize,
}

const PROPS: [Property; 2] = [Property::Accuracy, Property::Gradient];

/// Every subject passes accuracy and gradient on `n` generated cases, and
/// each property judged some of them.
fn all_pass<O: Harness>(subjects: &[SubjectRef<O>], n: u64) {
    let mut tallies: Vec<Tally> = subjects.iter().map(|_| Tally::default()).collect();
    for i in 0..n {
        let case = case_at::<O>(SEED, i, &cfg());
        let mut refs = References::<O>::default();
        for (s, t) in subjects.iter().zip(&mut tallies) {
            assert!(s.profile().is_none());
            for (k, p) in PROPS.into_iter().enumerate() {
                applies(p, s.as_ref()).unwrap_or_else(|e| panic!("{p} n/a for {}: {e}", s.name()));
                let j = judge(p, s.as_ref(), &case, &mut refs);
                if let Some(f) = j.failure {
                    panic!("{} {p} failed for {} on case {i} ({}): {f}", O::NAME, s.name(), O::describe(&case));
                }
                // Judged: outputs compared (a bf16 output equal to the exact
                // rounding has error 0), none left undetermined.
                if j.ratio.is_some() && j.undetermined == 0 {
                    t.judged[k] += 1;
                }
                t.undetermined += j.undetermined;
            }
        }
    }
    for (s, t) in subjects.iter().zip(&tallies) {
        assert!(t.judged.iter().all(|&j| j > n as usize / 2), "{}: judged only {:?} of {n}", s.name(), t.judged);
    }
}

/// Each subject fails accuracy or gradient within `n` generated cases.
fn all_fail<O: Harness>(subjects: &[SubjectRef<O>], n: u64) {
    let mut caught: Vec<Option<String>> = vec![None; subjects.len()];
    for i in 0..n {
        if caught.iter().all(Option::is_some) {
            break;
        }
        let case = case_at::<O>(SEED, i, &cfg());
        let mut refs = References::<O>::default();
        for (s, c) in subjects.iter().zip(&mut caught).filter(|(_, c)| c.is_none()) {
            for p in PROPS {
                if let Some(f) = judge(p, s.as_ref(), &case, &mut refs).failure {
                    *c = Some(format!("{p} at case {i}: {f}"));
                    break;
                }
            }
        }
    }
    let missed: Vec<String> =
        subjects.iter().zip(&caught).filter(|(_, c)| c.is_none()).map(|(s, _)| s.name()).collect();
    assert!(missed.is_empty(), "{}: not caught in {n} cases: {missed:?}", O::NAME);
}

fn seqwise(name: &str, o: ReductionOrder) -> SeqwiseProfile {
    SeqwiseProfile { name: name.into(), row: o.clone(), tokens: o.clone(), raw: o.clone(), q: o }
}

#[test]
fn seqwise_loss_in_other_orders_and_with_fma_passes() {
    let subjects: Vec<SubjectRef<SeqwiseLoss>> = vec![
        other_order(seqwise("pairwise", Butterfly)),
        other_order(seqwise("chunk7", ReductionOrder::chunked(7, Butterfly, Serial))),
        other_order(seqwise("strided5", ReductionOrder::strided(5, Serial, Serial))),
        hide(resolve::<SeqwiseLoss>("model:warp32-chunk64").unwrap().remove(0)),
        // Another order of q, and an FMA in the quotient term: both
        // admissible evaluations, which only conformance tells apart.
        hide(planted("wrong-order")),
        hide(planted("fma-quotient")),
    ];
    all_pass(&subjects, 300);
}

#[test]
fn router_in_other_orders_passes() {
    let p = RouterProfile {
        name: "pairwise".into(),
        norm: Butterfly,
        q: ReductionOrder::chunked(3, Butterfly, Serial),
        loss: seqwise("pairwise", Butterfly),
    };
    let subjects: Vec<SubjectRef<Router>> =
        vec![other_order(p), hide(resolve::<Router>("model:warp32").unwrap().remove(0)), hide(planted("norm-order"))];
    all_pass(&subjects, 200);
}

#[test]
fn shared_expert_split_k_and_fma_pass() {
    let split = |k| ReductionOrder::chunked(k, Serial, Butterfly);
    let p =
        SharedExpertProfile { name: "split".into(), z: split(3), y: split(2), dh: Butterfly, dx: split(5), mma: None };
    let subjects: Vec<SubjectRef<SharedExpert>> =
        vec![other_order(p), hide(planted("fma")), hide(planted("split-k")), hide(planted("small-t-split-k"))];
    all_pass(&subjects, 200);
}

#[test]
fn planted_formula_bugs_fail_when_judged_as_profile_less() {
    let seq: Vec<SubjectRef<SeqwiseLoss>> =
        ["unbiased-l1-backward", "padding-counted-in-c", "topk-ties-high", "offset-ignored"]
            .into_iter()
            .map(|b| hide(planted(b)))
            .collect();
    all_fail(&seq, 60);
    let router: Vec<SubjectRef<Router>> = ["bias-in-weights", "group-top1", "ties-high", "padding-counted", "fast-exp"]
        .into_iter()
        .map(|b| hide(planted(b)))
        .collect();
    all_fail(&router, 60);
    let se: Vec<SubjectRef<SharedExpert>> = ["bf16-truncate", "h-rounded-twice", "dx-rounded", "gate-up-swapped"]
        .into_iter()
        .map(|b| hide(planted(b)))
        .collect();
    all_fail(&se, 60);
}

#[test]
fn anyorder_names_resolve_to_profile_less_subjects() {
    let s = resolve::<SeqwiseLoss>("anyorder:model:serial").unwrap();
    assert_eq!(s.len(), 1);
    assert_eq!(s[0].name(), "anyorder:model:serial");
    assert!(s[0].profile().is_none());
    assert!(applies(Property::Conformance, s[0].as_ref()).is_err());
    assert!(applies(Property::Accuracy, s[0].as_ref()).is_ok());
    let bugs = resolve::<Router>("anyorder:bugs").unwrap();
    assert!(bugs.iter().all(|b| b.name().starts_with("anyorder:bug:") && b.profile().is_none()));
    assert!(matches!(resolve::<SeqwiseLoss>("anyorder:anyorder:model:serial"), Err(ResolveError::Unknown(_))));
    assert!(matches!(resolve::<SeqwiseLoss>("anyorder:nope"), Err(ResolveError::Unknown(_))));
}

#[test]
fn a_clamp_tie_either_branch_may_take_is_counted_not_passed() {
    // One row whose L1 norm, 2^-41 + (eps - 2^-41) + 2^-70, is eps in f32
    // (the last term is absorbed) while its exact value is above eps. A
    // sum of three terms in an unknown order has a bound of a few ulps
    // around eps: as far as the analysis knows, a subject may find it on
    // either side of the Strict gate, so nothing is judged and the
    // outputs are counted undetermined.
    use oracles::case::seqwise_loss::{Objective, SeqwiseCase};
    use oracles::vocab::EPS;
    let a = 2f32.powi(-41);
    let b = EPS - a;
    let mut case = SeqwiseCase::dense(1, 3, vec![a, b, 2f32.powi(-70)], Objective::ProvidedMap { map: vec![true; 3] });
    case.g = 1.0;
    let s = hide(resolve::<SeqwiseLoss>("model:serial").unwrap().remove(0));
    let j = judge(Property::Gradient, s.as_ref(), &case, &mut References::default());
    assert!(j.failure.is_none());
    assert_eq!(j.undetermined, 3, "{j:?}");
    assert_eq!(j.ratio, Some(0.0));
}
