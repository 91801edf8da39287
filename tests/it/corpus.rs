//! Replays every entry of the regression corpus (regressions/) against every
//! available subject: correct subjects must pass it, and a planted bug that
//! an entry caught must still fail it. Entries are never deleted. An entry
//! that does not load fails the test with its path and reason; every other
//! entry is still replayed.

use bitparity::corpus;
use bitparity::harness::{with_op, OPS};
use bitparity::runner::replay::{ReplayEntry, ReplayedOn};
use std::path::Path;

#[test]
fn corpus_replays() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("regressions");
    let (files, problems) = corpus::list(&root, &OPS).unwrap_or_else(|e| panic!("the corpus cannot be listed: {e}"));
    let mut bad: Vec<String> = problems.iter().map(|(p, why)| format!("{}: {why}", p.display())).collect();
    let mut judged = 0;
    for path in &files {
        let entry = match corpus::read_entry(path) {
            Ok(e) => e,
            Err(why) => {
                bad.push(format!("{}: {why}", path.display()));
                continue;
            }
        };
        let Some(r) = with_op(&entry.op, ReplayEntry { entry: &entry, names: &[] }) else {
            bad.push(format!("{}: unknown op {:?}", path.display(), entry.op));
            continue;
        };
        for s in &r.not_replayed {
            // Reported in the test output, never counted as passed.
            println!("NOT REPLAYED {} on {}: {}", path.display(), s.suite, s.reason);
        }
        if let Some(b) = &r.broken {
            bad.push(format!("{}: {b}", path.display()));
        }
        judged += r.judged() as usize;
        for s in r.results.iter().filter(|s| !s.ok()) {
            bad.push(format!(
                "{}: {} {}: {:?}",
                path.display(),
                s.subject,
                if s.must_fail { "must fail but passes" } else { "fails" },
                s.failure
            ));
        }
    }
    for o in OPS {
        for s in with_op(o, ReplayedOn).map(|(_, skipped)| skipped).unwrap_or_default() {
            println!("SKIPPED replay on {}: {}", s.suite, s.reason);
        }
    }
    println!("replayed {judged} of {} corpus entries", files.len());
    assert!(bad.is_empty(), "corpus regressions:\n{}", bad.join("\n"));
    assert!(judged > 0, "no corpus entry was judged");
}
