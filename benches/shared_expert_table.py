#!/usr/bin/env python3
"""Joins the shared-expert timing files of one GPU run into the speed table
(Markdown).

Usage: python3 benches/shared_expert_table.py shared-expert-ours.json shared-expert-torch.json
ours: benches/gpu_shared_expert.rs (a CUDA subject's kernels graph-replayed,
the strict ones or those of `--variant`, and the cuBLAS subjects launched
back to back); native: benches/torch_shared_expert.py, same run. Milliseconds
of the forward and the backward of dX; the percentage is the fastest native
variant (eager, CUDA graph, torch.compile in a CUDA graph) over ours: 100 %
is as fast as the fastest thing a user would pick. The subject's TFLOP/s
count 12 T H F (a training step that keeps z), whatever it executes.
"""
import json
import sys


def main():
    ours = json.load(open(sys.argv[1]))
    native = json.load(open(sys.argv[2]))
    strict = {(r["t"], r["h"], r["f"]): r for r in ours["rows"]}
    libs = {}
    for r in ours.get("libraries", []):
        libs.setdefault(r["subject"], {})[(r["t"], r["h"], r["f"])] = r
    names = list(libs)
    print(f"Device: {ours['device']}; PyTorch {native['torch']}; medians of CUDA-event timings "
          f"(ours {ours['iters']}, native {native['iters']} of {native['batch']} calls each).\n")
    subject = ours.get("subject", "cuda")
    print("| T x H x F | native eager | native graph | native compile+graph | "
          + " | ".join(f"`{n}`" for n in names) + f" | `{subject}` (graph) | `{subject}` TFLOP/s |")
    print("|---|---:|---:|---:|" + "---:|" * (len(names) + 2))
    for n in native["rows"]:
        key = (n["t"], n["h"], n["f"])
        variants = [n.get("eager_fwd_bwd_ms"), n.get("graph_fwd_bwd_ms"), n.get("compile_graph_fwd_bwd_ms")]
        fastest = min(v for v in variants if v is not None)

        def cell(ms):
            return f"{ms:.4f} ({fastest / ms * 100:.0f}%)" if ms else "-"

        fmt = lambda v: f"{v:.4f}" if v is not None else "-"
        row = [f"{key[0]} x {key[1]} x {key[2]}"] + [fmt(v) for v in variants]
        row += [cell(libs[name].get(key, {}).get("fwd_bwd_ms")) for name in names]
        ms = strict.get(key, {}).get("graph_fwd_bwd_ms")
        row.append(cell(ms))
        row.append(f"{12 * key[0] * key[1] * key[2] / (ms * 1e-3) / 1e12:.0f}" if ms else "-")
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
