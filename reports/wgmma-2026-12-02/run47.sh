#!/usr/bin/env bash
# Device run 47 (H200): target/gpu-bundle (its COMMIT: the committed kernels
# + run47.diff, a switch BP_WG_NO_EPI that skips every epilogue while
# keeping the accumulators live: wrong outputs, timing only). How much of
# each kernel's time is its main loop, at T = 2048, 256 and 16 (H = 4096),
# against the kernels with their epilogues in the same run: what overlapping
# epilogues with MMA could gain, and what is left for the main loops.
# Outputs in r47/.
set -u
B=target/gpu-bundle
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
S="${OUT:-out}/r47"; mkdir -p "$S"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat $B/COMMIT; date -u; } > "$S/machine.txt"
bench() { # NAME EXTRA ARGS...
  local n=$1 x=$2; shift 2
  BITPARITY_NVRTC_EXTRA="$x" timeout -k 5 60 $B/gpu_shared_expert-bench --variant wgmma --json "$S/$n.json" "$@" > "$S/$n.log" 2>&1
  echo "exit $?" >> "$S/$n.log"
}
for T in 2048 256 16; do
  bench epi-$T "" --only $T --no-check
  bench noepi-$T "-DBP_WG_NO_EPI=1" --only $T --no-check
done
tar -C "$S" -czf "$S/logs.tgz" $(cd "$S" && ls *.log)
for f in "$S"/*.log; do echo "-- $(basename $f)"; grep -E "^ +[0-9]+x|exit|error" "$f" | head -3; done
rm -rf "$S"/*.log "$S"/*.json
