#!/bin/bash
# Run 3: the shared_expert GPU tests with the op's harness wired (generic suite on its generated cases).
B=.device-carry/se-bundle
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
mkdir -p $OUT/r3
timeout 100 $B/gpu-test shared_expert 2>&1 | tee $OUT/r3/tests.log | grep -v '^  ' | tail -40
