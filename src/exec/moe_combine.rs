//! `moe_combine` on the wire (docs/protocol.md, "moe_combine";
//! python/bitparity/_ops.py's `MoeCombine` is the other end, and
//! python/providers/tests/check_moe_combine_wire.py checks it byte by byte).
//!
//! Header: `t`, `h`, `e`, `k`, `capacity` (null or an integer), `offset`,
//! `row_stride` (one layout for x, x_exp, dy and g_disp), `has_padding`.
//! Buffers, in this order: `ids` u32[T*k]; `weights` f32[T*k]; `padding`
//! u8[T] when the case has padding; `x` f32 as it lies in memory (T rows,
//! poisoned gaps; bf16 values); `x_exp` f32 likewise (N_slots rows); `dy` (T
//! rows) and `g_disp` (N_slots rows) likewise, the backward's inputs, sent in
//! both directions (as the other ops' are), so that a forward can refuse a
//! case whose dy or g_disp is invalid: the validation property asks both.
//! N_slots is not sent: both ends compute it from ids, padding and
//! capacity ([`wire_slots`]).
//! Outputs: fwd `slot` u32[T*k] (-1 as 0xFFFFFFFF), `counts` u32[E],
//! `x_disp` f32[N_slots*H], `y` f32[T*H]; bwd `dx_exp` f32[N_slots*H], `dw`
//! f32[T*k], `dx` f32[T*H], all dense row-major.

use super::process::{Buffer, Dtype, Expected, Request};
use super::{expect, header, place, Dir, Wire};
use oracles::case::moe_combine::{MoeCombineBackward, MoeCombineCase, MoeCombineForward};
use oracles::op::moe_combine::MoeCombine;
use serde_json::Value;
use std::collections::HashMap;

/// N_slots as the Python side computes it (`MoeCombine.n_slots` in
/// python/bitparity/_ops.py), for any case, valid or not: over the first
/// min(T, len(ids) / k) tokens that are not padding (a padding flag past
/// the flags sent counts as none), each distinct id's choices, at most
/// `capacity` of them, summed. An id out of range counts as an expert of
/// its own. The rows of x_exp and g_disp on the wire follow it, so that a
/// case with one row too few or too many shows it.
pub fn wire_slots(c: &MoeCombineCase) -> usize {
    let tokens = c.ids.len().checked_div(c.k).map_or(0, |n| c.t.min(n));
    let mut per: HashMap<u32, usize> = HashMap::new();
    for r in 0..tokens {
        if c.padding.as_ref().is_some_and(|p| p.get(r).copied().unwrap_or(false)) {
            continue;
        }
        for &id in &c.ids[r * c.k..(r + 1) * c.k] {
            *per.entry(id).or_default() += 1;
        }
    }
    per.values().map(|&n| c.capacity.map_or(n, |cap| n.min(cap))).sum()
}

/// A u32 buffer, little-endian.
fn u32s(name: &'static str, v: &[u32]) -> Buffer {
    Buffer { name, dtype: Dtype::U32, bytes: v.iter().flat_map(|x| x.to_le_bytes()).collect() }
}

impl Wire for MoeCombine {
    fn encode(c: &MoeCombineCase, _dir: Dir) -> Result<Request, String> {
        let fields = vec![
            ("t", Value::from(c.t)),
            ("h", c.h.into()),
            ("e", c.e.into()),
            ("k", c.k.into()),
            ("capacity", c.capacity.map_or(Value::Null, Value::from)),
            ("offset", c.layout.offset.into()),
            ("row_stride", c.layout.row_stride.into()),
            ("has_padding", c.padding.is_some().into()),
        ];
        let (o, s, n) = (c.layout.offset, c.layout.row_stride, wire_slots(c));
        let mut buffers = vec![u32s("ids", &c.ids), Buffer::f32s("weights", &c.weights)];
        if let Some(p) = &c.padding {
            buffers.push(Buffer::bools("padding", p));
        }
        buffers.push(Buffer::f32s("x", &place(&c.x, c.t, c.h, o, s)?));
        buffers.push(Buffer::f32s("x_exp", &place(&c.x_exp, n, c.h, o, s)?));
        buffers.push(Buffer::f32s("dy", &place(&c.dy, c.t, c.h, o, s)?));
        buffers.push(Buffer::f32s("g_disp", &place(&c.g_disp, n, c.h, o, s)?));
        Ok(Request { header: header(fields), buffers })
    }

    fn expected(c: &MoeCombineCase, dir: Dir) -> Result<Vec<Expected>, String> {
        let (tk, th) = (c.t.checked_mul(c.k), c.t.checked_mul(c.h));
        let nh = wire_slots(c).checked_mul(c.h);
        Ok(match dir {
            Dir::Fwd => vec![
                expect("slot", Dtype::U32, tk)?,
                expect("counts", Dtype::U32, Some(c.e))?,
                expect("x_disp", Dtype::F32, nh)?,
                expect("y", Dtype::F32, th)?,
            ],
            Dir::Bwd => {
                vec![expect("dx_exp", Dtype::F32, nh)?, expect("dw", Dtype::F32, tk)?, expect("dx", Dtype::F32, th)?]
            }
        })
    }

    fn decode_fwd(_c: &MoeCombineCase, bufs: Vec<Buffer>) -> Result<MoeCombineForward<f32>, String> {
        let [slot, counts, x_disp, y] = <[Buffer; 4]>::try_from(bufs).map_err(|b| format!("{} outputs", b.len()))?;
        Ok(MoeCombineForward {
            // The op's -1 travels as its i32 bits.
            slot: slot.to_u32().into_iter().map(|s| s as i32).collect(),
            counts: counts.to_u32(),
            x_disp: x_disp.to_f32(),
            y: y.to_f32(),
        })
    }

    fn decode_bwd(_c: &MoeCombineCase, bufs: Vec<Buffer>) -> Result<MoeCombineBackward<f32>, String> {
        let [dx_exp, dw, dx] = <[Buffer; 3]>::try_from(bufs).map_err(|b| format!("{} outputs", b.len()))?;
        Ok(MoeCombineBackward { dx_exp: dx_exp.to_f32(), dw: dw.to_f32(), dx: dx.to_f32() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oracles::case::moe_combine::slot_count;
    use oracles::case::Layout;

    /// The case of python/providers/tests/check_moe_combine_wire.py (T = 4,
    /// H = 2, E = 4, k = 3, capacity 2, token 3 padding, offset 1, row
    /// stride 3), with the values of its rows by slot.
    fn case() -> MoeCombineCase {
        MoeCombineCase {
            t: 4,
            h: 2,
            e: 4,
            k: 3,
            capacity: Some(2),
            layout: Layout { offset: 1, row_stride: 3 },
            ids: vec![3, 0, 1, 0, 1, 2, 1, 0, 3, 2, 1, 0],
            weights: vec![1.0; 12],
            padding: Some(vec![false, false, false, true]),
            x: (0..8).map(|i| i as f32).collect(),
            x_exp: (0..14).map(|i| i as f32).collect(),
            dy: vec![1.0; 8],
            g_disp: vec![1.0; 14],
        }
    }

    /// The frames the checker builds: header fields, buffer order and
    /// counts (N_slots = 7 from ids, padding and capacity).
    #[test]
    fn the_request_is_the_python_checkers() {
        let c = case();
        assert_eq!(c.validate(), Ok(()));
        assert_eq!(wire_slots(&c), 7);
        let fwd = MoeCombine::encode(&c, Dir::Fwd).unwrap();
        let h = &fwd.header;
        for (k, v) in [("t", 4), ("h", 2), ("e", 4), ("k", 3), ("capacity", 2), ("offset", 1), ("row_stride", 3)] {
            assert_eq!(h[k], Value::from(v), "{k}");
        }
        assert_eq!(h["has_padding"], Value::Bool(true));
        let names: Vec<(&str, usize)> = fwd.buffers.iter().map(|b| (b.name, b.len())).collect();
        // Strided: offset + (rows - 1) * stride + H.
        assert_eq!(
            names,
            vec![("ids", 12), ("weights", 12), ("padding", 4), ("x", 12), ("x_exp", 21), ("dy", 12), ("g_disp", 21)]
        );
        assert_eq!(fwd.buffers[0].dtype, Dtype::U32);
        assert_eq!(fwd.buffers[0].to_u32(), c.ids);
        let x = fwd.buffers[3].to_f32();
        assert_eq!(x[0].to_bits(), 0x7fc0_dead, "the offset is poison");
        assert_eq!((x[1], x[2], x[4], x[5]), (0.0, 1.0, 2.0, 3.0));
        let bwd = MoeCombine::encode(&c, Dir::Bwd).unwrap();
        assert_eq!(bwd.buffers, fwd.buffers, "the same buffers in both directions");
        let none = MoeCombineCase { padding: None, capacity: None, ..c.clone() };
        let r = MoeCombine::encode(&none, Dir::Fwd).unwrap();
        assert_eq!((r.header["has_padding"].clone(), r.header["capacity"].clone()), (Value::Bool(false), Value::Null));
        assert!(r.buffers.iter().all(|b| b.name != "padding"));
    }

    #[test]
    fn outputs_and_their_decoding() {
        let c = case();
        let want = |d| MoeCombine::expected(&c, d).unwrap().into_iter().map(|e| (e.name, e.len)).collect::<Vec<_>>();
        assert_eq!(want(Dir::Fwd), vec![("slot", 12), ("counts", 4), ("x_disp", 14), ("y", 8)]);
        assert_eq!(want(Dir::Bwd), vec![("dx_exp", 14), ("dw", 12), ("dx", 8)]);
        let f = MoeCombine::decode_fwd(
            &c,
            vec![
                u32s("slot", &[5, u32::MAX]),
                u32s("counts", &[2]),
                Buffer::f32s("x_disp", &[1.5]),
                Buffer::f32s("y", &[-0.0]),
            ],
        )
        .unwrap();
        assert_eq!((f.slot, f.counts, f.y[0].to_bits()), (vec![5, -1], vec![2], 0x8000_0000));
        assert!(MoeCombine::decode_bwd(&c, vec![Buffer::f32s("dx_exp", &[])]).is_err());
    }

    /// On valid cases the wire's N_slots is the op's; on invalid ones it is
    /// still defined, and a row too few or too many shows on the wire.
    #[test]
    fn wire_slots_is_the_ops_slot_count_and_defined_everywhere() {
        let c = case();
        for cap in [None, Some(0), Some(1), Some(2), Some(9)] {
            for pad in [None, Some(vec![true, false, true, false])] {
                let v = MoeCombineCase { capacity: cap, padding: pad.clone(), ..c.clone() };
                assert_eq!(wire_slots(&v), slot_count(&v).unwrap(), "{cap:?} {pad:?}");
            }
        }
        let short = MoeCombineCase { x_exp: c.x_exp[..12].to_vec(), ..c.clone() };
        let sent = MoeCombine::encode(&short, Dir::Fwd).unwrap();
        assert_eq!(sent.buffers[4].len(), 19, "the layout's span, cut by two values");
        for bad in [
            MoeCombineCase { k: 0, ..c.clone() },
            MoeCombineCase { ids: vec![9; 12], ..c.clone() },
            MoeCombineCase { padding: Some(vec![true]), ..c.clone() },
            MoeCombineCase { ids: vec![0; 5], ..c.clone() },
        ] {
            assert!(MoeCombine::encode(&bad, Dir::Bwd).is_ok());
        }
        assert_eq!(
            wire_slots(&MoeCombineCase { ids: vec![9; 12], ..c.clone() }),
            2,
            "expert 9: 3 valid choices, capacity 2"
        );
    }
}
