#!/usr/bin/env bash
# Device run 4 (H200): cublaslt-pinned with an algorithm per alignment class:
# tier A and tier B checks, then the speed table again, both sides in one run.
set -u
B=target/gpu-bundle
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
O="${OUT:-out}/r4"; mkdir -p "$O"
cp "$B/COMMIT" "$O/"; date -u > "$O/date.txt"
s=cublaslt-pinned
timeout -s INT 100 $B/bitparity check --op shared_expert --subject $s --cases 10000 --seed 101 --quiet \
    --json "$O/$s-a.json" --markdown "$O/$s-a.md" --corpus "$O/corpus" > "$O/$s-a.log" 2>&1
echo "exit $?" >> "$O/$s-a.log"; grep -v "^  |" "$O/$s-a.log" | grep -v "^  *[a-z-]* *[0-9]" | tail -30
BITPARITY_SHAPES=reference BITPARITY_MAX_T=4096 timeout -s INT 130 $B/bitparity check --op shared_expert --subject $s \
    --property batch-invariance --property determinism --property offset-stride --cases 24 --seed 102 --quiet \
    --json "$O/$s-b.json" --markdown "$O/$s-b.md" --corpus "$O/corpus" > "$O/$s-b.log" 2>&1
echo "exit $?" >> "$O/$s-b.log"; grep -v "^  |" "$O/$s-b.log" | grep -v "^  *[a-z-]* *[0-9]" | tail -30
timeout 150 python3 benches/torch_shared_expert.py --json "$O/torch.json" > "$O/torch.log" 2>&1; echo "exit $?" >> "$O/torch.log"
timeout 150 $B/gpu_shared_expert-bench --json "$O/ours.json" > "$O/ours.log" 2>&1; echo "exit $?" >> "$O/ours.log"
grep -v Warn "$O/torch.log"; tail -22 "$O/ours.log"
tar czf "$O/../run4.tgz" -C "$O/.." r4 && rm -rf "$O"
