//! The forward of `moe_combine`: the bytes drive the property suites'
//! adversarial generator; every selected subject is checked as
//! `bitparity::fuzzing` says for this direction. Subjects:
//! `BITPARITY_FUZZ_SUBJECT` (docs/fuzzing.md).
#![no_main]

use bitparity::fuzzing::run_target;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| run_target("combine_fwd", data));
