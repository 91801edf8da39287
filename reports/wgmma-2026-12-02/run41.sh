#!/usr/bin/env bash
# Device run 41 (H200): target/gpu-bundle (its COMMIT: run41.diff on top).
# The dh kernel's epilogue a loop (run 40's ROLL) with each group's z loads
# issued while the group before it computes (BP_WG_DZ_DB=1, the default;
# =0: run 40's ROLL), and the gate/up kernel's epilogue a loop too
# (BP_WG_GU_ROLL=1; default 0). Nsight Compute's stall reasons on the new dh
# kernel; the per-kernel times at T = 2048 and T = 256 (H = 4096), rows
# checked bitwise against the oracle first. Outputs in r41/.
set -u
B=target/gpu-bundle
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
S="${OUT:-out}/r41"; mkdir -p "$S"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat $B/COMMIT; date -u; } > "$S/machine.txt"
bench() { # NAME EXTRA ARGS...
  local n=$1 x=$2; shift 2
  BITPARITY_NVRTC_EXTRA="$x" timeout -k 5 60 $B/gpu_shared_expert-bench --variant wgmma --json "$S/$n.json" "$@" > "$S/$n.log" 2>&1
  echo "exit $?" >> "$S/$n.log"
}
prof() { # NAME KERNEL EXTRA
  BITPARITY_NVRTC_EXTRA="$3" timeout -k 5 90 ncu --clock-control none --launch-count 1 --kernel-name "regex:^$2\$" \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy \
    $B/gpu_shared_expert-bench --variant wgmma --only 2048 --no-check --iters 1 --warmup 0 > "$S/$1.log" 2>&1
  echo "exit $?" >> "$S/$1.log"
}
prof ncu-dz se_gemm_kn_dz ""
prof ncu-gu-roll se_gate_up_fwd "-DBP_WG_GU_ROLL=1"
for T in 2048 256; do
  bench db-$T "" --only $T
  bench nodb-$T "-DBP_WG_DZ_DB=0" --only $T
  bench guroll-$T "-DBP_WG_GU_ROLL=1" --only $T
done
tar -C "$S" -czf "$S/logs.tgz" $(cd "$S" && ls *.log)
for f in "$S"/ncu-*.log; do echo "-- $f"; grep -E "Duration|Compute \(SM\) Throughput|Warp Cycles Per Issued|Issued Warp|No Eligible|represents about|exit" "$f" | head -30; done
for f in "$S"/{db,nodb,guroll}-*.log; do echo "-- $(basename $f)"; grep -E "^ +[0-9]+x|exit|MISMATCH|error" "$f" | head -3; done
rm -rf "$S"/*.log "$S"/*.json
