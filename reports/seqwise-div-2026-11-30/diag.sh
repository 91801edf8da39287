#!/usr/bin/env bash
# Diagnostics for the seqwise_loss kernels: registers/spills, per-kernel times (ncu), torch topk capture.
set -u
B=target/gpu-bundle
O=${OUT:-/tmp/out}; mkdir -p $O
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib:${LD_LIBRARY_PATH:-}
{
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
for V in 1 2 4 8 16 32; do :; done
/usr/local/cuda/bin/nvcc -arch=sm_90 -Xptxas -v -c -o /tmp/s.o -Ikernels kernels/seqwise_loss.cu 2>&1 | grep -E "Compiling|registers|spill|stack" 
} > $O/ptxas.txt 2>&1
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu=$NCU" > $O/ncu.txt
for shape in 4096x256x8 65536x256x8 33x129x8; do
 for obj in map topk; do
  echo "== $shape $obj" >> $O/ncu.txt
  timeout 120 $NCU --clock-control none -k regex:seqwise --launch-skip 12 --launch-count 3 \
   --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,launch__grid_size,smsp__inst_executed.sum \
   $B/gpu_seqwise_loss-bench --only $shape --objective $obj --iters 3 --warmup 2 2>&1 | grep -E "seqwise_|duration|throughput|registers|warps_active|grid_size|inst_executed" >> $O/ncu.txt
 done
done
cat > /tmp/topk.py <<'PY'
import torch, traceback, statistics
s = torch.rand(4096, 256, device="cuda")
def f():
    return torch.topk(s, 8, dim=-1).indices
for mode in ("global", "thread_local", "relaxed"):
    try:
        st = torch.cuda.Stream(); st.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(st):
            for _ in range(3): f()
        torch.cuda.current_stream().wait_stream(st)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, capture_error_mode=mode):
            out = f()
        g.replay(); torch.cuda.synchronize()
        print(mode, "OK", bool((out == f()).all()))
    except Exception:
        print(mode, "FAILED"); traceback.print_exc()
        try: torch.cuda.synchronize()
        except Exception as e: print("sync", e)
# the timing floor: an event-timed replay of a graph of n tiny kernels
x = torch.zeros(1, device="cuda")
for n in (1, 2, 3):
    g = torch.cuda.CUDAGraph()
    st = torch.cuda.Stream(); st.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(st): x.add_(1)
    torch.cuda.current_stream().wait_stream(st)
    with torch.cuda.graph(g):
        for _ in range(n): x.add_(1)
    a = torch.cuda.Event(enable_timing=True); b = torch.cuda.Event(enable_timing=True)
    ts = []
    for i in range(220):
        a.record(); g.replay(); b.record(); b.synchronize()
        if i >= 20: ts.append(a.elapsed_time(b) * 1000)
    print(f"graph of {n} tiny kernels: median {statistics.median(ts):.2f} us")
PY
timeout 120 python3 /tmp/topk.py > $O/topk.txt 2>&1
echo done
