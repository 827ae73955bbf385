#!/usr/bin/env bash
# A real single-node SLURM cluster on this machine (Debian's slurm-wlm: slurmctld, slurmd, munged),
# for trying hydra/launcher=slurm without a cluster and for andrea's cluster tests (tests/cluster).
#
#   scripts/slurm_cluster.sh start     # a new cluster: the daemons, and a partition `andrea` with this machine's CPUs
#   eval "$(scripts/slurm_cluster.sh env)"   # SLURM_CONF for sbatch, squeue, scancel and andrea-train
#   scripts/slurm_cluster.sh status    # the daemons' pids and `sinfo`; exit 1 if the cluster is not up
#   scripts/slurm_cluster.sh restart   # the daemons again (after a crash, a reboot, a config change), the cluster
#                                      # kept: its queue, running jobs, finished jobs' records and job ids go on
#   scripts/slurm_cluster.sh stop      # every job and daemon ended, the folder (the cluster's whole state) removed
#
# Needs root and `apt-get install slurmctld slurmd slurm-client munge`. Every file (config, munge key
# and socket, state, spool, logs) lives in one folder, $ANDREA_SLURM_DIR (default /tmp/andrea-slurm);
# nothing is written to /etc or /var, and the client commands find the config through SLURM_CONF.
# No accounting database: finished jobs stay visible to `scontrol show job` for MinJobAge, and their records
# (StateSaveLocation) survive a restart. `start` begins a new cluster: the folder an earlier one left is wiped
# (use `restart` to keep it). `start` refuses to run beside another SLURM or munge on the machine (`stop` ends
# every slurmstepd left behind).
set -euo pipefail

DIR=${ANDREA_SLURM_DIR:-/tmp/andrea-slurm}
CONF=$DIR/slurm.conf
PARTITION=andrea
DAEMONS=(munged slurmctld slurmd)

# pgrep -x takes one name at a time (a pattern longer than a process name, 15 characters, matches nothing)
running() { for name in "$@"; do pgrep -x "$name"; done; }

pid_of() { [ -s "$DIR/$1.pid" ] && kill -0 "$(cat "$DIR/$1.pid")" 2>/dev/null && cat "$DIR/$1.pid"; }

write_config() {
    local node
    node=$(slurmd -C | head -1)  # NodeName=<host> CPUs=... RealMemory=...: this machine as slurmd sees it
    cat > "$CONF" <<EOF
ClusterName=andrea
SlurmctldHost=$(hostname -s)(127.0.0.1)
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$DIR/munge/munge.socket.2
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MinJobAge=3600
KillWait=30
InactiveLimit=0
$node NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=$PARTITION Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
}

start() {
    if [ "$(id -u)" != 0 ]; then echo "slurm_cluster.sh: needs root (the daemons run as root here)" >&2; exit 1; fi
    for cmd in munged mungekey slurmctld slurmd sinfo; do
        command -v "$cmd" > /dev/null || {
            echo "slurm_cluster.sh: $cmd is missing; apt-get install slurmctld slurmd slurm-client munge" >&2
            exit 1
        }
    done
    if status > /dev/null 2>&1; then echo "slurm_cluster.sh: already up in $DIR"; return; fi
    if [ ! -d "$DIR" ] && [ -n "$(running slurmctld slurmd munged)" ]; then  # stop ends every slurmstepd
        echo "slurm_cluster.sh: another SLURM or munge runs here (pids $(running slurmctld slurmd munged | xargs))" >&2
        exit 1
    fi
    if [ -d "$DIR" ]; then  # what a crashed or stopped-by-reboot cluster left
        stop > /dev/null 2>&1 || true
        echo "slurm_cluster.sh: the earlier cluster's state in $DIR is wiped (restart keeps it)"
    fi
    mkdir -p "$DIR"/{munge,state,spool,log}
    chmod 700 "$DIR/munge"
    mungekey --create --keyfile="$DIR/munge/munge.key" --force
    write_config
    daemons
}

restart() {
    if [ "$(id -u)" != 0 ]; then echo "slurm_cluster.sh: needs root (the daemons run as root here)" >&2; exit 1; fi
    if [ ! -s "$CONF" ] || [ ! -s "$DIR/munge/munge.key" ]; then
        echo "slurm_cluster.sh: no cluster in $DIR to restart; scripts/slurm_cluster.sh start makes one" >&2
        exit 1
    fi
    local pid
    for daemon in slurmd slurmctld munged; do  # slurmctld saves its state as it exits; jobs' slurmstepd live on
        pid=$(pid_of "$daemon" || true)
        [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
    done
    for _ in $(seq 30); do
        [ -z "$(running slurmd slurmctld munged)" ] && break
        sleep 1
    done
    if [ -n "$(running slurmd slurmctld munged)" ]; then
        echo "slurm_cluster.sh: the daemons did not exit (pids $(running slurmd slurmctld munged | xargs))" >&2
        exit 1
    fi
    daemons
}

daemons() {  # munge, the controller (recovering the queue from $DIR/state) and the node, until the node is up
    munged --force --key-file="$DIR/munge/munge.key" --socket="$DIR/munge/munge.socket.2" \
        --pid-file="$DIR/munged.pid" --log-file="$DIR/log/munged.log" --seed-file="$DIR/munge/munged.seed"
    export SLURM_CONF=$CONF
    slurmctld -f "$CONF"
    slurmd -f "$CONF"
    for _ in $(seq 60); do  # the node registers with the controller within seconds
        if sinfo -h -p "$PARTITION" -o %t 2>/dev/null | grep -qE '^(idle|mix|alloc)'; then
            echo "slurm_cluster.sh: up in $DIR (partition $PARTITION: $(sinfo -h -p "$PARTITION" -o '%c CPUs, %m MB'))"
            echo "export SLURM_CONF=$CONF"
            return
        fi
        sleep 1
    done
    echo "slurm_cluster.sh: the node did not come up; logs in $DIR/log" >&2
    tail -5 "$DIR"/log/*.log >&2 || true
    exit 1
}

stop() {
    local pid
    if [ -n "$(pid_of slurmctld || true)" ]; then  # the jobs first: their processes end with them
        SLURM_CONF=$CONF scancel --partition="$PARTITION" 2>/dev/null || true
        for _ in $(seq 30); do
            [ -z "$(SLURM_CONF=$CONF squeue -h -p "$PARTITION" 2>/dev/null)" ] && break
            sleep 1
        done
    fi
    for daemon in slurmd slurmctld munged; do
        pid=$(pid_of "$daemon" || true)
        [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
    done
    for _ in $(seq 30); do  # they write their state and exit
        [ -z "$(running slurmd slurmctld slurmstepd munged)" ] && break
        sleep 1
    done
    running slurmd slurmctld slurmstepd munged | xargs -r kill -KILL 2>/dev/null || true  # start made sure they were ours
    rm -rf "$DIR"
    echo "slurm_cluster.sh: stopped; $DIR removed"
}

status() {
    local up=0 pid
    for daemon in "${DAEMONS[@]}"; do
        pid=$(pid_of "$daemon" || true)
        if [ -n "$pid" ]; then echo "$daemon: running (pid $pid)"; else echo "$daemon: not running"; up=1; fi
    done
    [ "$up" = 0 ] && SLURM_CONF=$CONF sinfo -p "$PARTITION" || up=1
    return "$up"
}

case "${1:-}" in
    start) start ;;
    restart) restart ;;
    stop) stop ;;
    status) status ;;
    env) echo "export SLURM_CONF=$CONF" ;;
    *) echo "usage: scripts/slurm_cluster.sh start|restart|stop|status|env" >&2; exit 2 ;;
esac
