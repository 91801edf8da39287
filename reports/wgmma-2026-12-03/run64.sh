#!/usr/bin/env bash
# Device run 64 (H200): target/gpu-bundle (its COMMIT: 94ee19a, the
# programmatic dependent launches and the one-warpgroup 64 x 64 tiles, plus
# run64.diff: a switch BP_WG_EARLY, the stages of weights requested before
# the wait, default 2, the committed code). Judgement of the commit: 10,000
# tier A cases (auto), 2,000 with every dh launch on the 64 x 64 tiles, the
# sweep T = 1..4096 (auto and narrow), the GPU suite; the speed table and
# PyTorch twice, alternating; BP_WG_EARLY 0 against 2, twice each, at
# T = 256. Outputs in r64/.
set -u
B=target/gpu-bundle
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
S="${OUT:-out}/r64"; mkdir -p "$S"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat $B/COMMIT; date -u; } > "$S/machine.txt"
chk() { # NAME LIMIT ARGS...
  local n=$1 l=$2; shift 2; local t0=$(date +%s)
  timeout -k 5 -s INT "$l" $B/bitparity check --op shared_expert --subject cuda-wgmma --quiet \
    --json "$S/$n.json" --corpus "$S/corpus" "$@" > "$S/$n.log" 2>&1
  echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/$n.log"
}
chk auto 140 --cases 10000 --seed 640
BITPARITY_TILES=narrow chk narrow 45 --cases 2000 --seed 641
t0=$(date +%s); timeout -k 5 -s INT 45 $B/gpu_shared_expert-bench --variant wgmma --sweep-t 4096 > "$S/sweep.log" 2>&1; echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/sweep.log"
t0=$(date +%s); BITPARITY_TILES=narrow timeout -k 5 -s INT 45 $B/gpu_shared_expert-bench --variant wgmma --sweep-t 4096 > "$S/sweep-narrow.log" 2>&1; echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/sweep-narrow.log"
for k in 1 2; do
  timeout -k 5 60 $B/gpu_shared_expert-bench --variant wgmma --table --json "$S/ours$k.json" > "$S/ours$k.log" 2>&1; echo "exit $?" >> "$S/ours$k.log"
  timeout -k 5 60 python3 benches/torch_shared_expert.py --json "$S/torch$k.json" > "$S/torch$k.log" 2>&1; echo "exit $?" >> "$S/torch$k.log"
done
for k in 1 2; do for e in 0 2; do
  BITPARITY_NVRTC_EXTRA="-DBP_WG_EARLY=$e" timeout -k 5 40 $B/gpu_shared_expert-bench --variant wgmma --only 256 --no-check > "$S/early$e-256-$k.log" 2>&1
  echo "exit $?" >> "$S/early$e-256-$k.log"
done; done
t0=$(date +%s); timeout -k 5 110 $B/gpu-test > "$S/gpu-test.log" 2>&1; echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/gpu-test.log"
tar -C "$S" -czf "$S/logs.tgz" $(cd "$S" && ls *.log)
for f in auto narrow; do echo "-- $f"; grep -h "cases in\|^conformance\|^batch\|passed\|failed\|FAIL\|exit" "$S/$f.log" | head -6; done
for f in sweep sweep-narrow; do tail -n 2 "$S/$f.log"; done
for f in $(cd "$S" && ls early*.log); do echo "-- $f"; grep -hE "^ +[0-9]+x4096|exit [^0]|rror" "$S/$f" | head -3; done
for k in 1 2; do grep -h -A5 "T x H x F" "$S/ours$k.log" | head -6; grep -h "exit\|rror" "$S/ours$k.log" | head -2; grep -h '^{' "$S/torch$k.log" | cut -c1-60,200-330; done
grep -E "test result|FAILED|panicked|exit" "$S/gpu-test.log" | head
tar -C "$S" -czf "$S/json.tgz" $(cd "$S" && ls *.json 2>/dev/null)
rm -rf "$S"/*.log "$S"/*.json "$S/corpus"
