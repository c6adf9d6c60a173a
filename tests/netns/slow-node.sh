#!/usr/bin/env bash
# ctest VirtualCluster.SlowNodeIsNamed: a 4-node virtual cluster
# (tests/netns/cluster.sh), 2 ranks per node, node3's link limited with tbf;
# `ringmaster serve` (TLS on the bridge address) launches the plan through
# mpirun across the namespaces; the all-reduce spans every node, every
# result records each rank's node, and the per-node summary of the pair
# bandwidths names node3 as the slow one. Exit 77 (skipped) without root or
# the tools.
#   tests/netns/slow-node.sh BIN_DIR
set -euo pipefail
bin=${1:?the folder with ringmaster}
root=$(cd "$(dirname "$0")/../.." && pwd)
if [ "$(id -u)" != 0 ]; then echo "skipped: needs root for network namespaces"; exit 77; fi
for tool in ip tc unshare openssl mpirun; do
  command -v "$tool" >/dev/null || { echo "skipped: $tool is missing"; exit 77; }
done
work=$(mktemp -d)
export RM_NET_TAG=rmt$$
serve_pid=""
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
  [ -n "$serve_pid" ] && kill "$serve_pid" 2>/dev/null
  "$root/tests/netns/cluster.sh" down "$work/net" || true
  rm -rf "$work"
}
trap cleanup EXIT
if ! "$root/tests/netns/cluster.sh" up "$work/net" 4 2 3 100mbit; then
  echo "skipped: network namespaces are not available here"
  exit 77
fi

# TLS for the bridge address (a non-loopback listener needs it).
(
  cd "$work"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 1 -subj /CN=ca
  printf 'subjectAltName=IP:198.18.0.1\n' > san.ext
  openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=coordinator
  openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
    -out server.pem -days 1 -extfile san.ext
) > "$work/pki.log" 2>&1

port=$((20000 + RANDOM % 20000))
addr=198.18.0.1:$port
RINGMASTER_TLS_CA=$work/ca.pem "$bin/ringmaster" serve --listen "$addr" \
  --tls-cert "$work/server.pem" --tls-key "$work/server.key" --advertise "$addr" \
  --hostfile "$work/net/hosts" --data "$work/data" --heartbeat-timeout 60 \
  --mpirun-arg=--mca --mpirun-arg=plm_rsh_agent --mpirun-arg="$work/net/agent.sh" \
  --mpirun-arg=--mca --mpirun-arg=btl --mpirun-arg=tcp,self \
  --mpirun-arg=--mca --mpirun-arg=btl_tcp_if_include --mpirun-arg=198.18.0.0/24 \
  --mpirun-arg=--mca --mpirun-arg=oob_tcp_if_include --mpirun-arg=198.18.0.0/24 \
  > "$work/serve.log" 2>&1 &
serve_pid=$!
for _ in $(seq 100); do
  [ -s "$work/data/admin.token" ] && break
  sleep 0.1
done
client=(--coordinator "$addr" --tls-ca "$work/ca.pem" --token-file "$work/data/admin.token")
# No --np: the plan places 4 nodes x 2 ranks.
job=$("$bin/ringmaster" submit "${client[@]}" --backend host \
  "$root/tests/plans/multinode.yaml" | tail -1)
echo "job $job"
if ! timeout 300 "$bin/ringmaster" watch "${client[@]}" "$job"; then
  echo "FAIL: the job did not succeed"
  cat "$work/serve.log"
  cat "$work/data/jobs/$job"/*.log 2>/dev/null | tail -40
  exit 1
fi
"$bin/ringmaster" results "${client[@]}" "$job" > "$work/results.txt"
"$bin/ringmaster" results "${client[@]}" "$job" --format jsonl > "$work/results.jsonl"
grep -E "^# per node|^ node|^#node|^# slow" "$work/results.txt"
status=0
# Every rank's node is recorded, and the all-reduce spanned all 8 ranks.
for n in node1 node2 node3 node4; do
  grep -q "\"$n\"" "$work/results.jsonl" || { echo "FAIL: no result names $n"; status=1; }
done
# The all-reduce spanned all 8 ranks; the node ladder ran on 1, 2 and 4
# nodes (2, 4 and 8 ranks); ranks are node-major (rank r on node r/2+1).
if ! python3 - "$work/results.jsonl" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
ok = True
def ranks_of(spec):
    return sorted({r.get("nranks", 0) for r in rows if r["case"]["spec_name"] == spec})
if 8 not in ranks_of("allreduce"):
    print("FAIL: no 8-rank all-reduce result"); ok = False
if ranks_of("allreduce_nodes") != [2, 4, 8]:
    print(f"FAIL: node ladder rungs {ranks_of('allreduce_nodes')}, expected [2, 4, 8]"); ok = False
hosts = next(r for r in rows if r["case"]["spec_name"] == "allreduce")["provenance"]["hosts"]
if hosts != [f"node{r // 2 + 1}" for r in range(8)]:
    print(f"FAIL: ranks are not node-major: {hosts}"); ok = False
sys.exit(0 if ok else 1)
PY
then
  status=1
fi
verdict=$(grep "^# slow node" "$work/results.txt" | head -1)
if grep -q "^# slow node(s): node3 (" "$work/results.txt" && \
   ! grep -qE "^# slow node\(s\):.*node[124] \(" "$work/results.txt"; then
  echo "FIGURE VirtualCluster 4 nodes x 2 ranks, node3 limited to 100 Mbit/s; ${verdict#\# } => PASS"
else
  echo "FIGURE VirtualCluster 4 nodes x 2 ranks, node3 limited to 100 Mbit/s; ${verdict#\# } => FAIL"
  status=1
fi
exit "$status"
