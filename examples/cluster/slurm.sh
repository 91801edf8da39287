#!/usr/bin/env bash
# A bitparity campaign as a Slurm job array: N shards of one run, one GPU
# each, then one merge. Submit with
#
#   sbatch --array=1-16 examples/cluster/slurm.sh      # the shards
#   sbatch --dependency=afterany:<array job id> --wrap \
#       'bitparity merge runs/seed-42/shard-*.json --json runs/seed-42/merged.json --markdown runs/seed-42/merged.md'
#
# Every shard must use the same seed, case count, properties and knobs (merge
# refuses anything else). Failures go to one shared corpus folder: entries
# are written atomically under content-derived names, so shards never clobber
# each other and the same failure is one file.
#SBATCH --job-name=bitparity
#SBATCH --gpus=1
#SBATCH --time=02:00:00
set -euo pipefail
N="${SLURM_ARRAY_TASK_COUNT:?run as an array job}"
I="${SLURM_ARRAY_TASK_ID:?run as an array job}"
SEED="${SEED:-42}"
OUT="runs/seed-$SEED"
mkdir -p "$OUT"
# Exit 1 (a failure) and 3 (nothing judged) are results the merge reports;
# the array task itself succeeds once its summary is written.
bitparity check --subject cuda --seed "$SEED" --cases "${CASES:-2000000}" --shard "$I/$N" \
    --quiet --corpus "$OUT/corpus" --json "$OUT/shard-$I.json" || test -s "$OUT/shard-$I.json"
