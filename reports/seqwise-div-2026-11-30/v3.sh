#!/usr/bin/env bash
# The shared-divisor division and the backward's row loop: every check, then timings.
set -u
B=target/gpu-bundle
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
O=$OUT
{
date -u; cat $B/COMMIT 2>/dev/null
echo "== exhaustive exp + rcp + div_by check"
timeout 120 $B/bitparity-expf-check 2>&1 | tail -5; echo "expf-check rc=$?"
echo "== gpu-test seqwise (200 generated cases per property)"
BITPARITY_GPU_CASES=200 timeout 200 $B/gpu-test seqwise > $O/gpu-test.log 2>&1; echo "gpu-test rc=$?"; grep -E "^test |test result" $O/gpu-test.log | tail -20
echo "== check --op seqwise_loss --subject cuda 100 s"
timeout 150 $B/bitparity check --op seqwise_loss --subject cuda --seed 20261130 --seconds 100 --no-save \
  --json $O/check-cuda.json --markdown $O/check-cuda.md > $O/check-cuda.txt 2>&1; echo "check rc=$?"
tail -25 $O/check-cuda.txt
echo "== bench ours"
$B/gpu_seqwise_loss-bench --json $O/ours.json 2>&1; echo "bench rc=$?"
echo "== ncu bwd/fwd 65536 map"
timeout 100 /usr/local/cuda/bin/ncu --clock-control none -k regex:seqwise --launch-skip 6 --launch-count 3 \
   --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum \
   $B/gpu_seqwise_loss-bench --only 65536x256x8 --objective map --iters 3 --warmup 2 2>&1 | grep -E "^  seqwise_|duration|throughput|inst_executed"
echo "== torch topk capture variants"
timeout 120 python3 $B/topkcap.py 2>&1 | grep -v Warning
date -u
} > $O/v3.log 2>&1
cat $O/v3.log
