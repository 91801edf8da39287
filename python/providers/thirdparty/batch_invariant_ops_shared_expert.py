"""Thinking Machines' batch_invariant_ops GEMMs under the SwiGLU MLP, as a
bitparity subject of ``shared_expert``.

    BITPARITY_DEVICE=cuda bitparity check --op shared_expert \\
        --subject "exec:python3 python/providers/thirdparty/batch_invariant_ops_shared_expert.py"

Upstream: ``batch_invariant_ops`` (GitHub thinking-machines-lab/
batch_invariant_ops, not on PyPI; tested at commit f22b1fb, version 0.1.0,
installed from a wheel built from that snapshot with ``pip wheel``). Its
``enable_batch_invariant_mode()`` registers ``matmul_persistent`` (a
persistent Triton GEMM with a fixed tile and K order: 128 x 128 x 64 tiles
for bf16, 128 x 128 x 32 for f32, f32 accumulator, one rounding to the
output dtype) as the CUDA implementation of ``aten::mm`` and
``aten::addmm``, which is how its README and its vLLM example use it; every
``torch.mm`` of the provider then runs it.

Glue, and why (``_swiglu.py``): SPEC section 5's op on those GEMMs. The
GEMMs whose SPEC output is bf16 (y = bf16(h w2^T), dh = bf16(dy w2)) run
on the bf16 operands, as the library runs a bf16 model: its f32
accumulator rounded once to bf16 is SPEC's rounding. The GEMMs whose SPEC
output is f32 (z = x w1^T, dX = dz w1) run on f32 copies of the bf16 values:
the library's f32 configuration, whose ``tl.dot`` takes TF32 inputs by
Triton's default; a bf16 value is exact in TF32, so the products are
SPEC's. The elementwise steps (SwiGLU and its derivative) are PyTorch's, in
f32, SPEC's formulas. The strided x and dy reach ``matmul_persistent`` as
the case's views (it takes any strides); the f32 copies are contiguous.

What its README promises and bitparity checks bit for bit: batch
invariance (row t of every output does not depend on the other rows) and
determinism. Accuracy and gradient: within the any-order bound. Claims no
profile. shared_expert has no padding rows and no clamp.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _swiglu  # noqa: E402
import _upstream  # noqa: E402
from _upstream import bitparity  # noqa: E402

import torch  # noqa: E402


def _load():
    import batch_invariant_ops
    return batch_invariant_ops


BIO = _upstream.Upstream("batch-invariant-ops", _load)
_enabled = False


def mm(a, b):
    global _enabled
    bio = BIO.need()
    _upstream.need_cuda("batch_invariant_ops (Triton)")
    if not _enabled and not _upstream.STANDIN:
        # Once for the process: the library's own switch, as its users call it.
        bio.enable_batch_invariant_mode()
        _enabled = True
    return torch.mm(a, b)


def mm_f32(a, b):
    return mm(a.float(), b.float())


MLP = _swiglu.Mlp(mm_f32=mm_f32, mm_bf16=mm)


if __name__ == "__main__":
    bitparity.serve(op="shared_expert", forward=MLP.forward, backward=MLP.backward, backend="torch")
