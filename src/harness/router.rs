//! `router`'s testing half: its generator, shrinking, transforms, subjects
//! and planted bugs, plugged into the generic layer.

use super::{hex_list, Harness, Metamorphic, Transform, SHOWN_ROWS};
use crate::gen::router as gen;
use crate::gen::GenConfig;
use crate::model::RouterModel;
use crate::planted::router::RouterBug;
use crate::subject::SubjectRef;
use oracles::case::hexf;
use oracles::case::router::RouterCase;
use oracles::op::router::Router;
use oracles::padding::PaddingRule;
use proptest::test_runner::TestRng;
use std::collections::BTreeSet;
use std::fmt::Write;
use std::sync::Arc;

/// Logits of an appended or poisoned padding token.
const POISON: [f32; 4] = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -1e30];

/// The case with only the tokens `rows` (in that order).
fn keep_tokens(case: &RouterCase, rows: &[usize]) -> RouterCase {
    let (e, k) = (case.e, case.k);
    let mut c = case.clone();
    c.t = rows.len();
    c.logits = rows.iter().flat_map(|&r| case.row(r).to_vec()).collect();
    c.gw = rows.iter().flat_map(|&r| case.gw[r * k..(r + 1) * k].to_vec()).collect();
    c.padding = case.padding.as_ref().map(|p| rows.iter().map(|&r| p[r]).collect());
    debug_assert_eq!(c.logits.len(), c.t * e);
    c
}

impl Harness for Router {
    type Class = gen::Class;
    type Model = RouterModel;
    const FUZZ_PREFIX: &'static str = "router";

    fn classes() -> &'static [gen::Class] {
        &gen::Class::ALL
    }
    fn generate(rng: &mut TestRng, cfg: &GenConfig) -> RouterCase {
        gen::generate(rng, cfg)
    }
    fn classify(case: &RouterCase) -> BTreeSet<gen::Class> {
        gen::classify(case)
    }
    fn size(case: &RouterCase) -> usize {
        case.t * case.e
    }
    fn shrink_candidates(case: &RouterCase) -> Vec<RouterCase> {
        gen::shrink_candidates(case)
    }
    fn invalid_variants(case: &RouterCase) -> Vec<(&'static str, RouterCase)> {
        gen::invalid_variants(case)
    }

    /// The same relations under both padding rules: a padding token's loss
    /// part under `mask` reaches only its own gradient row, which neither
    /// relation compares (docs/padding.md).
    fn transforms(kind: Metamorphic, case: &RouterCase, _: PaddingRule) -> Vec<Transform<RouterCase>> {
        let identity: Vec<Option<usize>> = (0..case.t).map(Some).collect();
        let global = |what: &str, c: RouterCase, rows: Vec<Option<usize>>| Transform {
            what: what.into(),
            case: c,
            rows,
            same_global: true,
            unmapped_zero: false,
            local_only: false,
        };
        match kind {
            Metamorphic::Padding => {
                // Padding tokens are routed (their own outputs are whatever
                // their logits give), but they change no other token's
                // outputs, the counts, or a fused loss.
                let extra = 2;
                let mut c = case.clone();
                c.t += extra;
                c.logits.extend((0..extra * case.e).map(|i| POISON[i % POISON.len()]));
                c.gw.extend(vec![1.0; extra * case.k]);
                let mut pad = case.padding.clone().unwrap_or_else(|| vec![false; case.t]);
                pad.extend([true; 2]);
                c.padding = Some(pad);
                let mut rows = identity.clone();
                rows.extend([None, None]);
                let mut out = vec![global("appended padding", c, rows)];
                if let Some(p) = &case.padding {
                    let mut c = case.clone();
                    for (t, _) in p.iter().enumerate().filter(|(_, &x)| x) {
                        for (i, x) in c.logits[t * case.e..(t + 1) * case.e].iter_mut().enumerate() {
                            *x = POISON[(t + i) % POISON.len()];
                        }
                    }
                    let rows = (0..case.t).map(|t| (!p[t]).then_some(t)).collect();
                    out.push(global("poisoned padding", c, rows));
                }
                out
            }
            Metamorphic::OffsetStride => {
                let mut c = case.clone();
                c.layout = case.layout.relaid(case.t, case.e);
                vec![global("relaid out", c, identity)]
            }
            Metamorphic::BatchInvariance => {
                // Sub-batches: each half, the first and the last token alone.
                let t = case.t;
                if t < 2 {
                    return Vec::new();
                }
                let mut windows = vec![(0, t / 2), (t / 2, t), (0, 1), (t - 1, t)];
                windows.dedup();
                windows
                    .into_iter()
                    .map(|(a, b)| Transform {
                        what: format!("tokens {a}..{b} alone"),
                        case: keep_tokens(case, &(a..b).collect::<Vec<_>>()),
                        rows: (a..b).map(Some).collect(),
                        same_global: false,
                        unmapped_zero: false,
                        local_only: true,
                    })
                    .collect()
            }
        }
    }

    fn describe(case: &RouterCase) -> String {
        describe(case)
    }

    fn device() -> Result<SubjectRef<Self>, String> {
        crate::subject::cuda::router::probe().map(|c| Arc::new(c) as SubjectRef<Self>)
    }
}

super::kernel_model!(Router, RouterModel, RouterBug);

/// The case compactly: shape and settings, then each token's logits and gw
/// as exact hex floats.
pub fn describe(case: &RouterCase) -> String {
    let mut out = String::new();
    let loss = match &case.loss {
        None => "no fused loss".to_string(),
        Some(l) => format!("fused loss ({:?}, g = {})", l.clamp_tie, hexf::format(l.g)),
    };
    let _ = writeln!(
        out,
        "T={} E={} G={} L={} k={}, route_scale {}, route_norm {}, {loss}, offset {}, row stride {}",
        case.t,
        case.e,
        case.groups,
        case.topk_groups,
        case.k,
        hexf::format(case.route_scale),
        case.route_norm,
        case.layout.offset,
        case.layout.row_stride
    );
    let _ = writeln!(out, "bias: {}", hex_list(&case.bias));
    for t in 0..case.t.min(SHOWN_ROWS) {
        let gw = &case.gw[t * case.k..(t + 1) * case.k];
        let pad = if case.is_padding(t) { " (padding)" } else { "" };
        let _ = writeln!(out, "token {t}{pad}: logits {} gw {}", hex_list(case.row(t)), hex_list(gw));
    }
    if case.t > SHOWN_ROWS {
        let _ = writeln!(out, "... {} more tokens (the corpus entry holds them all)", case.t - SHOWN_ROWS);
    }
    out
}
