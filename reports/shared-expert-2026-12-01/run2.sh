#!/usr/bin/env bash
# Device run 2 (H200): cuBLAS with fp32 reductions and cuBLASLt with a pinned
# algorithm, tier A (every property) and tier B (reference shapes).
set -u
B=target/gpu-bundle
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
O="${OUT:-out}/r2"; mkdir -p "$O"
cp "$B/COMMIT" "$O/"
t0=$(date +%s); stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
for s in cublas-fp32-reduction cublaslt-pinned; do
    stamp "$s, tier A shapes, every property"
    timeout -s INT 100 $B/bitparity check --op shared_expert --subject $s --cases 10000 --seed 101 --quiet \
        --json "$O/$s-a.json" --markdown "$O/$s-a.md" --corpus "$O/corpus" > "$O/$s-a.log" 2>&1
    echo "exit $?" >> "$O/$s-a.log"; grep -v "^  |" "$O/$s-a.log" | tail -45
    stamp "$s, reference shapes"
    BITPARITY_SHAPES=reference BITPARITY_MAX_T=4096 timeout -s INT 130 $B/bitparity check --op shared_expert --subject $s \
        --property batch-invariance --property determinism --property offset-stride --cases 24 --seed 102 --quiet \
        --json "$O/$s-b.json" --markdown "$O/$s-b.md" --corpus "$O/corpus" > "$O/$s-b.log" 2>&1
    echo "exit $?" >> "$O/$s-b.log"; grep -v "^  |" "$O/$s-b.log" | tail -30
done
stamp done
tar czf "$O/../run2.tgz" -C "$O/.." r2 && rm -rf "$O"
