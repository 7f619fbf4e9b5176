#!/usr/bin/env bash
# A one-node Slurm cluster on this machine, for `attnres run --executor slurm` and its tests
# (docs/slurm.md). Debian's slurm-wlm 22.05 and munge; no systemd, so the daemons run in the
# foreground (-D) in the background of this script and are stopped by pid.
#
#   scripts/setup-slurm.sh install        # apt-get the packages (root), once
#   scripts/setup-slurm.sh start DIR      # config, state and logs under DIR; waits until idle
#   scripts/setup-slurm.sh stop DIR       # stops what `start DIR` started
#
# After `start`, point Slurm's commands at the cluster with SLURM_CONF=DIR/slurm.conf.
# MaxArraySize is small (11) so that attnres's array chunking is exercised.
set -euo pipefail

cmd=${1:-}
dir=${2:-}

install() {
  if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v sbatch >/dev/null \
    && command -v munged >/dev/null; then
    return 0
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurmctld slurmd slurm-client munge >/dev/null
}

write_config() {
  local host node cpus mem
  host=$(hostname -s)
  # `slurmd -C` prints this node's line; keep CPUs and a little less memory than it reports.
  node=$(slurmd -C | head -n 1)
  cpus=$(sed -n 's/.*CPUs=\([0-9]*\).*/\1/p' <<<"$node")
  mem=$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$node")
  mem=$((mem * 9 / 10))
  mkdir -p "$dir/state" "$dir/spool" "$dir/log"
  cat >"$dir/slurm.conf" <<EOF
ClusterName=attnres
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=${ATTNRES_SLURMCTLD_PORT:-6817}
SlurmdPort=${ATTNRES_SLURMD_PORT:-6818}
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
ReturnToService=2
MaxArraySize=11
MinJobAge=600
SlurmUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
}

wait_for() { # wait_for SECONDS WHAT COMMAND...
  local limit=$1 what=$2
  shift 2
  for _ in $(seq 1 $((limit * 4))); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.25
  done
  echo "setup-slurm: $what did not happen within ${limit}s; logs in $dir/log" >&2
  return 1
}

start() {
  [ -n "$dir" ] || { echo "usage: $0 start DIR" >&2; exit 2; }
  install
  dir=$(mkdir -p "$dir" && cd "$dir" && pwd)
  write_config
  export SLURM_CONF=$dir/slurm.conf
  mkdir -p /run/munge
  chown munge:munge /run/munge 2>/dev/null || true
  if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    runuser -u munge -- munged --force
    echo munged >"$dir/started-munged"
  fi
  wait_for 10 "munge authentication" sh -c 'munge -n | unmunge | grep -q Success'
  slurmctld -D -f "$SLURM_CONF" >>"$dir/log/slurmctld.out" 2>&1 &
  echo $! >"$dir/ctld.pid"
  wait_for 30 "slurmctld answering" scontrol ping
  slurmd -D -f "$SLURM_CONF" >>"$dir/log/slurmd.out" 2>&1 &
  echo $! >"$dir/d.pid"
  wait_for 60 "the node becoming idle" sh -c 'sinfo -h -o %t | grep -q idle'
  echo "slurm: one-node cluster up; export SLURM_CONF=$dir/slurm.conf"
}

stop() {
  [ -n "$dir" ] || { echo "usage: $0 stop DIR" >&2; exit 2; }
  for f in d.pid ctld.pid; do
    if [ -f "$dir/$f" ]; then
      kill "$(cat "$dir/$f")" 2>/dev/null || true
      rm -f "$dir/$f"
    fi
  done
  if [ -f "$dir/started-munged" ] && [ -f /run/munge/munged.pid ]; then
    kill "$(cat /run/munge/munged.pid)" 2>/dev/null || true
    rm -f "$dir/started-munged"
  fi
}

case "$cmd" in
  install) install ;;
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 install | start DIR | stop DIR" >&2; exit 2 ;;
esac
