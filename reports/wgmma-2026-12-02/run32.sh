#!/usr/bin/env bash
# Device run 32 (H200): run 31's illegal address, bisected: T = 2048 x 4096
# x 2048 checked (rows against the oracle) and timed with 3 to 6 stages
# (BITPARITY_NVRTC_EXTRA=-DBP_WG_STAGES=n), and 6 stages at T = 16 under
# compute-sanitizer memcheck. Outputs in r32/.
set -u
B=target/gpu-bundle
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
S="${OUT:-out}/r32"; mkdir -p "$S"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat $B/COMMIT; date -u; } > "$S/machine.txt"
for st in 3 4 5 6; do
  BITPARITY_NVRTC_EXTRA="-DBP_WG_STAGES=$st" timeout -k 5 40 $B/gpu_shared_expert-bench --variant wgmma --quick > "$S/stages-$st.log" 2>&1; echo "exit $?" >> "$S/stages-$st.log"
  echo "== $st"; tail -3 "$S/stages-$st.log"
done
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout -k 5 120 $SAN --tool memcheck --print-limit 5 $B/gpu_shared_expert-bench --variant wgmma --only 16 --no-check --iters 1 --warmup 0 > "$S/memcheck.log" 2>&1; echo "exit $?" >> "$S/memcheck.log"
head -60 "$S/memcheck.log"
