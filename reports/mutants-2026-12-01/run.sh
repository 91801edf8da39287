#!/usr/bin/env bash
# bitparity mutants on the GPU host, from the repository root with the
# bundle (target/gpu-bundle: the release bitparity, lib/ with GMP and MPFR)
# carried. Arguments: NAME, then bitparity mutants' options. Writes
# $OUT/NAME.{json,md,html,log}.
set -u
B=target/gpu-bundle
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
name=$1; shift
{
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; cat $B/COMMIT; date -u
echo "bitparity mutants $*"
t0=$(date +%s)
$B/bitparity mutants "$@" --json $OUT/$name.json --markdown $OUT/$name.md --html $OUT/$name.html 2>&1
echo "rc=$? in $(( $(date +%s) - t0 )) s"; date -u
} > $OUT/$name.log 2>&1
grep -vE "^\[[0-9]+/[0-9]+\] .*: (killed|same-code|no-compile) " $OUT/$name.log | tail -60
