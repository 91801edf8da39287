#!/usr/bin/env bash
# Device run 38 (H200): target/gpu-bundle (its COMMIT): run 37's kernels with
# the new tile rule (the tile whose busiest multiprocessor finishes first).
# 300 tier A cases; the speed table (automatic tiles, per-step times) with
# PyTorch in the same run; the sweep over T = 1..4096; then the per-step
# times with every launch forced onto one tile (BITPARITY_TILES=large, then
# small), and the GPU test suite if time is left. Outputs in r38/.
set -u
B=target/gpu-bundle
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
S="${OUT:-out}/r38"; mkdir -p "$S"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat $B/COMMIT; date -u; } > "$S/machine.txt"
T0=$(date +%s)
bench() { # NAME
  timeout -k 5 90 $B/gpu_shared_expert-bench --variant wgmma --table --json "$S/$1.json" > "$S/$1.log" 2>&1
  echo "exit $?" >> "$S/$1.log"
}
timeout -k 5 -s INT 60 $B/bitparity check --op shared_expert --subject cuda-wgmma --quiet --cases 300 --seed 390 \
  --json "$S/smoke.json" --corpus "$S/corpus" > "$S/smoke.log" 2>&1; echo "exit $?" >> "$S/smoke.log"
bench ours
timeout -k 5 60 python3 benches/torch_shared_expert.py --json "$S/torch.json" > "$S/torch.log" 2>&1; echo "exit $?" >> "$S/torch.log"
t0=$(date +%s); timeout -k 5 -s INT 60 $B/gpu_shared_expert-bench --variant wgmma --sweep-t 4096 > "$S/sweep.log" 2>&1; echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/sweep.log"
BITPARITY_TILES=large bench tiles-large
BITPARITY_TILES=small bench tiles-small
if [ $(( $(date +%s) - T0 )) -lt 250 ]; then
  t0=$(date +%s); timeout -k 5 150 $B/gpu-test > "$S/gpu-test.log" 2>&1; echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/gpu-test.log"
fi
tar -C "$S" -czf "$S/logs.tgz" $(cd "$S" && ls *.log)
grep -h "passed\|failed\|exit" "$S/smoke.log" | head -3
for f in ours tiles-large tiles-small; do echo "-- $f"; grep -h -A5 "T x H x F" "$S/$f.log" | head -6; done
grep -h '^{' "$S/torch.log"
tail -2 "$S/sweep.log"
grep -E "test result|FAILED|panicked|exit" "$S/gpu-test.log" 2>/dev/null | head
rm -rf "$S"/*.log "$S/corpus" "$S/smoke.json"
