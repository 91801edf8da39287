#!/usr/bin/env bash
# Device run 1 (H200): the tensor-core kernels (subject cuda-tc, profile
# mma16-h100) judged by every property: a smoke run of 300 cases, 10,000
# cases at tier A, 16 at reference shapes (batch invariance, determinism,
# offset/stride), then the speed table, PyTorch and ours in one run.
set -u
B=target/gpu-bundle
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
O="${OUT:-out}/r"; mkdir -p "$O"
cp "$B/COMMIT" "$O/"; date -u > "$O/date.txt"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> "$O/date.txt"
chk() { # NAME LIMIT ARGS...
  local n=$1 l=$2; shift 2
  timeout -s INT "$l" $B/bitparity check --op shared_expert --subject cuda-tc --quiet \
    --json "$O/$n.json" --markdown "$O/$n.md" --corpus "$O/corpus" "$@" > "$O/$n.log" 2>&1
  echo "exit $?" >> "$O/$n.log"; echo "== $n"; grep -v "^  |" "$O/$n.log" | tail -25
}
chk smoke 90 --cases 300 --seed 200
chk tc-a 200 --cases 10000 --seed 201
BITPARITY_SHAPES=reference BITPARITY_MAX_T=4096 chk tc-b 120 --property batch-invariance \
  --property determinism --property offset-stride --cases 16 --seed 202
timeout 100 python3 benches/torch_shared_expert.py --json "$O/torch.json" > "$O/torch.log" 2>&1; echo "exit $?" >> "$O/torch.log"
timeout 150 $B/gpu_shared_expert-bench --variant tc --table --json "$O/ours.json" > "$O/ours.log" 2>&1; echo "exit $?" >> "$O/ours.log"
if ! grep -q "^exit 0" "$O/ours.log"; then
  timeout 90 $B/gpu_shared_expert-bench --variant tc --table --no-check --json "$O/ours-nocheck.json" > "$O/ours-nocheck.log" 2>&1
  echo "exit $?" >> "$O/ours-nocheck.log"; tail -12 "$O/ours-nocheck.log"
fi
grep -v Warn "$O/torch.log" | tail -12; tail -14 "$O/ours.log"
tar czf "$O/../run1.tgz" -C "$O/.." r
