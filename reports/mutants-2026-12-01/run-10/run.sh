#!/usr/bin/env bash
# At the commit in the bundle (outputs start as the canary; lane-tie rows):
#  check:   the unmutated kernels, every op, with the outputs poisoned
#           (200 cases each at the small shapes, 40 of seqwise_loss at the
#           reference shapes): a kernel that leaves a correct output
#           unwritten fails here;
#  seqwise: seqwise_loss.cu's 74 mutants never run (the finalize's tail)
#           and the 7 survivors left by survivors-9's triage, reference shapes;
#  router:  router.cu, a sample of 40 drawn with --seed 11 (each child
#           compiles router.cu for about a minute).
# One tar comes back (at most 8 files return from a call).
set -u
B=target/gpu-bundle
D=reports/mutants-2026-12-01/run-10
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
{ t0=$(date +%s)
  echo "bitparity check --subject cuda --cases 200 --seed 7"
  timeout -s INT 200 $B/bitparity check --subject cuda --cases 200 --seed 7 --json $R/check-small.json 2>&1 | tail -25
  echo "rc=${PIPESTATUS[0]}"
  echo "BITPARITY_SHAPES=reference bitparity check --op seqwise_loss --subject cuda --cases 40 --seed 7"
  BITPARITY_SHAPES=reference timeout -s INT 120 $B/bitparity check --op seqwise_loss --subject cuda --cases 40 --seed 7 --json $R/check-ref.json 2>&1 | tail -25
  echo "rc=${PIPESTATUS[0]} in $(( $(date +%s) - t0 )) s"; } > $R/check.log 2>&1 &
BITPARITY_SHAPES=reference camp seqwise 330 --seconds 8 --budget-cases 300 --timeout 40 --jobs 5 --campaign-seconds 280 $(ids $D/seqwise-ids.txt) &
camp router 470 --seconds 6 --budget-cases 300 --timeout 40 --jobs 9 --campaign-seconds 380 --kernel router.cu --sample 40 --seed 11 &
wait
tar -C $OUT -czf $OUT/run-10.tgz r
cat $R/check.log | cut -c1-200
for f in seqwise router; do
  echo "== $f"; grep -vE "^\[[0-9]+/[0-9]+\] .*: (survived|same-code|no-compile) " $R/$f.log | grep -v "^    [-+]" | tail -8 | cut -c1-200
done
