"""SPEC section 5's SwiGLU MLP with its GEMMs and its SwiGLU taken from
elsewhere: the skeleton every third-party ``shared_expert`` provider fills
with the upstream's pieces. It holds only the op's own steps (the split of
z, the two roundings to bf16 that SPEC names, the concatenation of dz), so
that what a provider's rows judge is the upstream's GEMMs or SwiGLU, not
arithmetic of ours.

The pieces (torch tensors, on the case's device):

- ``mm_f32(a, b)``: a @ b of bf16 values, accumulated and returned in f32
  (SPEC's z = x w1^T and dX = dz w1);
- ``mm_bf16(a, b)``: a @ b of bf16 matrices, accumulated in f32 and rounded
  once to bf16 (SPEC's y = bf16(h w2^T) and dh = bf16(dy w2));
- ``silu_mul(g, u)``: (g * sigmoid(g)) * u in f32, T x F;
- ``silu_mul_grad(g, u, dh)``: (dgate, dup) in f32 for dh (f32 holding bf16
  values).

Defaults are PyTorch's (``torch.mm`` on f32 copies, SPEC's formulas in
torch elementwise ops): a provider replaces what its upstream provides.
"""
import torch


def torch_mm_f32(a, b):
    # bf16 x bf16 products are exact in f32 (but below 2^-126), so an f32
    # GEMM of the bf16 values computes SPEC's products.
    return torch.mm(a.float(), b.float())


def torch_mm_bf16(a, b):
    return torch_mm_f32(a, b).to(torch.bfloat16)


def torch_silu_mul(g, u):
    return (g * torch.sigmoid(g)) * u


def torch_silu_mul_grad(g, u, dh):
    sig = torch.sigmoid(g)
    silu = g * sig
    dsilu = sig * (1 + g * (1 - sig))
    return (dh * u) * dsilu, dh * silu


def autograd_silu_mul_grad(fn):
    """silu_mul_grad from a differentiable silu_mul ``fn`` (an upstream
    autograd Function): its own backward, run on leaf copies of g and u."""
    def grad(g, u, dh):
        g = g.detach().clone().requires_grad_(True)
        u = u.detach().clone().requires_grad_(True)
        fn(g, u).backward(dh)
        return g.grad, u.grad
    return grad


class Mlp:
    def __init__(self, mm_f32=torch_mm_f32, mm_bf16=torch_mm_bf16, silu_mul=torch_silu_mul,
                 silu_mul_grad=torch_silu_mul_grad):
        self.mm_f32, self.mm_bf16 = mm_f32, mm_bf16
        self.silu_mul, self.silu_mul_grad = silu_mul, silu_mul_grad

    def gate_up(self, case):
        z = self.mm_f32(case.x, case.w1.t())
        return z[:, :case.f], z[:, case.f:]

    def forward(self, case):
        with torch.no_grad():
            g, u = self.gate_up(case)
            h = self.silu_mul(g, u).to(torch.bfloat16)
            return self.mm_bf16(h, case.w2.t())

    def backward(self, case):
        with torch.no_grad():
            g, u = self.gate_up(case)
            dh = self.mm_bf16(case.dy, case.w2).float()
        dgate, dup = self.silu_mul_grad(g, u, dh)
        with torch.no_grad():
            dz = torch.cat([dgate, dup], dim=1).to(torch.bfloat16)
            return self.mm_f32(dz, case.w1)
