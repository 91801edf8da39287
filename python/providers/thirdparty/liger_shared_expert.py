"""Liger-Kernel's SwiGLU (Triton) between PyTorch GEMMs, as a bitparity
subject of ``shared_expert``.

    BITPARITY_DEVICE=cuda bitparity check --op shared_expert \\
        --subject "exec:python3 python/providers/thirdparty/liger_shared_expert.py"

Upstream: ``liger_kernel.ops.swiglu.LigerSiLUMulFunction`` (PyPI
``liger-kernel``, tested with 0.8.5; Triton), the autograd Function that
``LigerSwiGLUMLP`` applies between its gate/up and down projections:
forward c = silu(a) * b (``_swiglu_forward_kernel``: a in f32, ``a *
tl.sigmoid(a)`` cast to b's dtype, times b), backward (``_swiglu_backward_
kernel``, which recomputes sigmoid and writes da, db over its saved a, b).

Glue, and why (``_swiglu.py``): SPEC section 5's op with Liger's SwiGLU in
the middle. z = x w1^T is an f32 GEMM of the bf16 values (``torch.mm``,
cuBLAS; exact products, f32 accumulation), g and u its halves; Liger's
forward runs on g and u in f32, so its product is SPEC's (g * sigmoid(g)) *
u in f32, rounded once to bf16 by the glue as SPEC says (h); y = bf16(h
w2^T) by ``torch.mm``. Backward: dh = bf16(dy w2) (``torch.mm``), Liger's
backward for (dgate, dup) given dh, dz = bf16([dgate, dup]), dX = dz w1 in
f32. Liger's ``ensure_contiguous`` copies the strided halves g and u; the
strided x and dy go to ``torch.mm`` as the case's views.

So the GEMMs are PyTorch's (cuBLAS, as in ``torch_shared_expert.py``): a
batch-invariance or offset-stride failure also seen on that provider is
cuBLAS's, not Liger's. What is Liger's: the SwiGLU's values (its sigmoid is
Triton's ``tl.sigmoid``, whose exp is not correctly rounded: SPEC section 2
asks for a correctly rounded one) and its backward's formula, ``dh *
(silu * (1 - sig) + sig) * u``, associated otherwise than SPEC's ``(dh * u)
* (sig * (1 + g * (1 - sig)))``.

Mode ``LIGER_MLP=native`` (``LigerSwiGLUMLP`` as a model runs it: every
tensor bf16, so Liger rounds silu(g) to bf16 before the product and the
product again, and the GEMMs return bf16): not SPEC's op, expect accuracy
failures; batch invariance and determinism still mean what they say.

Claims no profile (judged by accuracy and gradient within the any-order
bound, determinism, batch and offset-stride invariance, validation).
shared_expert has no padding rows and no clamp.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _swiglu  # noqa: E402
import _upstream  # noqa: E402
from _upstream import bitparity  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

MODE = os.environ.get("LIGER_MLP", "spec")
if MODE not in ("spec", "native"):
    sys.exit("liger_shared_expert: LIGER_MLP=%r: expected spec or native" % (MODE,))


def _load():
    from liger_kernel.ops.swiglu import LigerSiLUMulFunction
    return LigerSiLUMulFunction


LIGER = _upstream.Upstream("liger-kernel", _load)


def silu_mul(g, u):
    fn = LIGER.need()
    _upstream.need_cuda("Liger-Kernel's SwiGLU (Triton)")
    if _upstream.STANDIN:
        return _swiglu.torch_silu_mul(g, u)
    return fn.apply(g, u)


MLP = _swiglu.Mlp(silu_mul=silu_mul, silu_mul_grad=_swiglu.autograd_silu_mul_grad(silu_mul))


def native(case, x):
    f = case.f
    return F.linear(silu_mul(F.linear(x, case.w1[:f]), F.linear(x, case.w1[f:])), case.w2)


def forward(case):
    if MODE == "native":
        with torch.no_grad():
            return native(case, case.x)
    return MLP.forward(case)


def backward(case):
    if MODE == "native":
        x = case.x.detach().requires_grad_(True)
        (dx,) = torch.autograd.grad(native(case, x), x, grad_outputs=case.dy)
        return dx.float()
    return MLP.backward(case)


if __name__ == "__main__":
    bitparity.serve(op="shared_expert", forward=forward, backward=backward, backend="torch")
