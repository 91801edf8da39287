#!/usr/bin/env python3
"""Joins the two timing files of one GPU run into the speed table (Markdown).

Usage: python3 benches/speed_table.py speed-ours.json speed-torch.json
ours: benches/gpu_seqwise_loss.rs; native: benches/torch_seqwise_loss.py.
Ratio = native / ours (higher is better for ours). Floor = bytes the pass must
read and write (scores read once, gradient written once) over the measured
device-to-device copy bandwidth (read + write).
"""
import json
import sys


def main():
    ours = json.load(open(sys.argv[1]))
    torch = json.load(open(sys.argv[2]))
    native = {(r["t"], r["e"], r["k"], r["objective"]): r for r in torch["rows"]}
    bw = ours["copy_bandwidth_bytes_per_s"]
    print(f"Device: {ours['device']} (compute capability {ours['compute_capability']}); "
          f"PyTorch {torch['torch']}; copy bandwidth {bw / 1e12:.2f} TB/s (read + write); "
          f"medians of {ours['iters']} CUDA-event timings after {ours['warmup']} warm-ups, both sides.\n")
    print("| T x E x k | objective | pass | ours (us) | native (us) | native / ours | floor (us) | ours / floor | ours == oracle |")
    print("|---|---|---|---:|---:|---:|---:|---:|---|")
    for r in ours["rows"]:
        key = (r["t"], r["e"], r["k"], r["objective"])
        n = native.get(key)
        for name, field, floor in (("fwd", "fwd_us", "floor_fwd_us"), ("bwd", "bwd_us", "floor_bwd_us"),
                                   ("fwd+bwd", "fwd_bwd_us", "floor_fwd_bwd_us")):
            o = r[field]
            nat = n[field] if n else float("nan")
            fl = r[floor]
            shape = f"{r['t']}x{r['e']}x{r['k']}"
            print(f"| {shape} | {r['objective']} | {name} | {o:.2f} | {nat:.2f} | {nat / o:.1f}x | "
                  f"{fl:.2f} | {o / fl:.2f} | {'yes' if r['conformance'] else 'NO: ' + str(r['mismatch'])} |")


if __name__ == "__main__":
    main()
