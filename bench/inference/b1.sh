#!/usr/bin/env bash
# The batch-1 figures of bench/inference/device.sh in a short device call
# (one H200, .bundle/ carried): the fused decode step's GPU tests (its
# phase timeline; every .bundle/bin/ringmaster_decode_step_test* binary, so
# a build with another ring depth runs beside it), the engine's fused-step
# tests, bench/inference/b1.yaml with RINGMASTER_DECODE_$SETTING=1 and =0
# (SETTING: FUSED by default, or FOLD, PDL, GEMV) ROUNDS times in turn,
# then, unless PEER=0 (the shortest call), read_pattern and PyTorch's decode
# at batch 1 (peer.py); summary.json last. Writes $OUT/console.txt,
# summary.json and bench.tgz.
#   bash bench/inference/b1.sh
#   SETTING=FOLD ROUNDS=2 PEER=0 bash bench/inference/b1.sh
set -uo pipefail
# shellcheck source=bench/train/env.sh
. bench/train/env.sh
train_env inference-b1
setting=${SETTING:-FUSED}
rounds=${ROUNDS:-1}
for b in .bundle/bin/ringmaster_decode_step_test*; do
  name=$(basename "$b")
  "$b" > "$w/$name.txt" 2>&1
  echo "$name: exit $?" | tee -a "$w"/console.txt
  grep -E "FAILED|PASSED|timeline|rel error" "$w/$name.txt" >> "$w"/console.txt
done
.bundle/bin/ringmaster_cuda_inference_test --gtest_filter='*Fused*' \
  > "$w"/engine-fused-test.txt 2>&1
echo "engine fused-step tests: exit $?" | tee -a "$w"/console.txt
variants=()
for i in $(seq "$rounds"); do
  for v in 1 0; do
    run=$v-$i
    env "RINGMASTER_DECODE_$setting=$v" "$R" run bench/inference/b1.yaml \
      --np 1 --timeout 200 --out "$w/rm-$run" > "$w/ringmaster-$run.txt" 2>&1
    echo "ringmaster, RINGMASTER_DECODE_$setting=$v (round $i): exit $?" \
      | tee -a "$w"/console.txt
    cat "$w/rm-$run"/*/results.jsonl > "$w/ringmaster-$run.jsonl" 2>/dev/null
    grep -E "^ (tp|[0-9])|FAILED" "$w/ringmaster-$run.txt" >> "$w"/console.txt
    [ "$run" != 1-1 ] && variants+=(--variant "${setting,,}${v}_r$i=$w/ringmaster-$run.jsonl")
  done
done
extra=()
if [ "${PEER:-1}" != 0 ]; then
  .bundle/bin/read_pattern > "$w"/read-pattern.txt 2>&1
  echo "read_pattern: exit $?" | tee -a "$w"/console.txt
  cat "$w"/read-pattern.txt >> "$w"/console.txt
  PYTHONUNBUFFERED=1 timeout 300 python3 bench/inference/peer.py --layers 4 \
    --prompt 1024 --generate 256 --batch 1 --repeats 2 --out "$w"/torch.json \
    > "$w"/torch.txt 2>&1
  echo "torch: exit $?" | tee -a "$w"/console.txt
  grep -E "batch|Error|error" "$w"/torch.txt | tail -4 >> "$w"/console.txt
  extra=(--torch "$w"/torch.json --read-pattern "$w"/read-pattern.txt)
fi
# The first round's RINGMASTER_DECODE_$SETTING=1 run is the summary's
# baseline; every other run is a variant (key suffix e.g. _fold0_r1).
python3 bench/inference/summarize.py --ringmaster "$w"/ringmaster-1-1.jsonl \
  "${extra[@]}" "${variants[@]}" --out "$w"/summary.json |
  tee -a "$w"/console.txt
rm -rf "$w"/rm-*
tar -C "$w" -czf "$out/bench.tgz" .
cp "$w"/console.txt "$w"/summary.json "$out/" 2>/dev/null
