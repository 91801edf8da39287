#!/usr/bin/env bash
# Device run 60 (H200): target/gpu-bundle (its COMMIT: d3c205c plus
# run60.diff: 8 stages for the narrow tiles, NK's B boxes of 64 rows, the
# multicast port behind BP_WG_CLUSTER (default 1) and its experiment
# switches BP_WG_WAIT_HINT, BP_WG_CLUSTER_GU, BP_WG_MC_CM, BP_WG_MC_ONE,
# all off by default). First the judgement of the default build (the
# candidate commit): 10,000 tier A cases (auto), 1,000 on the large tiles,
# the sweep T = 1..4096, the GPU suite, the speed table and PyTorch
# alternating twice. Then the multicast experiments at T = 256 and 16, one
# timing each: clusters of 2 sharing B along M (run 58's), sharing A along
# N (BP_WG_MC_CM=1), B's shared boxes all from one block (BP_WG_MC_ONE=1);
# 1,000-case checks of the last two. Outputs in r60/.
set -u
B=target/gpu-bundle
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
S="${OUT:-out}/r60"; mkdir -p "$S"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat $B/COMMIT; date -u; } > "$S/machine.txt"
chk() { # NAME LIMIT ARGS...
  local n=$1 l=$2; shift 2; local t0=$(date +%s)
  timeout -k 5 -s INT "$l" $B/bitparity check --op shared_expert --subject cuda-wgmma --quiet \
    --json "$S/$n.json" --corpus "$S/corpus" "$@" > "$S/$n.log" 2>&1
  echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/$n.log"
}
chk auto 130 --cases 10000 --seed 600
BITPARITY_TILES=large chk large 25 --cases 1000 --seed 601
t0=$(date +%s); timeout -k 5 -s INT 45 $B/gpu_shared_expert-bench --variant wgmma --sweep-t 4096 > "$S/sweep.log" 2>&1; echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/sweep.log"
t0=$(date +%s); timeout -k 5 110 $B/gpu-test > "$S/gpu-test.log" 2>&1; echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/gpu-test.log"
for k in 1 2; do
  timeout -k 5 60 $B/gpu_shared_expert-bench --variant wgmma --table --json "$S/ours$k.json" > "$S/ours$k.log" 2>&1; echo "exit $?" >> "$S/ours$k.log"
  timeout -k 5 60 python3 benches/torch_shared_expert.py --json "$S/torch$k.json" > "$S/torch$k.log" 2>&1; echo "exit $?" >> "$S/torch$k.log"
done
BITPARITY_NVRTC_EXTRA="-DBP_WG_CLUSTER=2 -DBP_WG_MC_CM=1" chk mcA 25 --cases 1000 --seed 602
BITPARITY_NVRTC_EXTRA="-DBP_WG_CLUSTER=2 -DBP_WG_MC_ONE=1" chk mc1 25 --cases 1000 --seed 603
for cf in c1: c2:-DBP_WG_CLUSTER=2 mcA:-DBP_WG_CLUSTER=2,-DBP_WG_MC_CM=1 mc1:-DBP_WG_CLUSTER=2,-DBP_WG_MC_ONE=1; do for T in 256 16; do
  n=${cf%%:*}; export BITPARITY_NVRTC_EXTRA="$(echo "${cf#*:}" | tr , ' ')"
  [ -n "$BITPARITY_NVRTC_EXTRA" ] || unset BITPARITY_NVRTC_EXTRA
  timeout -k 5 40 $B/gpu_shared_expert-bench --variant wgmma --only $T --no-check > "$S/t$n-$T.log" 2>&1; echo "exit $? [${BITPARITY_NVRTC_EXTRA:-}]" >> "$S/t$n-$T.log"
done; done
unset BITPARITY_NVRTC_EXTRA
tar -C "$S" -czf "$S/logs.tgz" $(cd "$S" && ls *.log)
for f in auto large mcA mc1; do echo "-- $f"; grep -h "cases in\|^conformance\|^batch\|passed\|failed\|FAIL\|exit" "$S/$f.log" | head -6; done
tail -2 "$S/sweep.log"
grep -E "test result|FAILED|panicked|exit" "$S/gpu-test.log" | head
for k in 1 2; do echo "-- $k"; grep -h -A5 "T x H x F" "$S/ours$k.log" | head -6; grep -h "exit\|rror" "$S/ours$k.log" | head -2; grep -h '^{' "$S/torch$k.log" | cut -c1-60,200-330; done
for cf in c1 c2 mcA mc1; do for T in 256 16; do echo "-- t$cf-$T"; grep -hE "^ +[0-9]+x4096|exit|rror" "$S/t$cf-$T.log" | head -3; done; done
tar -C "$S" -czf "$S/json.tgz" $(cd "$S" && ls *.json 2>/dev/null)
rm -rf "$S"/*.log "$S"/*.json "$S/corpus"
