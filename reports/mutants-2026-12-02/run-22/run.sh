#!/usr/bin/env bash
# Device run 22 (H200), at the bundle's commit (the shared_expert generator
# draws the tensor cores' fragment shapes, T and K both past 8, and H or F
# = 14, one case in ten):
#  mem:     9 survivors that read past a buffer (8 of shared_expert_tc.cu,
#           1 of router.cu), under compute-sanitizer memcheck;
#  race:    router.cu:3324ae8b (a dropped barrier), under racecheck;
#  frag:    7 shared_expert_tc.cu survivors the new shapes should reach
#           (rows 8..15 fed the wrong K half; a row pitch of 14; five that
#           leave an MMA operand register unwritten), 20 s each;
#  ref:     2 shared_expert_tc.cu cp.async races, at reference shapes;
#  headers: expf_hard.cuh's 21 mutants never run;
#  gzero:   common.cuh:c48281ed (sums started at -0.0), which the seqwise
#           generator's g = -0.0 should now reach.
set -u
D=reports/mutants-2026-12-02/run-22
. scripts/gpu-camp
export BITPARITY_MAX_E=1024
camp mem 200 --seconds 4 --budget-cases 200 --timeout 40 --jobs 2 --campaign-seconds 150 --sanitizer memcheck --sanitizer-cases 60 $(ids $D/mem-ids.txt) &
camp race 200 --seconds 4 --budget-cases 200 --timeout 40 --jobs 1 --campaign-seconds 150 --sanitizer racecheck --sanitizer-cases 12 $(ids $D/race-ids.txt) &
camp frag 200 --seconds 20 --budget-cases 3000 --timeout 60 --jobs 4 --campaign-seconds 140 $(ids $D/frag-ids.txt) &
BITPARITY_SHAPES=reference camp ref 200 --seconds 40 --budget-cases 500 --timeout 80 --jobs 2 --campaign-seconds 100 $(ids $D/ref-ids.txt) &
camp headers 200 --seconds 4 --budget-cases 200 --timeout 45 --jobs 6 --campaign-seconds 150 $(ids $D/headers-ids.txt) &
camp gzero 200 --seconds 10 --budget-cases 1000 --timeout 60 --jobs 1 --campaign-seconds 100 $(ids $D/gzero-ids.txt) &
wait
tar -C $OUT -czf $OUT/run-22.tgz r
for f in mem race frag ref headers gzero; do echo "== $f"; grep -E "^file|\.cuh?  |^rc" $R/$f.log | tail -4; done
