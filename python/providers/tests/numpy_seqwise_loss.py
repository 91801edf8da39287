"""seqwise_loss in numpy float32, vectorised over rows or experts but every
sum serial and ascending (a loop over the summed index, each step one
rounded f32 add): the `serial` profile's bits, which it claims. It reads the
scores through the strided view the package builds (as_strided on the
poisoned buffer, misaligned at offset 1..3).

    bitparity check --op seqwise_loss --subject "exec:python3 python/providers/tests/numpy_seqwise_loss.py"
"""
import _path  # noqa: F401
import bitparity
import numpy as np

F32 = np.float32
EPS = F32(1e-12)
EPS2 = F32(1e-20)


def serial_rows(x):
    """Each row's serial ascending sum (x: T x E)."""
    acc = np.zeros(x.shape[0], dtype=F32)
    for e in range(x.shape[1]):
        acc = acc + x[:, e]
    return acc


def parts(case):
    s = np.ascontiguousarray(case.scores, dtype=F32)
    t, e = s.shape
    valid = ~case.padding if case.padding is not None else np.ones(t, dtype=bool)
    if case.objective == "provided_map":
        chosen = case.map & valid[:, None]
        n = serial_rows(np.abs(s))
        d = np.where(n < EPS, EPS, n)  # NaN keeps its norm
        gate = (n > EPS) if case.clamp_tie == "strict" else (n >= EPS)
    else:
        # NaN first, then larger values, ties to the lower index.
        # np.lexsort: the last key is the primary one.
        key = np.where(np.isnan(s), 0.0, -s.astype(np.float64))
        order = np.lexsort((np.broadcast_to(np.arange(e), s.shape), key, ~np.isnan(s)), axis=1)
        chosen = np.zeros((t, e), dtype=bool)
        np.put_along_axis(chosen, order[:, : case.k], True, axis=1)
        chosen &= valid[:, None]
        d = serial_rows(s) + EPS2
        gate = None
    counts = chosen.sum(axis=0).astype(np.int64)
    total = counts.sum()
    denom = EPS if total == 0 else F32(total)
    freq = (counts.astype(F32) / denom) * F32(e)
    return s, valid, d, gate, counts, freq


def forward(case):
    with np.errstate(all="ignore"):
        s, valid, d, _, counts, freq = parts(case)
        p = s / d[:, None]
        sums = np.zeros(s.shape[1], dtype=F32)
        for t in range(s.shape[0]):
            if valid[t]:
                sums = sums + p[t]
        raw = F32(0)
        for term in freq * sums:
            raw = F32(raw + term)
        return raw, counts, freq


def backward(case):
    with np.errstate(all="ignore"):
        s, valid, d, gate, _, freq = parts(case)
        a = F32(case.g) * freq
        dd = d[:, None]
        q = serial_rows(-(a[None, :] * ((s / dd) / dd)))
        first = a[None, :] / dd
        if gate is None:
            grad = first + q[:, None]
        else:
            r = np.where(gate, q, F32(0))
            # sgn(+-0) = +0.0, sgn(NaN) = NaN (PyTorch's (0 < x) - (x < 0)).
            sgn = np.where(s > 0, F32(1), np.where(s < 0, F32(-1), np.where(np.isnan(s), F32(np.nan), F32(0))))
            grad = first + sgn * r[:, None]
        return np.where(valid[:, None], grad, F32(0))


if __name__ == "__main__":
    bitparity.serve(op="seqwise_loss", forward=forward, backward=backward, profile="serial", backend="numpy")
