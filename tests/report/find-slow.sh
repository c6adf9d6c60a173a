#!/usr/bin/env bash
# The bad-node finder (issue 9, done-when 3): 8 host ranks, one of them
# slowed 4x by the fault hook (RINGMASTER_FAULT slow:rank=R:factor=4), in
# turn at every position. Each run must name exactly that rank, confirmed,
# using at most 7 pair tests plus the confirmation, and fail the job
# (below_floor); a run without a slow rank must confirm nobody and succeed
# (a suspect that its re-test refutes, a noisy split test on 2 shared
# cores, is reported NOT confirmed and fails nothing).
#   tests/report/find-slow.sh BIN_DIR
set -euo pipefail
bin=$(cd "${1:?the folder with the ringmaster binary}" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
fail() { echo "FAIL: $*"; status=1; }
# Prints "slow_members confirmed pair_runs tests status" of a run's result.
figures() {
  python3 - "$1" <<'PY'
import glob, json, sys
r = json.loads(open(glob.glob(sys.argv[1] + "/*/results.jsonl")[0]).readline())
f = r["find_slow"]
print(",".join(map(str, f.get("slow", []))) or "-",
      ",".join("1" if c else "0" for c in f.get("confirmed", [])) or "-",
      f.get("pair_runs", len(f.get("tests", []))), len(f.get("tests", [])),
      r["status"])
print(f["verdict"], file=sys.stderr)
PY
}
named=0
for rank in 0 1 2 3 4 5 6 7; do
  code=0
  RINGMASTER_FAULT="slow:rank=$rank:factor=4" "$bin/ringmaster" run \
    "$root/tests/plans/find-slow.yaml" --np 8 --quiet --out "$work/r$rank" \
    > /dev/null 2>&1 || code=$?
  read -r slow confirmed runs tests result < <(figures "$work/r$rank")
  echo "slow rank $rank: named $slow (confirmed $confirmed) after $runs pair tests + $((tests - runs)) confirmation; job exit $code"
  if [ "$slow" = "$rank" ] && [ "$confirmed" = "1" ] && [ "$runs" -le 7 ] &&
      [ "$result" = "FAILED" ] && [ "$code" -eq 1 ]; then
    named=$((named + 1))
  else
    fail "rank $rank: named '$slow' confirmed '$confirmed' in $runs tests, result $result, exit $code"
  fi
done
code=0
"$bin/ringmaster" run "$root/tests/plans/find-slow.yaml" --np 8 --quiet \
  --out "$work/none" > /dev/null 2>&1 || code=$?
read -r slow confirmed runs _ result < <(figures "$work/none")
echo "no slow rank: named $slow (confirmed $confirmed) after $runs pair tests; result $result, job exit $code"
if [[ $confirmed == *1* ]] || [ "$result" != "OK" ] || [ "$code" -ne 0 ]; then
  fail "confirmed '$slow' ($confirmed) with no slow rank: result $result, exit $code"
fi
echo "figure find_slow_named $named of 8 (at most 7 pair tests plus 1 confirmation each)"
[ "$status" -eq 0 ] && echo "PASS: the bad-node finder names the slow rank"
exit "$status"
