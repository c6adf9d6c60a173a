#!/usr/bin/env bash
# Node leaders: 2 nodes x 2 ranks, started by hand against `ringmaster
# serve --launcher external` (coordinator bootstrap), each node named by
# RINGMASTER_NODE with its local ranks given (RINGMASTER_LOCAL_RANK/_SIZE),
# so two nodes share this host: local rank 0 of each relays for its node
# (worker/node_relay.h). Checks: the job succeeds with every result, and the
# coordinator saw exactly one registration per node, of both its ranks;
# then, on a long plan, a killed non-leader rank (rank 3) and a killed
# leader (rank 2, whose relay goes with it) each fail the job naming that
# rank, within 2 s for the non-leader and within the heartbeat timeout (3 s
# here) plus 2 s for the leader; a stopped rank, leader or not, is named
# hung within the heartbeat timeout plus 4 s.
#   tests/node/leader.sh BIN_DIR
set -uo pipefail
bin=$(cd "${1:?the folder with the ringmaster binary}" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
R=$bin/ringmaster
W=$bin/ringmaster-worker
work=$(mktemp -d)
port=$((20000 + RANDOM % 20000))
export RINGMASTER_COORDINATOR=127.0.0.1:$port RINGMASTER_TOKEN_FILE=$work/admin.token
"$R" serve --data "$work" --listen "127.0.0.1:$port" --launcher external \
  --heartbeat-timeout 3 > "$work/serve.log" 2>&1 &
serve_pid=$!
trap 'kill $serve_pid 2>/dev/null; wait $serve_pid 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do "$R" status > /dev/null 2>&1 && break; sleep 0.1; done
status=0
fail() { echo "FAIL: $*"; status=1; }

"$R" submit --np 4 --backend host --json "$root/tests/plans/bootstrap.yaml" > "$work/sub"
job=$(tail -1 "$work/sub")
token=$(head -1 "$work/sub" | python3 -c 'import json,sys; print(json.load(sys.stdin)["worker_token"])')
pids=()
start_ranks() {  # start_ranks JOB TOKEN LOG_PREFIX: the 4 ranks, pids in pids[]
  pids=()
  for r in 0 1 2 3; do
    RINGMASTER_TOKEN=$2 RINGMASTER_NODE=node-$((r / 2)) \
      RINGMASTER_LOCAL_RANK=$((r % 2)) RINGMASTER_LOCAL_SIZE=2 \
      "$W" run --bootstrap --node-leader --coordinator "127.0.0.1:$port" \
      --job "$1" --rank "$r" --world-size 4 > "$work/$3$r.log" 2>&1 &
    pids+=($!)
  done
}
final_state() {  # final_state JOB: its status's first and last lines
  local text=""
  for _ in $(seq 200); do
    text=$("$R" status "$1" 2>&1)
    [[ $(head -1 <<< "$text") =~ FAILED|SUCCEEDED|CANCELLED ]] && break
    sleep 0.05
  done
  echo "$(head -1 <<< "$text") / $(tail -1 <<< "$text")"
}
start_ranks "$job" "$token" rank
for r in 0 1 2 3; do
  wait "${pids[$r]}" || fail "rank $r exited with $? ($(tail -1 "$work/rank$r.log"))"
done
state=$(final_state "$job")
[[ $state =~ SUCCEEDED ]] || fail "job: $state"
for n in 0 1; do
  got=$(grep -c "node node-$n registered 2 rank(s) in one call" "$work/serve.log")
  [ "$got" -eq 1 ] || fail "node-$n: $got registrations of its 2 ranks (expected 1)"
done
calls=$(grep -c "registered .* rank(s) in one call" "$work/serve.log")
echo "figure node_registrations $calls for 2 nodes x 2 ranks"
[ "$calls" -eq 2 ] || fail "$calls node registrations for 2 nodes"
grep -q "leader of 2 local rank(s)" "$work/rank0.log" || fail "rank 0 did not lead node-0"
grep -q "leader of 2 local rank(s)" "$work/rank2.log" || fail "rank 2 did not lead node-1"
# A killed or stopped rank: once the ranks have met, send it the signal;
# time until the job is FAILED naming it.
signal_one() {  # signal_one RANK SIGNAL: prints "seconds status"
  "$R" submit --np 4 --backend host --json "$root/tests/plans/service-long.yaml" > "$work/sub"
  local j t
  j=$(tail -1 "$work/sub")
  t=$(head -1 "$work/sub" | python3 -c 'import json,sys; print(json.load(sys.stdin)["worker_token"])')
  start_ranks "$j" "$t" "k$1$2-"
  for _ in $(seq 200); do
    grep -q "bootstrapped" "$work/k$1$2-$1.log" 2>/dev/null && break
    sleep 0.05
  done
  sleep 0.5
  local t0
  t0=$(date +%s.%N)
  kill "-$2" "${pids[$1]}"
  local st
  st=$(final_state "$j")
  echo "$(python3 -c "print(round($(date +%s.%N) - $t0, 2))") $st"
  kill -9 "${pids[@]}" 2>/dev/null
  wait "${pids[@]}" 2>/dev/null
}
kill_one() { signal_one "$1" KILL; }
read -r secs rest < <(kill_one 3)
echo "figure node_leader_killed_non_leader_named_s $secs ($rest)"
if ! [[ $rest =~ FAILED.*"rank 3" ]]; then fail "killed rank 3: $rest"; fi
python3 -c "import sys; sys.exit(0 if $secs <= 2 else 1)" || fail "rank 3 named after $secs s"
read -r secs rest < <(kill_one 2)
echo "figure node_leader_killed_leader_named_s $secs ($rest)"
if ! [[ $rest =~ FAILED.*"rank 2" ]]; then fail "killed leader rank 2: $rest"; fi
python3 -c "import sys; sys.exit(0 if $secs <= 5 else 1)" || fail "leader rank 2 named after $secs s"
# A stopped rank (SIGSTOP) heartbeats no more: named hung within the
# heartbeat timeout (3 s) + 4 s, whether its node's leader relays for it
# (rank 3) or it is the leader (rank 2; rank 3 is then silent too, but
# alive and not the one stopped).
for r in 3 2; do
  read -r secs rest < <(signal_one "$r" STOP)
  echo "figure node_leader_stopped_rank${r}_named_s $secs ($rest)"
  if ! [[ $rest =~ FAILED.*[Hh]ung.*"rank $r" || $rest =~ FAILED.*"rank $r".*[Hh]ung ]]; then
    fail "stopped rank $r: $rest"
  fi
  python3 -c "import sys; sys.exit(0 if $secs <= 7 else 1)" || fail "stopped rank $r named after $secs s"
done

if [ "$status" -ne 0 ]; then
  tail -n 5 "$work/serve.log" "$work"/rank*.log
else
  echo "PASS: one registration per node ($state); killed ranks named"
fi
exit "$status"
