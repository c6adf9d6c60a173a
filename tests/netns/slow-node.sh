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
work=$(mktemp -d)
# shellcheck source=tests/netns/lib.sh
. "$root/tests/netns/lib.sh"
netns_up 4 2 3 100mbit
# shellcheck disable=SC2119  # no extra serve arguments
netns_serve
# No --np: the plan places 4 nodes x 2 ranks.
netns_run "$root/tests/plans/multinode.yaml"
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
