#!/usr/bin/env bash
# On a GPU machine with .bundle/ carried: NVML telemetry in results and the
# HTML report. Runs bench/gpu-checks/telemetry.yaml on every GPU (one rank
# each), `ringmaster topo`, and renders the report; writes $OUT/telemetry/
# (results.jsonl, report.html, topo.txt, summary.txt).
set -uo pipefail
out=${OUT:-/tmp/telemetry-out}/telemetry
mkdir -p "$out"
export LD_LIBRARY_PATH=$PWD/.bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
R=.bundle/bin/ringmaster
gpus=$(nvidia-smi -L | wc -l)
nvidia-smi --query-gpu=index,name,power.limit,clocks.max.sm --format=csv > "$out/nvidia-smi.csv" 2>&1
"$R" topo > "$out/topo.txt" 2>&1
"$R" run bench/gpu-checks/telemetry.yaml --np "$gpus" --out /tmp/rm-telemetry \
  > "$out/run.txt" 2> "$out/run.err"
echo "run exit $?" >> "$out/run.txt"
cat /tmp/rm-telemetry/*/results.jsonl > "$out/results.jsonl"
"$R" report "$out/results.jsonl" --html "$out/report.html" \
  --topology topologies/h200-nvlink-pair.yaml --title "Telemetry on $gpus x H200" \
  2>> "$out/run.err"
python3 - "$out" <<'PY' | tee "$out/summary.txt"
import glob, json, sys
out = sys.argv[1]
results = [json.loads(l) for l in open(out + "/results.jsonl")]
devices, samples, throttled = {}, 0, 0
fields = set()
for r in results:
    throttled += bool(r.get("throttled"))
    for t in r.get("telemetry", []):
        devices.setdefault((t["rank"], t["device"]), 0)
        for s in t.get("samples", []):
            devices[(t["rank"], t["device"])] += 1
            samples += 1
            fields.update(k for k in s if k != "t_s")
print(f"results {len(results)}, with telemetry "
      f"{sum(1 for r in results if r.get('telemetry'))}, throttled {throttled}")
for (rank, dev), n in sorted(devices.items()):
    print(f"rank {rank}: {dev}: {n} samples")
print("fields:", ", ".join(sorted(fields)))
for r in results:
    if r.get("throttled"):
        print("throttled:", r["case"]["spec_name"], r["case"].get("size_bytes"),
              r.get("throttle_detail"))
        break
PY
