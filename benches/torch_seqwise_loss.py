#!/usr/bin/env python3
"""Native PyTorch eager seqwise_loss (SPEC section 3), timed with CUDA events.

The baseline of the speed table: the loss as PyTorch code writes it
(TorchTitan's DeepSeek-V3 style): F.normalize / topk / scatter / sums in
eager mode, and autograd for the backward. Same shapes, objectives and
iteration counts as benches/gpu_seqwise_loss.rs; scores in (0, 1].

Usage: python3 benches/torch_seqwise_loss.py [--json PATH] [--iters N] [--warmup N]
"""
import argparse
import json
import statistics

import torch
import torch.nn.functional as F

SHAPES = [(8193, 64, 6), (4097, 512, 8), (33, 129, 8), (4096, 256, 8), (65536, 256, 8)]


def loss_topk(s, k):
    """UnbiasedTopK: the map is the top-k of the scores; rows over sum + 1e-20."""
    t, e = s.shape
    idx = torch.topk(s.detach(), k, dim=-1).indices
    m = torch.zeros(t, e, dtype=torch.bool, device=s.device).scatter_(1, idx, True)
    counts = m.sum(0)
    c = counts.sum()
    f = counts.float() / torch.clamp(c.float(), min=1e-12) * e
    p = s / (s.sum(-1, keepdim=True) + 1e-20)
    return (f * p.sum(0)).sum()


def loss_map(s, m):
    """ProvidedMap: the router's map; rows L1-normalised (F.normalize, eps 1e-12)."""
    e = s.shape[1]
    counts = m.sum(0)
    c = counts.sum()
    f = counts.float() / torch.clamp(c.float(), min=1e-12) * e
    p = F.normalize(s, p=1.0, dim=-1, eps=1e-12)
    return (f * p.sum(0)).sum()


def median_us(fn, warmup, iters, setup=None):
    for _ in range(warmup):
        if setup:
            setup()
        fn()
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(iters):
        if setup:
            setup()
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000.0)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    a = ap.parse_args()
    dev = torch.device("cuda")
    torch.manual_seed(0)
    rows = []
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}")
    print(f"{'T x E x k':>18} {'obj':>6} {'fwd us':>10} {'bwd us':>10} {'f+b us':>10}")
    for t, e, k in SHAPES:
        base = (torch.rand(t, e, device=dev) * (1 - 2**-24) + 2**-24).float()
        idx = torch.topk(base, k, dim=-1).indices
        m = torch.zeros(t, e, dtype=torch.bool, device=dev).scatter_(1, idx, True)
        for obj in ("topk", "map"):
            s = base.clone().requires_grad_(True)
            fwd = (lambda: loss_topk(s, k)) if obj == "topk" else (lambda: loss_map(s, m))
            holder = {}

            def run_fwd():
                holder["loss"] = fwd()

            def prep_bwd():
                s.grad = None
                holder["loss"] = fwd()

            def run_bwd():
                holder["loss"].backward()

            def run_both():
                s.grad = None
                fwd().backward()

            with torch.no_grad():
                t_fwd_nograd = median_us(lambda: fwd(), a.warmup, a.iters)
            t_fwd = median_us(run_fwd, a.warmup, a.iters)
            t_bwd = median_us(run_bwd, a.warmup, a.iters, setup=prep_bwd)
            t_both = median_us(run_both, a.warmup, a.iters)
            print(f"{f'{t}x{e}x{k}':>18} {obj:>6} {t_fwd:>10.2f} {t_bwd:>10.2f} {t_both:>10.2f}")
            rows.append({"t": t, "e": e, "k": k, "objective": obj, "fwd_us": t_fwd,
                         "fwd_nograd_us": t_fwd_nograd, "bwd_us": t_bwd, "fwd_bwd_us": t_both})
    out = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0),
           "iters": a.iters, "warmup": a.warmup, "rows": rows}
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(out, fh, indent=2)


if __name__ == "__main__":
    main()
