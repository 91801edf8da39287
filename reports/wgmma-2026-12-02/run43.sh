#!/usr/bin/env bash
# Device run 43 (H200): target/gpu-bundle (its COMMIT: 3199c42 + run43.diff).
# Every epilogue stores pairs of adjacent outputs as one (bf16 pairs as a
# 32-bit word, f32 pairs as float2) and the dz epilogue loads z in float2
# pairs, where the row length is even and the buffers aligned (BP_WG_VEC=1,
# the default; =0: one output a store, as before); the dz loop's group of
# outputs 8 (default) or 16 (BP_WG_DZ_GROUP). 300 tier A cases first (their
# odd shapes take the one-output path); then the per-kernel times at
# T = 2048 and 256 (H = 4096), rows checked bitwise against the oracle.
# Outputs in r43/.
set -u
B=target/gpu-bundle
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
S="${OUT:-out}/r43"; mkdir -p "$S"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat $B/COMMIT; date -u; } > "$S/machine.txt"
bench() { # NAME EXTRA ARGS...
  local n=$1 x=$2; shift 2
  BITPARITY_NVRTC_EXTRA="$x" timeout -k 5 60 $B/gpu_shared_expert-bench --variant wgmma --json "$S/$n.json" "$@" > "$S/$n.log" 2>&1
  echo "exit $?" >> "$S/$n.log"
}
timeout -k 5 -s INT 60 $B/bitparity check --op shared_expert --subject cuda-wgmma --quiet --cases 300 --seed 430 \
  --json "$S/smoke.json" --corpus "$S/corpus" > "$S/smoke.log" 2>&1; echo "exit $?" >> "$S/smoke.log"
for T in 2048 256; do
  bench vec-$T "" --only $T
  bench novec-$T "-DBP_WG_VEC=0" --only $T
  bench vec16-$T "-DBP_WG_DZ_GROUP=16" --only $T
done
bench vec-again-2048 "" --only 2048
tar -C "$S" -czf "$S/logs.tgz" $(cd "$S" && ls *.log)
grep -h "passed\|failed\|FAIL\|exit" "$S/smoke.log" | head -4
for f in "$S"/{vec,novec,vec16,vec-again}-*.log; do echo "-- $(basename $f)"; grep -E "^ +[0-9]+x|exit|MISMATCH|error" "$f" | head -3; done
rm -rf "$S"/*.log "$S"/*.json "$S/corpus"
