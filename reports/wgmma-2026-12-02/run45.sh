#!/usr/bin/env bash
# Device run 45 (H200): target/gpu-bundle (its COMMIT: 7041651 + run45.diff,
# which only makes the dz loop's group size a switch, BP_WG_DZ_GROUP,
# default 16 as committed). What is left for dh + dz: its per-kernel time at
# T = 2048 and 256 (H = 4096) with groups of 32, and at T = 2048 with every
# launch on the small tiles (BITPARITY_TILES=small), against the committed
# kernels in the same run; rows checked bitwise against the oracle.
# Outputs in r45/.
set -u
B=target/gpu-bundle
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
S="${OUT:-out}/r45"; mkdir -p "$S"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat $B/COMMIT; date -u; } > "$S/machine.txt"
bench() { # NAME EXTRA ARGS...
  local n=$1 x=$2; shift 2
  BITPARITY_NVRTC_EXTRA="$x" timeout -k 5 60 $B/gpu_shared_expert-bench --variant wgmma --json "$S/$n.json" "$@" > "$S/$n.log" 2>&1
  echo "exit $?" >> "$S/$n.log"
}
for T in 2048 256; do
  bench g16-$T "" --only $T
  bench g32-$T "-DBP_WG_DZ_GROUP=32" --only $T
done
BITPARITY_TILES=small bench small-2048 "" --only 2048
bench g16-again-2048 "" --only 2048
tar -C "$S" -czf "$S/logs.tgz" $(cd "$S" && ls *.log)
for f in "$S"/*.log; do echo "-- $(basename $f)"; grep -E "^ +[0-9]+x|exit|MISMATCH|error" "$f" | head -3; done
rm -rf "$S"/*.log "$S"/*.json
