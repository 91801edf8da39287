#!/usr/bin/env bash
# At the bundle's commit (the router's generator draws G = 3, 5, 6, 7 ... of
# warp-wide groups, and long T under BITPARITY_SHAPES=reference):
#  mem:     6 router.cu survivors that read past a buffer, under memcheck;
#  grouped: 16 survivors the readers killed by hand on warp-wide groups
#           (E = 32 G, G < V among them) and other rare inputs, E up to 1024;
#  long:    3 survivors of the token loop (a warp's second token), at
#           reference shapes.
# Every campaign is cut by SIGINT at 170 s (this session's last device time).
set -u
D=reports/mutants-2026-12-01/run-16
. scripts/gpu-camp
camp mem 170 --seconds 4 --budget-cases 300 --timeout 60 --jobs 6 --campaign-seconds 60 --sanitizer memcheck --sanitizer-cases 24 $(ids $D/mem-ids.txt) &
BITPARITY_MAX_E=1024 camp grouped 170 --seconds 30 --budget-cases 3000 --timeout 80 --jobs 8 --campaign-seconds 120 $(ids $D/grouped-ids.txt) &
BITPARITY_SHAPES=reference camp long 170 --seconds 60 --budget-cases 1000 --timeout 100 --jobs 3 --campaign-seconds 60 $(ids $D/long-ids.txt) &
wait
tar -C $OUT -czf $OUT/run-16.tgz r
for f in mem grouped long; do echo "== $f"; grep -E "^file|\.cu  |^rc" $R/$f.log | tail -3; done
