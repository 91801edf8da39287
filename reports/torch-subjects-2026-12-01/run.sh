#!/usr/bin/env bash
# The PyTorch loss and router providers, which now claim the native
# TorchTitan padding rule (mask), as bitparity subjects on the H200 through
# the exec protocol: every property; shrunk failures saved under
# $OUT/corpus. SIGINT (not SIGTERM, not KILL) at the time limit, so the
# tables are printed and the corpus saved. Run from the repository root with
# the bundle carried. Argument: seconds per op (default 50).
set -u
B=target/gpu-bundle
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
export BITPARITY_DEVICE=cuda PYTHONUNBUFFERED=1
O=$OUT/torch; S=${1:-50}; mkdir -p $O
{
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat $B/COMMIT; date -u
python3 -c "import torch; print('torch', torch.__version__)"
for spec in "seqwise_loss torch_seqwise_loss.py" "router torch_router.py"; do
  set -- $spec; op=$1; prov=$2
  echo "== $op: exec:python3 python/providers/$prov, $S s, every property"
  t0=$(date +%s)
  timeout -s INT $((S + 100)) $B/bitparity check --op $op --subject "exec:python3 python/providers/$prov" --seconds $S --seed 20261201 \
    --corpus $O/corpus --json $O/$op.json --markdown $O/$op.md --html $O/$op.html > $O/$op.txt 2>&1
  echo "rc=$? in $(( $(date +%s) - t0 )) s"
done
echo "== corpus entries saved"; find $O/corpus -name '*.json' | sort
date -u
} > $O/run.log 2>&1
cd $O && tar czf ../torch-subjects.tgz . && cd .. && rm -rf torch
