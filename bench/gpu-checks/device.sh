#!/usr/bin/env bash
# Runs on the 2xH200 machine with .bundle/ carried: the GPU side of issue 2's
# correctness and failure promises.
#   1. every dtype x op, in- and out-of-place, verified on the device;
#   2. one corrupted element on rank 1 is caught (data_mismatch, exit 1);
#   3. a rank that SIGKILLs itself, and 4. a rank killed from outside,
#      fail the job within 10 s naming rank 1, leaving no worker behind.
set -uo pipefail
out=${OUT:-/tmp/checks-out}
mkdir -p "$out"
export LD_LIBRARY_PATH=$PWD/.bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
R=.bundle/bin/ringmaster
now() { date +%s.%N; }
left() { pgrep -f ringmaster-worker >/dev/null && echo "WORKERS LEFT: $(pgrep -fa ringmaster-worker)" || echo "no worker left"; }

echo "== 1 verify all dtypes and ops"
"$R" run bench/gpu-checks/verify.yaml --np 2 --out /tmp/v > "$out/verify.txt" 2> "$out/verify.err"
echo "exit $? (expect 0)"; tail -3 "$out/verify.txt"

echo "== 2 corrupted element"
RINGMASTER_FAULT=corrupt:rank=1 "$R" run bench/gpu-checks/verify.yaml --np 2 --out /tmp/c --quiet > /tmp/c.txt 2> /tmp/c.err
echo "exit $? (expect 1)"; grep -c "FAILED data_mismatch rank 1" /tmp/c.txt; tail -1 /tmp/c.err

echo "== 3 rank SIGKILLs itself at case 5"
t0=$(now)
RINGMASTER_FAULT=crash:rank=1:seq=5 "$R" run bench/gpu-checks/long.yaml --np 2 --out /tmp/k --quiet > /tmp/k.txt 2> /tmp/k.err
rc=$?; t1=$(now)
echo "exit $rc (expect 1) after $(python3 -c "print(round($t1 - $t0, 2))") s"; tail -1 /tmp/k.err; left

echo "== 4 rank killed from outside"
"$R" run bench/gpu-checks/long.yaml --np 2 --out /tmp/x --quiet > /tmp/x.txt 2> /tmp/x.err &
runner=$!
victim=""
for _ in $(seq 1 300); do
  for p in $(pgrep -f ringmaster-worker); do
    if tr '\0' '\n' < /proc/"$p"/environ 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=1; then victim="$p"; fi
  done
  [ -n "$victim" ] && break; sleep 0.05
done
sleep 3  # in the middle of the sweep
t0=$(now); kill -9 "$victim"; wait "$runner"; rc=$?; t1=$(now)
echo "killed pid $victim; exit $rc (expect 1) after $(python3 -c "print(round($t1 - $t0, 2))") s"; tail -1 /tmp/x.err; left
{ echo "== 2"; cat /tmp/c.err; echo "== 3"; cat /tmp/k.err; echo "== 4"; cat /tmp/x.err; } > "$out/faults.err"
