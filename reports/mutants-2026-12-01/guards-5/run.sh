#!/usr/bin/env bash
# The guard zones and the sanitizer stage on the H200, from the repository
# root with the bundle (target/gpu-bundle) carried:
#   1. compute-sanitizer's version, and every op's CUDA subject, guards on,
#      through `check` (the guards must not fail a correct kernel);
#   2. every survivor of the earlier runs (survivor-ids.txt) again: the
#      properties with the guard zones, then memcheck on what survives.
# Writes $OUT/guards-5.{json,md,html,log} and $OUT/check-*.txt.
set -u
B=target/gpu-bundle
D=reports/mutants-2026-12-01/guards-5
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
export PATH=$PATH:/usr/local/cuda/bin
{ which compute-sanitizer; compute-sanitizer --version | tail -2; } > $OUT/sanitizer-version.txt 2>&1
for op in seqwise_loss router shared_expert; do
  timeout 60 $B/bitparity check --op $op --subject cuda --cases 400 --seed 5 --no-save > $OUT/check-$op.txt 2>&1
  echo "check $op rc=$?" >> $OUT/check-$op.txt
done
tail -n 3 $OUT/check-*.txt
bash reports/mutants-2026-12-01/run.sh guards-5 --seconds 6 --budget-cases 500 --timeout 30 \
  --campaign-seconds 360 --jobs 14 --sanitizer memcheck --sanitizer-cases 16 \
  $(sed 's/^/--id /' $D/survivor-ids.txt)
