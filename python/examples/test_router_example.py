"""bitparity's pytest plugin on a router written in plain Python (no numpy,
no torch), as the worked example of docs/pytest.md: one test passes, one
fails on purpose.

    pip install bitparity pytest
    pytest python/examples/test_router_example.py

The router is SPEC section 4 (DeepSeek-V3's, after the gate matmul): per
row, s = sigmoid(logits), u = s + bias chooses, the topk_groups groups with
the best sum of their two largest u, then the k largest u among their
experts; the weights are s at those experts, normalised and scaled. It
chooses on f32 values, as the spec does, and computes the rest in double
precision: it claims no profile (``profile=None``), so bitparity judges it by
the properties every kernel owes (accuracy within the bound of any order of
the sums, the gradient, determinism, batch and offset/stride invariance,
padding, validation), not by the bits of one order.

``test_router`` passes. ``test_router_counting_padding`` judges the same
router with one bug, the counts include padding tokens, and fails: padding
rows change the counts (the padding property) and the counts are not the
exact ones (accuracy); each failure is shrunk to a small case, saved to ``bitparity-corpus/`` next to this file, and
replayed first by every later run of that test.
"""
import math
import struct

INF = float("inf")
_F32 = struct.Struct("<f")


def f32(x):
    """x rounded to the nearest f32 (to infinity past its range)."""
    try:
        return _F32.unpack(_F32.pack(x))[0]
    except OverflowError:
        return math.copysign(INF, x)


EPS = f32(1e-12)  # the fused loss's clamp (F.normalize's eps), an f32


def sigmoid(x):
    """1 / (1 + exp(-x)), each step rounded to f32 as SPEC section 4 says:
    the choices below are made on these f32 values, and a near tie decided
    on double values would choose another expert than the spec's."""
    if x != x:
        return x
    e = f32(math.exp(-x)) if -x < 709.0 else INF
    return f32(1.0 / f32(1.0 + e))


def top(values, indices, n):
    """The n best of indices by values: larger first, NaN above every
    number, ties to the lower index (SPEC section 4)."""
    def key(i):
        v = values[i]
        return (0, 0.0, i) if v != v else (1, -v, i)
    return sorted(indices, key=key)[:n]


def route(case, row):
    """(ids ascending, s) of one row of logits."""
    s = [sigmoid(x) for x in row]
    u = [f32(si + b) for si, b in zip(s, case.bias)]
    per = case.e // case.groups
    group_score = []
    for g in range(case.groups):
        a, b = top(u, range(g * per, (g + 1) * per), 2)
        group_score.append(f32(u[a] + u[b]))
    kept = top(group_score, range(case.groups), case.topk_groups)
    experts = [e for g in sorted(kept) for e in range(g * per, (g + 1) * per)]
    return sorted(top(u, experts, case.k)), s


def padded(case, t):
    return case.padding is not None and bool(case.padding[t])


def forward(case, count_padding=False):
    ids, weights, chosen, scores = [], [], [], []
    counts = [0] * case.e
    for t in range(case.t):
        row_ids, s = route(case, case.logits.row(t))
        w = [s[i] for i in row_ids]
        if case.route_norm:
            d = sum(w) + 1e-20
            w = [x / d for x in w]
        ids.append(row_ids)
        weights.append([x * case.route_scale for x in w])
        chosen.append([e in row_ids for e in range(case.e)])
        scores.append(s)
        if count_padding or not padded(case, t):
            for e in row_ids:
                counts[e] += 1
    return ids, weights, chosen, counts, scores


def sgn(x):
    return x if x != x else (1.0 if x > 0 else (-1.0 if x < 0 else 0.0))


def backward(case):
    rows = [route(case, case.logits.row(t)) for t in range(case.t)]
    # The fused seqwise_loss (ProvidedMap, this router's map) when the case
    # has one: a_e = g * f_e over the valid rows' counts.
    a = None
    if case.loss is not None:
        counts = [0] * case.e
        for t, (ids, _) in enumerate(rows):
            if not padded(case, t):
                for e in ids:
                    counts[e] += 1
        total = max(float(sum(counts)), EPS)
        a = [case.loss.g * (c / total * case.e) for c in counts]
    grad = []
    for t, (ids, s) in enumerate(rows):
        loss_part = [0.0] * case.e
        if a is not None and not padded(case, t):
            # The norm in f32, as the spec's: its clamp and gradient gate
            # are decisions (n == eps is a case bitparity generates).
            n = 0.0
            for x in s:
                n = f32(n + abs(x))
            d = EPS if n < EPS else n
            q = sum(-(ae * ((x / d) / d)) for ae, x in zip(a, s))
            gate = n > EPS if case.loss.clamp_tie == "strict" else n >= EPS
            loss_part = [ak / d + sgn(x) * (q if gate else 0.0) for ak, x in zip(a, s)]
        w0 = [s[i] for i in ids]
        g = [case.route_scale * gw for gw in case.gw[t]]
        if case.route_norm:
            d = sum(w0) + 1e-20
            q = sum(-(aj * ((w / d) / d)) for aj, w in zip(g, w0))
            route_part = dict(zip(ids, [aj / d + q for aj in g]))
        else:
            route_part = dict(zip(ids, g))
        gs = [route_part[e] + loss_part[e] if e in route_part else loss_part[e] for e in range(case.e)]
        grad.append([(gse * (1.0 - se)) * se for gse, se in zip(gs, s)])
    return grad


def test_router(bitparity):
    bitparity.check("router", forward=forward, backward=backward, profile=None, backend="python", cases=100)


def test_router_counting_padding(bitparity):
    bitparity.check("router", forward=lambda case: forward(case, count_padding=True), backward=backward,
                    profile=None, backend="python", cases=100)
