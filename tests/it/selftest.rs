//! Every planted bug is caught, quickly, with a small counterexample: the
//! `bitparity selftest` hunt and its targets (at most 200 cases, shrunk size
//! at most 16), on one seed each, for every op.

use bitparity::gen::GenConfig;
use bitparity::harness::{case_at, Harness};
use bitparity::props::{applies, judge, References};
use bitparity::selftest::{hunt, HUNT};
use oracles::op::seqwise_loss::SeqwiseLoss;

fn every_planted_bug_is_caught<O: Harness>() {
    let cfg = GenConfig::default();
    let bugs = O::planted();
    assert!(!bugs.is_empty());
    for bug in &bugs {
        let h = hunt(bug, 7, &cfg);
        let cases = h.cases.unwrap_or_else(|| panic!("{} {} not caught", O::NAME, bug.name));
        let size = h.shrunk_size.expect("a caught bug has a shrunk case");
        println!("{} {:<24} {cases:>4} cases {:?} -> {:?}", O::NAME, bug.name, h.property, h.shrunk);
        assert!(cases <= 200, "{}: {cases} cases to detection", bug.name);
        assert!(size <= 16, "{}: shrunk to {:?}", bug.name, h.shrunk);
    }
}

fn correct_models_are_not_flagged<O: Harness>() {
    let cfg = GenConfig::default();
    for p in O::profiles() {
        let s = O::model(&p);
        for i in 0..300 {
            let case = case_at::<O>(7, i, &cfg);
            for prop in HUNT {
                if applies(prop, s.as_ref()).is_err() {
                    continue;
                }
                let j = judge(prop, s.as_ref(), &case, &mut References::default());
                assert!(j.failure.is_none(), "{} case {i} {prop}: {:?}", s.name(), j.failure);
            }
        }
    }
}

#[test]
fn seqwise_loss_planted_bugs_are_caught_and_shrunk() {
    every_planted_bug_is_caught::<SeqwiseLoss>();
}

#[test]
fn seqwise_loss_correct_models_are_not_flagged() {
    correct_models_are_not_flagged::<SeqwiseLoss>();
}

#[test]
fn router_planted_bugs_are_caught_and_shrunk() {
    every_planted_bug_is_caught::<oracles::op::router::Router>();
}

#[test]
fn router_correct_models_are_not_flagged() {
    correct_models_are_not_flagged::<oracles::op::router::Router>();
}

#[test]
fn shared_expert_planted_bugs_are_caught_and_shrunk() {
    every_planted_bug_is_caught::<oracles::op::shared_expert::SharedExpert>();
}

#[test]
fn shared_expert_correct_models_are_not_flagged() {
    correct_models_are_not_flagged::<oracles::op::shared_expert::SharedExpert>();
}

#[test]
fn moe_combine_planted_bugs_are_caught_and_shrunk() {
    every_planted_bug_is_caught::<oracles::op::moe_combine::MoeCombine>();
}

#[test]
fn moe_combine_correct_models_are_not_flagged() {
    correct_models_are_not_flagged::<oracles::op::moe_combine::MoeCombine>();
}
