#!/usr/bin/env bash
# At the bundle's commit (the forward's ticket is checked):
#  check:   seqwise_loss's unmutated kernels with the ticket check, 150 cases;
#  seqwise: the 8 seqwise_loss.cu survivors of run-10 left after its triage,
#           at the small shapes (lane-tie rows, E > 64), 15 s / 1000 cases;
#  race:    router.cu's 3 barrier survivors of run-10, then racecheck;
#  router:  a second sample of router.cu, 80 drawn with --seed 12.
set -u
B=target/gpu-bundle
D=reports/mutants-2026-12-01/run-11
R=$OUT/r; mkdir -p $R
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
export PATH=$PATH:/usr/local/cuda/bin
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; cat $B/COMMIT; date -u; } > $R/machine.txt
camp() { # name limit_s args...
  local name=$1 limit=$2; shift 2
  local t0=$(date +%s)
  { echo "bitparity mutants $*"; date -u
    timeout -s INT -k 15 $limit $B/bitparity mutants "$@" \
      --json $R/$name.json --markdown $R/$name.md --html $R/$name.html 2>&1
    echo "rc=$? in $(( $(date +%s) - t0 )) s"; date -u; } > $R/$name.log 2>&1
}
ids() { sed 's/^/--id /' $1; }
{ echo "bitparity check --op seqwise_loss --subject cuda --cases 150 --seed 9"
  timeout -s INT 120 $B/bitparity check --op seqwise_loss --subject cuda --cases 150 --seed 9 2>&1 | tail -16
  echo "rc=${PIPESTATUS[0]}"; } > $R/check.log 2>&1
camp seqwise 200 --seconds 15 --budget-cases 1000 --timeout 60 --jobs 4 $(ids $D/seqwise-ids.txt) &
camp race 300 --seconds 6 --budget-cases 300 --timeout 60 --jobs 3 --sanitizer racecheck --sanitizer-cases 8 $(ids $D/race-ids.txt) &
camp router 420 --seconds 6 --budget-cases 300 --timeout 40 --jobs 10 --campaign-seconds 330 --kernel router.cu --sample 80 --seed 12 &
wait
tar -C $OUT -czf $OUT/run-11.tgz r
cat $R/check.log | cut -c1-200
for f in seqwise race router; do
  echo "== $f"; grep -E "^file|\.cu " $R/$f.log | tail -3
done
