#!/usr/bin/env bash
# A sweep of 1,000 seeds as a Slurm job array of 16 shards (deploy/README.md):
#
#   sbatch deploy/slurm-array.sh
#   # when every task has finished:
#   sim merge /scratch/sweeps/sizing-2026-12-01 --out reports/sizing-sweep
#
# Each task runs its shard with the same `sim` binary (results carry its checksum;
# merge refuses two builds) and writes one result file per run to a directory every
# node sees (or a gs:// prefix).
#SBATCH --job-name=spool-sizing-sweep
#SBATCH --array=0-15
#SBATCH --cpus-per-task=1
#SBATCH --mem=1G
#SBATCH --output=sweep-%A-%a.log
set -euo pipefail
SIM=${SIM:-$HOME/bin/sim}
RESULTS=${RESULTS:-/scratch/sweeps/sizing-2026-12-01}
exec "$SIM" sweep scenarios/sizing.toml --seeds 1..=1000 \
    --shard SLURM_ARRAY_TASK_ID/16 --results "$RESULTS" --jobs 1
