"""bitparity's external subjects, the Python side.

``serve`` makes a kernel written in Python (PyTorch, Triton, numpy or plain
Python) a subject of ``bitparity check --subject "exec:python3 my_kernel.py"``:
bitparity sends it adversarial cases over stdin/stdout (the protocol of
``docs/protocol.md``) and judges its outputs with every property it has
(accuracy and gradient against the exact result, conformance to a claimed
profile, determinism, offset/stride and padding invariance, batch
invariance, validation), shrinks every failure and saves it to its
regression corpus.

    import bitparity

    def forward(case):            # -> (raw, counts, freq)
        ...
    def backward(case):           # -> grad, T x E
        ...

    bitparity.serve(op="seqwise_loss", forward=forward, backward=backward)

``serve(op, forward, backward, profile=None, backend="auto", validate=True,
padding="skip", clamp_tie=None)``
never returns until bitparity closes the pipe. While it serves, ``sys.stdout``
and file descriptor 1 go to stderr: whatever the kernel prints (Python or C)
cannot corrupt the stream; bitparity shows the last stderr lines when a
subject crashes. (Before ``serve`` is called, at import time say, stdout is
still the stream: a print there breaks the handshake, and bitparity says so.)

- ``profile``: the name of the numeric profile whose bits the kernel claims
  (``"serial"``, ...), or None. A kernel that claims a profile is held to
  its bits (conformance) and to its rigorous error bound (accuracy,
  gradient). One that claims none gets conformance n/a, and accuracy and
  gradient hold every output to the exact (MPFR) result within a bound
  valid for any reduction order (every sum in any order and association,
  products possibly contracted into FMAs); the metamorphic properties,
  determinism and validation judge it as any other.
- ``padding``: the padding rule the kernel implements (docs/padding.md):
  ``"skip"`` (bitparity's: a padding row is never read, its gradient +0.0)
  or ``"mask"`` (native TorchTitan's: the row's terms are computed and
  multiplied by the 0/1 mask, so NaN/Inf there reach the loss and -0.0 its
  gradient). bitparity judges the kernel by the rule it claims.
- ``clamp_tie``: the side of the clamp tie n == eps on which the kernel's
  backward lets the gradient through (docs/ops/seqwise_loss.md#the-clamp-tie),
  when it implements one side only: ``"strict"`` (gate n > eps: PyTorch
  >= 2.15's ``clamp_min``) or ``"inclusive"`` (n >= eps: PyTorch <= 2.11's).
  bitparity then judges it on every case under that rule (the case's
  ``clamp_tie`` field is set to it). None: the kernel follows each case's
  ``clamp_tie``. ``clamp_tie_of_torch()`` says which rule the installed
  PyTorch's autograd implements.
- ``backend``: how inputs are given to the functions. ``"torch"``: tensors on
  ``$BITPARITY_DEVICE`` (default ``cuda`` when available, else ``cpu``);
  ``"numpy"``: arrays; ``"python"``: plain lists and ``Strided`` views;
  ``"auto"``: torch if importable, else numpy, else python.
- ``validate``: refuse the inputs docs/ops/ calls invalid (T = 0, k outside
  1..E, an offset above 3, a row stride below E, NaN bias, an expert id
  out of range or twice in a token...) with an
  ``invalid`` reply before the functions see them. With ``validate=False``
  the functions see every case that decodes, and must raise ``Invalid``
  themselves: bitparity's validation property then judges the kernel's own
  checks.

Strided inputs (seqwise_loss's ``scores``, router's ``logits``,
shared_expert's ``x`` and ``dy``, moe_combine's ``x``, ``x_exp``, ``dy`` and
``g_disp``) keep the case's real memory layout: a
buffer whose first ``offset`` elements and the gaps between rows hold a NaN
poison, viewed with ``torch.as_strided`` / ``numpy.lib.stride_tricks
.as_strided`` (shape ``(T, E)``, strides ``(row_stride, 1)``, storage offset
``offset``). A view at offset 1..3 is misaligned, as PyTorch slices are. Every
other input is dense and row-major.

The functions, per op (``case`` attributes; outputs as a tuple in this order,
or a dict by name; tensors, arrays, lists or Python scalars):

seqwise_loss
    case.t, case.e, case.offset, case.row_stride,
    case.scores (T x E f32, strided), case.padding (T bools, or None),
    case.objective ("provided_map" | "unbiased_top_k"), case.map (T x E
    bools, provided_map only, else None), case.k (unbiased_top_k, else None),
    case.clamp_tie ("strict" | "inclusive"), case.g (float, backward).
    forward -> (raw: f32 scalar, counts: E integers, freq: E f32);
    backward -> grad: T x E f32 (padding rows +0.0 under the ``skip``
    padding rule; see ``padding``).

router
    case.t, case.e, case.offset, case.row_stride, case.logits (T x E f32,
    strided), case.bias (E f32), case.groups, case.topk_groups, case.k,
    case.route_scale (float), case.route_norm (bool), case.padding (T bools
    or None), case.gw (T x k f32), case.loss (None, or an object with
    .clamp_tie and .g).
    forward -> (ids: T x k integers ascending per row, weights: T x k f32,
    map: T x E bools, counts: E integers, scores: T x E f32);
    backward -> grad: T x E f32 (the gradient of the logits).

shared_expert
    case.t, case.h, case.f, case.offset, case.row_stride, case.x (T x H,
    strided; bf16 under torch, f32 holding bf16 values otherwise), case.w1
    (2F x H), case.w2 (H x F), case.dy (T x H, strided like x).
    forward -> y: T x H (bf16 values); backward -> dx: T x H f32.

moe_combine
    case.t, case.h, case.e, case.k, case.capacity (None: unlimited, or an
    integer >= 0), case.offset, case.row_stride, case.ids (T x k expert
    ids; int64 under torch and numpy), case.weights (T x k f32),
    case.padding (T bools, or None), case.x (T x H, strided), case.n_slots
    (the slots the dispatch fills), case.x_exp (n_slots x H, strided like
    x: the experts' outputs, slot by slot), case.dy (T x H, strided;
    backward, else None), case.g_disp (n_slots x H, strided; backward,
    else None). x and x_exp hold bf16 values, as f32 under every backend.
    forward -> (slot: T x k integers, -1 for a dropped choice or a padding
    token; counts: E integers; x_disp: n_slots x H f32; y: T x H f32);
    backward -> (dx_exp: n_slots x H f32, dw: T x k f32, dx: T x H f32).

Errors: raise ``Invalid`` (or ``ValueError``) to refuse an invalid input,
``Unavailable`` (or ``NotImplementedError``) for a case the kernel cannot run
here (an honest skip, reported as such); any other exception is a ``device``
error, a failure of the property.
"""

import json
import os
import struct
import sys
import traceback
from array import array

from . import _ops

__all__ = ["serve", "Invalid", "Unavailable", "Strided", "PROTOCOL_VERSION"]

PROTOCOL_VERSION = 1
# The largest header bitparity sends is a few hundred bytes.
MAX_HEADER = 1 << 20
_DTYPES = {"f32": ("f", 4), "u32": ("I", 4), "u8": ("B", 1)}
# Output types that travel as another wire type (see _bytes).
_WIRE = {"i32": "u32"}


class Invalid(ValueError):
    """The input is invalid: the kernel refuses it (fail closed)."""


class Unavailable(Exception):
    """The kernel cannot run this case here (a shape it does not support)."""


class Strided:
    """A T x E matrix as it lies in memory (the plain-Python backend):
    ``storage`` (a list of floats, NaN poison in the gaps), ``offset``,
    ``row_stride``, ``shape``. ``row(r)`` reads row r from the storage."""

    __slots__ = ("storage", "offset", "row_stride", "shape")

    def __init__(self, storage, offset, row_stride, shape):
        self.storage, self.offset, self.row_stride, self.shape = storage, offset, row_stride, shape

    def row(self, r):
        base = self.offset + r * self.row_stride
        return self.storage[base:base + self.shape[1]]


class Case:
    """One request's inputs, as attributes (see the module docstring)."""

    def __init__(self, **kw):
        self.__dict__.update(kw)

    def __repr__(self):
        return "Case(%s)" % ", ".join("%s=%r" % kv for kv in sorted(self.__dict__.items()) if not hasattr(kv[1], "__len__"))


def _backend(name):
    if name not in ("auto", "torch", "numpy", "python"):
        raise ValueError("backend must be auto, torch, numpy or python, not %r" % (name,))
    if name in ("auto", "torch"):
        try:
            import torch  # noqa: F401
            return "torch"
        except ImportError:
            if name == "torch":
                raise
    if name in ("auto", "numpy"):
        try:
            import numpy  # noqa: F401
            return "numpy"
        except ImportError:
            if name == "numpy":
                raise
    return "python"


class _Stream:
    """Frames on a byte stream: a u32 little-endian header length, the JSON
    header, then the buffers it lists, back to back. By default stdin and
    stdout (``serve``); ``inp`` (a binary file with ``read``) and ``out`` (a
    file descriptor) give another stream, a socket's (the pytest plugin)."""

    def __init__(self, inp=None, out=None):
        if inp is not None:
            self.inp, self.out = inp, out
            return
        # The real stdout, kept for frames only; fd 1 and sys.stdout then go
        # to stderr, so that nothing the kernel prints (Python or C) lands in
        # the stream.
        self.out = os.dup(1)
        os.dup2(2, 1)
        sys.stdout = sys.stderr
        self.inp = sys.stdin.buffer

    def read_exact(self, n, what):
        """n bytes, or None at the end of stdin before the first of them;
        stdin ending midway is an error (the stream lost its frame)."""
        data = self.inp.read(n) if n else b""
        if data is None or len(data) < n:
            if not data and what == "a frame length":
                return None
            raise IOError("stdin ended in the middle of %s (%d of %d bytes)" % (what, len(data or b""), n))
        return data

    def read(self):
        """(header, {name: (dtype, count, memoryview)}) or None at EOF."""
        raw = self.read_exact(4, "a frame length")
        if raw is None:
            return None
        (n,) = struct.unpack("<I", raw)
        if n > MAX_HEADER:
            raise IOError("a header of %d bytes" % n)
        header = json.loads(self.read_exact(n, "a header"))
        if not isinstance(header, dict):
            raise IOError("a header that is not an object")
        listed = header.pop("buffers", [])
        sizes = [count * _DTYPES[dtype][1] for (_, dtype, count) in listed]
        payload = self.read_exact(sum(sizes), "the buffers")
        view = memoryview(payload)
        buffers, at = {}, 0
        for (name, dtype, count), size in zip(listed, sizes):
            buffers[name] = (dtype, count, view[at:at + size])
            at += size
        return header, buffers

    def write(self, header, buffers=()):
        if buffers:
            header = dict(header, buffers=[[name, dtype, count] for (name, dtype, count, _) in buffers])
        text = json.dumps(header, separators=(",", ":")).encode()
        parts = [struct.pack("<I", len(text)), text] + [data for (_, _, _, data) in buffers]
        data = b"".join(parts)
        view = memoryview(data)
        while view:
            n = os.write(self.out, view)
            view = view[n:]


def _die_with_parent():
    """On Linux, asks the kernel to SIGKILL this process when its parent
    dies (prctl PR_SET_PDEATHSIG): a bitparity killed by SIGKILL cannot kill
    its children itself, and an orphaned provider would hold a GPU. Best
    effort: elsewhere, or without libc, nothing changes.

    The kernel sends the signal when the parent *thread* that started this
    process ends: the parent is bitparity's guard, or the first process of
    the provider's PID namespace, each single-threaded
    (src/exec/contain.rs), which already kill the provider when they end;
    this is a second line for a provider started by anything else."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        import signal
        parent = os.getppid()
        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)
        # The parent may have died before the call (we were reparented):
        # then nobody would send the signal.
        if os.getppid() != parent:
            sys.stderr.write("bitparity.serve: the parent process is gone; exiting\n")
            sys.stderr.flush()
            os._exit(1)
    except (OSError, AttributeError):
        pass


def clamp_tie_of_torch():
    """The clamp tie rule of the installed PyTorch's autograd: ``"strict"``
    when ``clamp_min``'s backward blocks the gradient at x == min (its
    derivatives.yaml says ``self > min``), ``"inclusive"`` when it passes it
    (``self >= min``). Measured, not looked up: the rule changed between
    versions (reports/torch-subjects-2026-12-01)."""
    import torch
    x = torch.tensor([0.5], requires_grad=True)
    x.clamp_min(0.5).sum().backward()
    return "inclusive" if x.grad.item() == 1.0 else "strict"


def serve(op, forward, backward, profile=None, backend="auto", validate=True, padding="skip", clamp_tie=None):
    """Serves ``op`` (``"seqwise_loss"``, ``"router"``, ``"shared_expert"``,
    ``"moe_combine"``)
    to bitparity on stdin/stdout until it closes the pipe. See the module
    docstring for the functions' signatures."""
    served = _Served(op, forward, backward, profile, backend, validate, padding, clamp_tie)
    _die_with_parent()
    served.run(_Stream())


class _Served:
    """An op's functions and claims, checked, served on any number of
    streams: ``serve``'s stdin/stdout, or each connection of the pytest
    plugin's socket server."""

    def __init__(self, op, forward, backward, profile=None, backend="auto", validate=True, padding="skip",
                 clamp_tie=None):
        if op not in _ops.OPS:
            raise ValueError("unknown op %r (known: %s)" % (op, ", ".join(sorted(_ops.OPS))))
        if padding not in ("skip", "mask"):
            raise ValueError("padding must be skip or mask, not %r" % (padding,))
        if clamp_tie not in (None, "strict", "inclusive"):
            raise ValueError("clamp_tie must be strict, inclusive or None, not %r" % (clamp_tie,))
        self.op, self.spec, self.validate = op, _ops.OPS[op], validate
        self.backend = _backend(backend)
        self.device = None
        if self.backend == "torch":
            import torch
            self.device = os.environ.get("BITPARITY_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
        self.functions = {"fwd": forward, "bwd": backward}
        self.hello = {"protocol": "bitparity", "version": PROTOCOL_VERSION, "ops": [op], "profile": profile,
                      "padding": padding, "clamp_tie": clamp_tie}

    def run(self, stream, lock=None):
        """The handshake, then one reply per request until the stream ends.
        ``lock`` (a ``threading.Lock``), when given, is held while a request
        is decoded and computed: streams served from several threads then
        call the functions one at a time."""
        stream.write(self.hello)
        while True:
            try:
                got = stream.read()
            except (IOError, ValueError, KeyError, TypeError) as e:
                # A stream out of step cannot be resynchronised.
                sys.stderr.write("bitparity.serve: unreadable request: %s\n" % (e,))
                return
            if got is None:
                return
            if lock is None:
                reply = self.reply(*got)
            else:
                with lock:
                    reply = self.reply(*got)
            stream.write(*reply)

    def reply(self, header, buffers):
        """The reply to one request: (header, buffers)."""
        try:
            if header.get("op") != self.op:
                raise Invalid("this subject serves %s, not %s" % (self.op, header.get("op")))
            direction = header.get("dir")
            if direction not in self.functions:
                raise Invalid("dir must be fwd or bwd, not %r" % (direction,))
            if self.validate:
                why = self.spec.validate(header, buffers)
                if why:
                    raise Invalid(why)
            case = self.spec.decode(header, buffers, self.backend, self.device)
            result = self.functions[direction](case)
            outputs = _outputs(self.spec.outputs(header, direction, buffers), result, self.backend)
        except (Invalid, ValueError) as e:
            return {"error": "invalid", "message": str(e) or type(e).__name__}, ()
        except (Unavailable, NotImplementedError) as e:
            return {"error": "unavailable", "message": str(e) or type(e).__name__}, ()
        except Exception as e:  # the kernel failed: a device error, judged a failure
            traceback.print_exc(file=sys.stderr)
            return {"error": "device", "message": "%s: %s" % (type(e).__name__, e)}, ()
        return {"ok": True}, outputs


def _flat(x, backend):
    """A Python list of the values of x (tensor, array, list, scalar), in
    row-major order."""
    if hasattr(x, "detach"):
        x = x.detach().to("cpu").contiguous().reshape(-1)
        if x.is_floating_point():
            # bf16/f16 outputs are exact in f32; numpy has no bf16.
            x = x.float()
        try:
            return x.numpy()
        except Exception:
            return x.tolist()
    if hasattr(x, "reshape") and hasattr(x, "dtype"):
        return x.reshape(-1)
    if isinstance(x, (list, tuple, array)):
        out = []
        for v in x:
            if isinstance(v, (list, tuple, array)):
                out.extend(v)
            else:
                out.append(v)
        return out
    return [x]


def _bytes(values, dtype):
    """Little-endian bytes of values as dtype; values outside the dtype's
    range are an error of the kernel. "i32" (moe_combine's slot, -1 for
    none) goes on the wire as u32: each value modulo 2^32, from -2^31 up to
    2^32 - 1, so -1 and 0xFFFFFFFF are the same bits."""
    if hasattr(values, "astype"):
        import numpy as np
        if dtype == "f32":
            return values.astype("<f4").tobytes()
        if dtype == "i32":
            v = values.astype(np.int64) if values.dtype.kind != "f" else values
            if v.size and (v.min() < -(1 << 31) or v.max() > 0xFFFFFFFF
                           or (values.dtype.kind == "f" and (v != np.floor(v)).any())):
                raise RuntimeError("an i32 output outside -2^31..2^32-1")
            return (v.astype(np.int64) & 0xFFFFFFFF).astype("<u4").tobytes()
        if dtype == "u32":
            v = values.astype(np.int64) if values.dtype.kind != "f" else values
            if v.size and (v.min() < 0 or v.max() > 0xFFFFFFFF or (values.dtype.kind == "f" and (v != np.floor(v)).any())):
                raise RuntimeError("an integer output outside 0..2^32-1")
            return v.astype("<u4").tobytes()
        return values.astype(bool).astype("u1").tobytes()
    if dtype == "f32":
        a = array("f", [float(v) for v in values])
    elif dtype == "u32":
        a = array("I", [int(v) for v in values])
    elif dtype == "i32":
        ints = [int(v) for v in values]
        if any(v < -(1 << 31) or v > 0xFFFFFFFF or v != w for v, w in zip(ints, values)):
            raise RuntimeError("an i32 output outside -2^31..2^32-1")
        a = array("I", [v & 0xFFFFFFFF for v in ints])
    else:
        a = array("B", [1 if v else 0 for v in values])
    if sys.byteorder != "little":
        a.byteswap()
    return a.tobytes()


def _outputs(expected, result, backend):
    """The reply's buffers: each output named by expected, in its order,
    its element count checked (a wrong shape is the kernel's error)."""
    if isinstance(result, dict):
        missing = [n for (n, _, _) in expected if n not in result]
        if missing:
            raise RuntimeError("the outputs lack %s" % ", ".join(missing))
        values = [result[n] for (n, _, _) in expected]
    else:
        values = list(result) if isinstance(result, (tuple, list)) and len(expected) > 1 else [result]
        if len(values) != len(expected):
            raise RuntimeError("%d outputs returned, %d expected (%s)" % (len(values), len(expected), ", ".join(n for (n, _, _) in expected)))
    out = []
    for (name, dtype, count), v in zip(expected, values):
        flat = _flat(v, backend)
        if len(flat) != count:
            raise RuntimeError("output %s holds %d values, the case implies %d" % (name, len(flat), count))
        out.append((name, _WIRE.get(dtype, dtype), count, _bytes(flat, dtype)))
    return out
