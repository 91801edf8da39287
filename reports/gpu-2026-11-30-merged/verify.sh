#!/usr/bin/env bash
# After the router fix (fwd_warp_words): the sanitizer on the faulting case,
# the GPU suites of every op, and a check of every op on cuda.
set -u
B="$(cd "$(dirname "$0")" && pwd)"
cd "$B/../.."
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
S=1796056563680363038
{
date -u
echo "== memcheck on case 4657 of seed $S"
timeout 90 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --print-limit 4 $B/bitparity check --op router --seed $S --case 4657 --subject cuda --property conformance --no-save --quiet 2>&1 | grep -E "=====|conformance|FAILED|passed" | head -20
echo "== gpu-test (every op), 60 generated cases per property"
BITPARITY_GPU_CASES=60 timeout 150 $B/gpu-test > $OUT/gpu-test.log 2>&1; echo "gpu-test rc=$?"; grep -E "^test |test result" $OUT/gpu-test.log | tail -30
echo "== check --subject cuda, every op, seed $S, 150 s"
timeout 200 $B/bitparity check --subject cuda --seed $S --seconds 150 --quiet --no-save \
  --property conformance --property offset-stride --property batch-invariance --property determinism --property validation \
  --json $OUT/check-cuda.json --markdown $OUT/check-cuda.md > $OUT/check-cuda.txt 2>&1; echo "check rc=$?"
grep -E "cases in|cuda  |passed|FAILED|NOTHING" $OUT/check-cuda.txt | head -30
date -u
} > $OUT/verify.log 2>&1
cat $OUT/verify.log
