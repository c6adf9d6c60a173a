#!/usr/bin/env bash
# ctest R5_partition: worker<->coordinator partitions (shared/RELIABILITY.md
# row R5). Two nodes of the virtual cluster (tests/netns/cluster.sh); the
# coordinator on the bridge with a heartbeat lease of LEASE s; the ranks
# are started in the nodes without mpirun (`ringmaster-worker run
# --bootstrap`, as Kubernetes pods are), so the coordinator cannot kill
# them and a partitioned rank outlives its job. nftables in node2's
# namespace drops everything between rank 1 and the coordinator's port
# (MPI between the nodes still flows):
#   short: SHORT s mid-run, then healed -> the job SUCCEEDS with every
#          result stored once;
#   long:  held until the job fails -> FAILED within LEASE + 2 s of the cut,
#          naming rank 1; after healing, the partitioned rank's late
#          reports are refused (0 stale writes) and it exits.
# Exit 77 (skipped) without root, namespaces or nft.
#   tests/reliability/r5.sh BIN_DIR
set -euo pipefail
bin=${1:?the folder with ringmaster}
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
LEASE=6
SHORT=2
command -v nft > /dev/null || { echo "skipped: nft (nftables) is missing"; exit 77; }
# shellcheck source=tests/netns/lib.sh
. "$root/tests/netns/lib.sh"
netns_up 2 1
NETNS_HEARTBEAT=$LEASE netns_serve --launcher external
port=${client[1]##*:}
plan=$root/tests/plans/service-long.yaml

now() { date +%s.%N; }
cut_link() {
  ip netns exec "$RM_NET_TAG-node2" nft -f - <<EOF
table inet r5 {
  chain out { type filter hook output priority 0; ip daddr 198.18.0.1 tcp dport $port drop; }
  chain in { type filter hook input priority 0; ip saddr 198.18.0.1 tcp sport $port drop; }
}
EOF
}
heal() { ip netns exec "$RM_NET_TAG-node2" nft delete table inet r5 2>/dev/null || true; }

# wait_results JOB N: until the job has stored N results (or 60 s).
wait_results() {
  local _
  for _ in $(seq 600); do
    [ "$(netns_field "$1" results)" -ge "$2" ] 2> /dev/null && return 0
    sleep 0.1
  done
  return 1
}

# --- short partition -------------------------------------------------------
netns_start_external short "$plan" 2
wait_results "$job" 2 || { echo "FAIL: the job never stored a result"; cat "$work/serve.log"; exit 1; }
cut_link
sleep "$SHORT"
heal
short_job=$job
timeout 120 "$bin/ringmaster" watch "${client[@]}" "$job" > "$work/short.watch" 2>&1 || true
short_state=$(netns_field "$job" state)
short_results=$(netns_field "$job" results)
wait "${pids[@]}" 2> /dev/null || true
# The same plan with no partition: how many results a whole run stores.
netns_start_external clean "$plan" 2
timeout 120 "$bin/ringmaster" watch "${client[@]}" "$job" > "$work/clean.watch" 2>&1 || true
clean_results=$(netns_field "$job" results)
wait "${pids[@]}" 2> /dev/null || true
duplicates=$("$bin/ringmaster" results "${client[@]}" "$short_job" --format jsonl |
  python3 -c 'import json,sys; keys=[json.loads(l)["idempotency_key"] for l in sys.stdin if l.strip()]; print(len(keys)-len(set(keys)))')

# --- long partition --------------------------------------------------------
netns_start_external long "$plan" 2
wait_results "$job" 2 || { echo "FAIL: the job never stored a result"; exit 1; }
cut_link
netns_wait_end "$job" "$(now)"
long_state=$state
reason=$(netns_field "$job" failure | python3 -c 'import ast,sys; d=ast.literal_eval(sys.stdin.read() or "{}"); print(d.get("reason",""), d.get("rank",""))')
at_failure=$(netns_field "$job" results)
# The partitioned rank is still alive, still holding results it could not
# report; heal and give it time to try.
rank1_alive_at_heal=0
kill -0 "${pids[1]}" 2> /dev/null && rank1_alive_at_heal=1
heal
exited=0
for _ in $(seq 150); do
  if ! kill -0 "${pids[1]}" 2> /dev/null; then exited=1; break; fi
  sleep 0.1
done
sleep 1
after_heal=$(netns_field "$job" results)
stale=$((after_heal - at_failure))
refused=$(grep -c -E "is over|stale attempt|cancel" "$work/long.rank1.log" || true)
kill "${pids[@]}" 2> /dev/null || true

bar=$((LEASE + 2))
verdict=PASS
[ "$short_state" = SUCCEEDED ] || verdict=FAIL
[ "$short_results" = "$clean_results" ] || verdict=FAIL
[ "$duplicates" = 0 ] || verdict=FAIL
[ "$long_state" = FAILED ] || verdict=FAIL
python3 -c "import sys; sys.exit(0 if $detect_s <= $bar else 1)" || verdict=FAIL
case $reason in *" 1") ;; *) verdict=FAIL ;; esac
[ "$stale" = 0 ] || verdict=FAIL
[ "$exited" = 1 ] || verdict=FAIL
echo "FIGURE R5 short ${SHORT} s partition: $short_state results=$short_results/$clean_results duplicates=$duplicates spurious_failures=$([ "$short_state" = SUCCEEDED ] && echo 0 || echo 1); long partition (lease $LEASE s): $long_state reason=${reason% *} rank=${reason##* } detect_s=$detect_s (bar $bar s), rank 1 alive at heal=$rank1_alive_at_heal, stale_writes_accepted=$stale, partitioned rank exited after heal=$exited (refusals logged: $refused) => $verdict"
echo "rank 1 (partitioned) at its end:"
tail -3 "$work/long.rank1.log"
if [ "$verdict" = FAIL ]; then
  tail -30 "$work/serve.log"
  tail -15 "$work"/long.rank*.log "$work"/short.rank*.log
  exit 1
fi
