#!/usr/bin/env bash
# Device run 24 (H200), at the bundle's commit (the exp check under the
# launch watchdog too; a router corpus entry of 32 groups of 2, one kept):
#  hang:     expf.cuh's 4 mutants whose exp check hangs, and router.cu:3a8c9968
#            (hangs on G = 32 with L < 32), 10 s watchdog;
#  watchdog: `bitparity check` on the cuda subjects with a watchdog of 1 us,
#            so that every launch "hangs": what a user sees, and that the
#            process ends.
set -u
D=reports/mutants-2026-12-02/run-24
. scripts/gpu-camp
export BITPARITY_MAX_E=1024
camp hang 300 --seconds 20 --budget-cases 300 --timeout 40 --jobs 8 --campaign-seconds 200 $(ids $D/ids.txt) &
{ date -u; t0=$(date +%s)
  BITPARITY_KERNEL_TIMEOUT=0.000001 timeout 120 $B/bitparity check --op router --op seqwise_loss --subject cuda \
    --cases 5 --seed 1 --no-save 2>&1; echo "rc=$? in $(( $(date +%s) - t0 )) s"; date -u; } > $R/watchdog.log 2>&1
wait
tar -C $OUT -czf $OUT/run-24.tgz r
cat $R/watchdog.log | tail -40
echo "== hang"; grep -E "^file|\.cuh?  |^rc|original|^\[" $R/hang.log | tail -20
