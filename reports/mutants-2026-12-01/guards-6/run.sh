#!/usr/bin/env bash
# guards-5 again (its time ran out before the report was written), without
# the exp headers' mutants (their survivors need the exhaustive exp check):
# every survivor of the earlier runs, the properties with the guard zones,
# then memcheck and racecheck on what survives. SIGINT at 545 s writes the
# report of what was judged by then.
set -u
B=target/gpu-bundle
D=reports/mutants-2026-12-01/guards-6
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
export PATH=$PATH:/usr/local/cuda/bin
name=guards-6
{
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; cat $B/COMMIT; date -u
args="--seconds 6 --budget-cases 500 --timeout 30 --campaign-seconds 330 --jobs 14 --sanitizer memcheck,racecheck --sanitizer-cases 16"
echo "bitparity mutants $args --id (each of $D/ids.txt)"
t0=$(date +%s)
timeout -s INT -k 20 545 $B/bitparity mutants $args $(sed 's/^/--id /' $D/ids.txt) \
  --json $OUT/$name.json --markdown $OUT/$name.md --html $OUT/$name.html 2>&1
echo "rc=$? in $(( $(date +%s) - t0 )) s"; date -u
} > $OUT/$name.log 2>&1
grep -vE "^\[[0-9]+/[0-9]+\] .*: (survived|same-code|no-compile) " $OUT/$name.log | tail -40 | cut -c1-300
