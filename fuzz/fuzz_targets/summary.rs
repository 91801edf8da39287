//! The summary target: `bitparity::fuzzing::files::summary` says what it checks
//! (the seed corpus also replays in `cargo test`, tests/it/fuzz_seeds.rs).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| bitparity::fuzzing::files::summary(data));
