#!/usr/bin/env bash
# Device run 26 (H200), at the bundle's commit (target/gpu-bundle/COMMIT):
# 1. the MMA model against Hopper's wgmma.mma_async.m64n8k16, the same cases
#    and seeds as the mma.sync check of reports/mma-2026-12-02 (and mma.sync
#    again, with every mismatch reported, to compare the two output by output);
# 2. `bitparity check --op shared_expert` with the default subjects, cuda-tc
#    now among them (profile mma16-h100, undecided outputs counted apart);
# 3. `bitparity check` of every op, and the corpus replayed.
set -u
B=target/gpu-bundle
R=$OUT/r
mkdir -p "$R"
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; cat $B/COMMIT; date -u; } > "$R/machine.txt"
step() { # NAME LIMIT CMD...
  local name=$1 limit=$2; shift 2; local t0; t0=$(date +%s)
  { echo "$*"; date -u; timeout -s INT -k 10 "$limit" "$@" 2>&1; echo "rc=$? in $(( $(date +%s) - t0 )) s"; } > "$R/$name.log" 2>&1
  tail -3 "$R/$name.log"
}
step wgmma-2000 60 $B/bitparity-mma-check --instruction wgmma --cases 2000 --seed 1 --max-report 60 --json $R/wgmma-2000.json
step mma-2000 60 $B/bitparity-mma-check --instruction mma --cases 2000 --seed 1 --max-report 60 --json $R/mma-2000.json
step se-10000 180 $B/bitparity check --op shared_expert --cases 10000 --seed 311 --json $R/se-10000.json --corpus $R/corpus
step all-1000 120 $B/bitparity check --cases 1000 --seed 312 --json $R/all-1000.json --corpus $R/corpus
step replay 60 $B/bitparity replay regressions
step wgmma-20000 100 $B/bitparity-mma-check --instruction wgmma --cases 20000 --seed 2 --max-report 60 --json $R/wgmma-20000.json
tar -C $OUT -czf $OUT/run-26.tgz r
grep -E "conformance|cuda|passed|FAIL|SKIP" $R/se-10000.log | head -40
grep -E "^(status|verdict)|mismatch|refuted|confirmed" $R/wgmma-2000.log | head
