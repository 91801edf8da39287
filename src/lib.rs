//! bitparity: property-based and differential testing of GPU numeric kernels.
//!
//! A case is generated once ([`gen`]), every [`subject`] computes on it, every
//! property ([`props`]) judges the outputs against the oracles of the
//! [`oracles`] crate; the [`runner`] shrinks failures and keeps them, as
//! values, in the [`corpus`]. Each op plugs in through its [`harness`]; its
//! kernel [`model`] (the op written a second time) and its [`planted`] bugs
//! are subjects like any other. [`testing`] is the face a kernel crate
//! calls from its own `cargo test`; [`exec`] makes any program that speaks
//! its protocol (a PyTorch kernel, say) a subject.

pub mod app;
pub mod corpus;
pub mod devices;
pub mod escape;
pub mod exec;
pub mod fsio;
pub mod fuzzing;
pub mod gen;
pub mod harness;
pub mod html;
pub mod import;
pub mod interrupt;
pub mod knobs;
pub mod merge;
pub mod model;
pub mod mutants;
pub mod planted;
pub mod props;
pub mod report;
pub mod runner;
pub mod selftest;
pub mod shrink;
pub mod subject;
pub mod testing;

pub use oracles;
