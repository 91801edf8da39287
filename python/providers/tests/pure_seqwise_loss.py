"""seqwise_loss in plain Python (no numpy, no torch), every f32 operation
rounded as the `serial` profile says: each sum serial and ascending from
+0.0, every add, multiply and divide rounded to f32 on its own (a double
result of two f32 operands rounded to f32 is the correctly rounded f32 result:
53 >= 2 * 24 + 2 bits, so the double rounding is innocuous). It reads the
scores from their strided storage, as a kernel does. It claims the `serial`
profile: bitparity's conformance property holds it to the profile oracle's
bits (tests/it/exec.rs).

    bitparity check --op seqwise_loss --subject "exec:python3 python/providers/tests/pure_seqwise_loss.py"
"""
import math
import struct
import sys
import time

import _path  # noqa: F401
import bitparity

_F = struct.Struct("<f")
INF = float("inf")
NAN = float("nan")
EPS = _F.unpack(_F.pack(1e-12))[0]
EPS2 = _F.unpack(_F.pack(1e-20))[0]

# Test switches (tests/it/exec.rs): `--bug ignore-offset` reads the rows as if
# the storage began at offset 0 (a planted bug the offset-stride and
# conformance properties must catch through the protocol);
# `--unavailable-odd` declares every case with an odd T unavailable.
BUG = "ignore-offset" if "ignore-offset" in sys.argv else None
UNAVAILABLE_ODD = "--unavailable-odd" in sys.argv
# `--mask` computes the `mask` padding rule (docs/padding.md: a padding
# row's p times 0.0 before the token sum, its gradient with a_e * 0.0)
# instead of `skip`; `--claim skip|mask` announces a rule other than the
# one computed (a subject that claims the wrong rule must fail).
MASK = "--mask" in sys.argv
CLAIM = sys.argv[sys.argv.index("--claim") + 1] if "--claim" in sys.argv else ("mask" if MASK else "skip")
# `--tie strict|inclusive` computes that clamp tie rule whatever the case's
# `clamp_tie` (a kernel of one rule) and claims it; `--claim-tie
# strict|inclusive|case` announces another claim (`case`: none, it follows
# each case's rule).
TIE = sys.argv[sys.argv.index("--tie") + 1] if "--tie" in sys.argv else None
CLAIM_TIE = sys.argv[sys.argv.index("--claim-tie") + 1] if "--claim-tie" in sys.argv else (TIE or "case")
# `--serve-as OP` announces another op in the handshake (for the handshake's
# own tests: a claim that op cannot have must be refused before any case).
SERVE_AS = sys.argv[sys.argv.index("--serve-as") + 1] if "--serve-as" in sys.argv else "seqwise_loss"
# `--slow S` sleeps S seconds in each forward (a slow subject: shrinking one
# of its failures takes minutes, and SIGINT must not wait for it).
SLOW = float(sys.argv[sys.argv.index("--slow") + 1]) if "--slow" in sys.argv else 0.0


def r(x):
    """x rounded to f32 (round to nearest even; overflow to infinity)."""
    try:
        return _F.unpack(_F.pack(x))[0]
    except OverflowError:
        return math.copysign(INF, x)


def div(a, b):
    """a / b in IEEE f32 (Python raises on division by zero)."""
    if b == 0.0:
        if a != a or a == 0.0:
            return NAN
        return math.copysign(INF, a) * math.copysign(1.0, b)
    return r(a / b)


def serial(xs):
    acc = 0.0
    for x in xs:
        acc = r(acc + x)
    return acc


def topk(row, k):
    # NaN above every number, then larger values, ties to the lower index.
    order = sorted(range(len(row)), key=lambda i: (0 if row[i] != row[i] else 1, -row[i] if row[i] == row[i] else 0.0, i))
    return set(order[:k])


def rows(case):
    if UNAVAILABLE_ODD and case.t % 2 == 1:
        raise bitparity.Unavailable("odd T is not supported by this kernel")
    pad = case.padding
    s = case.scores

    def row(t):
        if BUG:
            return s.storage[t * s.row_stride:t * s.row_stride + case.e]
        return s.row(t)
    return [(t, row(t), bool(pad[t]) if pad is not None else False) for t in range(case.t)]


def counts_of(case, all_rows):
    counts = [0] * case.e
    for t, row, padded in all_rows:
        if padded:
            continue
        if case.objective == "provided_map":
            chosen = [e for e in range(case.e) if case.map[t][e]]
        else:
            chosen = topk(row, case.k)
        for e in chosen:
            counts[e] += 1
    return counts


def frequencies(counts):
    total = sum(counts)
    denom = EPS if total == 0 else float(total)
    experts = float(len(counts))
    return [r(div(float(c), denom) * experts) for c in counts]


def denominator(case, row):
    """(d, gate): the row's denominator and its gradient gate."""
    if case.objective == "unbiased_top_k":
        return r(serial(row) + EPS2), None
    n = serial([abs(x) for x in row])
    d = EPS if n < EPS else n  # NaN keeps its norm
    gate = n > EPS if (TIE or case.clamp_tie) == "strict" else n >= EPS
    return d, gate


def forward(case):
    if SLOW:
        time.sleep(SLOW)
    all_rows = rows(case)
    counts = counts_of(case, all_rows)
    freq = frequencies(counts)
    sums = [0.0] * case.e
    for t, row, padded in all_rows:
        if padded and not MASK:
            continue
        d, _ = denominator(case, row)
        for e, s in enumerate(row):
            p = div(s, d)
            sums[e] = r(sums[e] + (p * 0.0 if padded else p))
    raw = serial([r(f * p) for f, p in zip(freq, sums)])
    return raw, counts, freq


def sgn(x):
    if x != x:
        return NAN
    return 1.0 if x > 0 else (-1.0 if x < 0 else 0.0)


def backward(case):
    all_rows = rows(case)
    freq = frequencies(counts_of(case, all_rows))
    a = [r(case.g * f) for f in freq]
    grad = []
    for t, row, padded in all_rows:
        if padded and not MASK:
            grad.extend([0.0] * case.e)
            continue
        d, gate = denominator(case, row)
        a_row = [a_e * 0.0 for a_e in a] if padded else a
        q = serial([-r(a_e * div(div(s, d), d)) for s, a_e in zip(row, a_row)])
        for s, a_k in zip(row, a_row):
            first = div(a_k, d)
            if gate is None:
                grad.append(r(first + q))
            else:
                grad.append(r(first + r(sgn(s) * (q if gate else 0.0))))
    return grad


if __name__ == "__main__":
    bitparity.serve(op=SERVE_AS, forward=forward, backward=backward, profile="serial", backend="python",
                    padding=CLAIM, clamp_tie=None if CLAIM_TIE == "case" else CLAIM_TIE)
