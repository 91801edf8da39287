#!/usr/bin/env bash
# At the bundle's commit, E up to 1024 for the router (BITPARITY_MAX_E):
#  race:   router.cu's 7 dropped-barrier survivors, then under racecheck;
#  mem:    its 2 read-past survivors, then under memcheck (no guard zones);
#  surv:   5 survivors that need warp-wide groups (G = 3 or 5: the
#          fwd_grouped32 path with G < V) or a tiny route gradient, and the 2
#          that timed out, each with 60 s of cases;
#  sample: run-13's 42 mutants not run, then the next 120 of router.cu's
#          not-run mutants in the fixed shuffle (sample-ids.txt).
set -u
D=reports/mutants-2026-12-01/run-14
. scripts/gpu-camp
export BITPARITY_MAX_E=1024
camp race 520 --seconds 6 --budget-cases 300 --timeout 60 --jobs 4 --campaign-seconds 200 --sanitizer racecheck --sanitizer-cases 8 $(ids $D/race-ids.txt) &
camp mem 520 --seconds 6 --budget-cases 300 --timeout 60 --jobs 2 --campaign-seconds 200 --sanitizer memcheck --sanitizer-cases 24 $(ids $D/mem-ids.txt) &
camp surv 520 --seconds 60 --budget-cases 5000 --timeout 150 --jobs 4 --campaign-seconds 300 $(ids $D/surv-ids.txt) &
camp sample 520 --seconds 6 --budget-cases 300 --timeout 40 --jobs 7 --campaign-seconds 440 $(ids $D/sample-ids.txt) &
wait
tar -C $OUT -czf $OUT/run-14.tgz r
for f in race mem surv sample; do echo "== $f"; grep -E "^file|\.cu  |^rc" $R/$f.log | tail -3; done
