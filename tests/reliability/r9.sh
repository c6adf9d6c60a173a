#!/usr/bin/env bash
# shared/RELIABILITY.md R9: a config mismatch across ranks, and a rank that
# never joins. Ranks are started by hand against `ringmaster serve
# --launcher external` (coordinator bootstrap, no MPI):
#  - rank 1 reports a different build (fault hook mismatch): the job fails
#    config_mismatch naming the field, within 1 s of the ranks meeting;
#  - only rank 0 of 2 starts, with --bootstrap-timeout 3: it gives up after
#    3 s (not before, not much later) and the job fails worker_unreachable
#    naming rank 1.
#   tests/reliability/r9.sh BIN_DIR
set -uo pipefail
bin=$(cd "${1:?the folder with the ringmaster binary}" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
R=$bin/ringmaster
W=$bin/ringmaster-worker
work=$(mktemp -d)
port=$((20000 + RANDOM % 20000))
export RINGMASTER_COORDINATOR=127.0.0.1:$port RINGMASTER_TOKEN_FILE=$work/admin.token
"$R" serve --data "$work" --listen "127.0.0.1:$port" --launcher external \
  > "$work/serve.log" 2>&1 &
serve_pid=$!
trap 'kill $serve_pid 2>/dev/null; wait $serve_pid 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do "$R" status > /dev/null 2>&1 && break; sleep 0.1; done

submit() {  # prints "job token"
  "$R" submit --np 2 --backend host --json "$root/plans/quickstart.yaml" > "$work/sub"
  echo "$(tail -1 "$work/sub") $(head -1 "$work/sub" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["worker_token"])')"
}
# Waits for a terminal state; prints the status's last line (the failure).
final_status() {
  local text
  for _ in $(seq 100); do
    text=$("$R" status "$1" 2>&1)
    if [[ $(head -1 <<< "$text") =~ FAILED|SUCCEEDED|CANCELLED ]]; then
      tail -1 <<< "$text"
      return
    fi
    sleep 0.1
  done
  echo "not terminal"
}
now() { date +%s.%N; }

# 1. Config mismatch.
read -r job token < <(submit)
pids=()
for r in 0 1; do
  RINGMASTER_FAULT=mismatch:rank=1 RINGMASTER_TOKEN=$token "$W" run --bootstrap \
    --coordinator "127.0.0.1:$port" --job "$job" --rank "$r" --world-size 2 \
    > "$work/m$r.log" 2>&1 &
  pids+=($!)
done
wait "${pids[@]}" 2> /dev/null
mismatch=$(final_status "$job")
# From the ranks meeting (rank 0's "bootstrapped" line) to its error line.
detect_ms=$(python3 - "$work/m0.log" <<'PY'
import re, sys
t = {}
for line in open(sys.argv[1]):
    m = re.match(r"\[(\d+):(\d+):(\d+)\.(\d+)\]", line)
    if not m:
        continue
    s = int(m[1]) * 3600 + int(m[2]) * 60 + int(m[3]) + int(m[4]) / 1000
    if "bootstrapped" in line:
        t.setdefault("met", s)
    if "config_mismatch" in line:
        t.setdefault("failed", s)
print(round((t["failed"] - t["met"]) * 1000) if len(t) == 2 else -1)
PY
)

# 2. A rank that never joins.
read -r job token < <(submit)
t0=$(now)
RINGMASTER_TOKEN=$token "$W" run --bootstrap --coordinator "127.0.0.1:$port" \
  --job "$job" --rank 0 --world-size 2 --bootstrap-timeout 3 > "$work/j0.log" 2>&1
code=$?
gave_up=$(python3 -c "print(f'{$(now) - $t0:.2f}')")
missing=$(final_status "$job")

pass=1
echo "$mismatch" | grep -q "config_mismatch rank 1" || pass=0
echo "$mismatch" | grep -q "build_id" || pass=0
[ "$detect_ms" -ge 0 ] && [ "$detect_ms" -le 1000 ] || pass=0
echo "$missing" | grep -q "worker_unreachable" || pass=0
echo "$missing" | grep -q "(rank 1)" || pass=0
[ "$code" -ne 0 ] || pass=0
python3 -c "import sys; sys.exit(0 if 3.0 <= $gave_up <= 4.0 else 1)" || pass=0
verdict=FAIL
[ "$pass" -eq 1 ] && verdict=PASS
echo "FIGURE R9 mismatch: ${mismatch# } (detected ${detect_ms} ms after the ranks met, bar 1000); never-joining rank: rank 0 gave up after ${gave_up} s (timeout 3 s), exit $code, job: ${missing# } => $verdict"
[ "$pass" -eq 1 ]
