#!/usr/bin/env bash
# Device run 3 (H200): the speed table, both sides in one run: PyTorch's
# bf16 MLP (eager, CUDA graph, torch.compile + graph), then ours (the strict
# kernels, the cublas and cublaslt-pinned subjects).
set -u
B=target/gpu-bundle
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
O="${OUT:-out}/r3"; mkdir -p "$O"
cp "$B/COMMIT" "$O/"; date -u > "$O/date.txt"
timeout 150 python3 benches/torch_shared_expert.py --json "$O/torch.json" > "$O/torch.log" 2>&1; echo "exit $?" >> "$O/torch.log"
timeout 200 $B/gpu_shared_expert-bench --json "$O/ours.json" > "$O/ours.log" 2>&1; echo "exit $?" >> "$O/ours.log"
cat "$O/torch.log" "$O/ours.log"
tar czf "$O/../run3.tgz" -C "$O/.." r3 && rm -rf "$O"
