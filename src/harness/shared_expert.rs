//! `shared_expert`'s testing half: its generator, shrinking, transforms,
//! subjects and planted bugs, plugged into the generic layer.

use super::{hex_list, Harness, Metamorphic, Transform, SHOWN_ROWS};
use crate::gen::shared_expert as gen;
use crate::gen::GenConfig;
use crate::model::SharedExpertModel;
use crate::planted::SharedExpertBug;
use crate::subject::SubjectRef;
use oracles::case::shared_expert::SharedExpertCase;
use oracles::op::shared_expert::SharedExpert;
use oracles::padding::PaddingRule;
use proptest::test_runner::TestRng;
use std::collections::BTreeSet;
use std::fmt::Write;
use std::sync::Arc;

impl Harness for SharedExpert {
    type Class = gen::Class;
    type Model = SharedExpertModel;
    const FUZZ_PREFIX: &'static str = "se";

    fn classes() -> &'static [gen::Class] {
        &gen::Class::ALL
    }
    fn generate(rng: &mut TestRng, cfg: &GenConfig) -> SharedExpertCase {
        gen::generate(rng, cfg)
    }
    fn classify(case: &SharedExpertCase) -> BTreeSet<gen::Class> {
        gen::classify(case)
    }
    /// T x H x F: the work of a case (every dot product's length times
    /// their number), what the MPFR oracle's cost grows with.
    fn size(case: &SharedExpertCase) -> usize {
        case.t.saturating_mul(case.h).saturating_mul(case.f)
    }
    fn shrink_candidates(case: &SharedExpertCase) -> Vec<SharedExpertCase> {
        gen::shrink_candidates(case)
    }
    fn invalid_variants(case: &SharedExpertCase) -> Vec<(&'static str, SharedExpertCase)> {
        gen::invalid_variants(case)
    }

    /// shared_expert has no padding mask
    /// (docs/ops/shared_expert.md#padding-rows): every token is computed, and
    /// there is nothing to append or poison.
    fn applies(kind: Metamorphic) -> Result<(), String> {
        match kind {
            Metamorphic::Padding => Err(
                "shared_expert has no padding mask (docs/ops/shared_expert.md#padding-rows): every token is computed"
                    .into(),
            ),
            Metamorphic::OffsetStride | Metamorphic::BatchInvariance => Ok(()),
        }
    }

    fn transforms(kind: Metamorphic, case: &SharedExpertCase, _: PaddingRule) -> Vec<Transform<SharedExpertCase>> {
        match kind {
            Metamorphic::Padding => Vec::new(),
            Metamorphic::OffsetStride => {
                let mut c = case.clone();
                c.layout = case.layout.relaid(case.t, case.h);
                vec![Transform {
                    what: "relaid out".into(),
                    case: c,
                    rows: (0..case.t).map(Some).collect(),
                    same_global: true,
                    unmapped_zero: false,
                    local_only: false,
                }]
            }
            Metamorphic::BatchInvariance => {
                // Sub-batches (docs/ops/shared_expert.md#properties: fwd(x)[t]
                // == fwd(x[t..t+1])): each half, the first and the last token
                // alone, and a middle token alone. Each sub-batch is dense.
                let t = case.t;
                if t < 2 {
                    return Vec::new();
                }
                let mut windows = vec![(0, t / 2), (t / 2, t), (0, 1), (t - 1, t), (t / 2, t / 2 + 1)];
                windows.sort_unstable();
                windows.dedup();
                windows
                    .into_iter()
                    .filter(|&(a, b)| b - a < t)
                    .map(|(a, b)| Transform {
                        what: format!("tokens {a}..{b} alone"),
                        case: case.rows(a..b),
                        rows: (a..b).map(Some).collect(),
                        same_global: false,
                        unmapped_zero: false,
                        local_only: true,
                    })
                    .collect()
            }
        }
    }

    fn describe(case: &SharedExpertCase) -> String {
        describe(case)
    }

    fn device() -> Result<SubjectRef<Self>, String> {
        use crate::subject::cuda::shared_expert::{probe, Variant};
        probe(Variant::Strict).map(|c| Arc::new(c) as SubjectRef<Self>)
    }

    /// The tensor-core kernels, then cuBLAS's variants.
    const LIBRARIES: &'static [&'static str] =
        &["cuda-tc", "cuda-wgmma", "cublas", "cublas-fp32-reduction", "cublaslt-pinned", "cublaslt-pinned-aligned"];
    /// The tensor-core kernels claim `mma16-h100`: correct subjects. The
    /// cuBLAS variants claim no profile (and are not batch-invariant).
    const DEFAULT_LIBRARIES: &'static [&'static str] = &["cuda-tc", "cuda-wgmma"];

    fn library(name: &str) -> Result<SubjectRef<Self>, String> {
        use crate::subject::cuda::shared_expert::{probe as probe_cuda, Variant as Kernel};
        use crate::subject::cuda::shared_expert_cublas::{probe, Variant};
        if let Some(k) = [Kernel::TensorCore, Kernel::Wgmma].into_iter().find(|k| k.name() == name) {
            return probe_cuda(k).map(|c| Arc::new(c) as SubjectRef<Self>);
        }
        let Some(v) = Variant::ALL.into_iter().find(|v| v.name() == name) else {
            return Err(format!("shared_expert: no library subject {name:?}"));
        };
        probe(v).map(|c| Arc::new(c) as SubjectRef<Self>)
    }
}

super::kernel_model!(SharedExpert, SharedExpertModel, SharedExpertBug);

/// The case compactly: shape and layout, the weights, then each token's x
/// and dy, as exact hex floats.
pub fn describe(case: &SharedExpertCase) -> String {
    let mut out = String::new();
    let (h, f) = (case.h, case.f);
    let _ = writeln!(
        out,
        "T={} H={} F={}, offset {}, row stride {}",
        case.t, h, f, case.layout.offset, case.layout.row_stride
    );
    for r in 0..(2 * f).min(SHOWN_ROWS) {
        let what = if r < f { format!("gate {r}") } else { format!("up {}", r - f) };
        let _ = writeln!(out, "w1 row {r} ({what}): {}", hex_list(&case.w1[r * h..(r + 1) * h]));
    }
    if 2 * f > SHOWN_ROWS {
        let _ = writeln!(out, "... {} more w1 rows", 2 * f - SHOWN_ROWS);
    }
    for i in 0..h.min(SHOWN_ROWS) {
        let _ = writeln!(out, "w2 row {i}: {}", hex_list(&case.w2[i * f..(i + 1) * f]));
    }
    if h > SHOWN_ROWS {
        let _ = writeln!(out, "... {} more w2 rows", h - SHOWN_ROWS);
    }
    for t in 0..case.t.min(SHOWN_ROWS) {
        let _ = writeln!(out, "token {t}: x {} dy {}", hex_list(case.x_row(t)), hex_list(case.dy_row(t)));
    }
    if case.t > SHOWN_ROWS {
        let _ = writeln!(out, "... {} more tokens (the corpus entry holds them all)", case.t - SHOWN_ROWS);
    }
    out
}
