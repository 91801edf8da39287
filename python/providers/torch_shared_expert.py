"""The shared-expert SwiGLU MLP (docs/ops/shared_expert.md) on PyTorch's
GEMMs (cuBLAS on a GPU), as a bitparity subject. It claims no profile: cuBLAS
promises no reduction order, so bitparity judges it by accuracy and gradient
within the bound of an unknown summation order, by determinism, batch
invariance, offset/stride invariance and validation; conformance is n/a.

    BITPARITY_DEVICE=cuda bitparity check --op shared_expert \\
        --subject "exec:python3 python/providers/torch_shared_expert.py"

Two formulas (``BITPARITY_TORCH_MLP``):

- ``spec`` (default): the op of docs/ops/shared_expert.md on PyTorch's
  GEMMs: z = x w1^T accumulated and returned in f32 (``torch.mm(...,
  out_dtype=torch.float32)``, the bf16 GEMM with f32 output; on a PyTorch
  without it, an f32 GEMM of the bf16 values, whose products are the same),
  h = bf16(silu(g) u) from f32, y = bf16(h w2^T) from an f32 accumulation;
  the backward as that page writes it (dh = bf16(dy w2), dz = bf16([dgate,
  dup]), dX = dz w1 in f32).
- ``native``: the MLP as PyTorch code writes it in bf16, ``F.linear(F.silu(
  x w_gate^T) * (x w_up^T), w2)``, every intermediate bf16 (cuBLAS's bf16
  GEMMs with bf16 outputs), dX by autograd, returned as f32. Its extra
  roundings are not the op's: expect accuracy failures; batch invariance and
  determinism still mean what they say.

The inputs are read through the case's strided views (x and dy at the
case's offset and row stride, misaligned for offsets 1..3).
"""
import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))
import bitparity  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

MODE = os.environ.get("BITPARITY_TORCH_MLP", "spec")
if MODE not in ("spec", "native"):
    sys.exit(f"torch_shared_expert: BITPARITY_TORCH_MLP={MODE!r}: expected spec or native")


def mm_f32(a, b):
    """a @ b of bf16 matrices, accumulated and returned in f32."""
    try:
        return torch.mm(a, b, out_dtype=torch.float32)
    except (TypeError, RuntimeError):
        # bf16 x bf16 products are exact in f32 (but below 2^-126), so an f32
        # GEMM of the same values computes the same products.
        return torch.mm(a.float(), b.float())


def gate_up(case):
    z = mm_f32(case.x, case.w1.t())
    f = case.f
    return z[:, :f], z[:, f:]


def forward(case):
    if MODE == "native":
        with torch.no_grad():
            f = case.f
            h = F.silu(F.linear(case.x, case.w1[:f])) * F.linear(case.x, case.w1[f:])
            return F.linear(h, case.w2)
    g, u = gate_up(case)
    h = (F.silu(g) * u).to(torch.bfloat16)
    return mm_f32(h, case.w2.t()).to(torch.bfloat16)


def backward(case):
    if MODE == "native":
        f = case.f
        x = case.x.detach().requires_grad_(True)
        h = F.silu(F.linear(x, case.w1[:f])) * F.linear(x, case.w1[f:])
        y = F.linear(h, case.w2)
        (dx,) = torch.autograd.grad(y, x, grad_outputs=case.dy)
        return dx.float()
    g, u = gate_up(case)
    sig = torch.sigmoid(g)
    silu = g * sig
    dh = mm_f32(case.dy, case.w2).to(torch.bfloat16).float()
    dsilu = sig * (1 + g * (1 - sig))
    dz = torch.cat([(dh * u) * dsilu, dh * silu], dim=1).to(torch.bfloat16)
    return mm_f32(dz, case.w1)


if __name__ == "__main__":
    bitparity.serve(op="shared_expert", forward=forward, backward=backward, backend="torch")
