//! `moe_combine`'s testing half: its generator, shrinking, transforms,
//! subjects and planted bugs, plugged into the generic layer.

use super::{hex_list, Harness, Metamorphic, Transform, SHOWN_ROWS};
use crate::gen::moe_combine as gen;
use crate::gen::GenConfig;
use crate::model::MoeCombineModel;
use crate::planted::MoeCombineBug;
use crate::subject::SubjectRef;
use oracles::case::moe_combine::{slot_count, MoeCombineCase};
use oracles::op::moe_combine::MoeCombine;
use oracles::padding::PaddingRule;
use proptest::test_runner::TestRng;
use std::collections::BTreeSet;
use std::fmt::Write;
use std::sync::Arc;

/// Weights, x and dy of an appended or poisoned padding token: NaN, both
/// infinities and a huge finite value, each a bf16 (x must hold bf16 values).
const POISON: [f32; 4] = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -1.0e30f32];

/// `POISON[i]` as a bf16 (its upper half: -1e30 becomes -0x1.93p+99).
fn poison(i: usize) -> f32 {
    f32::from_bits(POISON[i % POISON.len()].to_bits() & 0xffff_0000)
}

/// `case` with tokens `tokens` made padding and poisoned: their weights, x
/// and dy rows replaced by [`poison`] values.
fn poisoned(mut c: MoeCombineCase, tokens: &[usize]) -> MoeCombineCase {
    let (h, k) = (c.h, c.k);
    for &t in tokens {
        for (i, w) in c.weights[t * k..(t + 1) * k].iter_mut().enumerate() {
            *w = poison(t + i);
        }
        for i in t * h..(t + 1) * h {
            c.x[i] = poison(i + 1);
            c.dy[i] = poison(i + 2);
        }
    }
    c
}

impl Harness for MoeCombine {
    type Class = gen::Class;
    type Model = MoeCombineModel;
    const FUZZ_PREFIX: &'static str = "combine";

    fn classes() -> &'static [gen::Class] {
        &gen::Class::ALL
    }
    fn generate(rng: &mut TestRng, cfg: &GenConfig) -> MoeCombineCase {
        gen::generate(rng, cfg)
    }
    fn classify(case: &MoeCombineCase) -> BTreeSet<gen::Class> {
        gen::classify(case)
    }
    /// T x k x H: the terms of the combine (and of dw, and of dx), what
    /// every sum's cost and the MPFR oracle's grow with.
    fn size(case: &MoeCombineCase) -> usize {
        case.t.saturating_mul(case.k).saturating_mul(case.h)
    }
    fn shrink_candidates(case: &MoeCombineCase) -> Vec<MoeCombineCase> {
        gen::shrink_candidates(case)
    }
    fn invalid_variants(case: &MoeCombineCase) -> Vec<(&'static str, MoeCombineCase)> {
        gen::invalid_variants(case)
    }

    /// The same relations under both padding rules: a padding token is never
    /// dispatched under either (docs/ops/moe_combine.md#padding-and-capacity).
    fn transforms(kind: Metamorphic, case: &MoeCombineCase, _: PaddingRule) -> Vec<Transform<MoeCombineCase>> {
        let (t, k) = (case.t, case.k);
        let identity: Vec<Option<usize>> = (0..t).map(Some).collect();
        // Padding tokens change no slot, so the slot-indexed outputs
        // (counts, x_disp, dx_exp) must stay as they are, and their own y,
        // dw and dx are +0.0.
        let padded = |what: &str, c: MoeCombineCase, rows: Vec<Option<usize>>| Transform {
            what: what.into(),
            case: c,
            rows,
            same_global: true,
            unmapped_zero: true,
            local_only: false,
        };
        match kind {
            Metamorphic::Padding => {
                // Two tokens appended, choosing experts 0..k (valid ids),
                // poisoned; x_exp and g_disp as they are (no slot added).
                let extra = 2;
                let mut c = case.clone();
                c.t += extra;
                c.ids.extend((0..extra).flat_map(|_| 0..k as u32));
                c.weights.extend(vec![0.0; extra * k]);
                c.x.extend(vec![0.0; extra * case.h]);
                c.dy.extend(vec![0.0; extra * case.h]);
                let mut pad = case.padding.clone().unwrap_or_else(|| vec![false; t]);
                pad.extend([true; 2]);
                c.padding = Some(pad);
                let c = poisoned(c, &[t, t + 1]);
                let mut rows = identity.clone();
                rows.extend([None, None]);
                let mut out = vec![padded("appended padding", c, rows)];
                if let Some(p) = &case.padding {
                    let own: Vec<usize> = (0..t).filter(|&i| p[i]).collect();
                    if !own.is_empty() {
                        let rows = (0..t).map(|i| (!p[i]).then_some(i)).collect();
                        out.push(padded("poisoned padding", poisoned(case.clone(), &own), rows));
                    }
                }
                out
            }
            Metamorphic::OffsetStride => {
                // Both heights (T rows of x and dy, N_slots of x_exp and
                // g_disp) must fit the new layout.
                let rows = t.max(slot_count(case).unwrap_or(0));
                let mut c = case.clone();
                c.layout = case.layout.relaid(rows, case.h);
                vec![padded("relaid out", c, identity)]
            }
            Metamorphic::BatchInvariance => {
                // Sub-batches (MoeCombineCase::sub_batch: none with a
                // capacity): each half, the first and the last token alone,
                // and a middle token alone. The slot-indexed outputs are not
                // compared (their rows move), the per-token ones are.
                if t < 2 {
                    return Vec::new();
                }
                let mut windows = vec![(0, t / 2), (t / 2, t), (0, 1), (t - 1, t), (t / 2, t / 2 + 1)];
                windows.sort_unstable();
                windows.dedup();
                windows
                    .into_iter()
                    .filter(|&(a, b)| b - a < t)
                    .filter_map(|(a, b)| {
                        case.sub_batch(a..b).map(|sub| Transform {
                            what: format!("tokens {a}..{b} alone"),
                            case: sub,
                            rows: (a..b).map(Some).collect(),
                            same_global: false,
                            unmapped_zero: false,
                            local_only: true,
                        })
                    })
                    .collect()
            }
        }
    }

    fn describe(case: &MoeCombineCase) -> String {
        describe(case)
    }

    fn device() -> Result<SubjectRef<Self>, String> {
        use crate::subject::cuda::moe_combine::{probe, Variant};
        probe(Variant::Gather).map(|c| Arc::new(c) as SubjectRef<Self>)
    }

    /// The atomic scatter combine: it claims no profile (the order of a
    /// token's sum is the order its atomics land), so it runs only when
    /// named.
    const LIBRARIES: &'static [&'static str] = &["cuda-scatter"];

    fn library(name: &str) -> Result<SubjectRef<Self>, String> {
        use crate::subject::cuda::moe_combine::{probe, Variant};
        match name {
            "cuda-scatter" => probe(Variant::Scatter).map(|c| Arc::new(c) as SubjectRef<Self>),
            _ => Err(format!("moe_combine: no library subject {name:?}")),
        }
    }
}

super::kernel_model!(MoeCombine, MoeCombineModel, MoeCombineBug);

/// The case compactly: shape, capacity and layout; each token's ids,
/// weights, x and dy; each slot's x_exp and g_disp rows; as exact hex floats.
pub fn describe(case: &MoeCombineCase) -> String {
    let mut out = String::new();
    let (h, k) = (case.h, case.k);
    let capacity = case.capacity.map_or_else(|| "no capacity".to_string(), |c| format!("capacity {c}"));
    let _ = writeln!(
        out,
        "T={} H={h} E={} k={k}, {capacity}, offset {}, row stride {}",
        case.t, case.e, case.layout.offset, case.layout.row_stride
    );
    for t in 0..case.t.min(SHOWN_ROWS) {
        let pad = if case.is_padding(t) { " (padding)" } else { "" };
        let _ = writeln!(
            out,
            "token {t}{pad}: ids {:?} weights {} x {} dy {}",
            case.ids_row(t),
            hex_list(case.weights_row(t)),
            hex_list(case.x_row(t)),
            hex_list(case.dy_row(t))
        );
    }
    if case.t > SHOWN_ROWS {
        let _ = writeln!(out, "... {} more tokens (the corpus entry holds them all)", case.t - SHOWN_ROWS);
    }
    let slots = case.x_exp.len() / h.max(1);
    for s in 0..slots.min(SHOWN_ROWS) {
        let _ =
            writeln!(out, "slot {s}: x_exp {} g_disp {}", hex_list(case.x_exp_row(s)), hex_list(case.g_disp_row(s)));
    }
    if slots > SHOWN_ROWS {
        let _ = writeln!(out, "... {} more slots", slots - SHOWN_ROWS);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::GenConfig;
    use oracles::case::moe_combine::dispatch;
    use proptest::test_runner::{RngAlgorithm, TestRng};

    fn cases(n: usize) -> Vec<MoeCombineCase> {
        let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
        (0..n).map(|_| gen::generate(&mut rng, &GenConfig::default())).collect()
    }

    /// Every transformed case is valid, its padding tokens are never
    /// dispatched, and the appended ones leave every slot where it was.
    #[test]
    fn transforms_are_valid_and_keep_the_slots() {
        let mut sub_batches = 0;
        for c in cases(300) {
            for kind in [Metamorphic::Padding, Metamorphic::OffsetStride, Metamorphic::BatchInvariance] {
                for tr in MoeCombine::transforms(kind, &c, PaddingRule::Skip) {
                    assert_eq!(tr.case.validate(), Ok(()), "{kind:?} {}: {:?}", tr.what, tr.case);
                    assert_eq!(tr.rows.len(), tr.case.t, "{}", tr.what);
                    if kind == Metamorphic::BatchInvariance {
                        assert!(c.capacity.is_none(), "a sub-batch of a case with a capacity");
                        sub_batches += 1;
                    }
                    if kind == Metamorphic::Padding {
                        let (a, b) = (dispatch(&c).unwrap(), dispatch(&tr.case).unwrap());
                        assert_eq!((a.counts, a.owner), (b.counts, b.owner), "{}", tr.what);
                        if tr.what == "appended padding" {
                            assert!(tr.case.x.iter().zip(&c.x).all(|(p, q)| p.to_bits() == q.to_bits()));
                        }
                    }
                }
            }
        }
        assert!(sub_batches > 100, "{sub_batches} sub-batches");
    }

    #[test]
    fn describe_names_the_shape_and_the_padding() {
        let c = cases(300).into_iter().find(|c| c.padding.as_ref().is_some_and(|p| p[0])).expect("a padding token 0");
        let d = describe(&c);
        assert!(d.starts_with(&format!("T={} H={} E={} k={}", c.t, c.h, c.e, c.k)), "{d}");
        assert!(d.contains("token 0 (padding)"), "{d}");
    }
}
