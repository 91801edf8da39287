//! Each op written once, generic over [`crate::num::Num`]: on `f32` it is the
//! profile oracle (the bits a conforming kernel must produce), on
//! [`crate::num::Bounded`] it also yields the profile's rigorous error bound,
//! on [`crate::mpfr::Exact`] the exact value.

pub mod moe_combine;
pub mod router;
pub mod seqwise_loss;
pub mod shared_expert;
