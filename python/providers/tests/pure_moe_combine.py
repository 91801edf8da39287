"""moe_combine (SPEC.md section 9) in plain Python (no numpy, no torch),
following the `serial` profile bit for bit, as a bitparity subject that
claims it: conformance holds it to the profile oracle's bits.

    bitparity check --op moe_combine --subject "exec:python3 python/providers/tests/pure_moe_combine.py"

How it rounds: Python floats are doubles. Every f32 operation is done in
double and rounded once to f32 (``r``: struct's pack to binary32 rounds to
nearest even, keeps subnormals; a result that rounds past the largest f32
becomes an infinity of its sign). That is the correctly rounded f32
result: a product of two f32 is exact in double (24 + 24 bits <= 53, and
its exponent stays inside double's normal range), and for a sum the double
rounding is innocuous (53 >= 2 * 24 + 2 bits). Inf and NaN follow IEEE
(inf * 0 and inf - inf are NaN in Python too; no operation here divides).

What it computes:
- dispatch: the non-padding choices (t, j) ordered by (expert, t, j); the
  first `capacity` of each expert keep consecutive slots in that order,
  the rest (and every padding token's choice) get -1.
- y[t][h]: acc = +0.0, then for j ascending over kept choices, acc =
  r(acc + r(w[t][j] * x_exp[slot][h])).
- dx_exp[slot][h] = r(w[t][j] * dy[t][h]); dw[t][j] = serial over h
  ascending of r(dy[t][h] * x_exp[slot][h]) (+0.0 when dropped); dx[t][h] =
  serial over kept j ascending of g_disp[slot][h].
The strided inputs are read from their storage at the case's offset and row
stride (``Strided.row``), as a kernel does.
"""
import math
import struct

import _path  # noqa: F401
import bitparity

_F = struct.Struct("<f")


def r(x):
    """x rounded to f32 (round to nearest even; overflow to infinity)."""
    try:
        return _F.unpack(_F.pack(x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def dispatch(case):
    """(slot: T x k, -1 for none; counts: E; owner: the (t, j) of each slot)."""
    pad = case.padding
    order = sorted((case.ids[t][j], t, j) for t in range(case.t) if not (pad is not None and pad[t])
                   for j in range(case.k))
    slot = [[-1] * case.k for _ in range(case.t)]
    seen = [0] * case.e
    owner = []
    for e, t, j in order:
        if case.capacity is None or seen[e] < case.capacity:
            slot[t][j] = len(owner)
            owner.append((t, j))
        seen[e] += 1
    counts = [n if case.capacity is None else min(n, case.capacity) for n in seen]
    return slot, counts, owner


def serial(terms):
    acc = 0.0
    for v in terms:
        acc = r(acc + v)
    return acc


def forward(case):
    slot, counts, owner = dispatch(case)
    x_disp = [case.x.row(t) for (t, _) in owner]
    y = []
    for t in range(case.t):
        kept = [(case.weights[t][j], case.x_exp.row(s)) for j, s in enumerate(slot[t]) if s >= 0]
        y.append([serial(r(w * row[h]) for w, row in kept) for h in range(case.h)])
    return slot, counts, x_disp, y


def backward(case):
    slot, _, owner = dispatch(case)
    dx_exp = []
    for (t, j) in owner:
        w, dy = case.weights[t][j], case.dy.row(t)
        dx_exp.append([r(w * v) for v in dy])
    dw = []
    for t in range(case.t):
        dy = case.dy.row(t) if any(s >= 0 for s in slot[t]) else None
        for s in slot[t]:
            dw.append(serial(r(a * b) for a, b in zip(dy, case.x_exp.row(s))) if s >= 0 else 0.0)
    dx = []
    for t in range(case.t):
        rows = [case.g_disp.row(s) for s in slot[t] if s >= 0]
        dx.append([serial(row[h] for row in rows) for h in range(case.h)])
    return dx_exp, dw, dx


if __name__ == "__main__":
    bitparity.serve(op="moe_combine", forward=forward, backward=backward, profile="serial", backend="python")
