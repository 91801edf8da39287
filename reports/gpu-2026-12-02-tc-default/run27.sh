#!/usr/bin/env bash
# Device run 27 (H200), at the bundle's commit: run 26's shared_expert check
# again to its 10,000 cases (run 26 stopped it at 180 s, 9,522 cases), the
# mma.sync check of seed 2 with every mismatch reported (to compare with
# wgmma's, output by output), and the corpus with its shared_expert entries.
set -u
B=target/gpu-bundle
R=$OUT/r27
mkdir -p "$R"
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; cat $B/COMMIT; date -u; } > "$R/machine.txt"
step() { # NAME LIMIT CMD...
  local name=$1 limit=$2; shift 2; local t0; t0=$(date +%s)
  { echo "$*"; date -u; timeout -s INT -k 10 "$limit" "$@" 2>&1; echo "rc=$? in $(( $(date +%s) - t0 )) s"; } > "$R/$name.log" 2>&1
  tail -2 "$R/$name.log"
}
step replay 60 $B/bitparity replay regressions
step mma-20000 90 $B/bitparity-mma-check --instruction mma --cases 20000 --seed 2 --max-report 60 --json $R/mma-20000.json
step se-10000 400 $B/bitparity check --op shared_expert --cases 10000 --seed 311 --json $R/se-10000.json --corpus $R/corpus
tar -C $OUT -czf $OUT/run-27.tgz r27
grep -E "conformance|cases in|passed|FAIL|SKIP" $R/se-10000.log | head -20
grep -E "shared_expert|entries" $R/replay.log | tail -8
