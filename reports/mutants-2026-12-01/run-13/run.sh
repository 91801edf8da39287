#!/usr/bin/env bash
# At the bundle's commit, E up to 1024 for the router (BITPARITY_MAX_E: the
# kernels' V = 16 and 32 paths and 32 groups of 32, which tier A's 257 never
# reaches):
#  surv:   router.cu's 21 survivors not triaged (surv-ids.txt), then under
#          racecheck and memcheck;
#  sample: the first 160 of router.cu's not-run mutants in a fixed shuffle
#          (sample-ids.txt), as many as 380 s allow;
#  torch:  PyTorch's loss, router and MLP as exec subjects, every property
#          (reports/torch-subjects-2026-12-01/h200/run.sh), alongside.
set -u
D=reports/mutants-2026-12-01/run-13
. scripts/gpu-camp
export BITPARITY_MAX_E=1024
bash reports/torch-subjects-2026-12-01/h200/run.sh > $R/torch.log 2>&1 &
camp surv 470 --seconds 10 --budget-cases 600 --timeout 90 --jobs 4 --campaign-seconds 200 --sanitizer racecheck,memcheck --sanitizer-cases 16 $(ids $D/surv-ids.txt) &
camp sample 470 --seconds 6 --budget-cases 300 --timeout 40 --jobs 9 --campaign-seconds 380 $(ids $D/sample-ids.txt) &
wait
tar -C $OUT -czf $OUT/run-13.tgz r
for f in surv sample; do echo "== $f"; grep -E "^file|\.cu  |^rc" $R/$f.log | tail -3; done
tail -3 $R/torch.log
