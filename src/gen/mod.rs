//! Adversarial generators, one file per op
//! (docs/ops/README.md#adversarial-cases; `mma`: the inputs that check the
//! tensor core's MMA model), and what they share: the size limits of a
//! generated case and the fuzzer's bytes as an RNG.

pub mod common;
pub mod mma;
pub mod moe_combine;
pub mod router;
pub mod seqwise_loss;
pub mod shared_expert;

use crate::knobs;
use proptest::prelude::Rng;
use proptest::test_runner::{RngAlgorithm, TestRng};

/// Sizes of generated cases. Each knob documents its default and the
/// environment variable that overrides it (read by [`GenConfig::from_env`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GenConfig {
    /// Largest T x E of a case. Default 4096; `BITPARITY_MAX_TE`. The MPFR
    /// properties cost about T x E x 30 MPFR operations a case.
    pub max_te: usize,
    /// Largest E. Default 257; `BITPARITY_MAX_E`.
    pub max_e: usize,
    /// Largest T. Default 1100 (past the 1024 power of two and several
    /// 64-token chunks); `BITPARITY_MAX_T`.
    pub max_t: usize,
    /// Tier B's real shapes instead of tier A's small ones, where an op's tier
    /// A shapes are smaller than its real ones (shared_expert: the H x F of
    /// docs/ops/shared_expert.md#shapes-in-practice, T up to `max_t`;
    /// seqwise_loss: T x E up to 2^20, T across the forward's finalize batches,
    /// E up to 1024; router: E up to 1024, and one case in three with T up to
    /// 2^22 / E, past one wave of the kernels' grid). Default small;
    /// `BITPARITY_SHAPES=reference` (or `reference-dense`: dense layouts). Such
    /// cases are meant for the GPU-side properties (`--property
    /// batch-invariance`, `determinism`, `offset-stride`): the MPFR oracle and
    /// the profile oracle take minutes a case at those sizes.
    pub shapes: knobs::Shapes,
}

impl Default for GenConfig {
    fn default() -> Self {
        GenConfig { max_te: 4096, max_e: 257, max_t: 1100, shapes: knobs::Shapes::Small }
    }
}

/// The largest value of each size knob: a case of 2^24 values already takes
/// seconds per property; above it a typo (`BITPARITY_MAX_TE=10000000000`)
/// would allocate GBs.
pub const MAX_LIMIT: usize = 1 << 24;

impl GenConfig {
    /// The defaults, overridden by the environment; a value that does not
    /// parse, or a limit of 0, is an error (never silently the default).
    pub fn from_env() -> Result<Self, String> {
        let d = GenConfig::default();
        let positive = |name: &str, default: usize| -> Result<usize, String> {
            match knobs::get_or(name, default)? {
                0 => Err(format!("{name}=0: the limit must be at least 1")),
                v if v > MAX_LIMIT => Err(format!(
                    "{name}={v}: at most {MAX_LIMIT} (2^24 elements, 64 MiB an array; a larger case would take GBs)"
                )),
                v => Ok(v),
            }
        };
        Ok(GenConfig {
            max_te: positive(knobs::MAX_TE, d.max_te)?,
            max_e: positive(knobs::MAX_E, d.max_e)?,
            max_t: positive(knobs::MAX_T, d.max_t)?,
            shapes: knobs::shapes()?,
        })
    }
}

/// The generator's size limits under fuzzing: the defaults of [`GenConfig`],
/// fixed (no environment variables), so that an artifact's bytes give the
/// same case on every machine and in `bitparity import`.
pub fn fuzz_config() -> GenConfig {
    GenConfig::default()
}

/// Pseudo-random bytes appended to every fuzz input (see [`fuzz_rng`]).
/// 32 KiB covers every draw of most cases (a case takes 5.8 KiB at the
/// median, 15 KiB on average, up to 155 KiB for T x E = 4096 with a provided
/// map); past it the RNG reads zeros, which still give valid values.
pub const FUZZ_TAIL_BYTES: usize = 32 * 1024;

/// The RNG a fuzzer's input stands for. The bytes drive an op's generator
/// through proptest's pass-through RNG, so fuzzing explores the same
/// adversarial classes as the property suites: the first bytes choose the
/// shape, the objective, the row kinds, and so on.
///
/// A pass-through RNG reads zeros once its bytes run out, and zeros make
/// every value the same "nice" number: short inputs, which libFuzzer starts
/// from, would never round differently under an FMA or another order. So
/// the input is followed by [`FUZZ_TAIL_BYTES`] pseudo-random bytes seeded
/// by a hash of the whole input: a short input still gives a case with
/// random mantissas, and any input (the empty one included) gives a valid
/// case. The fuzz targets and `bitparity import` both go through this: an
/// artifact imports as exactly the case that crashed.
pub fn fuzz_rng(data: &[u8]) -> TestRng {
    let mut stream = Vec::with_capacity(data.len() + FUZZ_TAIL_BYTES);
    stream.extend_from_slice(data);
    stream.resize(data.len() + FUZZ_TAIL_BYTES, 0);
    let mut tail = TestRng::from_seed(RngAlgorithm::XorShift, &fuzz_tail_seed(data));
    tail.fill_bytes(&mut stream[data.len()..]);
    TestRng::from_seed(RngAlgorithm::PassThrough, &stream)
}

/// 16 bytes from the input: FNV-1a 64 from two offset bases.
fn fuzz_tail_seed(data: &[u8]) -> [u8; 16] {
    let fnv =
        |basis: u64| data.iter().fold(basis, |h, &b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3)) ^ data.len() as u64;
    let mut seed = [0u8; 16];
    seed[..8].copy_from_slice(&fnv(0xcbf2_9ce4_8422_2325).to_le_bytes());
    seed[8..].copy_from_slice(&fnv(0x8422_2325_cbf2_9ce4).to_le_bytes());
    seed
}
