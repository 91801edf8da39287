#!/usr/bin/env bash
# Device run 61 (H200): target/gpu-bundle (its COMMIT: the commit that
# gives the 64 x 64 tiles 8 stages, the build run 57's n128 judged, without
# run 58 to 60's multicast and experiment switches). Judgement of the
# committed kernels: 10,000 tier A cases (auto), the sweep T = 1..4096, the
# speed table and PyTorch in the same call, the GPU suite. Outputs in r61/.
set -u
B=target/gpu-bundle
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
S="${OUT:-out}/r61"; mkdir -p "$S"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat $B/COMMIT; date -u; } > "$S/machine.txt"
t0=$(date +%s)
timeout -k 5 -s INT 130 $B/bitparity check --op shared_expert --subject cuda-wgmma --quiet --cases 10000 --seed 610 \
  --json "$S/auto.json" --corpus "$S/corpus" > "$S/auto.log" 2>&1
echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/auto.log"
t0=$(date +%s); timeout -k 5 -s INT 45 $B/gpu_shared_expert-bench --variant wgmma --sweep-t 4096 > "$S/sweep.log" 2>&1; echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/sweep.log"
timeout -k 5 60 $B/gpu_shared_expert-bench --variant wgmma --table --json "$S/ours1.json" > "$S/ours1.log" 2>&1; echo "exit $?" >> "$S/ours1.log"
timeout -k 5 60 python3 benches/torch_shared_expert.py --json "$S/torch1.json" > "$S/torch1.log" 2>&1; echo "exit $?" >> "$S/torch1.log"
t0=$(date +%s); timeout -k 5 110 $B/gpu-test > "$S/gpu-test.log" 2>&1; echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/gpu-test.log"
tar -C "$S" -czf "$S/logs.tgz" $(cd "$S" && ls *.log)
grep -h "cases in\|^conformance\|^batch\|passed\|failed\|FAIL\|exit" "$S/auto.log" | head -6
tail -2 "$S/sweep.log"
grep -h -A5 "T x H x F" "$S/ours1.log" | head -6; grep -h "exit\|rror" "$S/ours1.log" | head -2; grep -h '^{' "$S/torch1.log" | cut -c1-60,200-330
grep -E "test result|FAILED|panicked|exit" "$S/gpu-test.log" | head
tar -C "$S" -czf "$S/json.tgz" $(cd "$S" && ls *.json 2>/dev/null)
rm -rf "$S"/*.log "$S"/*.json "$S/corpus"
