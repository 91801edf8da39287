//! bitparity as a library: put your own kernel through every property from
//! your crate's `cargo test`, the way proptest is used.
//!
//! Implement [`Subject`](crate::subject::Subject) for your kernel (its
//! forward and backward on one case, the profile whose bits it claims, and
//! [`SubjectKind::Device`](crate::subject::SubjectKind) for code on a GPU),
//! then call [`check`]: it generates adversarial cases of the op, judges every
//! property, shrinks the first failure of each property and returns it as
//! text (the shrunk case, the first differing bits, a reproduce command).
//!
//! ```no_run
//! # use std::sync::Arc;
//! # use bitparity::subject::SubjectRef;
//! # use oracles::op::seqwise_loss::SeqwiseLoss;
//! # use bitparity::model::seqwise_loss::SeqwiseModel;
//! # use oracles::profile::seqwise_loss::SeqwiseProfile;
//! // Here the op's kernel model stands in for your kernel.
//! fn my_kernel() -> SubjectRef<SeqwiseLoss> {
//!     Arc::new(SeqwiseModel::new(SeqwiseProfile::serial()))
//! }
//! #[test]
//! fn my_kernel_is_bitwise_conformant() {
//!     bitparity::testing::check::<SeqwiseLoss>(my_kernel(), &bitparity::testing::Settings::default()).unwrap();
//! }
//! ```
//!
//! `examples/own_kernel.rs` is a complete example.

use crate::gen::GenConfig;
use crate::harness::Harness;
use crate::knobs;
use crate::props::Property;
use crate::runner::{self, OpSummary, Plan, SavePolicy};
use crate::subject::SubjectRef;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// What [`check`] runs. [`Settings::default`] reads `BITPARITY_CASES`
/// (default 256) and `BITPARITY_SEED` (default 0), and runs every property
/// with the default generator limits (`BITPARITY_MAX_TE`, ...).
#[derive(Clone, Debug)]
pub struct Settings {
    pub cases: u64,
    pub seed: u64,
    pub properties: Vec<Property>,
    pub gen: GenConfig,
    /// Where failures are kept as corpus entries (`None`: nowhere; they are
    /// still shrunk and returned).
    pub corpus: Option<PathBuf>,
}

impl Default for Settings {
    /// The defaults, overridden by the environment. A knob that does not
    /// parse panics with its name (a test's configuration error, said at once).
    fn default() -> Self {
        let or_panic = |r: Result<Option<String>, String>| r.unwrap_or_else(|e| panic!("{e}"));
        let seed = or_panic(knobs::get::<String>(knobs::SEED))
            .map(|s| knobs::parse_seed(&s).unwrap_or_else(|e| panic!("{}: {e}", knobs::SEED)))
            .unwrap_or(0);
        Settings {
            cases: knobs::get_or(knobs::CASES, 256).unwrap_or_else(|e| panic!("{e}")),
            seed,
            properties: Property::ALL.to_vec(),
            gen: GenConfig::from_env().unwrap_or_else(|e| panic!("{e}")),
            corpus: None,
        }
    }
}

/// Judges `subject` with every property of `settings` on `settings.cases`
/// generated cases of op `O`. `Ok` with the summary when every judged case
/// held and something was judged; `Err` with the failures as text (each
/// shrunk, with its bits and how to reproduce it) otherwise.
pub fn check<O: Harness>(subject: SubjectRef<O>, settings: &Settings) -> Result<OpSummary, String> {
    let plan = Plan {
        properties: settings.properties.clone(),
        cases: Some(settings.cases.max(1)),
        seconds: None,
        first_case: 0,
        shard: None,
        seed: settings.seed,
        gen: settings.gen.clone(),
        save: SavePolicy {
            store: settings.corpus.clone().map(|d| std::sync::Arc::new(crate::corpus::Store::new(d))),
            planted: true,
        },
        progress: false,
        interrupt: Arc::new(AtomicBool::new(false)),
    };
    let name = subject.name();
    let summary = runner::check::<O>(&plan, &[subject], Vec::new());
    if summary.failed() {
        let text: String = summary.failures.iter().map(|f| f.text()).collect();
        return Err(format!("{name} failed on op {} (seed {}):\n{text}", O::NAME, settings.seed));
    }
    if summary.judged() == 0 {
        return Err(format!("{name}: no property could judge this subject (every row n/a)"));
    }
    Ok(summary)
}
