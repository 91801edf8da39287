#!/usr/bin/env bash
# Device run 63 (H200): target/gpu-bundle (its COMMIT: e5a10e7 plus
# run63.diff: run 62's programmatic dependent launches, now with
# BP_WG_PDL 1 (trigger early, wait at the start) and BP_WG_EARLY stages of
# weights before the wait (default 0); and BP_WG_NARROW_ONE (default 1): the
# 64 x 64 tiles' main loop in warpgroup 0 alone with m64n64k16 steps, the dz
# epilogue shared by both warpgroups through shared memory). Judged with the
# defaults (3,000 tier A cases auto, 1,500 with every dh launch on the
# 64 x 64 tiles, the sweep T = 1..4096 auto and narrow, the GPU suite);
# timed with NARROW_ONE 1 and 0 twice at T = 256 and with 1, 2 early stages
# once; the speed table and PyTorch in the same call. Outputs in r63/.
set -u
B=target/gpu-bundle
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
S="${OUT:-out}/r63"; mkdir -p "$S"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat $B/COMMIT; date -u; } > "$S/machine.txt"
chk() { # NAME LIMIT ARGS...
  local n=$1 l=$2; shift 2; local t0=$(date +%s)
  timeout -k 5 -s INT "$l" $B/bitparity check --op shared_expert --subject cuda-wgmma --quiet \
    --json "$S/$n.json" --corpus "$S/corpus" "$@" > "$S/$n.log" 2>&1
  echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/$n.log"
}
chk auto 60 --cases 3000 --seed 630
BITPARITY_TILES=narrow chk narrow 45 --cases 1500 --seed 631
t0=$(date +%s); timeout -k 5 -s INT 45 $B/gpu_shared_expert-bench --variant wgmma --sweep-t 4096 > "$S/sweep.log" 2>&1; echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/sweep.log"
t0=$(date +%s); BITPARITY_TILES=narrow timeout -k 5 -s INT 45 $B/gpu_shared_expert-bench --variant wgmma --sweep-t 4096 > "$S/sweep-narrow.log" 2>&1; echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/sweep-narrow.log"
one() { # NAME T EXTRA
  BITPARITY_NVRTC_EXTRA="$3" timeout -k 5 40 $B/gpu_shared_expert-bench --variant wgmma --only $2 --no-check > "$S/$1.log" 2>&1
  echo "exit $?" >> "$S/$1.log"
}
for k in 1 2; do
  one one1-256-$k 256 "-DBP_WG_NARROW_ONE=1"
  one one0-256-$k 256 "-DBP_WG_NARROW_ONE=0"
done
one early1-256 256 "-DBP_WG_EARLY=1"
one early2-256 256 "-DBP_WG_EARLY=2"
one one0-16 16 "-DBP_WG_NARROW_ONE=0"
one one1-16 16 "-DBP_WG_NARROW_ONE=1"
timeout -k 5 60 $B/gpu_shared_expert-bench --variant wgmma --table --json "$S/ours1.json" > "$S/ours1.log" 2>&1; echo "exit $?" >> "$S/ours1.log"
timeout -k 5 60 python3 benches/torch_shared_expert.py --json "$S/torch1.json" > "$S/torch1.log" 2>&1; echo "exit $?" >> "$S/torch1.log"
t0=$(date +%s); timeout -k 5 110 $B/gpu-test > "$S/gpu-test.log" 2>&1; echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/gpu-test.log"
tar -C "$S" -czf "$S/logs.tgz" $(cd "$S" && ls *.log)
for f in auto narrow; do echo "-- $f"; grep -h "cases in\|^conformance\|^batch\|passed\|failed\|FAIL\|exit" "$S/$f.log" | head -6; done
tail -2 "$S/sweep.log" "$S/sweep-narrow.log"
for f in $(cd "$S" && ls one*.log early*.log); do echo "-- $f"; grep -hE "^ +[0-9]+x4096|exit [^0]|rror" "$S/$f" | head -3; done
grep -h -A5 "T x H x F" "$S/ours1.log" | head -6; grep -h "exit\|rror" "$S/ours1.log" | head -2; grep -h '^{' "$S/torch1.log" | cut -c1-60,200-330
grep -E "test result|FAILED|panicked|exit" "$S/gpu-test.log" | head
tar -C "$S" -czf "$S/json.tgz" $(cd "$S" && ls *.json 2>/dev/null)
rm -rf "$S"/*.log "$S"/*.json "$S/corpus"
