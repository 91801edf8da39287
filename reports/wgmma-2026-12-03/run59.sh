#!/usr/bin/env bash
# Device run 59 (H200): target/gpu-bundle (its COMMIT: d3c205c plus
# run59.diff: run 58's build and a switch BP_WG_WAIT_HINT, try_wait's
# suspend-time hint in ns, default 0: no hint, a loop of polls). Whether
# the polling of the mbarriers slows the copies (run 57/58: our kernels
# issue 3 to 5 times cuBLAS's instructions, most of them polls): timings at
# T = 256 and 16 for hints 0, 1e5 and 1e7 ns without clusters and 0 and
# 1e7 with clusters of 2, and 1e7 with clusters of 2 but for the gate/up
# kernel (BP_WG_CLUSTER_GU=1), alternating twice, at 2048 for hints 0 and 1e7;
# quick checks of the hinted builds; Nsight Compute's counters at T = 256
# with the 1e7 hint. Outputs in r59/.
set -u
B=target/gpu-bundle
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
S="${OUT:-out}/r59"; mkdir -p "$S"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat $B/COMMIT; date -u; } > "$S/machine.txt"
NCU=/usr/local/cuda/bin/ncu
chk() { # NAME LIMIT ARGS...
  local n=$1 l=$2; shift 2; local t0=$(date +%s)
  timeout -k 5 -s INT "$l" $B/bitparity check --op shared_expert --subject cuda-wgmma --quiet \
    --json "$S/$n.json" --corpus "$S/corpus" "$@" > "$S/$n.log" 2>&1
  echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/$n.log"
}
BITPARITY_NVRTC_EXTRA="-DBP_WG_WAIT_HINT=10000000" chk h7 30 --cases 1500 --seed 590
BITPARITY_NVRTC_EXTRA="-DBP_WG_WAIT_HINT=10000000 -DBP_WG_CLUSTER=2" chk h7c2 30 --cases 1000 --seed 591
BITPARITY_NVRTC_EXTRA="-DBP_WG_WAIT_HINT=10000000 -DBP_WG_CLUSTER=2 -DBP_WG_CLUSTER_GU=1" chk h7c2g1 30 --cases 1000 --seed 592
CONF="h0c1:-DBP_WG_WAIT_HINT=0 h5c1:-DBP_WG_WAIT_HINT=100000 h7c1:-DBP_WG_WAIT_HINT=10000000 h0c2:-DBP_WG_CLUSTER=2 h7c2:-DBP_WG_WAIT_HINT=10000000_-DBP_WG_CLUSTER=2 h7c2g1:-DBP_WG_WAIT_HINT=10000000_-DBP_WG_CLUSTER=2_-DBP_WG_CLUSTER_GU=1"
for k in 1 2; do for cf in $CONF; do for T in 256 16; do
  n=${cf%%:*}; x=${cf#*:}; x=${x//_/ }
  BITPARITY_NVRTC_EXTRA="$x" timeout -k 5 60 $B/gpu_shared_expert-bench --variant wgmma --only $T --no-check > "$S/t$n-$T-$k.log" 2>&1; echo "exit $?" >> "$S/t$n-$T-$k.log"
done; done; done
for h in 0 10000000; do
  BITPARITY_NVRTC_EXTRA="-DBP_WG_WAIT_HINT=$h" timeout -k 5 60 $B/gpu_shared_expert-bench --variant wgmma --only 2048 --no-check > "$S/t2048-h$h.log" 2>&1; echo "exit $?" >> "$S/t2048-h$h.log"
done
SEC="--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section LaunchStats --section SchedulerStats"
for part in fwd:2 bwd:10; do
  t0=$(date +%s); n=${part%%:*}; skip=${part##*:}
  BITPARITY_NVRTC_EXTRA="-DBP_WG_WAIT_HINT=10000000" timeout -k 5 100 $NCU --clock-control none --kernel-name regex:se_ --launch-skip $skip --launch-count 2 $SEC -o "$S/h7-$n" -f \
    $B/gpu_shared_expert-bench --variant wgmma --only 256 --no-check --iters 2 --warmup 2 > "$S/ncu-h7-$n.log" 2>&1
  echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/ncu-h7-$n.log"
  [ -f "$S/h7-$n.ncu-rep" ] || continue
  $NCU --import "$S/h7-$n.ncu-rep" --page details > "$S/ncu-h7-$n-details.log" 2>&1
  $NCU --import "$S/h7-$n.ncu-rep" --page raw --csv > "$S/ncu-h7-$n-raw.csv" 2>&1
done
tar -C "$S" -czf "$S/logs.tgz" $(cd "$S" && ls *.log *.csv 2>/dev/null)
for f in h7 h7c2 h7c2g1; do echo "-- $f"; grep -h "cases in\|^conformance\|^batch\|passed\|failed\|FAIL\|exit" "$S/$f.log" | head -6; done
for k in 1 2; do for cf in $CONF; do for T in 256 16; do n=${cf%%:*}; echo "-- t$n-$T-$k"; grep -hE "^ +[0-9]+x4096|exit [^0]|rror" "$S/t$n-$T-$k.log" | head -3; done; done; done
for h in 0 10000000; do echo "-- t2048-h$h"; grep -hE "^ +[0-9]+x4096|exit [^0]|rror" "$S/t2048-h$h.log" | head -3; done
for n in fwd bwd; do echo "== ncu h7 $n"; tail -1 "$S/ncu-h7-$n.log"; grep -E "^  [a-z_0-9]+.*\(|Duration|L2 Cache Throughput|Compute \(SM\)" "$S/ncu-h7-$n-details.log" | head -12; done
tar -C "$S" -czf "$S/json.tgz" $(cd "$S" && ls *.json 2>/dev/null)
rm -rf "$S"/*.log "$S"/*.json "$S"/*.csv "$S/corpus"
