#!/usr/bin/env bash
# Device run 25 (H200), at the bundle's commit (`bitparity mutants
# --property`): shared_expert_tc.cu's two cp.async race mutants at tier B's
# reference shapes (H x F = 4096 x 2048 or 7168 x 2048, T up to 1100),
# judged by the properties that compare the kernel with itself (run 22's
# attempt ran conformance there, whose CPU oracle takes minutes a case, and
# gave no verdict). Beside it, the baseline: `bitparity check` of the
# original kernel (`cuda-tc`) with the same properties and shapes.
set -u
D=reports/mutants-2026-12-02/run-25
. scripts/gpu-camp
export BITPARITY_SHAPES=reference
P="--property determinism --property batch-invariance --property offset-stride"
{ date -u; t0=$(date +%s)
  $B/bitparity check --op shared_expert --subject cuda-tc $P --seconds 150 --seed 25 --no-save --quiet 2>&1
  echo "rc=$? in $(( $(date +%s) - t0 )) s"; } > $R/baseline.log 2>&1 &
camp ref 420 --seconds 120 --budget-cases 2000 --timeout 200 --jobs 2 --campaign-seconds 100 $P $(ids $D/ref-ids.txt)
wait
tar -C $OUT -czf $OUT/run-25.tgz r
grep -E "cuda-tc|^rc|passed|FAILED" $R/baseline.log | head -20
grep -E "^file|\.cuh?  |^rc|original|^\[|corpus" $R/ref.log | tail -20
