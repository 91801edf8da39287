#!/usr/bin/env bash
# Device run 40 (H200): target/gpu-bundle (its COMMIT, with the experiment
# switches BP_WG_ZPF, BP_WG_DZ_ROLL and BP_WG_DZ_CHEAP in the dh kernel's
# source, all off by default). Why is dh + dz (se_gemm_kn_dz) at half of
# dX's rate? Nsight Compute's warp stall reasons on it and on dX's kernel,
# then the per-kernel times at T = 2048 and T = 256 (H = 4096) with each
# switch through BITPARITY_NVRTC_EXTRA: ZPF=16 (the copier prefetches the
# tile's z rows into L2 16 stages before its end), ROLL (the epilogue a loop,
# not 128 inlined sigmoids: 46 KiB of code, not 213), both, and CHEAP (no
# sigmoid: wrong bits, timing only, unchecked). Outputs in r40/.
set -u
B=target/gpu-bundle
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
S="${OUT:-out}/r40"; mkdir -p "$S"
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
prof ncu-dx se_gemm_kn_f32 ""
prof ncu-dz-roll se_gemm_kn_dz "-DBP_WG_DZ_ROLL=1"
for T in 2048 256; do
  bench base-$T "" --only $T
  bench zpf-$T "-DBP_WG_ZPF=16" --only $T
  bench roll-$T "-DBP_WG_DZ_ROLL=1" --only $T
  bench rollzpf-$T "-DBP_WG_DZ_ROLL=1 -DBP_WG_ZPF=16" --only $T
  bench cheap-$T "-DBP_WG_DZ_CHEAP=1" --only $T --no-check
done
tar -C "$S" -czf "$S/logs.tgz" $(cd "$S" && ls *.log)
for f in "$S"/ncu-*.log; do echo "-- $f"; grep -E "Duration|Compute \(SM\) Throughput|Stall|Warp Cycles Per Issued|Issued Warp|No Eligible|exit" "$f" | head -30; done
for f in "$S"/{base,zpf,roll,rollzpf,cheap}-*.log; do echo "-- $(basename $f)"; grep -E "^ +[0-9]+x|exit|MISMATCH|error" "$f" | head -3; done
rm -rf "$S"/*.log "$S"/*.json
