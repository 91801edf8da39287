#!/usr/bin/env bash
# Device run 1 (H200): the cuBLAS subject of shared_expert, the strict
# kernels' 10,000-case conformance, and the speed table against PyTorch.
# Run from the repository root with the bundle carried (target/gpu-bundle:
# bitparity, gpu_shared_expert-bench, lib/ with GMP and MPFR).
set -u
B=target/gpu-bundle
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
# cuBLAS: CUDA's own, else the one PyTorch's wheels ship.
if [ ! -e /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13 ]; then
    d=$(dirname "$(find / -name 'libcublas.so.13' -not -path '*/proc/*' 2>/dev/null | head -n 1)")
    export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$d"
fi
O="${OUT:-out}/r"; mkdir -p "$O"
cp "$B/COMMIT" "$O/" 2>/dev/null
{ nvidia-smi; ls /usr/local/cuda/targets/x86_64-linux/lib | grep -i -E "cublas|nvrtc"; python3 -c "import torch; print(torch.__version__, torch.version.cuda)"; } > "$O/env.txt" 2>&1
t0=$(date +%s); stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }

stamp "0. strict kernels (cuda), tier A shapes, every property, 10,000 cases"
timeout -s INT 100 $B/bitparity check --op shared_expert --subject cuda --cases 10000 --seed 100 --quiet \
    --json "$O/strict-a.json" --markdown "$O/strict-a.md" --corpus "$O/corpus" > "$O/strict-a.log" 2>&1
echo "exit $?" >> "$O/strict-a.log"; tail -25 "$O/strict-a.log"

stamp "1. cuBLAS, tier A shapes, every property"
timeout -s INT 100 $B/bitparity check --op shared_expert --subject cublas --cases 10000 --seed 101 --quiet \
    --json "$O/cublas-a.json" --markdown "$O/cublas-a.md" --corpus "$O/corpus" > "$O/cublas-a.log" 2>&1
echo "exit $?" >> "$O/cublas-a.log"; tail -40 "$O/cublas-a.log"

stamp "2. cuBLAS, reference shapes: batch invariance, determinism, offset/stride"
BITPARITY_SHAPES=reference BITPARITY_MAX_T=4096 timeout -s INT 150 $B/bitparity check --op shared_expert --subject cublas \
    --property batch-invariance --property determinism --property offset-stride --cases 24 --seed 102 --quiet \
    --json "$O/cublas-b.json" --markdown "$O/cublas-b.md" --corpus "$O/corpus" > "$O/cublas-b.log" 2>&1
echo "exit $?" >> "$O/cublas-b.log"; tail -60 "$O/cublas-b.log"

stamp "3. strict kernels, reference shapes: the same properties"
BITPARITY_SHAPES=reference BITPARITY_MAX_T=4096 timeout -s INT 60 $B/bitparity check --op shared_expert --subject cuda \
    --property batch-invariance --property determinism --property offset-stride --cases 24 --seed 102 --quiet \
    --json "$O/strict-b.json" --markdown "$O/strict-b.md" --corpus "$O/corpus" > "$O/strict-b.log" 2>&1
echo "exit $?" >> "$O/strict-b.log"; tail -30 "$O/strict-b.log"

stamp "4. speed: PyTorch (eager, CUDA graph, torch.compile) and ours, one run"
timeout 90 python3 benches/torch_shared_expert.py --json "$O/torch.json" > "$O/torch.log" 2>&1; echo "exit $?" >> "$O/torch.log"; cat "$O/torch.log" | tail -12
timeout 60 $B/gpu_shared_expert-bench --json "$O/ours.json" > "$O/ours.log" 2>&1; echo "exit $?" >> "$O/ours.log"; cat "$O/ours.log"
stamp "done"
tar czf "$O/../run1.tgz" -C "$O/.." r && rm -rf "$O"
