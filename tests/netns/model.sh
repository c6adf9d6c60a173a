#!/usr/bin/env bash
# ctest VirtualCluster.ModelPredictsFourNodes: on a 4-node virtual cluster
# with every node's link limited to 400 Mbit/s, a ring all-reduce sweep runs
# on 2 and on 4 nodes (2 ranks each); the model calibrated on the 2-node
# sweep predicts the 4-node times within 15% at every size. The ranks are
# started in their namespaces without mpirun and meet through the
# coordinator (coordinator bootstrap): their ring all-reduce over TCP waits
# in poll(), where MPI ranks would spin 8 ranks on 2 cores. Exit 77
# (skipped) without root or the tools.
#   tests/netns/model.sh BIN_DIR
set -euo pipefail
bin=${1:?the folder with ringmaster}
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
# shellcheck source=tests/netns/lib.sh
. "$root/tests/netns/lib.sh"
# A long queue: the limit shapes the traffic instead of dropping it.
RM_NET_TBF_LATENCY=2s RM_NET_TBF_BURST=256kb netns_up 4 2 all 400mbit
netns_serve --launcher external
netns_run_bootstrap "$root/tests/plans/model-ladder.yaml" 2
python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
rows = [json.loads(l) for l in open(f"{work}/results.jsonl") if l.strip()]
for n in (4, 8):
    with open(f"{work}/ranks{n}.jsonl", "w") as out:
        for r in rows:
            if r.get("nranks") == n and r.get("status") == "OK":
                out.write(json.dumps(r) + "\n")
PY
"$bin/ringmaster" predict --topology "$root/tests/netns/topology.yaml" \
  --calibrate "$work/ranks4.jsonl" --min-size 256KiB --nodes 4 \
  --summary "$work/predicted.json" "$root/tests/plans/model-ladder.yaml"
python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
measured = {}
for line in open(f"{work}/ranks8.jsonl"):
    r = json.loads(line)
    measured[int(r["case"]["size_bytes"])] = r["stats"]["median_s"]
predicted = {p["size_bytes"]: p["time_s"]
             for p in json.load(open(f"{work}/predicted.json"))["predictions"]}
worst, text = 0.0, []
for size in sorted(measured):
    err = (predicted[size] - measured[size]) / measured[size]
    worst = max(worst, abs(err))
    text.append(f"{size >> 10} KiB {err:+.3f}")
    print(f"{size >> 10:8d} KiB measured {measured[size] * 1e3:9.2f} ms "
          f"predicted {predicted[size] * 1e3:9.2f} ms  {err:+.3f}")
ok = len(measured) >= 5 and worst <= 0.15
print(f"FIGURE ModelNetns calibrated on 2 nodes, 4-node all-reduce predicted "
      f"within {worst:.3f} (bound 0.15): {', '.join(text)} => "
      f"{'PASS' if ok else 'FAIL'}")
sys.exit(0 if ok else 1)
PY
