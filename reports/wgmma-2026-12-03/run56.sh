#!/usr/bin/env bash
# Device run 56 (H200): target/gpu-bundle (its COMMIT: the narrow 64 x 64
# tiles for dh only, as committed after this run, plus a switch
# BP_WG_STAGE_KIB, the 64-row tiles' bytes of stages, default 192).
# Judgement of the build: 300 + 4,000 tier A cases (auto), 1,000 on the
# small tiles, the GPU suite, the sweep T = 1..4096. Speed: the table and
# PyTorch alternating twice. Then whether the 64-row kernels wait on
# latency: T = 256 and 16 with 192, 128, 96 and 72 KiB of stages. Outputs in
# r56/.
set -u
B=target/gpu-bundle
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
S="${OUT:-out}/r56"; mkdir -p "$S"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat $B/COMMIT; date -u; } > "$S/machine.txt"
chk() { # NAME LIMIT ARGS...
  local n=$1 l=$2; shift 2; local t0=$(date +%s)
  timeout -k 5 -s INT "$l" $B/bitparity check --op shared_expert --subject cuda-wgmma --quiet \
    --json "$S/$n.json" --corpus "$S/corpus" "$@" > "$S/$n.log" 2>&1
  echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/$n.log"
}
chk smoke 30 --cases 300 --seed 560
for k in 1 2; do
  timeout -k 5 60 $B/gpu_shared_expert-bench --variant wgmma --table --json "$S/ours$k.json" > "$S/ours$k.log" 2>&1; echo "exit $?" >> "$S/ours$k.log"
  timeout -k 5 60 python3 benches/torch_shared_expert.py --json "$S/torch$k.json" > "$S/torch$k.log" 2>&1; echo "exit $?" >> "$S/torch$k.log"
done
for kib in 192 128 96 72; do for T in 256 16; do
  BITPARITY_NVRTC_EXTRA="-DBP_WG_STAGE_KIB=$kib" timeout -k 5 60 $B/gpu_shared_expert-bench --variant wgmma --only $T --no-check > "$S/st$kib-$T.log" 2>&1; echo "exit $?" >> "$S/st$kib-$T.log"
done; done
t0=$(date +%s); timeout -k 5 110 $B/gpu-test > "$S/gpu-test.log" 2>&1; echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/gpu-test.log"
t0=$(date +%s); timeout -k 5 -s INT 45 $B/gpu_shared_expert-bench --variant wgmma --sweep-t 4096 > "$S/sweep.log" 2>&1; echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/sweep.log"
chk auto 50 --cases 4000 --seed 561
BITPARITY_TILES=small chk small 25 --cases 1000 --seed 562
tar -C "$S" -czf "$S/logs.tgz" $(cd "$S" && ls *.log)
for f in smoke auto small; do echo "-- $f"; grep -h "cases in\|^conformance\|^batch\|passed\|failed\|FAIL\|exit" "$S/$f.log" | head -6; done
tail -2 "$S/sweep.log"
grep -E "test result|FAILED|panicked|exit" "$S/gpu-test.log" | head
for k in 1 2; do echo "-- $k"; grep -h -A5 "T x H x F" "$S/ours$k.log" | head -6; grep -h "exit\|rror" "$S/ours$k.log" | head -2; grep -h '^{' "$S/torch$k.log" | cut -c1-60,200-330; done
for kib in 192 128 96 72; do for T in 256 16; do echo "-- st$kib-$T"; grep -hE "^ +[0-9]+x4096|exit [^0]|rror" "$S/st$kib-$T.log" | head -3; done; done
tar -C "$S" -czf "$S/json.tgz" $(cd "$S" && ls *.json 2>/dev/null)
rm -rf "$S"/*.log "$S"/*.json "$S/corpus"
