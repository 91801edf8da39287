#!/usr/bin/env bash
# The fused finalize: the GPU suites, a check of every property, the bench.
set -u
B=target/gpu-bundle
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
O=$OUT
{
date -u; cat $B/COMMIT
echo "== gpu-test seqwise (300 generated cases per property)"
BITPARITY_GPU_CASES=300 timeout 200 $B/gpu-test seqwise > $O/gpu-test.log 2>&1; echo "gpu-test rc=$?"; grep -E "^test |test result" $O/gpu-test.log | tail -20
echo "== check --op seqwise_loss --subject cuda 60 s, T up to 16384"
BITPARITY_MAX_TE=65536 BITPARITY_MAX_T=16384 timeout 120 $B/bitparity check --op seqwise_loss --subject cuda --seed 20261201 --seconds 60 --no-save \
  --property conformance --property determinism --property offset-stride --property padding --property validation \
  --json $O/check-cuda.json --markdown $O/check-cuda.md > $O/check-cuda.txt 2>&1; echo "check rc=$?"
grep -E "cases in|cuda  |passed|FAILED" $O/check-cuda.txt | head -12
echo "== bench ours"
$B/gpu_seqwise_loss-bench --json $O/ours.json 2>&1; echo "bench rc=$?"
date -u
} > $O/v4.log 2>&1
cat $O/v4.log
