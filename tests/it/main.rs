//! The integration tests, one module per subject, in one test binary: each
//! binary links the whole library (GMP and MPFR through rug included), and
//! seventeen of them took most of the tests' build time on CI's two cores.
//! `tests/gpu.rs` and `tests/kernels_compile.rs` stay binaries of their own:
//! each has its own harness (Cargo.toml says why).
//!
//! One module's tests: `cargo test --test it hostile::` (or
//! `cargo nextest run -E 'binary(it) & test(/^hostile::/)'`).

mod common;

mod any_order;
mod cli;
mod corpus;
mod exec;
mod expf_check_cli;
mod fuzz_seeds;
mod hostile;
mod library;
mod mma_check_cli;
mod model_independence;
mod models;
mod mutants;
mod op_files;
mod properties;
mod reliability;
mod selftest;
mod shard;
