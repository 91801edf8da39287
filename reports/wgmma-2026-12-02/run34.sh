#!/usr/bin/env bash
# Device run 34 (H200): two builds of cuda-wgmma, both keeping z from the
# forward (four launches, 12 T H F FLOPs):
#   A = target/gpu-bundle-a (ca75cfe): 128 x 128 tiles (wgmma m64n128k16),
#       six stages, 64 x 128 tiles for small grids;
#   B = target/gpu-bundle (its COMMIT): 128 x 256 tiles (m64n256k16), four
#       stages, 64 x 128 (eight stages) for small grids.
# Each judged on 300 tier A cases and timed (the speed table's shapes,
# rows checked bitwise against the oracle first), PyTorch alongside; then
# B (or A, if B failed) swept over every T from 1 to 4096 and judged on
# 10,000 tier A cases and 8 at reference shapes. Outputs in r34/.
set -u
B=target/gpu-bundle
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
S="${OUT:-out}/r34"; mkdir -p "$S"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "A $(cat target/gpu-bundle-a/COMMIT)"; echo "B $(cat $B/COMMIT)"; date -u; } > "$S/machine.txt"
chk() { # BUNDLE NAME LIMIT ARGS...
  local d=$1 n=$2 l=$3; shift 3
  timeout -k 5 -s INT "$l" $d/bitparity check --op shared_expert --subject cuda-wgmma --quiet \
    --json "$S/$n.json" --markdown "$S/$n.md" --corpus "$S/corpus" "$@" > "$S/$n.log" 2>&1
  local rc=$?; echo "exit $rc" >> "$S/$n.log"; return $rc
}
bench() { # BUNDLE NAME
  timeout -k 5 90 $1/gpu_shared_expert-bench --variant wgmma --table --json "$S/$2.json" > "$S/$2.log" 2>&1
  local rc=$?; echo "exit $rc" >> "$S/$2.log"; return $rc
}
okA=0; okB=0
chk target/gpu-bundle-a smoke-a 40 --cases 300 --seed 370 && bench target/gpu-bundle-a ours-a && okA=1
chk $B smoke-b 40 --cases 300 --seed 371 && bench $B ours-b && okB=1
timeout -k 5 60 python3 benches/torch_shared_expert.py --json "$S/torch.json" > "$S/torch.log" 2>&1; echo "exit $?" >> "$S/torch.log"
W=$B; [ $okB = 1 ] || W=target/gpu-bundle-a
echo "judged further: $W" >> "$S/machine.txt"
t0=$(date +%s)
timeout -k 5 -s INT 60 $W/gpu_shared_expert-bench --variant wgmma --sweep-t 4096 > "$S/sweep.log" 2>&1; echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/sweep.log"
chk $W wg-a 200 --cases 10000 --seed 372
BITPARITY_SHAPES=reference BITPARITY_MAX_T=4096 chk $W wg-b 45 --property batch-invariance \
  --property determinism --property offset-stride --cases 8 --seed 373
tar -C "$S" -czf "$S/logs.tgz" $(cd "$S" && ls *.log *.md) 
rm -rf "$S"/*.md "$S"/smoke-*.json "$S"/smoke-*.log "$S"/wg-*.json "$S"/wg-*.log "$S/sweep.log" "$S/corpus"
echo "okA=$okA okB=$okB"; grep -h -A5 "T x H x F    fwd" "$S"/ours-*.log; tar -xzOf "$S/logs.tgz" sweep.log | tail -2
tar -xzOf "$S/logs.tgz" wg-a.log wg-b.log | grep -h "passed\|failed\|FAIL\|exit\|cases in"
