#!/usr/bin/env bash
export LD_LIBRARY_PATH=$PWD/.bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0
mkdir -p /tmp/ab-out; ab=/tmp/ab-out
for i in 1 2; do
  for v in base new; do
    s=.bundle/bin/ringmaster_decode_step_test; [ $v = base ] && s=${s}_base
    $s > $ab/step-$v-$i.txt 2>&1; echo "step $v $i: exit $? $(grep -h 'llama3_8b_l4 timeline' $ab/step-$v-$i.txt)"
  done
done
for i in 1 2; do
  for v in base new; do
    wk=.bundle/bin/ringmaster-worker; [ $v = base ] && wk=${wk}-base
    .bundle/bin/ringmaster run bench/inference/b1.yaml --np 1 --timeout 200 --worker $wk --out /tmp/ab-$v-$i > $ab/b1-$v-$i.txt 2>&1
    echo "b1 $v $i: exit $? $(grep -E '^ tp1' $ab/b1-$v-$i.txt | tail -1)"
    cat /tmp/ab-$v-$i/*/results.jsonl > $ab/b1-$v-$i.jsonl
  done
done
tar -C /tmp/ab-out -czf $OUT/ab.tgz .
