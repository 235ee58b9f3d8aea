#!/usr/bin/env bash
# A sharded sweep as a Slurm job array (deploy/README.md). Run it; it submits itself:
#
#   deploy/slurm-array.sh                 # the defaults below: 1,000 seeds of sizing.toml, 16 shards
#   deploy/slurm-array.sh --shards 8 --seeds 1..=200 --scenario scenarios/relay.toml \
#       --results /scratch/sweeps/relay-200
#   # when every task has finished:
#   sim merge /scratch/sweeps/relay-200
#
# Each parameter has one place: an option, else its environment variable, else the
# default set below. The script resolves the scenario (relative to the current
# directory, else to the repository) and sim to absolute paths, then runs
# `sbatch --array=0-<shards-1>` on itself; each array task runs shard
# SLURM_ARRAY_TASK_ID of <shards>. `--only I[,J...]` submits those shards alone: the
# command `sim merge` names for a shard whose results are missing. `--dry-run` prints
# the sbatch command instead of running it. Arguments after `--` go to `sim sweep`
# (e.g. `-- --set drainer.workers=1,2,4`).
#
# Every task runs the same `sim` binary (results carry its checksum; merge refuses
# two builds) and writes one result file per run to a directory every node sees (or
# gs://BUCKET/PREFIX).
#SBATCH --job-name=spool-sweep
#SBATCH --cpus-per-task=1
#SBATCH --mem=1G
#SBATCH --output=sweep-%A-%a.log
set -euo pipefail

# The defaults: the one place each is set.
shards=${SWEEP_SHARDS:-16}
seeds=${SWEEP_SEEDS:-1..=1000}
scenario=${SWEEP_SCENARIO:-scenarios/sizing.toml}
results=${SWEEP_RESULTS:-/scratch/sweeps/sizing-2026-12-01}
sim=${SIM:-}
only=
dry_run=
task=
rerun=

usage() {
    sed -n '2,/^#SBATCH/p' "$0" | grep -v '^#SBATCH' | sed 's/^# \{0,1\}//' >&2
    echo "options: --shards N --seeds RANGE --scenario FILE --results DIR|gs://BUCKET/PREFIX --sim PATH --only I[,J...] --dry-run [-- SIM SWEEP ARGS]" >&2
    exit 2
}
die() {
    echo "slurm-array.sh: $*" >&2
    exit 2
}

while [ $# -gt 0 ]; do
    case $1 in
        --shards) shards=${2:?--shards needs a count}; shift 2 ;;
        --seeds) seeds=${2:?--seeds needs a range}; shift 2 ;;
        --scenario) scenario=${2:?--scenario needs a file}; shift 2 ;;
        --results) results=${2:?--results needs a location}; shift 2 ;;
        --sim) sim=${2:?--sim needs a path}; shift 2 ;;
        --only) only=${2:?--only needs shard indexes}; shift 2 ;;
        --dry-run) dry_run=1; shift ;;
        # Given by the submitting run to the array tasks, not by hand:
        --task) task=1; shift ;;
        --rerun) rerun=${2:?}; shift 2 ;;
        --) shift; break ;;
        -h | --help) usage ;;
        *) die "unknown argument $1 (--help lists them)" ;;
    esac
done
extra=("$@")

case $shards in
    '' | *[!0-9]* | 0) die "--shards $shards: a positive count" ;;
esac

if [ -n "$task" ] || [ -n "${SLURM_ARRAY_TASK_ID:-}" ]; then
    # An array task: run shard SLURM_ARRAY_TASK_ID of $shards. The submitting run
    # gave absolute paths (this is Slurm's copy of the script, in its spool).
    [ -n "${SLURM_ARRAY_TASK_ID:-}" ] || die "--task outside a Slurm array task (no SLURM_ARRAY_TASK_ID)"
    [ -n "$sim" ] || sim=$(command -v sim) || die "no sim: give --sim PATH"
    rerun_args=()
    [ -z "$rerun" ] || rerun_args=(--rerun "$rerun")
    echo "slurm-array.sh: task $SLURM_ARRAY_TASK_ID of $shards shards: $sim sweep $scenario --seeds $seeds -> $results" >&2
    exec "$sim" sweep "$scenario" --seeds "$seeds" \
        --shard "SLURM_ARRAY_TASK_ID/$shards" --results "$results" --jobs 1 \
        "${rerun_args[@]}" "${extra[@]}"
fi

# Submitting: every path made absolute here, where it means what the user meant.
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ -f "$scenario" ]; then
    scenario=$(realpath "$scenario")
elif [ "${scenario#/}" = "$scenario" ] && [ -f "$repo/$scenario" ]; then
    scenario=$(realpath "$repo/$scenario")
else
    die "no scenario $scenario (relative to $(pwd) or to the repository $repo)"
fi
if [ -z "$sim" ]; then
    sim=$(command -v sim || true)
    [ -n "$sim" ] || [ ! -x "$repo/target/release/sim" ] || sim=$repo/target/release/sim
    [ -n "$sim" ] || die "no sim on PATH nor $repo/target/release/sim: give --sim PATH (on a file system every node sees)"
fi
[ -x "$sim" ] || die "--sim $sim is not an executable"
sim=$(realpath "$sim")
case $results in
    gs://*) ;;
    *://*) die "--results $results: a directory or gs://BUCKET/PREFIX" ;;
    *) results=$(realpath -m "$results") ;;
esac
"$sim" sweep --help >/dev/null || die "$sim does not run here"

self=$(realpath "${BASH_SOURCE[0]}")
params=(--shards "$shards" --seeds "$seeds" --scenario "$scenario" --results "$results" --sim "$sim")
if [ -n "$only" ]; then
    for i in ${only//,/ }; do
        case $i in
            *[!0-9]*) die "--only $only: shard indexes, e.g. 3 or 3,7" ;;
        esac
        [ "$i" -lt "$shards" ] || die "--only $only: shard $i is not below --shards $shards"
    done
    array=$only
else
    array=0-$((shards - 1))
fi
# What `sim merge` prints to rerun a shard whose results are missing: this script
# with the same parameters and --only.
printf -v rerun '%q ' "$self" "${params[@]}"
rerun+="--only {shard}"
if [ ${#extra[@]} -gt 0 ]; then
    printf -v more ' %q' -- "${extra[@]}"
    rerun+=$more
fi
name=spool-sweep-$(basename "$scenario" .toml)
submit=(sbatch --array="$array" --job-name="$name" "$self" --task "${params[@]}" --rerun "$rerun" -- "${extra[@]}")
if [ -n "$dry_run" ]; then
    printf '%q ' "${submit[@]}"
    echo
    exit 0
fi
echo "slurm-array.sh: $shards shards (array $array) of $scenario, seeds $seeds -> $results" >&2
"${submit[@]}"
echo "slurm-array.sh: when every task has finished: $(printf '%q' "$sim") merge $(printf '%q' "$results")" >&2
