#!/usr/bin/env bash
# A single-node Slurm cluster on loopback for tests: slurmctld + slurmd +
# munge from Debian's packages, two fake GPUs (character devices) in
# gres.conf, srun --mpi=pmix as the default.
#   tests/slurm/cluster.sh start DIR   # writes DIR/slurm.conf; prints SLURM_CONF
#   tests/slurm/cluster.sh stop DIR
# Needs root (the daemons run as root here; munged as the munge user).
set -euo pipefail

cmd=${1:?start or stop}
dir=${2:?state folder}
ctld_port=${SLURMCTLD_PORT:-16817}
slurmd_port=${SLURMD_PORT:-16818}

stop() {
  for pidfile in "$dir/slurmd.pid" "$dir/slurmctld.pid"; do
    if [ -f "$pidfile" ]; then
      kill "$(cat "$pidfile")" 2>/dev/null || true
    fi
  done
  for _ in $(seq 50); do
    if ! pgrep -f "slurm(ctld|d) .*$dir" >/dev/null; then break; fi
    sleep 0.1
  done
  pkill -9 -f "slurm(ctld|d) .*$dir" 2>/dev/null || true
}

if [ "$cmd" = stop ]; then
  stop
  exit 0
fi
[ "$cmd" = start ] || { echo "usage: $0 start|stop DIR" >&2; exit 2; }
for tool in slurmctld slurmd munged sbatch srun squeue sacct scancel; do
  command -v "$tool" >/dev/null || { echo "cluster.sh: $tool is missing" >&2; exit 3; }
done

mkdir -p "$dir/state" "$dir/spool"
dir=$(cd "$dir" && pwd)
host=$(hostname -s)
cpus=$(nproc)

# munge: a key, a socket folder owned by the munge user, the daemon.
if [ ! -f /etc/munge/munge.key ]; then
  mkdir -p /etc/munge
  dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null
  chown munge:munge /etc/munge/munge.key
  chmod 0400 /etc/munge/munge.key
fi
mkdir -p /run/munge /var/log/munge /var/lib/munge
chown munge:munge /run/munge /var/log/munge /var/lib/munge
if ! pgrep -x munged >/dev/null; then
  runuser -u munge -- /usr/sbin/munged
fi

cat > "$dir/slurm.conf" <<CONF
ClusterName=ringmaster-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmix
GresTypes=gpu
ReturnToService=2
SchedulerType=sched/builtin
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
KillWait=2
InactiveLimit=0
MinJobAge=300
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus Gres=gpu:2 State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
cat > "$dir/gres.conf" <<CONF
NodeName=$host Name=gpu File=/dev/null
NodeName=$host Name=gpu File=/dev/zero
CONF

export SLURM_CONF=$dir/slurm.conf
stop
slurmctld -f "$SLURM_CONF" -i
slurmd -f "$SLURM_CONF"
for _ in $(seq 100); do
  if sinfo -h -o %T 2>/dev/null | grep -qE "^(idle|mixed|allocated)"; then
    echo "SLURM_CONF=$SLURM_CONF"
    exit 0
  fi
  sleep 0.2
done
echo "cluster.sh: the node did not come up; logs in $dir" >&2
tail -20 "$dir/slurmctld.log" "$dir/slurmd.log" >&2 || true
exit 1
