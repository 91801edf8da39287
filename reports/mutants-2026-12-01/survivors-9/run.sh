#!/usr/bin/env bash
# survivors-8 again (its seqwise and shared reports did not come back: at
# most 8 files return from a call, so everything goes in one tar now):
#  seqwise-ref: seqwise_loss.cu's 96 survivors, tier B reference shapes
#               (BITPARITY_SHAPES=reference), properties only;
#  shared:      shared_expert.cu's 21 survivors (tile spans now 1 case in
#               6), then memcheck without guard zones;
#  seqwise-mem: what survives seqwise-ref, at the small shapes, then
#               memcheck without guard zones.
set -u
B=target/gpu-bundle
D=reports/mutants-2026-12-01/survivors-9
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
BITPARITY_SHAPES=reference camp seqwise-ref 200 --seconds 8 --budget-cases 300 --timeout 40 --jobs 9 --campaign-seconds 150 $(ids $D/seqwise-ids.txt) &
camp shared 200 --seconds 8 --budget-cases 300 --timeout 40 --jobs 5 --campaign-seconds 120 --sanitizer memcheck --sanitizer-cases 24 $(ids $D/shared-ids.txt) &
wait
python3 -c "
import json; d=json.load(open('$R/seqwise-ref.json'))
print('\n'.join(m['id'] for m in d['mutants'] if m['outcome']=='survived'))" > $R/seqwise-mem-ids.txt
echo "seqwise-ref survivors: $(wc -l < $R/seqwise-mem-ids.txt)"
camp seqwise-mem 200 --seconds 3 --budget-cases 300 --timeout 30 --jobs 14 --campaign-seconds 150 --sanitizer memcheck --sanitizer-cases 24 $(ids $R/seqwise-mem-ids.txt)
tar -C $OUT -czf $OUT/survivors-9.tgz r
for f in seqwise-ref shared seqwise-mem; do
  echo "== $f"; grep -vE "^\[[0-9]+/[0-9]+\] .*: (survived|same-code|no-compile) " $R/$f.log | grep -v "^    [-+]" | tail -8 | cut -c1-200
done
