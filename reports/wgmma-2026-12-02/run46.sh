#!/usr/bin/env bash
# Device run 46 (H200): target/gpu-bundle (its COMMIT: 7041651, run 44's
# kernels). Run 44 timed each side once; timings of both move by about 4 %
# from run to run. Here the speed table and PyTorch alternate, three times
# each, in one call, so that each ratio pairs timings taken next to each
# other. Outputs in r46/.
set -u
B=target/gpu-bundle
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
S="${OUT:-out}/r46"; mkdir -p "$S"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat $B/COMMIT; date -u; } > "$S/machine.txt"
for k in 1 2 3; do
  timeout -k 5 90 $B/gpu_shared_expert-bench --variant wgmma --table --json "$S/ours$k.json" > "$S/ours$k.log" 2>&1; echo "exit $?" >> "$S/ours$k.log"
  timeout -k 5 60 python3 benches/torch_shared_expert.py --json "$S/torch$k.json" > "$S/torch$k.log" 2>&1; echo "exit $?" >> "$S/torch$k.log"
done
tar -C "$S" -czf "$S/logs.tgz" $(cd "$S" && ls *.log)
for k in 1 2 3; do echo "-- $k"; grep -h -A5 "T x H x F" "$S/ours$k.log" | head -6; grep -h '^{' "$S/torch$k.log" | cut -c1-60,200-330; done
tar -C "$S" -czf "$S/json.tgz" $(cd "$S" && ls *.json)
rm -rf "$S"/*.log "$S"/*.json
