#!/usr/bin/env bash
# Start a private SLURM test cluster of separate "hosts" on one machine, under BASE_DIR.
#
# Usage:
#   slurm/start-cluster.sh BASE_DIR [--nodes N] [--cpus C] [--gpus G] [--gpu-nodes K]
#                          [--gpu-type T] [--port P] [--min-job-age S] [--timeout S]
#                          [--slurmd-timeout S]
#                          [--accounting [--enforce-limits]]
#                          [--share PATH]... [--shared-fs gluster|none]
#                          [--shared-from OTHER_BASE_DIR]
#
# What it runs (all as root, all private to BASE_DIR, nothing in /etc):
#   * munged with its own key and socket (BASE_DIR/munge/munge.sock)
#   * slurmctld listening on port P (default 16817), on the submit side (this
#     machine's own namespaces, where the tests and `hpcflow run` run)
#   * N nodes n1..nN (default 4), each with C CPUs (default 2) and G fake GPUs
#     (default 2; character devices made with mknod that alias /dev/null; with
#     --gpu-nodes K only the last K nodes have them; --gpu-type T names their
#     kind, the gres type jobs ask for as --gres=gpu:T:N). Partitions: debug (every
#     node, the default), gpu (the GPU nodes) and, with --gpu-nodes, cpu (the
#     others): two node shapes, as a site with CPU and GPU partitions has. Each
#     node is a "host" of its own: its own UTS, PID and mount namespaces
#     (unshare), hostname nI, its own boot id, a private /tmp and /dev/shm (tmpfs), a private
#     /etc/hosts (this machine's plus "127.0.10.I nI" for every node; the submit
#     side does not resolve node names), and a small init as PID 1
#     (BASE_DIR/etc/node-init.sh) that mounts all that, runs `slurmd -D -N nI`
#     (listening on P+10+i) and reaps. Everything of a node dies at once when
#     its init dies (kill -KILL "$(cat BASE_DIR/run/node-nI.pid)" is a machine
#     dying); BASE_DIR/etc/start-node.sh nI starts it again. The network
#     namespace is shared: every node reaches every port on 127.0.0.1, and
#     node I's address 127.0.10.I is added to the loopback device (kept after
#     the stop: harmless, and other clusters use the same addresses).
#   * a shared file system (--shared-fs gluster, the default): a private
#     glusterd (working directory BASE_DIR/gluster, listening on
#     127.100.X.Y:24007 with X.Y derived from P), one volume with one brick
#     (BASE_DIR/gluster/brick), mounted at BASE_DIR/shared by a FUSE client of
#     its own on the submit side and by another one inside every node: the same
#     path, separate clients and caches, as on a real cluster. The path is
#     printed and written into BASE_DIR/env.sh as HPCFLOW_SHARED. With
#     --shared-fs none, BASE_DIR/shared is a plain directory (one file system
#     for all; faster start). --shared-from OTHER_BASE_DIR: mount the volume of
#     the cluster running in OTHER_BASE_DIR instead (its path), so that several
#     test clusters see the same files.
#   * partitions "debug" (default) and "gpu", both over all nodes
#   * with --accounting only: a private MariaDB (datadir BASE_DIR/mysql,
#     socket BASE_DIR/run/mariadbd.sock, TCP 127.0.0.1:P+3) and slurmdbd on
#     port P+2, so that `sacct` works (finished jobs stay queryable after
#     they left squeue). Needs `install-deps.sh --accounting`; the start then
#     takes a few seconds longer (the script waits until sacct answers).
#   * with --enforce-limits too: AccountingStorageEnforce=associations,limits,qos,
#     and an account "hpcflow" with the calling user in it, so that QOS limits
#     (e.g. `sacctmgr -i modify qos normal set MaxSubmitJobsPerUser=2`) apply.
#
# The nodes see this machine's file system except /tmp and /dev/shm. So
# BASE_DIR must not be under /tmp, and software or data under /tmp that the
# nodes need (a repository cloned to /tmp, its venv) must be named with
# --share PATH (repeatable): it is bound into every node's private /tmp at the
# same path. Paths elsewhere are visible anyway (--share ignores them).
#
# Clients talk to it after `source BASE_DIR/env.sh` (exports SLURM_CONF and
# HPCFLOW_SHARED). Stop it with slurm/stop-cluster.sh BASE_DIR.
#
# Jobs: MpiDefault=pmix, so `srun prog` of an Open MPI program just works;
# every task gets OMPI_MCA_btl=self,tcp (unless set) and
# OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM)=1 from a TaskProlog, so mpirun inside a
# job works across nodes. Finished jobs stay visible to squeue -t all
# and scontrol for --min-job-age seconds (default 30) plus up to 30 s more.
# Batch jobs start within ~1 s of sbatch (batch_sched_delay=0), but the very
# first one only ~3 s after slurmctld started (its first scheduling pass).
# --slurmd-timeout S sets SlurmdTimeout (default: SLURM's own, 300 s): how long a
# node whose slurmd stopped answering stays up before slurmctld marks it DOWN
# (fault tests that kill a node use a few seconds).
#
# The script waits until every node is idle, and fails (exit 1) with the tail
# of the daemon logs if that does not happen within the timeout (default 60 s);
# in that case it stops whatever it started. It refuses to start (exit 2) when
# a needed port is already in use or a cluster is already running in BASE_DIR.
set -euo pipefail

usage() {
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
    exit 2
}

die() { echo "start-cluster: error: $*" >&2; exit 2; }

# The daemons live in /usr/sbin, which a non-login PATH may lack.
case ":$PATH:" in *:/usr/sbin:*) ;; *) PATH="$PATH:/usr/sbin" ;; esac

BASE=""
NODES=4
CPUS=2
GPUS=2
GPU_NODES=""
GPU_TYPE=""
PORT=16817
MIN_JOB_AGE=30
TIMEOUT=60
SLURMD_TIMEOUT=""
ACCOUNTING=0
ENFORCE=0
SHARED_FS=gluster
SHARED_FROM=""
SHARE_ARGS=()

while [ $# -gt 0 ]; do
    case "$1" in
        --nodes) NODES="${2:?}"; shift 2 ;;
        --nodes=*) NODES="${1#*=}"; shift ;;
        --cpus) CPUS="${2:?}"; shift 2 ;;
        --cpus=*) CPUS="${1#*=}"; shift ;;
        --gpus) GPUS="${2:?}"; shift 2 ;;
        --gpus=*) GPUS="${1#*=}"; shift ;;
        --gpu-nodes) GPU_NODES="${2:?}"; shift 2 ;;
        --gpu-nodes=*) GPU_NODES="${1#*=}"; shift ;;
        --gpu-type) GPU_TYPE="${2:?}"; shift 2 ;;
        --gpu-type=*) GPU_TYPE="${1#*=}"; shift ;;
        --port) PORT="${2:?}"; shift 2 ;;
        --port=*) PORT="${1#*=}"; shift ;;
        --min-job-age) MIN_JOB_AGE="${2:?}"; shift 2 ;;
        --min-job-age=*) MIN_JOB_AGE="${1#*=}"; shift ;;
        --timeout) TIMEOUT="${2:?}"; shift 2 ;;
        --timeout=*) TIMEOUT="${1#*=}"; shift ;;
        --slurmd-timeout) SLURMD_TIMEOUT="${2:?}"; shift 2 ;;
        --slurmd-timeout=*) SLURMD_TIMEOUT="${1#*=}"; shift ;;
        --accounting) ACCOUNTING=1; shift ;;
        --enforce-limits) ENFORCE=1; shift ;;
        --share) SHARE_ARGS+=("${2:?}"); shift 2 ;;
        --share=*) SHARE_ARGS+=("${1#*=}"); shift ;;
        --shared-fs) SHARED_FS="${2:?}"; shift 2 ;;
        --shared-fs=*) SHARED_FS="${1#*=}"; shift ;;
        --shared-from) SHARED_FROM="${2:?}"; shift 2 ;;
        --shared-from=*) SHARED_FROM="${1#*=}"; shift ;;
        -h|--help) usage ;;
        -*) die "unknown option: $1" ;;
        *) [ -z "$BASE" ] || die "more than one BASE_DIR given"; BASE="$1"; shift ;;
    esac
done

[ -n "$BASE" ] || usage
for v in NODES CPUS GPUS PORT MIN_JOB_AGE TIMEOUT ${GPU_NODES:+GPU_NODES}; do
    [[ "${!v}" =~ ^[0-9]+$ ]] || die "$v must be a non-negative integer (got '${!v}')"
done
[ -z "$SLURMD_TIMEOUT" ] || [[ "$SLURMD_TIMEOUT" =~ ^[0-9]+$ ]] \
    || die "SLURMD_TIMEOUT must be a non-negative integer (got '$SLURMD_TIMEOUT')"
[ "$NODES" -ge 1 ] || die "--nodes must be >= 1"
[ "$CPUS" -ge 1 ] || die "--cpus must be >= 1"
[ -z "$GPU_NODES" ] || { [ "$GPU_NODES" -ge 1 ] && [ "$GPU_NODES" -le "$NODES" ]; } \
    || die "--gpu-nodes must be between 1 and --nodes ($NODES)"
[[ -z "$GPU_TYPE" || "$GPU_TYPE" =~ ^[A-Za-z0-9_]+$ ]] || die "--gpu-type must be letters, digits and '_'"
[ "$PORT" -ge 1024 ] && [ $((PORT + 10 + NODES)) -le 65535 ] || die "--port out of range"
[ "$NODES" -le 250 ] || die "--nodes must be <= 250 (node i has the address 127.0.10.i)"
case "$SHARED_FS" in
    gluster|none) ;;
    *) die "--shared-fs must be gluster or none (got '$SHARED_FS')" ;;
esac
[ -z "$SHARED_FROM" ] || [ "$SHARED_FS" = gluster ] || die "--shared-from needs --shared-fs gluster"

# ---------------------------------------------------------------- prerequisites
[ "$(id -u)" -eq 0 ] || die "must run as root (slurmd and munged run as root here)"
for exe in munged slurmctld slurmd sinfo scontrol unshare setsid mount umount hostname; do
    command -v "$exe" > /dev/null 2>&1 \
        || die "'$exe' not found; install with: sudo bash $(dirname "$0")/install-deps.sh"
done
if [ "$SHARED_FS" = gluster ]; then
    for exe in glusterd gluster glusterfs mount.glusterfs; do
        command -v "$exe" > /dev/null 2>&1 \
            || die "'$exe' not found (needed by the shared file system); install with: sudo bash $(dirname "$0")/install-deps.sh (or use --shared-fs none)"
    done
    [ -c /dev/fuse ] || die "/dev/fuse is missing: the GlusterFS clients need FUSE (or use --shared-fs none)"
fi
if [ "$ACCOUNTING" -eq 1 ]; then
    for exe in slurmdbd mariadbd mariadb-install-db mariadb sacct; do
        command -v "$exe" > /dev/null 2>&1 \
            || die "'$exe' not found (needed by --accounting); install with: sudo bash $(dirname "$0")/install-deps.sh --accounting"
    done
fi

mkdir -p "$BASE"
BASE="$(cd "$BASE" && pwd -P)"
[ "$BASE" != "/" ] || die "BASE_DIR must not be /"
case "$BASE" in
    *[[:space:]]*|*[\'\"\$\\]*) die "BASE_DIR must not contain spaces, quotes, '\$' or '\\': $BASE" ;;
esac
# The nodes mount a private /tmp and /dev/shm over this machine's: they would not see it.
case "$BASE/" in
    /tmp/*|/dev/shm/*) die "BASE_DIR must not be under /tmp or /dev/shm (every node has a private one): $BASE" ;;
esac

# Paths under /tmp the nodes must see (bound into each node's private /tmp).
SHARES=()
for p in "${SHARE_ARGS[@]}"; do
    [ -e "$p" ] || die "--share $p: no such file or directory"
    p="$(realpath -e "$p")"
    case "$p" in
        *[[:space:]]*) die "--share $p: the path must not contain spaces" ;;
        /tmp) die "--share /tmp: share what the nodes need under it, not /tmp itself" ;;
        /tmp/*) ;;
        *) continue ;;  # not hidden from the nodes: nothing to do
    esac
    dup=0
    for q in "${SHARES[@]}"; do
        case "$p/" in "$q"/*) dup=1 ;; esac
    done
    [ "$dup" -eq 1 ] || SHARES+=("$p")
done

# A cluster already running in BASE?
if [ -d "$BASE/run" ]; then
    for pf in "$BASE"/run/*.pid; do
        [ -e "$pf" ] || continue
        pid="$(cat "$pf" 2>/dev/null || true)"
        if [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null; then
            die "a daemon of a cluster in $BASE is still running (pid $pid from $pf); run stop-cluster.sh $BASE first"
        fi
    done
fi
# Is PATH a mount point (in this mount namespace)? Paths here have no spaces.
is_mounted() {
    awk -v m="$1" -F ' - ' '{ split($1, a, " "); if (a[5] == m) found = 1 } END { exit !found }' \
        /proc/self/mountinfo
}
if is_mounted "$BASE/shared"; then
    die "$BASE/shared is still mounted (a cluster in $BASE was not stopped); run stop-cluster.sh $BASE first"
fi

# The shared file system: our own GlusterFS server, or the one of another cluster.
SHARED="$BASE/shared"
GLUSTER_OWN=0
GLUSTER_SERVER=""
GLUSTER_VOLUME=""
if [ -n "$SHARED_FROM" ]; then
    [ -d "$SHARED_FROM" ] || die "--shared-from $SHARED_FROM: no such directory"
    SHARED_FROM="$(cd "$SHARED_FROM" && pwd -P)"
    [ "$SHARED_FROM" != "$BASE" ] || die "--shared-from must name another cluster's BASE_DIR"
    other_conf="$SHARED_FROM/etc/shared-fs.env"
    [ -s "$other_conf" ] || die "--shared-from $SHARED_FROM: no cluster with a shared file system there ($other_conf missing)"
    SHARED=""
    while IFS='=' read -r key value; do
        case "$key" in
            SHARED_FS) [ "$value" = gluster ] || die "--shared-from $SHARED_FROM: that cluster has no GlusterFS volume (--shared-fs $value)" ;;
            SHARED) SHARED="$value" ;;
            GLUSTER_SERVER) GLUSTER_SERVER="$value" ;;
            GLUSTER_VOLUME) GLUSTER_VOLUME="$value" ;;
        esac
    done < "$other_conf"
    if [ -z "$SHARED" ] || [ -z "$GLUSTER_SERVER" ] || [ -z "$GLUSTER_VOLUME" ]; then
        die "--shared-from $SHARED_FROM: incomplete $other_conf"
    fi
    is_mounted "$SHARED" || die "--shared-from $SHARED_FROM: its volume is not mounted at $SHARED (is that cluster running?)"
elif [ "$SHARED_FS" = gluster ]; then
    GLUSTER_OWN=1
    # One loopback address per cluster (from its port): glusterd always listens on
    # port 24007 and tells its bricks nothing else, so clusters differ by address.
    GLUSTER_SERVER="127.100.$((PORT / 256)).$((PORT % 256))"
    GLUSTER_VOLUME="hpcflow$PORT"
fi

# Listening TCP ports (IPv4 and IPv6), from /proc so no extra tool is needed.
listening_ports() {
    local f
    for f in /proc/net/tcp /proc/net/tcp6; do
        [ -r "$f" ] || continue
        # columns: sl local_address rem_address st ...; st 0A = LISTEN
        local _sl local_addr _rem st _rest
        while read -r _sl local_addr _rem st _rest; do
            [ "$st" = "0A" ] || continue
            echo $((16#${local_addr##*:}))
        done < <(tail -n +2 "$f")
    done
}
NODE_PORTS=()
for i in $(seq 1 "$NODES"); do NODE_PORTS+=($((PORT + 10 + i))); done
DBD_PORT=$((PORT + 2))
DB_PORT=$((PORT + 3))
EXTRA_PORTS=()
[ "$ACCOUNTING" -eq 0 ] || EXTRA_PORTS=("$DBD_PORT" "$DB_PORT")
busy=()
in_use="$(listening_ports | sort -u)"
for p in "$PORT" "${EXTRA_PORTS[@]}" "${NODE_PORTS[@]}"; do
    if grep -qx "$p" <<< "$in_use"; then busy+=("$p"); fi
done
if [ "${#busy[@]}" -gt 0 ]; then
    needs="$PORT"
    [ "$ACCOUNTING" -eq 0 ] || needs="$PORT, $DBD_PORT, $DB_PORT"
    die "port(s) already in use: ${busy[*]} (this cluster needs $needs and ${NODE_PORTS[0]}..${NODE_PORTS[-1]}); choose another --port"
fi
if [ "$GLUSTER_OWN" -eq 1 ] && (exec 3<> "/dev/tcp/$GLUSTER_SERVER/24007") 2> /dev/null; then
    die "$GLUSTER_SERVER:24007 is already in use (a glusterd of this machine, or of a cluster on port $PORT); choose another --port"
fi

# ---------------------------------------------------------------- layout
HOST="$(hostname -s)"
ETC="$BASE/etc"
CONF="$ETC/slurm.conf"
MUNGE_DIR="$BASE/munge"        # socket dir: must be o+x for munged
MUNGE_KEY_DIR="$BASE/munge-key"
MUNGE_SOCK="$MUNGE_DIR/munge.sock"
LOG="$BASE/log"
RUN="$BASE/run"
DB_DIR="$BASE/mysql"
DB_SOCK="$RUN/mariadbd.sock"
DBD_CONF="$ETC/slurmdbd.conf"  # slurmdbd reads it from the directory of SLURM_CONF
# Unix socket paths are limited to 107 bytes (slurmd puts sockets in its
# spool directory, munged in MUNGE_DIR).
[ "${#BASE}" -le 80 ] || die "BASE_DIR path too long for unix sockets (${#BASE} > 80 chars): $BASE"

GLUSTER_DIR="$BASE/gluster"     # glusterd's working and run directories, the brick
NODES_DIR="$BASE/nodes"         # per node: the mount point its private /tmp is prepared on

# Start from a clean state (logs included): saved node state (e.g. a node
# drained by an earlier bad config) would otherwise survive restarts. The
# shared volume starts empty too (its brick is BASE_DIR/gluster/brick).
rm -rf "$BASE/state" "$BASE/spool" "$BASE/tmp" "${BASE:?}/dev" "$RUN" "$MUNGE_DIR" "$LOG" \
    "$DB_DIR" "$DBD_CONF" "$GLUSTER_DIR" "$NODES_DIR" "$ETC/shared-fs.env"
[ -n "$SHARED_FROM" ] || rm -rf "$BASE/shared"
mkdir -p "$ETC" "$LOG" "$RUN" "$RUN/nodes" "$BASE/state" "$BASE/spool" "$BASE/dev" \
    "$MUNGE_DIR" "$MUNGE_KEY_DIR" "$NODES_DIR"
[ -n "$SHARED_FROM" ] || mkdir -p "$BASE/shared"
chmod 755 "$BASE" "$MUNGE_DIR"
chmod 700 "$MUNGE_KEY_DIR"

if [ ! -s "$MUNGE_KEY_DIR/munge.key" ]; then
    dd if=/dev/urandom of="$MUNGE_KEY_DIR/munge.key" bs=1024 count=1 status=none
fi
chmod 400 "$MUNGE_KEY_DIR/munge.key"

for i in $(seq 1 "$NODES"); do
    node="n$i"
    # slurmd does not create SlurmdSpoolDir when it contains %n.
    mkdir -p "$BASE/spool/$node" "$BASE/dev/$node" "$NODES_DIR/$node/tmp"
    g=0
    while [ "$g" -lt "$GPUS" ]; do
        # Fake GPU: a character device aliasing /dev/null (major 1, minor 3).
        mknod -m 666 "$BASE/dev/$node/gpu$g" c 1 3
        g=$((g + 1))
    done
done

# Runs at the start of every task (batch script and srun tasks); lines of
# the form "export NAME=value" are put into the task's environment.
cat > "$ETC/task-prolog.sh" <<'EOS'
#!/bin/sh
# Open MPI on several nodes of one machine: its shared-memory BTL (vader)
# crashes across "nodes", so use TCP/self unless the job chose otherwise.
[ -n "${OMPI_MCA_btl:-}" ] || echo "export OMPI_MCA_btl=self,tcp"
# Jobs run as root on this test cluster; let mpirun accept that.
echo "export OMPI_ALLOW_RUN_AS_ROOT=1"
echo "export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"
EOS
chmod 755 "$ETC/task-prolog.sh"

node_list="n[1-$NODES]"
[ "$NODES" -gt 1 ] || node_list="n1"
gres_node=""
gpu_type_gres="${GPU_TYPE:+$GPU_TYPE:}"
[ "$GPUS" -eq 0 ] || gres_node="Gres=gpu:$gpu_type_gres$GPUS"
# With --gpu-nodes K only the last K nodes have GPUs: two node shapes, each a partition.
[ -n "$GPU_NODES" ] || GPU_NODES="$NODES"
FIRST_GPU_NODE=$((NODES - GPU_NODES + 1))
hostlist() { if [ "$1" -eq "$2" ]; then echo "n$1"; else echo "n[$1-$2]"; fi; }
gpu_list="$(hostlist "$FIRST_GPU_NODE" "$NODES")"

{
    echo "# Generated by slurm/start-cluster.sh: private test cluster, do not edit."
    echo "ClusterName=hpcflowtest"
    echo "SlurmctldHost=$HOST(127.0.0.1)"
    echo "SlurmctldPort=$PORT"
    echo "SlurmdPort=$((PORT + 1))"
    echo "SlurmUser=root"
    echo "SlurmdUser=root"
    echo "AuthType=auth/munge"
    echo "AuthInfo=socket=$MUNGE_SOCK"
    echo "CredType=cred/munge"
    echo "StateSaveLocation=$BASE/state"
    echo "SlurmdSpoolDir=$BASE/spool/%n"
    # Every node has a private /tmp (the PMIx client directories of two nodes no
    # longer collide there).
    echo "TmpFS=/tmp"
    echo "SlurmctldPidFile=$RUN/slurmctld.pid"
    # slurmd writes its PID in the node's own PID namespace; the node's init
    # writes its PID on this machine to $RUN/node-NODE.pid.
    echo "SlurmdPidFile=$RUN/nodes/slurmd-%n.pid"
    echo "SlurmctldLogFile=$LOG/slurmctld.log"
    echo "SlurmdLogFile=$LOG/slurmd-%n.log"
    echo "SlurmctldDebug=info"
    echo "SlurmdDebug=info"
    echo "ProctrackType=proctrack/linuxproc"
    echo "TaskPlugin=task/none"
    echo "TaskProlog=$ETC/task-prolog.sh"
    echo "SelectType=select/cons_tres"
    echo "SelectTypeParameters=CR_Core_Memory"
    echo "DefMemPerCPU=512"
    echo "SlurmdParameters=config_overrides"
    if [ "$ACCOUNTING" -eq 1 ]; then
        echo "JobAcctGatherType=jobacct_gather/linux"
        echo "AccountingStorageType=accounting_storage/slurmdbd"
        echo "AccountingStorageHost=$HOST"
        echo "AccountingStoragePort=$DBD_PORT"
        # The slurmdbd connection ignores AuthInfo: name the munge socket here.
        echo "AccountingStoragePass=$MUNGE_SOCK"
        if [ "$ENFORCE" -eq 1 ]; then
            echo "AccountingStorageEnforce=associations,limits,qos"
        fi
    else
        echo "JobAcctGatherType=jobacct_gather/none"
        echo "AccountingStorageType=accounting_storage/none"
    fi
    echo "JobCompType=jobcomp/filetxt"
    echo "JobCompLoc=$LOG/jobcomp.txt"
    echo "MpiDefault=pmix"
    echo "GresTypes=gpu"
    echo "ReturnToService=2"
    echo "MailProg=/bin/true"
    echo "SchedulerParameters=batch_sched_delay=0"
    echo "MinJobAge=$MIN_JOB_AGE"
    echo "KillWait=5"
    echo "InactiveLimit=0"
    echo "Waittime=0"
    [ -z "$SLURMD_TIMEOUT" ] || echo "SlurmdTimeout=$SLURMD_TIMEOUT"
    for i in $(seq 1 "$NODES"); do
        gres=""
        [ "$i" -lt "$FIRST_GPU_NODE" ] || gres="$gres_node"
        echo "NodeName=n$i NodeHostname=n$i NodeAddr=127.0.10.$i Port=$((PORT + 10 + i)) CPUs=$CPUS RealMemory=$((CPUS * 1024)) $gres State=UNKNOWN"
    done
    echo "PartitionName=debug Nodes=$node_list Default=YES MaxTime=INFINITE State=UP"
    echo "PartitionName=gpu Nodes=$gpu_list MaxTime=INFINITE State=UP"
    if [ "$FIRST_GPU_NODE" -gt 1 ]; then
        echo "PartitionName=cpu Nodes=$(hostlist 1 $((FIRST_GPU_NODE - 1))) MaxTime=INFINITE State=UP"
    fi
} > "$CONF"

{
    echo "AutoDetect=off"
    if [ "$GPUS" -gt 0 ]; then
        for i in $(seq "$FIRST_GPU_NODE" "$NODES"); do
            if [ "$GPUS" -eq 1 ]; then files="$BASE/dev/n$i/gpu0"; else files="$BASE/dev/n$i/gpu[0-$((GPUS - 1))]"; fi
            echo "NodeName=n$i Name=gpu${GPU_TYPE:+ Type=$GPU_TYPE} File=$files"
        done
    fi
} > "$ETC/gres.conf"

cat > "$BASE/env.sh" <<EOF
# Source this file to use the private SLURM test cluster in $BASE.
export SLURM_CONF='$CONF'
# The file system every node and the submit side see at this path.
export HPCFLOW_SHARED='$SHARED'
EOF

# What another cluster's --shared-from (and stop-cluster.sh) read: KEY=VALUE lines.
{
    echo "SHARED_FS=$SHARED_FS"
    echo "SHARED=$SHARED"
    echo "GLUSTER_OWN=$GLUSTER_OWN"
    echo "GLUSTER_SERVER=$GLUSTER_SERVER"
    echo "GLUSTER_VOLUME=$GLUSTER_VOLUME"
    echo "SHARED_FROM=$SHARED_FROM"
} > "$ETC/shared-fs.env"

# ---------------------------------------------------------------- the nodes
# Each node's address is configured on the (shared) loopback device, as a NIC's address
# is on a real node: programs that look their listening address up among the
# interfaces (UCX does) find it. Added once and kept (other clusters share them).
if command -v ip > /dev/null 2>&1; then
    for i in $(seq 1 "$NODES"); do
        ip -4 -o addr show dev lo | grep -q " 127\.0\.10\.$i/" \
            || ip addr add "127.0.10.$i/32" dev lo 2> /dev/null || true
    done
fi
# Every node resolves every node (and, from this machine's file, the submit host).
{
    cat /etc/hosts
    echo "# hpcflow test cluster $BASE: its nodes"
    for i in $(seq 1 "$NODES"); do echo "127.0.10.$i n$i"; done
} > "$ETC/hosts"
printf '%s\n' "${SHARES[@]}" > "$ETC/shares.list"
{
    echo "# Generated by slurm/start-cluster.sh: read by node-init.sh and start-node.sh."
    printf 'BASE=%q\n' "$BASE"
    printf 'CONF=%q\n' "$CONF"
    printf 'LOG=%q\n' "$LOG"
    printf 'RUN=%q\n' "$RUN"
    printf 'NODES_DIR=%q\n' "$NODES_DIR"
    printf 'NODE_NAMES=%q\n' "$(seq -f 'n%g' 1 "$NODES" | tr '\n' ' ')"
    printf 'SHARED_FS=%q\n' "$SHARED_FS"
    printf 'SHARED=%q\n' "$SHARED"
    printf 'GLUSTER_SERVER=%q\n' "$GLUSTER_SERVER"
    printf 'GLUSTER_VOLUME=%q\n' "$GLUSTER_VOLUME"
    printf 'PATH=%q\n' "$PATH"
} > "$ETC/cluster.env"

# PID 1 of a node. Its own UTS, PID and mount namespaces are made by
# start-node.sh; here they get their hostname, /proc, /etc/hosts, /tmp, /dev/shm
# and shared file system, then slurmd runs in the foreground. It forwards
# SIGTERM to slurmd, reaps whatever is reparented to it, and exits when slurmd
# does: the kernel then kills every other process of the node.
cat > "$ETC/node-init.sh" <<'EOS'
#!/bin/bash
set -u
NODE="$1"
ETC="$(dirname "$0")"
# shellcheck source=/dev/null
. "$ETC/cluster.env"
STATE="$RUN/nodes/$NODE.state"
say() { echo "node-init[$NODE]: $*"; }
fail() {
    say "error: $*"
    echo "failed: $*" > "$STATE.new" && mv -f "$STATE.new" "$STATE"
    exit 1
}
say "starting ($(date '+%F %T'))"
# Our PID on the machine, read while /proc is still the machine's: /proc/self
# is opened by this shell itself (a redirection of a compound command).
host_pid=""
while read -r key value _; do
    [ "$key" = "NSpid:" ] && host_pid="$value"
done < /proc/self/status
[[ "$host_pid" =~ ^[0-9]+$ ]] || fail "cannot read this init's PID"
echo "$host_pid" > "$RUN/node-$NODE.pid"
mount -t proc -o nosuid,nodev,noexec proc /proc || fail "cannot mount /proc"
hostname "$NODE" || fail "cannot set the hostname"
# A boot id of its own, as every machine has: UCX tells a peer on this machine from
# one on another by it (and would try shared memory across the nodes' PID
# namespaces), and hpcflow's ProcessIdentity compares it.
cat /proc/sys/kernel/random/uuid > "$NODES_DIR/$NODE/boot_id" \
    && mount --bind "$NODES_DIR/$NODE/boot_id" /proc/sys/kernel/random/boot_id \
    || fail "cannot give the node a boot id of its own"
mount --bind "$ETC/hosts" /etc/hosts || fail "cannot bind $ETC/hosts on /etc/hosts"
# A private /tmp: a tmpfs prepared on the node's own mount point (with what
# --share names bound into it at the same path), then moved onto /tmp.
stage="$NODES_DIR/$NODE/tmp"
mount -t tmpfs -o mode=1777,nosuid,nodev "tmp-$NODE" "$stage" || fail "cannot mount a tmpfs on $stage"
while IFS= read -r path; do
    [ -n "$path" ] || continue
    target="$stage/${path#/tmp/}"
    if [ -d "$path" ]; then mkdir -p "$target"; else mkdir -p "$(dirname "$target")" && : > "$target"; fi
    mount --rbind "$path" "$target" || fail "cannot bind $path into the private /tmp"
done < "$ETC/shares.list"
mount --move "$stage" /tmp || fail "cannot move the private tmpfs onto /tmp"
mount -t tmpfs -o mode=1777,nosuid,nodev "shm-$NODE" /dev/shm || fail "cannot mount a private /dev/shm"
if [ "$SHARED_FS" = gluster ]; then
    # GlusterFS mounts inherited from the machine (the submit side's client, or
    # another cluster's) are the machine's clients: let go of them, then mount
    # with a client of our own.
    awk -F ' - ' '{ split($1, a, " "); split($2, b, " "); if (b[1] == "fuse.glusterfs") print a[5] }' \
        /proc/self/mountinfo | sort -r | while read -r mnt; do
        umount -l "$(printf '%b' "$mnt")" || say "warning: cannot unmount $mnt"
    done
    mkdir -p "$SHARED"
    mount -t glusterfs -o "log-file=$LOG/gluster-$NODE.log" \
        "$GLUSTER_SERVER:/$GLUSTER_VOLUME" "$SHARED" \
        || fail "cannot mount $GLUSTER_SERVER:/$GLUSTER_VOLUME on $SHARED (see $LOG/gluster-$NODE.log)"
fi
slurmd -D -f "$CONF" -N "$NODE" < /dev/null &
slurmd_pid=$!
trap 'kill -TERM "$slurmd_pid" 2> /dev/null' TERM INT HUP
echo "ready $host_pid" > "$STATE.new" && mv -f "$STATE.new" "$STATE"
say "up: hostname $(hostname), slurmd pid $slurmd_pid (in the node), init pid $host_pid (on the machine)"
# `wait` returns on a trapped signal too; reaped orphans are discarded by bash.
rc=0
while :; do
    wait "$slurmd_pid"
    rc=$?
    kill -0 "$slurmd_pid" 2> /dev/null || break
done
say "slurmd exited ($rc): the node goes down ($(date '+%F %T'))"
exit 0
EOS
chmod 755 "$ETC/node-init.sh"

# Start (or start again) one node and wait until its init says it is up.
cat > "$ETC/start-node.sh" <<'EOS'
#!/bin/bash
# Usage: start-node.sh NODE [TIMEOUT_SECONDS]
set -u
ETC="$(cd "$(dirname "$0")" && pwd -P)"
# shellcheck source=/dev/null
. "$ETC/cluster.env"
NODE="${1:?usage: start-node.sh NODE [TIMEOUT]}"
TIMEOUT="${2:-30}"
case " $NODE_NAMES " in
    *" $NODE "*) ;;
    *) echo "start-node: unknown node '$NODE' (nodes: $NODE_NAMES)" >&2; exit 2 ;;
esac
pf="$RUN/node-$NODE.pid"
old="$(cat "$pf" 2> /dev/null || true)"
if [[ "$old" =~ ^[0-9]+$ ]] && [ "$(cat "/proc/$old/comm" 2> /dev/null)" = node-init.sh ]; then
    echo "start-node: $NODE is already running (init pid $old)" >&2
    exit 2
fi
state="$RUN/nodes/$NODE.state"
rm -f "$state" "$pf"
# Its own session (no terminal, no signals from the caller's process group);
# --kill-child: if unshare is killed, so is the node.
setsid unshare --uts --pid --mount --fork --propagation private --kill-child     "$ETC/node-init.sh" "$NODE" < /dev/null >> "$LOG/node-$NODE.log" 2>&1 &
launcher=$!
deadline=$(( $(date +%s) + TIMEOUT ))
while :; do
    if [ -s "$state" ]; then
        read -r word rest < "$state"
        [ "$word" = ready ] && exit 0
        echo "start-node: $NODE: ${rest:-$word}" >&2
        exit 1
    fi
    if ! kill -0 "$launcher" 2> /dev/null; then
        echo "start-node: $NODE: its namespaces ended at once: $(tail -n 5 "$LOG/node-$NODE.log" | tr '\n' ' ')" >&2
        exit 1
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
        kill -KILL "$launcher" 2> /dev/null
        echo "start-node: $NODE not up after ${TIMEOUT}s: $(tail -n 5 "$LOG/node-$NODE.log" | tr '\n' ' ')" >&2
        exit 1
    fi
    sleep 0.05
done
EOS
chmod 755 "$ETC/start-node.sh"

export SLURM_CONF="$CONF"
# Marker in the daemons' environment (inherited by slurmstepd), used by
# stop-cluster.sh to find stray processes of this cluster.
export HPCFLOW_SLURM_TEST_BASE="$BASE"

# ---------------------------------------------------------------- failure path
log_tail() {
    local f
    for f in "$LOG"/munged.log "$LOG"/gluster-start.out "$LOG"/glusterd.log \
        "$LOG"/mariadbd.log "$LOG"/slurmdbd.log "$LOG"/slurmctld.log \
        "$LOG"/node-*.log "$LOG"/slurmd-*.log "$LOG"/daemons.out; do
        [ -s "$f" ] || continue
        echo "==> $f (last 20 lines) <=="
        tail -n 20 "$f"
    done
}
gluster_job=""
fail() {
    trap - ERR
    local tail_text _
    # Let a shared file system still starting in the background get done (or
    # give up) first, so that the stop below finds everything it started.
    if [ -n "$gluster_job" ]; then
        for _ in $(seq 1 300); do
            kill -0 "$gluster_job" 2> /dev/null || break
            sleep 0.1
        done
        kill "$gluster_job" 2> /dev/null || true
    fi
    tail_text="$(log_tail)"
    # Stop what was started before printing (printing may fail, e.g. SIGPIPE).
    bash "$(dirname "$0")/stop-cluster.sh" "$BASE" > /dev/null 2>&1 || true
    {
        echo "start-cluster: error: $*"
        echo "$tail_text"
    } >&2
    exit 1
}

# ---------------------------------------------------------------- shared file system
gluster_cli() {
    gluster --glusterd-sock="$GLUSTER_DIR/run/glusterd.socket" --log-file="$LOG/gluster-cli.log" \
        --mode=script "$@"
}
# glusterd, its volume and the submit side's client mount. Runs in the
# background while SLURM starts; says what went wrong on stderr. The processes
# do not carry the cluster's marker variable (stop-cluster.sh stops them itself).
start_gluster() {
    local t_start deadline out
    t_start=$(date +%s.%N)
    deadline=$(( $(date +%s) + TIMEOUT ))
    mkdir -p "$GLUSTER_DIR/lib" "$GLUSTER_DIR/run" "$GLUSTER_DIR/brick" "$LOG/gluster"
    cat > "$GLUSTER_DIR/glusterd.vol" <<EOF
volume management
    type mgmt/glusterd
    option working-directory $GLUSTER_DIR/lib
    option run-directory $GLUSTER_DIR/run
    option logging-directory $LOG/gluster
    option glusterd-sockfile $GLUSTER_DIR/run/glusterd.socket
    option transport-type socket
    option transport.socket.bind-address $GLUSTER_SERVER
    option transport.socket.listen-port 24007
    option transport.socket.keepalive-time 10
    option transport.socket.keepalive-interval 2
    option transport.socket.read-fail-log off
    option ping-timeout 0
    option event-threads 1
end-volume
EOF
    # glusterd configures geo-replication at every start: some 25 runs of its
    # Python helper, about 2.5 s. It runs the helper's interpreter from
    # $PYTHON: a stub that only answers --version skips that work (this
    # cluster has no geo-replication).
    # shellcheck disable=SC2016  # the stub's own "$@" and "$a"
    printf '#!/bin/sh\nfor a in "$@"; do [ "$a" = --version ] && echo "gsyncd.py (geo-replication not configured)"; done\nexit 0\n' \
        > "$GLUSTER_DIR/no-georep.sh"
    chmod 755 "$GLUSTER_DIR/no-georep.sh"
    env -u HPCFLOW_SLURM_TEST_BASE PYTHON="$GLUSTER_DIR/no-georep.sh" \
        glusterd -f "$GLUSTER_DIR/glusterd.vol" -p "$RUN/glusterd.pid" -l "$LOG/glusterd.log" \
        < /dev/null >> "$LOG/daemons.out" 2>&1 \
        || { echo "glusterd failed to start (see $LOG/glusterd.log)" >&2; return 1; }
    until out="$(gluster_cli volume list 2>&1)"; do
        [ "$(date +%s)" -lt "$deadline" ] || { echo "glusterd not answering after ${TIMEOUT}s: $out" >&2; return 1; }
        sleep 0.05
    done
    # force: the brick may lie on the root file system.
    out="$(gluster_cli volume create "$GLUSTER_VOLUME" "$GLUSTER_SERVER:$GLUSTER_DIR/brick" force 2>&1)" \
        || { echo "gluster volume create failed: $out" >&2; return 1; }
    out="$(gluster_cli volume start "$GLUSTER_VOLUME" 2>&1)" \
        || { echo "gluster volume start failed: $out" >&2; return 1; }
    env -u HPCFLOW_SLURM_TEST_BASE mount -t glusterfs -o "log-file=$LOG/gluster-submit.log" \
        "$GLUSTER_SERVER:/$GLUSTER_VOLUME" "$SHARED" >> "$LOG/daemons.out" 2>&1 \
        || { echo "mounting $GLUSTER_SERVER:/$GLUSTER_VOLUME on $SHARED failed (see $LOG/gluster-submit.log)" >&2; return 1; }
    chmod 1777 "$SHARED"
    awk -v a="$t_start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f\n", b - a }' > "$RUN/gluster-seconds"
}

# ---------------------------------------------------------------- start daemons
trap 'fail "unexpected error (exit $?) at line $LINENO of $0"' ERR
t0=$(date +%s.%N)

if [ "$GLUSTER_OWN" -eq 1 ]; then
    start_gluster > "$LOG/gluster-start.out" 2>&1 &
    gluster_job=$!
fi

munged --socket="$MUNGE_SOCK" \
    --key-file="$MUNGE_KEY_DIR/munge.key" \
    --pid-file="$RUN/munged.pid" \
    --log-file="$LOG/munged.log" \
    --seed-file="$MUNGE_KEY_DIR/munged.seed" \
    < /dev/null >> "$LOG/daemons.out" 2>&1 || fail "munged failed to start"
for _ in $(seq 1 100); do
    [ -S "$MUNGE_SOCK" ] && break
    sleep 0.05
done
[ -S "$MUNGE_SOCK" ] || fail "munged did not create its socket $MUNGE_SOCK"

deadline=$(( $(date +%s) + TIMEOUT ))
if [ "$ACCOUNTING" -eq 1 ]; then
    # -------------------------------------------- MariaDB + slurmdbd (sacct)
    db() { mariadb --no-defaults --socket="$DB_SOCK" -uroot "$@"; }
    mariadb-install-db --no-defaults --user=root --datadir="$DB_DIR" --skip-test-db \
        --auth-root-authentication-method=socket \
        < /dev/null > "$LOG/mariadb-install-db.log" 2>&1 \
        || fail "mariadb-install-db failed: $(tail -n 5 "$LOG/mariadb-install-db.log" | tr '\n' ' ')"
    # mariadbd stays in the foreground: run it in its own session, detached
    # from this script's output (a caller capturing it would wait for EOF).
    # Only reachable over its socket and 127.0.0.1; test-grade durability.
    setsid mariadbd --no-defaults --user=root --datadir="$DB_DIR" \
        --socket="$DB_SOCK" --port="$DB_PORT" --bind-address=127.0.0.1 \
        --pid-file="$RUN/mariadbd.pid" --log-error="$LOG/mariadbd.log" \
        --skip-name-resolve --innodb-flush-log-at-trx-commit=0 \
        --innodb-lock-wait-timeout=900 \
        < /dev/null >> "$LOG/daemons.out" 2>&1 &
    db_pid=$!
    until db -e 'SELECT 1' > /dev/null 2>&1; do
        kill -0 "$db_pid" 2>/dev/null || fail "mariadbd died during start-up"
        [ "$(date +%s)" -lt "$deadline" ] || fail "mariadbd not answering after ${TIMEOUT}s"
        sleep 0.05
    done
    db_pass="$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')"
    db -e "CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$db_pass';
           CREATE USER 'slurm'@'localhost' IDENTIFIED BY '$db_pass';
           GRANT ALL PRIVILEGES ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
           GRANT ALL PRIVILEGES ON slurm_acct_db.* TO 'slurm'@'localhost';" \
        >> "$LOG/daemons.out" 2>&1 || fail "could not create the slurm database user"
    # It holds the database password: readable by root only (slurmdbd insists).
    (
        umask 077
        {
            echo "# Generated by slurm/start-cluster.sh: private test cluster, do not edit."
            echo "AuthType=auth/munge"
            echo "AuthInfo=socket=$MUNGE_SOCK"
            echo "DbdHost=$HOST"
            echo "DbdAddr=127.0.0.1"
            echo "DbdPort=$DBD_PORT"
            echo "SlurmUser=root"
            echo "PidFile=$RUN/slurmdbd.pid"
            echo "LogFile=$LOG/slurmdbd.log"
            echo "DebugLevel=info"
            echo "StorageType=accounting_storage/mysql"
            echo "StorageHost=127.0.0.1"
            echo "StoragePort=$DB_PORT"
            echo "StorageUser=slurm"
            echo "StoragePass=$db_pass"
            echo "StorageLoc=slurm_acct_db"
        } > "$DBD_CONF"
    )
    chmod 600 "$DBD_CONF"
    # slurmdbd has no -f: it finds slurmdbd.conf next to $SLURM_CONF.
    slurmdbd < /dev/null >> "$LOG/daemons.out" 2>&1 || fail "slurmdbd failed to start"
    # It listens once it has connected to the database and created its
    # tables; start slurmctld only then, so that it registers at once.
    until listening_ports | grep -qx "$DBD_PORT"; do
        if [ -e "$RUN/slurmdbd.pid" ] && ! kill -0 "$(cat "$RUN/slurmdbd.pid")" 2>/dev/null; then
            fail "slurmdbd died during start-up"
        fi
        if grep -qs 'fatal' "$LOG/slurmdbd.log"; then
            fail "slurmdbd logged a fatal error: $(grep -hs 'fatal' "$LOG/slurmdbd.log" | head -n 3 | tr '\n' ' ')"
        fi
        [ "$(date +%s)" -lt "$deadline" ] || fail "slurmdbd not listening on port $DBD_PORT after ${TIMEOUT}s"
        sleep 0.05
    done
fi

slurmctld -f "$CONF" < /dev/null >> "$LOG/daemons.out" 2>&1 || fail "slurmctld failed to start"

# The nodes mount the shared file system: it must be up first.
if [ -n "$gluster_job" ]; then
    if ! wait "$gluster_job"; then
        gluster_job=""
        fail "the shared file system did not start: $(tail -n 3 "$LOG/gluster-start.out" | tr '\n' ' ')"
    fi
    gluster_job=""
fi
t_nodes=$(date +%s.%N)
node_jobs=()
for i in $(seq 1 "$NODES"); do
    bash "$ETC/start-node.sh" "n$i" "$TIMEOUT" >> "$LOG/daemons.out" 2>&1 &
    node_jobs+=($!)
done
failed_nodes=""
for i in $(seq 1 "$NODES"); do
    wait "${node_jobs[$((i - 1))]}" || failed_nodes+=" n$i"
done
[ -z "$failed_nodes" ] \
    || fail "node(s)$failed_nodes did not start: $(grep -h '^start-node' "$LOG/daemons.out" | tail -n 3 | tr '\n' ' ')"

# ---------------------------------------------------------------- wait for idle
states=""
while :; do
    # One line per node: "n1 idle"
    states="$(sinfo -h -N -p debug -o '%N %T' 2>/dev/null || true)"
    n_idle="$(awk '$2 == "idle" { c++ } END { print c + 0 }' <<< "$states")"
    [ "$n_idle" -eq "$NODES" ] && break
    # A fatal error (bad config, port taken...) will not go away.
    if grep -qs 'fatal' "$LOG/slurmctld.log" "$LOG"/slurmd-*.log "$LOG"/slurmdbd.log; then
        fail "a daemon logged a fatal error: $(grep -hs 'fatal' "$LOG/slurmctld.log" "$LOG"/slurmd-*.log "$LOG"/slurmdbd.log | head -n 3 | tr '\n' ' ')"
    fi
    # A daemon that died will not come back.
    for pf in "$RUN/munged.pid" "$RUN/slurmctld.pid" "$RUN/slurmdbd.pid" "$RUN/mariadbd.pid" \
        "$RUN/glusterd.pid" "$RUN"/node-*.pid; do
        if [ -e "$pf" ] && ! kill -0 "$(cat "$pf")" 2>/dev/null; then
            fail "$(basename "$pf" .pid) died during start-up"
        fi
    done
    if [ "$(date +%s)" -ge "$deadline" ]; then
        fail "nodes not idle after ${TIMEOUT}s; sinfo says: $(tr '\n' ' ' <<< "${states:-<no answer>}")"
    fi
    sleep 0.1
done

# ---------------------------------------------------------------- wait for sacct
acct_note=""
if [ "$ACCOUNTING" -eq 1 ]; then
    # sacct asks slurmdbd; an answer without error (and without "accounting
    # storage is disabled") and the cluster registered by slurmctld mean
    # finished jobs will be recorded and found.
    while :; do
        out="$(sacct -n -P -X -o JobID 2>&1)" && ! grep -qi 'error\|disabled' <<< "$out" \
            && sacctmgr -n -P show cluster format=Cluster 2>/dev/null | grep -qx hpcflowtest \
            && break
        if [ "$(date +%s)" -ge "$deadline" ]; then
            fail "sacct not answering after ${TIMEOUT}s: $(tr '\n' ' ' <<< "${out:-<no output>}")"
        fi
        sleep 0.1
    done
    acct_note=", accounting via slurmdbd port $DBD_PORT"
    if [ "$ENFORCE" -eq 1 ]; then
        # Jobs need an association once associations are enforced.
        sacctmgr -i add account hpcflow Description=tests Organization=hpcflow >/dev/null \
            || fail "sacctmgr could not add the account"
        sacctmgr -i add user "$(id -un)" Account=hpcflow >/dev/null \
            || fail "sacctmgr could not add user $(id -un)"
        acct_note="$acct_note, limits enforced"
    fi
fi
t1=$(date +%s.%N)

case "$SHARED_FS:$GLUSTER_OWN" in
    none:*) fs_note="a plain directory (--shared-fs none)" ;;
    gluster:1) fs_note="GlusterFS volume $GLUSTER_VOLUME on $GLUSTER_SERVER, up after $(cat "$RUN/gluster-seconds")s; one client on the submit side and one per node" ;;
    *) fs_note="GlusterFS volume $GLUSTER_VOLUME of the cluster in $SHARED_FROM; one client per node" ;;
esac
printf 'start-cluster: %s node(s) idle after %.2fs (nodes started in %.2fs); cluster in %s (slurmctld port %s%s)\n' \
    "$NODES" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" \
    "$(awk -v a="$t_nodes" -v b="$t1" 'BEGIN { print b - a }')" "$BASE" "$PORT" "$acct_note"
echo "start-cluster: shared file system at $SHARED: $fs_note"
echo "start-cluster: use it with: source $BASE/env.sh"
