#!/usr/bin/env bash
# Find the router case that faults (CUDA_ERROR_ILLEGAL_ADDRESS) in the
# check of seed 1796056563680363038 near case 4640.
set -u
B="$(cd "$(dirname "$0")" && pwd)"
cd "$B/../.."
X="bash ci/gpu-nightly exec $B"
S=1796056563680363038
{
date -u
which compute-sanitizer || ls /usr/local/cuda/bin 2>/dev/null | head -30
echo "== router alone, same seed, 5000 cases, 16 threads"
timeout 60 $X bitparity check --op router --seed $S --cases 5000 --subject cuda --property conformance --no-save --quiet > $OUT/router5000.txt 2>&1; echo "rc=$?"; grep -E "cases in|FAILED|failed on" $OUT/router5000.txt | head -8
echo "== router alone, same seed, 5000 cases, 1 thread"
RAYON_NUM_THREADS=1 timeout 90 $X bitparity check --op router --seed $S --cases 5000 --subject cuda --property conformance --no-save --quiet > $OUT/router5000-1t.txt 2>&1; echo "rc=$?"; grep -E "cases in|FAILED|failed on" $OUT/router5000-1t.txt | head -8
echo "== one case a process, 4630..4660"
for n in $(seq 4630 4660); do
  timeout 20 $X bitparity check --op router --seed $S --case $n --subject cuda --property conformance --property determinism --property offset-stride --no-save --quiet > $OUT/one.txt 2>&1; rc=$?
  if [ $rc != 0 ]; then echo "case $n rc=$rc"; grep -E "^  (forward|backward)|^  \|" $OUT/one.txt | head -6; cp $OUT/one.txt $OUT/case-$n.txt; fi
done
date -u
} > $OUT/hunt.log 2>&1
cat $OUT/hunt.log | tail -60
