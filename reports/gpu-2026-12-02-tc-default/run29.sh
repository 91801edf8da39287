#!/usr/bin/env bash
# Device run 29 (H200), at the bundle's commit: batch invariance and
# determinism of the tensor-core kernels (cuda-tc) and the strict ones
# (cuda) for every T from 1 to 4096 at H = 4096, F = 2048
# (benches/gpu_shared_expert.rs, --sweep-t), the case uploaded once (run 28 uploaded it for every T and ran out of time).
set -u
B=target/gpu-bundle
R=$OUT/r29
mkdir -p "$R"
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; cat $B/COMMIT; date -u; } > "$R/machine.txt"
for v in tc strict; do L=$([ $v = tc ] && echo 100 || echo 150)
  t0=$(date +%s)
  { echo "gpu_shared_expert-bench --variant $v --sweep-t 4096"; date -u
    timeout -s INT -k 10 "$L" $B/gpu_shared_expert-bench --variant $v --sweep-t 4096 2>&1
    echo "rc=$? in $(( $(date +%s) - t0 )) s"; } > "$R/sweep-$v.log" 2>&1
  tail -3 "$R/sweep-$v.log"
done
