#!/usr/bin/env bash
# guards-6 again (its report was lost: a child past its limit was killed,
# its compute-sanitizer target held the pipe), on the survivors of
# seqwise_loss.cu and shared_expert.cu only (router.cu's children compile
# for about a minute each), with 3 s / 300 cases per op in the first stage
# (the earlier runs gave each 6 s / 500): the properties with the guard
# zones, then memcheck and racecheck on what survives. SIGINT at 380 s
# writes the report of what was judged by then.
set -u
B=target/gpu-bundle
D=reports/mutants-2026-12-01/guards-7
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
export PATH=$PATH:/usr/local/cuda/bin
name=guards-7
{
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; cat $B/COMMIT; date -u
args="--seconds 3 --budget-cases 300 --timeout 25 --campaign-seconds 280 --jobs 14 --sanitizer memcheck,racecheck --sanitizer-cases 12"
echo "bitparity mutants $args --id (each of $D/ids.txt)"
t0=$(date +%s)
timeout -s INT -k 15 380 $B/bitparity mutants $args $(sed 's/^/--id /' $D/ids.txt) \
  --json $OUT/$name.json --markdown $OUT/$name.md --html $OUT/$name.html 2>&1
echo "rc=$? in $(( $(date +%s) - t0 )) s"; date -u
} > $OUT/$name.log 2>&1
grep -vE "^\[[0-9]+/[0-9]+\] .*: (survived|same-code|no-compile) " $OUT/$name.log | tail -40 | cut -c1-300
