"""Each op's request on the wire (docs/protocol.md, one section per op): its
validation (the rules of docs/ops/<op>.md#validation, read off the header
and the raw buffers), its decoding into the backend's arrays with the real
memory layout, and the outputs a reply must hold."""

import math
import struct
import sys
from array import array

MAX_OFFSET = 3
MAX_ROW_GAP = 4096
MAX_STORAGE = 1 << 28
MAX_COUNT = 1 << 24


def f32(bits):
    """The f32 whose bits are ``bits``, as a Python float (exactly)."""
    return struct.unpack("<f", struct.pack("<I", bits & 0xFFFFFFFF))[0]


def _int(h, name):
    v = h.get(name)
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise ValueError("%s must be a non-negative integer, not %r" % (name, v))
    return v


def _values(view, code):
    a = array(code)
    a.frombytes(bytes(view))
    if sys.byteorder != "little":
        a.byteswap()
    return a


def _count(buffers, name):
    return buffers[name][1] if name in buffers else None


def _layout(h, t, cols, buffers, name):
    """Why the strided buffer `name` is not a valid T x cols layout, or None."""
    offset, stride = _int(h, "offset"), _int(h, "row_stride")
    if offset > MAX_OFFSET:
        return "element offset %d is unsupported (0..=%d)" % (offset, MAX_OFFSET)
    if stride < cols:
        return "row stride %d is smaller than the row length %d" % (stride, cols)
    if stride - cols > MAX_ROW_GAP:
        return "row stride %d leaves more than %d elements between rows" % (stride, MAX_ROW_GAP)
    span = offset + (t - 1) * stride + cols if t else 0
    if span > MAX_STORAGE:
        return "the storage spans more than %d elements" % MAX_STORAGE
    got = _count(buffers, name)
    if got != span:
        return "%s holds %s elements, its layout spans %d" % (name, got, span)
    return None


def _length(buffers, name, n):
    got = _count(buffers, name)
    if got != n:
        return "%s holds %s values, %d expected" % (name, got, n)
    return None


# ---- decoding, per backend -------------------------------------------------

def _dense(buffers, name, shape, backend, device, kind="f32"):
    """A dense buffer: f32 as f32, u8 as booleans, u32 as int64 (torch's
    and numpy's index type; torch has no full uint32)."""
    dtype, count, view = buffers[name]
    if backend == "torch":
        import torch
        tdtype = {"f32": torch.float32, "u8": torch.uint8, "u32": torch.int32}[dtype]
        x = torch.frombuffer(bytearray(view), dtype=tdtype) if count else torch.empty(0, dtype=tdtype)
        if dtype == "u8":
            x = x.to(torch.bool)
        elif dtype == "u32":
            x = x.to(torch.int64) & 0xFFFFFFFF
        return x.reshape(shape).to(device)
    if backend == "numpy":
        import numpy as np
        x = np.frombuffer(bytes(view), dtype={"f32": "<f4", "u8": "u1", "u32": "<u4"}[dtype]).copy()
        if dtype == "u8":
            x = x.astype(bool)
        elif dtype == "u32":
            x = x.astype(np.int64)
        return x.reshape(shape)
    values = _values(view, {"f32": "f", "u8": "B", "u32": "I"}[dtype]).tolist()
    if dtype == "u8":
        values = [bool(v) for v in values]
    if len(shape) == 2:
        return [values[r * shape[1]:(r + 1) * shape[1]] for r in range(shape[0])]
    return values


def _strided(buffers, name, t, cols, h, backend, device, bf16=False):
    """The T x cols view of a strided buffer: poison in the gaps, a real
    storage offset (misaligned at 1..3) and row stride."""
    offset, stride = h["offset"], h["row_stride"]
    _, count, view = buffers[name]
    if backend == "torch":
        import torch
        storage = torch.frombuffer(bytearray(view), dtype=torch.float32) if count else torch.empty(0)
        storage = storage.to(device)
        if bf16:
            storage = storage.to(torch.bfloat16)
        if t == 0:
            return storage.new_empty((0, cols))
        return torch.as_strided(storage, (t, cols), (stride, 1), offset)
    if backend == "numpy":
        import numpy as np
        from numpy.lib.stride_tricks import as_strided
        storage = np.frombuffer(bytes(view), dtype="<f4").copy()
        if t == 0:
            return np.empty((0, cols), dtype=np.float32)
        return as_strided(storage[offset:], shape=(t, cols), strides=(stride * 4, 4), writeable=False)
    from . import Strided
    return Strided(_values(view, "f").tolist(), offset, stride, (t, cols))


# ---- seqwise_loss -----------------------------------------------------------

class SeqwiseLoss:
    @staticmethod
    def validate(h, b):
        t, e = _int(h, "t"), _int(h, "e")
        if t == 0:
            return "T must be at least 1"
        if e == 0:
            return "E must be at least 1"
        why = _layout(h, t, e, b, "scores")
        if why:
            return why
        if "padding" in b:
            why = _length(b, "padding", t)
            if why:
                return why
        objective = h.get("objective")
        if objective == "provided_map":
            why = _length(b, "map", t * e)
            if why:
                return why
            counted = t * e
        elif objective == "unbiased_top_k":
            k = _int(h, "k")
            if not 1 <= k <= e:
                return "k = %d is outside 1..=E (E = %d)" % (k, e)
            counted = t * k
        else:
            return "unknown objective %r" % (objective,)
        if counted > MAX_COUNT:
            return "counts up to %d would not be exact in f32" % counted
        if h.get("clamp_tie") not in ("strict", "inclusive"):
            return "clamp_tie must be strict or inclusive"
        return None

    @staticmethod
    def decode(h, b, backend, device):
        from . import Case
        t, e = h["t"], h["e"]
        return Case(
            t=t, e=e, offset=h["offset"], row_stride=h["row_stride"],
            scores=_strided(b, "scores", t, e, h, backend, device),
            padding=_dense(b, "padding", (t,), backend, device) if "padding" in b else None,
            objective=h.get("objective"),
            map=_dense(b, "map", (t, e), backend, device) if "map" in b else None,
            k=h.get("k"),
            clamp_tie=h.get("clamp_tie"),
            g=f32(h.get("g", 0)),
        )

    @staticmethod
    def outputs(h, direction, b=None):
        t, e = h["t"], h["e"]
        if direction == "fwd":
            return [("raw", "f32", 1), ("counts", "u32", e), ("freq", "f32", e)]
        return [("grad", "f32", t * e)]


# ---- router ---------------------------------------------------------------

class Router:
    @staticmethod
    def validate(h, b):
        t, e = _int(h, "t"), _int(h, "e")
        if t == 0:
            return "T must be at least 1"
        if e < 2:
            return "E must be at least 2"
        why = _layout(h, t, e, b, "logits") or _length(b, "bias", e)
        if why:
            return why
        bias = _values(b["bias"][2], "f")
        if not all(math.isfinite(x) for x in bias):
            return "the bias must be finite"
        g, l, k = _int(h, "groups"), _int(h, "topk_groups"), _int(h, "k")
        if g == 0 or e % g or e // g < 2:
            return "groups = %d must divide E = %d with at least 2 experts a group" % (g, e)
        if not 1 <= l <= g:
            return "topk_groups = %d is outside 1..=groups" % l
        if not 1 <= k <= l * (e // g):
            return "k = %d is outside 1..=%d" % (k, l * (e // g))
        scale = f32(_int(h, "route_scale"))
        if not (math.isfinite(scale) and scale > 0):
            return "route_scale must be finite and > 0"
        if "padding" in b:
            why = _length(b, "padding", t)
            if why:
                return why
        why = _length(b, "gw", t * k)
        if why:
            return why
        if t * k > MAX_COUNT:
            return "counts up to %d would not be exact in f32" % (t * k)
        loss = h.get("loss")
        if loss is not None and (not isinstance(loss, dict) or loss.get("clamp_tie") not in ("strict", "inclusive")):
            return "loss must be null or {clamp_tie, g}"
        return None

    @staticmethod
    def decode(h, b, backend, device):
        from . import Case
        t, e, k = h["t"], h["e"], h["k"]
        loss = h.get("loss")
        return Case(
            t=t, e=e, offset=h["offset"], row_stride=h["row_stride"],
            logits=_strided(b, "logits", t, e, h, backend, device),
            bias=_dense(b, "bias", (e,), backend, device),
            groups=h["groups"], topk_groups=h["topk_groups"], k=k,
            route_scale=f32(h["route_scale"]), route_norm=bool(h.get("route_norm")),
            padding=_dense(b, "padding", (t,), backend, device) if "padding" in b else None,
            gw=_dense(b, "gw", (t, k), backend, device),
            loss=None if loss is None else Case(clamp_tie=loss.get("clamp_tie"), g=f32(loss.get("g", 0))),
        )

    @staticmethod
    def outputs(h, direction, b=None):
        t, e, k = h["t"], h["e"], h["k"]
        if direction == "fwd":
            return [("ids", "u32", t * k), ("weights", "f32", t * k), ("map", "u8", t * e),
                    ("counts", "u32", e), ("scores", "f32", t * e)]
        return [("grad", "f32", t * e)]


# ---- shared_expert --------------------------------------------------------

def _bf16_exact(view, offset=0, stride=None, t=None, cols=None):
    """Whether every value read is exactly a bf16 (its low 16 bits zero);
    for a strided buffer only the rows' values count, not the poisoned gaps."""
    bits = _values(view, "I")
    if stride is None:
        return not any(v & 0xFFFF for v in bits)
    for r in range(t):
        base = offset + r * stride
        if any(v & 0xFFFF for v in bits[base:base + cols]):
            return False
    return True


class SharedExpert:
    @staticmethod
    def validate(h, b):
        t, hh, f = _int(h, "t"), _int(h, "h"), _int(h, "f")
        if t == 0:
            return "T must be at least 1"
        if hh == 0 or f == 0:
            return "H and F must be at least 1"
        if t * hh > MAX_STORAGE or 2 * f * hh > MAX_STORAGE or t * 2 * f > MAX_STORAGE:
            return "too large"
        why = _layout(h, t, hh, b, "x") or _layout(h, t, hh, b, "dy") \
            or _length(b, "w1", 2 * f * hh) or _length(b, "w2", hh * f)
        if why:
            return why
        o, s = h["offset"], h["row_stride"]
        for name in ("x", "dy"):
            if not _bf16_exact(b[name][2], o, s, t, hh):
                return "%s holds a value that is not a bf16" % name
        for name in ("w1", "w2"):
            if not _bf16_exact(b[name][2]):
                return "%s holds a value that is not a bf16" % name
        return None

    @staticmethod
    def decode(h, b, backend, device):
        from . import Case
        t, hh, f = h["t"], h["h"], h["f"]
        bf16 = backend == "torch"

        def dense_bf16(name, shape):
            x = _dense(b, name, shape, backend, device)
            if bf16:
                import torch
                x = x.to(torch.bfloat16)
            return x
        return Case(
            t=t, h=hh, f=f, offset=h["offset"], row_stride=h["row_stride"],
            x=_strided(b, "x", t, hh, h, backend, device, bf16=bf16),
            w1=dense_bf16("w1", (2 * f, hh)),
            w2=dense_bf16("w2", (hh, f)),
            dy=_strided(b, "dy", t, hh, h, backend, device, bf16=bf16),
        )

    @staticmethod
    def outputs(h, direction, b=None):
        n = h["t"] * h["h"]
        return [("y", "f32", n)] if direction == "fwd" else [("dx", "f32", n)]


# ---- moe_combine -------------------------------------------------------------

def _flag(h, name):
    v = h.get(name)
    if not isinstance(v, bool):
        raise ValueError("%s must be a boolean, not %r" % (name, v))
    return v


def _capacity(h):
    """The header's capacity: None (unlimited) or an integer >= 0."""
    c = h.get("capacity")
    if c is not None and (not isinstance(c, int) or isinstance(c, bool) or c < 0):
        raise ValueError("capacity must be null or a non-negative integer, not %r" % (c,))
    return c


def _placed(buffers, name, rows, cols, h):
    """Refuses (ValueError) a strided buffer too short for its rows, so that
    no view reads past its storage (validate=False lets such a case reach
    the decoding)."""
    offset, stride = h["offset"], h["row_stride"]
    span = offset + (rows - 1) * stride + cols if rows else 0
    got = _count(buffers, name)
    if got is None or got < span or stride < cols:
        raise ValueError("%s holds %s elements, its layout spans %d" % (name, got, span))


class MoeCombine:
    """Dispatch and weighted combine (SPEC.md section 9). The header does not
    carry N_slots, the rows of x_exp and g_disp: it follows from ids,
    padding and capacity (``n_slots``), as the op's dispatch defines it."""

    @staticmethod
    def n_slots(h, b):
        """The slots the dispatch fills: per expert, its choices by
        non-padding tokens, at most ``capacity`` of them. Computed on the
        ids as sent (an out-of-range id counts as an expert of its own), so
        that it is defined for every case that decodes."""
        t, k, cap = h["t"], h["k"], _capacity(h)
        ids = _values(b["ids"][2], "I") if "ids" in b else []
        pad = _values(b["padding"][2], "B") if "padding" in b else None
        per = {}
        for r in range(min(t, len(ids) // k if k else 0)):
            if pad is not None and r < len(pad) and pad[r]:
                continue
            for v in ids[r * k:(r + 1) * k]:
                per[v] = per.get(v, 0) + 1
        return sum(c if cap is None else min(c, cap) for c in per.values())

    @staticmethod
    def validate(h, b):
        t, hh, e, k = _int(h, "t"), _int(h, "h"), _int(h, "e"), _int(h, "k")
        if t == 0:
            return "T must be at least 1"
        if hh == 0:
            return "H must be at least 1"
        if e == 0:
            return "E must be at least 1"
        if not 1 <= k <= e:
            return "k = %d is outside 1..=E (E = %d)" % (k, e)
        _capacity(h)
        if t * k > MAX_COUNT:
            return "T * k = %d choices is more than %d" % (t * k, MAX_COUNT)
        if t * hh > MAX_STORAGE:
            return "T * H = %d is more than %d elements" % (t * hh, MAX_STORAGE)
        if _flag(h, "has_padding"):
            why = _length(b, "padding", t)
            if why:
                return why
        elif "padding" in b:
            return "a padding buffer without has_padding"
        why = _length(b, "ids", t * k) or _length(b, "weights", t * k)
        if why:
            return why
        ids = _values(b["ids"][2], "I")
        for r in range(t):
            row = ids[r * k:(r + 1) * k]
            for v in row:
                if v >= e:
                    return "token %d chooses expert %d, outside 0..E (E = %d)" % (r, v, e)
            if len(set(row)) != k:
                twice = next(v for v in row if row.count(v) > 1)
                return "token %d chooses expert %d twice" % (r, twice)
        n = MoeCombine.n_slots(h, b)
        why = _layout(h, t, hh, b, "x") or _layout(h, n, hh, b, "x_exp")
        if why:
            return why
        o, s = h["offset"], h["row_stride"]
        for name, rows in (("x", t), ("x_exp", n)):
            if not _bf16_exact(b[name][2], o, s, rows, hh):
                return "%s holds a value that is not a bf16" % name
        # Sent in both directions (as the other ops' backward inputs are), so
        # that a forward refuses a case whose dy or g_disp is invalid too.
        why = _layout(h, t, hh, b, "dy") or _layout(h, n, hh, b, "g_disp")
        if why:
            return why
        return None

    @staticmethod
    def decode(h, b, backend, device):
        from . import Case
        t, hh, e, k = _int(h, "t"), _int(h, "h"), _int(h, "e"), _int(h, "k")
        cap = _capacity(h)
        for name in ("ids", "weights"):
            why = _length(b, name, t * k)
            if why:
                raise ValueError(why)
        if "padding" in b:
            why = _length(b, "padding", t)
            if why:
                raise ValueError(why)
        n = MoeCombine.n_slots(h, b)
        placed = [("x", t), ("x_exp", n), ("dy", t), ("g_disp", n)]
        for name, rows in placed:
            _placed(b, name, rows, hh, h)
        views = {name: _strided(b, name, rows, hh, h, backend, device) for name, rows in placed}
        return Case(
            t=t, h=hh, e=e, k=k, capacity=cap, offset=h["offset"], row_stride=h["row_stride"], n_slots=n,
            ids=_dense(b, "ids", (t, k), backend, device),
            weights=_dense(b, "weights", (t, k), backend, device),
            padding=_dense(b, "padding", (t,), backend, device) if "padding" in b else None,
            x=views["x"], x_exp=views["x_exp"], dy=views["dy"], g_disp=views["g_disp"],
        )

    @staticmethod
    def outputs(h, direction, b=None):
        """The reply's outputs; ``slot`` is "i32" here (-1 for a dropped
        choice) and goes on the wire as u32 (0xFFFFFFFF). ``h`` is the
        request header (then ``b`` its buffers) or a decoded case's
        attributes (which carry ``n_slots``)."""
        t, hh, e, k = h["t"], h["h"], h["e"], h["k"]
        n = h["n_slots"] if "n_slots" in h else MoeCombine.n_slots(h, b)
        if direction == "fwd":
            return [("slot", "i32", t * k), ("counts", "u32", e), ("x_disp", "f32", n * hh), ("y", "f32", t * hh)]
        return [("dx_exp", "f32", n * hh), ("dw", "f32", t * k), ("dx", "f32", t * hh)]


OPS = {"seqwise_loss": SeqwiseLoss, "router": Router, "shared_expert": SharedExpert, "moe_combine": MoeCombine}
