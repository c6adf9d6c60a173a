#!/usr/bin/env bash
# Runs on the 1xH200 machine with .bundle/ carried: the fused attention
# kernels against float64 (ringmaster_flash_attention_test), Ringmaster's
# GPU transformer plan (bench/transformer/plan.yaml) with
# RINGMASTER_PHASE_TIMES set (where each step's time goes; events between
# the products, so this run is a diagnosis, not a figure), the same
# without events with the fused attention kernels forced
# (RINGMASTER_ATTENTION=fused), PyTorch's step on the same shape eager and
# compiled (peer.py), then Ringmaster again without the events: the
# summary's figures are that run's against PyTorch's.
# Writes $OUT/bench.tgz, console.txt and summary.json.
#   bash bench/transformer/device.sh
set -uo pipefail
# shellcheck source=bench/train/env.sh
. bench/train/env.sh
train_env transformer
run() {  # name [phases [attention]]: RINGMASTER_PHASE_TIMES, RINGMASTER_ATTENTION
  RINGMASTER_PHASE_TIMES=${2:-} RINGMASTER_ATTENTION=${3:-} "$R" run bench/transformer/plan.yaml --np 1 --timeout 300 --out "$w"/rm-"$1" \
    > "$w"/"$1".txt 2> "$w"/"$1".err
  echo "$1: exit $?" | tee -a "$w"/console.txt
  cat "$w"/rm-"$1"/*/results.jsonl > "$w"/"$1".jsonl 2>/dev/null
  {
    grep -E "^ (dp|tp)|FAILED|SKIPPED|skipped" "$w"/"$1".txt
    tail -3 "$w"/"$1".err
    grep -rh "phase times" "$w"/rm-"$1" "$w"/"$1".err | tail -24
  } >> "$w"/console.txt
}
if [ -x .bundle/bin/ringmaster_flash_attention_test ]; then
  .bundle/bin/ringmaster_flash_attention_test > "$w"/flash-test.txt 2>&1
  echo "flash attention test: exit $?" | tee -a "$w"/console.txt
  grep -E "FAILED|Failure|Expected|Which is|PASSED|SKIPPED" "$w"/flash-test.txt | head -20 >> "$w"/console.txt
fi
run ringmaster 1
run fused "" fused
PYTHONUNBUFFERED=1 python3 bench/transformer/peer.py --out "$w"/torch.json \
  > "$w"/torch.txt 2>&1
echo "torch: exit $?" | tee -a "$w"/console.txt
grep -E "median|Error|error" "$w"/torch.txt | tail -5 >> "$w"/console.txt
run ringmaster2
python3 bench/transformer/summarize.py --ringmaster "$w"/ringmaster2.jsonl \
  --torch "$w"/torch.json --fused "$w"/fused.jsonl --out "$w"/summary.json \
  | tee -a "$w"/console.txt
rm -rf "$w"/rm-*
tar -C "$w" -czf "$out/bench.tgz" .
cp "$w"/console.txt "$w"/summary.json "$out/" 2>/dev/null
