"""sgemm-bi's deterministic GEMMs under the SwiGLU MLP, as a bitparity
subject of ``shared_expert``; one tier per process:

    BITPARITY_DEVICE=cuda bitparity check --op shared_expert \\
        --subject "exec:python3 python/providers/thirdparty/sgemm_bi_shared_expert.py scalar" \\
        --subject "exec:python3 python/providers/thirdparty/sgemm_bi_shared_expert.py tc"

Upstream: ``sgemm_bi.deterministic_linear`` (PyPI ``sgemm-bi``, tested with
0.1.2; a Rust engine through cudarc whose kernels NVRTC compiles on the
GPU at first use; PyPI has its source only, so the wheel is built here with
``pip wheel`` from that sdist). ``deterministic_linear(x, W, None,
tensor_cores)`` computes x[M,K] @ W[K,N]; its README promises run-to-run
determinism, batch invariance "within a dispatch bucket" for the scalar
tiers (the usage guide: "strict, across ALL batch sizes, on the
tensor-core forward"), and for bf16 "bit-identical to upcast the inputs to
f32, run the f32 tier, round-to-nearest-even downcast the output".

Tiers (``argv[1]``):

- ``scalar``: every GEMM on sgemm-bi's scalar tiers. The GEMMs whose SPEC
  output is f32 (z = x w1^T, dX = dz w1) run on the f32 tier over f32
  copies of the bf16 values (exact products; its FMA chain is mul-then-add
  for them but below 2^-126); those whose SPEC output is bf16 (y = bf16(h
  w2^T), dh = bf16(dy w2)) on the bf16 typed tier, whose one rounding of
  the f32 result is SPEC's.
- ``tc``: the bf16-output GEMMs on the tensor-core tier
  (``tensor_cores=True``; sgemm-bi itself falls back to the scalar tier
  where an output dimension is below 64). The f32-output GEMMs stay on the
  f32 tier: the Python binding's tensor-core tier returns the operands'
  dtype only, and SPEC's z and dX are f32 (a bf16 z would be another op).

Glue, and why (``_swiglu.py``): SPEC section 5's op with these GEMMs and
PyTorch's elementwise SwiGLU (SPEC's formulas, f32). ``deterministic_linear``
takes contiguous operands only and W as [K, N]: x and dy (the case's
strided views) are made contiguous explicitly, and the weights are passed
transposed where the op needs it (``w1.t().contiguous()`` for z, ``w2.t()
.contiguous()`` for y; w2 and w1 as they are for dh and dX). So the
offset-stride property judges the glue's copies, not sgemm-bi's reads.

Claims no profile (accuracy and gradient within the any-order bound;
batch invariance and determinism bit for bit). shared_expert has no
padding rows and no clamp.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _swiglu  # noqa: E402
import _upstream  # noqa: E402
from _upstream import bitparity  # noqa: E402

import torch  # noqa: E402

TIER = sys.argv[1] if len(sys.argv) > 1 else "scalar"
if TIER not in ("scalar", "tc"):
    sys.exit("sgemm_bi_shared_expert: tier %r: expected scalar or tc" % (TIER,))


def _load():
    import sgemm_bi
    return sgemm_bi


SGEMM = _upstream.Upstream("sgemm-bi", _load)


def linear(a, b, tensor_cores):
    """a @ b through sgemm-bi (b given as [K, N])."""
    sgemm_bi = SGEMM.need()
    _upstream.need_cuda("sgemm-bi")
    a, b = a.contiguous(), b.contiguous()
    if _upstream.STANDIN:
        return torch.mm(a.float(), b.float()).to(a.dtype)
    return sgemm_bi.deterministic_linear(a, b, None, tensor_cores=tensor_cores)


def mm_f32(a, b):
    return linear(a.float(), b.float(), False)


def mm_bf16(a, b):
    return linear(a, b, TIER == "tc")


MLP = _swiglu.Mlp(mm_f32=mm_f32, mm_bf16=mm_bf16)


if __name__ == "__main__":
    bitparity.serve(op="shared_expert", forward=MLP.forward, backward=MLP.backward, backend="torch")
