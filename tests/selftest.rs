//! Every planted bug is caught, quickly, with a small counterexample
//! (the `bitparity selftest` targets, on one seed each).

use bitparity::check::case_at;
use bitparity::gen::seqwise_loss::{shrink, GenConfig};
use bitparity::props::seqwise_loss::{judge, References};
use bitparity::selftest::HUNT;
use bitparity::subject::planted::{Bug, KernelModel};

#[test]
fn every_planted_bug_is_caught_and_shrunk() {
    let cfg = GenConfig::default();
    for bug in Bug::ALL {
        let s = KernelModel::planted(bug);
        let found = (0..200).find_map(|i| {
            let case = case_at(7, i, &cfg);
            HUNT.into_iter()
                .find(|&p| judge(p, &s, &case, &mut References::default()).failure.is_some())
                .map(|p| (i, p, case))
        });
        let (i, p, case) = found.unwrap_or_else(|| panic!("{} not caught in 200 cases", bug.name()));
        let small = shrink(&case, |c| judge(p, &s, c, &mut References::default()).failure.is_some(), 20_000);
        assert!(judge(p, &s, &small, &mut References::default()).failure.is_some());
        println!("{:<24} case {i:>3} {p:<13} {}x{} -> {}x{}", bug.name(), case.t, case.e, small.t, small.e);
    }
}

#[test]
fn the_correct_model_is_not_flagged() {
    let cfg = GenConfig::default();
    let s = KernelModel::new(oracles::profile::seqwise_loss::SeqwiseProfile::serial());
    for i in 0..300 {
        let case = case_at(7, i, &cfg);
        for p in HUNT {
            let j = judge(p, &s, &case, &mut References::default());
            assert!(j.failure.is_none(), "case {i} {p}: {:?}", j.failure);
        }
    }
}
