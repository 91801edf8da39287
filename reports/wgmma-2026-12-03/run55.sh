#!/usr/bin/env bash
# Device run 55 (H200): target/gpu-bundle (its COMMIT: 64 x 64 tiles for
# the [k][n] GEMMs, the _n64 kernels, taken by the tile rule for dh at T =
# 256 and dh, dX at T = 16). Judgement first: 300 tier A cases (auto: the
# narrow tiles for dh and dX), the GPU suite, the sweep T = 1..4096, 4,000
# tier A cases (auto), 1,500 on the small and 1,500 on the large tiles.
# Speed: the table and PyTorch alternating twice; T = 256 and 16 with every
# launch on the small tiles (the committed rule's choice there) in the same
# call. Outputs in r55/.
set -u
B=target/gpu-bundle
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
S="${OUT:-out}/r55"; mkdir -p "$S"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat $B/COMMIT; date -u; } > "$S/machine.txt"
chk() { # NAME LIMIT ARGS...
  local n=$1 l=$2; shift 2; local t0=$(date +%s)
  timeout -k 5 -s INT "$l" $B/bitparity check --op shared_expert --subject cuda-wgmma --quiet \
    --json "$S/$n.json" --corpus "$S/corpus" "$@" > "$S/$n.log" 2>&1
  echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/$n.log"
}
chk smoke 30 --cases 300 --seed 550
for k in 1 2; do
  timeout -k 5 60 $B/gpu_shared_expert-bench --variant wgmma --table --json "$S/ours$k.json" > "$S/ours$k.log" 2>&1; echo "exit $?" >> "$S/ours$k.log"
  timeout -k 5 60 python3 benches/torch_shared_expert.py --json "$S/torch$k.json" > "$S/torch$k.log" 2>&1; echo "exit $?" >> "$S/torch$k.log"
done
for T in 256 16; do
  BITPARITY_TILES=small timeout -k 5 60 $B/gpu_shared_expert-bench --variant wgmma --only $T --json "$S/small-$T.json" > "$S/small-$T.log" 2>&1; echo "exit $?" >> "$S/small-$T.log"
  BITPARITY_TILES=narrow timeout -k 5 60 $B/gpu_shared_expert-bench --variant wgmma --only $T --json "$S/narrow-$T.json" > "$S/narrow-$T.log" 2>&1; echo "exit $?" >> "$S/narrow-$T.log"
done
t0=$(date +%s); timeout -k 5 110 $B/gpu-test > "$S/gpu-test.log" 2>&1; echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/gpu-test.log"
t0=$(date +%s); timeout -k 5 -s INT 45 $B/gpu_shared_expert-bench --variant wgmma --sweep-t 4096 > "$S/sweep.log" 2>&1; echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/sweep.log"
chk auto 50 --cases 4000 --seed 551
BITPARITY_TILES=small chk small 30 --cases 1500 --seed 552
BITPARITY_TILES=large chk large 30 --cases 1500 --seed 553
tar -C "$S" -czf "$S/logs.tgz" $(cd "$S" && ls *.log)
for f in smoke auto small large; do echo "-- $f"; grep -h "cases in\|^conformance\|^batch\|passed\|failed\|FAIL\|exit" "$S/$f.log" | head -6; done
tail -2 "$S/sweep.log"
grep -E "test result|FAILED|panicked|exit" "$S/gpu-test.log" | head
for k in 1 2; do echo "-- $k"; grep -h -A5 "T x H x F" "$S/ours$k.log" | head -6; grep -h "exit\|rror" "$S/ours$k.log" | head -2; grep -h '^{' "$S/torch$k.log" | cut -c1-60,200-330; done
for f in small-256 narrow-256 small-16 narrow-16; do echo "-- $f"; grep -hE "^ +[0-9]+x4096|exit|rror" "$S/$f.log" | head -3; done
tar -C "$S" -czf "$S/json.tgz" $(cd "$S" && ls *.json 2>/dev/null)
rm -rf "$S"/*.log "$S"/*.json "$S/corpus"
