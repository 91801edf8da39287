//! `seqwise_loss`'s testing half: its generator, shrinking, transforms,
//! subjects and planted bugs, plugged into the generic layer.

use super::{hex_list, Harness, Metamorphic, Transform, SHOWN_ROWS};
use crate::gen::seqwise_loss as gen;
use crate::gen::GenConfig;
use crate::model::SeqwiseModel;
use crate::planted::seqwise_loss::SeqwiseBug;
use crate::subject::SubjectRef;
use oracles::case::hexf;
use oracles::case::seqwise_loss::{Objective, SeqwiseCase};
use oracles::op::seqwise_loss::SeqwiseLoss;
use oracles::padding::PaddingRule;
use proptest::test_runner::TestRng;
use std::collections::BTreeSet;
use std::fmt::Write;
use std::sync::Arc;

/// Values of an appended padding row: NaN, infinities, a huge finite value.
const POISON: [f32; 4] = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -1e30];

/// The two appended padding rows for a subject that claims `mask`: finite,
/// one row all positive and one all negative, so every padding term is
/// finite (|p_te| <= 1 in a row of one sign, under either objective) and
/// its product with the mask is +0.0 or -0.0, both signs exercised.
const FINITE_PADDING: [f32; 2] = [0.75, -0.375];

impl Harness for SeqwiseLoss {
    type Class = gen::Class;
    type Model = SeqwiseModel;
    const FUZZ_PREFIX: &'static str = "loss";

    fn classes() -> &'static [gen::Class] {
        &gen::Class::ALL
    }
    fn generate(rng: &mut TestRng, cfg: &GenConfig) -> SeqwiseCase {
        gen::generate(rng, cfg)
    }
    fn classify(case: &SeqwiseCase) -> BTreeSet<gen::Class> {
        gen::classify(case)
    }
    fn size(case: &SeqwiseCase) -> usize {
        case.t * case.e
    }
    fn shrink_candidates(case: &SeqwiseCase) -> Vec<SeqwiseCase> {
        gen::shrink_candidates(case)
    }
    fn invalid_variants(case: &SeqwiseCase) -> Vec<(&'static str, SeqwiseCase)> {
        invalid_variants(case)
    }

    /// The padding relation by rule (docs/padding.md). `skip`: appended
    /// poisoned rows and the case's own padding poisoned change no bit, and
    /// the appended rows' gradient is +0.0. `mask`: a poisoned padding row
    /// is meant to make the loss NaN, so only appended *finite* padding rows
    /// are a relation (their masked terms are +-0.0, which change no bit of
    /// a sum started at +0.0); their own gradient rows are the mask
    /// oracle's to judge (conformance, accuracy), not compared here. Either
    /// way the property keeps a transform that can fail (a subject that
    /// reads padding into the counts or unmasked into P_e changes f or raw).
    fn transforms(kind: Metamorphic, case: &SeqwiseCase, padding: PaddingRule) -> Vec<Transform<SeqwiseCase>> {
        let identity: Vec<Option<usize>> = (0..case.t).map(Some).collect();
        let same = |what: &str, c: SeqwiseCase, rows: Vec<Option<usize>>, unmapped_zero: bool| Transform {
            what: what.into(),
            case: c,
            rows,
            same_global: true,
            unmapped_zero,
            local_only: false,
        };
        match kind {
            Metamorphic::Padding => {
                // Two padding rows appended, their map entries set: poisoned
                // (skip: no output bit may change, their gradient is +0.0)
                // or finite (mask: no bit of the global outputs or of a
                // valid row may change).
                let extra = 2;
                let mask = padding == PaddingRule::Mask;
                let mut c = case.clone();
                c.t += extra;
                if mask {
                    c.scores.extend((0..extra * case.e).map(|i| FINITE_PADDING[i / case.e]));
                } else {
                    c.scores.extend((0..extra * case.e).map(|i| POISON[i % POISON.len()]));
                }
                let mut pad = case.padding.clone().unwrap_or_else(|| vec![false; case.t]);
                pad.extend([true; 2]);
                c.padding = Some(pad);
                if let Objective::ProvidedMap { map } = &mut c.objective {
                    map.extend(vec![true; extra * case.e]);
                }
                let mut rows = identity.clone();
                rows.extend([None, None]);
                if mask {
                    return vec![same("appended finite padding (mask rule)", c, rows, false)];
                }
                let mut out = vec![same("appended padding", c, rows, true)];
                // The case's own padding rows poisoned.
                if let Some(p) = &case.padding {
                    let mut c = case.clone();
                    for (t, _) in p.iter().enumerate().filter(|(_, &x)| x) {
                        for (i, x) in c.scores[t * case.e..(t + 1) * case.e].iter_mut().enumerate() {
                            *x = POISON[(t + i) % POISON.len()];
                        }
                    }
                    out.push(same("poisoned padding", c, identity, false));
                }
                out
            }
            Metamorphic::OffsetStride => {
                let mut c = case.clone();
                c.layout = case.layout.relaid(case.t, case.e);
                vec![same("relaid out", c, identity, false)]
            }
            Metamorphic::BatchInvariance => Vec::new(),
        }
    }

    fn applies(kind: Metamorphic) -> Result<(), String> {
        match kind {
            Metamorphic::BatchInvariance => Err("no output of seqwise_loss depends on its own token alone \
                                                 (f_e and raw sum over every token)"
                .into()),
            _ => Ok(()),
        }
    }

    fn describe(case: &SeqwiseCase) -> String {
        describe(case)
    }

    fn device() -> Result<SubjectRef<Self>, String> {
        crate::subject::cuda::probe().map(|c| Arc::new(c) as SubjectRef<Self>)
    }
}

super::kernel_model!(SeqwiseLoss, SeqwiseModel, SeqwiseBug);

/// Invalid variants of a valid case, each with what makes it invalid.
pub fn invalid_variants(case: &SeqwiseCase) -> Vec<(&'static str, SeqwiseCase)> {
    let mut v = Vec::new();
    let mut c = case.clone();
    c.t = 0;
    c.scores.clear();
    c.padding = None;
    c.objective = Objective::UnbiasedTopK { k: 1 };
    v.push(("T = 0", c));
    let mut c = case.clone();
    c.e = 0;
    c.scores.clear();
    c.objective = Objective::UnbiasedTopK { k: 1 };
    v.push(("E = 0", c));
    for k in [0, case.e + 1] {
        let mut c = case.clone();
        c.objective = Objective::UnbiasedTopK { k };
        v.push(("k outside 1..=E", c));
    }
    let mut c = case.clone();
    c.objective = Objective::ProvidedMap { map: vec![true; case.t * case.e + 1] };
    v.push(("map length", c));
    let mut c = case.clone();
    c.padding = Some(vec![false; case.t + 1]);
    v.push(("padding length", c));
    let mut c = case.clone();
    c.layout.offset = 4;
    v.push(("offset 4", c));
    let mut c = case.clone();
    c.layout.row_stride = case.e - 1;
    v.push(("row stride < E", c));
    let mut c = case.clone();
    c.scores.push(0.5);
    v.push(("scores length", c));
    v
}

/// The case compactly: the shape and settings, then each row's scores as
/// exact hex floats (and its map entries, its padding flag).
pub fn describe(case: &SeqwiseCase) -> String {
    let mut out = String::new();
    let objective = match &case.objective {
        Objective::ProvidedMap { .. } => "provided map".to_string(),
        Objective::UnbiasedTopK { k } => format!("unbiased top-{k}"),
    };
    let _ = writeln!(
        out,
        "T={} E={}, {objective}, clamp tie {:?}, g = {}, offset {}, row stride {}",
        case.t,
        case.e,
        case.clamp_tie,
        hexf::format(case.g),
        case.layout.offset,
        case.layout.row_stride
    );
    for t in 0..case.t.min(SHOWN_ROWS) {
        let map = match &case.objective {
            Objective::ProvidedMap { map } => {
                let m: String =
                    map[t * case.e..(t + 1) * case.e].iter().take(64).map(|&b| if b { '1' } else { '0' }).collect();
                format!(" map {m}")
            }
            Objective::UnbiasedTopK { .. } => String::new(),
        };
        let pad = if case.is_padding(t) { " (padding)" } else { "" };
        let _ = writeln!(out, "row {t}{pad}: {}{map}", hex_list(case.row(t)));
    }
    if case.t > SHOWN_ROWS {
        let _ = writeln!(out, "... {} more rows (the corpus entry holds them all)", case.t - SHOWN_ROWS);
    }
    out
}
