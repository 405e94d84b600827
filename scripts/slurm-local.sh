#!/usr/bin/env bash
# A local Slurm on this one host, for trying and testing moeplan under srun / sbatch:
# munged, slurmctld and two slurmd daemons emulating two nodes (slurmd -N nodeA / -N nodeB,
# NodeHostname=localhost, each with its own port, spool dir, pid and log file and its own
# TmpFS), Debian's slurm-wlm 22.05 defaults otherwise (MpiDefault=none, KillWait=30).
# Every file lives under one state directory; nothing is written to /etc or /var.
#
#   bash scripts/slurm-local.sh start    # start the daemons, wait until both nodes are idle
#   eval "$(bash scripts/slurm-local.sh env)"   # SLURM_CONF for srun/sbatch/sinfo/scancel
#   srun -N2 -n2 hostname
#   bash scripts/slurm-local.sh status   # daemons, nodes, jobs
#   bash scripts/slurm-local.sh stop     # cancel jobs, stop every daemon started here
#
# Needs root (slurmd runs job steps as the submitting user; munged is forced to run as root)
# and the packages slurm-wlm (slurmctld, slurmd, slurm-client) and munge:
#   apt-get install -y --no-install-recommends slurm-wlm munge
# No systemd: the daemons are started directly, found again through their pid files.
#
# Environment:
#   SLURM_LOCAL_DIR    state directory (default /tmp/moeplan-slurm-local)
#   SLURM_LOCAL_PORT   first of three TCP ports: slurmctld, nodeA, nodeB (default 16817)
#   SLURM_LOCAL_CPUS   CPUs declared per node (default: this host's CPU count)
#   SLURM_LOCAL_MPI    MpiDefault (default none, as Debian ships it; pmix to change it)
#   SLURM_LOCAL_KILLWAIT  KillWait in seconds (default 30, Slurm's default)
#   SLURM_LOCAL_SHM_PER_NODE  1 (default): a TaskProlog gives each emulated node its own
#                      directory for Open MPI's shared-memory segments (see below); 0: none
#
# Two emulated nodes share one hostname, /dev/shm and a job id, so Open MPI's shared-memory
# transport (btl vader) names the segments of local rank 0 on nodeA and on nodeB alike
# (vader_segment.<host>.<job>.<local rank>): with two ranks per node they overwrite each other
# and the ranks crash in MPI_Init or their first collective (SIGSEGV in
# mca_btl_vader_poll_handle_frag). A real cluster has one hostname per node and no such clash.
# The TaskProlog sets OMPI_MCA_btl_vader_backing_directory=/dev/shm/<state dir>-<node> per node,
# which keeps shared memory within an emulated node and TCP between them, as on a real cluster;
# OMPI_MCA_btl=self,tcp is the other way out (no shared memory at all).
set -euo pipefail

DIR=${SLURM_LOCAL_DIR:-/tmp/moeplan-slurm-local}
PORT=${SLURM_LOCAL_PORT:-16817}
CPUS=${SLURM_LOCAL_CPUS:-$(nproc)}
MPI=${SLURM_LOCAL_MPI:-none}
KILLWAIT=${SLURM_LOCAL_KILLWAIT:-30}
SHM_PER_NODE=${SLURM_LOCAL_SHM_PER_NODE:-1}
NODES=(nodeA nodeB)
CONF=$DIR/etc/slurm.conf
MUNGE_SOCKET=$DIR/munge/munge.socket

die() { echo "slurm-local: $*" >&2; exit 1; }
log() { echo "slurm-local: $*" >&2; }
# A daemon did not come up: say why (the first error in its log), stop what this start started.
start_failed() {  # message, log file
    local why; why=$(grep -i 'error' "$2" 2>/dev/null | head -n 1 || true)
    log "$1 (see $2)${why:+: $why}"
    stop
    exit 1
}

# pid files of every daemon this script starts (munged first, slurmds last)
pidfiles() {
    echo "$DIR/run/munged.pid" "$DIR/run/slurmctld.pid"
    local n
    for n in "${NODES[@]}"; do echo "$DIR/run/slurmd.$n.pid"; done
}

alive() { # alive PIDFILE -> prints the pid if that process runs
    local f=$1 pid
    [[ -s $f ]] || return 1
    pid=$(<"$f")
    [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

write_conf() {
    local host; host=$(hostname -s)
    mkdir -p "$DIR"/{etc,run,log,state,munge}
    local n i=0
    for n in "${NODES[@]}"; do mkdir -p "$DIR/spool/$n" "$DIR/tmp/$n"; done
    chmod 711 "$DIR/munge"   # munged: clients need search permission to reach the socket
    chmod 1777 "$DIR"/tmp/*
    local prolog=""
    if [[ $SHM_PER_NODE == 1 ]]; then
        prolog=$DIR/etc/task-prolog.sh
        cat >"$prolog" <<PROLOG
#!/bin/sh
# TaskProlog (scripts/slurm-local.sh): Open MPI's shared-memory segments, one place per node
d=/dev/shm/$(basename "$DIR")-\$SLURMD_NODENAME
mkdir -p "\$d" && chmod 1777 "\$d" 2>/dev/null
echo "export OMPI_MCA_btl_vader_backing_directory=\$d"
PROLOG
        chmod 755 "$prolog"
    fi
    # One slurm.conf for slurmctld and the clients. Each slurmd reads a copy that differs only
    # in TmpFS (slurm.conf has no per-node TmpFS and TmpFS takes no %n); slurmctld then logs
    # that the node's slurm.conf differs, which is harmless here.
    cat >"$CONF" <<EOF
# written by scripts/slurm-local.sh; state under $DIR
ClusterName=moeplan-local
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MUNGE_SOCKET
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.%n.log
SlurmctldDebug=info
MailProg=/bin/true
SlurmdDebug=info
TmpFS=$DIR/tmp
ProctrackType=proctrack/pgid
TaskPlugin=task/none
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=$MPI
KillWait=$KILLWAIT
${prolog:+TaskProlog=$prolog}
ReturnToService=2
SchedulerType=sched/backfill
InactiveLimit=0
MinJobAge=30
SlurmdTimeout=60
PartitionName=local Nodes=$(IFS=,; echo "${NODES[*]}") Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
    for n in "${NODES[@]}"; do
        echo "NodeName=$n NodeHostname=localhost NodeAddr=127.0.0.1 Port=$((PORT + 1 + i)) CPUs=$CPUS State=UNKNOWN" >>"$CONF"
        i=$((i + 1))
    done
    for n in "${NODES[@]}"; do
        sed "s|^TmpFS=.*|TmpFS=$DIR/tmp/$n|" "$CONF" >"$DIR/etc/slurm.$n.conf"
    done
}

start() {
    [[ $(id -u) == 0 ]] || die "run as root (slurmd must be able to start job steps as any user)"
    local b
    for b in munged mungekey slurmctld slurmd srun sinfo; do
        command -v "$b" >/dev/null || die "$b not found: apt-get install -y --no-install-recommends slurm-wlm munge"
    done
    local f
    for f in $(pidfiles); do
        if alive "$f" >/dev/null; then die "already running ($f); run: $0 stop"; fi
    done
    write_conf
    # munge: its own key, socket, pid, log and seed file
    [[ -s $DIR/munge/munge.key ]] || mungekey --create --keyfile="$DIR/munge/munge.key" 2>/dev/null \
        || dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1 count=1024 status=none
    chmod 600 "$DIR/munge/munge.key"
    munged --force --socket="$MUNGE_SOCKET" --key-file="$DIR/munge/munge.key" \
        --pid-file="$DIR/run/munged.pid" --log-file="$DIR/log/munged.log" \
        --seed-file="$DIR/munge/munged.seed" || start_failed "munged did not start" "$DIR/log/munged.log"
    slurmctld -c -f "$CONF" || start_failed "slurmctld did not start" "$DIR/log/slurmctld.log"
    local n
    for n in "${NODES[@]}"; do
        SLURM_CONF=$DIR/etc/slurm.$n.conf slurmd -f "$DIR/etc/slurm.$n.conf" -N "$n" \
            || start_failed "slurmd -N $n did not start" "$DIR/log/slurmd.$n.log"
    done
    # wait until both nodes are idle (a few seconds: slurmd registers, ReturnToService=2)
    local t0=$SECONDS idle
    while :; do
        idle=$(SLURM_CONF=$CONF sinfo -h -N -o '%N %T' 2>/dev/null | grep -c ' idle$' || true)
        [[ $idle == "${#NODES[@]}" ]] && break
        if ((SECONDS - t0 > 30)); then
            SLURM_CONF=$CONF sinfo -N >&2 || true
            start_failed "nodes not idle after 30 s" "$DIR/log/slurmctld.log"
        fi
        sleep 0.2
    done
    log "up: ${NODES[*]} idle; export SLURM_CONF=$CONF"
}

stop() {
    local t_start=$EPOCHREALTIME
    # cancel what still runs so no job step outlives its slurmd
    if [[ -s $CONF ]] && alive "$DIR/run/slurmctld.pid" >/dev/null; then
        SLURM_CONF=$CONF scancel --quiet --full --signal=KILL --partition=local 2>/dev/null || true
        local t0=$SECONDS
        while SLURM_CONF=$CONF squeue -h 2>/dev/null | grep -q . && ((SECONDS - t0 < 10)); do sleep 0.2; done
    fi
    # stop in reverse order: slurmds, slurmctld, munged; SIGTERM, then SIGKILL after 10 s
    local f pid pids=() files
    files=$(pidfiles | tr ' ' '\n' | tac)
    for f in $files; do
        if pid=$(alive "$f"); then
            kill -TERM "$pid" 2>/dev/null || true
            pids+=("$pid")
        fi
    done
    local t0=$SECONDS left
    while :; do
        left=()
        for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && left+=("$pid"); done
        ((${#left[@]} == 0)) && break
        if ((SECONDS - t0 >= 10)); then
            log "still running after SIGTERM, sending SIGKILL: ${left[*]}"
            kill -KILL "${left[@]}" 2>/dev/null || true
            break
        fi
        sleep 0.1
    done
    for f in $files; do rm -f "$f"; done
    local n
    for n in "${NODES[@]}"; do rm -rf "/dev/shm/$(basename "$DIR")-$n"; done
    log "stopped${pids[*]:+ (pids ${pids[*]})} in $(awk -v a="$EPOCHREALTIME" -v b="$t_start" 'BEGIN { printf "%.1f", a - b }') s"
}

status() {
    local f pid rc=0
    for f in $(pidfiles); do
        if pid=$(alive "$f"); then echo "$(basename "$f" .pid): running, pid $pid"
        else echo "$(basename "$f" .pid): not running"; rc=1; fi
    done
    if [[ $rc == 0 ]]; then
        SLURM_CONF=$CONF sinfo -N -o '%N %T %c %P' || rc=1
        SLURM_CONF=$CONF squeue || rc=1
    fi
    return $rc
}

case ${1:-} in
start) start ;;
stop) stop ;;
status) status ;;
env) echo "export SLURM_CONF=$CONF" ;;
*) echo "usage: $0 start|stop|status|env" >&2; exit 2 ;;
esac
