#!/bin/bash
# Re-capture the Torque-format outputs in this folder from SLURM's PBS/Torque wrappers
# (Debian's slurm-wlm-torque: qsub, qstat, qdel) on a running private test cluster with
# 4 nodes x 2 CPUs (python -m tests.slurm_cluster prints how to source its env.sh).
# Usage: source BASE/env.sh; bash capture.sh [OUT_DIR]   (takes about 10 seconds).
# Files ending in .rc hold the exit status of the command captured beside them.
set -euo pipefail
out=$(cd "${1:-$(dirname "$0")}" && pwd)
work=$(mktemp -d)
cd "$work"

# job NAME RESOURCES COMMAND: a Torque-style script, like the ones hpcflow renders.
job() {
  printf '#!/bin/bash\n#PBS -N %s\n#PBS -l %s\n#PBS -l walltime=0:05:00\n#PBS -q debug\n%s\n' \
    "$1" "$2" "$3" >"$1.pbs"
}
sub() {  # sub NAME [QSUB OPTIONS...]: submit NAME.pbs as hpcflow does, print the id
  local name=$1; shift
  qsub -o "$work/$name.out" -e "$work/$name.err" "$@" "$name.pbs"
}
capture() {  # capture NAME COMMAND...: stdout and stderr to NAME.txt, exit status to NAME.rc
  local name=$1; shift
  set +e; "$@" >"$out/$name.txt" 2>&1; echo $? >"$out/$name.rc"; set -e
}

# Submission: the bare id, and errors (the wrapper prints sbatch's message on stdout).
job ok nodes=1:ppn=1 'echo ok'
job fail nodes=1:ppn=1 'echo doomed >&2; exit 3'
job gpus nodes=1:ppn=1:gpus=3 true
job memory nodes=1:ppn=1,mem=100gb true
ok=$(sub ok); echo "$ok" >"$out/qsub_id.txt"
fail=$(sub fail)
capture qsub_invalid_queue qsub -q nosuch -o "$work/q.out" -e "$work/q.err" ok.pbs
capture qsub_node_config qsub -o "$work/g.out" -e "$work/g.err" gpus.pbs
capture qsub_memory qsub -o "$work/m.out" -e "$work/m.err" memory.pbs
sleep 3

# A mix of states: completed, failed (exit 3), running on 1 and 2 nodes, pending on
# resources, held, cancelled while running.
job run1 nodes=1:ppn=2 'sleep 30'
job run2 nodes=2:ppn=2 'sleep 30'
job big nodes=4:ppn=2 true
job held nodes=1:ppn=1 true
job cancelme nodes=1:ppn=1 'sleep 30'
run1=$(sub run1); run2=$(sub run2); big=$(sub big)
held=$(sub held -h)
cancelme=$(sub cancelme)
sleep 3
qdel "$cancelme"
sleep 1
ids="$ok $fail $run1 $run2 $big $held $cancelme"
echo "$ids" >"$out/qstat_ids.txt"
# shellcheck disable=SC2086
{
  capture qstat_table qstat $ids
  capture qstat_full qstat -f $ids
  capture qstat_a qstat -a $ids
  capture qstat_unknown qstat -f 999999
  capture qstat_some_unknown qstat -f "$ok" 999999
  capture qstat_json_refused qstat -f -F json -x "$ok"
  capture qdel_ended qdel "$ok"
  capture qdel_unknown qdel 999999
  capture qdel_running qdel $run1 $run2 $big $held
}
rm -rf "$work"
