#!/usr/bin/env python3
"""PyTorch's native bf16 SwiGLU MLP (the shared expert of docs/ops/shared_expert.md,
as a user would write it: cuBLAS GEMMs with bf16 outputs, silu and the
product in bf16 tensors), forward and backward of dX only (the weights
frozen), timed with CUDA events three ways in one run: eager, captured in a
CUDA graph, and torch.compile captured in a CUDA graph. The baseline of the
shared-expert speed table (benches/gpu_shared_expert.rs times the strict
kernels on the same shapes).

    z = x @ w1.T (T x 2F); g, u = z[:, :F], z[:, F:]
    y = (silu(g) * u) @ w2.T
    dX = autograd's d(sum(y * dy))/dx

FLOPs: forward 6 T H F, backward 6 T H F (dh 2, dX 4: autograd keeps z).
Each timing spans `--batch` calls back to back (the mean is reported), so
that the host's submission latency of a small graph does not count (as in
benches/gpu_shared_expert.rs); medians of `--iters` timings.

Usage: python3 benches/torch_shared_expert.py [--json PATH] [--iters N]
       [--warmup N] [--batch N] [--shapes T:H:F,...]
"""
import argparse
import json

import torch
import torch.nn.functional as fn

from torch_timing import graphed, median_ms

SHAPES = [(16, 4096, 2048), (256, 4096, 2048), (2048, 4096, 2048), (2048, 7168, 2048)]


def mlp(x, w1, w2):
    f = w2.shape[1]
    z = x @ w1.t()
    return (fn.silu(z[:, :f]) * z[:, f:]) @ w2.t()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--batch", type=int, default=5)
    ap.add_argument("--shapes", help="T:H:F,... (default: %s)" % SHAPES)
    args = ap.parse_args()
    shapes = SHAPES
    if args.shapes:
        shapes = [tuple(int(v) for v in s.split(":")) for s in args.shapes.split(",")]
    dev = "cuda"
    gen = torch.Generator(dev).manual_seed(1)
    rows = []
    for t, h, f in shapes:
        def rand(*shape, scale):
            return ((torch.rand(*shape, device=dev, generator=gen) * 2 - 1) * scale).to(torch.bfloat16)

        x = rand(t, h, scale=2.0).requires_grad_(True)
        w1 = rand(2 * f, h, scale=2.0 / h ** 0.5)
        w2 = rand(h, f, scale=2.0 / f ** 0.5)
        dy = rand(t, h, scale=1.0)

        def fwd():
            with torch.no_grad():
                return mlp(x, w1, w2)

        def fwd_bwd():
            (dx,) = torch.autograd.grad(mlp(x, w1, w2), x, dy)
            return dx

        row = {"t": t, "h": h, "f": f}
        row["eager_fwd_ms"] = median_ms(fwd, args.warmup, args.iters, args.batch)
        row["eager_fwd_bwd_ms"] = median_ms(fwd_bwd, args.warmup, args.iters, args.batch)
        row["graph_fwd_ms"] = median_ms(graphed(fwd, 3), args.warmup, args.iters, args.batch)
        row["graph_fwd_bwd_ms"] = median_ms(graphed(fwd_bwd, 3), args.warmup, args.iters, args.batch)
        try:
            compiled = torch.compile(fwd_bwd)
            row["compile_graph_fwd_bwd_ms"] = median_ms(graphed(compiled, 3), args.warmup, args.iters, args.batch)
        except Exception as ex:  # torch.compile may be unavailable (no Triton): say so
            row["compile_graph_fwd_bwd_ms"] = None
            row["compile_error"] = f"{type(ex).__name__}: {ex}"[:300]
        best = min(v for k, v in row.items() if k.endswith("fwd_bwd_ms") and v is not None)
        row["best_fwd_bwd_ms"] = best
        row["best_fwd_bwd_tflops"] = 12 * t * h * f / (best * 1e-3) / 1e12
        print(json.dumps(row), flush=True)
        rows.append(row)
    out = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "device": torch.cuda.get_device_name(),
        "iters": args.iters,
        "batch": args.batch,
        "rows": rows,
    }
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
