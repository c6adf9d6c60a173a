#!/usr/bin/env bash
# A node leader dead on another node: 2 nodes x 2 host ranks on the virtual
# cluster (tests/netns/cluster.sh), each node its own network namespace and
# host name, the coordinator on the bridge (TLS) with a heartbeat lease of
# LEASE s, the ranks started without mpirun with node leaders on. The
# coordinator sees no rank's process here: once node 2's ranks have reported
# results, its leader (rank 2) is killed, its relay going with it, and the
# coordinator alone must fail the job naming a rank of node 2 within
# LEASE + 2 s. Also checks that each node registered its ranks in one call.
# Exit 77 (skipped) without root or namespaces.
#   tests/netns/dead-leader.sh BIN_DIR
set -euo pipefail
bin=$(cd "${1:?the folder with ringmaster}" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
LEASE=4
# shellcheck source=tests/netns/lib.sh
. "$root/tests/netns/lib.sh"
netns_up 2 2
NETNS_HEARTBEAT=$LEASE netns_serve --launcher external

NETNS_NODE_LEADER=1 netns_start_external leader "$root/tests/plans/service-long.yaml" 4 2
ran=0
for _ in $(seq 600); do
  [ "$(netns_field "$job" results)" -ge 4 ] 2> /dev/null && { ran=1; break; }
  sleep 0.1
done
[ "$ran" = 1 ] || { echo "FAIL: the job never stored a result"; tail -20 "$work/serve.log"; exit 1; }
killed_at=$(date +%s.%N)
kill -9 "${pids[2]}"
wait "${pids[2]}" 2> /dev/null || true
netns_wait_end "$job" "$killed_at"
failure=$(netns_field "$job" failure | python3 -c 'import ast,sys; d=ast.literal_eval(sys.stdin.read() or "{}"); print(d.get("reason",""), d.get("rank",""), "|", d.get("detail",""))')
kill "${pids[@]}" 2> /dev/null || true
wait "${pids[@]}" 2> /dev/null || true
registrations=$(grep -c "registered 2 rank(s) in one call" "$work/serve.log" || true)

bar=$((LEASE + 2))
verdict=PASS
[ "$registrations" = 2 ] || verdict=FAIL
[ "$state" = FAILED ] || verdict=FAIL
python3 -c "import sys; sys.exit(0 if $detect_s <= $bar else 1)" || verdict=FAIL
rank=$(cut -d' ' -f2 <<< "$failure")
[ "$rank" = 2 ] || [ "$rank" = 3 ] || verdict=FAIL
echo "figure node_leader_dead_on_another_node_named_s $detect_s (bar $bar s, lease $LEASE s): $state, $failure; node registrations $registrations for 2 nodes => $verdict"
if [ "$verdict" = FAIL ]; then
  tail -30 "$work/serve.log"
  tail -5 "$work"/leader.rank*.log
  exit 1
fi
