#!/usr/bin/env bash
# Device run 52 (H200): target/gpu-bundle (its COMMIT): the 64-row kernels
# in clusters of 2 with TMA multicast (runs 49 to 51), the cluster's width
# now a compile-time constant (run 51: read at run time, it slowed every
# kernel). Judgement: the GPU suite; 300 + 4,000 tier A cases (automatic
# tiles); 1,500 on the large tiles; the sweep over T = 1..4096. Speed: the
# table and PyTorch alternating twice, and the table with clusters of 1 in
# the same call. Outputs in r52/.
set -u
B=target/gpu-bundle
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
S="${OUT:-out}/r52"; mkdir -p "$S"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat $B/COMMIT; date -u; } > "$S/machine.txt"
chk() { # NAME LIMIT ARGS...
  local n=$1 l=$2; shift 2; local t0=$(date +%s)
  timeout -k 5 -s INT "$l" $B/bitparity check --op shared_expert --subject cuda-wgmma --quiet \
    --json "$S/$n.json" --corpus "$S/corpus" "$@" > "$S/$n.log" 2>&1
  echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/$n.log"
}
chk smoke 30 --cases 300 --seed 520
for k in 1 2; do
  timeout -k 5 60 $B/gpu_shared_expert-bench --variant wgmma --table --json "$S/ours$k.json" > "$S/ours$k.log" 2>&1; echo "exit $?" >> "$S/ours$k.log"
  timeout -k 5 60 python3 benches/torch_shared_expert.py --json "$S/torch$k.json" > "$S/torch$k.log" 2>&1; echo "exit $?" >> "$S/torch$k.log"
done
BITPARITY_NVRTC_EXTRA=-DBP_WG_CLUSTER=1 timeout -k 5 60 $B/gpu_shared_expert-bench --variant wgmma --table \
  --json "$S/ours-c1.json" > "$S/ours-c1.log" 2>&1; echo "exit $?" >> "$S/ours-c1.log"
t0=$(date +%s); timeout -k 5 110 $B/gpu-test > "$S/gpu-test.log" 2>&1; echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/gpu-test.log"
t0=$(date +%s); timeout -k 5 -s INT 45 $B/gpu_shared_expert-bench --variant wgmma --sweep-t 4096 > "$S/sweep.log" 2>&1; echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/sweep.log"
chk auto 50 --cases 4000 --seed 521
BITPARITY_TILES=large chk large 30 --cases 1500 --seed 522
tar -C "$S" -czf "$S/logs.tgz" $(cd "$S" && ls *.log)
for f in smoke auto large; do echo "-- $f"; grep -h "cases in\|^conformance\|^batch\|passed\|failed\|FAIL\|exit" "$S/$f.log" | head -6; done
tail -2 "$S/sweep.log"
grep -E "test result|FAILED|panicked|exit" "$S/gpu-test.log" | head
for k in 1 2; do echo "-- $k"; grep -h -A5 "T x H x F" "$S/ours$k.log" | head -6; grep -h "exit\|rror" "$S/ours$k.log" | head -2; grep -h '^{' "$S/torch$k.log" | cut -c1-60,200-330; done
echo "-- clusters of 1"; grep -h -A5 "T x H x F" "$S/ours-c1.log" | head -6
tar -C "$S" -czf "$S/json.tgz" $(cd "$S" && ls *.json 2>/dev/null)
rm -rf "$S"/*.log "$S"/*.json "$S/corpus"
