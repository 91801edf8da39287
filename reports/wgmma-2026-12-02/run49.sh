#!/usr/bin/env bash
# Device run 49 (H200): target/gpu-bundle (its COMMIT): the 64-row kernels
# launched in clusters (BP_WG_CLUSTER blocks: 2 as built, 4 through
# BITPARITY_NVRTC_EXTRA), each TMA box copied once per cluster and
# multicast. Correctness first (300 tier A cases with each width; the rows
# check at T = 16, 256, 2048), then speed pairs against PyTorch (2 and 4),
# then the GPU suite and 2,000 more tier A cases. Outputs in r49/.
set -u
B=target/gpu-bundle
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
S="${OUT:-out}/r49"; mkdir -p "$S"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat $B/COMMIT; date -u; } > "$S/machine.txt"
T0=$(date +%s)
chk() { # NAME LIMIT ARGS...
  local n=$1 l=$2; shift 2; local t0=$(date +%s)
  timeout -k 5 -s INT "$l" $B/bitparity check --op shared_expert --subject cuda-wgmma --quiet \
    --json "$S/$n.json" --corpus "$S/corpus" "$@" > "$S/$n.log" 2>&1
  echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/$n.log"
}
C4="-DBP_WG_CLUSTER=4"
chk smoke2 45 --cases 300 --seed 490
BITPARITY_NVRTC_EXTRA=$C4 chk smoke4 45 --cases 300 --seed 491
for T in 16 256 2048; do
  timeout -k 5 30 $B/gpu_shared_expert-bench --variant wgmma --only $T > "$S/rows-$T.log" 2>&1; echo "exit $?" >> "$S/rows-$T.log"
done
for k in 1 2; do
  timeout -k 5 60 $B/gpu_shared_expert-bench --variant wgmma --table --json "$S/ours2-$k.json" > "$S/ours2-$k.log" 2>&1; echo "exit $?" >> "$S/ours2-$k.log"
  timeout -k 5 60 python3 benches/torch_shared_expert.py --json "$S/torch$k.json" > "$S/torch$k.log" 2>&1; echo "exit $?" >> "$S/torch$k.log"
  BITPARITY_NVRTC_EXTRA=$C4 timeout -k 5 60 $B/gpu_shared_expert-bench --variant wgmma --table --json "$S/ours4-$k.json" > "$S/ours4-$k.log" 2>&1; echo "exit $?" >> "$S/ours4-$k.log"
done
t0=$(date +%s); timeout -k 5 110 $B/gpu-test > "$S/gpu-test.log" 2>&1; echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/gpu-test.log"
L=$(( 570 - ($(date +%s) - T0) )); [ $L -gt 60 ] && L=60
[ $L -gt 20 ] && chk auto $L --cases 5000 --seed 492
tar -C "$S" -czf "$S/logs.tgz" $(cd "$S" && ls *.log)
for f in smoke2 smoke4 auto; do [ -f "$S/$f.log" ] && { echo "-- $f"; grep -h "cases in\|^conformance\|^batch\|passed\|failed\|FAIL\|exit" "$S/$f.log" | head -6; }; done
for T in 16 256 2048; do grep -hE "^ +[0-9]+x|exit|rror" "$S/rows-$T.log" | head -8; done
for k in 1 2; do echo "-- $k"; for f in ours2 ours4; do grep -h -A5 "T x H x F" "$S/$f-$k.log" | head -6; grep -h "exit\|rror" "$S/$f-$k.log" | head -3; done; grep -h '^{' "$S/torch$k.log" | cut -c1-60,200-330; done
grep -E "test result|FAILED|panicked|exit" "$S/gpu-test.log" | head
tar -C "$S" -czf "$S/json.tgz" $(cd "$S" && ls *.json 2>/dev/null)
rm -rf "$S"/*.log "$S"/*.json "$S/corpus"
