#!/usr/bin/env bash
# Device run 19 (H200), at the bundle's commit (the router's generator draws
# the grouped V = 2 shape, E = 64 in two groups, in 7.5 % of cases):
#  rare:    the 5 router.cu survivors on shapes drawn ~0.4 % of the time, 60 s each;
#  long:    the 2 that need a warp's second token, at tier B's reference shapes;
#  mem:     the 3 that read past a buffer, under compute-sanitizer memcheck;
#  sample:  router.cu's 53 mutants never run;
#  headers: the headers' 221 mutants never run (interleaved by file), as
#           many as 500 s allow; each compiles and hunts every kernel that
#           includes its header, cuda-tc's among them.
set -u
D=reports/mutants-2026-12-02/run-19
. scripts/gpu-camp
export BITPARITY_MAX_E=1024
camp rare 300 --seconds 60 --budget-cases 20000 --timeout 150 --jobs 2 --campaign-seconds 200 $(ids $D/rare-ids.txt) &
BITPARITY_SHAPES=reference camp long 300 --seconds 90 --budget-cases 2000 --timeout 180 --jobs 2 --campaign-seconds 100 $(ids $D/long-ids.txt) &
camp mem 400 --seconds 6 --budget-cases 300 --timeout 60 --jobs 2 --campaign-seconds 300 --sanitizer memcheck --sanitizer-cases 24 $(ids $D/mem-ids.txt) &
camp sample 400 --seconds 6 --budget-cases 300 --timeout 40 --jobs 4 --campaign-seconds 330 $(ids $D/sample-ids.txt) &
camp headers 545 --seconds 5 --budget-cases 300 --timeout 60 --jobs 8 --campaign-seconds 480 $(ids $D/headers-ids.txt) &
wait
tar -C $OUT -czf $OUT/run-19.tgz r
for f in rare long mem sample headers; do echo "== $f"; grep -E "^file|\.cuh?  |^rc" $R/$f.log | tail -5; done
