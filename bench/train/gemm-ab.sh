#!/usr/bin/env bash
# Runs on the 1-GPU machine with .bundle/ carried (issue 5): the cuBLASLt
# algorithm A/B (bench/train/gemm-ab.yaml) three times, interleaved with
# PyTorch's 1-GPU step on the same shapes, so the power cap's drift lands on
# both sides. Writes $OUT/gemm-ab.tgz, console.txt and summary.json.
set -uo pipefail
# shellcheck source=bench/train/env.sh
. bench/train/env.sh
train_env gemm-ab
for i in 1 2 3; do
  "$R" run bench/train/gemm-ab.yaml --np 1 --timeout 200 --out "$w"/rm$i > "$w"/ringmaster$i.txt 2> "$w"/ringmaster$i.err
  echo "ringmaster run $i: exit $?" | tee -a "$w"/console.txt
  cat "$w"/rm$i/*/results.jsonl > "$w"/ringmaster$i.jsonl 2>/dev/null
  python3 bench/train/torch_ddp.py --out "$w"/torch$i.json > "$w"/torch$i.txt 2>&1
  echo "torch run $i: exit $?" | tee -a "$w"/console.txt
done
python3 - "$w" <<'PY' | tee -a "$w"/console.txt
import json, statistics, sys
w = sys.argv[1]
steps, paths, torch = {}, {}, {}
for i in (1, 2, 3):
    for line in open("%s/ringmaster%d.jsonl" % (w, i)):
        r = json.loads(line)
        if r["status"] == "OK":
            name = r["case"]["spec_name"].replace("_2", "")  # A B B A
            steps.setdefault(name, []).append(r["stats"]["median_s"] * 1e3)
            paths.setdefault(name, []).append(r.get("path", ""))
    for r in json.load(open("%s/torch%d.json" % (w, i)))["results"]:
        torch.setdefault("L%d_H%d_B%d" % (r["L"], r["H"], r["B"]), []).append(r["step_s"] * 1e3)
s = {}
for name, v in sorted(steps.items()):
    shape = name.rsplit("_", 1)[0]
    t = torch.get(shape, [])
    print("%-28s runs %s ms; median %.3f; torch %s ms (median %.3f); ratio %.4f" % (
        name, ["%.3f" % x for x in v], statistics.median(v), ["%.3f" % x for x in t],
        statistics.median(t), statistics.median(v) / statistics.median(t)))
    print("  %s" % paths[name][0])
    s["dp_%s_step1_ms" % name] = round(statistics.median(v), 3)
    s["dp_%s_step1_ratio_vs_torch" % name] = round(statistics.median(v) / statistics.median(t), 4)
    s["dp_%s_torch_step1_ms" % shape] = round(statistics.median(t), 3)
json.dump(s, open("%s/summary.json" % w, "w"), indent=1, sort_keys=True)
PY
rm -rf "$w"/rm?
tar -C "$w" -czf "$out/gemm-ab.tgz" .
cp "$w"/console.txt "$w"/summary.json "$out/" 2>/dev/null
