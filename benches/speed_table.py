#!/usr/bin/env python3
"""Joins the two seqwise_loss timing files of one GPU run into the speed table
(Markdown), with the columns of benches/router_table.py.

Usage: python3 benches/speed_table.py speed-ours.json speed-torch.json
ours: benches/gpu_seqwise_loss.rs; native: benches/torch_seqwise_loss.py, same
run. Ratios are native / ours (higher is better for ours), forward + backward,
ours replayed from a CUDA graph; the headline is against the fastest native
variant measured (eager, CUDA graph, torch.compile in a CUDA graph). Floor =
the bytes our kernels must read and write over the measured device-to-device
copy bandwidth (read + write). Older files (ours eager only, native eager
only) still read: the missing columns show "-".

A second table compares the steady state: 20 graph replays enqueued back to
back per timing on both sides (ours' graph against native's graph and
torch.compile graph), which leaves out the host's submission latency that a
single event-timed replay includes.
"""
import json
import sys


def num(v):
    return v if isinstance(v, (int, float)) and v == v else None  # None and NaN (null) are no figure


def fmt(v, digits=1):
    v = num(v)
    return f"{v:.{digits}f}" if v is not None else "-"


def main():
    ours = json.load(open(sys.argv[1]))
    native = json.load(open(sys.argv[2]))
    by_shape = {(r["t"], r["e"], r["k"], r["objective"]): r for r in native["rows"]}
    bw = ours["copy_bandwidth_bytes_per_s"]
    print(f"Device: {ours['device']} (compute capability {ours.get('compute_capability', '?')}); "
          f"PyTorch {native['torch']}; copy bandwidth {bw / 1e12:.2f} TB/s (read + write); "
          f"medians of {ours['iters']} CUDA-event timings after {ours.get('warmup', '?')} warm-ups per figure, "
          f"both sides.\n")
    print("| T x E x k | objective | ours f+b (graph) | ours f+b (eager) | floor | ours/floor "
          "| native eager | native graph | native compile+graph | fastest native / ours | ours == oracle |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    notes = []
    for r in ours["rows"]:
        n = by_shape.get((r["t"], r["e"], r["k"], r["objective"]), {})
        variants = [num(n.get("eager_fwd_bwd_us", n.get("fwd_bwd_us"))), num(n.get("graph_fwd_bwd_us")),
                    num(n.get("compile_graph_fwd_bwd_us"))]
        fastest = min([v for v in variants if v is not None], default=None)
        # Ours as it runs in a training step (graph-replayed); an older file
        # has the eager figure only.
        mine = num(r.get("graph_fwd_bwd_us", r.get("fwd_bwd_us")))
        floor = num(r.get("floor_fwd_bwd_us"))
        ratio = f"{fastest / mine:.1f}x" if fastest and mine else "-"
        per_floor = f"{mine / floor:.2f}" if mine and floor else "-"
        ok = "yes" if r["conformance"] else "NO: " + str(r["mismatch"])[:80]
        print(f"| {r['t']} x {r['e']} x {r['k']} | {r['objective']} | {fmt(r.get('graph_fwd_bwd_us'))} "
              f"| {fmt(r.get('fwd_bwd_us'))} | {fmt(floor, 2)} | {per_floor} | {fmt(variants[0])} "
              f"| {fmt(variants[1])} | {fmt(variants[2])} | {ratio} | {ok} |")
        for key in ("graph_error", "compile_error"):
            if n.get(key):
                notes.append(f"- {r['t']} x {r['e']} x {r['k']} {r['objective']}, native {key.split('_')[0]}: "
                             f"{n[key]}")
    print("\nSteady state (20 graph replays back to back per timing, both sides):\n")
    print("| T x E x k | objective | ours f+b | ours/floor | native graph | native compile+graph "
          "| fastest native / ours |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for r in ours["rows"]:
        n = by_shape.get((r["t"], r["e"], r["k"], r["objective"]), {})
        mine = num(r.get("graph_steady_fwd_bwd_us"))
        floor = num(r.get("floor_fwd_bwd_us"))
        steady = [num(n.get("graph_steady_fwd_bwd_us")), num(n.get("compile_graph_steady_fwd_bwd_us"))]
        fastest = min([v for v in steady if v is not None], default=None)
        ratio = f"{fastest / mine:.1f}x" if fastest and mine else "-"
        per_floor = f"{mine / floor:.2f}" if mine and floor else "-"
        print(f"| {r['t']} x {r['e']} x {r['k']} | {r['objective']} | {fmt(mine)} | {per_floor} "
              f"| {fmt(steady[0])} | {fmt(steady[1])} | {ratio} |")
    if notes:
        print("\nNative variants that did not run (the fastest is taken over those that did):\n")
        print("\n".join(notes))


if __name__ == "__main__":
    main()
