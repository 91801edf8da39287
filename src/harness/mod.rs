//! The testing half of an op (the spec half is [`oracles::op::Op`]): how to
//! generate, classify, shrink and transform its cases, which subjects compute
//! it, which planted bugs it ships. Everything else (the runner, the
//! properties, the corpus, the reports, the CLI) is written once over
//! [`Harness`]; the registry ([`ops`]) is the one place that lists the ops.
//!
//! Adding an op writes one file per concept (its case, profiles, oracles
//! and `Op` in `oracles/`; its generator, kernel model, planted bugs, wire
//! encoding, CUDA launches and `Harness` here) and one line in each
//! registry-like list, [`OPS`] among them: docs/layout.md#adding-an-op lists
//! every file in order, and `tests/it/op_files.rs` fails where another file of
//! `src/` names an op.

pub mod moe_combine;
pub mod registry;
pub mod router;
pub mod seqwise_loss;
pub mod shared_expert;

pub use registry::{with_op, OpCommand, OPS};

use crate::gen::GenConfig;
use crate::subject::{AnyOrderSubject, Available, ProfileOracle, Skip, Subject, SubjectRef, ANY_ORDER_PREFIX};
use oracles::op::{Op, Profile};
use oracles::padding::PaddingRule;
use proptest::test_runner::{RngAlgorithm, TestRng};
use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

/// The metamorphic relations of docs/ops/README.md#properties that transform a case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metamorphic {
    /// Appended padding rows, and the case's own padding rows poisoned.
    Padding,
    /// The same values at another element offset and row stride.
    OffsetStride,
    /// A sub-batch of the case's tokens.
    BatchInvariance,
}

/// A transformed case and how its outputs must relate to the original's.
#[derive(Clone, Debug)]
pub struct Transform<C> {
    /// What was done, for the failure message ("appended padding").
    pub what: String,
    pub case: C,
    /// For each token of the transformed case, the original token whose
    /// per-token outputs it must reproduce bitwise; `None`: not compared.
    pub rows: Vec<Option<usize>>,
    /// The global outputs (counts, raw, ...) must be identical.
    pub same_global: bool,
    /// Unmapped tokens' real per-token outputs must be +0.0 (a padding
    /// row's gradient).
    pub unmapped_zero: bool,
    /// Compare only per-token outputs that depend on their own token alone.
    pub local_only: bool,
}

/// A planted bug: a subject with one deliberate mistake.
pub struct Planted<O: Op> {
    /// `bug:<name>` on the command line.
    pub name: &'static str,
    pub description: &'static str,
    pub subject: SubjectRef<O>,
}

pub use crate::subject::ResolveError;

/// The testing half of an op.
pub trait Harness: Op + crate::exec::Wire {
    /// The adversarial classes of the op's generator (docs/ops/README.md#adversarial-cases).
    type Class: Copy + Ord + fmt::Display + Send + Sync + 'static;
    /// The op's kernel model (the op written a second time), made a
    /// subject by [`kernel_model!`].
    type Model: KernelModel<Self>;
    /// The prefix of the op's fuzz targets (`loss` for `loss_fwd`, `loss_bwd`).
    const FUZZ_PREFIX: &'static str;

    /// Every class, in report order.
    fn classes() -> &'static [Self::Class];
    /// One adversarial case.
    fn generate(rng: &mut TestRng, cfg: &GenConfig) -> Self::Case;
    /// The classes a valid case exercises, read off its values.
    fn classify(case: &Self::Case) -> BTreeSet<Self::Class>;
    /// A size that shrinking decreases (T x E, say).
    fn size(case: &Self::Case) -> usize;
    /// Strictly smaller or simpler valid variants, most aggressive first.
    fn shrink_candidates(case: &Self::Case) -> Vec<Self::Case>;
    /// Invalid variants of a valid case, each with what makes it invalid.
    fn invalid_variants(case: &Self::Case) -> Vec<(&'static str, Self::Case)>;
    /// The transformed cases of a metamorphic relation (none: it says
    /// nothing about this case), for a subject that claims padding rule
    /// `padding` (the padding relation differs by rule: docs/padding.md).
    fn transforms(kind: Metamorphic, case: &Self::Case, padding: PaddingRule) -> Vec<Transform<Self::Case>>;
    /// Whether a property can say anything about this op at all (batch
    /// invariance needs outputs that depend on their own token alone).
    fn applies(kind: Metamorphic) -> Result<(), String> {
        let _ = kind;
        Ok(())
    }
    /// The case, compactly: its shape and the values that matter.
    fn describe(case: &Self::Case) -> String;
    /// The kernel model of a profile.
    fn model(profile: &Self::Profile) -> SubjectRef<Self> {
        Arc::new(Self::Model::of(profile))
    }
    /// The op's GPU subject, or why it cannot run here.
    fn device() -> Result<SubjectRef<Self>, String>;
    /// The names of the op's other GPU subjects (shared_expert's
    /// tensor-core kernels `cuda-tc` and cuBLAS variants): those of
    /// [`Harness::DEFAULT_LIBRARIES`] are correct subjects, run by default;
    /// the rest run only when named.
    const LIBRARIES: &'static [&'static str] = &[];
    /// The libraries among the correct subjects (`cuda-tc`, a kernel that
    /// claims a profile).
    const DEFAULT_LIBRARIES: &'static [&'static str] = &[];
    /// The vendor-library subject of that name, or why it cannot run here.
    fn library(name: &str) -> Result<SubjectRef<Self>, String> {
        Err(format!("{}: no library subject {name:?}", Self::NAME))
    }
    /// The op's planted bugs.
    fn planted() -> Vec<Planted<Self>> {
        Self::Model::planted()
    }
}

/// An op's kernel model ([`crate::model`]) as the layer above uses it.
pub trait KernelModel<O: Op>: Subject<O> + 'static {
    /// The model of `profile` (subject `model:<profile>`).
    fn of(profile: &O::Profile) -> Self;
    /// The model with each of the op's planted bugs (`bug:<name>`).
    fn planted() -> Vec<Planted<O>>;
}

/// Makes `$model`, the kernel model of op `$op` with the planted bugs
/// `$bug`, a [`Subject`] and a [`KernelModel`]. Every model has the same
/// fields (`profile`, `bug`) and inherent items (`new`, `planted`,
/// `forward`, `backward`; the bug's `ALL`, `name`, `describe`), but cannot
/// implement this layer's traits itself: `src/model/` names nothing outside
/// the models (tests/it/model_independence.rs).
macro_rules! kernel_model {
    ($op:ty, $model:ident, $bug:ident) => {
        impl $crate::subject::Subject<$op> for $model {
            fn name(&self) -> String {
                match self.bug {
                    None => format!("model:{}", self.profile.name),
                    Some(b) => format!("bug:{}", b.name()),
                }
            }
            fn profile(&self) -> Option<<$op as oracles::op::Op>::Profile> {
                Some(self.profile.clone())
            }
            fn kind(&self) -> $crate::subject::SubjectKind {
                $crate::subject::SubjectKind::Model
            }
            fn forward(
                &self,
                case: &<$op as oracles::op::Op>::Case,
            ) -> Result<<$op as oracles::op::Op>::Fwd<f32>, $crate::subject::SubjectError> {
                $model::forward(self, case).map_err($crate::subject::model_error)
            }
            fn backward(
                &self,
                case: &<$op as oracles::op::Op>::Case,
            ) -> Result<<$op as oracles::op::Op>::Bwd<f32>, $crate::subject::SubjectError> {
                $model::backward(self, case).map_err($crate::subject::model_error)
            }
        }

        impl $crate::harness::KernelModel<$op> for $model {
            fn of(profile: &<$op as oracles::op::Op>::Profile) -> Self {
                $model::new(profile.clone())
            }
            fn planted() -> Vec<$crate::harness::Planted<$op>> {
                $bug::ALL
                    .into_iter()
                    .map(|b| $crate::harness::Planted {
                        name: b.name(),
                        description: b.describe(),
                        subject: std::sync::Arc::new($model::planted(b)),
                    })
                    .collect()
            }
        }
    };
}
pub(crate) use kernel_model;

/// A value of type `T` made once per process for op `O` (`init` runs on
/// first use): what a command reuses from call to call, such as the
/// subjects a fuzz target or a replay judges with.
pub fn per_op<O: Harness, T: Send + Sync + 'static>(init: impl FnOnce() -> T) -> Arc<T> {
    use std::any::{Any, TypeId};
    use std::collections::HashMap;
    use std::sync::Mutex;
    type Cache = HashMap<(TypeId, TypeId), Arc<dyn Any + Send + Sync>>;
    static CACHE: Mutex<Option<Cache>> = Mutex::new(None);
    let key = (TypeId::of::<O>(), TypeId::of::<T>());
    let cached = CACHE.lock().unwrap_or_else(|e| e.into_inner()).as_ref().and_then(|m| m.get(&key).cloned());
    if let Some(v) = cached.and_then(|v| v.downcast::<T>().ok()) {
        return v;
    }
    // Made without the lock held (making it may take a while, or reach
    // another op's value); the first value stored is the one kept.
    let made: Arc<dyn Any + Send + Sync> = Arc::new(init());
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    let kept = cache.get_or_insert_with(HashMap::new).entry(key).or_insert(made).clone();
    kept.downcast::<T>().unwrap_or_else(|_| unreachable!("the cache holds a T under T's key"))
}

/// Rows and values per row a case's compact description shows (the corpus
/// entry holds them all).
pub const SHOWN_ROWS: usize = 8;
pub const SHOWN_VALUES: usize = 16;

/// Values as exact hex floats, `[a, b, ...]`, at most [`SHOWN_VALUES`] of
/// them and then how many more: for [`Harness::describe`].
pub fn hex_list(values: &[f32]) -> String {
    let mut v: Vec<String> = values.iter().take(SHOWN_VALUES).map(|&x| oracles::case::hexf::format(x)).collect();
    if values.len() > SHOWN_VALUES {
        v.push(format!("... {} more", values.len() - SHOWN_VALUES));
    }
    format!("[{}]", v.join(", "))
}

/// The RNG of case `index` under `seed`: any case is reproducible alone.
pub fn case_rng(seed: u64, index: u64) -> TestRng {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    bytes[8..16].copy_from_slice(&index.to_le_bytes());
    bytes[16..24].copy_from_slice(b"bitparit");
    TestRng::from_seed(RngAlgorithm::ChaCha, &bytes)
}

/// The case `index` of a run seeded `seed`.
pub fn case_at<O: Harness>(seed: u64, index: u64, cfg: &GenConfig) -> O::Case {
    O::generate(&mut case_rng(seed, index), cfg)
}

/// The case a fuzzer's input stands for (see [`crate::gen::fuzz_rng`]).
pub fn from_fuzz_bytes<O: Harness>(data: &[u8]) -> O::Case {
    O::generate(&mut crate::gen::fuzz_rng(data), &crate::gen::fuzz_config())
}

/// The correct subjects: the profile oracle and the kernel model of every
/// shipped profile, and the GPU subjects (`cuda`, the default libraries)
/// where they can run.
pub fn available<O: Harness>() -> Available<O> {
    let mut subjects: Vec<SubjectRef<O>> = Vec::new();
    for p in O::profiles() {
        subjects.push(Arc::new(ProfileOracle::<O>(p.clone())));
        subjects.push(O::model(&p));
    }
    let mut skipped = Vec::new();
    for name in std::iter::once("cuda").chain(O::DEFAULT_LIBRARIES.iter().copied()) {
        match device_subject::<O>(name) {
            Ok(d) => subjects.push(d),
            Err(reason) => skipped.push(Skip { suite: format!("{} {name}", O::NAME), reason }),
        }
    }
    Available { subjects, skipped }
}

/// Whether `name` is one of the op's subjects on the GPU: `cuda`, or one of
/// its libraries (`cuda-tc`, `cublas`, ...).
pub fn is_device_subject<O: Harness>(name: &str) -> bool {
    name == "cuda" || O::LIBRARIES.contains(&name)
}

/// The op's subject on the GPU named `name` ([`is_device_subject`]): what
/// `resolve` gives for it, and what a mutants child hunts with.
pub fn device_subject<O: Harness>(name: &str) -> Result<SubjectRef<O>, String> {
    if !is_device_subject::<O>(name) {
        return Err(format!("{}: no CUDA subject {name:?}", O::NAME));
    }
    if name == "cuda" {
        O::device()
    } else {
        O::library(name)
    }
}

/// Subjects by name: `all` (every available correct one), `oracle:<profile>`,
/// `model:<profile>`, `cuda`, the op's libraries (`cublas`), `bug:<name>`,
/// `bugs` (every planted bug), and any of these after `anyorder:`, the same
/// subjects judged as claiming no profile ([`AnyOrderSubject`]). Libraries
/// other than the default ones, and `anyorder:`, are never among the
/// defaults: they run only when named.
///
/// Only built-in subjects: a name read from a file (a corpus entry's
/// subject, a summary) or from the environment is a label, and an external
/// subject's name never starts its program here ([`resolve_named`] is for
/// the names a user typed on the command line).
pub fn resolve<O: Harness>(name: &str) -> Result<Vec<SubjectRef<O>>, ResolveError> {
    resolve_with::<O>(name, false)
}

/// Subjects by a name the user typed on the command line (`--subject`):
/// every built-in one ([`resolve`]) and the external subjects,
/// `exec:<command>` and the names of the `bitparity.toml` the run loaded,
/// whose program this starts (docs/security.md).
pub fn resolve_named<O: Harness>(name: &str) -> Result<Vec<SubjectRef<O>>, ResolveError> {
    resolve_with::<O>(name, true)
}

fn resolve_with<O: Harness>(name: &str, external: bool) -> Result<Vec<SubjectRef<O>>, ResolveError> {
    if let Some(inner) = name.strip_prefix(ANY_ORDER_PREFIX) {
        if inner.starts_with(ANY_ORDER_PREFIX) {
            return Err(ResolveError::Unknown(format!("{name:?}: {ANY_ORDER_PREFIX} once is enough")));
        }
        let subjects = resolve_with::<O>(inner, external)?;
        return Ok(subjects.into_iter().map(|s| Arc::new(AnyOrderSubject(s)) as SubjectRef<O>).collect());
    }
    let profile = |p: &str| {
        O::profiles().into_iter().find(|x| x.name() == p).ok_or_else(|| {
            let names: Vec<String> = O::profiles().iter().map(|p| p.name().to_string()).collect();
            ResolveError::Unknown(format!("{}: unknown profile {p:?} (known: {})", O::NAME, names.join(", ")))
        })
    };
    match name {
        "all" => Ok(available::<O>().subjects),
        "bugs" => Ok(O::planted().into_iter().map(|b| b.subject).collect()),
        dev if is_device_subject::<O>(dev) => device_subject::<O>(dev)
            .map(|d| vec![d])
            .map_err(|r| ResolveError::Unavailable(format!("{} {dev}: {r}", O::NAME))),
        _ => {
            if let Some(p) = name.strip_prefix("oracle:") {
                Ok(vec![Arc::new(ProfileOracle::<O>(profile(p)?))])
            } else if let Some(p) = name.strip_prefix("model:") {
                Ok(vec![O::model(&profile(p)?)])
            } else if let Some(b) = name.strip_prefix("bug:") {
                let bugs = O::planted();
                let names: Vec<&str> = bugs.iter().map(|b| b.name).collect();
                match bugs.into_iter().find(|x| x.name == b) {
                    Some(x) => Ok(vec![x.subject]),
                    None => Err(ResolveError::Unknown(format!(
                        "{}: unknown planted bug {b:?} (known: {})",
                        O::NAME,
                        names.join(", ")
                    ))),
                }
            } else if crate::exec::is_exec_name(name) && !external {
                Err(ResolveError::Unknown(format!(
                    "{}: an external subject runs only when named on the command line (--subject)",
                    crate::escape::visible(name)
                )))
            } else if let Some(r) = crate::exec::resolve::<O>(name) {
                r
            } else {
                let libraries: String = O::LIBRARIES.iter().map(|l| format!("{l}, ")).collect();
                Err(ResolveError::Unknown(format!(
                    "unknown subject {name:?}: use all, cuda, {libraries}bugs, oracle:<profile>, model:<profile>, \
                     bug:<name>, exec:<command> or a subject of bitparity.toml, each of them also after anyorder: \
                     (judged as claiming no profile)"
                )))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oracles::op::{router::Router, seqwise_loss::SeqwiseLoss};
    use proptest::prelude::{Rng, RngExt};

    /// Any bytes give a valid case within the fuzz limits; the same bytes
    /// the same case; one-byte inputs varied cases (the pseudo-random tail);
    /// 4-byte inputs, which libFuzzer starts from, every class.
    fn fuzz_bytes_contract<O: Harness>() {
        let json = |c: &O::Case| serde_json::to_string(c).unwrap_or_default();
        assert!(O::validate(&from_fuzz_bytes::<O>(&[])).is_ok());
        for fill in [0x00u8, 0x7f, 0x80, 0xff] {
            for len in [1, 3, 17, 64, 1000, 5000, 40_000] {
                let c = from_fuzz_bytes::<O>(&vec![fill; len]);
                assert!(O::validate(&c).is_ok(), "{} {fill:#x} x {len}", O::NAME);
            }
        }
        let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
        for i in 0..1000 {
            let mut bytes = vec![0u8; rng.random_range(0..(64 << (i % 7)))];
            rng.fill_bytes(&mut bytes);
            let c = from_fuzz_bytes::<O>(&bytes);
            assert!(O::validate(&c).is_ok(), "{} {bytes:?}", O::NAME);
            assert!(O::size(&c) <= crate::gen::fuzz_config().max_te);
        }
        let bytes: Vec<u8> = (0..300u32).map(|i| (i * 37 % 251) as u8).collect();
        assert_eq!(json(&from_fuzz_bytes::<O>(&bytes)), json(&from_fuzz_bytes::<O>(&bytes)));
        let distinct: BTreeSet<String> = (0..=255u8).map(|b| json(&from_fuzz_bytes::<O>(&[b]))).collect();
        assert!(distinct.len() > 200, "{}: {} distinct cases of 256 one-byte inputs", O::NAME, distinct.len());
        let mut seen = BTreeSet::new();
        for i in 0..3000u32 {
            seen.extend(O::classify(&from_fuzz_bytes::<O>(&i.to_le_bytes())));
        }
        let missing: Vec<String> = O::classes().iter().filter(|c| !seen.contains(c)).map(|c| c.to_string()).collect();
        assert!(missing.is_empty(), "{}: never generated from 4-byte inputs: {missing:?}", O::NAME);
    }

    #[test]
    fn seqwise_loss_fuzz_bytes() {
        fuzz_bytes_contract::<SeqwiseLoss>();
    }

    #[test]
    fn router_fuzz_bytes() {
        fuzz_bytes_contract::<Router>();
    }

    #[test]
    fn shared_expert_fuzz_bytes() {
        fuzz_bytes_contract::<oracles::op::shared_expert::SharedExpert>();
    }

    #[test]
    fn moe_combine_fuzz_bytes() {
        fuzz_bytes_contract::<oracles::op::moe_combine::MoeCombine>();
    }

    /// `cublas` and `cuda-tc` name shared_expert's cuBLAS and tensor-core
    /// subjects: where they cannot run (no GPU, no libcublas, no NVRTC) the
    /// run is unavailable, never an unknown name and never a pass; the other
    /// ops have no such subjects.
    #[test]
    fn cublas_and_cuda_tc_are_subjects_of_shared_expert_only() {
        use oracles::op::shared_expert::SharedExpert;
        // shared_expert's named subjects: the tensor-core kernels, then
        // every cuBLAS variant the subject module knows.
        assert_eq!(SharedExpert::LIBRARIES[..2], ["cuda-tc", "cuda-wgmma"]);
        assert_eq!(SharedExpert::LIBRARIES[2..], crate::subject::cuda::shared_expert_cublas::NAMES);
        for name in ["cublas", "cuda-tc", "cuda-wgmma"] {
            match resolve::<SharedExpert>(name) {
                Ok(s) => assert_eq!(s[0].name(), name),
                Err(ResolveError::Unavailable(r)) => assert!(r.starts_with(&format!("shared_expert {name}: ")), "{r}"),
                Err(e) => panic!("{name}: {e}"),
            }
            for e in [resolve::<SeqwiseLoss>(name).err(), resolve::<Router>(name).err()] {
                assert!(matches!(e, Some(ResolveError::Unknown(_))), "{e:?}");
            }
        }
        let Err(ResolveError::Unknown(m)) = resolve::<SharedExpert>("cublass") else { panic!("a typo resolves") };
        assert!(
            m.contains("cuda, cuda-tc, cuda-wgmma, cublas, cublas-fp32-reduction, cublaslt-pinned, cublaslt-pinned-aligned, bugs"),
            "{m}"
        );
        assert!(
            resolve::<SharedExpert>("cublas-fp32-reduction").is_ok_and(|s| s[0].name() == "cublas-fp32-reduction")
                || matches!(resolve::<SharedExpert>("cublas-fp32-reduction"), Err(ResolveError::Unavailable(_)))
        );
    }
}
