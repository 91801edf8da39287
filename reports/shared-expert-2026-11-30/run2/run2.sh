#!/bin/bash
# Run 2: shared_expert GPU tests judged by the op's profile oracle, then the bench.
B=.device-carry/se-bundle
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
mkdir -p $OUT/r2
nvidia-smi > $OUT/r2/smi.txt 2>&1
echo "== tests"; BITPARITY_GPU_CASES=600 BITPARITY_GPU_SEED=388818 timeout 150 $B/gpu-test shared_expert 2>&1 | tee $OUT/r2/tests.log | grep -v '^  ' | tail -30
echo "== bench"; timeout 120 $B/gpu_shared_expert-bench --json $OUT/r2/bench.json 2>&1 | tee $OUT/r2/bench.log
echo "== bench again (spread)"; timeout 30 $B/gpu_shared_expert-bench --quick --iters 50 2>&1 | tee $OUT/r2/bench-repeat.log
