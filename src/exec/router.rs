//! `router` on the wire (docs/protocol.md, "router").
//!
//! Header: `t`, `e`, `offset`, `row_stride` (the logits' layout), `groups`,
//! `topk_groups`, `k`, `route_scale` (f32 bits), `route_norm` (bool),
//! `loss` (null, or `{"clamp_tie": ..., "g": f32 bits}`).
//! Buffers: `logits` f32 as they lie in memory (poisoned gaps); `bias`
//! f32[E]; `padding` u8[T] when the case has padding; `gw` f32[T*k].
//! Outputs: fwd `ids` u32[T*k] (ascending per row), `weights` f32[T*k],
//! `map` u8[T*E], `counts` u32[E], `scores` f32[T*E]; bwd `grad` f32[T*E]
//! (the gradient of the logits), all dense row-major.

use super::process::{Buffer, Dtype, Expected, Request};
use super::{expect, header, place, Dir, Wire};
use oracles::case::router::{RouterBackward, RouterCase, RouterForward};
use oracles::op::router::Router;
use serde_json::Value;

impl Wire for Router {
    fn encode(c: &RouterCase, _dir: Dir) -> Result<Request, String> {
        let loss = match &c.loss {
            None => Value::Null,
            Some(l) => header(vec![("clamp_tie", l.clamp_tie.name().into()), ("g", l.g.to_bits().into())]).into(),
        };
        let fields = vec![
            ("t", Value::from(c.t)),
            ("e", c.e.into()),
            ("offset", c.layout.offset.into()),
            ("row_stride", c.layout.row_stride.into()),
            ("groups", c.groups.into()),
            ("topk_groups", c.topk_groups.into()),
            ("k", c.k.into()),
            ("route_scale", c.route_scale.to_bits().into()),
            ("route_norm", c.route_norm.into()),
            ("loss", loss),
        ];
        let mut buffers = vec![
            Buffer::f32s("logits", &place(&c.logits, c.t, c.e, c.layout.offset, c.layout.row_stride)?),
            Buffer::f32s("bias", &c.bias),
        ];
        if let Some(p) = &c.padding {
            buffers.push(Buffer::bools("padding", p));
        }
        buffers.push(Buffer::f32s("gw", &c.gw));
        Ok(Request { header: header(fields), buffers })
    }

    fn expected(c: &RouterCase, dir: Dir) -> Result<Vec<Expected>, String> {
        let te = c.t.checked_mul(c.e);
        Ok(match dir {
            Dir::Fwd => vec![
                expect("ids", Dtype::U32, c.t.checked_mul(c.k))?,
                expect("weights", Dtype::F32, c.t.checked_mul(c.k))?,
                expect("map", Dtype::U8, te)?,
                expect("counts", Dtype::U32, Some(c.e))?,
                expect("scores", Dtype::F32, te)?,
            ],
            Dir::Bwd => vec![expect("grad", Dtype::F32, te)?],
        })
    }

    fn decode_fwd(_c: &RouterCase, bufs: Vec<Buffer>) -> Result<RouterForward<f32>, String> {
        let [ids, weights, map, counts, scores] =
            <[Buffer; 5]>::try_from(bufs).map_err(|b| format!("{} outputs", b.len()))?;
        Ok(RouterForward {
            ids: ids.to_u32(),
            weights: weights.to_f32(),
            map: map.to_bools()?,
            counts: counts.to_u32(),
            scores: scores.to_f32(),
        })
    }

    fn decode_bwd(_c: &RouterCase, bufs: Vec<Buffer>) -> Result<RouterBackward<f32>, String> {
        let [grad] = <[Buffer; 1]>::try_from(bufs).map_err(|b| format!("{} outputs", b.len()))?;
        Ok(RouterBackward { grad: grad.to_f32() })
    }
}
