//! Planted bugs: each op's kernel model with one deliberate mistake, one a
//! real kernel has shipped. `bitparity selftest` hunts them: a property
//! suite that misses one is too weak. The enums name and describe the
//! mistakes; each model ([`crate::model`]) carries the branches that make
//! them.

pub mod moe_combine;
pub mod router;
pub mod seqwise_loss;
pub mod shared_expert;

pub use moe_combine::MoeCombineBug;
pub use router::RouterBug;
pub use seqwise_loss::SeqwiseBug;
pub use shared_expert::SharedExpertBug;
