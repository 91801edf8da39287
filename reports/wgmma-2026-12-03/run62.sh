#!/usr/bin/env bash
# Device run 62 (H200): target/gpu-bundle (its COMMIT: e5a10e7 plus
# run62.diff: the subject launches cuda-wgmma's kernels as programmatic
# dependent launches, src/subject/cuda/launch.rs; the kernels trigger their
# dependents early, load their first stages of weights, then wait; the
# switch BP_WG_PDL: 0 wait at the start, no trigger; 1 trigger, wait at the
# start; 2 (default) also the weights before the wait). Judged (3,000 tier
# A cases, the sweep T = 1..4096, the GPU suite) with the default; timed
# with each mode twice at T = 256, once at 16 and 2048; the speed table and
# PyTorch in the same call. Outputs in r62/.
set -u
B=target/gpu-bundle
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
S="${OUT:-out}/r62"; mkdir -p "$S"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat $B/COMMIT; date -u; } > "$S/machine.txt"
t0=$(date +%s)
timeout -k 5 -s INT 60 $B/bitparity check --op shared_expert --subject cuda-wgmma --quiet --cases 3000 --seed 620 \
  --json "$S/auto.json" --corpus "$S/corpus" > "$S/auto.log" 2>&1
echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/auto.log"
t0=$(date +%s); timeout -k 5 -s INT 45 $B/gpu_shared_expert-bench --variant wgmma --sweep-t 4096 > "$S/sweep.log" 2>&1; echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/sweep.log"
one() { # MODE T K
  BITPARITY_NVRTC_EXTRA="-DBP_WG_PDL=$1" timeout -k 5 40 $B/gpu_shared_expert-bench --variant wgmma --only $2 --no-check > "$S/p$1-$2-$3.log" 2>&1
  echo "exit $?" >> "$S/p$1-$2-$3.log"
}
for k in 1 2; do for p in 0 1 2; do one $p 256 $k; done; done
for p in 0 2; do for T in 16 2048; do one $p $T 1; done; done
timeout -k 5 60 $B/gpu_shared_expert-bench --variant wgmma --table --json "$S/ours1.json" > "$S/ours1.log" 2>&1; echo "exit $?" >> "$S/ours1.log"
timeout -k 5 60 python3 benches/torch_shared_expert.py --json "$S/torch1.json" > "$S/torch1.log" 2>&1; echo "exit $?" >> "$S/torch1.log"
t0=$(date +%s); timeout -k 5 110 $B/gpu-test > "$S/gpu-test.log" 2>&1; echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/gpu-test.log"
tar -C "$S" -czf "$S/logs.tgz" $(cd "$S" && ls *.log)
grep -h "cases in\|^conformance\|^batch\|passed\|failed\|FAIL\|exit" "$S/auto.log" | head -6
tail -2 "$S/sweep.log"
for f in $(cd "$S" && ls p*.log); do echo "-- $f"; grep -hE "^ +[0-9]+x4096|exit [^0]|rror" "$S/$f" | head -3; done
grep -h -A5 "T x H x F" "$S/ours1.log" | head -6; grep -h "exit\|rror" "$S/ours1.log" | head -2; grep -h '^{' "$S/torch1.log" | cut -c1-60,200-330
grep -E "test result|FAILED|panicked|exit" "$S/gpu-test.log" | head
tar -C "$S" -czf "$S/json.tgz" $(cd "$S" && ls *.json 2>/dev/null)
rm -rf "$S"/*.log "$S"/*.json "$S/corpus"
