#!/usr/bin/env python3
"""Recomputes the worked examples of docs/ops/*.md from the formulas those
pages write, in plain Python (standard library only), and compares every
value with what the pages state.

    python3 docs/ops/examples/recompute.py            # check every example
    python3 docs/ops/examples/recompute.py --emit seqwise_loss provided_map

This is a second, independent implementation of the `serial` and
`warp32-chunk64` / `warp32` profiles: it shares no code with the Rust
oracles (oracles/src/profile_oracle/), only the written rules. The Rust test
oracles/tests/it/docs_ops.rs checks the same blocks against the profile oracle,
so a page, this script and the oracle agree bit for bit or something fails.

How it computes, and why that is exact:

- Every f32 operation (+, *, /) is carried out exactly on rationals
  (fractions.Fraction) and rounded once to the nearest f32, ties to even
  (`round_f32`); IEEE's rules for zeros, infinities and NaN are applied
  where a rational cannot say (the sign of an exact zero, x / 0, inf - inf).
- e^x is computed with decimal at 60 significant digits (Decimal.exp is
  correctly rounded at that precision) and rounded to f32 only when the
  whole interval of its possible error rounds to one f32 (`expf`); it
  raises otherwise (it never has for an f32 input: the closest e^x of an
  f32 comes within 1.4e-16 relative of an f32 rounding boundary).
- bf16 rounding is round-to-nearest-even on the low 16 bits of the f32.

`--emit OP NAME` prints the example block of one case in CASES (to paste
into a page after adding a case); the default checks every
```` ```json example ```` block of docs/ops/*.md and exits 1 on any
difference. The "trace" of an example (intermediate values, documented in
each page) is checked here only: the Rust test checks the outputs.
"""

import json
import math
import re
import struct
import sys
from decimal import ROUND_HALF_EVEN, Context, Decimal
from fractions import Fraction
from pathlib import Path

INF = float("inf")
NAN = float("nan")
DOCS = Path(__file__).resolve().parent.parent

# ---------------------------------------------------------------------------
# f32 values, exactly

def bits(x):
    """The f32 bits of x (a Python float that holds an f32 value)."""
    return struct.unpack("<I", struct.pack("<f", x))[0]


def from_bits(b):
    return struct.unpack("<f", struct.pack("<I", b & 0xFFFFFFFF))[0]


def is_f32(x):
    return math.isnan(x) or from_bits(bits(x)) == x


def round_f32(q, negative=False):
    """The f32 nearest the rational q, ties to even; +-inf at or beyond
    the overflow threshold; a zero result takes the sign of q (or of
    `negative` when q is exactly 0)."""
    if q == 0:
        return -0.0 if negative else 0.0
    a = abs(q)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    k = max(e, -126) - 23  # the f32 quantum at a: 24 bits, or the subnormal one
    scaled = a / Fraction(2) ** k
    n = scaled.numerator // scaled.denominator
    rest = scaled - n
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and n % 2 == 1):
        n += 1
    v = Fraction(n) * Fraction(2) ** k
    r = INF if v >= Fraction(2) ** 128 else float(v)
    return -r if q < 0 else r


def sign_bit(x):
    return math.copysign(1.0, x) < 0


def add(a, b):
    if not (math.isfinite(a) and math.isfinite(b)):
        return a + b  # IEEE double gives the same special value
    q = Fraction(a) + Fraction(b)
    # An exact zero sum is +0.0 in round-to-nearest, unless both are -0.0.
    return round_f32(q, negative=sign_bit(a) and sign_bit(b))


def mul(a, b):
    if not (math.isfinite(a) and math.isfinite(b)):
        return a * b
    return round_f32(Fraction(a) * Fraction(b), negative=sign_bit(a) != sign_bit(b))


def div(a, b):
    negative = sign_bit(a) != sign_bit(b)
    if math.isnan(a) or math.isnan(b) or (a == 0 and b == 0) or (math.isinf(a) and math.isinf(b)):
        return NAN
    if b == 0 or math.isinf(a):
        return -INF if negative else INF
    if math.isinf(b):
        return -0.0 if negative else 0.0
    return round_f32(Fraction(a) / Fraction(b), negative=negative)


def neg(a):
    return -a


def sgn(x):
    """+1, -1, +0.0 for either zero, NaN for NaN."""
    if math.isnan(x):
        return NAN
    return 1.0 if x > 0 else (-1.0 if x < 0 else 0.0)


_CTX = Context(prec=60, rounding=ROUND_HALF_EVEN, Emax=999999, Emin=-999999)


def expf(x):
    """e^x correctly rounded to f32."""
    if math.isnan(x):
        return NAN
    # e^89 > 2^128 (89 > 128 ln 2 = 88.72): +inf. e^-110 < 2^-150 (110 >
    # 150 ln 2 = 103.97), below half the smallest subnormal: +0.0.
    if x > 89:
        return INF
    if x < -110:
        return 0.0
    v = Fraction(_CTX.exp(Decimal(x)))  # within half a unit of the 60th digit
    slack = Fraction(1, 10**58)
    lo, hi = round_f32(v * (1 - slack)), round_f32(v * (1 + slack))
    if bits(lo) != bits(hi):
        raise ArithmeticError("e^%r is too close to an f32 rounding boundary for 60 digits" % x)
    return lo


def sigmoid(x):
    """1 / (1 + e^-x): the exp correctly rounded, then the add, then the
    division, each rounded to f32."""
    return div(1.0, add(1.0, expf(neg(x))))


def bf16(x):
    """x (an f32) rounded to bf16, ties to even, as the f32 it is."""
    if math.isnan(x):
        return x
    b = bits(x)
    return from_bits((b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000)


# ---------------------------------------------------------------------------
# Hex floats, as the corpus writes them (oracles/src/case/mod.rs, hexf)

def hexf(x):
    b = bits(x)
    if math.isnan(x):
        return "nan" if b == 0x7FC00000 else "nan:0x%08x" % b
    sign = "-" if b >> 31 else ""
    if math.isinf(x):
        return sign + "inf"
    exp = (b >> 23) & 0xFF
    frac = (b & 0x7FFFFF) << 1
    lead, e = (0, -126) if exp == 0 else (1, exp - 127)
    if frac == 0:
        return "%s0x%dp%d" % (sign, lead, e if lead else 0)
    return "%s0x%d.%sp%+d" % (sign, lead, ("%06x" % frac).rstrip("0"), e)


_HEX = re.compile(r"^(-?)0[xX]([0-9a-fA-F]+)(?:\.([0-9a-fA-F]+))?[pP]([+-]?[0-9]+)$")


def parse_hexf(s):
    """An exact f32 from its hex-float text (refuses anything inexact)."""
    if s == "nan":
        return NAN
    if s.startswith("nan:0x"):
        return from_bits(int(s[6:], 16))
    if s in ("inf", "-inf"):
        return float(s)
    m = _HEX.match(s)
    if not m:
        raise ValueError("not a hex float: %r" % s)
    digits = m.group(2) + (m.group(3) or "")
    q = Fraction(int(digits, 16)) * Fraction(2) ** (int(m.group(4)) - 4 * len(m.group(3) or ""))
    # The magnitude, then the sign, once: -0x0p0 is -0.0.
    x = round_f32(q)
    if Fraction(x) != q:
        raise ValueError("not exactly an f32: %r" % s)
    return -x if m.group(1) else x


# ---------------------------------------------------------------------------
# Reduction orders (docs/ops/README.md#reduction-orders). `None` stands for a
# value the op does not read (a padding row): a serial sum skips it.

def reduce(order, xs):
    if order == "serial":
        acc = 0.0
        for x in xs:
            if x is not None:
                acc = add(acc, x)
        return acc
    if order == "butterfly":
        n = 1
        while n < max(len(xs), 1):
            n *= 2
        v = [0.0 if x is None else x for x in xs] + [0.0] * (n - len(xs))
        width = n // 2
        while width >= 1:
            for lane in range(width):
                v[lane] = add(v[lane], v[lane + width])
            width //= 2
        return v[0]
    kind, size, inner, outer = order
    if kind == "chunked":
        parts = [reduce(inner, xs[i:i + size]) for i in range(0, len(xs), size)]
    elif kind == "strided":
        parts = [reduce(inner, xs[lane::size]) for lane in range(size)]
    else:
        raise ValueError(kind)
    return reduce(outer, parts)


WARP = ("strided", 32, "serial", "butterfly")
SEQWISE_PROFILES = {
    "serial": {"row": "serial", "tokens": "serial", "raw": "serial", "q": "serial"},
    "warp32-chunk64": {"row": WARP, "tokens": ("chunked", 64, "serial", "serial"), "raw": WARP, "q": WARP},
}
ROUTER_PROFILES = {
    "serial": {"norm": "serial", "q": "serial", "loss": SEQWISE_PROFILES["serial"]},
    "warp32": {"norm": "serial", "q": "serial", "loss": SEQWISE_PROFILES["warp32-chunk64"]},
}
SHARED_EXPERT_PROFILES = {
    "serial": {"z": "serial", "y": "serial", "dh": "serial", "dx": "serial"},
    "mma16-h100": {"mma": True},
}


def raw_exponent(x):
    """floor(log2 |x|) of a finite non-zero f32, -126 for a subnormal."""
    return max(math.frexp(x)[1] - 1, -126)


def mma_step(a, b, c):
    """One tensor-core step of the H100 model (docs/mma.md), finite
    values: c + the 16 products a_i b_i, each term truncated toward zero to
    the grid 2^(e - 25) set by the largest raw exponent e among the
    non-zero terms (a product's is the sum of its factors'), the terms
    summed exactly, the sum truncated toward zero to f32; a zero result is
    +0.0."""
    terms = [(Fraction(x) * Fraction(y), raw_exponent(x) + raw_exponent(y)) for x, y in zip(a, b) if x != 0 and y != 0]
    if c != 0:
        terms.append((Fraction(c), raw_exponent(c)))
    if not terms:
        return 0.0
    quantum = Fraction(2) ** (max(e for _, e in terms) - 25)
    total = sum((math.trunc(v / quantum) for v, _ in terms), 0) * quantum
    if total == 0:
        return 0.0
    mag = abs(total)
    e = mag.numerator.bit_length() - mag.denominator.bit_length()
    if Fraction(2) ** e > mag:
        e -= 1
    unit = Fraction(2) ** (max(e, -126) - 23)
    v = math.trunc(mag / unit) * unit
    r = INF if v >= Fraction(2) ** 128 else float(v)
    return -r if total < 0 else r


def dot(profile, key, a, b):
    """sum_i a_i b_i: each product rounded, then reduced in the profile's
    order; or, on the tensor-core profile, a chain of MMA steps over blocks
    of 16 (the last padded with zeros), from +0.0."""
    if profile.get("mma"):
        d = 0.0
        for i in range(0, len(a), 16):
            d = mma_step(a[i:i + 16], b[i:i + 16], d)
        return d
    return reduce(profile[key], [mul(x, y) for x, y in zip(a, b)])

EPS = from_bits(0x2B8CBCCC)  # 1e-12 as f32
EPS2 = from_bits(0x1E3CE508)  # 1e-20 as f32


# ---------------------------------------------------------------------------
# seqwise_loss (docs/ops/seqwise_loss.md)

def selection_key(values):
    """NaN first (NaNs by index), then larger first, ties (-0.0 == +0.0) to
    the lower index."""
    return lambda i: (0, 0.0, i) if math.isnan(values[i]) else (1, -values[i], i)


def best(values, candidates, m):
    return sorted(candidates, key=selection_key(values))[:m]


def frequencies(counts):
    c_total = sum(counts)
    denom = float(c_total) if c_total > 0 else EPS  # max(C, eps): C is an integer
    return [mul(div(float(c), denom), float(len(counts))) for c in counts]


def l1_row(row, order, clamp_tie):
    """(n, d, gate) of one row: n = sum |s|, d = max(n, eps) (NaN kept),
    gate = n > eps (strict) or n >= eps (inclusive), false for NaN."""
    n = reduce(order, [abs(s) for s in row])
    d = EPS if n < EPS else n
    gate = n > EPS if clamp_tie == "strict" else n >= EPS
    return n, d, gate


def row_gradient(row, a, d, gate, order):
    """q = sum_e -(a_e * ((s_e / d) / d)); grad_k = a_k / d + sgn(s_k) * r,
    r = q if the gate is open else +0.0 (gate given), or a_k / d + q (gate
    None: the unbiased objective)."""
    q = reduce(order, [neg(mul(a_e, div(div(s, d), d))) for s, a_e in zip(row, a)])
    if gate is None:
        return q, [add(div(a_k, d), q) for a_k in a]
    r = q if gate else 0.0
    return q, [add(div(a_k, d), mul(sgn(s), r)) for s, a_k in zip(row, a)]


def seqwise(case, profile):
    t_n, e_n = case["t"], case["e"]
    scores = [parse_hexf(s) for s in case["scores"]]
    rows = [scores[t * e_n:(t + 1) * e_n] for t in range(t_n)]
    padding = case["padding"] or [False] * t_n
    objective = case["objective"]
    provided = objective["kind"] == "provided_map"
    if provided:
        chosen = [[bool(m) for m in objective["map"][t * e_n:(t + 1) * e_n]] for t in range(t_n)]
    else:
        chosen = [[i in best(row, range(e_n), objective["k"]) for i in range(e_n)] for row in rows]
    counts = [sum(1 for t in range(t_n) if not padding[t] and chosen[t][e]) for e in range(e_n)]
    f = frequencies(counts)
    g = parse_hexf(case["g"])
    a = [mul(g, fe) for fe in f]
    trace = {"n": [], "d": [], "gate": [], "p": [], "P": [], "a": a, "q": []}
    grad = []
    for t, row in enumerate(rows):
        if padding[t]:
            for key in ("n", "d", "gate", "q"):
                trace[key].append(None)
            trace["p"].append([None] * e_n)
            grad += [0.0] * e_n
            continue
        if provided:
            n, d, gate = l1_row(row, profile["row"], case["clamp_tie"])
        else:
            n, d, gate = None, add(reduce(profile["row"], row), EPS2), None
        trace["n"].append(n)
        trace["d"].append(d)
        trace["gate"].append(gate)
        trace["p"].append([div(s, d) for s in row])
        q, gr = row_gradient(row, a, d, gate, profile["q"])
        trace["q"].append(q)
        grad += gr
    trace["P"] = [reduce(profile["tokens"], [trace["p"][t][e] for t in range(t_n)]) for e in range(e_n)]
    raw = reduce(profile["raw"], [mul(f[e], trace["P"][e]) for e in range(e_n)])
    if not provided:
        del trace["n"], trace["gate"]
    return {"forward": {"counts": counts, "freq": f, "raw": raw}, "backward": {"grad": grad}}, trace


# ---------------------------------------------------------------------------
# router (docs/ops/router.md)

def route_row(case, row):
    """s, u, the group scores, the kept groups and the chosen ids of a row."""
    bias = [parse_hexf(b) for b in case["bias"]]
    s = [sigmoid(x) for x in row]
    u = [add(se, be) for se, be in zip(s, bias)]
    size = case["e"] // case["groups"]
    group_scores = []
    for j in range(case["groups"]):
        top = best(u, range(j * size, (j + 1) * size), 2)
        group_scores.append(add(u[top[0]], u[top[1]]))
    kept = best(group_scores, range(case["groups"]), case["topk_groups"])
    candidates = [i for j in kept for i in range(j * size, (j + 1) * size)]
    ids = sorted(best(u, candidates, case["k"]))
    return s, u, group_scores, kept, ids


def router(case, profile):
    t_n, e_n, k = case["t"], case["e"], case["k"]
    logits = [parse_hexf(x) for x in case["logits"]]
    gw = [parse_hexf(x) for x in case["gw"]]
    scale = parse_hexf(case["route_scale"])
    padding = case["padding"] or [False] * t_n
    routed = [route_row(case, logits[t * e_n:(t + 1) * e_n]) for t in range(t_n)]
    out = {"ids": [], "weights": [], "map": [], "counts": [0] * e_n, "scores": []}
    trace = {"u": [], "group_scores": [], "kept_groups": [], "D": [], "r": [], "gs": []}
    for t, (s, u, group_scores, kept, ids) in enumerate(routed):
        w0 = [s[i] for i in ids]
        d = add(reduce(profile["norm"], w0), EPS2) if case["route_norm"] else None
        out["weights"] += [mul(div(w, d) if d is not None else w, scale) for w in w0]
        out["ids"] += ids
        out["map"] += [i in ids for i in range(e_n)]
        out["scores"] += s
        for i in ids:
            if not padding[t]:
                out["counts"][i] += 1
        trace["u"].append(u)
        trace["group_scores"].append(group_scores)
        trace["kept_groups"].append(kept)
        trace["D"].append(d)
    loss = case["loss"]
    if loss is not None:
        a = [mul(parse_hexf(loss["g"]), fe) for fe in frequencies(out["counts"])]
        trace.update({"loss_a": a, "loss_n": [], "loss_d": [], "loss_gate": [], "loss_q": [], "l": []})
    grad = []
    for t, (s, _, _, _, ids) in enumerate(routed):
        gs = [0.0] * e_n
        if loss is not None:
            if padding[t]:
                for key in ("loss_n", "loss_d", "loss_gate", "loss_q"):
                    trace[key].append(None)
                trace["l"].append([None] * e_n)
            else:
                n, d, gate = l1_row(s, profile["loss"]["row"], loss["clamp_tie"])
                q, gs = row_gradient(s, a, d, gate, profile["loss"]["q"])
                for key, v in (("loss_n", n), ("loss_d", d), ("loss_gate", gate), ("loss_q", q), ("l", list(gs))):
                    trace[key].append(v)
        a_route = [mul(scale, x) for x in gw[t * k:(t + 1) * k]]
        if case["route_norm"]:
            d = trace["D"][t]
            w0 = [s[i] for i in ids]
            q = reduce(profile["q"], [neg(mul(a_j, div(div(w, d), d))) for a_j, w in zip(a_route, w0)])
            r = [add(div(a_j, d), q) for a_j in a_route]
        else:
            r = a_route
        for j, i in enumerate(ids):
            gs[i] = add(r[j], gs[i])
        trace["r"].append(r)
        trace["gs"].append(gs)
        grad += [mul(mul(g, add(1.0, neg(se))), se) for g, se in zip(gs, s)]
    return {"forward": out, "backward": {"grad": grad}}, trace


# ---------------------------------------------------------------------------
# shared_expert (docs/ops/shared_expert.md)

def shared_expert(case, profile):
    t_n, h_n, f_n = case["t"], case["h"], case["f"]
    x = [parse_hexf(v) for v in case["x"]]
    w1 = [parse_hexf(v) for v in case["w1"]]
    w2 = [parse_hexf(v) for v in case["w2"]]
    dy = [parse_hexf(v) for v in case["dy"]]
    trace = {"z": [], "h": [], "dh": [], "dz": []}
    y, dx = [], []
    for t in range(t_n):
        xt, dyt = x[t * h_n:(t + 1) * h_n], dy[t * h_n:(t + 1) * h_n]
        z = [dot(profile, "z", xt, w1[r * h_n:(r + 1) * h_n]) for r in range(2 * f_n)]
        h = [bf16(mul(mul(z[j], sigmoid(z[j])), z[f_n + j])) for j in range(f_n)]
        y += [bf16(dot(profile, "y", h, w2[i * f_n:(i + 1) * f_n])) for i in range(h_n)]
        dh = [bf16(dot(profile, "dh", dyt, w2[j::f_n])) for j in range(f_n)]
        dgate, dup = [], []
        for j in range(f_n):
            g, u = z[j], z[f_n + j]
            sig = sigmoid(g)
            silu = mul(g, sig)
            dsilu = mul(sig, add(1.0, mul(g, add(1.0, neg(sig)))))
            dgate.append(mul(mul(dh[j], u), dsilu))
            dup.append(mul(dh[j], silu))
        dz = [bf16(v) for v in dgate + dup]
        dx += [dot(profile, "dx", dz, w1[i::h_n]) for i in range(h_n)]
        for key, v in (("z", z), ("h", h), ("dh", dh), ("dz", dz)):
            trace[key].append(v)
    return {"forward": {"y": y}, "backward": {"dx": dx}}, trace


# ---------------------------------------------------------------------------
# moe_combine (docs/ops/moe_combine.md)

MOE_COMBINE_PROFILES = {
    "serial": {"terms": "choice", "combine": "serial", "dw": "serial", "bf16_out": False},
    "by-slot": {"terms": "slot", "combine": "serial", "dw": "serial", "bf16_out": False},
    "serial-bf16": {"terms": "choice", "combine": "serial", "dw": "serial", "bf16_out": True},
}


def moe_dispatch(case):
    """Slots grouped by expert (ascending id), inside an expert by token,
    then by choice; padding tokens never dispatched; an expert's choices
    past its first C dropped (-1). Returns slot (T x k), counts (E)."""
    t_n, k, e_n, cap = case["t"], case["k"], case["e"], case["capacity"]
    ids, pad = case["ids"], case["padding"] or [False] * case["t"]
    slot, counts, next_slot = [-1] * (t_n * k), [0] * e_n, 0
    for e, t, j in sorted((ids[t * k + j], t, j) for t in range(t_n) for j in range(k) if not pad[t]):
        if cap is None or counts[e] < cap:
            slot[t * k + j] = next_slot
            counts[e] += 1
            next_slot += 1
    return slot, counts


def moe_combine(case, profile):
    t_n, h_n, k = case["t"], case["h"], case["k"]
    w = [parse_hexf(v) for v in case["weights"]]
    x = [parse_hexf(v) for v in case["x"]]
    x_exp = [parse_hexf(v) for v in case["x_exp"]]
    dy = [parse_hexf(v) for v in case["dy"]]
    g_disp = [parse_hexf(v) for v in case["g_disp"]]
    slot, counts = moe_dispatch(case)
    n = sum(counts)
    owner = {slot[f]: f for f in range(t_n * k) if slot[f] >= 0}
    x_disp = [x[(owner[s] // k) * h_n + i] for s in range(n) for i in range(h_n)]
    dx_exp = [mul(w[owner[s]], dy[(owner[s] // k) * h_n + i]) for s in range(n) for i in range(h_n)]
    trace = {"offsets": [sum(counts[:e]) for e in range(len(counts))], "order": []}
    y, dw, dx = [], [], []
    for t in range(t_n):
        # The kept choices (j, slot), in the profile's order; a dropped
        # choice is not in the list.
        kept = [(j, slot[t * k + j]) for j in range(k) if slot[t * k + j] >= 0]
        if profile["terms"] == "slot":
            kept.sort(key=lambda p: p[1])
        trace["order"].append([s for _, s in kept])
        for i in range(h_n):
            acc = reduce(profile["combine"], [mul(w[t * k + j], x_exp[s * h_n + i]) for j, s in kept])
            y.append(bf16(acc) if profile["bf16_out"] else acc)
            dx.append(reduce(profile["combine"], [g_disp[s * h_n + i] for _, s in kept]))
        for j in range(k):
            s = slot[t * k + j]
            terms = [mul(dy[t * h_n + i], x_exp[s * h_n + i]) for i in range(h_n)] if s >= 0 else []
            dw.append(reduce(profile["dw"], terms))
    forward = {"slot": slot, "counts": counts, "x_disp": x_disp, "y": y}
    return {"forward": forward, "backward": {"dx_exp": dx_exp, "dw": dw, "dx": dx}}, trace


OPS = {
    "seqwise_loss": (seqwise, SEQWISE_PROFILES),
    "router": (router, ROUTER_PROFILES),
    "shared_expert": (shared_expert, SHARED_EXPERT_PROFILES),
    "moe_combine": (moe_combine, MOE_COMBINE_PROFILES),
}


# ---------------------------------------------------------------------------
# The cases of the pages (--emit): values written as decimals, rounded to
# f32 (or bf16) once here; the pages hold the exact bits.

def f32s(values):
    return [hexf(round_f32(Fraction(v))) for v in values]


CASES = {
    ("seqwise_loss", "provided_map"): {
        "t": 2, "e": 4, "layout": {"offset": 1, "row_stride": 6},
        "scores": f32s(["0.59", "0.72", "0", "0.89", "-0.82", "-0.32", "0.22", "0.84"]),
        "padding": None,
        "objective": {"kind": "provided_map", "map": [True, False, False, True, False, False, False, True]},
        "clamp_tie": "strict", "g": hexf(1.25),
    },
    ("seqwise_loss", "unbiased_top_k"): {
        "t": 3, "e": 4, "layout": {"offset": 0, "row_stride": 4},
        "scores": f32s(["0.65", "0.8", "0.65", "0.08"]) + [hexf(NAN), hexf(INF), hexf(-INF)] + f32s(["-1e30"])
        + f32s(["0.66", "-0.23", "0.78", "0.35"]),
        "padding": [False, True, False],
        "objective": {"kind": "unbiased_top_k", "k": 2},
        "clamp_tie": "strict", "g": hexf(0.75),
    },
    ("seqwise_loss", "clamp_tie_strict"): {
        "t": 1, "e": 2, "layout": {"offset": 0, "row_stride": 2},
        "scores": [hexf(from_bits(0x2B0CBCCC)), hexf(-from_bits(0x2B0CBCCC))],
        "padding": None,
        "objective": {"kind": "provided_map", "map": [True, False]},
        "clamp_tie": "strict", "g": hexf(1.0),
    },
    ("seqwise_loss", "clamp_tie_inclusive"): {
        "t": 1, "e": 2, "layout": {"offset": 0, "row_stride": 2},
        "scores": [hexf(from_bits(0x2B0CBCCC)), hexf(-from_bits(0x2B0CBCCC))],
        "padding": None,
        "objective": {"kind": "provided_map", "map": [True, False]},
        "clamp_tie": "inclusive", "g": hexf(1.0),
    },
    ("router", "fused_loss"): {
        "t": 2, "e": 6, "layout": {"offset": 2, "row_stride": 7},
        "logits": f32s(["2.49", "2.48", "1.7", "1.04", "-0.92", "-1.35", "-1.05", "-2.15", "1.33", "-0.5", "1.73", "-0.57"]),
        "bias": f32s(["0", "0.1", "-0.1", "0", "0.2", "0"]),
        "groups": 3, "topk_groups": 2, "k": 3,
        "route_scale": hexf(2.5), "route_norm": True, "padding": None,
        "gw": f32s(["1", "-0.5", "0.25", "0.75", "2", "-1"]),
        "loss": {"clamp_tie": "strict", "g": hexf(0.5)},
    },
    ("router", "padding_nan"): {
        "t": 2, "e": 4, "layout": {"offset": 0, "row_stride": 4},
        "logits": f32s(["0.5", "0.5", "-1", "3"]) + [hexf(NAN), "0x0p0", hexf(-INF), hexf(INF)],
        "bias": f32s(["0", "0", "0", "0"]),
        "groups": 2, "topk_groups": 1, "k": 1,
        "route_scale": hexf(1.0), "route_norm": False, "padding": [False, True],
        "gw": f32s(["1", "1"]),
        "loss": {"clamp_tie": "inclusive", "g": hexf(1.0)},
    },
    ("shared_expert", "swiglu"): {
        # Magnitudes from 2^-12 to 2^2, so that the tensor-core profile's
        # truncations show in dX.
        "t": 2, "h": 3, "f": 2, "layout": {"offset": 3, "row_stride": 4},
        "x": ["-0x1.eep-3", "0x1.ecp-3", "0x1.7ep-2", "0x1.a4p-3", "0x1.96p-1", "0x1.2ep-4"],
        "w1": ["0x1.aep-12", "-0x1.96p-10", "-0x1.a4p-12", "0x1.e8p-2", "-0x1.2p-2", "0x1.bap-2",
               "-0x1.fcp-3", "0x1.72p-11", "0x1.eep-1", "0x1.7ap-2", "-0x1.fcp+1", "-0x1.0ep-8"],
        "w2": ["0x1.04p-10", "-0x1.bep-1", "-0x1.28p-10", "0x1.16p-1", "0x1.7ap+0", "0x1.d4p-7"],
        "dy": ["0x1.ccp-1", "0x1.bap+0", "-0x1.9ap-2", "-0x1.32p+0", "0x1.4p-1", "-0x1.32p-3"],
    },
    ("moe_combine", "capacity_padding"): {
        # k = 3 and ids not ascending, so that the serial and by-slot orders
        # differ; expert 0 over capacity; token 1 padding, poisoned.
        "t": 4, "h": 2, "e": 4, "k": 3, "capacity": 2, "layout": {"offset": 1, "row_stride": 3},
        "ids": [3, 0, 1, 0, 1, 2, 1, 2, 0, 0, 2, 3],
        "weights": f32s(["1", "1", "1"]) + [hexf(NAN)] * 3 + f32s(["0.5", "-1.25", "3"])
        + [hexf(2.0), hexf(round_f32(Fraction(1, 3))), "-0x0p0"],
        "padding": [False, True, False, False],
        "x": f32s(["1.5", "-0.25"]) + [hexf(INF), hexf(NAN)] + f32s(["0.5", "2", "-3", "0.125"]),
        "x_exp": [hexf(2.0 ** -24), hexf(0.75), hexf(2.0 ** -7), hexf(-1.0), hexf(2.0 ** -24), "-0x0p0",
                  "0x1.62p+0", hexf(0.5), "0x1.54p-2", hexf(0.25), hexf(0.75), hexf(-0.5),
                  hexf(1.0), hexf(-0.5), hexf(2.0), hexf(4.0)],
        "dy": f32s(["1", "-2"]) + [hexf(NAN), hexf(-INF)] + f32s(["0.5", "0.25", "-1", "3"]),
        "g_disp": [hexf(2.0 ** -24), hexf(0.5), hexf(0.25), hexf(-1.0), hexf(2.0 ** -24), hexf(0.125),
                   hexf(-2.0), hexf(2.0 ** -149), hexf(0.75), hexf(1.0), hexf(-0.375), "-0x0p0",
                   hexf(1.0), hexf(0.25), hexf(0.5), hexf(-2.0 ** -149)],
    },
}


# ---------------------------------------------------------------------------
# Output: JSON with exact hex floats, one matrix row per line

def encode(v):
    if isinstance(v, bool) or v is None or isinstance(v, int):
        return v
    if isinstance(v, float):
        # NaN payloads are not specified (any NaN matches any NaN).
        return "nan" if math.isnan(v) else hexf(v)
    if isinstance(v, list):
        return [encode(x) for x in v]
    if isinstance(v, dict):
        return {k: encode(x) for k, x in v.items()}
    raise TypeError(type(v))


def dumps(v, width, indent=0):
    """JSON of v; a list of scalars longer than its row width `width[key]`
    is broken into rows of that many."""
    pad = "  " * indent

    def scalar_list(xs, n):
        """At the indentation of a key inside v (one level deeper)."""
        items = [json.dumps(x) for x in xs]
        if n is None or len(items) <= n:
            return "[" + ", ".join(items) + "]"
        rows = [", ".join(items[i:i + n]) for i in range(0, len(items), n)]
        inner = (",\n" + pad + "    ").join(rows)
        return "[\n" + pad + "    " + inner + "\n" + pad + "  ]"

    if isinstance(v, dict):
        parts = []
        for k, x in v.items():
            if isinstance(x, list) and all(not isinstance(y, (list, dict)) for y in x):
                text = scalar_list(x, width.get(k))
            else:
                text = dumps(x, width, indent + 1)
            parts.append(pad + "  " + json.dumps(k) + ": " + text)
        return "{\n" + ",\n".join(parts) + "\n" + pad + "}"
    if isinstance(v, list) and v and isinstance(v[0], list):
        return "[\n" + ",\n".join(pad + "  " + dumps(x, width, indent + 1) for x in v) + "\n" + pad + "]"
    if isinstance(v, list):
        return scalar_list(v, None)
    return json.dumps(v)


def widths(case):
    if "x_exp" in case:
        h, k = case["h"], case["k"]
        w = {n: h for n in ("x", "x_exp", "dy", "g_disp", "x_disp", "y", "dx_exp", "dx")}
        w.update({n: k for n in ("ids", "weights", "slot", "dw")})
        return w
    e = case.get("e") or case.get("h")
    w = {"scores": e, "logits": e, "map": e, "grad": e, "dx": e, "y": e, "x": e, "dy": e,
         "w1": case.get("h"), "w2": case.get("f"), "gw": case.get("k"), "ids": case.get("k"),
         "weights": case.get("k")}
    return {k: v for k, v in w.items() if v}


def example(op, case):
    compute, profiles = OPS[op]
    block = {"op": op, "case": case, "profiles": {}}
    for name, profile in profiles.items():
        outputs, trace = compute(case, profile)
        entry = encode(outputs)
        if name == "serial":
            entry["trace"] = encode(trace)
        block["profiles"][name] = entry
    return block


# ---------------------------------------------------------------------------
# Checking the pages

BLOCK = re.compile(r"^```json example\n(.*?)^```", re.S | re.M)


def same(expected, got):
    """Exact equality; reals compared by bits, any NaN matching any NaN."""
    if isinstance(expected, str) and isinstance(got, str):
        a, b = parse_hexf(expected), parse_hexf(got)
        return (math.isnan(a) and math.isnan(b)) or bits(a) == bits(b)
    if isinstance(expected, list) and isinstance(got, list):
        return len(expected) == len(got) and all(same(x, y) for x, y in zip(expected, got))
    if isinstance(expected, dict) and isinstance(got, dict):
        return expected.keys() == got.keys() and all(same(expected[k], got[k]) for k in expected)
    return type(expected) is type(got) and expected == got


def differences(expected, got, path=""):
    if isinstance(expected, dict) and isinstance(got, dict):
        out = ["%s: keys %s, computed %s" % (path, sorted(expected), sorted(got))] if expected.keys() != got.keys() else []
        for k in expected.keys() & got.keys():
            out += differences(expected[k], got[k], "%s.%s" % (path, k))
        return out
    if isinstance(expected, list) and isinstance(got, list) and len(expected) == len(got):
        out = []
        for i, (x, y) in enumerate(zip(expected, got)):
            out += differences(x, y, "%s[%d]" % (path, i))
        return out
    return [] if same(expected, got) else ["%s: the page says %s, computed %s" % (path, json.dumps(expected), json.dumps(got))]


def check():
    failures, count = [], 0
    for page in sorted(DOCS.glob("*.md")):
        text = page.read_text()
        for m in BLOCK.finditer(text):
            count += 1
            block = json.loads(m.group(1))
            where = "%s:%d" % (page.name, text.count("\n", 0, m.start()) + 1)
            if page.stem != block["op"]:
                failures.append("%s: op %s on the page of %s" % (where, block["op"], page.stem))
                continue
            got = example(block["op"], block["case"])
            for name, stated in block["profiles"].items():
                if name not in got["profiles"]:
                    failures.append("%s: no profile %s here" % (where, name))
                    continue
                computed = dict(got["profiles"][name])
                if "trace" not in stated:
                    computed.pop("trace", None)
                failures += ["%s, %s%s" % (where, name, d) for d in differences(stated, computed)]
    for f in failures:
        print(f)
    print("%d examples, %d differences" % (count, len(failures)))
    return 1 if failures or count == 0 else 0


def main(argv):
    if len(argv) == 3 and argv[0] == "--emit":
        case = CASES[(argv[1], argv[2])]
        print("```json example")
        print(dumps(example(argv[1], case), widths(case)))
        print("```")
        return 0
    if argv:
        print(__doc__)
        return 2
    return check()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
