#!/usr/bin/env bash
# `ringmaster topo` on a machine without GPUs, `ringmaster predict` of
# the collectives plan on the HGX H100 + NDR InfiniBand cluster (64 nodes):
# every size predicted, and the all-reduce plateau (the largest size, where
# the latency of 1022 ring steps no longer counts) inside the published
# range for that system (ring busbw ~350-370 GB/s). The curve below it is
# printed in the figure as predicted. And the same plan on NVLink, PCIe,
# InfiniBand and RoCE systems side by side (--compare).
#   tests/model/cli.sh BIN_DIR
set -euo pipefail
bin=${1:?the folder with the ringmaster binary}
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
fail() { echo "FAIL: $*"; status=1; }

"$bin/ringmaster" topo > "$work/topo.txt"
cat "$work/topo.txt"
grep -q "NUMA node" "$work/topo.txt" || fail "topo printed no NUMA nodes"
grep -q "^  numa [0-9]*: cpus " "$work/topo.txt" || fail "topo printed no CPU list"
grep -q "^GPUs: none found" "$work/topo.txt" || fail "topo did not say no GPU was found"
"$bin/ringmaster" topo --format yaml > "$work/topo.yaml"
python3 - "$work/topo.yaml" <<'PY' || fail "topo --format yaml is not a topology"
import sys, yaml
t = yaml.safe_load(open(sys.argv[1]))
assert t["id"].startswith("cpu-"), t
assert "node" in t, t
PY

"$bin/ringmaster" predict --topology "$root/topologies/hgx-h100-ndr-cluster.yaml" \
  --nodes 64 "$root/plans/collectives.yaml" --summary "$work/plan.json" > "$work/plan.txt"
cat "$work/plan.txt"
"$bin/ringmaster" predict --topology "$root/topologies/hgx-h100-ndr-cluster.yaml" \
  --nodes 64 --sizes 512MiB:16GiB "$root/plans/collectives.yaml" \
  --summary "$work/large.json" > "$work/large.txt"
grep -A8 "^# all_reduce" "$work/large.txt"
# Interconnects side by side: NVLink (HGX) vs PCIe vs NDR vs RoCE, 4 nodes.
"$bin/ringmaster" predict --topology "$root/topologies/hgx-h100-8.yaml" \
  --compare "$root/topologies/h100-pcie-8.yaml" \
  --compare "$root/topologies/hgx-h100-ndr-cluster.yaml" \
  --compare "$root/topologies/hgx-h100-roce-cluster.yaml" \
  --nodes 4 --sizes 1GiB:1GiB "$root/plans/collectives.yaml" \
  --summary "$work/side.json" > "$work/side.txt"
grep -A9 "side by side" "$work/side.txt"
python3 - "$work/side.json" <<'PY' || fail "the side-by-side comparison"
import json, sys
rows = json.load(open(sys.argv[1]))["side_by_side"]
ids = ("hgx-h100-8", "h100-pcie-8", "hgx-h100-ndr-cluster", "hgx-h100-roce-cluster")
assert len(rows) == 7, rows
for r in rows:
    assert all(i in r for i in ids), r
ar = next(r for r in rows if r["collective"] == "all_reduce")
assert ar["h100-pcie-8"] < ar["hgx-h100-8"] / 4, ar
PY
python3 - "$work/plan.json" "$work/large.json" <<'PY' || status=1
import json, sys
plan = json.load(open(sys.argv[1]))
large = json.load(open(sys.argv[2]))
ok = True
kinds = {r["collective"] for r in plan["predictions"]}
for c in ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce",
          "all_to_all", "send_recv"):
    if c not in kinds:
        print(f"FAIL: no prediction for {c}"); ok = False
sizes = [r["size_bytes"] for r in plan["predictions"] if r["collective"] == "all_reduce"]
if sizes != sorted(set(sizes)) or len(sizes) < 5:
    print(f"FAIL: all_reduce sizes {sizes}"); ok = False
ar = [r for r in large["predictions"] if r["collective"] == "all_reduce"]
plateau = [ar[-1]["busbw_gbps"]] if ar else []
text = ", ".join(f'{r["size_bytes"] >> 20} MiB {r["busbw_gbps"]:.0f}' for r in ar)
inside = all(350 <= b <= 370 for b in plateau) and plateau
print(f"FIGURE ModelPredict HGX H100 + NDR, 64 nodes x 8 GPUs, all_reduce busbw (GB/s): {text}; "
      f"plateau ({ar[-1]['size_bytes'] >> 30} GiB) inside 350-370: {'yes' if inside else 'NO'} => {'PASS' if inside and ok else 'FAIL'}")
sys.exit(0 if inside and ok else 1)
PY
exit "$status"
