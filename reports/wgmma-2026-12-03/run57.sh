#!/usr/bin/env bash
# Device run 57 (H200): target/gpu-bundle (its COMMIT: d3c205c plus a
# switch BP_WG_NARROW_KIB, the 64 x 64 tiles' bytes of stages, default 192,
# the committed code). Judgement of the committed kernels: 10,000 tier A
# cases (auto), the sweep T = 1..4096, the GPU suite; the same 10,000-case
# check with 128 KiB of narrow stages (8 of them), and both timed at T =
# 256 and 16. Then Nsight Compute's counters for our four kernels at
# T = 256 and for torch.compile's (ncu_torch.py). Outputs in r57/.
set -u
B=target/gpu-bundle
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
S="${OUT:-out}/r57"; mkdir -p "$S"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat $B/COMMIT; date -u; } > "$S/machine.txt"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: $NCU" >> "$S/machine.txt"
chk() { # NAME LIMIT ARGS...
  local n=$1 l=$2; shift 2; local t0=$(date +%s)
  timeout -k 5 -s INT "$l" $B/bitparity check --op shared_expert --subject cuda-wgmma --quiet \
    --json "$S/$n.json" --corpus "$S/corpus" "$@" > "$S/$n.log" 2>&1
  echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/$n.log"
}
chk auto 130 --cases 10000 --seed 570
BITPARITY_NVRTC_EXTRA="-DBP_WG_NARROW_KIB=128" chk n128 130 --cases 10000 --seed 571
for k in 1 2; do for kib in 192 128; do for T in 256 16; do
  BITPARITY_NVRTC_EXTRA="-DBP_WG_NARROW_KIB=$kib" timeout -k 5 60 $B/gpu_shared_expert-bench --variant wgmma --only $T --no-check > "$S/st$kib-$T-$k.log" 2>&1; echo "exit $?" >> "$S/st$kib-$T-$k.log"
done; done; done
t0=$(date +%s); timeout -k 5 -s INT 45 $B/gpu_shared_expert-bench --variant wgmma --sweep-t 4096 > "$S/sweep.log" 2>&1; echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/sweep.log"
t0=$(date +%s); timeout -k 5 110 $B/gpu-test > "$S/gpu-test.log" 2>&1; echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/gpu-test.log"
SEC="--section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section WarpStateStats --section LaunchStats --section SchedulerStats"
t0=$(date +%s)
timeout -k 5 100 "$NCU" --clock-control none --kernel-name regex:se_ --launch-skip 8 --launch-count 4 $SEC -o "$S/ours" -f \
  $B/gpu_shared_expert-bench --variant wgmma --only 256 --no-check --iters 2 --warmup 2 > "$S/ncu-ours.log" 2>&1
echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/ncu-ours.log"
t0=$(date +%s)
timeout -k 5 150 "$NCU" --clock-control none --kernel-name regex:nvjet --launch-skip 16 --launch-count 4 $SEC -o "$S/torch" -f \
  python3 reports/wgmma-2026-12-03/ncu_torch.py 256 > "$S/ncu-torch.log" 2>&1
echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/ncu-torch.log"
for r in ours torch; do
  [ -f "$S/$r.ncu-rep" ] || continue
  "$NCU" --import "$S/$r.ncu-rep" --page details > "$S/ncu-$r-details.log" 2>&1
  "$NCU" --import "$S/$r.ncu-rep" --page raw --csv > "$S/ncu-$r-raw.csv" 2>&1
done
tar -C "$S" -czf "$S/logs.tgz" $(cd "$S" && ls *.log *.csv 2>/dev/null)
for f in auto n128; do echo "-- $f"; grep -h "cases in\|^conformance\|^batch\|passed\|failed\|FAIL\|exit" "$S/$f.log" | head -6; done
tail -2 "$S/sweep.log"
grep -E "test result|FAILED|panicked|exit" "$S/gpu-test.log" | head
for k in 1 2; do for kib in 192 128; do for T in 256 16; do echo "-- st$kib-$T-$k"; grep -hE "^ +[0-9]+x4096|exit [^0]|rror" "$S/st$kib-$T-$k.log" | head -3; done; done; done
for r in ours torch; do echo "== ncu $r"; tail -3 "$S/ncu-$r.log"; grep -E "^  [a-z_0-9]+.*\(|Duration|Memory Throughput|L2 Cache Throughput|DRAM Throughput|L1/TEX Hit|L2 Hit Rate|Compute \(SM\)|Registers|Warp Cycles Per Issued" "$S/ncu-$r-details.log" | head -80; done
tar -C "$S" -czf "$S/json.tgz" $(cd "$S" && ls *.json 2>/dev/null)
rm -rf "$S"/*.log "$S"/*.json "$S"/*.csv "$S/corpus"
