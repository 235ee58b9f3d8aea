#!/usr/bin/env bash
# A sharded sweep as a Kubernetes Indexed Job (deploy/README.md): prints the Job for
# its parameters, to pipe into kubectl:
#
#   deploy/k8s-indexed-job.sh --shards 8 --seeds 1..=200 --scenario scenarios/relay.toml \
#       --results gs://BUCKET/sweeps/relay-200 --image REGISTRY/spool-sim:TAG | kubectl create -f -
#   # when the Job has ended:
#   sim merge gs://BUCKET/sweeps/relay-200
#
# Each parameter has one place: an option, else its environment variable, else the
# default set below; deploy/k8s-indexed-job.yaml is this script's output with the
# defaults (CI checks that they agree). The scenario is a file of the repository's
# scenarios/ (relative to the current directory, else to the repository): the image
# holds them in /scenarios (deploy/Dockerfile). `--only I` prints a Job that runs
# shard I alone: the command `sim merge` names for a shard whose results are missing.
set -euo pipefail

# The defaults: the one place each is set.
shards=${SWEEP_SHARDS:-16}
seeds=${SWEEP_SEEDS:-1..=1000}
scenario=${SWEEP_SCENARIO:-scenarios/sizing.toml}
results=${SWEEP_RESULTS:-gs://BUCKET/sweeps/sizing-2026-12-01}
image=${SWEEP_IMAGE:-REGISTRY/spool-sim:TAG}
name=${SWEEP_NAME:-}
# A shard that fails otherwise than by a finding (its node lost, out of memory, the
# results not written) is run again, up to this many times for its index alone.
retries=${SWEEP_RETRIES:-2}
only=

die() {
    echo "k8s-indexed-job.sh: $*" >&2
    exit 2
}

while [ $# -gt 0 ]; do
    case $1 in
        --shards) shards=${2:?--shards needs a count}; shift 2 ;;
        --seeds) seeds=${2:?--seeds needs a range}; shift 2 ;;
        --scenario) scenario=${2:?--scenario needs a file}; shift 2 ;;
        --results) results=${2:?--results needs gs://BUCKET/PREFIX}; shift 2 ;;
        --image) image=${2:?--image needs an image}; shift 2 ;;
        --name) name=${2:?--name needs a Job name}; shift 2 ;;
        --retries) retries=${2:?--retries needs a count}; shift 2 ;;
        --only) only=${2:?--only needs a shard index}; shift 2 ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | grep -v '^set' | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
        *) die "unknown argument $1 (--help says what it takes)" ;;
    esac
done

case $shards in '' | *[!0-9]* | 0) die "--shards $shards: a positive count" ;; esac
case $retries in '' | *[!0-9]*) die "--retries $retries: a count" ;; esac
case $only in
    '') ;;
    *[!0-9]*) die "--only $only: one shard index" ;;
    *) [ "$only" -lt "$shards" ] || die "--only $only: not below --shards $shards" ;;
esac
case $results in
    gs://?*) ;;
    *) die "--results $results: gs://BUCKET/PREFIX (the pods share no directory)" ;;
esac
case $seeds in
    *[!0-9.=]* | '') die "--seeds $seeds: A..=B, A..B or one seed" ;;
esac

# The scenario, as the image holds it: /scenarios/<its path under scenarios/>.
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ -f "$scenario" ]; then
    file=$(realpath "$scenario")
elif [ "${scenario#/}" = "$scenario" ] && [ -f "$repo/$scenario" ]; then
    file=$(realpath "$repo/$scenario")
else
    die "no scenario $scenario (relative to $(pwd) or to the repository $repo)"
fi
case $file in
    "$repo/scenarios/"*) in_image=/scenarios/${file#"$repo/scenarios/"} ;;
    *) die "$file is not in $repo/scenarios/, which the image holds (deploy/Dockerfile): add it there and build the image" ;;
esac
base=$(basename "$file" .toml | tr -c 'a-z0-9\n' '-')
[ -n "$name" ] || name=spool-sweep-$base

# What `sim merge` prints to rerun a shard whose results are missing.
rerun="kubectl delete job $name-shard-{shard} --ignore-not-found && deploy/k8s-indexed-job.sh --shards $shards --seeds $seeds --scenario scenarios/${in_image#/scenarios/} --results $results --image $image --name $name --only {shard} | kubectl create -f -"

if [ -n "$only" ]; then
    meta="name: $name-shard-$only"
    completions=1
    shard=$only/$shards
    what="shard $only of a sweep of $shards shards"
    create="deploy/k8s-indexed-job.sh ... --only $only | kubectl create -f -"
    name=$name-shard-$only
else
    meta="name: $name"
    completions=$shards
    shard=JOB_COMPLETION_INDEX/$shards
    what="a sweep of $shards shards"
    create="deploy/k8s-indexed-job.sh ... | kubectl create -f -"
fi

# A YAML single-quoted string.
q() { printf "'%s'" "${1//\'/\'\'}"; }

cat <<EOF
# $what: seeds $seeds of $in_image, results to $results.
# Made by deploy/k8s-indexed-job.sh, which takes the shard count, the seeds and the
# scenario (deploy/README.md); do not edit by hand:
#   $create
# A shard whose run finds a failed invariant exits 1: its index fails at once
# (FailIndex: the runs are deterministic, a retry finds the same) and the others run
# on. The Job's failed indexes, and the findings each one's log ends with:
#   kubectl get job $name -o jsonpath='{.status.failedIndexes}'
#   kubectl get pods -l job-name=$name -o jsonpath='{range .items[?(@.status.phase=="Failed")]}{.metadata.annotations.batch\.kubernetes\.io/job-completion-index}{"\\n"}{.status.containerStatuses[0].state.terminated.message}{end}'
# \`sim merge $results\` lists every finding with the command that replays it.
apiVersion: batch/v1
kind: Job
metadata:
  $meta
  labels:
    app.kubernetes.io/name: spool-sweep
spec:
  completionMode: Indexed
  completions: $completions
  parallelism: $completions
  # Per index, not for the whole Job: a failed shard never stops the others.
  backoffLimitPerIndex: $retries
  podFailurePolicy:
    rules:
      # Exit 1: the shard ran and found a failed invariant (its results are
      # written, the finding among them). Not retried.
      - action: FailIndex
        onExitCodes:
          containerName: sim
          operator: In
          values: [1]
      # Evicted or preempted: run again without counting a retry.
      - action: Ignore
        onPodConditions:
          - type: DisruptionTarget
            status: "True"
  template:
    metadata:
      labels:
        app.kubernetes.io/name: spool-sweep
    spec:
      restartPolicy: Never          # required by backoffLimitPerIndex and podFailurePolicy
      serviceAccountName: spool-sweeps    # may write to the bucket (Workload Identity)
      containers:
        - name: sim
          image: $(q "$image")   # every shard the same image: merge refuses two builds
          args:
            - sweep
            - $(q "$in_image")
            - $(q "--seeds=$seeds")
            - $(q "--shard=$shard")
            - $(q "--results=$results")
            - --jobs=1
            - $(q "--rerun=$rerun")
          # A failed shard's status says why: the end of its log (its findings,
          # each with the command that replays it).
          terminationMessagePolicy: FallbackToLogsOnError
          resources:
            requests: { cpu: "1", memory: "512Mi" }   # sizing.toml: ~100 MB a run
            limits: { memory: "1Gi" }
EOF
