#!/usr/bin/env bash
# ctest R6_narrow_link: slow and narrow links between workers and the
# coordinator (shared/RELIABILITY.md row R6). Two nodes of the virtual
# cluster (tests/netns/cluster.sh) whose links are limited to 1 mbit/s with
# tbf in both directions; the ranks start in the nodes without mpirun and
# meet through the coordinator (TLS, default 15 s heartbeat lease):
#   narrow: the job runs over the 1 mbit/s links;
#   delayed: the same, with every byte between the ranks and the
#            coordinator also delayed DELAY_MS each way by
#            tests/reliability/delay-proxy.py (no netem on this kernel).
# Bar: both jobs SUCCEED with all their results, 0 spurious failures and 0
# deadline errors in any log. Exit 77 (skipped) without root or namespaces.
#   tests/reliability/r6.sh BIN_DIR
set -euo pipefail
bin=${1:?the folder with ringmaster}
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
RATE=1mbit
DELAY_MS=100
proxy_pid=""
# shellcheck source=tests/netns/lib.sh
. "$root/tests/netns/lib.sh"
# shellcheck disable=SC2317  # called by the EXIT trap
r6_cleanup() {
  [ -n "$proxy_pid" ] && kill "$proxy_pid" 2> /dev/null
  netns_cleanup
}
netns_up 2 1 all "$RATE"
trap r6_cleanup EXIT
NETNS_HEARTBEAT=15 netns_serve --launcher external
plan=$root/tests/plans/narrow-link.yaml

# run_job NAME PLAN NP PER_NODE [ADDRESS]: one job of external ranks; prints
# "STATE RESULTS SECONDS RANK_EXIT_CODES".
run_job() {
  local t0 t1 codes="" p
  t0=$(date +%s.%N)
  local name=$1
  netns_start_external "$@"
  timeout 300 "$bin/ringmaster" watch "${client[@]}" "$job" > "$work/$name.watch" 2>&1 || true
  for p in "${pids[@]}"; do
    if wait "$p"; then codes+="0,"; else codes+="$?,"; fi
  done
  t1=$(date +%s.%N)
  echo "$(netns_field "$job" state) $(netns_field "$job" results) $(python3 -c "print(f'{$t1 - $t0:.1f}')") ${codes%,}"
}

read -r narrow_state narrow_results narrow_s narrow_codes < <(run_job narrow "$plan" 2)

port=${client[1]##*:}
proxy_port=$((port + 1))
python3 "$root/tests/reliability/delay-proxy.py" "198.18.0.1:$proxy_port" \
  "198.18.0.1:$port" "$DELAY_MS" > "$work/proxy.log" 2>&1 &
proxy_pid=$!
for _ in $(seq 50); do grep -q listening "$work/proxy.log" && break; sleep 0.1; done
read -r delay_state delay_results delay_s delay_codes < <(run_job delayed "$plan" 2 1 "198.18.0.1:$proxy_port")

deadline_errors=$(cat "$work/serve.log" "$work"/narrow.rank*.log "$work"/delayed.rank*.log |
  grep -c -i -E "deadline_exceeded|deadline exceeded" || true)
spurious=0
[ "$narrow_state" = SUCCEEDED ] || spurious=$((spurious + 1))
[ "$delay_state" = SUCCEEDED ] || spurious=$((spurious + 1))
verdict=PASS
[ "$spurious" = 0 ] || verdict=FAIL
[ "$deadline_errors" = 0 ] || verdict=FAIL
[ "$narrow_results" -gt 0 ] 2> /dev/null || verdict=FAIL
[ "$narrow_results" = "$delay_results" ] || verdict=FAIL
[ "$narrow_codes" = "0,0" ] && [ "$delay_codes" = "0,0" ] || verdict=FAIL
echo "FIGURE R6 tbf $RATE both ways: $narrow_state results=$narrow_results in ${narrow_s} s (rank exits $narrow_codes); + ${DELAY_MS} ms each way through a delay proxy: $delay_state results=$delay_results in ${delay_s} s (rank exits $delay_codes); spurious_failures=$spurious deadline_errors=$deadline_errors => $verdict"
if [ "$verdict" = FAIL ]; then
  tail -30 "$work/serve.log"
  tail -8 "$work"/*.rank*.log
  exit 1
fi
