#!/usr/bin/env bash
# The survivors of combined.json (not in the triage) again, at eec1be9:
#  seqwise: its 96 survivors with tier B's reference shapes
#           (BITPARITY_SHAPES=reference: T across the finalize batches, E up
#           to 1024), then memcheck on what survives (no guard zones);
#  shared:  shared_expert.cu's 21 survivors (tile spans added since), then
#           memcheck without guard zones;
#  *-race:  the barrier survivors, racecheck.
# Two campaigns at a time, 7 children each; SIGINT at the limit writes the
# report of what was judged by then.
set -u
B=target/gpu-bundle
D=reports/mutants-2026-12-01/survivors-8
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
export PATH=$PATH:/usr/local/cuda/bin
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; cat $B/COMMIT; date -u; } > $OUT/machine.txt
camp() { # name limit_s args...
  local name=$1 limit=$2; shift 2
  local t0=$(date +%s)
  { echo "bitparity mutants $*"; date -u
    timeout -s INT -k 15 $limit $B/bitparity mutants "$@" \
      --json $OUT/$name.json --markdown $OUT/$name.md --html $OUT/$name.html 2>&1
    echo "rc=$? in $(( $(date +%s) - t0 )) s"; date -u; } > $OUT/$name.log 2>&1
}
ids() { sed 's/^/--id /' $D/$1; }
common="--seconds 8 --budget-cases 300 --jobs 7"
BITPARITY_SHAPES=reference camp seqwise 290 $common --timeout 40 --campaign-seconds 200 --sanitizer memcheck --sanitizer-cases 8 $(ids seqwise-ids.txt) &
camp shared 290 $common --timeout 40 --campaign-seconds 200 --sanitizer memcheck --sanitizer-cases 24 $(ids shared-ids.txt) &
wait
BITPARITY_SHAPES=reference camp seqwise-race 230 $common --timeout 70 --campaign-seconds 150 --sanitizer racecheck --sanitizer-cases 4 $(ids seqwise-race-ids.txt) &
camp other-race 230 $common --timeout 70 --campaign-seconds 150 --sanitizer racecheck --sanitizer-cases 8 $(ids other-race-ids.txt) &
wait
for f in seqwise shared seqwise-race other-race; do
  echo "== $f"; grep -vE "^\[[0-9]+/[0-9]+\] .*: (survived|same-code|no-compile) " $OUT/$f.log | tail -12 | cut -c1-250
done
