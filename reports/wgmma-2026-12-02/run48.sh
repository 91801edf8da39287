#!/usr/bin/env bash
# Device run 48 (H200): target/gpu-bundle (its COMMIT): two review changes
# after run 44 that are not byte-for-byte the judged build: the GEMM
# kernels' output stores moved into gemm() (the same stores; the PTX
# differs in register numbering and order) and the subject's launch pushing
# the tensor-map parameters in one place. The GPU suite, 300 + 2,000 tier A
# cases, and the rows check at T = 2048 and 256. Outputs in r48/.
set -u
B=target/gpu-bundle
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
S="${OUT:-out}/r48"; mkdir -p "$S"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat $B/COMMIT; date -u; } > "$S/machine.txt"
chk() { # NAME LIMIT ARGS...
  local n=$1 l=$2; shift 2; local t0=$(date +%s)
  timeout -k 5 -s INT "$l" $B/bitparity check --op shared_expert --subject cuda-wgmma --quiet \
    --json "$S/$n.json" --corpus "$S/corpus" "$@" > "$S/$n.log" 2>&1
  echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/$n.log"
}
t0=$(date +%s); timeout -k 5 110 $B/gpu-test > "$S/gpu-test.log" 2>&1; echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/gpu-test.log"
chk smoke 30 --cases 300 --seed 480
chk auto 35 --cases 2000 --seed 481
for T in 2048 256; do
  timeout -k 5 30 $B/gpu_shared_expert-bench --variant wgmma --only $T > "$S/rows-$T.log" 2>&1; echo "exit $?" >> "$S/rows-$T.log"
done
tar -C "$S" -czf "$S/logs.tgz" $(cd "$S" && ls *.log)
grep -E "test result|FAILED|panicked|exit" "$S/gpu-test.log" | head
for f in smoke auto; do echo "-- $f"; grep -h "cases in\|^conformance\|^batch\|passed\|failed\|FAIL\|exit" "$S/$f.log" | head -6; done
for T in 2048 256; do grep -hE "^ +[0-9]+x|exit" "$S/rows-$T.log"; done
rm -rf "$S"/*.log "$S/corpus" "$S/smoke.json"
