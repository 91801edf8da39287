#!/usr/bin/env bash
# Device run 30 (H200), at the bundle's commit: the first run of cuda-wgmma.
# Judged first (300 tier A cases; then 1,000 more and 8 at reference
# shapes), then timed with PyTorch alongside (the speed table's shapes).
# Outputs in r30/.
set -u
B=target/gpu-bundle
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
S="${OUT:-out}/r30"; mkdir -p "$S"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; cat $B/COMMIT; date -u; } > "$S/machine.txt"
chk() { # NAME LIMIT ARGS...
  local n=$1 l=$2; shift 2
  timeout -s INT "$l" $B/bitparity check --op shared_expert --subject cuda-wgmma --quiet \
    --json "$S/$n.json" --markdown "$S/$n.md" --corpus "$S/corpus" "$@" > "$S/$n.log" 2>&1
  echo "exit $?" >> "$S/$n.log"
}
chk smoke 40 --cases 300 --seed 330
timeout 90 $B/gpu_shared_expert-bench --variant wgmma --table --json "$S/ours.json" > "$S/ours.log" 2>&1; echo "exit $?" >> "$S/ours.log"
timeout 60 python3 benches/torch_shared_expert.py --json "$S/torch.json" > "$S/torch.log" 2>&1; echo "exit $?" >> "$S/torch.log"
chk wg-a 60 --cases 1000 --seed 331
BITPARITY_SHAPES=reference BITPARITY_MAX_T=4096 chk wg-b 60 --property batch-invariance \
  --property determinism --property offset-stride --property conformance --cases 8 --seed 332
tar -C "$S/.." -czf "$S/../run30.tgz" r30
cat "$S/ours.log" | tail -40; grep -h "passed\|failed\|FAIL\|exit\|cases in" "$S"/*.log | head -30
