#!/usr/bin/env bash
# Device run 53 (H200): which kernels PyTorch (eager and torch.compile)
# runs for the MLP's fwd+bwd at T = 256 and 2048, and each one's GPU time
# (torch_kernels.py, torch.profiler); our kernels at the same shapes in the
# same call (target/gpu-bundle, its COMMIT). Outputs in r53/.
set -u
B=target/gpu-bundle
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
S="${OUT:-out}/r53"; mkdir -p "$S"
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; cat $B/COMMIT; date -u; } > "$S/machine.txt"
timeout -k 5 240 python3 reports/wgmma-2026-12-03/torch_kernels.py 256 2048 > "$S/torch_kernels.log" 2>&1; echo "exit $?" >> "$S/torch_kernels.log"
for T in 256 2048; do
  timeout -k 5 60 $B/gpu_shared_expert-bench --variant wgmma --only $T > "$S/ours-$T.log" 2>&1; echo "exit $?" >> "$S/ours-$T.log"
done
cat "$S/torch_kernels.log" | cut -c1-230
for T in 256 2048; do grep -E "^ +[0-9]+x4096|exit" "$S/ours-$T.log"; done
