//! The oracles judged from outside, one module per subject, in one test
//! binary: a binary per file linked the crate (and rug) once each.

mod common;

mod any_order;
mod docs_ops;
mod mma;
mod moe_combine;
mod padding;
mod router;
mod shared_expert;
