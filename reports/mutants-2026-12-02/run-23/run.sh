#!/usr/bin/env bash
# Device run 23 (H200), at the bundle's commit (a launch watchdog in the CUDA
# subjects: a launch not finished within BITPARITY_KERNEL_TIMEOUT fails its
# case; the mutants children get a quarter of --timeout; each child judges
# its op's corpus entries before the generated cases, eight entries crafted
# for survivors added):
#  replay:  every corpus entry on the cuda subjects (the originals must pass
#           the crafted entries);
#  hang:    the 21 mutants that timed out in earlier runs;
#  corpus:  the 9 survivors the crafted entries aim at, and router.cu:3a8c9968
#           (hangs on a rare shape).
set -u
D=reports/mutants-2026-12-02/run-23
. scripts/gpu-camp
export BITPARITY_MAX_E=1024
{ date -u; $B/bitparity replay regressions 2>&1; echo "rc=$?"; date -u; } > $R/replay.log 2>&1
camp hang 400 --seconds 20 --budget-cases 300 --timeout 40 --jobs 8 --campaign-seconds 300 $(ids $D/hang-ids.txt) &
camp corpus 400 --seconds 20 --budget-cases 300 --timeout 60 --jobs 8 --campaign-seconds 300 $(ids $D/corpus-ids.txt) &
wait
tar -C $OUT -czf $OUT/run-23.tgz r
tail -3 $R/replay.log
for f in hang corpus; do echo "== $f"; grep -E "^file|\.cuh?  |^rc|corpus|original|^\[" $R/$f.log | tail -40; done
