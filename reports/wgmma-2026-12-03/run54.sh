#!/usr/bin/env bash
# Device run 54 (H200): target/gpu-bundle (its COMMIT: run 52's multicast
# with a switch BP_WG_MC_MODE): why clusters of 2 were slower (run 52),
# bisected at T = 256 and 16: mode 0 multicast + releases coupled across
# the pair; 1 clusters only (each block copies and releases its own); 2
# coupled releases without multicast; and clusters of 1. The subject prints
# the clusters it found (BITPARITY_WG_DEBUG). Outputs in r54/.
set -u
B=target/gpu-bundle
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
S="${OUT:-out}/r54"; mkdir -p "$S"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat $B/COMMIT; date -u; } > "$S/machine.txt"
export BITPARITY_WG_DEBUG=1
bench() { # NAME EXTRA ARGS...
  local n=$1 x=$2; shift 2
  BITPARITY_NVRTC_EXTRA="$x" timeout -k 5 60 $B/gpu_shared_expert-bench --variant wgmma --json "$S/$n.json" "$@" > "$S/$n.log" 2>&1
  echo "exit $?" >> "$S/$n.log"
}
for r in 1 2; do
  for T in 256 16; do
    bench c1-$T-$r "-DBP_WG_CLUSTER=1" --only $T
    for m in 0 1 2; do bench m$m-$T-$r "-DBP_WG_MC_MODE=$m" --only $T; done
  done
done
tar -C "$S" -czf "$S/logs.tgz" $(cd "$S" && ls *.log)
for f in "$S"/*.log; do echo "-- $(basename $f)"; grep -E "^ +[0-9]+x4096|exit|rror|clusters" "$f" | cut -c1-40,100-200 | head -4; done
rm -rf "$S"/*.log "$S"/*.json
