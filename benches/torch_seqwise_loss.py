#!/usr/bin/env python3
"""Native PyTorch seqwise_loss (docs/ops/seqwise_loss.md), timed three ways in one run.

The baseline of the speed table: the loss as PyTorch code writes it
(TorchTitan's DeepSeek-V3 style): F.normalize / topk / scatter / sums, and
autograd for the backward, timed with CUDA events (medians of many):

  eager           launched op by op;
  graph           captured in a CUDA graph (torch.cuda.graphs, static inputs,
                  the autograd backward inside the captured region, as
                  benches/torch_router.py does) and replayed;
  compile+graph   the loss through torch.compile (default mode, as
                  torch_router.py), its AOTAutograd backward through
                  torch.autograd.grad, captured in a CUDA graph and replayed.

Where a variant fails (no Triton for torch.compile, a capture error), the
row records why (`graph_error`, `compile_error`) and the run goes on. Same
shapes, objectives (top-k, provided map) and iteration counts as
benches/gpu_seqwise_loss.rs; scores in (0, 1]. benches/speed_table.py joins
the two JSON files; its headline is the fastest native variant over ours.

Usage: python3 benches/torch_seqwise_loss.py [--json PATH] [--iters N] [--warmup N]
       [--device cuda|cpu] [--only TxExk]
--device cpu is a dry run of the script's logic (host timer; graphs and
compile skipped, with the reason): its numbers are no baseline.
"""
import argparse
import json
import statistics
import time
import traceback

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


# Graph replays enqueued back to back per steady-state timing (as
# benches/gpu_seqwise_loss.rs's STEADY_BATCH).
STEADY_BATCH = 20


def median_us(fn, warmup, iters, cuda, setup=None, batch=1):
    """Median microseconds of fn: CUDA events on the GPU, the host clock
    (after a synchronisation) on the CPU dry run. With batch > 1 each timing
    spans that many calls back to back and reports their mean: the GPU's own
    time per call, without the host's submission latency that a single
    event-timed replay includes."""
    for _ in range(warmup):
        if setup:
            setup()
        fn()
    if cuda:
        torch.cuda.synchronize()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(iters):
        if setup:
            setup()
        if cuda:
            start.record()
            for _ in range(batch):
                fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1000.0 / batch)
        else:
            t0 = time.perf_counter()
            for _ in range(batch):
                fn()
            times.append((time.perf_counter() - t0) * 1e6 / batch)
    return statistics.median(times)


def graphed(fn, warmup):
    """fn captured in a CUDA graph (after warm-up on a side stream), as
    torch.cuda.graphs documents; returns (replay, the static outputs)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = fn()
    return g.replay, out


def max_diff(a, b):
    """Largest |a - b| over the outputs (loss, and gradient where given)."""
    return max(float((x.detach() - y.detach()).abs().max()) for x, y in zip(a, b))


def time_variant(row, prefix, fwd, fwd_bwd, ref, a, cuda):
    """Times fwd and fwd_bwd captured in CUDA graphs as row[prefix_fwd_us]
    and row[prefix_fwd_bwd_us]; the replayed outputs are compared with eager
    (row[prefix_max_abs_diff]). A failure is recorded, never raised."""
    key = prefix.split("_")[0] + "_error"
    try:
        replay_f, out_f = graphed(fwd, 3)
        row[f"{prefix}_fwd_us"] = median_us(replay_f, a.warmup, a.iters, cuda)
        replay_fb, out_fb = graphed(fwd_bwd, 3)
        row[f"{prefix}_fwd_bwd_us"] = median_us(replay_fb, a.warmup, a.iters, cuda)
        row[f"{prefix}_steady_fwd_bwd_us"] = median_us(replay_fb, a.warmup, a.iters, cuda, batch=STEADY_BATCH)
        replay_fb()
        torch.cuda.synchronize()
        row[f"{prefix}_max_abs_diff"] = max(max_diff((out_f,), (ref[0],)), max_diff(out_fb, ref))
    except Exception as ex:  # noqa: BLE001 - any failure is a recorded result
        row[f"{prefix}_fwd_us"] = row.get(f"{prefix}_fwd_us")
        row[f"{prefix}_fwd_bwd_us"] = None
        row[key] = f"{type(ex).__name__}: {ex}"[:300]
        print(f"  {prefix} failed: {row[key]}")
        traceback.print_exc()
        try:
            torch.cuda.synchronize()
        except Exception as sync_ex:  # noqa: BLE001 - a broken context shows in the next variant too
            print(f"  after the failure: {type(sync_ex).__name__}: {sync_ex}"[:300])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--only", help="one shape, TxExk")
    a = ap.parse_args()
    cuda = a.device == "cuda"
    if cuda and not torch.cuda.is_available():
        raise SystemExit("torch_seqwise_loss: no CUDA device visible to PyTorch (use --device cpu for a dry run)")
    dev = torch.device(a.device)
    name = torch.cuda.get_device_name(0) if cuda else "cpu (dry run)"
    torch.manual_seed(0)
    rows = []
    print(f"torch {torch.__version__} on {name}")
    print(f"{'T x E x k':>16} {'obj':>5} {'fwd us':>9} {'bwd us':>9} {'f+b us':>9} {'graph f+b':>10} {'comp f+b':>10}")
    for t, e, k in SHAPES:
        # The draw of every shape's scores happens whether or not --only
        # selects it, so a narrowed run times the same values.
        base = (torch.rand(t, e, device=dev) * (1 - 2**-24) + 2**-24).float()
        if a.only and a.only != f"{t}x{e}x{k}":
            continue
        idx = torch.topk(base, k, dim=-1).indices
        m = torch.zeros(t, e, dtype=torch.bool, device=dev).scatter_(1, idx, True)
        for obj in ("topk", "map"):
            s = base.clone().requires_grad_(True)

            def make(loss_fn, leaf):
                fwd = (lambda: loss_fn(leaf, k)) if obj == "topk" else (lambda: loss_fn(leaf, m))

                def fwd_bwd():
                    loss = fwd()
                    (gs,) = torch.autograd.grad(loss, leaf)
                    return loss, gs

                return fwd, fwd_bwd

            fwd, fwd_bwd = make(loss_topk if obj == "topk" else loss_map, s)
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

            row = {"t": t, "e": e, "k": k, "objective": obj}
            with torch.no_grad():
                row["fwd_nograd_us"] = median_us(lambda: fwd(), a.warmup, a.iters, cuda)
            row["fwd_us"] = median_us(run_fwd, a.warmup, a.iters, cuda)
            row["bwd_us"] = median_us(run_bwd, a.warmup, a.iters, cuda, setup=prep_bwd)
            row["fwd_bwd_us"] = median_us(run_both, a.warmup, a.iters, cuda)
            # The router table's names for the same eager figures.
            row["eager_fwd_us"], row["eager_fwd_bwd_us"] = row["fwd_us"], row["fwd_bwd_us"]
            ref = fwd_bwd()
            holder.clear()
            if cuda:
                # The captured variants get a leaf of their own, untouched by
                # the eager timings' .backward() (whose autograd state broke
                # the top-k capture in an earlier run).
                sg = base.clone().requires_grad_(True)
                gfwd, gfwd_bwd = make(loss_topk if obj == "topk" else loss_map, sg)
                time_variant(row, "graph", gfwd, gfwd_bwd, ref, a, cuda)
                try:
                    # One fresh compilation per shape and objective: static
                    # shapes, and no recompilation limit reached.
                    torch._dynamo.reset()
                    compiled = torch.compile(loss_topk if obj == "topk" else loss_map)
                    cfwd, cfwd_bwd = make(compiled, sg)
                    cfwd_bwd()  # compiles outside the capture; errors land here
                    torch.cuda.synchronize()
                    time_variant(row, "compile_graph", cfwd, cfwd_bwd, ref, a, cuda)
                except Exception as ex:  # noqa: BLE001 - torch.compile may be unavailable (no Triton): say so
                    row["compile_graph_fwd_us"] = row["compile_graph_fwd_bwd_us"] = None
                    row["compile_error"] = f"{type(ex).__name__}: {ex}"[:300]
                    print(f"  compile failed: {row['compile_error']}")
            else:
                why = "CPU dry run: no CUDA graphs"
                row["graph_fwd_us"] = row["graph_fwd_bwd_us"] = None
                row["compile_graph_fwd_us"] = row["compile_graph_fwd_bwd_us"] = None
                row["graph_error"] = row["compile_error"] = why
            fmt = lambda v: f"{v:.2f}" if isinstance(v, (int, float)) else "-"  # noqa: E731
            print(f"{f'{t}x{e}x{k}':>16} {obj:>5} {fmt(row['fwd_us']):>9} {fmt(row['bwd_us']):>9} "
                  f"{fmt(row['fwd_bwd_us']):>9} {fmt(row['graph_fwd_bwd_us']):>10} "
                  f"{fmt(row['compile_graph_fwd_bwd_us']):>10}")
            rows.append(row)
    out = {"torch": torch.__version__, "device": name, "iters": a.iters, "warmup": a.warmup, "rows": rows}
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(out, fh, indent=2)


if __name__ == "__main__":
    main()
