//! The config target: `bitparity::fuzzing::files::config` says what it checks
//! (the seed corpus also replays in `cargo test`, tests/it/fuzz_seeds.rs).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| bitparity::fuzzing::files::config(data));
