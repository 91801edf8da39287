"""CUDA-event timing shared by the PyTorch baselines (benches/torch_*.py)."""
import statistics

import torch


def median_ms(call, warmup, iters, batch=1):
    """Median over `iters` timings of `batch` calls back to back (their mean,
    in milliseconds), after `warmup` untimed calls. With batch > 1 the host's
    submission latency of a small graph does not count."""
    for _ in range(warmup):
        call()
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(iters):
        start.record()
        for _ in range(batch):
            call()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / batch)
    return statistics.median(times)


def graphed(call, warmup):
    """call captured in a CUDA graph (after warm-up on a side stream), as
    torch.cuda.graphs documents; returns the replay."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(warmup):
            call()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        call()
    return g.replay
