#!/usr/bin/env python3
"""Which kernels PyTorch runs for the shared-expert MLP's fwd+bwd (eager and
torch.compile, as benches/torch_shared_expert.py times them) and how long
each takes on the GPU (torch.profiler, CUDA activity): the cuBLAS kernels'
names carry their tile, cluster and split-K. Usage: torch_kernels.py T..."""
import sys

import torch
import torch.nn.functional as fn
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, "benches")
from torch_shared_expert import mlp  # noqa: E402

H, F = 4096, 2048
for t in [int(a) for a in sys.argv[1:]] or [256, 2048]:
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

    for name, call in [("eager", fwd_bwd), ("compile", torch.compile(fwd_bwd))]:
        for _ in range(5):
            call()
        torch.cuda.synchronize()
        n = 20
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(n):
                call()
            torch.cuda.synchronize()
        print(f"== T={t} {name}: kernels per call, mean us (of {n} calls)")
        tot = 0.0
        for e in prof.key_averages():
            if e.device_type.name != "CUDA" or e.count < n:
                continue
            us = e.device_time_total / n
            tot += us
            print(f"  {e.count // n:2d}x {us:8.2f} us  {e.key[:200]}")
        print(f"  total {tot:.2f} us")
