//! The corpus_entry target: `bitparity::fuzzing::files::corpus_entry` says what it checks
//! (the seed corpus also replays in `cargo test`, tests/it/fuzz_seeds.rs).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| bitparity::fuzzing::files::corpus_entry(data));
