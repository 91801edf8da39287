#!/usr/bin/env bash
set -u
B=target/gpu-bundle
O=${OUT:-/tmp/out}; mkdir -p $O
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib:${LD_LIBRARY_PATH:-}
NV=/usr/local/cuda/bin
FL="-arch=sm_90 --fmad=false --prec-div=true --prec-sqrt=true --ftz=false -Ikernels"
$NV/nvcc $FL -cubin -o /tmp/s.cubin kernels/seqwise_loss.cu && $NV/cuobjdump -sass /tmp/s.cubin > /tmp/s.sass
python3 - <<'PY' > $O/sass-summary.txt
import re
txt=open('/tmp/s.sass').read()
for fn in re.split(r'\n\s*Function : ', txt)[1:]:
    name=fn.split('\n')[0]
    ins=re.findall(r'/\*[0-9a-f]{4}\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)', fn)
    from collections import Counter
    c=Counter(i[1].split('.')[0] for i in ins)
    print(name, len(ins), dict(c.most_common(25)))
PY
awk '/Function : seqwise_bwd_v8/,/Function : seqwise_fwd_chunk_v8/' /tmp/s.sass > $O/bwd_v8.sass
awk '/Function : seqwise_fwd_chunk_v8/,/Function : seqwise_bwd_v4/' /tmp/s.sass > $O/fwd_v8.sass
$NV/nvcc $FL -cubin -o /tmp/f.cubin $B/fdiv.cu && $NV/cuobjdump -sass /tmp/f.cubin > $O/fdiv.sass
NCU=/usr/local/cuda/bin/ncu
for shape in 4096x256x8 65536x256x8; do
  echo "== $shape map" >> $O/ncu.txt
  timeout 120 $NCU --clock-control none -k regex:seqwise_fwd_chunk --launch-skip 4 --launch-count 1 \
   --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,launch__grid_size,smsp__inst_executed.sum \
   $B/gpu_seqwise_loss-bench --only $shape --objective map --iters 3 --warmup 2 2>&1 | grep -E "seqwise_|duration|throughput|registers|warps_active|grid_size|inst_executed" >> $O/ncu.txt
done
$B/gpu_seqwise_loss-bench --json $O/ours.json > $O/ours.txt 2>&1
python3 $B/torch_seqwise_loss.py --only 4096x256x8 --iters 100 --warmup 10 --json $O/torch4096.json > $O/torch4096.txt 2>&1
python3 $B/torch_seqwise_loss.py --only 33x129x8 --iters 100 --warmup 10 --json $O/torch33.json > $O/torch33.txt 2>&1
cd $O && tar czf sass.tgz *.sass && rm *.sass
