//! bitparity: property-based and differential testing of GPU numeric kernels.
//!
//! A case is generated once ([`gen`]), every [`subject`] computes on it, every
//! property ([`props`]) judges the outputs against the oracles of the
//! [`oracles`] crate. Failures are shrunk and kept as values in the
//! [`corpus`].

pub mod check;
pub mod corpus;
pub mod fuzzing;
pub mod gen;
pub mod import;
pub mod props;
pub mod report;
pub mod selftest;
pub mod subject;

pub use oracles;
