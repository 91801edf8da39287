#!/usr/bin/env bash
# Device run 5 (H200): cublaslt-pinned (2-byte class only) and
# cublaslt-pinned-aligned (16-byte class too): tier A and tier B checks, then
# the speed table again, both sides in one run.
set -u
B=target/gpu-bundle
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
O="${OUT:-out}/r5"; mkdir -p "$O"
cp "$B/COMMIT" "$O/"; date -u > "$O/date.txt"
for s in cublaslt-pinned cublaslt-pinned-aligned; do
timeout -s INT 60 $B/bitparity check --op shared_expert --subject $s --cases 10000 --seed 101 --quiet \
    --json "$O/$s-a.json" --markdown "$O/$s-a.md" --corpus "$O/corpus" > "$O/$s-a.log" 2>&1
echo "exit $?" >> "$O/$s-a.log"; grep -v "^  |" "$O/$s-a.log" | grep -v "^  *[a-z-]* *[0-9]" | tail -30
BITPARITY_SHAPES=reference BITPARITY_MAX_T=4096 timeout -s INT 110 $B/bitparity check --op shared_expert --subject $s \
    --property batch-invariance --property determinism --property offset-stride --cases 16 --seed 102 --quiet \
    --json "$O/$s-b.json" --markdown "$O/$s-b.md" --corpus "$O/corpus" > "$O/$s-b.log" 2>&1
echo "exit $?" >> "$O/$s-b.log"; grep -v "^  |" "$O/$s-b.log" | grep -v "^  *[a-z-]* *[0-9]" | tail -30
done
timeout 90 python3 benches/torch_shared_expert.py --json "$O/torch.json" > "$O/torch.log" 2>&1; echo "exit $?" >> "$O/torch.log"
timeout 90 $B/gpu_shared_expert-bench --json "$O/ours.json" > "$O/ours.log" 2>&1; echo "exit $?" >> "$O/ours.log"
grep -v Warn "$O/torch.log"; tail -30 "$O/ours.log"
tar czf "$O/../run5.tgz" -C "$O/.." r5 && rm -rf "$O"
