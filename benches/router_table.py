#!/usr/bin/env python3
"""Joins the router timing files of one GPU run into the speed table (Markdown).

Usage: python3 benches/router_table.py router-ours.json router-torch.json
ours: benches/gpu_router.rs; native: benches/torch_router.py, same run.
Ratios are native / ours (higher is better for ours), forward + backward, both
sides replayed from CUDA graphs; the headline is against the fastest native
variant measured (eager, CUDA graph, torch.compile in a CUDA graph). Floor =
the bytes our kernels must read and write over the measured copy bandwidth.
"""
import json
import sys


def main():
    ours = json.load(open(sys.argv[1]))
    native = json.load(open(sys.argv[2]))
    by_shape = {(r["t"], r["e"], r["k"]): r for r in native["rows"]}
    bw = ours["copy_bandwidth_bytes_per_s"]
    print(f"Device: {ours['device']}; PyTorch {native['torch']}; copy bandwidth {bw / 1e12:.2f} TB/s (read + write); "
          f"medians of {ours['iters']} CUDA-event timings per figure.\n")
    print("| T x E x k (G, L) | fused loss | ours f+b (graph) | ours f+b (eager) | floor | ours/floor "
          "| native eager | native graph | native compile+graph | fastest native / ours |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in ours["rows"]:
        n = by_shape.get((r["t"], r["e"], r["k"]), {})
        variants = [n.get("eager_fwd_bwd_us"), n.get("graph_fwd_bwd_us"), n.get("compile_graph_fwd_bwd_us")]
        fastest = min([v for v in variants if v is not None], default=None)
        ratio = f"{fastest / r['graph_fwd_bwd_us']:.1f}x" if fastest else "-"
        fmt = lambda v: f"{v:.1f}" if isinstance(v, (int, float)) else "-"
        print(f"| {r['t']} x {r['e']} x {r['k']} ({r['groups']}, {r['topk_groups']}) | {r['fused_loss']} "
              f"| {fmt(r['graph_fwd_bwd_us'])} | {fmt(r['fwd_bwd_us'])} | {fmt(r['floor_fwd_bwd_us'])} "
              f"| {r['graph_fwd_bwd_us'] / r['floor_fwd_bwd_us']:.2f} | {fmt(variants[0])} | {fmt(variants[1])} "
              f"| {fmt(variants[2])} | {ratio} |")


if __name__ == "__main__":
    main()
