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
export LD_LIBRARY_PATH=$PWD/.bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
rounds=${ROUNDS:-2}
read -r -a variants <<< "${VARIANTS:-base new}"
ab=$(mktemp -d)
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit \
  --format=csv > "$ab/machine.txt" 2>&1
for i in $(seq "$rounds"); do
  for v in "${variants[@]}"; do
    s=.bundle/bin/ringmaster_decode_step_test
    [ "$v" != new ] && s=${s}_$v
    start=$SECONDS
    "$s" > "$ab/step-$v-$i.txt" 2>&1
    echo "step $v $i: exit $? ($((SECONDS - start)) s)" \
      "$(grep -h 'llama3_8b_l4 timeline' "$ab/step-$v-$i.txt")"
  done
done
for i in $(seq "$rounds"); do
  for v in "${variants[@]}"; do
    wk=.bundle/bin/ringmaster-worker
    [ "$v" != new ] && wk=${wk}-$v
    [ -x "$wk" ] || continue  # a build with a step test only
    start=$SECONDS
    .bundle/bin/ringmaster run bench/inference/b1.yaml --np 1 --timeout 200 \
      --worker "$wk" --out "$ab/rm-$v-$i" > "$ab/b1-$v-$i.txt" 2>&1
    echo "b1 $v $i: exit $? ($((SECONDS - start)) s)" \
      "$(grep -E '^ tp1' "$ab/b1-$v-$i.txt" | tail -1)"
    cat "$ab/rm-$v-$i"/*/results.jsonl > "$ab/b1-$v-$i.jsonl" 2>/dev/null
    rm -rf "$ab/rm-$v-$i"
  done
done
tar -C "$ab" -czf "$OUT/ab.tgz" .
rm -rf "$ab"
