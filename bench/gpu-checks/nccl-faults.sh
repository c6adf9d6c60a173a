#!/usr/bin/env bash
# Runs on the 2xH200 machine with .bundle/ carried (issue 10, done-when 3):
# real NCCL ranks that stop calling NCCL or die, detected from outside and
# every process reaped.
#   1. hang: rank 1 stops at case 3 (hang hook) while rank 0 waits inside
#      NCCL; `--op-timeout OP` must end the job as rank_hung(1) within
#      OP + 5 s of the stall;
#   2. SIGSTOP: rank 1 frozen mid-sweep (heartbeats stop too): rank_hung
#      within the heartbeat lease + 5 s;
#   3. kill -9 of rank 1 mid-sweep: worker_exit(1) within 10 s.
# After each: no ringmaster-worker process left and no compute process on
# the GPUs. Writes $OUT/nccl-faults/ (summary.json, console, launcher logs).
set -uo pipefail
out=${OUT:-/tmp/nccl-faults-out}/nccl-faults
mkdir -p "$out"
export LD_LIBRARY_PATH=$PWD/.bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
R=.bundle/bin/ringmaster
OP=10
LEASE=5
now() { date +%s.%N; }
# Live ringmaster-worker processes: zombies do not count (the machine's
# container has no init that reaps orphans; a zombie holds no GPU or port).
workers_left() { ps -eo stat=,args= | awk '$1 !~ /^Z/ && /ringmaster-worker/ && !/awk/' | wc -l; }
gpu_procs() { nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null | grep -c . ; }
# rank_pid R: the pid of rank R's `ringmaster-worker run` (not the probe
# that `ringmaster run` launches first), once it runs (empty after 30 s).
rank_pid() {
  local p _
  for _ in $(seq 600); do
    for p in $(pgrep -f "ringmaster-worker run"); do
      if tr '\0' '\n' < /proc/"$p"/environ 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1"; then
        echo "$p"; return
      fi
    done
    sleep 0.05
  done
}
# reaped_within S: waits up to S s for no worker and no GPU process; prints
# the seconds it took (or "never").
reaped_within() {
  local t0 _
  t0=$(now)
  for _ in $(seq $(($1 * 20))); do
    if [ "$(workers_left)" = 0 ] && [ "$(gpu_procs)" = 0 ]; then
      python3 -c "print(round($(now) - $t0, 2))"; return
    fi
    sleep 0.05
  done
  echo never
}
# Seconds since an spdlog stamp "[HH:MM:SS.mmm]" of today at epoch T.
since_stamp() {
  python3 - "$1" "$2" <<'PY'
import datetime, sys
stamp, t = sys.argv[1], float(sys.argv[2])
day = datetime.datetime.fromtimestamp(t).date()
h, m, s = stamp.split(":")
at = datetime.datetime.combine(day, datetime.time(int(h), int(m))) + datetime.timedelta(seconds=float(s))
print(round(t - at.timestamp(), 2))
PY
}

exec > >(tee "$out/console.txt") 2>&1
echo "== 1 hang hook: rank 1 stops calling NCCL at case 3 (op timeout $OP s)"
rm -rf /tmp/nf-hang
RINGMASTER_FAULT=hang:rank=1:seq=3 "$R" run bench/gpu-checks/long.yaml --np 2 \
  --op-timeout "$OP" --out /tmp/nf-hang --quiet > /tmp/nf-hang.txt 2> /tmp/nf-hang.err
rc=$?; t_exit=$(now)
log=$(find /tmp/nf-hang -name launcher.log | head -1)
stamp=$(grep -o '\[[0-9:.]*\] \[worker\] \[warning\] rank 1: fault injection: hanging' "$log" | head -1 | grep -o '^\[[0-9:.]*' | tr -d '[')
hang_s=$(since_stamp "$stamp" "$t_exit")
hang_reap=$(reaped_within 10)
pgrep -af ringmaster-worker | cut -c1-120
nvidia-smi --query-compute-apps=pid,process_name --format=csv,noheader
echo "exit $rc (expect 1); stall at $stamp; job over ${hang_s} s after the stall; reaped in $hang_reap s"
tail -2 /tmp/nf-hang.err
cp "$log" "$out/hang-launcher.log"

echo "== 2 SIGSTOP of rank 1 mid-sweep (heartbeat lease $LEASE s)"
rm -rf /tmp/nf-stop
"$R" run bench/gpu-checks/long.yaml --np 2 --op-timeout 120 --heartbeat-timeout "$LEASE" \
  --out /tmp/nf-stop --quiet > /tmp/nf-stop.txt 2> /tmp/nf-stop.err &
runner=$!
victim=$(rank_pid 1)
sleep 4
echo "rank 1: pid $victim: $(tr '\0' ' ' < /proc/"$victim"/cmdline 2>/dev/null | cut -c1-80)"
kill -STOP "$victim"
for _ in $(seq 5000); do grep -q ') T' /proc/"$victim"/stat 2>/dev/null && break; sleep 0.001; done
t0=$(now)
wait "$runner"; rc=$?
stop_s=$(python3 -c "print(round($(now) - $t0, 2))")
stop_reap=$(reaped_within 10)
echo "stopped pid $victim; exit $rc (expect 1) after ${stop_s} s; reaped in $stop_reap s"
tail -2 /tmp/nf-stop.err

echo "== 3 kill -9 of rank 1 mid-sweep"
rm -rf /tmp/nf-kill
"$R" run bench/gpu-checks/long.yaml --np 2 --out /tmp/nf-kill --quiet \
  > /tmp/nf-kill.txt 2> /tmp/nf-kill.err &
runner=$!
victim=$(rank_pid 1)
sleep 4
echo "rank 1: pid $victim: $(tr '\0' ' ' < /proc/"$victim"/cmdline 2>/dev/null | cut -c1-80)"
t0=$(now); kill -9 "$victim"; wait "$runner"; rc=$?
kill_s=$(python3 -c "print(round($(now) - $t0, 2))")
kill_reap=$(reaped_within 10)
echo "killed pid $victim; exit $rc (expect 1) after ${kill_s} s; reaped in $kill_reap s"
tail -2 /tmp/nf-kill.err

cp /tmp/nf-hang.err /tmp/nf-stop.err /tmp/nf-kill.err "$out/" 2>/dev/null
for d in nf-stop nf-kill; do
  cp "$(find "/tmp/$d" -name launcher.log | head -1)" "$out/${d#nf-}-launcher.log" 2>/dev/null
done
hang_reason=$(grep -c "rank_hung rank 1" /tmp/nf-hang.err)
stop_reason=$(grep -c -E "(rank_hung|worker_unreachable) rank 1" /tmp/nf-stop.err)
kill_reason=$(grep -c "worker_exit rank 1" /tmp/nf-kill.err)
python3 - "$out" <<PY
import json, sys
def num(x):
    try: return float(x)
    except ValueError: return None
s = {
  "nccl_op_timeout_s": $OP,
  "nccl_hang_detect_s": num("$hang_s"),
  "nccl_hang_named_rank1": $hang_reason > 0,
  "nccl_hang_reap_s": num("$hang_reap"),
  "nccl_sigstop_lease_s": $LEASE,
  "nccl_sigstop_detect_s": num("$stop_s"),
  "nccl_sigstop_named_rank1": $stop_reason > 0,
  "nccl_sigstop_reap_s": num("$stop_reap"),
  "nccl_kill_detect_s": num("$kill_s"),
  "nccl_kill_named_rank1": $kill_reason > 0,
  "nccl_kill_reap_s": num("$kill_reap"),
  "nccl_processes_left": $(workers_left) + $(gpu_procs),
}
json.dump(s, open(sys.argv[1] + "/summary.json", "w"), indent=1, sort_keys=True)
print(json.dumps(s, indent=1, sort_keys=True))
PY
