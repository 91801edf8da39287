#!/usr/bin/env python3
"""PyTorch's MoE combine as users write it (index_add_ of the weighted
expert outputs, python/providers/torch_moe_combine.py), timed with CUDA
events in one run on the shapes of benches/gpu_moe_combine.rs, three ways:
eager, captured in a CUDA graph, and torch.compile captured in a CUDA graph.

The dispatch (a sort of the expert ids, bincount, cumsum, a boolean mask)
has outputs whose size depends on the data, so it cannot be captured; it is
timed eager (`dispatch`), and the combine's forward and backward are timed
given its slots, with bf16 x and x_exp as a model holds them:

  forward:  x_disp = x[token_of_slot];
            y = zeros(T, H).index_add_(0, token_of_slot, w_of_slot[:, None] * x_exp)
  backward: autograd's of y (gradient dy) and x_disp (gradient g_disp):
            dx_exp, dw (a dot over H per slot, gathered back to T x k), dx
            (an index_add_ of g_disp).

Usage: python3 benches/torch_moe_combine.py [--json PATH] [--iters N] [--warmup N]
"""
import argparse
import json

import torch

from torch_timing import graphed, median_ms

# (T, H, E, k), as benches/gpu_moe_combine.rs.
SHAPES = [(4096, 7168, 256, 8), (8192, 2048, 128, 8), (8192, 4096, 8, 2)]


def dispatch(ids, e):
    """token_of_slot and choice_of_slot in the op's slot order (by expert,
    then token, then choice): a stable sort of the flattened ids."""
    t, k = ids.shape
    _, order = torch.sort(ids.reshape(-1), stable=True)
    return torch.div(order, k, rounding_mode="floor"), order


def combine(x, x_exp, weights, token_of_slot, choice_of_slot, t):
    x_disp = x[token_of_slot]
    w_of_slot = weights.reshape(-1)[choice_of_slot]
    y = torch.zeros(t, x.shape[1], dtype=torch.float32, device=x.device)
    return x_disp, y.index_add_(0, token_of_slot, w_of_slot[:, None] * x_exp)


def median_us(fn, warmup, iters):
    return median_ms(fn, warmup, iters) * 1000.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    args = ap.parse_args()
    dev = "cuda"
    gen = torch.Generator(dev).manual_seed(1)
    rows = []
    for t, h, e, k in SHAPES:
        ids = torch.rand(t, e, device=dev, generator=gen).argsort(dim=1)[:, :k].contiguous()
        weights = torch.rand(t, k, device=dev, generator=gen)
        x = (torch.rand(t, h, device=dev, generator=gen) * 4 - 2).bfloat16()
        x_exp = (torch.rand(t * k, h, device=dev, generator=gen) * 4 - 2).bfloat16()
        dy = torch.rand(t, h, device=dev, generator=gen) * 2 - 1
        g_disp = torch.rand(t * k, h, device=dev, generator=gen, dtype=torch.float32).bfloat16() * 2 - 1
        token_of_slot, choice_of_slot = dispatch(ids, e)
        xg = x.clone().requires_grad_(True)
        xeg = x_exp.clone().requires_grad_(True)
        wg = weights.clone().requires_grad_(True)

        def fwd():
            return combine(x, x_exp, weights, token_of_slot, choice_of_slot, t)

        def fwd_bwd():
            x_disp, y = combine(xg, xeg, wg, token_of_slot, choice_of_slot, t)
            return torch.autograd.grad([y, x_disp], [xeg, wg, xg], [dy, g_disp])

        row = {"t": t, "h": h, "e": e, "k": k}
        row["eager_dispatch_us"] = median_us(lambda: dispatch(ids, e), args.warmup, args.iters)
        row["eager_fwd_us"] = median_us(fwd, args.warmup, args.iters)
        row["eager_fwd_bwd_us"] = median_us(fwd_bwd, args.warmup, args.iters)
        row["graph_fwd_us"] = median_us(graphed(fwd, 3), args.warmup, args.iters)
        row["graph_fwd_bwd_us"] = median_us(graphed(fwd_bwd, 3), args.warmup, args.iters)
        try:
            row["compile_graph_fwd_us"] = median_us(graphed(torch.compile(fwd), 3), args.warmup, args.iters)
            row["compile_graph_fwd_bwd_us"] = median_us(graphed(torch.compile(fwd_bwd), 3), args.warmup, args.iters)
        except Exception as ex:  # torch.compile may be unavailable (no Triton): say so
            row.setdefault("compile_graph_fwd_us", None)
            row["compile_graph_fwd_bwd_us"] = None
            row["compile_error"] = f"{type(ex).__name__}: {ex}"[:300]
        print(json.dumps(row), flush=True)
        rows.append(row)
        del x_exp, xeg, g_disp
        torch.cuda.empty_cache()
    out = {"torch": torch.__version__, "device": torch.cuda.get_device_name(), "iters": args.iters, "rows": rows}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
