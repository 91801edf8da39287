#!/usr/bin/env bash
# 1 GPU against 2 GPUs of one host: `bitparity check --subject cuda --devices ...`
# for the same time budget, every op, every property (the CPU oracles
# included), then the GPU-side properties only (conformance, offset-stride,
# determinism, padding, batch-invariance, validation).
set -u
B=target/gpu-bundle
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
O=$OUT; S=${1:-40}
{
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader; nproc; cat $B/COMMIT; date -u
for props in all gpu; do
  P=""; [ $props = gpu ] && P="--property conformance --property offset-stride --property determinism --property padding --property batch-invariance --property validation"
  for dev in 0 all; do
    echo "== properties=$props devices=$dev seconds=$S"
    t0=$(date +%s.%N)
    $B/bitparity check --subject cuda --devices $dev --seconds $S --seed 7 --no-save --quiet $P \
      --json $O/scale-$props-$dev.json > $O/scale-$props-$dev.txt 2>&1; echo "rc=$? wall $(python3 -c "import time; print(round(time.time() - $t0, 1))") s"
    grep -E "device .*cases/s|cases in" $O/scale-$props-$dev.txt
  done
done
date -u
} > $O/scale.log 2>&1
cat $O/scale.log
