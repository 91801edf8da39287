//! The forward of `seqwise_loss`: the bytes drive the property suites'
//! adversarial generator; every selected subject is checked for bitwise
//! conformance of the forward, padding, offset/stride, validation,
//! determinism (GPU) and, on small cases, accuracy against MPFR.
//! Subjects: `BITPARITY_FUZZ_SUBJECT` (docs/fuzzing.md).
#![no_main]

use bitparity::fuzzing::run_target;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| run_target("loss_fwd", data));
