#!/usr/bin/env bash
# Device run 19 (H200), at the bundle's commit:
#  1. cuda-tc with 64 x 64 warp tiles: the speed table, PyTorch alongside, on
#     a quiet GPU, then judged again (300 + 3,000 tier A cases, 16 at
#     reference shapes) (reports/shared-expert-2026-12-02/r3/);
#  2. beside the checks, run-18's router.cu survivors the readers found
#     killable: 3 read-past under memcheck, 5 rare shapes with 60 s of cases,
#     2 of a warp's second token at reference shapes.
set -u
D=reports/mutants-2026-12-02/run-19
. scripts/gpu-camp
S="$OUT/r/se"; mkdir -p "$S"; cp $B/COMMIT "$S/"; date -u > "$S/date.txt"
timeout 80 python3 benches/torch_shared_expert.py --json "$S/torch.json" > "$S/torch.log" 2>&1; echo "exit $?" >> "$S/torch.log"
timeout 90 $B/gpu_shared_expert-bench --variant tc --table --json "$S/ours.json" > "$S/ours.log" 2>&1; echo "exit $?" >> "$S/ours.log"
chk() { # NAME LIMIT ARGS...
  local n=$1 l=$2; shift 2
  timeout -s INT "$l" $B/bitparity check --op shared_expert --subject cuda-tc --quiet \
    --json "$S/$n.json" --markdown "$S/$n.md" --corpus "$S/corpus" "$@" > "$S/$n.log" 2>&1
  echo "exit $?" >> "$S/$n.log"
}
( chk smoke 40 --cases 300 --seed 220; chk tc-a 90 --cases 3000 --seed 221
  BITPARITY_SHAPES=reference BITPARITY_MAX_T=4096 chk tc-b 60 --property batch-invariance \
    --property determinism --property offset-stride --cases 16 --seed 222 ) &
export BITPARITY_MAX_E=1024
camp mem 190 --seconds 6 --budget-cases 300 --timeout 60 --jobs 2 --campaign-seconds 150 --sanitizer memcheck --sanitizer-cases 16 $(ids $D/mem-ids.txt) &
camp rare 190 --seconds 60 --budget-cases 20000 --timeout 120 --jobs 5 --campaign-seconds 150 $(ids $D/rare-ids.txt) &
BITPARITY_SHAPES=reference camp long 190 --seconds 60 --budget-cases 1000 --timeout 120 --jobs 2 --campaign-seconds 150 $(ids $D/long-ids.txt) &
wait
tar -C $OUT -czf $OUT/run-19.tgz r
tail -7 "$S/ours.log"; grep -h "passed\|failed\|exit\|cases in" "$S"/*.log | head -20
for f in mem rare long; do echo "== $f"; grep -E "^file|\.cu  |^rc" $R/$f.log | tail -3; done
