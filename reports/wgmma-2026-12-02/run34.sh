#!/usr/bin/env bash
# Device run 34 (H200), at the bundle's commit: cuda-wgmma keeping z from
# the forward (four launches, 12 T H F FLOPs), six stages
# and the 64-row tiles for small grids. Judged (300 tier A cases), timed
# with PyTorch alongside, swept for batch invariance over every T from 1 to
# 4096 (the tile changes with T), judged again (10,000 tier A cases, 8 at
# reference shapes). Outputs in r34/ (the logs tarred in logs.tgz).
set -u
B=target/gpu-bundle
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
S="${OUT:-out}/r34"; mkdir -p "$S"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; cat $B/COMMIT; date -u; } > "$S/machine.txt"
chk() { # NAME LIMIT ARGS...
  local n=$1 l=$2; shift 2
  timeout -k 5 -s INT "$l" $B/bitparity check --op shared_expert --subject cuda-wgmma --quiet \
    --json "$S/$n.json" --markdown "$S/$n.md" --corpus "$S/corpus" "$@" > "$S/$n.log" 2>&1
  echo "exit $?" >> "$S/$n.log"
}
chk smoke 40 --cases 300 --seed 360
timeout -k 5 90 $B/gpu_shared_expert-bench --variant wgmma --table --json "$S/ours.json" > "$S/ours.log" 2>&1; echo "exit $?" >> "$S/ours.log"
timeout -k 5 60 python3 benches/torch_shared_expert.py --json "$S/torch.json" > "$S/torch.log" 2>&1; echo "exit $?" >> "$S/torch.log"
t0=$(date +%s)
timeout -k 5 -s INT 60 $B/gpu_shared_expert-bench --variant wgmma --sweep-t 4096 > "$S/sweep.log" 2>&1; echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/sweep.log"
chk wg-a 220 --cases 10000 --seed 361
BITPARITY_SHAPES=reference BITPARITY_MAX_T=4096 chk wg-b 45 --property batch-invariance \
  --property determinism --property offset-stride --cases 8 --seed 362
tar -C "$S" -czf "$S/logs.tgz" smoke.log smoke.md wg-a.log wg-a.md wg-b.log wg-b.md sweep.log
rm -f "$S"/*.md "$S"/smoke.json "$S"/wg-*.json "$S"/wg-*.log "$S"/smoke.log; rm -rf "$S/corpus"
tail -8 "$S/ours.log"; tail -3 "$S/sweep.log"; tar -xzOf "$S/logs.tgz" smoke.log wg-a.log wg-b.log | grep -h "passed\|failed\|FAIL\|exit\|cases in"
