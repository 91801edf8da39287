#!/usr/bin/env bash
# PyTorch's providers (python/providers/torch_*.py: the native TorchTitan loss,
# the router of SPEC section 4, the SwiGLU MLP on cuBLAS) as exec subjects on
# the GPU, every property, at once (4 workers each: RAYON_NUM_THREADS). The
# providers claim the mask padding rule and their PyTorch's clamp tie.
# SIGINT at the limit: the shrinks in flight stop, the tables print and the
# corpus is saved. Writes under $R (default $OUT/r/torch). Run from the
# repository root with the bundle carried. Argument: seconds per op.
set -u
B=target/gpu-bundle
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
export BITPARITY_DEVICE=cuda PYTHONUNBUFFERED=1 RAYON_NUM_THREADS=4
O=${R:-$OUT/r}/torch; S=${1:-150}; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat $B/COMMIT; date -u
python3 -c "import torch; print('torch', torch.__version__)"
for op in seqwise_loss router shared_expert; do
  ( t0=$(date +%s)
    timeout -s INT -k 30 $((S + 90)) $B/bitparity check --op $op --subject "exec:python3 python/providers/torch_$op.py" \
      --seconds $S --seed 20261201 --corpus $O/corpus --json $O/$op.json --markdown $O/$op.md --html $O/$op.html \
      > $O/$op.txt 2>&1
    echo "$op: rc=$? in $(( $(date +%s) - t0 )) s" ) &
done
wait
echo "== corpus entries saved"; find $O/corpus -name '*.json' | sort
date -u
