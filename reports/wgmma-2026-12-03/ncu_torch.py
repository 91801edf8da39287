#!/usr/bin/env python3
"""The shared-expert MLP's fwd+bwd under torch.compile (no graph: the same
kernels, each visible to a profiler), called 12 times at T, for Nsight
Compute to read the cuBLAS kernels' counters (run57.sh). Usage:
ncu_torch.py T"""
import sys

import torch

sys.path.insert(0, "benches")
from torch_shared_expert import mlp  # noqa: E402

H, F = 4096, 2048
t = int(sys.argv[1]) if len(sys.argv) > 1 else 256
gen = torch.Generator("cuda").manual_seed(1)


def rand(*shape, scale):
    return ((torch.rand(*shape, device="cuda", generator=gen) * 2 - 1) * scale).to(torch.bfloat16)


x = rand(t, H, scale=2.0).requires_grad_(True)
w1 = rand(2 * F, H, scale=2.0 / H ** 0.5)
w2 = rand(H, F, scale=2.0 / F ** 0.5)
dy = rand(t, H, scale=1.0)


def fwd_bwd():
    (dx,) = torch.autograd.grad(mlp(x, w1, w2), x, dy)
    return dx


call = torch.compile(fwd_bwd)
for _ in range(12):
    call()
torch.cuda.synchronize()
print("done")
