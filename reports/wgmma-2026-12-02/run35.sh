#!/usr/bin/env bash
# Device run 35 (H200), at the bundle's commit: cuda-wgmma's 128 x 256
# tiles judged on tier A's small cases (BITPARITY_TILES=large: every launch
# takes them; with auto those cases take the 64 x 128 ones), every property,
# for 40 s (what the session's device time left). Outputs in r35/.
set -u
B=target/gpu-bundle
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
S="${OUT:-out}/r35"; mkdir -p "$S"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat $B/COMMIT; date -u; } > "$S/machine.txt"
BITPARITY_TILES=large timeout -k 5 -s INT 50 $B/bitparity check --op shared_expert --subject cuda-wgmma --quiet \
  --seconds 40 --seed 380 --json "$S/large.json" --markdown "$S/large.md" --corpus "$S/corpus" > "$S/large.log" 2>&1
echo "exit $?" >> "$S/large.log"; rm -rf "$S/corpus"
sed -n 1,16p "$S/large.log"; tail -3 "$S/large.log"
