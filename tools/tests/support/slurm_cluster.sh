#!/usr/bin/env bash
# A one-node Slurm cluster on localhost, for tools/tests/slurm.rs (as root).
#
#   slurm_cluster.sh start DIR CTLD_PORT SLURMD_PORT   # writes DIR/slurm.conf, starts the daemons
#   slurm_cluster.sh stop DIR                          # stops what start started (pid files)
#
# Use it with SLURM_CONF=DIR/slurm.conf. Everything the cluster keeps (state,
# spool, logs, pid files) lives under DIR. munged is shared with the machine:
# it is started (as the munge user) only if it is not running, and then
# stopped again by `stop`. Needs Debian's slurm-wlm and munge.
set -euo pipefail
cmd=${1:?usage: slurm_cluster.sh start|stop DIR [CTLD_PORT SLURMD_PORT]}
dir=${2:?usage: slurm_cluster.sh start|stop DIR [CTLD_PORT SLURMD_PORT]}

stop_pid() { # pid file: TERM, wait up to 10 s, then KILL
  local f=$1 pid
  [ -f "$f" ] || return 0
  pid=$(cat "$f")
  if [ -n "$pid" ] && kill "$pid" 2>/dev/null; then
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

case "$cmd" in
start)
  ctld_port=${3:-6817}; slurmd_port=${4:-6818}
  mkdir -p "$dir"/{state,spool,log} /run/munge
  if ! pgrep -x munged >/dev/null; then
    if [ ! -f /etc/munge/munge.key ]; then
      dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null
      chmod 400 /etc/munge/munge.key
    fi
    chown -R munge:munge /etc/munge /var/lib/munge /var/log/munge /run/munge
    runuser -u munge -- /usr/sbin/munged --pid-file=/run/munge/munged.pid
    cp /run/munge/munged.pid "$dir/munged.pid"
  fi
  host=$(hostname -s)
  cat > "$dir/slurm.conf" <<CONF
ClusterName=tollgate-test
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName=$host CPUs=$(nproc) State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
  export SLURM_CONF=$dir/slurm.conf
  /usr/sbin/slurmctld -f "$dir/slurm.conf"
  /usr/sbin/slurmd -f "$dir/slurm.conf"
  for _ in $(seq 150); do
    sinfo -h -o %t 2>/dev/null | grep -q idle && exit 0
    sleep 0.2
  done
  echo "slurm did not come up within 30 s; sinfo says:" >&2
  sinfo >&2 || true
  tail -n 20 "$dir"/log/*.log >&2 || true
  exit 1;;
stop)
  if [ -f "$dir/slurm.conf" ]; then
    SLURM_CONF=$dir/slurm.conf scancel --user=root 2>/dev/null || true
  fi
  stop_pid "$dir/slurmd.pid"
  stop_pid "$dir/slurmctld.pid"
  stop_pid "$dir/munged.pid";;
*)
  echo "usage: slurm_cluster.sh start|stop DIR [CTLD_PORT SLURMD_PORT]" >&2; exit 2;;
esac
