#!/usr/bin/env bash
# Stop the private SLURM test cluster started by slurm/start-cluster.sh.
#
# Usage: slurm/stop-cluster.sh BASE_DIR
#
# 1. cancels every job still known to the cluster, and waits a little for
#    them to end;
# 2. stops the nodes: SIGTERM to each node's init (BASE_DIR/run/node-nI.pid),
#    which stops its slurmd and exits, and with it every process of the node
#    (its job steps, its GlusterFS client); then slurmctld, then slurmdbd and
#    mariadbd (clusters started with --accounting): SIGTERM, wait up to 10 s
#    (mariadbd: 30 s), then SIGKILL;
# 3. kills any stray process of this cluster (and of its jobs) that survived,
#    then munged;
# 4. meanwhile, once the nodes are gone, the shared file system: unmounts the
#    submit side's client, stops and deletes the GlusterFS volume, stops
#    glusterd (and a brick it left).
# Idempotent: stopping a stopped (or never started) cluster does nothing.
# BASE_DIR itself is left in place (logs stay readable); remove it yourself.
set -uo pipefail

if [ $# -ne 1 ] || [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
    sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
fi

BASE="$1"
if [ ! -d "$BASE" ]; then
    echo "stop-cluster: $BASE does not exist; nothing to stop"
    exit 0
fi
BASE="$(cd "$BASE" && pwd -P)"
CONF="$BASE/etc/slurm.conf"
RUN="$BASE/run"

# Called from start-cluster.sh's failure path, this script carries the
# cluster's marker variable. Its own subshells must not (strays are found by
# it, below, and /proc/PID/environ keeps what a process was started with):
# start again without it.
if [ -n "${HPCFLOW_SLURM_TEST_BASE+set}" ]; then
    exec env -u HPCFLOW_SLURM_TEST_BASE bash "$0" "$@"
fi

pid_alive() { [[ "${1:-}" =~ ^[0-9]+$ ]] && kill -0 "$1" 2>/dev/null; }
pid_of() { cat "$1" 2>/dev/null || true; }

# ---------------------------------------------------------------- cancel jobs
ctld_pid="$(pid_of "$RUN/slurmctld.pid")"
if [ -f "$CONF" ] && pid_alive "$ctld_pid" && command -v squeue > /dev/null 2>&1; then
    export SLURM_CONF="$CONF"
    active_states="PENDING,RUNNING,SUSPENDED,COMPLETING,CONFIGURING,RESIZING,REQUEUED,SIGNALING,STAGE_OUT"
    jobs="$(timeout 10 squeue -h -t "$active_states" -o '%A' 2>/dev/null | sort -u | tr '\n' ' ')"
    if [ -n "${jobs// /}" ]; then
        # shellcheck disable=SC2086
        timeout 10 scancel $jobs > /dev/null 2>&1 || true
        for _ in $(seq 1 100); do   # up to ~10 s (KillWait is 5 s)
            left="$(timeout 10 squeue -h -t "$active_states" -o '%A' 2>/dev/null || true)"
            [ -z "$left" ] && break
            sleep 0.1
        done
    fi
fi

# ---------------------------------------------------------------- stop daemons
stop_pid() {  # stop_pid PID NAME [TENTHS_OF_SECONDS_TO_WAIT]
    local pid="$1" name="$2" wait="${3:-100}" _
    pid_alive "$pid" || return 0
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 "$wait"); do
        pid_alive "$pid" || return 0
        # A zombie waiting for its (reparenting) parent counts as gone.
        if [ "$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null)" = "Z" ]; then return 0; fi
        sleep 0.1
    done
    echo "stop-cluster: $name (pid $pid) ignored SIGTERM; sending SIGKILL" >&2
    kill -KILL "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do
        pid_alive "$pid" || return 0
        if [ "$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null)" = "Z" ]; then return 0; fi
        sleep 0.1
    done
    echo "stop-cluster: warning: $name (pid $pid) still there after SIGKILL" >&2
}

# Only signal a PID from a PID file if it still is the daemon we expect
# (guards against a stale file whose PID was reused by another process).
is_daemon() {  # is_daemon PID EXE_NAME
    local comm
    comm="$(cat "/proc/$1/comm" 2>/dev/null || true)"
    [ "$comm" = "$2" ]
}

# ---------------------------------------------------------------- shared file system
# The submit side's client (the nodes' clients end with their nodes), then
# the volume, then glusterd. A cluster started with --shared-from has none of
# these: the volume belongs to the other cluster. Runs in the background
# while slurmctld stops (a volume stop takes a second or two).
is_mounted() {
    awk -v m="$1" -F ' - ' '{ split($1, a, " "); if (a[5] == m) found = 1 } END { exit !found }' \
        /proc/self/mountinfo
}
stop_gluster() {
    local gluster_dir="$BASE/gluster" own=1 volume="" key value pf pid sock
    if [ -s "$BASE/etc/shared-fs.env" ]; then
        while IFS='=' read -r key value; do
            case "$key" in
                GLUSTER_OWN) own="$value" ;;
                GLUSTER_VOLUME) volume="$value" ;;
            esac
        done < "$BASE/etc/shared-fs.env"
    fi
    [ "$own" = 1 ] || return 0
    if is_mounted "$BASE/shared"; then
        # Busy (a process still has its cwd there)? Detach it now; the client
        # ends when the last user lets go.
        umount "$BASE/shared" 2> /dev/null || umount -l "$BASE/shared" \
            || echo "stop-cluster: warning: cannot unmount $BASE/shared" >&2
    fi
    # The bricks' control sockets lie in /var/run/gluster (glusterd puts them
    # there whatever its run directory): note them, to remove them at the end.
    local brick_sockets=()
    for pf in "$gluster_dir"/run/vols/*/*.pid; do
        [ -e "$pf" ] || continue
        pid="$(pid_of "$pf")"
        if ! pid_alive "$pid" || ! is_daemon "$pid" glusterfsd; then continue; fi
        sock="$(tr '\0' '\n' < "/proc/$pid/cmdline" | grep -A1 -x -- -S | tail -n 1)"
        case "$sock" in /var/run/gluster/*.socket|/run/gluster/*.socket) brick_sockets+=("$sock") ;; esac
    done
    pid="$(pid_of "$RUN/glusterd.pid")"
    if pid_alive "$pid" && is_daemon "$pid" glusterd; then
        gluster_cli() {
            timeout 30 gluster --glusterd-sock="$gluster_dir/run/glusterd.socket" \
                --log-file="$BASE/log/gluster-cli.log" --mode=script "$@"
        }
        if [ -n "$volume" ] && command -v gluster > /dev/null 2>&1 \
            && gluster_cli volume info "$volume" > /dev/null 2>&1; then
            gluster_cli volume stop "$volume" force > /dev/null 2>&1 \
                || echo "stop-cluster: warning: gluster volume stop $volume failed" >&2
            gluster_cli volume delete "$volume" > /dev/null 2>&1 \
                || echo "stop-cluster: warning: gluster volume delete $volume failed" >&2
        fi
        stop_pid "$pid" glusterd
    fi
    rm -f "$RUN/glusterd.pid"
    # Bricks outlive a glusterd that was killed before it stopped its volume.
    for pf in "$gluster_dir"/run/vols/*/*.pid; do
        [ -e "$pf" ] || continue
        pid="$(pid_of "$pf")"
        if pid_alive "$pid" && is_daemon "$pid" glusterfsd; then stop_pid "$pid" "gluster brick"; fi
        rm -f "$pf"
    done
    [ "${#brick_sockets[@]}" -eq 0 ] || rm -f "${brick_sockets[@]}"
}

if [ -d "$RUN" ]; then
    # Stop all nodes in parallel (each init stops its slurmd, then the whole
    # node ends), then slurmctld, then munged.
    pids=()
    for pf in "$RUN"/node-*.pid; do
        [ -e "$pf" ] || continue
        pid="$(pid_of "$pf")"
        if pid_alive "$pid" && is_daemon "$pid" node-init.sh; then
            stop_pid "$pid" "node $(basename "$pf" .pid)" &
            pids+=($!)
        fi
    done
    # slurmd's of a cluster started before nodes had namespaces of their own.
    for pf in "$RUN"/slurmd-*.pid; do
        [ -e "$pf" ] || continue
        pid="$(pid_of "$pf")"
        if pid_alive "$pid" && is_daemon "$pid" slurmd; then
            stop_pid "$pid" "slurmd ($(basename "$pf" .pid))" &
            pids+=($!)
        fi
    done
    for p in "${pids[@]}"; do wait "$p"; done
    rm -f "$RUN"/node-*.pid "$RUN"/slurmd-*.pid "$RUN"/nodes/slurmd-*.pid "$RUN"/nodes/*.state
fi
stop_gluster &
gluster_stop=$!
if [ -d "$RUN" ]; then
    pid="$(pid_of "$RUN/slurmctld.pid")"
    if pid_alive "$pid" && is_daemon "$pid" slurmctld; then stop_pid "$pid" slurmctld; fi
    rm -f "$RUN/slurmctld.pid"
    # Accounting (start-cluster.sh --accounting): slurmdbd, then its database.
    pid="$(pid_of "$RUN/slurmdbd.pid")"
    if pid_alive "$pid" && is_daemon "$pid" slurmdbd; then stop_pid "$pid" slurmdbd; fi
    rm -f "$RUN/slurmdbd.pid"
    pid="$(pid_of "$RUN/mariadbd.pid")"
    if pid_alive "$pid" && is_daemon "$pid" mariadbd; then stop_pid "$pid" mariadbd 300; fi
    rm -f "$RUN/mariadbd.pid"
fi

# ---------------------------------------------------------------- strays
# slurmstepd inherits the marker variable that start-cluster.sh set for the
# daemons; job processes have SLURM_CONF pointing at this cluster together
# with a SLURM_JOB_ID. Never touch this script or its ancestors.
protected=" $$ "
p=$$
while [ "$p" -gt 1 ]; do
    p="$(awk '{ print $4 }' "/proc/$p/stat" 2>/dev/null || echo 1)"
    protected+="$p "
done
find_strays() {
    local f pid
    # grep -z: the NUL-separated entries of /proc/PID/environ are "lines".
    for f in $(grep -lzxF "HPCFLOW_SLURM_TEST_BASE=$BASE" /proc/[0-9]*/environ 2>/dev/null); do
        pid="${f#/proc/}"; pid="${pid%/environ}"
        [[ "$protected" == *" $pid "* ]] && continue
        case "$(cat "/proc/$pid/comm" 2>/dev/null)" in
            munged|glusterd|glusterfs|glusterfsd) continue ;;  # by PID file, below
        esac
        echo "$pid"
    done
    for f in $(grep -lzxF "SLURM_CONF=$CONF" /proc/[0-9]*/environ 2>/dev/null); do
        pid="${f#/proc/}"; pid="${pid%/environ}"
        [[ "$protected" == *" $pid "* ]] && continue
        grep -qz '^SLURM_JOB_ID=' "$f" 2>/dev/null && echo "$pid"
    done
}
strays="$(find_strays | tr '\n' ' ')"
if [ -n "${strays// /}" ]; then
    echo "stop-cluster: killing stray processes of this cluster: $strays" >&2
    # shellcheck disable=SC2086
    kill -KILL $strays 2>/dev/null || true
fi

if [ -d "$RUN" ]; then
    pid="$(pid_of "$RUN/munged.pid")"
    if pid_alive "$pid" && is_daemon "$pid" munged; then stop_pid "$pid" munged; fi
    rm -f "$RUN/munged.pid"
fi
rm -f "$BASE/munge/munge.sock" "$BASE/munge/munge.sock.lock"
wait "$gluster_stop"

exit 0
