#!/usr/bin/env bash
# Device run 57 (H200): target/gpu-bundle (its COMMIT: the build committed
# after this run: dh on 64 x 64 tiles where they finish first, 8 stages).
# Judgement: 10,000 tier A cases (auto: dh on the narrow tiles, the other
# kernels on the small ones), the sweep T = 1..4096 (run 56 judged the same
# build but the narrow tiles' stages: small tiles, GPU suite). Speed: the
# table and PyTorch. Short: the device budget left. Outputs in r57/.
set -u
B=target/gpu-bundle
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
S="${OUT:-out}/r57"; mkdir -p "$S"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat $B/COMMIT; date -u; } > "$S/machine.txt"
chk() { # NAME LIMIT ARGS...
  local n=$1 l=$2; shift 2; local t0=$(date +%s)
  timeout -k 5 -s INT "$l" $B/bitparity check --op shared_expert --subject cuda-wgmma --quiet \
    --json "$S/$n.json" --corpus "$S/corpus" "$@" > "$S/$n.log" 2>&1
  echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/$n.log"
}
chk smoke 30 --cases 300 --seed 570
for k in 1; do
  timeout -k 5 60 $B/gpu_shared_expert-bench --variant wgmma --table --json "$S/ours$k.json" > "$S/ours$k.log" 2>&1; echo "exit $?" >> "$S/ours$k.log"
  timeout -k 5 60 python3 benches/torch_shared_expert.py --json "$S/torch$k.json" > "$S/torch$k.log" 2>&1; echo "exit $?" >> "$S/torch$k.log"
done
t0=$(date +%s); timeout -k 5 -s INT 45 $B/gpu_shared_expert-bench --variant wgmma --sweep-t 4096 > "$S/sweep.log" 2>&1; echo "exit $? in $(( $(date +%s) - t0 )) s" >> "$S/sweep.log"
chk auto 130 --cases 10000 --seed 571
tar -C "$S" -czf "$S/logs.tgz" $(cd "$S" && ls *.log)
for f in smoke auto; do echo "-- $f"; grep -h "cases in\|^conformance\|^batch\|passed\|failed\|FAIL\|exit" "$S/$f.log" | head -6; done
tail -2 "$S/sweep.log"
for k in 1; do echo "-- $k"; grep -h -A5 "T x H x F" "$S/ours$k.log" | head -6; grep -h "exit\|rror" "$S/ours$k.log" | head -2; grep -h '^{' "$S/torch$k.log" | cut -c1-60,200-330; done
tar -C "$S" -czf "$S/json.tgz" $(cd "$S" && ls *.json 2>/dev/null)
rm -rf "$S"/*.log "$S"/*.json "$S/corpus"
