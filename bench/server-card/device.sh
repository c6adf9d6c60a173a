#!/usr/bin/env bash
# Runs on the 1xH200 machine with .bundle/ carried: `ringmaster run` with
# no plan (on one GPU the server card: which plan it chose, its wall time,
# the card), PyTorch's GEMM and pinned copy figures on the same GPU
# (peer.py), `ringmaster run plans/dp-scaling.yaml` (the GPU sizes; its
# 2-rank rungs SKIPPED), then summary.json.
# Writes $OUT/bench.tgz, console.txt and summary.json.
#   bash bench/server-card/device.sh
set -uo pipefail
# shellcheck source=bench/train/env.sh
. bench/train/env.sh
train_env server-card
t0=$(date +%s.%N)
"$R" run --out "$w"/rm > "$w"/card.txt 2>&1
rc=$?
t1=$(date +%s.%N)
wall=$(python3 -c "print($t1 - $t0)")
echo "ringmaster run (no plan): exit $rc in $wall s" | tee -a "$w"/console.txt
grep -E "^ringmaster: plan|^# server card|^# datasheet|^#figure|^ [a-z]|^# telemetry|^# LOW" \
  "$w"/card.txt | grep -v "^ringmaster: progress" >> "$w"/console.txt
cat "$w"/rm/*/results.jsonl > "$w"/ringmaster.jsonl 2>/dev/null
PYTHONUNBUFFERED=1 timeout 240 python3 bench/server-card/peer.py \
  --out "$w"/torch.json > "$w"/torch.txt 2>&1
echo "torch: exit $?" | tee -a "$w"/console.txt
cat "$w"/torch.txt >> "$w"/console.txt
"$R" run plans/dp-scaling.yaml --np 1 --timeout 300 --out "$w"/dp > "$w"/dp.txt 2>&1
dp=$?
echo "ringmaster run plans/dp-scaling.yaml --np 1: exit $dp" | tee -a "$w"/console.txt
grep -E "^# [a-z_]+: train|^ +1 |results|skipped|status|FAILED" "$w"/dp.txt >> "$w"/console.txt
python3 bench/server-card/summarize.py --ringmaster "$w"/ringmaster.jsonl \
  --console "$w"/card.txt --torch "$w"/torch.json --wall "$wall" \
  --dp-exit "$dp" --out "$w"/summary.json | tee -a "$w"/console.txt
rm -rf "$w"/rm "$w"/dp
tar -C "$w" -czf "$out/bench.tgz" .
cp "$w"/console.txt "$w"/summary.json "$out/" 2>/dev/null
