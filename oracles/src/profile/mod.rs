//! Numeric profiles as data: for each sum of an op, its [`ReductionOrder`].
//!
//! Every rule of docs/ops/README.md#rules-every-profile-keeps that a profile
//! does not name holds implicitly: f32, round to nearest even, no contraction,
//! subnormals kept.
//!
//! [`ReductionOrder`]: crate::order::ReductionOrder

pub mod moe_combine;
pub mod router;
pub mod seqwise_loss;
pub mod shared_expert;
