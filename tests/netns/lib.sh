# shellcheck shell=bash
# Shared by the virtual-cluster tests (sourced, never run): bring the
# cluster up or skip, and start `ringmaster serve` on the bridge address
# (TLS, since it is not loopback) launching through mpirun across the
# namespaces. Callers set `root`, `bin` and `work` first.
: "${root:?}" "${bin:?}" "${work:?}"

serve_pid=""
# shellcheck disable=SC2317  # called by the EXIT trap
netns_cleanup() {
  [ -n "$serve_pid" ] && kill "$serve_pid" 2>/dev/null
  "$root/tests/netns/cluster.sh" down "$work/net" || true
  rm -rf "$work"
}

# netns_skip REASON: exits 77 (ctest: skipped), or 1 where the caller
# requires these tests to run (RINGMASTER_REQUIRE_NETNS=1, as CI does).
netns_skip() {
  if [ "${RINGMASTER_REQUIRE_NETNS:-0}" = 1 ]; then
    echo "FAIL: $1 (RINGMASTER_REQUIRE_NETNS=1)"
    exit 1
  fi
  echo "skipped: $1"
  exit 77
}

# netns_up NODES SLOTS [LIMITED RATE]: exits 77 (skipped) where network
# namespaces, root or the tools are missing.
netns_up() {
  if [ "$(id -u)" != 0 ]; then netns_skip "needs root for network namespaces"; fi
  local tool
  for tool in ip tc unshare openssl mpirun; do
    command -v "$tool" >/dev/null || netns_skip "$tool is missing"
  done
  export RM_NET_TAG=rmt$$
  trap netns_cleanup EXIT
  if ! "$root/tests/netns/cluster.sh" up "$work/net" "$@"; then
    netns_skip "network namespaces are not available here"
  fi
}

# netns_serve [EXTRA SERVE ARGS...]: sets serve_pid and client (the CLI's
# connection arguments).
# shellcheck disable=SC2120  # the extra arguments are optional
netns_serve() {
  (
    cd "$work" || exit 1
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 1 -subj /CN=ca
    printf 'subjectAltName=IP:198.18.0.1\n' > san.ext
    openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=coordinator
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
      -out server.pem -days 1 -extfile san.ext
  ) > "$work/pki.log" 2>&1
  local addr
  addr=198.18.0.1:$((20000 + RANDOM % 20000))
  RINGMASTER_TLS_CA=$work/ca.pem "$bin/ringmaster" serve --listen "$addr" \
    --tls-cert "$work/server.pem" --tls-key "$work/server.key" --advertise "$addr" \
    --hostfile "$work/net/hosts" --data "$work/data" --heartbeat-timeout "${NETNS_HEARTBEAT:-60}" \
    --mpirun-arg=--mca --mpirun-arg=plm_rsh_agent --mpirun-arg="$work/net/agent.sh" \
    --mpirun-arg=--mca --mpirun-arg=btl --mpirun-arg=tcp,self \
    --mpirun-arg=--mca --mpirun-arg=btl_tcp_if_include --mpirun-arg=198.18.0.0/24 \
    --mpirun-arg=--mca --mpirun-arg=oob_tcp_if_include --mpirun-arg=198.18.0.0/24 \
    "$@" > "$work/serve.log" 2>&1 &
  serve_pid=$!
  local _
  for _ in $(seq 100); do
    [ -s "$work/data/admin.token" ] && break
    sleep 0.1
  done
  client=(--coordinator "$addr" --tls-ca "$work/ca.pem" --token-file "$work/data/admin.token")
}

# netns_run PLAN: submits it (host ranks), waits for SUCCEEDED and writes
# $work/results.txt and $work/results.jsonl; exits 1 when the job fails.
netns_run() {
  local job
  job=$("$bin/ringmaster" submit "${client[@]}" --backend host "$1" | tail -1)
  echo "job $job"
  if ! timeout 300 "$bin/ringmaster" watch "${client[@]}" "$job"; then
    echo "FAIL: the job did not succeed"
    cat "$work/serve.log"
    cat "$work/data/jobs/$job"/*.log 2>/dev/null | tail -40
    exit 1
  fi
  "$bin/ringmaster" results "${client[@]}" "$job" > "$work/results.txt"
  "$bin/ringmaster" results "${client[@]}" "$job" --format jsonl > "$work/results.jsonl"
}

# netns_run_bootstrap PLAN RANKS_PER_NODE: like netns_run, but the ranks are
# started without mpirun (`ringmaster-worker run --bootstrap`, rank r in
# node r / RANKS_PER_NODE + 1) and meet through the coordinator, which must
# run with --launcher external.
netns_run_bootstrap() {
  netns_start_external bootstrap "$1" "" "$2"
  echo "job $job: ${#pids[@]} ranks started without mpirun"
  if ! timeout 300 "$bin/ringmaster" watch "${client[@]}" "$job"; then
    echo "FAIL: the job did not succeed"
    cat "$work/serve.log"
    tail -5 "$work"/bootstrap.rank*.log
    exit 1
  fi
  wait "${pids[@]}" || echo "note: a rank exited non-zero after the job ended"
  "$bin/ringmaster" results "${client[@]}" "$job" > "$work/results.txt"
  "$bin/ringmaster" results "${client[@]}" "$job" --format jsonl > "$work/results.jsonl"
}

# netns_start_external NAME PLAN [NP] [RANKS_PER_NODE] [ADDRESS]: submits
# PLAN (for NP ranks; empty: as the plan says) to a coordinator that runs
# --launcher external and starts every rank with `ringmaster-worker run
# --bootstrap`, rank r in node r / RANKS_PER_NODE + 1 (default 1 rank per
# node), talking to ADDRESS (default: the coordinator itself; e.g. a proxy
# in front of it). With NETNS_NODE_LEADER=1 each node's first rank speaks
# for the node's ranks (their local rank and count given). Sets job and
# pids; rank logs in $work/NAME.rank<r>.log.
netns_start_external() {
  local name=$1 plan=$2 np=${3:-} per_node=${4:-1} addr=${5:-${client[1]}} token r node
  local sizing=() leader=()
  [ -n "$np" ] && sizing=(--np "$np")
  "$bin/ringmaster" submit "${client[@]}" --backend host "${sizing[@]}" --json "$plan" > "$work/$name.submit"
  job=$(tail -1 "$work/$name.submit")
  token=$(head -1 "$work/$name.submit" | python3 -c 'import json,sys; print(json.load(sys.stdin)["worker_token"])')
  np=$(head -1 "$work/$name.submit" | python3 -c 'import json,sys; print(json.load(sys.stdin)["nranks"])')
  pids=()
  for r in $(seq 0 $((np - 1))); do
    node=$((r / per_node + 1))
    [ "${NETNS_NODE_LEADER:-0}" = 1 ] && leader=(RINGMASTER_NODE_LEADER=1
      RINGMASTER_LOCAL_RANK=$((r % per_node)) RINGMASTER_LOCAL_SIZE="$per_node")
    # shellcheck disable=SC2016  # expanded by the inner bash
    ip netns exec "$RM_NET_TAG-node$node" unshare --uts bash -c \
      'hostname "$1"; shift; exec "$@"' agent "node$node" \
      env RINGMASTER_TOKEN="$token" RINGMASTER_TLS_CA="$work/ca.pem" "${leader[@]}" \
      "$bin/ringmaster-worker" run --bootstrap --coordinator "$addr" \
      --job "$job" --rank "$r" --world-size "$np" --backend host \
      > "$work/$name.rank$r.log" 2>&1 &
    pids+=($!)
  done
}

# netns_field JOB KEY: one field of `ringmaster status --json JOB` (status
# exits non-zero for a failed job: only its output counts here).
netns_field() {
  { "$bin/ringmaster" status "${client[@]}" --json "$1" || true; } |
    python3 -c 'import json,sys; print(json.load(sys.stdin).get(sys.argv[1], ""))' "$2"
}

# netns_wait_end JOB SINCE: waits (at most 60 s) until JOB ended; sets state
# and detect_s (seconds from SINCE, a `date +%s.%N`, to the end seen).
# shellcheck disable=SC2034  # state and detect_s are the caller's
netns_wait_end() {
  while :; do
    state=$(netns_field "$1" state)
    case $state in SUCCEEDED | FAILED | CANCELLED) break ;; esac
    if python3 -c "import sys; sys.exit(0 if $(date +%s.%N) - $2 > 60 else 1)"; then break; fi
    sleep 0.05
  done
  detect_s=$(python3 -c "print(f'{$(date +%s.%N) - $2:.2f}')")
}
