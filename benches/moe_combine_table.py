#!/usr/bin/env python3
"""Joins the moe_combine timing files of one GPU run into the speed table
(Markdown).

Usage: python3 benches/moe_combine_table.py moe-combine-ours.json moe-combine-torch.json
ours: benches/gpu_moe_combine.rs; native: benches/torch_moe_combine.py, same
run. Ratios are native / ours (higher is better for ours), forward +
backward, replayed from CUDA graphs. Ours includes the dispatch (once in the
forward, once in the backward); native's graphs cannot hold its dispatch
(data-dependent sizes), so the native figures leave it out and its eager
dispatch is shown apart: the ratio favours PyTorch. Floor = the bytes our
kernels move (f32 words) over the measured copy bandwidth.
"""
import json
import sys


def fmt(v):
    return f"{v:.1f}" if isinstance(v, (int, float)) else "-"


def main():
    ours = json.load(open(sys.argv[1]))
    native = json.load(open(sys.argv[2]))
    by_shape = {(r["t"], r["h"], r["e"], r["k"]): r for r in native["rows"]}
    bw = ours["copy_bandwidth_bytes_per_s"]
    print(f"Device: {ours['device']}; PyTorch {native['torch']} on {native['device']}; copy bandwidth "
          f"{bw / 1e12:.2f} TB/s (read + write); medians of {ours['iters']} CUDA-event timings per figure (us).\n")
    print("| T x H x E x k | kernel | ours dispatch | ours f+b (graph) | floor | native dispatch (eager) "
          "| native f+b eager | native f+b graph | native f+b compile+graph | fastest native / ours |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in ours["rows"]:
        n = by_shape.get((r["t"], r["h"], r["e"], r["k"]), {})
        variants = [n.get("eager_fwd_bwd_us"), n.get("graph_fwd_bwd_us"), n.get("compile_graph_fwd_bwd_us")]
        fastest = min([v for v in variants if v is not None], default=None)
        mine = r["graph_fwd_bwd_us"]
        ratio = f"{fastest / mine:.2f}x" if fastest and mine == mine else "-"
        print(f"| {r['t']} x {r['h']} x {r['e']} x {r['k']} | {r['kernel']} | {fmt(r['dispatch_us'])} | {fmt(mine)} "
              f"| {fmt(r['floor_fwd_bwd_us'])} | {fmt(n.get('eager_dispatch_us'))} | {fmt(variants[0])} "
              f"| {fmt(variants[1])} | {fmt(variants[2])} | {ratio} |")


if __name__ == "__main__":
    main()
