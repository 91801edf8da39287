#!/usr/bin/env bash
# Device run 51 (H200): target/gpu-bundle (its COMMIT): why run 50's build
# is slower than the committed kernels even with clusters of 1. The speed
# table, every kernel with clusters of 1, four builds: as run 50; BP_X_CS1
# (the cluster's size and rank the constants 1 and 0, not read from special
# registers); BP_X_SYNC (__syncthreads at start, not the cluster barrier);
# both (the committed kernels' code but for the boxes of B's NK loads).
# PyTorch once. Outputs in r51/.
set -u
B=target/gpu-bundle
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
S="${OUT:-out}/r51"; mkdir -p "$S"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat $B/COMMIT; date -u; } > "$S/machine.txt"
n=0
for sw in "" "-DBP_X_CS1" "-DBP_X_SYNC" "-DBP_X_CS1 -DBP_X_SYNC"; do
  n=$((n+1)); echo "$sw" > "$S/ours$n.log"
  BITPARITY_NVRTC_EXTRA="-DBP_WG_CLUSTER=1 $sw" timeout -k 5 60 $B/gpu_shared_expert-bench --variant wgmma --table \
    --json "$S/ours$n.json" >> "$S/ours$n.log" 2>&1; echo "exit $?" >> "$S/ours$n.log"
done
timeout -k 5 60 python3 benches/torch_shared_expert.py --json "$S/torch.json" > "$S/torch.log" 2>&1; echo "exit $?" >> "$S/torch.log"
tar -C "$S" -czf "$S/logs.tgz" $(cd "$S" && ls *.log)
for n in 1 2 3 4; do echo "-- [$(head -1 "$S/ours$n.log")]"; grep -h -A5 "T x H x F" "$S/ours$n.log" | head -6; grep -h "exit\|rror" "$S/ours$n.log" | head -3; done
grep -h '^{' "$S/torch.log" | cut -c1-60,200-330
tar -C "$S" -czf "$S/json.tgz" $(cd "$S" && ls *.json 2>/dev/null)
rm -rf "$S"/*.log "$S"/*.json
