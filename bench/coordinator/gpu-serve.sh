#!/usr/bin/env bash
# On the 2xH200 machine with .bundle/ carried: `ringmaster serve` launching
# GPU (NCCL) ranks. The quickstart through submit/watch/results, then
# plans/collectives.yaml with the coordinator killed (-9) mid-run and
# restarted on the same data folder: the job is adopted and every result
# stored. Writes $OUT/console.txt and the logs.
set -uo pipefail
out=${OUT:-/tmp/gpu-serve-out}
mkdir -p "$out"
export LD_LIBRARY_PATH=$PWD/.bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
R=.bundle/bin/ringmaster
d=/tmp/rm-serve
rm -rf "$d"
export RINGMASTER_COORDINATOR=127.0.0.1:7450 RINGMASTER_TOKEN_FILE=$d/admin.token
start_serve() {
  "$R" serve --data "$d" --listen 127.0.0.1:7450 >> "$out/serve.log" 2>&1 &
  serve_pid=$!
  for _ in $(seq 100); do
    "$R" status >/dev/null 2>&1 && return 0
    sleep 0.1
  done
}
log() { echo "$*" | tee -a "$out/console.txt"; }
start_serve
job=$("$R" submit --np 2 plans/quickstart.yaml | tail -1)
timeout 300 "$R" watch "$job" > "$out/watch-quickstart.txt"
log "quickstart $job: watch exit $? ($(tail -1 "$out/watch-quickstart.txt"))"
"$R" results "$job" > "$out/results-quickstart.txt"
grep -E "^# (results|Avg|status)|^ +(8|33554432) " "$out/results-quickstart.txt" | tee -a "$out/console.txt"

job=$("$R" submit --np 2 plans/collectives.yaml | tail -1)
for _ in $(seq 600); do
  n=$("$R" status "$job" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["results"])')
  [ "${n:-0}" -ge 5 ] && break
  sleep 0.2
done
log "collectives $job: $n results stored; kill -9 of the coordinator"
kill -9 "$serve_pid"
sleep 1
start_serve
timeout 600 "$R" watch "$job" > "$out/watch-collectives.txt"
log "collectives $job: watch exit $? after the restart ($(tail -1 "$out/watch-collectives.txt"))"
"$R" status "$job" --json | tee -a "$out/console.txt"
rows=$("$R" results "$job" --format jsonl | wc -l)
log "collectives $job: $rows result rows stored"
grep -E "taken over|SUCCEEDED|FAILED" "$out/serve.log" | tee -a "$out/console.txt"
kill "$serve_pid" 2>/dev/null
wait
