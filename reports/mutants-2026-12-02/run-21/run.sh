#!/usr/bin/env bash
# Device run 21 (H200), at the bundle's commit:
#  headers: the 124 header mutants runs 19 and 20 left unrun (expf.cuh's
#           last 30, expf_hard.cuh's 94);
#  tc-long: run-20's 64 survivors of shared_expert_tc.cu, hunted again for
#           20 s each (3,000 cases at most) instead of 6.
set -u
D=reports/mutants-2026-12-02/run-21
. scripts/gpu-camp
export BITPARITY_MAX_E=1024
camp headers 560 --seconds 5 --budget-cases 300 --timeout 60 --jobs 11 --campaign-seconds 470 $(ids $D/headers-ids.txt) &
camp tc-long 560 --seconds 20 --budget-cases 3000 --timeout 80 --jobs 4 --campaign-seconds 450 $(ids $D/tc-ids.txt) &
wait
tar -C $OUT -czf $OUT/run-21.tgz r
for f in headers tc-long; do echo "== $f"; grep -E "^file|\.cuh?  |^rc" $R/$f.log | tail -5; done
