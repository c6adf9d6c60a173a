#!/usr/bin/env bash
# On a GPU machine with .bundle/ carried: the coordinator bootstrap with the
# CUDA backend. One rank per GPU started without mpirun (rank 0's NCCL
# unique id relayed by the coordinator), then the same as one process group
# (--local-ranks), then the quickstart under mpirun for comparison.
# Writes $OUT/bootstrap.txt and the logs.
set -uo pipefail
out=${OUT:-/tmp/bootstrap-out}
mkdir -p "$out"
export LD_LIBRARY_PATH=$PWD/.bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
R=.bundle/bin/ringmaster
W=.bundle/bin/ringmaster-worker
gpus=$(nvidia-smi -L | wc -l)
d=/tmp/rm-bootstrap
rm -rf "$d"
export RINGMASTER_COORDINATOR=127.0.0.1:7451 RINGMASTER_TOKEN_FILE=$d/admin.token
log() { echo "$*" | tee -a "$out/bootstrap.txt"; }
"$R" serve --data "$d" --listen 127.0.0.1:7451 --launcher external > "$out/serve.log" 2>&1 &
serve_pid=$!
for _ in $(seq 100); do "$R" status >/dev/null 2>&1 && break; sleep 0.1; done
log "GPUs: $gpus"

# submit, then start the ranks with "$@" (a function of job and token).
run_job() {
  local name=$1
  shift
  "$R" submit --np "$gpus" --backend cuda --json plans/quickstart.yaml > "$out/$name.submit"
  local job token
  job=$(tail -1 "$out/$name.submit")
  token=$(head -1 "$out/$name.submit" | python3 -c 'import json,sys; print(json.load(sys.stdin)["worker_token"])')
  "$@" "$job" "$token"
  timeout 300 "$R" watch "$job" > "$out/$name.watch"
  log "$name $job: watch exit $? ($(tail -1 "$out/$name.watch"))"
  "$R" results "$job" > "$out/$name.results"
  grep -E "^# (results|status)|^ +33554432 " "$out/$name.results" | tee -a "$out/bootstrap.txt"
  grep -h "bootstrapped\|NCCL communicator" "$out/$name".rank*.log 2>/dev/null | head -4 | tee -a "$out/bootstrap.txt"
}
separate() {
  local r
  for r in $(seq 0 $((gpus - 1))); do
    RINGMASTER_TOKEN=$2 "$W" run --bootstrap --coordinator 127.0.0.1:7451 \
      --job "$1" --rank "$r" --world-size "$gpus" > "$out/separate.rank$r.log" 2>&1 &
  done
}
group() {
  RINGMASTER_TOKEN=$2 RINGMASTER_WORLD_SIZE=$gpus "$W" run --bootstrap \
    --coordinator 127.0.0.1:7451 --job "$1" --rank 0 --local-ranks "$gpus" \
    > "$out/group.rank0.log" 2>&1 &
}
run_job separate separate
run_job group group
kill "$serve_pid" 2>/dev/null
wait "$serve_pid" 2>/dev/null

"$R" run plans/quickstart.yaml --np "$gpus" --out /tmp/rm-mpi --quiet > "$out/mpirun.results" 2> "$out/mpirun.err"
log "mpirun: exit $?"
grep -E "^# (results|status)|^ +33554432 " "$out/mpirun.results" | tee -a "$out/bootstrap.txt"
