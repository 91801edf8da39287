#!/usr/bin/env bash
# At the bundle's commit, E up to 1024 for the router (BITPARITY_MAX_E):
# run-14's 64 mutants not run, then the next 120 of router.cu's not-run
# mutants in the fixed shuffle (sample-ids.txt), all 16 cores.
set -u
D=reports/mutants-2026-12-01/run-15
. scripts/gpu-camp
export BITPARITY_MAX_E=1024
camp sample 500 --seconds 6 --budget-cases 300 --timeout 40 --jobs 16 --campaign-seconds 440 $(ids $D/sample-ids.txt)
tar -C $OUT -czf $OUT/run-15.tgz r
grep -E "^file|\.cu  |^rc" $R/sample.log | tail -3
