#!/usr/bin/env bash
# The PyTorch providers as bitparity subjects on the H200, through the
# exec protocol: every property, every op; the shrunk failures saved under
# $OUT/corpus. Then the GPU suites and a check of our own kernels at this
# commit. Run from the repository root with the bundle carried.
set -u
B=target/gpu-bundle
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
export BITPARITY_DEVICE=cuda PYTHONUNBUFFERED=1
O=$OUT; S=${1:-80}
{
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; cat $B/COMMIT; date -u
python3 -c "import torch; print('torch', torch.__version__)"
for spec in "seqwise_loss torch_seqwise_loss.py" "router torch_router.py" "shared_expert torch_shared_expert.py"; do
  set -- $spec; op=$1; prov=$2
  echo "== $op: exec:python3 python/providers/$prov, $S s, every property"
  t0=$(date +%s)
  timeout $((S + 120)) $B/bitparity check --op $op --subject "exec:python3 python/providers/$prov" --seconds $S --seed 20261130 \
    --corpus $O/corpus --json $O/$op.json --markdown $O/$op.md --html $O/$op.html > $O/$op.txt 2>&1
  echo "rc=$? in $(( $(date +%s) - t0 )) s"
  grep -vE "^\s*$" $O/$op.txt | grep -vE "^  [a-z-]+ +[0-9]+ " | head -40
done
echo "== corpus entries saved"; find $O/corpus -name '*.json' | sort
echo "== gpu-test, every op (60 generated cases per property)"
BITPARITY_GPU_CASES=60 timeout 200 $B/gpu-test > $O/gpu-test.log 2>&1; echo "gpu-test rc=$?"; grep -E "test result" $O/gpu-test.log
date -u
} > $O/run.log 2>&1
cd $O && tar czf torch-subjects.tgz *.json *.md *.html *.txt corpus gpu-test.log 2>/dev/null; rm -rf *.json *.md *.html *.txt corpus gpu-test.log
cat $O/run.log
