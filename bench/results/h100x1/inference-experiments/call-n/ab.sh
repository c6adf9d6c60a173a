#!/usr/bin/env bash
# The A/B of calls n-p (run from the repository root with .bundle/ carried,
# after bench/inference/device.sh): the step test of 48a8a73 ("base") and
# of the bundle's build ("new") twice in turn, then b1.yaml through each
# build's worker twice in turn. Writes $OUT/ab.tgz (call n's version wrote
# into $OUT/ab/ instead).
export LD_LIBRARY_PATH=$PWD/.bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
ab=/tmp/ab-out
mkdir -p "$ab"
for i in 1 2; do
  for v in base new; do
    s=.bundle/bin/ringmaster_decode_step_test
    [ "$v" = base ] && s=${s}_base
    "$s" > "$ab/step-$v-$i.txt" 2>&1
    echo "step $v $i: exit $? $(grep -h 'llama3_8b_l4 timeline' "$ab/step-$v-$i.txt")"
  done
done
for i in 1 2; do
  for v in base new; do
    wk=.bundle/bin/ringmaster-worker
    [ "$v" = base ] && wk=${wk}-base
    .bundle/bin/ringmaster run bench/inference/b1.yaml --np 1 --timeout 200 \
      --worker "$wk" --out "/tmp/ab-$v-$i" > "$ab/b1-$v-$i.txt" 2>&1
    echo "b1 $v $i: exit $? $(grep -E '^ tp1' "$ab/b1-$v-$i.txt" | tail -1)"
    cat "/tmp/ab-$v-$i"/*/results.jsonl > "$ab/b1-$v-$i.jsonl"
  done
done
tar -C "$ab" -czf "$OUT/ab.tgz" .
