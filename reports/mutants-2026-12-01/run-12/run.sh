#!/usr/bin/env bash
# At the bundle's commit:
#  router:   a third sample of router.cu, 70 drawn with --seed 13;
#  memcheck: router.cu:b7ff2a9d (a read one float past the logits when
#            E % 32 != 0, which the NaN guard zone hides), under memcheck
#            without guard zones.
set -u
B=target/gpu-bundle
D=reports/mutants-2026-12-01/run-12
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
camp memcheck 280 --seconds 4 --budget-cases 300 --timeout 60 --jobs 2 --sanitizer memcheck --sanitizer-cases 24 $(ids $D/memcheck-ids.txt) &
camp router 300 --seconds 6 --budget-cases 300 --timeout 40 --jobs 12 --campaign-seconds 230 --kernel router.cu --sample 70 --seed 13 &
wait
tar -C $OUT -czf $OUT/run-12.tgz r
for f in memcheck router; do
  echo "== $f"; grep -E "^file|\.cu  |^rc" $R/$f.log | tail -3
done
