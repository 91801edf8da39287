//! Every planted bug is caught, quickly, with a small counterexample: the
//! `bitparity selftest` hunt and its targets (at most 200 cases, shrunk
//! T x E at most 16), on one seed each.

use bitparity::gen::seqwise_loss::GenConfig;
use bitparity::props::seqwise_loss::{judge, References};
use bitparity::selftest::{hunt, HUNT};
use bitparity::subject::planted::{Bug, KernelModel};

#[test]
fn every_planted_bug_is_caught_and_shrunk() {
    let cfg = GenConfig::default();
    for bug in Bug::ALL {
        let h = hunt(bug, 7, &cfg);
        let cases = h.cases.unwrap_or_else(|| panic!("{} not caught", bug.name()));
        let (t, e) = h.shrunk.expect("a caught bug has a shrunk case");
        println!("{:<24} {cases:>4} cases {:?} -> {t}x{e}", bug.name(), h.property);
        assert!(cases <= 200, "{}: {cases} cases to detection", bug.name());
        assert!(t * e <= 16, "{}: shrunk to {t}x{e}", bug.name());
    }
}

#[test]
fn the_correct_model_is_not_flagged() {
    let cfg = GenConfig::default();
    let s = KernelModel::new(oracles::profile::seqwise_loss::SeqwiseProfile::serial());
    for i in 0..300 {
        let case = bitparity::check::case_at(7, i, &cfg);
        for p in HUNT {
            let j = judge(p, &s, &case, &mut References::default());
            assert!(j.failure.is_none(), "case {i} {p}: {:?}", j.failure);
        }
    }
}
