#!/usr/bin/env bash
# Device run 20 (H200), at the bundle's commit:
#  tc:     shared_expert_tc.cu's 590 mutants, each hunted by the cuda-tc
#          subject (profile mma16-h100), as many as 480 s allow (source order);
#  router: the 14 router.cu mutants run-19 left unrun.
set -u
D=reports/mutants-2026-12-02/run-20
. scripts/gpu-camp
export BITPARITY_MAX_E=1024
camp tc 550 --seconds 6 --budget-cases 300 --timeout 60 --jobs 12 --campaign-seconds 480 --kernel shared_expert_tc.cu &
camp router 400 --seconds 6 --budget-cases 300 --timeout 40 --jobs 3 --campaign-seconds 330 $(ids $D/router-ids.txt) &
wait
tar -C $OUT -czf $OUT/run-20.tgz r
for f in tc router; do echo "== $f"; grep -E "^file|\.cuh?  |^rc" $R/$f.log | tail -5; done
grep -E "^\[" $R/tc.log | head -5
