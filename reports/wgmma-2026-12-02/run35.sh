#!/usr/bin/env bash
# Device run 35 (H200), the bundle of `ci/gpu-nightly build` at its COMMIT:
#  1. the GPU test suite (cargo test --test gpu, prebuilt), with cuda-wgmma's
#     and the strict kernel's window tests;
#  2. tier A, 10,000 cases, every launch of cuda-wgmma on the 128 x 256
#     tiles (BITPARITY_TILES=large);
#  3. the bench's per-step times with every launch on one tile
#     (BITPARITY_TILES=large, then small): the data for the tile rule;
#  4. Nsight Compute on the four kernels of one forward + backward at
#     T = 2048 and T = 256 (H = 4096, F = 2048): where the time goes.
# Outputs in r35/.
set -u
B=target/gpu-bundle
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
S="${OUT:-out}/r35"; mkdir -p "$S"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat $B/COMMIT; date -u; } > "$S/machine.txt"
t0=$(date +%s)
timeout -k 5 200 $B/gpu-test > "$S/gpu-test.log" 2>&1; echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/gpu-test.log"
t0=$(date +%s)
BITPARITY_TILES=large timeout -k 5 -s INT 200 $B/bitparity check --op shared_expert --subject cuda-wgmma --quiet \
  --cases 10000 --seed 380 --json "$S/large.json" --markdown "$S/large.md" --corpus "$S/corpus" > "$S/large.log" 2>&1
echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/large.log"
for t in large small; do
  BITPARITY_TILES=$t timeout -k 5 90 $B/gpu_shared_expert-bench --variant wgmma --table --json "$S/tiles-$t.json" > "$S/tiles-$t.log" 2>&1
  echo "exit $?" >> "$S/tiles-$t.log"
done
NCU="ncu --clock-control none --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section ComputeWorkloadAnalysis --section SchedulerStats --section Occupancy --section LaunchStats"
for t in 2048 256; do
  q="--only $t"; [ $t = 2048 ] && q="--quick"
  for k in se_gate_up_fwd se_gemm_nk_bf16 se_gemm_kn_dz se_gemm_kn_f32; do
    timeout -k 5 60 $NCU --kernel-name regex:^$k $B/gpu_shared_expert-bench --variant wgmma $q --no-check --iters 1 --warmup 0 >> "$S/ncu-$t.log" 2>&1; echo "exit $?" >> "$S/ncu-$t.log"
  done
done
tar -C "$S" -czf "$S/logs.tgz" $(cd "$S" && ls *.log *.md)
tar -xzOf "$S/logs.tgz" gpu-test.log | grep -E "test result|FAILED|failed|panicked|exit" | head
tar -xzOf "$S/logs.tgz" large.log | grep -h "passed\|failed\|FAIL\|exit\|cases in" | head
grep -h -A8 "T x H x F" "$S"/tiles-*.log | head -40
grep -h -E "se_|Duration|Compute \(SM\) Throughput|Memory Throughput|L2 Cache Throughput|DRAM Throughput|Registers|Stall|Issue Slots Busy" "$S"/ncu-*.log | head -120
rm -rf "$S"/*.md "$S"/*.log "$S/corpus"
