#!/usr/bin/env python3
"""PyTorch's DeepSeek-V3 router (TorchTitan's formula after the gate matmul),
forward and backward, timed with CUDA events three ways in one run: eager,
captured in a CUDA graph, and torch.compile captured in a CUDA graph. The
baseline of the router speed table (benches/gpu_router.rs times ours on the
same shapes, logits and gradients).

The formula: s = sigmoid(x) in f32; u = s + bias; group scores = the sum of
each group's two largest u; the L best groups kept (the others masked with
-inf); the k largest u among them; weights = s at those experts, divided by
their sum + 1e-20, times route_scale; the backward is autograd's, for
d(sum(gw * weights))/dx.

Usage: python3 benches/torch_router.py [--json PATH] [--iters N] [--warmup N]
"""
import argparse
import json

import torch

from torch_timing import graphed, median_ms

SHAPES = [(4096, 256, 8, 4, 8), (65536, 256, 8, 4, 8), (4096, 160, 8, 3, 6)]


def router(x, bias, groups, topk_groups, k, route_scale=2.5):
    t, e = x.shape
    s = torch.sigmoid(x.float())
    u = (s + bias).view(t, groups, e // groups)
    group_scores = u.topk(2, dim=-1).values.sum(dim=-1)
    kept = group_scores.topk(topk_groups, dim=-1, sorted=False).indices
    mask = torch.zeros_like(group_scores, dtype=torch.bool).scatter_(1, kept, True)
    u = u.masked_fill(~mask.unsqueeze(-1), float("-inf")).view(t, e)
    ids = u.topk(k, dim=-1, sorted=False).indices
    w = s.gather(1, ids)
    w = w / (w.sum(dim=-1, keepdim=True) + 1e-20)
    return w * route_scale, ids


def lcg(n, seed, scale, shift, device):
    """The bench's values: the same 64-bit LCG as benches/gpu_router.rs."""
    mask = (1 << 64) - 1
    x = (seed * 0x9E3779B97F4A7C15) & mask | 1
    out = []
    for _ in range(n):
        x = (x * 6364136223846793005 + 1442695040888963407) & mask
        out.append((x >> 40) / float(1 << 24) * scale + shift)
    return torch.tensor(out, dtype=torch.float32, device=device)


def median_us(fn, warmup, iters):
    return median_ms(fn, warmup, iters) * 1000.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    args = ap.parse_args()
    dev = "cuda"
    rows = []
    for t, e, g, l, k in SHAPES:
        x0 = lcg(t * e, 1, 8.0, -4.0, "cpu").view(t, e).to(dev) if t * e <= 1 << 20 else (
            torch.rand(t, e, device=dev, generator=torch.Generator(dev).manual_seed(1)) * 8.0 - 4.0)
        bias = lcg(e, 2, 0.02, -0.01, dev)
        gw = lcg(t * k, 3, 2.0, -1.0, "cpu").view(t, k).to(dev) if t * k <= 1 << 20 else (
            torch.rand(t, k, device=dev) * 2.0 - 1.0)
        x = x0.clone().requires_grad_(True)

        def fwd():
            return router(x, bias, g, l, k)

        def fwd_bwd():
            w, _ = router(x, bias, g, l, k)
            (gx,) = torch.autograd.grad(w, x, gw)
            return gx

        compiled = torch.compile(fwd_bwd)
        row = {"t": t, "e": e, "k": k, "groups": g, "topk_groups": l}
        row["eager_fwd_us"] = median_us(fwd, args.warmup, args.iters)
        row["eager_fwd_bwd_us"] = median_us(fwd_bwd, args.warmup, args.iters)
        row["graph_fwd_us"] = median_us(graphed(fwd, 3), args.warmup, args.iters)
        row["graph_fwd_bwd_us"] = median_us(graphed(fwd_bwd, 3), args.warmup, args.iters)
        try:
            row["compile_graph_fwd_bwd_us"] = median_us(graphed(compiled, 3), args.warmup, args.iters)
        except Exception as ex:  # torch.compile may be unavailable (no Triton): say so
            row["compile_graph_fwd_bwd_us"] = None
            row["compile_error"] = f"{type(ex).__name__}: {ex}"[:300]
        print(json.dumps(row))
        rows.append(row)
    out = {"torch": torch.__version__, "device": torch.cuda.get_device_name(), "iters": args.iters, "rows": rows}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
