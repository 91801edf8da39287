#!/usr/bin/env bash
# One device call on main after the shared expert, shard/devices and the
# three-way seqwise bench: the GPU suites of every op, the corpus replay on
# the GPU, a tier B check on cuda of every op.
set -u
B="$(cd "$(dirname "$0")" && pwd)"
cd "$B/../.."
R=$OUT/r; mkdir -p $R
export PYTHONUNBUFFERED=1
X="bash ci/gpu-nightly exec $B"
{
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
cat $B/COMMIT 2>/dev/null; date -u
echo "== gpu-test (every op), 100 generated cases per property"
BITPARITY_GPU_CASES=100 timeout 200 $X gpu-test > $R/gpu-test.log 2>&1; echo "gpu-test rc=$?"
grep -E "^test |test result|judged" $R/gpu-test.log | tail -40
date -u
echo "== replay regressions/ on every subject"
timeout 60 $X bitparity replay regressions > $R/replay.log 2>&1; echo "replay rc=$?"; tail -6 $R/replay.log
date -u
echo "== check --subject cuda, every op, 120 s"
timeout 180 $X bitparity check --subject cuda --seconds 120 --quiet --no-save \
  --property conformance --property offset-stride --property batch-invariance --property determinism --property validation \
  --json $R/check-cuda.json --markdown $R/check-cuda.md > $R/check-cuda.txt 2>&1; echo "check rc=$?"
grep -E "cases in|cuda  |passed|FAILED|NOTHING" $R/check-cuda.txt | head -30
date -u
} > $R/run.log 2>&1
tar -C $OUT -czf $OUT/final2.tar.gz r
cp $R/run.log $OUT/run.log
tail -100 $OUT/run.log
