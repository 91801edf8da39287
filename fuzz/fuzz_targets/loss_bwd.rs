//! The backward of `seqwise_loss`: the bytes drive the property suites'
//! adversarial generator; every selected subject is checked for bitwise
//! conformance (forward and backward), padding, offset/stride, validation,
//! determinism (GPU) and, on small cases, the gradient bound against MPFR and
//! the MPFR finite differences. Subjects: `BITPARITY_FUZZ_SUBJECT`
//! (docs/fuzzing.md).
#![no_main]

use bitparity::fuzzing::run_target;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| run_target("loss_bwd", data));
