#!/usr/bin/env bash
# Device run 65 (H200): target/gpu-bundle (its COMMIT: 94ee19a plus
# run65.diff: a switch BP_WG_DZ_PRELOAD, default 1: the 64 x 64 tiles' dz
# epilogue requests a thread's z values before its barrier, warpgroup 1
# while warpgroup 0 runs the main loop, and computes its 8 pairs unrolled;
# 0: one pair a turn, the committed code; and run 64's BP_WG_EARLY, default
# 2, the committed code). Timed first (1 against 0, twice at T = 256, once
# at 16), then judged with the default: 10,000 tier A cases, 1,500 with
# every dh launch on the 64 x 64 tiles, the sweep T = 1..4096 (auto and
# narrow), the speed table and PyTorch, the GPU suite. Outputs in r65/.
set -u
B=target/gpu-bundle
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
S="${OUT:-out}/r65"; mkdir -p "$S"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat $B/COMMIT; date -u; } > "$S/machine.txt"
one() { # NAME T EXTRA
  BITPARITY_NVRTC_EXTRA="$3" timeout -k 5 40 $B/gpu_shared_expert-bench --variant wgmma --only $2 --no-check > "$S/$1.log" 2>&1
  echo "exit $?" >> "$S/$1.log"
}
for k in 1 2; do for v in 1 0; do one pre$v-256-$k 256 "-DBP_WG_DZ_PRELOAD=$v"; done; done
for v in 1 0; do one pre$v-16 16 "-DBP_WG_DZ_PRELOAD=$v"; done
chk() { # NAME LIMIT ARGS...
  local n=$1 l=$2; shift 2; local t0=$(date +%s)
  timeout -k 5 -s INT "$l" $B/bitparity check --op shared_expert --subject cuda-wgmma --quiet \
    --json "$S/$n.json" --corpus "$S/corpus" "$@" > "$S/$n.log" 2>&1
  echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/$n.log"
}
chk auto 140 --cases 10000 --seed 650
BITPARITY_TILES=narrow chk narrow 40 --cases 1500 --seed 651
t0=$(date +%s); timeout -k 5 -s INT 45 $B/gpu_shared_expert-bench --variant wgmma --sweep-t 4096 > "$S/sweep.log" 2>&1; echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/sweep.log"
t0=$(date +%s); BITPARITY_TILES=narrow timeout -k 5 -s INT 45 $B/gpu_shared_expert-bench --variant wgmma --sweep-t 4096 > "$S/sweep-narrow.log" 2>&1; echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/sweep-narrow.log"
timeout -k 5 60 $B/gpu_shared_expert-bench --variant wgmma --table --json "$S/ours1.json" > "$S/ours1.log" 2>&1; echo "exit $?" >> "$S/ours1.log"
timeout -k 5 60 python3 benches/torch_shared_expert.py --json "$S/torch1.json" > "$S/torch1.log" 2>&1; echo "exit $?" >> "$S/torch1.log"
t0=$(date +%s); timeout -k 5 110 $B/gpu-test > "$S/gpu-test.log" 2>&1; echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/gpu-test.log"
tar -C "$S" -czf "$S/logs.tgz" $(cd "$S" && ls *.log)
for f in $(cd "$S" && ls pre*.log); do echo "-- $f"; grep -hE "^ +[0-9]+x4096|exit [^0]|rror" "$S/$f" | head -3; done
for f in auto narrow; do echo "-- $f"; grep -h "cases in\|^conformance\|^batch\|passed\|failed\|FAIL\|exit" "$S/$f.log" | head -6; done
for f in sweep sweep-narrow; do tail -n 2 "$S/$f.log"; done
grep -h -A5 "T x H x F" "$S/ours1.log" | head -6; grep -h "exit\|rror" "$S/ours1.log" | head -2; grep -h '^{' "$S/torch1.log" | cut -c1-60,200-330
grep -E "test result|FAILED|panicked|exit" "$S/gpu-test.log" | head
tar -C "$S" -czf "$S/json.tgz" $(cd "$S" && ls *.json 2>/dev/null)
rm -rf "$S"/*.log "$S"/*.json "$S/corpus"
