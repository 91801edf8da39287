"""moe_combine's wire encoding, checked without bitparity's Rust side: request
frames built here byte by byte (docs/protocol.md, "moe_combine"), served by
the package's own loop (``_Served.run`` on an in-memory stream) with
pure_moe_combine.py's functions, and the reply frames parsed here again.

    python3 python/providers/tests/check_moe_combine_wire.py          # plain Python
    /path/to/venv/bin/python python/providers/tests/check_moe_combine_wire.py   # + numpy, torch

It checks, on one hand-made case (T = 4, H = 2, E = 4, k = 3, capacity 2,
a padding token, offset 1, row stride 3):
- the reply's buffer lists (names, wire types, counts: N_slots = 7 follows
  from ids, padding and capacity) and the values of every output against
  numbers worked out by hand below, bit for bit (the sign of zero too);
- the worked values tell the profile's order apart: token 0's three terms
  1, 2^24, -2^24 give +0.0 in `serial` order (1 + 2^24 rounds to 2^24) and
  1.0 in ascending-slot order, which is checked to differ;
- the decoded case under every backend installed (python; numpy; torch):
  the strided views read the rows at the right places, never a poisoned gap;
- ``validate=True`` refuses each invalid variant (an id out of range, an id
  twice in a token, k = 0, k > E, T = 0, H = 0, offset 4, a row stride below
  H, buffers one value short or long, a negative capacity, padding without
  has_padding, a value of x or x_exp that is not a bf16) with an
  ``invalid`` reply;
- the torch provider (python/providers/torch_moe_combine.py), where torch is
  installed: its outputs hold the same values (the sums of this case are
  exact, or rounded the same way in any order except token 0's, which is
  checked to be one of the two orders' results); and on 200 random cases
  whose sums are exact in any order (every shape small, capacities None,
  0, 1, 2 and T, padding or not, offsets 0..3), the same bits as
  pure_moe_combine.py, forward and backward.
Exit status 0 when every check passes, 1 (with the failures) otherwise.
"""
import io
import json
import math
import os
import struct
import sys

import _path  # noqa: F401
import bitparity
from bitparity import _ops

import pure_moe_combine

POISON = 0x7FC0DEAD
NAN = float("nan")
FAILURES = []


def check(ok, what):
    if not ok:
        FAILURES.append(what)


def bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def f32(b):
    return struct.unpack("<f", struct.pack("<I", b))[0]


# ---- the case ----------------------------------------------------------------
#
# ids (T x k)       padding   kept choices (capacity 2; order expert, token, j)
#   t0: 3 0 1                 expert 0: t0 j1 -> slot 0, t1 j0 -> slot 1, t2 j1 dropped (rank 2)
#   t1: 0 1 2                 expert 1: t0 j2 -> slot 2, t1 j1 -> slot 3, t2 j0 dropped
#   t2: 1 0 3                 expert 2: t1 j2 -> slot 4   (t3's choice: padding)
#   t3: 2 1 0     yes         expert 3: t0 j0 -> slot 5, t2 j2 -> slot 6
# counts 2 2 1 2, N_slots = 7.
T, H, E, K, CAP, OFFSET, STRIDE = 4, 2, 4, 3, 2, 1, 3
IDS = [[3, 0, 1], [0, 1, 2], [1, 0, 3], [2, 1, 0]]
PADDING = [False, False, False, True]
P24 = 16777216.0  # 2^24
P127 = 2.0 ** 127
SUB = f32(0x00010000)  # a bf16 subnormal
# The dropped choices of t2 and every choice of the padding token t3 carry
# NaN weights, and t3's rows are NaN: nothing may read them.
WEIGHTS = [[1.0, 1.0, -1.0], [0.5, 0.25, 2.0], [NAN, NAN, -1.0], [NAN, NAN, NAN]]
X = [[1.5, -2.0], [0.125, 7.0], [-0.0, SUB], [NAN, NAN]]
X_EXP = [  # by slot
    [P24, 0.5],    # 0: t0 j1
    [4.0, -1.0],   # 1: t1 j0
    [P24, 0.25],   # 2: t0 j2 (w = -1)
    [8.0, 1.0],    # 3: t1 j1
    [1.0, P127],   # 4: t1 j2 (w = 2: the product 2^128 overflows to inf)
    [1.0, 3.0],    # 5: t0 j0
    [0.0, 3.0],    # 6: t2 j2 (w = -1: the product -0.0)
]
DY = [[1.0, 2.0], [-1.0, 0.5], [0.0, 4.0], [NAN, NAN]]
G_DISP = [[P24, 1.0], [1.0, 2.0], [-P24, 3.0], [1.0, 1.0], [1.0, 1.0], [1.0, 4.0], [-0.0, 5.0]]
N_SLOTS = 7

# ---- the outputs, by hand ------------------------------------------------------
SLOT = [5, 0, 2, 1, 3, 4, -1, -1, 6, -1, -1, -1]
COUNTS = [2, 2, 1, 2]
X_DISP = [X[0], X[1], X[0], X[1], X[1], X[0], X[2]]  # the owners' rows, as bits
Y = [
    # t0, h0: ((+0 + 1*1) + 1*2^24) + (-1)*2^24 = 2^24 - 2^24 = +0.0 (1 + 2^24 rounds to 2^24, even)
    # t0, h1: ((+0 + 1*3) + 1*0.5) + (-1)*0.25 = 3.25
    [0.0, 3.25],
    # t1, h0: ((+0 + 0.5*4) + 0.25*8) + 2*1 = 6; h1: ((+0 + -0.5) + 0.25) + 2*2^127 = inf
    [6.0, math.inf],
    # t2: one kept term, -1 * slot 6: h0 +0 + (-0.0) = +0.0, h1 -3
    [0.0, -3.0],
    # t3: padding
    [0.0, 0.0],
]
Y_T0_BY_SLOT = 1.0  # slots 0, 2, 5: ((+0 + 2^24) - 2^24) + 1
DX_EXP = [  # w[t][j] * dy[t] for each slot's owner
    [1.0, 2.0], [-0.5, 0.25], [-1.0, -2.0], [-0.25, 0.125], [-2.0, 1.0], [1.0, 2.0], [-0.0, -4.0],
]
DW = [
    7.0,       # t0 j0, slot 5: 1*1 + 2*3
    P24,       # t0 j1, slot 0: 1*2^24 + 2*0.5 = 2^24 + 1, rounds to 2^24
    P24,       # t0 j2, slot 2: 1*2^24 + 2*0.25 = 2^24 + 0.5, rounds to 2^24 (w plays no part in dw)
    -4.5,      # t1 j0, slot 1: -4 + -0.5
    -7.5,      # t1 j1, slot 3: -8 + 0.5
    2.0 ** 126,  # t1 j2, slot 4: -1 + 0.5 * 2^127, rounds to 2^126
    0.0, 0.0,  # t2 j0, j1: dropped
    12.0,      # t2 j2, slot 6: 0*0 + 4*3
    0.0, 0.0, 0.0,  # t3: padding
]
DX = [
    # t0: slots 5, 0, 2 in j order: h0 ((+0 + 1) + 2^24) - 2^24 = +0.0; h1 (4 + 1) + 3 = 8
    [0.0, 8.0],
    [3.0, 4.0],   # t1: slots 1, 3, 4
    [0.0, 5.0],   # t2: slot 6 alone: +0 + (-0.0) = +0.0
    [0.0, 0.0],   # t3: padding
]


# ---- frames --------------------------------------------------------------------

def placed(rows, offset=OFFSET, stride=STRIDE):
    """A strided buffer's f32 bits: poison before the first row and in the gaps."""
    if not rows:
        return []
    span = offset + (len(rows) - 1) * stride + len(rows[0])
    out = [POISON] * span
    for r, row in enumerate(rows):
        for h, v in enumerate(row):
            out[offset + r * stride + h] = bits(v)
    return out


def frame(header, buffers):
    """A request frame: [(name, dtype, values as u32 bits / bytes)]."""
    header = dict(header, buffers=[[n, d, len(v)] for (n, d, v) in buffers])
    text = json.dumps(header).encode()
    data = b"".join(struct.pack("<%d%s" % (len(v), {"u32": "I", "f32": "I", "u8": "B"}[d]), *v)
                    for (_, d, v) in buffers)
    return struct.pack("<I", len(text)) + text + data


def request(direction, **over):
    """The case's request, with `over` replacing header fields or buffers
    (a buffer set to None is left out)."""
    header = {"op": "moe_combine", "dir": direction, "t": T, "h": H, "e": E, "k": K, "capacity": CAP,
              "offset": OFFSET, "row_stride": STRIDE, "has_padding": True}
    bufs = {
        "ids": ("u32", [i for row in IDS for i in row]),
        "weights": ("f32", [bits(w) for row in WEIGHTS for w in row]),
        "padding": ("u8", [1 if p else 0 for p in PADDING]),
        "x": ("f32", placed(X)),
        "x_exp": ("f32", placed(X_EXP)),
    }
    bufs["dy"] = ("f32", placed(DY))
    bufs["g_disp"] = ("f32", placed(G_DISP))
    for name, v in over.items():
        if name in bufs:
            if v is None:
                del bufs[name]
            else:
                bufs[name] = v
        else:
            header[name] = v
    order = ["ids", "weights", "padding", "x", "x_exp", "dy", "g_disp"]
    return frame(header, [(n, bufs[n][0], bufs[n][1]) for n in order if n in bufs])


def serve(frames, forward, backward, backend="python"):
    """Runs the package's serving loop over `frames`; returns the replies as
    (header, {name: (dtype, values)})."""
    served = bitparity._Served("moe_combine", forward, backward, profile="serial", backend=backend)
    r, w = os.pipe()
    stream = bitparity._Stream(inp=io.BytesIO(b"".join(frames)), out=w)
    chunks = []
    import threading

    def drain():
        while True:
            data = os.read(r, 1 << 16)
            if not data:
                return
            chunks.append(data)
    reader = threading.Thread(target=drain)
    reader.start()
    served.run(stream)
    os.close(w)
    reader.join()
    os.close(r)
    data = b"".join(chunks)
    replies, at = [], 0
    while at < len(data):
        (n,) = struct.unpack_from("<I", data, at)
        header = json.loads(data[at + 4:at + 4 + n])
        at += 4 + n
        out = {}
        for name, dtype, count in header.get("buffers", []):
            size = {"f32": 4, "u32": 4, "u8": 1}[dtype] * count
            code = {"f32": "I", "u32": "I", "u8": "B"}[dtype]
            out[name] = (dtype, list(struct.unpack_from("<%d%s" % (count, code), data, at)))
            at += size
        replies.append((header, out))
    return replies


def same_bits(got, want, what):
    """got: u32 bits; want: floats (NaN matches any NaN)."""
    check(len(got) == len(want), "%s: %d values, %d expected" % (what, len(got), len(want)))
    for i, (g, w) in enumerate(zip(got, want)):
        gv = f32(g)
        if w != w and gv != gv:
            continue
        check(g == bits(w), "%s[%d]: got %r (0x%08x), expected %r (0x%08x)" % (what, i, gv, g, w, bits(w)))


def flat(rows):
    return [v for row in rows for v in row]


def check_replies(replies, label):
    check(len(replies) == 3, "%s: %d frames, expected the handshake and 2 replies" % (label, len(replies)))
    if len(replies) != 3:
        return
    hello, fwd, bwd = replies
    check(hello[0].get("ops") == ["moe_combine"] and hello[0].get("profile") == "serial",
          "%s: handshake %r" % (label, hello[0]))
    check(fwd[0].get("ok") is True, "%s: forward reply %r" % (label, fwd[0]))
    check(bwd[0].get("ok") is True, "%s: backward reply %r" % (label, bwd[0]))
    want_fwd = [["slot", "u32", T * K], ["counts", "u32", E], ["x_disp", "f32", N_SLOTS * H], ["y", "f32", T * H]]
    want_bwd = [["dx_exp", "f32", N_SLOTS * H], ["dw", "f32", T * K], ["dx", "f32", T * H]]
    for reply, want, d in ((fwd, want_fwd, "forward"), (bwd, want_bwd, "backward")):
        got = reply[0].get("buffers")
        check(got == want, "%s: %s buffers %r, expected %r" % (label, d, got, want))
    if fwd[0].get("ok"):
        out = fwd[1]
        check(out["slot"][1] == [s & 0xFFFFFFFF for s in SLOT], "%s: slot %r" % (label, out["slot"][1]))
        check(out["counts"][1] == COUNTS, "%s: counts %r" % (label, out["counts"][1]))
        same_bits(out["x_disp"][1], flat(X_DISP), label + ": x_disp")
        same_bits(out["y"][1], flat(Y), label + ": y")
    if bwd[0].get("ok"):
        out = bwd[1]
        same_bits(out["dx_exp"][1], flat(DX_EXP), label + ": dx_exp")
        same_bits(out["dw"][1], DW, label + ": dw")
        same_bits(out["dx"][1], flat(DX), label + ": dx")


def check_pure():
    check_replies(serve([request("fwd"), request("bwd")], pure_moe_combine.forward, pure_moe_combine.backward),
                  "pure_moe_combine")
    # The worked numbers tell the orders apart: ascending slots would give 1.0.
    check(bits(Y[0][0]) != bits(Y_T0_BY_SLOT), "the case does not tell serial from by-slot")
    # And a provider that sums in ascending-slot order fails this check.
    def by_slot(case):
        slot, counts, x_disp, y = pure_moe_combine.forward(case)
        t0 = sorted(s for s in slot[0] if s >= 0)
        y[0][0] = pure_moe_combine.serial(pure_moe_combine.r(case.weights[0][slot[0].index(s)] * case.x_exp.row(s)[0])
                                          for s in t0)
        return slot, counts, x_disp, y
    before = len(FAILURES)
    check_replies(serve([request("fwd"), request("bwd")], by_slot, pure_moe_combine.backward), "by-slot")
    caught = len(FAILURES) > before
    del FAILURES[before:]
    check(caught, "a by-slot provider passed the serial check")


def check_views(backend):
    """The decoded case under `backend`: shapes, values, the padding and ids."""
    seen = {}

    def forward(case):
        seen["fwd"] = case
        return pure_moe_combine_zeros(case, "fwd")

    def backward(case):
        seen["bwd"] = case
        return pure_moe_combine_zeros(case, "bwd")
    replies = serve([request("fwd"), request("bwd")], forward, backward, backend=backend)
    ok = [r[0].get("ok") for r in replies[1:]]
    check(ok == [True, True], "%s: replies %r" % (backend, [r[0] for r in replies[1:]]))
    for direction, case in seen.items():
        label = "%s %s" % (backend, direction)
        check((case.t, case.h, case.e, case.k, case.capacity, case.offset, case.row_stride, case.n_slots)
              == (T, H, E, K, CAP, OFFSET, STRIDE, N_SLOTS), label + ": scalars")
        check(to_list(case.ids) == IDS, label + ": ids %r" % (to_list(case.ids),))
        check(to_list(case.padding) == PADDING, label + ": padding %r" % (to_list(case.padding),))
        check(bits_of(to_list(case.weights)) == bits_of(WEIGHTS), label + ": weights")
        views = [("x", X), ("x_exp", X_EXP), ("dy", DY), ("g_disp", G_DISP)]
        for name, rows in views:
            got = rows_of(getattr(case, name))
            check(bits_of(got) == bits_of(rows), "%s: %s %r" % (label, name, got))


def pure_moe_combine_zeros(case, direction):
    return [[0] * c for (_, _, c) in _ops.MoeCombine.outputs(case.__dict__, direction)]


def to_list(x):
    if hasattr(x, "tolist"):
        x = x.tolist() if not hasattr(x, "detach") else x.detach().cpu().tolist()
    return x


def rows_of(v):
    if isinstance(v, bitparity.Strided):
        return [v.row(r) for r in range(v.shape[0])]
    return to_list(v)


def bits_of(rows):
    """NaN as one value (a NaN matches any NaN), every other value by its bits."""
    return [["nan" if x != x else bits(x) for x in row] for row in rows]


INVALID = [
    ("an id out of range", dict(ids=("u32", [4, 0, 1] + [i for row in IDS[1:] for i in row]))),
    ("an id twice in a token", dict(ids=("u32", [3, 3, 1] + [i for row in IDS[1:] for i in row]))),
    ("an id twice in a padding token", dict(ids=("u32", [i for row in IDS[:3] for i in row] + [2, 2, 0]))),
    ("k = 0", dict(k=0)),
    ("k > E", dict(e=2)),
    ("T = 0", dict(t=0)),
    ("H = 0", dict(h=0)),
    ("E = 0", dict(e=0)),
    ("offset 4", dict(offset=4)),
    ("a row stride below H", dict(row_stride=1)),
    ("weights one short", dict(weights=("f32", [0] * (T * K - 1)))),
    ("ids one long", dict(ids=("u32", [i for row in IDS for i in row] + [0]))),
    ("x one long", dict(x=("f32", placed(X) + [0]))),
    ("x_exp one short (N_slots rows)", dict(x_exp=("f32", placed(X_EXP)[:-1]))),
    ("x_exp of 8 rows", dict(x_exp=("f32", placed(X_EXP + [[1.0, 1.0]])))),
    ("padding one short", dict(padding=("u8", [0, 0, 0]))),
    ("padding without has_padding", dict(has_padding=False)),
    ("has_padding without padding", dict(padding=None)),
    ("a negative capacity", dict(capacity=-1)),
    ("a capacity that is not an integer", dict(capacity=1.5)),
    ("x not bf16", dict(x=("f32", placed([[1.5, -2.0], [0.125, 7.0], [-0.0, SUB], [f32(0x3F800001), NAN]])))),
    ("x_exp not bf16", dict(x_exp=("f32", placed(X_EXP[:6] + [[0.0, f32(0x40400001)]])))),
]
INVALID_BWD = [
    ("dy one short", dict(dy=("f32", placed(DY)[:-1]))),
    ("g_disp missing", dict(g_disp=None)),
]


def check_invalid():
    def never(case):
        raise AssertionError("an invalid case reached the function")
    # dy and g_disp travel in both directions: either refuses them.
    cases = [("fwd", what, over) for what, over in INVALID] + [(d, what, over) for what, over in INVALID_BWD
                                                              for d in ("fwd", "bwd")]
    replies = serve([request(d, **over) for d, _, over in cases], never, never)[1:]
    check(len(replies) == len(cases), "invalid: %d replies to %d requests" % (len(replies), len(cases)))
    for (d, what, _), (header, _) in zip(cases, replies):
        check(header.get("error") == "invalid", "%s (%s): %r, expected an invalid reply" % (what, d, header))
    # Capacity: null (unlimited) and 0 (every choice dropped) are valid.
    unlimited = serve([request("fwd", capacity=None, x_exp=("f32", placed(X_EXP + [[1.0, 1.0]] * 2)),
                               g_disp=("f32", placed(G_DISP + [[1.0, 1.0]] * 2)))],
                      pure_moe_combine.forward, pure_moe_combine.backward)[1]
    check(unlimited[0].get("ok") is True, "capacity null: %r" % (unlimited[0],))
    if unlimited[0].get("ok"):
        check(unlimited[1]["counts"][1] == [3, 3, 1, 2], "capacity null: counts %r" % (unlimited[1]["counts"][1],))
    zero = serve([request("fwd", capacity=0, x_exp=("f32", []), g_disp=("f32", []))], pure_moe_combine.forward,
                 pure_moe_combine.backward)[1]
    check(zero[0].get("ok") is True, "capacity 0: %r" % (zero[0],))
    if zero[0].get("ok"):
        check(zero[1]["slot"][1] == [0xFFFFFFFF] * (T * K) and zero[1]["x_disp"][1] == []
              and zero[1]["y"][1] == [0] * (T * H), "capacity 0: %r" % (zero[1],))


def check_torch():
    try:
        import torch  # noqa: F401
    except ImportError:
        print("torch is not installed: the torch provider is not checked")
        return
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    os.environ.setdefault("BITPARITY_DEVICE", "cpu")
    import torch_moe_combine
    replies = serve([request("fwd"), request("bwd")], torch_moe_combine.forward, torch_moe_combine.backward,
                    backend="torch")
    # Token 0's sums depend on the order (serial gives +0.0, ascending slots 1.0):
    # index_add_ promises none, so either is accepted there.
    if len(replies) == 3 and replies[1][0].get("ok") and replies[2][0].get("ok"):
        y = replies[1][1]["y"][1]
        dx = replies[2][1]["dx"][1]
        for out, name in ((y, "y"), (dx, "dx")):
            check(out[0] in (bits(0.0), bits(1.0)), "torch: %s[0][0] = %r" % (name, f32(out[0])))
            out[0] = 0
    check_replies(replies, "torch_moe_combine")
    check_torch_random()


def random_request(rng, direction):
    """A random valid case whose sums are exact in any order (small integer
    values and weights that are powers of two), for comparing providers
    that differ in order only."""
    t, h, e = rng.randint(1, 9), rng.randint(1, 5), rng.randint(1, 6)
    k = rng.randint(1, e)
    cap = rng.choice([None, 0, 1, 2, t])
    offset, stride = rng.randint(0, 3), h + rng.randint(0, 2)
    ids = [rng.sample(range(e), k) for _ in range(t)]
    pad = [rng.random() < 0.25 for _ in range(t)] if rng.random() < 0.5 else None
    per = {}
    for r in range(t):
        if not (pad and pad[r]):
            for v in ids[r]:
                per[v] = per.get(v, 0) + 1
    n = sum(c if cap is None else min(c, cap) for c in per.values())

    def rows(m):
        return [[float(rng.randint(-8, 8)) for _ in range(h)] for _ in range(m)]
    header = {"op": "moe_combine", "dir": direction, "t": t, "h": h, "e": e, "k": k, "capacity": cap,
              "offset": offset, "row_stride": stride, "has_padding": pad is not None}
    bufs = [("ids", "u32", [v for row in ids for v in row]),
            ("weights", "f32", [bits(rng.choice([0.5, 1.0, -2.0, 0.25])) for _ in range(t * k)])]
    if pad is not None:
        bufs.append(("padding", "u8", [1 if p else 0 for p in pad]))
    bufs += [("x", "f32", placed(rows(t), offset, stride)), ("x_exp", "f32", placed(rows(n), offset, stride))]
    bufs += [("dy", "f32", placed(rows(t), offset, stride)), ("g_disp", "f32", placed(rows(n), offset, stride))]
    return frame(header, bufs)


def check_torch_random(cases=200):
    """The torch provider against the pure one on random cases whose sums
    are exact: the dispatch (slots, counts, x_disp) and every value must
    agree bit for bit."""
    import random
    import torch_moe_combine
    rng = random.Random(1)
    frames = [random_request(rng, d) for _ in range(cases) for d in ("fwd", "bwd")]
    pure = serve(frames, pure_moe_combine.forward, pure_moe_combine.backward)[1:]
    ours = serve(frames, torch_moe_combine.forward, torch_moe_combine.backward, backend="torch")[1:]
    for i, (a, b) in enumerate(zip(pure, ours)):
        check(a[0].get("ok") is True and a == b, "random case %d: pure %r, torch %r" % (i // 2, a, b))


def main():
    check_pure()
    backends = ["python"]
    for name in ("numpy", "torch"):
        try:
            __import__(name)
            backends.append(name)
        except ImportError:
            print("%s is not installed: its decoding is not checked" % name)
    for backend in backends:
        check_views(backend)
    check_invalid()
    check_torch()
    if FAILURES:
        print("check_moe_combine_wire: %d failures" % len(FAILURES))
        for f in FAILURES:
            print("  " + f)
        return 1
    print("check_moe_combine_wire: ok (backends: %s)" % ", ".join(backends))
    return 0


if __name__ == "__main__":
    sys.exit(main())
