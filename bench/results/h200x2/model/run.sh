#!/usr/bin/env bash
# The model against the 2xH200 measurements (runs on the CPU machine):
#  1. the collective model calibrated on part of a measured all-reduce
#     sweep labelled with NCCL's protocol choice (allreduce-labelled.jsonl:
#     bench/gpu-checks/allreduce-model.yaml run with --nccl-algorithms,
#     2026-12-01; every other size >= 1 MiB held out) and its error on the
#     held-out sizes;
#  2. the data-parallel step of L8 H8192 B4096 (bf16, 25 MiB buckets,
#     overlap, NCCL) on 2 GPUs predicted from the 1-GPU step measured in the
#     same run (../train/call-4-final.tgz, ringmaster2.jsonl) and the
#     calibrated all-reduce, against the measured 2-GPU step.
#   bash bench/results/h200x2/model/run.sh BIN_DIR
set -euo pipefail
bin=${1:?the folder with the ringmaster binary}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$here/allreduce-labelled.jsonl" "$work/allreduce.jsonl"
bin=$(cd "$bin" && pwd)
cd "$work"  # file names in the output relative to it
"$bin/ringmaster" predict --topology "$root/topologies/h200-nvlink-pair.yaml" \
  --calibrate allreduce.jsonl --holdout 2 \
  --params-out "$here/params.yaml" --summary "$work/collectives.json" \
  | tee "$here/calibration.txt"
tar xzf "$here/../train/call-4-final.tgz" -C "$work" ./ringmaster2.jsonl
"$bin/ringmaster" predict --topology "$root/topologies/h200-nvlink-pair.yaml" \
  --calibrate allreduce.jsonl --compute-from ringmaster2.jsonl \
  --summary "$work/train.json" "$root/bench/train/plan.yaml" > "$here/train.txt"
python3 - "$work" "$here" <<'PY'
import json, sys
work, here = sys.argv[1], sys.argv[2]
coll = json.load(open(f"{work}/collectives.json"))
train = json.load(open(f"{work}/train.json"))
spec = "L8_H8192_B4096"
pred = next(r for r in train["train"]
            if r["spec"] == spec and r["overlap"] and r["ranks"] == 2)
meas = None
for line in open(f"{work}/ringmaster2.jsonl"):
    r = json.loads(line)
    c = r["case"]
    if (c["spec_name"] == spec and r.get("nranks") == 2
            and c["train"].get("overlap", False)):
        meas = r["stats"]["median_s"]
err = (pred["step_s"] - meas) / meas
out = {
    "model_allreduce_max_rel_err_ge1MiB": round(coll["model_allreduce_max_rel_err_ge1MiB"], 4),
    "model_allreduce_max_rel_err_fitted": round(coll["model_allreduce_max_rel_err_fitted"], 4),
    "model_dp_step_rel_err": round(abs(err), 4),
    "model_dp_step_predicted_ms": round(pred["step_s"] * 1e3, 3),
    "model_dp_step_measured_ms": round(meas * 1e3, 3),
    "model_nvlink_efficiency": round(coll["nvlink_efficiency"], 4),
}
json.dump(out, open(f"{here}/summary.json", "w"), indent=1, sort_keys=True)
print(json.dumps(out, indent=1, sort_keys=True))
PY
