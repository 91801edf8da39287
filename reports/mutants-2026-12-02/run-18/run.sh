#!/usr/bin/env bash
# Device run 18 (H200), at the bundle's commit:
#  1. the speed table of cuda-tc (four stages of K), PyTorch alongside, on a
#     quiet GPU (reports/shared-expert-2026-12-02/r2/);
#  2. then, side by side: cuda-tc judged again (300 + 3,000 tier A cases, 16
#     at reference shapes), and router.cu's 170 mutants run-17 left unrun
#     plus two survivors the readers found killable (60 s each).
set -u
D=reports/mutants-2026-12-02/run-18
. scripts/gpu-camp
S="$OUT/r/se"; mkdir -p "$S"; cp $B/COMMIT "$S/"; date -u > "$S/date.txt"
timeout 100 python3 benches/torch_shared_expert.py --json "$S/torch.json" > "$S/torch.log" 2>&1; echo "exit $?" >> "$S/torch.log"
timeout 120 $B/gpu_shared_expert-bench --variant tc --table --json "$S/ours.json" > "$S/ours.log" 2>&1; echo "exit $?" >> "$S/ours.log"
chk() { # NAME LIMIT ARGS...
  local n=$1 l=$2; shift 2
  timeout -s INT "$l" $B/bitparity check --op shared_expert --subject cuda-tc --quiet \
    --json "$S/$n.json" --markdown "$S/$n.md" --corpus "$S/corpus" "$@" > "$S/$n.log" 2>&1
  echo "exit $?" >> "$S/$n.log"
}
( chk smoke 60 --cases 300 --seed 210; chk tc-a 150 --cases 3000 --seed 211
  BITPARITY_SHAPES=reference BITPARITY_MAX_T=4096 chk tc-b 100 --property batch-invariance \
    --property determinism --property offset-stride --cases 16 --seed 212 ) &
export BITPARITY_MAX_E=1024
camp rare 330 --seconds 60 --budget-cases 20000 --timeout 150 --jobs 2 --campaign-seconds 200 $(ids $D/rare-ids.txt) &
camp sample 380 --seconds 6 --budget-cases 300 --timeout 40 --jobs 11 --campaign-seconds 330 $(ids $D/sample-ids.txt) &
wait
tar -C $OUT -czf $OUT/run-18.tgz r
tail -8 "$S/ours.log"; grep -h "passed\|failed\|exit\|cases in" "$S"/*.log | head -20
for f in rare sample; do echo "== $f"; grep -E "^file|\.cu  |^rc" $R/$f.log | tail -3; done
