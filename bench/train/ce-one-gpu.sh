#!/usr/bin/env bash
# Runs on the 1-GPU machine with .bundle/ carried (issue 5): the
# copy-engine reduction's numerics with two ranks sharing the GPU
# (bench/train/ce-one-gpu.yaml). Writes $OUT/ce-one-gpu.txt (the console)
# and ce-one-gpu.jsonl.
set -uo pipefail
# shellcheck source=bench/train/env.sh
. bench/train/env.sh
train_env ce-one-gpu
"$R" run bench/train/ce-one-gpu.yaml --np 2 --timeout 300 --out "$w"/rm \
  > "$w"/ringmaster.txt 2> "$w"/ringmaster.err
rc=$?
{ echo "ringmaster run bench/train/ce-one-gpu.yaml --np 2: exit $rc"
  grep -E "^# (scaling|results|status)|FAILED|SKIPPED|loss" "$w"/ringmaster.txt
  python3 - "$w"/rm <<'PY'
import glob, json, sys
for path in glob.glob(sys.argv[1] + "/*/results.jsonl"):
    for line in open(path):
        r = json.loads(line)
        c, t = r["case"], r["case"]["train"]
        f = r.get("train", {})
        print("%-24s %-9s %-9s overlap=%-5s ranks %d  %-7s loss %s ref %s rel.err %s zero grads %s  %s" % (
            c["spec_name"], c["dtype"], t["schedule"], t["overlap"], r["nranks"], r["status"],
            f.get("loss_check"), f.get("loss_reference"), f.get("loss_rel_error"),
            f.get("grad_zero_fraction", 0.0), r.get("path", r.get("failure", {}).get("detail", ""))))
PY
  tail -5 "$w"/ringmaster.err; } > "$out"/ce-one-gpu.txt 2>&1
cat "$w"/rm/*/results.jsonl > "$out"/ce-one-gpu.jsonl 2>/dev/null
cat "$out"/ce-one-gpu.txt
