#!/usr/bin/env bash
# `ringmaster compare` against noise and a real slowdown (issue 9,
# done-when 2), on the host backend (tests/plans/compare.yaml, 2 ranks, 10
# metrics):
#  - 20 runs of the same plan, each compared with the other 19 as its
#    baseline (leave one out: a baseline spread over the same minutes sees
#    the machine's drift, as a CI history of runs does): "same" for >= 95%
#    of the metric comparisons;
#  - 3 interleaved A/B trials: 12 normal runs alternating with 12 runs
#    with every rank slowed by 10% (RINGMASTER_FAULT slow:factor=1.1); the
#    slowed runs compared with the normal ones get the overall verdict
#    "worse" (exit 1) every time. (This VM's speed drifts by several
#    percent within a minute: single runs far apart cannot resolve 10%,
#    interleaved repeats can, as any A/B benchmark on shared machines;
#    compare sees that the runs alternate and pairs each slowed run with
#    the normal run beside it, which cancels the drift.)
# Prints its figures as "figure" lines.
#   tests/report/compare.sh BIN_DIR
set -euo pipefail
bin=$(cd "${1:?the folder with the ringmaster binary}" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
plan="$root/tests/plans/compare.yaml"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
fail() { echo "FAIL: $*"; status=1; }
run() {  # run DIR [FAULT]
  RINGMASTER_FAULT=${2:-} "$bin/ringmaster" run "$plan" --np 2 --quiet \
    --out "$1" > /dev/null
}

for i in $(seq 1 20); do run "$work/runs/run$i"; done
same=0 total=0 overall_same=0
for i in $(seq 1 20); do
  rm -rf "$work/base"
  mkdir -p "$work/base"
  for j in $(seq 1 20); do
    [ "$j" -eq "$i" ] || cp -r "$work/runs/run$j" "$work/base/run$j"
  done
  "$bin/ringmaster" compare "$work/base" "$work/runs/run$i" --format json \
    > "$work/cmp$i.json" || true
  read -r s t o < <(python3 - "$work/cmp$i.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
m = c["metrics"]
print(sum(x["verdict"] == "same" for x in m), len(m),
      int(c["summary"]["verdict"] == "same"))
for x in m:
    if x["verdict"] != "same":
        print(f'  run: {x["verdict"]} {x["change"]:+.1%} p={x["p_value"]:.2g} '
              f'{x["key"]}', file=sys.stderr)
PY
  )
  same=$((same + s)) total=$((total + t)) overall_same=$((overall_same + o))
done
pct=$(python3 -c "print(f'{100 * $same / $total:.1f}')")
echo "figure compare_same_pct $pct ($same of $total metric comparisons, each of 20 runs against the other 19); overall same in $overall_same of 20"
python3 -c "import sys; sys.exit(0 if $same >= 0.95 * $total else 1)" ||
  fail "only $pct% of the comparisons of unchanged runs said same"

flagged=0
trials=3
for t in $(seq 1 $trials); do
  for j in $(seq 1 12); do
    run "$work/trial$t/base/run$j"
    run "$work/trial$t/slow/run$j" "slow:factor=1.1"
  done
  code=0
  "$bin/ringmaster" compare "$work/trial$t/base" "$work/trial$t/slow" \
    > "$work/slow$t.txt" || code=$?
  tail -2 "$work/slow$t.txt"
  grep -q "interleaved runs, paired trimmed t test" "$work/slow$t.txt" ||
    fail "trial $t: the interleaved runs were not paired"
  if [ "$code" -eq 1 ] && grep -q -- "-> worse$" "$work/slow$t.txt"; then
    flagged=$((flagged + 1))
  fi
done
echo "figure compare_slowdown_flagged $flagged of $trials trials (10% slower ranks)"
[ "$flagged" -eq "$trials" ] ||
  fail "a 10% slowdown went unflagged in $((trials - flagged)) trial(s)"
[ "$status" -eq 0 ] && echo "PASS: compare is quiet on noise and flags a 10% slowdown"
exit "$status"
