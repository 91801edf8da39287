//! `seqwise_loss` on the wire (docs/protocol.md, "seqwise_loss").
//!
//! Header: `t`, `e`, `offset`, `row_stride` (the scores' layout),
//! `objective` (`provided_map` | `unbiased_top_k`), `k` (top-k only),
//! `clamp_tie` (`strict` | `inclusive`), `g` (the f32 bits of g, an integer).
//! Buffers: `scores` f32 as they lie in memory (poisoned gaps, padding rows
//! with whatever they hold: NaN and Inf included); `padding` u8[T] when the
//! case has padding; `map` u8[T*E] for a provided map.
//! Outputs: fwd `raw` f32[1], `counts` u32[E], `freq` f32[E]; bwd `grad`
//! f32[T*E], dense row-major.

use super::process::{Buffer, Dtype, Expected, Request};
use super::{expect, header, place, Dir, Wire};
use oracles::case::seqwise_loss::{Objective, SeqwiseBackward, SeqwiseCase, SeqwiseForward};
use oracles::op::seqwise_loss::SeqwiseLoss;
use serde_json::Value;

impl Wire for SeqwiseLoss {
    fn encode(c: &SeqwiseCase, _dir: Dir) -> Result<Request, String> {
        let (objective, k) = match &c.objective {
            Objective::ProvidedMap { .. } => ("provided_map", None),
            Objective::UnbiasedTopK { k } => ("unbiased_top_k", Some(*k)),
        };
        let mut fields = vec![
            ("t", Value::from(c.t)),
            ("e", c.e.into()),
            ("offset", c.layout.offset.into()),
            ("row_stride", c.layout.row_stride.into()),
            ("objective", objective.into()),
            ("clamp_tie", c.clamp_tie.name().into()),
            ("g", c.g.to_bits().into()),
        ];
        if let Some(k) = k {
            fields.push(("k", k.into()));
        }
        let mut buffers =
            vec![Buffer::f32s("scores", &place(&c.scores, c.t, c.e, c.layout.offset, c.layout.row_stride)?)];
        if let Some(p) = &c.padding {
            buffers.push(Buffer::bools("padding", p));
        }
        if let Objective::ProvidedMap { map } = &c.objective {
            buffers.push(Buffer::bools("map", map));
        }
        Ok(Request { header: header(fields), buffers })
    }

    fn expected(c: &SeqwiseCase, dir: Dir) -> Result<Vec<Expected>, String> {
        Ok(match dir {
            Dir::Fwd => vec![
                expect("raw", Dtype::F32, Some(1))?,
                expect("counts", Dtype::U32, Some(c.e))?,
                expect("freq", Dtype::F32, Some(c.e))?,
            ],
            Dir::Bwd => vec![expect("grad", Dtype::F32, c.t.checked_mul(c.e))?],
        })
    }

    fn decode_fwd(_c: &SeqwiseCase, bufs: Vec<Buffer>) -> Result<SeqwiseForward<f32>, String> {
        let [raw, counts, freq] = <[Buffer; 3]>::try_from(bufs).map_err(|b| format!("{} outputs", b.len()))?;
        Ok(SeqwiseForward { raw: raw.to_f32()[0], counts: counts.to_u32(), freq: freq.to_f32() })
    }

    fn decode_bwd(_c: &SeqwiseCase, bufs: Vec<Buffer>) -> Result<SeqwiseBackward<f32>, String> {
        let [grad] = <[Buffer; 1]>::try_from(bufs).map_err(|b| format!("{} outputs", b.len()))?;
        Ok(SeqwiseBackward { grad: grad.to_f32() })
    }
}
