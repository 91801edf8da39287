#!/usr/bin/env bash
# Device run 3 (H200): cuda-tc with 64 x 64 warp tiles: the speed table,
# PyTorch alongside, on a quiet GPU; then judged again (300 + 1,000 tier A
# cases, 8 at reference shapes). Outputs in r3/.
set -u
B=target/gpu-bundle
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
S="${OUT:-out}/r3"; mkdir -p "$S"; cp $B/COMMIT "$S/"; date -u > "$S/date.txt"
timeout 60 python3 benches/torch_shared_expert.py --json "$S/torch.json" > "$S/torch.log" 2>&1; echo "exit $?" >> "$S/torch.log"
timeout 60 $B/gpu_shared_expert-bench --variant tc --table --json "$S/ours.json" > "$S/ours.log" 2>&1; echo "exit $?" >> "$S/ours.log"
chk() { # NAME LIMIT ARGS...
  local n=$1 l=$2; shift 2
  timeout -s INT "$l" $B/bitparity check --op shared_expert --subject cuda-tc --quiet \
    --json "$S/$n.json" --markdown "$S/$n.md" --corpus "$S/corpus" "$@" > "$S/$n.log" 2>&1
  echo "exit $?" >> "$S/$n.log"
}
chk smoke 20 --cases 300 --seed 220
chk tc-a 30 --cases 1000 --seed 221
BITPARITY_SHAPES=reference BITPARITY_MAX_T=4096 chk tc-b 30 --property batch-invariance \
  --property determinism --property offset-stride --cases 8 --seed 222
tar -C "$S/.." -czf "$S/../run3.tgz" r3
tail -7 "$S/ours.log"; grep -h "passed\|failed\|exit\|cases in" "$S"/*.log | head -20
