//! `shared_expert` on the wire (docs/protocol.md, "shared_expert").
//!
//! Header: `t`, `h`, `f`, `offset`, `row_stride` (the layout of x and dy).
//! Buffers, every value a bf16 sent as its exact f32 (a value that is not
//! bf16 is an invalid case, to refuse): `x` f32 as it lies in memory
//! (poisoned gaps), `w1` f32[2F*H] (F gate rows, then F up rows), `w2`
//! f32[H*F], `dy` f32 laid out as x.
//! Outputs: fwd `y` f32[T*H] (bf16 values); bwd `dx` f32[T*H], dense.

use super::process::{Buffer, Dtype, Expected, Request};
use super::{expect, header, place, Dir, Wire};
use oracles::case::shared_expert::{SharedExpertBackward, SharedExpertCase, SharedExpertForward};
use oracles::op::shared_expert::SharedExpert;
use serde_json::Value;

impl Wire for SharedExpert {
    fn encode(c: &SharedExpertCase, _dir: Dir) -> Result<Request, String> {
        let fields = vec![
            ("t", Value::from(c.t)),
            ("h", c.h.into()),
            ("f", c.f.into()),
            ("offset", c.layout.offset.into()),
            ("row_stride", c.layout.row_stride.into()),
        ];
        let (o, s) = (c.layout.offset, c.layout.row_stride);
        let buffers = vec![
            Buffer::f32s("x", &place(&c.x, c.t, c.h, o, s)?),
            Buffer::f32s("w1", &c.w1),
            Buffer::f32s("w2", &c.w2),
            Buffer::f32s("dy", &place(&c.dy, c.t, c.h, o, s)?),
        ];
        Ok(Request { header: header(fields), buffers })
    }

    fn expected(c: &SharedExpertCase, dir: Dir) -> Result<Vec<Expected>, String> {
        let th = c.t.checked_mul(c.h);
        Ok(match dir {
            Dir::Fwd => vec![expect("y", Dtype::F32, th)?],
            Dir::Bwd => vec![expect("dx", Dtype::F32, th)?],
        })
    }

    fn decode_fwd(_c: &SharedExpertCase, bufs: Vec<Buffer>) -> Result<SharedExpertForward<f32>, String> {
        let [y] = <[Buffer; 1]>::try_from(bufs).map_err(|b| format!("{} outputs", b.len()))?;
        Ok(SharedExpertForward { y: y.to_f32() })
    }

    fn decode_bwd(_c: &SharedExpertCase, bufs: Vec<Buffer>) -> Result<SharedExpertBackward<f32>, String> {
        let [dx] = <[Buffer; 1]>::try_from(bufs).map_err(|b| format!("{} outputs", b.len()))?;
        Ok(SharedExpertBackward { dx: dx.to_f32() })
    }
}
