#!/usr/bin/env bash
# A/B of builds of the fused decode step in one device call (run from the
# repository root with .bundle/ carried): build V's step test and worker
# are .bundle/bin/ringmaster_decode_step_test_V and ringmaster-worker-V,
# build "new" is the bundle's own (no suffix; a build without a worker
# runs the step test only). ROUNDS (default 2) rounds
# of the step test (its phase timeline) through each of VARIANTS (default
# "base new") in turn, then as many rounds of bench/inference/b1.yaml.
# Prints a line per run; writes $OUT/ab.tgz.
#   bash bench/inference/ab.sh
#   VARIANTS="base new c4" ROUNDS=3 bash bench/inference/ab.sh
set -uo pipefail
# shellcheck source=bench/train/env.sh
. bench/train/env.sh
train_env inference-ab
rounds=${ROUNDS:-2}
read -r -a variants <<< "${VARIANTS:-base new}"
for i in $(seq "$rounds"); do
  for v in "${variants[@]}"; do
    s=.bundle/bin/ringmaster_decode_step_test
    [ "$v" != new ] && s=${s}_$v
    start=$SECONDS
    "$s" > "$w/step-$v-$i.txt" 2>&1
    echo "step $v $i: exit $? ($((SECONDS - start)) s)" \
      "$(grep -h 'llama3_8b_l4 timeline' "$w/step-$v-$i.txt")"
  done
done
for i in $(seq "$rounds"); do
  for v in "${variants[@]}"; do
    wk=.bundle/bin/ringmaster-worker
    [ "$v" != new ] && wk=${wk}-$v
    [ -x "$wk" ] || continue  # a build with a step test only
    start=$SECONDS
    "$R" run bench/inference/b1.yaml --np 1 --timeout 200 \
      --worker "$wk" --out "$w/rm-$v-$i" > "$w/b1-$v-$i.txt" 2>&1
    echo "b1 $v $i: exit $? ($((SECONDS - start)) s)" \
      "$(grep -E '^ tp1' "$w/b1-$v-$i.txt" | tail -1)"
    cat "$w/rm-$v-$i"/*/results.jsonl > "$w/b1-$v-$i.jsonl" 2>/dev/null
    rm -rf "$w/rm-$v-$i"
  done
done
tar -C "$w" -czf "$out/ab.tgz" .
