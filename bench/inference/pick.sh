#!/usr/bin/env bash
# For calls that ask for an H200 and may get an H100 (run from the
# repository root with .bundle/ carried, builds named as ab.sh takes them).
# On an H200: ab.sh over VARIANTS (two rounds), then b1.sh (with the peer;
# B1ROUNDS rounds, at most B1LIMIT seconds) with the worker of the build
# whose b1.yaml TPOT p50 was lowest on average (of those whose step test
# passed) copied over the bundle's own; the build is printed and written
# to $OUT/best.txt. With THEN=device, device.sh (at most DEVICE_LIMIT
# seconds) runs in place of b1.sh, with the picked build's step test
# copied over the bundle's as well: every key of issue 30 for that build.
# Elsewhere ab.sh over OTHER (three rounds) where it is set, else nothing.
#   OTHER="new a" VARIANTS="new a b" bash bench/inference/pick.sh
#   THEN=device VARIANTS="new a b" bash bench/inference/pick.sh
set -uo pipefail
name=$(nvidia-smi --query-gpu=name --format=csv,noheader)
echo "$name"
case "$name" in
  *H200*) ;;
  *)
    # Elsewhere only OTHER's A/B, if given.
    [ -n "${OTHER:-}" ] && VARIANTS=$OTHER ROUNDS=3 bash bench/inference/ab.sh 2>&1 | tee "$OUT"/ab-console.txt
    exit 0
    ;;
esac
VARIANTS=${VARIANTS:-new} ROUNDS=2 bash bench/inference/ab.sh 2>&1 | tee "$OUT"/ab-console.txt
# ab.sh's "b1 V i: exit 0 (...) <b1.yaml table row>": the row's TPOT p50 is
# the tenth field from its end.
# A build whose step test failed in any round (a wrong product) is not
# picked, however fast.
best=$(awk '/^step / && !/exit 0/{bad[$2]=1} /^b1 .*exit 0/{v=$2; t=$(NF-9); s[v]+=t; n[v]++} END {m=1e9; for (v in s) if (!(v in bad) && s[v]/n[v] < m) {m=s[v]/n[v]; b=v}; print b}' "$OUT"/ab-console.txt)
echo "best: $best"
echo "$best" > "$OUT"/best.txt
if [ -n "$best" ] && [ "$best" != new ]; then
  cp .bundle/bin/ringmaster-worker-"$best" .bundle/bin/ringmaster-worker
  if [ "${THEN:-}" = device ]; then
    cp .bundle/bin/ringmaster_decode_step_test_"$best" \
      .bundle/bin/ringmaster_decode_step_test
  fi
fi
if [ "${THEN:-}" = device ]; then
  timeout "${DEVICE_LIMIT:-450}" bash bench/inference/device.sh
  exit $?
fi
SETTING=FOLD ROUNDS=${B1ROUNDS:-2} timeout "${B1LIMIT:-400}" bash bench/inference/b1.sh > "$OUT"/b1-out.txt 2>&1
tail -25 "$OUT"/b1-out.txt
