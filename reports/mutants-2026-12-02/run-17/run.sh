#!/usr/bin/env bash
# At the bundle's commit (a0ed886 or later: the router's generator draws
# flat-router cases, E = 1024 with G = L = 32, two NaNs at a group's top):
#  mma:    bitparity-mma-check, the MMA model against the H200's mma.sync
#          (2,000 cases per class, seed 1; then 20,000 per class, seed 2);
#  rare:   the 6 router.cu survivors killable by rare inputs, 60 s each;
#  mem:    the 6 read-past survivors under memcheck (the stage given time);
#  race:   the 2 barriers between a warp's tokens, racecheck at reference
#          shapes (long T);
#  sample: router.cu's 295 mutants never run, as many as 470 s allow.
set -u
D=reports/mutants-2026-12-02/run-17
. scripts/gpu-camp
export BITPARITY_MAX_E=1024
{ time $B/bitparity-mma-check --cases 2000 --seed 1 --json $R/mma-2000.json; echo "rc=$?"; } > $R/mma-2000.log 2>&1
{ time timeout 150 $B/bitparity-mma-check --cases 20000 --seed 2 --json $R/mma-20000.json; echo "rc=$?"; } > $R/mma-20000.log 2>&1 &
camp rare 520 --seconds 60 --budget-cases 20000 --timeout 150 --jobs 3 --campaign-seconds 300 $(ids $D/rare-ids.txt) &
camp mem 520 --seconds 6 --budget-cases 300 --timeout 60 --jobs 2 --campaign-seconds 300 --sanitizer memcheck --sanitizer-cases 24 $(ids $D/mem-ids.txt) &
BITPARITY_SHAPES=reference camp race 520 --seconds 60 --budget-cases 1000 --timeout 150 --jobs 2 --campaign-seconds 300 --sanitizer racecheck --sanitizer-cases 6 $(ids $D/race-ids.txt) &
camp sample 520 --seconds 6 --budget-cases 300 --timeout 40 --jobs 11 --campaign-seconds 470 $(ids $D/sample-ids.txt) &
wait
tar -C $OUT -czf $OUT/run-17.tgz r
tail -4 $R/mma-2000.log $R/mma-20000.log
for f in rare mem race sample; do echo "== $f"; grep -E "^file|\.cu  |^rc" $R/$f.log | tail -3; done
