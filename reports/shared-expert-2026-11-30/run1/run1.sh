#!/bin/bash
# Run 1: shared_expert GPU tests, bench, two tuning variants, SASS.
B=.device-carry/se-bundle
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
mkdir -p $OUT/r
nvidia-smi > $OUT/r/smi.txt 2>&1
(which cuobjdump && cuobjdump --dump-sass $B/shared_expert.cu.cubin > $OUT/r/sass.txt) > $OUT/r/sass-which.txt 2>&1
echo "== bench quick (unchecked)"; timeout 60 $B/gpu_shared_expert-bench --quick --no-check 2>&1 | tee $OUT/r/quick.log
echo "== tests"; BITPARITY_GPU_CASES=400 timeout 200 $B/gpu-test shared_expert 2>&1 | tee $OUT/r/tests.log | grep -v '^  '| tail -40
echo "== bench"; timeout 150 $B/gpu_shared_expert-bench --json $OUT/r/bench.json 2>&1 | tee $OUT/r/bench.log
for v in "-DBP_SE_BK=8" "-DBP_SE_MIN_BLOCKS=1"; do echo "== variant $v"; BITPARITY_NVRTC_EXTRA="$v" timeout 40 $B/gpu_shared_expert-bench --quick --no-check 2>&1 | tee -a $OUT/r/variants.log; done
cd $OUT && tar czf r.tgz r && ls -la r
