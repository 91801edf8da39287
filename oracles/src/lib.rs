//! The executable specification of bitparity's ops (docs/ops/).
//!
//! - [`case`]: each op's typed input, its validation and its outputs.
//! - [`order`] and [`profile`]: numeric profiles as data (reduction orders).
//! - [`bf16`]: rounding to bf16, a discrete decision of the profile.
//! - [`mma`]: the tensor core's MMA step, bit for bit (the H100's model).
//! - [`undecided`]: which outputs of a profile oracle depend on a step the
//!   MMA model does not decide (counted apart by conformance).
//! - [`any_order`]: the value type that bounds every admissible evaluation
//!   of a subject that claims no profile (any order of every sum).
//! - [`padding`]: the padding rule a subject claims (`skip`, bitparity's;
//!   `mask`, native TorchTitan's).
//! - [`num`]: the value types the one generic implementation of each op runs on:
//!   plain `f32` (the profile oracle), [`num::Bounded`] (f32 plus a rigorous
//!   running error bound) and [`mpfr::Exact`] (MPFR plus its own bound).
//! - [`profile_oracle`]: each op written once, generic over [`num::Num`].
//! - [`mpfr`]: the exact result, its correct f32 rounding, and the gradient check.
//!
//! Pure CPU, no GPU, no proptest: usable without the rest of bitparity.

pub mod any_order;
pub mod bf16;
pub mod case;
pub mod expf;
pub mod mma;
pub mod mpfr;
pub mod num;
pub mod op;
pub mod order;
pub mod padding;
pub mod profile;
pub mod profile_oracle;
pub mod undecided;
pub mod vocab;

/// Bitwise equality of two f32 results as
/// docs/ops/README.md#rules-every-profile-keeps defines it: bits must match
/// (the sign of zero counts), except that any NaN matches any NaN.
pub fn same_bits(a: f32, b: f32) -> bool {
    (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
}
