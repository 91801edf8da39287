#!/usr/bin/env bash
# Device run 58 (H200): target/gpu-bundle (its COMMIT: d3c205c plus
# run58.diff: 8 stages for the narrow tiles, NK's B boxes of 64 rows, and
# run 54's TMA multicast ported to the three tiles behind a switch
# BP_WG_CLUSTER, the 64-row kernels' cluster width, default 1). Quick
# checks (c1: 2,000 auto + 1,000 on the large tiles; c2 and c4: 1,000
# auto), timings at T = 256 and 16 (c1, c2, c4, alternating twice; c1 at
# 2048), and Nsight Compute's counters for the four kernels at T = 256
# with and without clusters of 2. Outputs in r58/.
set -u
B=target/gpu-bundle
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
S="${OUT:-out}/r58"; mkdir -p "$S"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat $B/COMMIT; date -u; } > "$S/machine.txt"
NCU=/usr/local/cuda/bin/ncu
chk() { # NAME LIMIT ARGS...
  local n=$1 l=$2; shift 2; local t0=$(date +%s)
  timeout -k 5 -s INT "$l" $B/bitparity check --op shared_expert --subject cuda-wgmma --quiet \
    --json "$S/$n.json" --corpus "$S/corpus" "$@" > "$S/$n.log" 2>&1
  echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/$n.log"
}
chk c1 40 --cases 2000 --seed 580
BITPARITY_TILES=large chk c1-large 30 --cases 1000 --seed 581
BITPARITY_NVRTC_EXTRA="-DBP_WG_CLUSTER=2" chk c2 30 --cases 1000 --seed 582
BITPARITY_NVRTC_EXTRA="-DBP_WG_CLUSTER=4" chk c4 30 --cases 1000 --seed 583
for k in 1 2; do for c in 1 2 4; do for T in 256 16; do
  BITPARITY_NVRTC_EXTRA="-DBP_WG_CLUSTER=$c" timeout -k 5 60 $B/gpu_shared_expert-bench --variant wgmma --only $T --no-check > "$S/t$c-$T-$k.log" 2>&1; echo "exit $?" >> "$S/t$c-$T-$k.log"
done; done; done
timeout -k 5 60 $B/gpu_shared_expert-bench --variant wgmma --only 2048 --no-check > "$S/t1-2048.log" 2>&1; echo "exit $?" >> "$S/t1-2048.log"
SEC="--section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section WarpStateStats --section LaunchStats --section SchedulerStats"
for c in 1 2; do for part in fwd:2 bwd:10; do
  t0=$(date +%s); n=${part%%:*}; skip=${part##*:}
  BITPARITY_NVRTC_EXTRA="-DBP_WG_CLUSTER=$c" timeout -k 5 100 $NCU --clock-control none --kernel-name regex:se_ --launch-skip $skip --launch-count 2 $SEC -o "$S/c$c-$n" -f \
    $B/gpu_shared_expert-bench --variant wgmma --only 256 --no-check --iters 2 --warmup 2 > "$S/ncu-c$c-$n.log" 2>&1
  echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/ncu-c$c-$n.log"
  [ -f "$S/c$c-$n.ncu-rep" ] || continue
  $NCU --import "$S/c$c-$n.ncu-rep" --page details > "$S/ncu-c$c-$n-details.log" 2>&1
  $NCU --import "$S/c$c-$n.ncu-rep" --page raw --csv > "$S/ncu-c$c-$n-raw.csv" 2>&1
done; done
tar -C "$S" -czf "$S/logs.tgz" $(cd "$S" && ls *.log *.csv 2>/dev/null)
for f in c1 c1-large c2 c4; do echo "-- $f"; grep -h "cases in\|^conformance\|^batch\|passed\|failed\|FAIL\|exit" "$S/$f.log" | head -6; done
for k in 1 2; do for c in 1 2 4; do for T in 256 16; do echo "-- t$c-$T-$k"; grep -hE "^ +[0-9]+x4096|exit [^0]|rror" "$S/t$c-$T-$k.log" | head -3; done; done; done
echo "-- t1-2048"; grep -hE "^ +[0-9]+x4096|exit [^0]|rror" "$S/t1-2048.log" | head -3
for c in 1 2; do for n in fwd bwd; do echo "== ncu c$c $n"; tail -1 "$S/ncu-c$c-$n.log"; grep -E "^  [a-z_0-9]+.*\(|Duration|L2 Cache Throughput|DRAM Throughput|Compute \(SM\)|Cluster Size" "$S/ncu-c$c-$n-details.log" | head -20; done; done
tar -C "$S" -czf "$S/json.tgz" $(cd "$S" && ls *.json 2>/dev/null)
rm -rf "$S"/*.log "$S"/*.json "$S"/*.csv "$S/corpus"
