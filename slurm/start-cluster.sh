#!/usr/bin/env bash
# Start a private, single-host SLURM test cluster under BASE_DIR.
#
# Usage:
#   slurm/start-cluster.sh BASE_DIR [--nodes N] [--cpus C] [--gpus G]
#                          [--port P] [--min-job-age S] [--timeout S]
#                          [--slurmd-timeout S]
#                          [--accounting [--enforce-limits]]
#
# What it runs (all as root, all private to BASE_DIR, nothing in /etc):
#   * munged with its own key and socket (BASE_DIR/munge/munge.sock)
#   * slurmctld listening on port P (default 16817)
#   * N slurmd processes = logical nodes n1..nN (default 4), each with C CPUs
#     (default 2) and G fake GPUs (default 2; character devices made with
#     mknod that alias /dev/null), slurmd of node i listening on P+10+i
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
# Clients talk to it after `source BASE_DIR/env.sh` (exports SLURM_CONF).
# Stop it with slurm/stop-cluster.sh BASE_DIR.
#
# Jobs: MpiDefault=pmix, so `srun prog` of an Open MPI program just works;
# every task gets OMPI_MCA_btl=self,tcp (unless set) and
# OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM)=1 from a TaskProlog, so mpirun inside a
# job works across logical nodes. Finished jobs stay visible to squeue -t all
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
PORT=16817
MIN_JOB_AGE=30
TIMEOUT=60
SLURMD_TIMEOUT=""
ACCOUNTING=0
ENFORCE=0

while [ $# -gt 0 ]; do
    case "$1" in
        --nodes) NODES="${2:?}"; shift 2 ;;
        --nodes=*) NODES="${1#*=}"; shift ;;
        --cpus) CPUS="${2:?}"; shift 2 ;;
        --cpus=*) CPUS="${1#*=}"; shift ;;
        --gpus) GPUS="${2:?}"; shift 2 ;;
        --gpus=*) GPUS="${1#*=}"; shift ;;
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
        -h|--help) usage ;;
        -*) die "unknown option: $1" ;;
        *) [ -z "$BASE" ] || die "more than one BASE_DIR given"; BASE="$1"; shift ;;
    esac
done

[ -n "$BASE" ] || usage
for v in NODES CPUS GPUS PORT MIN_JOB_AGE TIMEOUT; do
    [[ "${!v}" =~ ^[0-9]+$ ]] || die "$v must be a non-negative integer (got '${!v}')"
done
[ -z "$SLURMD_TIMEOUT" ] || [[ "$SLURMD_TIMEOUT" =~ ^[0-9]+$ ]] \
    || die "SLURMD_TIMEOUT must be a non-negative integer (got '$SLURMD_TIMEOUT')"
[ "$NODES" -ge 1 ] || die "--nodes must be >= 1"
[ "$CPUS" -ge 1 ] || die "--cpus must be >= 1"
[ "$PORT" -ge 1024 ] && [ $((PORT + 10 + NODES)) -le 65535 ] || die "--port out of range"

# ---------------------------------------------------------------- prerequisites
[ "$(id -u)" -eq 0 ] || die "must run as root (slurmd and munged run as root here)"
for exe in munged slurmctld slurmd sinfo scontrol; do
    command -v "$exe" > /dev/null 2>&1 \
        || die "'$exe' not found; install with: sudo bash $(dirname "$0")/install-deps.sh"
done
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

# Start from a clean state (logs included): saved node state (e.g. a node
# drained by an earlier bad config) would otherwise survive restarts.
rm -rf "$BASE/state" "$BASE/spool" "$BASE/tmp" "$BASE/dev" "$RUN" "$MUNGE_DIR" "$LOG" \
    "$DB_DIR" "$DBD_CONF"
mkdir -p "$ETC" "$LOG" "$RUN" "$BASE/state" "$BASE/spool" "$BASE/tmp" "$BASE/dev" \
    "$MUNGE_DIR" "$MUNGE_KEY_DIR"
chmod 755 "$BASE" "$MUNGE_DIR"
chmod 700 "$MUNGE_KEY_DIR"

if [ ! -s "$MUNGE_KEY_DIR/munge.key" ]; then
    dd if=/dev/urandom of="$MUNGE_KEY_DIR/munge.key" bs=1024 count=1 status=none
fi
chmod 400 "$MUNGE_KEY_DIR/munge.key"

for i in $(seq 1 "$NODES"); do
    node="n$i"
    # slurmd does not create SlurmdSpoolDir/TmpFS when they contain %n.
    mkdir -p "$BASE/spool/$node" "$BASE/tmp/$node" "$BASE/dev/$node"
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
# Open MPI on several logical nodes of one host: its shared-memory BTL (vader)
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
[ "$GPUS" -eq 0 ] || gres_node="Gres=gpu:$GPUS"

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
    echo "TmpFS=$BASE/tmp/%n"
    echo "SlurmctldPidFile=$RUN/slurmctld.pid"
    echo "SlurmdPidFile=$RUN/slurmd-%n.pid"
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
        echo "NodeName=n$i NodeHostname=$HOST NodeAddr=127.0.0.1 Port=$((PORT + 10 + i)) CPUs=$CPUS RealMemory=$((CPUS * 1024)) $gres_node State=UNKNOWN"
    done
    echo "PartitionName=debug Nodes=$node_list Default=YES MaxTime=INFINITE State=UP"
    echo "PartitionName=gpu Nodes=$node_list MaxTime=INFINITE State=UP"
} > "$CONF"

{
    echo "AutoDetect=off"
    if [ "$GPUS" -gt 0 ]; then
        for i in $(seq 1 "$NODES"); do
            if [ "$GPUS" -eq 1 ]; then files="$BASE/dev/n$i/gpu0"; else files="$BASE/dev/n$i/gpu[0-$((GPUS - 1))]"; fi
            echo "NodeName=n$i Name=gpu File=$files"
        done
    fi
} > "$ETC/gres.conf"

cat > "$BASE/env.sh" <<EOF
# Source this file to use the private SLURM test cluster in $BASE.
export SLURM_CONF='$CONF'
EOF

export SLURM_CONF="$CONF"
# Marker in the daemons' environment (inherited by slurmstepd), used by
# stop-cluster.sh to find stray processes of this cluster.
export HPCFLOW_SLURM_TEST_BASE="$BASE"

# ---------------------------------------------------------------- failure path
log_tail() {
    local f
    for f in "$LOG"/munged.log "$LOG"/mariadbd.log "$LOG"/slurmdbd.log "$LOG"/slurmctld.log \
        "$LOG"/slurmd-*.log "$LOG"/daemons.out; do
        [ -s "$f" ] || continue
        echo "==> $f (last 20 lines) <=="
        tail -n 20 "$f"
    done
}
fail() {
    trap - ERR
    local tail_text
    tail_text="$(log_tail)"
    # Stop what was started before printing (printing may fail, e.g. SIGPIPE).
    bash "$(dirname "$0")/stop-cluster.sh" "$BASE" > /dev/null 2>&1 || true
    {
        echo "start-cluster: error: $*"
        echo "$tail_text"
    } >&2
    exit 1
}

# ---------------------------------------------------------------- start daemons
trap 'fail "unexpected error (exit $?) at line $LINENO of $0"' ERR
t0=$(date +%s.%N)

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
for i in $(seq 1 "$NODES"); do
    slurmd -f "$CONF" -N "n$i" < /dev/null >> "$LOG/daemons.out" 2>&1 || fail "slurmd for n$i failed to start"
done

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
    for pf in "$RUN/munged.pid" "$RUN/slurmctld.pid" "$RUN/slurmdbd.pid" "$RUN/mariadbd.pid"; do
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

printf 'start-cluster: %s node(s) idle after %.2fs; cluster in %s (slurmctld port %s%s)\n' \
    "$NODES" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" "$BASE" "$PORT" "$acct_note"
echo "start-cluster: use it with: source $BASE/env.sh"
