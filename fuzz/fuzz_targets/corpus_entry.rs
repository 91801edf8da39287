//! A corpus entry file, as `bitparity replay` reads it: any bytes are parsed
//! strictly (`bitparity::corpus::parse`), the op the entry names decodes and
//! validates its case, and a valid case is replayed through the op's
//! `DynOp::replay` (every correct subject, the planted bug it names, MPFR for
//! accuracy and gradient entries). Nothing may panic, and nothing may
//! allocate beyond what validation bounds (`oracles::case::MAX_STORAGE`):
//! libFuzzer's `-rss_limit_mb` / `-malloc_limit_mb` turn a violation into a
//! crash. A decoded case must also survive its own round trip: written back
//! as JSON (hex floats) it decodes to the same text.
#![no_main]

use bitparity::corpus::{self, decode_case, RawEntry};
use bitparity::harness::op_by_name;
use libfuzzer_sys::fuzz_target;
use oracles::case::seqwise_loss::SeqwiseCase;
use oracles::op::seqwise_loss::SeqwiseLoss;
use oracles::op::Op;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// The case of `entry` as type `C`, written back and read again, must be the
/// same JSON (so every value the parser accepted is exactly what it wrote).
fn round_trips<C: Serialize + DeserializeOwned>(entry: &RawEntry) {
    let Ok(case) = decode_case::<C>(entry) else { return };
    let text = serde_json::to_value(&case).expect("a decoded case serializes");
    let again: C = serde_json::from_value(text.clone())
        .unwrap_or_else(|e| panic!("a written case does not read back: {e}\n{text}"));
    assert_eq!(serde_json::to_value(&again).expect("serializes"), text, "the case changed in a round trip");
}

fuzz_target!(|data: &[u8]| {
    let Ok(entry) = corpus::parse(data) else { return };
    if entry.op == SeqwiseLoss::NAME {
        round_trips::<SeqwiseCase>(&entry);
    }
    if let Some(op) = op_by_name(&entry.op) {
        // Decodes, validates, and replays when valid; a broken entry is a
        // reported result, never a panic.
        let _ = op.replay(&entry);
    }
});
