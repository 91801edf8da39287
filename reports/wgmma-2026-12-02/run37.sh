#!/usr/bin/env bash
# Device run 37 (H200): N = target/gpu-bundle (its COMMIT): cuda-wgmma with
# a copying warpgroup that loads through TMA (one thread,
# cp.async.bulk.tensor) where the rows are 16-byte aligned, cp.async
# otherwise; persistent blocks. Judged on 300 tier A cases first; if they
# pass: timed (speed table, per-step times; PyTorch in the same run), swept
# over T = 1..4096, tier A 10,000 cases (automatic tiles) and 10,000 on the
# large tiles, 8 reference-shape cases, the GPU test suite, Nsight Compute on
# two kernels. If they fail: the failures, and memcheck on 30 cases.
# Outputs in r37/.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:target/gpu-bundle/lib
S="${OUT:-out}/r37"; mkdir -p "$S"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "N $(cat target/gpu-bundle/COMMIT)"; date -u; } > "$S/machine.txt"
T0=$(date +%s)
chk() { # BUNDLE NAME LIMIT ARGS...
  local d=$1 n=$2 l=$3; shift 3; local t0=$(date +%s)
  timeout -k 5 -s INT "$l" $d/bitparity check --op shared_expert --subject cuda-wgmma --quiet \
    --json "$S/$n.json" --markdown "$S/$n.md" --corpus "$S/corpus" "$@" > "$S/$n.log" 2>&1
  local rc=$?; echo "exit $rc in $(( $(date +%s) - t0 )) s" >> "$S/$n.log"; return $rc
}
bench() { # BUNDLE NAME
  timeout -k 5 90 $1/gpu_shared_expert-bench --variant wgmma --table --json "$S/$2.json" > "$S/$2.log" 2>&1
  echo "exit $?" >> "$S/$2.log"
}
if chk target/gpu-bundle smoke 60 --cases 300 --seed 381; then
  W=target/gpu-bundle; echo "judged: N" >> "$S/machine.txt"
  bench $W ours
  timeout -k 5 60 python3 benches/torch_shared_expert.py --json "$S/torch.json" > "$S/torch.log" 2>&1; echo "exit $?" >> "$S/torch.log"
  t0=$(date +%s); timeout -k 5 -s INT 60 $W/gpu_shared_expert-bench --variant wgmma --sweep-t 4096 > "$S/sweep.log" 2>&1; echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/sweep.log"
  chk $W auto 150 --cases 10000 --seed 382
  BITPARITY_TILES=large chk $W large 150 --cases 10000 --seed 383
  BITPARITY_SHAPES=reference BITPARITY_MAX_T=4096 chk $W ref 45 --property batch-invariance \
    --property determinism --property offset-stride --cases 8 --seed 384
else
  W=target/gpu-bundle; echo "judged: N failed its smoke run" >> "$S/machine.txt"
  grep -h -B2 -A12 "FAIL" "$S/smoke.log" | head -60
  timeout -k 5 90 compute-sanitizer --tool memcheck --print-limit 5 $W/bitparity check --op shared_expert --subject cuda-wgmma --quiet --cases 30 --seed 381 --corpus "$S/corpus" > "$S/memcheck.log" 2>&1; echo "exit $?" >> "$S/memcheck.log"
  tail -40 "$S/memcheck.log"
fi
t0=$(date +%s); timeout -k 5 150 $W/gpu-test > "$S/gpu-test.log" 2>&1; echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/gpu-test.log"
NCU="ncu --clock-control none --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section ComputeWorkloadAnalysis --section SchedulerStats"
for k in se_gate_up_fwd se_gemm_kn_dz; do
  [ $(( $(date +%s) - T0 )) -lt 540 ] || break
  timeout -k 5 30 $NCU --kernel-name regex:^$k $W/gpu_shared_expert-bench --variant wgmma --quick --no-check --iters 1 --warmup 0 >> "$S/ncu.log" 2>&1; echo "exit $?" >> "$S/ncu.log"
done
tar -C "$S" -czf "$S/logs.tgz" $(cd "$S" && ls *.log *.md)
echo "== $(tail -1 "$S/machine.txt")"
grep -h -A7 "T x H x F" "$S"/ours.log 2>/dev/null | head -40
grep -h "graph\|compile" "$S"/torch.log 2>/dev/null | head -12
tail -2 "$S"/sweep.log 2>/dev/null
for f in smoke auto large ref; do [ -f "$S/$f.log" ] && { echo "-- $f"; grep -h "passed\|failed\|FAIL\|exit\|error" "$S/$f.log" | head -5; }; done
grep -E "test result|FAILED|panicked|exit" "$S/gpu-test.log" | head
grep -h -E "^  se_|Duration|Compute \(SM\) Throughput|Memory Throughput|L2 Cache Throughput|DRAM Throughput|Issue Slots Busy|Stall" "$S"/ncu.log 2>/dev/null | head -40
rm -rf "$S"/*.md "$S"/*.log "$S/corpus" "$S"/smoke.json "$S"/ref.json
