#!/bin/bash
# Re-capture the real SLURM outputs in this folder from a running private test
# cluster (python -m tests.slurm_cluster prints how to source its env.sh).
# Usage: source BASE/env.sh; bash capture.sh [OUT_DIR]   (takes about 2 minutes:
# the TIMEOUT sample needs the shortest time limit, 1 minute, to expire).
set -euo pipefail
out=$(cd "${1:-$(dirname "$0")}" && pwd)
work=$(mktemp -d)
cd "$work"
fmt='JobID:|,State:|,exit_code:|,NodeList:|,Reason:|'
sub() { sbatch --parsable -o /dev/null "$@"; }

# sbatch errors (stderr) and the sacct message on a cluster without accounting.
sbatch --parsable -p nosuch --wrap true 2>"$out/sbatch_invalid_partition.txt" || true
sbatch --parsable --gres=gpu:3 --wrap true 2>"$out/sbatch_node_config.txt" || true
sbatch --parsable --mem=100G --wrap true 2>"$out/sbatch_memory.txt" || true
sub --wrap true >"$out/sbatch_parsable.txt"
sacct -P -n -X -j 1 -o JobID,State,ExitCode,Reason >/dev/null 2>"$out/sacct_disabled.txt" || true
squeue -h -t all -j 999999 -O "$fmt" >/dev/null 2>"$out/squeue_invalid_job_id.txt" || true

# A mix of states: completed, failed (exit 5), killed by signal 9, running,
# pending on resources / held / on a dependency, a drained node, cancelled.
scontrol update nodename=n4 state=drain reason=capture
ok=$(sub --wrap 'echo ok')
fail=$(sub --wrap 'exit 5')
kill9=$(sub --wrap 'kill -9 $$')
run1=$(sub -N 1 -n 2 --wrap 'sleep 30')
run2=$(sub -N 2 -n 4 --wrap 'sleep 30')
big=$(sub -N 3 -n 6 --wrap 'true')
held=$(sub -H --wrap true)
dep=$(sub --dependency=afterok:"$run1" --wrap true)
never=$(sub --dependency=afterok:"$fail" --wrap true)
drained=$(sub -w n4 --wrap true)
cancelme=$(sub --wrap 'sleep 30')
timeout=$(sub -t 1 --wrap 'sleep 300')
sleep 4
scancel "$cancelme"
sleep 1
ids="$ok,$fail,$kill9,$run1,$run2,$big,$held,$dep,$never,$drained,$cancelme,$timeout"
echo "$ids" >"$out/squeue_mixed_ids.txt"
squeue -h -t all -j "$ids" -O "$fmt" >"$out/squeue_mixed.txt"
# 22.05 ignores -j/-t/-u with --json: this lists every job the controller holds.
squeue --json -t all -j "$ok,$fail,$cancelme" >"$out/squeue_mixed.json"
scontrol -o show job "$kill9" >"$out/scontrol_kill9.txt"
scancel "$run1" "$run2" "$big" "$held" "$dep" "$never" "$drained"
scontrol update nodename=n4 state=resume
# Wait for the time limit (checked about every 30 s after the 1-minute limit).
for _ in $(seq 150); do
  state=$(squeue -h -t all -j "$timeout" -o %T)
  [ "$state" = TIMEOUT ] && break
  sleep 1
done
squeue -h -t all -j "$timeout" -O "$fmt" >"$out/squeue_timeout.txt"
squeue --json -t all -j "$timeout" >"$out/squeue_timeout.json"
# The same print code as a real accounting DB, fed from the jobcomp file.
sacct -c -P -n -j "$ok,$fail,$timeout" -o JobID,State,ExitCode >"$out/sacct_jobcomp.txt" || true
rm -rf "$work"
