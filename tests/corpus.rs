//! Replays every entry of the regression corpus (regressions/) against every
//! available subject: correct subjects must pass it, and a planted bug that
//! an entry caught must still fail it. Entries are never deleted.

use bitparity::corpus::{load_all, replay};
use bitparity::subject::available;
use std::path::Path;

#[test]
fn corpus_replays() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("regressions");
    let entries = load_all(&root).unwrap_or_else(|e| panic!("the corpus does not load: {e}"));
    let avail = available();
    for (name, reason) in &avail.skipped {
        println!("SKIPPED replay on {name}: {reason}");
    }
    let mut bad = Vec::new();
    for (path, entry) in &entries {
        for r in replay(entry, &avail.subjects) {
            if !r.ok() {
                bad.push(format!(
                    "{}: {} {}: {:?}",
                    path.display(),
                    r.subject,
                    if r.must_fail { "must fail but passes" } else { "fails" },
                    r.failure
                ));
            }
        }
    }
    println!("replayed {} corpus entries against {} subjects", entries.len(), avail.subjects.len());
    assert!(bad.is_empty(), "corpus regressions:\n{}", bad.join("\n"));
}
