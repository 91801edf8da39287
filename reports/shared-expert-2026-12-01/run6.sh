#!/usr/bin/env bash
# Device run 6 (H200): at dense layouts (BITPARITY_SHAPES=reference-dense), a
# sub-batch keeps the full batch's alignment class: is Hopper's pinned
# algorithm batch-invariant then? cuBLAS's default for comparison.
set -u
B=target/gpu-bundle
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
O="${OUT:-out}/r6"; mkdir -p "$O"
cp "$B/COMMIT" "$O/"; date -u > "$O/date.txt"
for s in cublaslt-pinned-aligned cublas; do
    BITPARITY_SHAPES=reference-dense BITPARITY_MAX_T=4096 timeout -s INT 110 $B/bitparity check --op shared_expert \
        --subject $s --property batch-invariance --property determinism --cases 16 --seed 103 --quiet \
        --json "$O/$s-dense.json" --markdown "$O/$s-dense.md" --corpus "$O/corpus" > "$O/$s-dense.log" 2>&1
    echo "exit $?" >> "$O/$s-dense.log"; grep -v "^  |" "$O/$s-dense.log" | grep -v "^  *[a-z-]* *[0-9]" | tail -20
done
tar czf "$O/../run6.tgz" -C "$O/.." r6 && rm -rf "$O"
