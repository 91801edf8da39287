#!/usr/bin/env bash
# One device call: the seqwise_loss bench three ways in one run (ours eager
# and graph-replayed; PyTorch eager, CUDA graph, torch.compile in a graph),
# PyTorch one shape a process so a slow compile loses one shape only; both
# sides also time 20 graph replays back to back (the steady-state table).
set -u
B="$(cd "$(dirname "$0")" && pwd)"
cd "$B/../.."
export PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
{
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat $B/COMMIT; date -u
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" 2>&1 | tail -1
echo "== ours"; timeout 90 $B/gpu_seqwise_loss-bench --json $OUT/speed-ours.json; echo "ours rc=$?"; date -u
for s in 4096x256x8 65536x256x8 33x129x8 8193x64x6 4097x512x8; do
  echo "== PyTorch $s"; timeout 70 python3 $B/torch_seqwise_loss.py --only $s --json $OUT/torch-$s.json --iters 100 --warmup 10 2>&1 | tail -4; echo "torch $s rc=$?"; date -u
done
} > $OUT/bench.log 2>&1
python3 - "$OUT" <<'PY'
import json, glob, sys
out = sys.argv[1]; rows = []; head = None
for f in sorted(glob.glob(out + "/torch-*.json")):
    j = json.load(open(f)); head = head or j; rows += j["rows"]
if head:
    head["rows"] = rows; json.dump(head, open(out + "/speed-torch.json", "w"), indent=2)
PY
python3 $B/speed_table.py $OUT/speed-ours.json $OUT/speed-torch.json > $OUT/speed.md 2>>$OUT/bench.log
rm -f $OUT/torch-*.json
cat $OUT/bench.log | tail -40; cat $OUT/speed.md
