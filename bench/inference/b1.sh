#!/usr/bin/env bash
# The batch-1 figures of bench/inference/device.sh in a short device call
# (one H200, .bundle/ carried): the fused decode step's GPU test (its phase
# timeline), read_pattern, bench/inference/b1.yaml with the fused step and
# with RINGMASTER_DECODE_FUSED=0, PyTorch's decode at batch 1 (peer.py),
# then summary.json. Writes $OUT/console.txt, summary.json and bench.tgz.
#   bash bench/inference/b1.sh
set -uo pipefail
# shellcheck source=bench/train/env.sh
. bench/train/env.sh
train_env inference-b1
.bundle/bin/ringmaster_decode_step_test > "$w"/decode-step-test.txt 2>&1
echo "decode step test: exit $?" | tee -a "$w"/console.txt
grep -E "FAILED|PASSED|timeline|rel error" "$w"/decode-step-test.txt \
  >> "$w"/console.txt
.bundle/bin/read_pattern > "$w"/read-pattern.txt 2>&1
echo "read_pattern: exit $?" | tee -a "$w"/console.txt
cat "$w"/read-pattern.txt >> "$w"/console.txt
for v in 1 0; do
  RINGMASTER_DECODE_FUSED=$v "$R" run bench/inference/b1.yaml --np 1 \
    --timeout 200 --out "$w/rm-$v" > "$w/ringmaster-$v.txt" 2>&1
  echo "ringmaster, RINGMASTER_DECODE_FUSED=$v: exit $?" | tee -a "$w"/console.txt
  cat "$w/rm-$v"/*/results.jsonl > "$w/ringmaster-$v.jsonl" 2>/dev/null
  grep -E "^ (tp|[0-9])|FAILED" "$w/ringmaster-$v.txt" >> "$w"/console.txt
done
PYTHONUNBUFFERED=1 timeout 300 python3 bench/inference/peer.py --layers 4 \
  --prompt 1024 --generate 256 --batch 1 --repeats 2 --out "$w"/torch.json \
  > "$w"/torch.txt 2>&1
echo "torch: exit $?" | tee -a "$w"/console.txt
grep -E "batch|Error|error" "$w"/torch.txt | tail -4 >> "$w"/console.txt
python3 bench/inference/summarize.py --ringmaster "$w"/ringmaster-1.jsonl \
  --torch "$w"/torch.json --variant unfused="$w"/ringmaster-0.jsonl \
  --read-pattern "$w"/read-pattern.txt --out "$w"/summary.json |
  tee -a "$w"/console.txt
rm -rf "$w"/rm-*
tar -C "$w" -czf "$out/bench.tgz" .
cp "$w"/console.txt "$w"/summary.json "$out/" 2>/dev/null
