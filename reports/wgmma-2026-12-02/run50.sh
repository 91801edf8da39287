#!/usr/bin/env bash
# Device run 50 (H200): target/gpu-bundle (its COMMIT): run 49's clusters
# with the stage release at CTA scope (run 49's cluster-scope release made
# every kernel, with clusters or without, 1.5 to 2.5 times slower). 300 tier
# A cases (clusters of 2), the rows check at T = 256, the speed table with
# clusters of 1, 2 and 4 (BITPARITY_NVRTC_EXTRA), PyTorch once; then the
# GPU suite and 3,000 more tier A cases. Outputs in r50/.
set -u
B=target/gpu-bundle
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
S="${OUT:-out}/r50"; mkdir -p "$S"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat $B/COMMIT; date -u; } > "$S/machine.txt"
t0=$(date +%s)
timeout -k 5 -s INT 45 $B/bitparity check --op shared_expert --subject cuda-wgmma --quiet --json "$S/smoke.json" \
  --corpus "$S/corpus" --cases 300 --seed 500 > "$S/smoke.log" 2>&1; echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/smoke.log"
timeout -k 5 30 $B/gpu_shared_expert-bench --variant wgmma --only 256 > "$S/rows-256.log" 2>&1; echo "exit $?" >> "$S/rows-256.log"
for c in 1 2 4; do
  BITPARITY_NVRTC_EXTRA=-DBP_WG_CLUSTER=$c timeout -k 5 60 $B/gpu_shared_expert-bench --variant wgmma --table \
    --json "$S/ours$c.json" > "$S/ours$c.log" 2>&1; echo "exit $?" >> "$S/ours$c.log"
done
timeout -k 5 60 python3 benches/torch_shared_expert.py --json "$S/torch.json" > "$S/torch.log" 2>&1; echo "exit $?" >> "$S/torch.log"
t0=$(date +%s); timeout -k 5 110 $B/gpu-test > "$S/gpu-test.log" 2>&1; echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/gpu-test.log"
t0=$(date +%s)
timeout -k 5 -s INT 50 $B/bitparity check --op shared_expert --subject cuda-wgmma --quiet --json "$S/auto.json" \
  --corpus "$S/corpus" --cases 3000 --seed 501 > "$S/auto.log" 2>&1; echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/auto.log"
tar -C "$S" -czf "$S/logs.tgz" $(cd "$S" && ls *.log)
grep -h "cases in\|^conformance\|^batch\|passed\|failed\|FAIL\|exit" "$S/smoke.log" | head -6
grep -hE "^ +[0-9]+x|exit|rror" "$S/rows-256.log" | head -4
for c in 1 2 4; do echo "-- clusters of $c"; grep -h -A5 "T x H x F" "$S/ours$c.log" | head -6; grep -h "exit\|rror" "$S/ours$c.log" | head -3; done
grep -h '^{' "$S/torch.log" | cut -c1-60,200-330
grep -E "test result|FAILED|panicked|exit" "$S/gpu-test.log" | head
grep -h "cases in\|^conformance\|^batch\|passed\|failed\|FAIL\|exit" "$S/auto.log" | head -6
tar -C "$S" -czf "$S/json.tgz" $(cd "$S" && ls *.json 2>/dev/null)
rm -rf "$S"/*.log "$S"/*.json "$S/corpus"
