#!/usr/bin/env bash
# Device run 39 (H200): target/gpu-bundle (its COMMIT): run 38's kernels with
# the dh kernel's dz epilogue loading eight outputs' z values before their
# stores. The speed table (rows checked bitwise against the oracle first) with
# PyTorch in the same run; the sweep over T = 1..4096; tier A, 10,000 cases
# (automatic tiles); 8 reference-shape cases; and, if time is left, 4,000
# tier A cases on the large tiles. Outputs in r39/.
set -u
B=target/gpu-bundle
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
S="${OUT:-out}/r39"; mkdir -p "$S"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat $B/COMMIT; date -u; } > "$S/machine.txt"
T0=$(date +%s)
chk() { # NAME LIMIT ARGS...
  local n=$1 l=$2; shift 2; local t0=$(date +%s)
  timeout -k 5 -s INT "$l" $B/bitparity check --op shared_expert --subject cuda-wgmma --quiet \
    --json "$S/$n.json" --corpus "$S/corpus" "$@" > "$S/$n.log" 2>&1
  echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/$n.log"
}
timeout -k 5 90 $B/gpu_shared_expert-bench --variant wgmma --table --json "$S/ours.json" > "$S/ours.log" 2>&1; echo "exit $?" >> "$S/ours.log"
timeout -k 5 60 python3 benches/torch_shared_expert.py --json "$S/torch.json" > "$S/torch.log" 2>&1; echo "exit $?" >> "$S/torch.log"
t0=$(date +%s); timeout -k 5 -s INT 60 $B/gpu_shared_expert-bench --variant wgmma --sweep-t 4096 > "$S/sweep.log" 2>&1; echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/sweep.log"
chk auto 130 --cases 10000 --seed 392
BITPARITY_SHAPES=reference BITPARITY_MAX_T=4096 chk ref 30 --property batch-invariance \
  --property determinism --property offset-stride --cases 8 --seed 393
if [ $(( $(date +%s) - T0 )) -lt 215 ]; then BITPARITY_TILES=large chk large 50 --cases 4000 --seed 394; fi
tar -C "$S" -czf "$S/logs.tgz" $(cd "$S" && ls *.log)
grep -h -A5 "T x H x F" "$S/ours.log" | head -6
grep -h '^{' "$S/torch.log"
tail -2 "$S/sweep.log"
for f in auto ref large; do [ -f "$S/$f.log" ] && { echo "-- $f"; grep -h "cases in\|^conformance\|^batch\|passed\|failed\|FAIL\|exit" "$S/$f.log" | head -6; }; done
rm -rf "$S"/*.log "$S/corpus" "$S/ref.json"
