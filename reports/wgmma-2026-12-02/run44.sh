#!/usr/bin/env bash
# Device run 44 (H200): target/gpu-bundle (its COMMIT): the committed
# kernels, the dh kernel's dz epilogue a loop (run 40) and every epilogue
# storing pairs of outputs (run 43). Their judgement: 300 tier A cases; the
# speed table (rows checked bitwise against the oracle first) with PyTorch
# in the same run; the sweep over T = 1..4096; tier A, 10,000 cases
# (automatic tiles; tier A's aligned layouts, 6975541, judged on the GPU
# for the first time); 8 reference-shape cases; the GPU test suite; Nsight
# Compute's throughputs of the gate/up kernel at T = 256 (is it L2-bound?);
# and, in the time left, tier A on the large tiles. Outputs in r44/.
set -u
B=target/gpu-bundle
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
S="${OUT:-out}/r44"; mkdir -p "$S"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat $B/COMMIT; date -u; } > "$S/machine.txt"
T0=$(date +%s)
chk() { # NAME LIMIT ARGS...
  local n=$1 l=$2; shift 2; local t0=$(date +%s)
  timeout -k 5 -s INT "$l" $B/bitparity check --op shared_expert --subject cuda-wgmma --quiet \
    --json "$S/$n.json" --corpus "$S/corpus" "$@" > "$S/$n.log" 2>&1
  echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/$n.log"
}
chk smoke 60 --cases 300 --seed 440
timeout -k 5 90 $B/gpu_shared_expert-bench --variant wgmma --table --json "$S/ours.json" > "$S/ours.log" 2>&1; echo "exit $?" >> "$S/ours.log"
timeout -k 5 60 python3 benches/torch_shared_expert.py --json "$S/torch.json" > "$S/torch.log" 2>&1; echo "exit $?" >> "$S/torch.log"
t0=$(date +%s); timeout -k 5 -s INT 60 $B/gpu_shared_expert-bench --variant wgmma --sweep-t 4096 > "$S/sweep.log" 2>&1; echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/sweep.log"
chk auto 130 --cases 10000 --seed 441
BITPARITY_SHAPES=reference BITPARITY_MAX_T=4096 chk ref 30 --property batch-invariance \
  --property determinism --property offset-stride --cases 8 --seed 442
t0=$(date +%s); timeout -k 5 150 $B/gpu-test > "$S/gpu-test.log" 2>&1; echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/gpu-test.log"
timeout -k 5 60 ncu --clock-control none --launch-count 1 --kernel-name "regex:^se_gate_up_fwd_m64\$" \
  --section SpeedOfLight --section MemoryWorkloadAnalysis \
  $B/gpu_shared_expert-bench --variant wgmma --only 256 --no-check --iters 1 --warmup 0 > "$S/ncu-gu-256.log" 2>&1
echo "exit $?" >> "$S/ncu-gu-256.log"
L=$(( 575 - ($(date +%s) - T0) )); [ $L -gt 130 ] && L=130
[ $L -gt 30 ] && BITPARITY_TILES=large chk large $L --cases 10000 --seed 443
tar -C "$S" -czf "$S/logs.tgz" $(cd "$S" && ls *.log)
grep -h "passed\|failed\|exit" "$S/smoke.log" | head -3
grep -h -A5 "T x H x F" "$S/ours.log" | head -6
grep -h '^{' "$S/torch.log"
tail -2 "$S/sweep.log"
for f in auto ref large; do [ -f "$S/$f.log" ] && { echo "-- $f"; grep -h "cases in\|^conformance\|^batch\|passed\|failed\|FAIL\|exit" "$S/$f.log" | head -6; }; done
grep -E "test result|FAILED|panicked|exit" "$S/gpu-test.log" | head
grep -E "Duration|Throughput|L2 Hit|Mem Busy|Max Bandwidth|exit" "$S/ncu-gu-256.log" | head -12
rm -rf "$S"/*.log "$S/corpus" "$S/ref.json" "$S/smoke.json"
