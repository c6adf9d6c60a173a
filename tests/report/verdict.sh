#!/usr/bin/env bash
# References and rules (issue 9): `ringmaster verdict` on host-backend runs
# of tests/plans/verdict.yaml (4 ranks, 5 rounds each: the rules judge each
# subject's median over the rounds) with rules/host-fleet.yaml.
#  1. A normal run passes every check (exit 0).
#  2. With rank 2 slowed 3x (RINGMASTER_FAULT slow:rank=2:factor=3) the
#     verdict fails (exit 1): rank 2's GEMM and copy fail the fleet rule,
#     only pairs with rank 2 fail, rank 2 is the one suspect, and its node
#     fails; the JSON view says the same.
#  3. Against the normal run as a baseline (baseline_within 40% on the
#     GEMMs: a CI machine ran every rank's GEMM 32% slower in one run than
#     in the run just before it; rank 2 slowed 3x is 67% under), the slow
#     run fails rank 2's check and nothing else.
#  4. A rules file with a mistake is refused with file:line and exit 2.
# One round of each once failed on CI: a normal run's GEMM 35% under the
# fleet on one rank (one noisy stretch covers one rank's whole case), and
# the slow run's other ranks 32% under their baseline. Rounds interleave
# the ranks' cases in time, so one noisy stretch moves one of five values
# per subject (beside a process busy half the time in 20-200 ms bursts,
# 5 rounds passed 3 of 3 times; 3 rounds once failed 1 of 4).
#   tests/report/verdict.sh BIN_DIR
set -euo pipefail
bin=$(cd "${1:?the folder with the ringmaster binary}" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
fail() { echo "FAIL: $*"; status=1; }
rules=$root/rules/host-fleet.yaml
run() {  # out [fault]
  RINGMASTER_FAULT=${2:-} "$bin/ringmaster" run "$root/tests/plans/verdict.yaml" \
    --np 4 --rounds 5 --quiet --out "$work/$1" > "$work/$1.log" 2>&1 ||
    { cat "$work/$1.log"; fail "run $1 did not succeed"; }
}
run normal
run slow "slow:rank=2:factor=3"

code=0
"$bin/ringmaster" verdict "$work/normal" --rules "$rules" > "$work/v-normal.txt" || code=$?
grep "verdict:" "$work/v-normal.txt"
[ "$code" -eq 0 ] || { cat "$work/v-normal.txt"; fail "normal run: exit $code, expected 0"; }
normal_checks=$(sed -n 's/.* \([0-9]*\) check(s).*/\1/p' "$work/v-normal.txt" | head -1)

code=0
"$bin/ringmaster" verdict "$work/slow" --rules "$rules" > "$work/v-slow.txt" || code=$?
cat "$work/v-slow.txt"
[ "$code" -eq 1 ] || fail "slow run: exit $code, expected 1"
grep -q "^ rank 2 (.*) *FAIL" "$work/v-slow.txt" || fail "rank 2 not failed"
for r in 0 1 3; do
  grep -q "^ rank $r (.*) *PASS" "$work/v-slow.txt" || fail "rank $r not passed"
done
grep -q "^# suspect: rank 2 " "$work/v-slow.txt" || fail "rank 2 is not the suspect"
[ "$(grep -c '^# suspect:' "$work/v-slow.txt")" -eq 1 ] || fail "more than one suspect"
bad_pairs=$(grep -E "^ pair [0-9]->[0-9] .*FAIL" "$work/v-slow.txt" | grep -vc "pair 2->\|->2 " || true)
[ "$bad_pairs" -eq 0 ] || fail "$bad_pairs failed pair(s) without rank 2"
"$bin/ringmaster" verdict "$work/slow" --rules "$rules" --format json > "$work/v-slow.json" || true
python3 - "$work/v-slow.json" <<'PY' || fail "JSON view"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["pass"] is False, d["pass"]
gpus = {f["subject"] for f in d["findings"] if f["kind"] == "gpu" and not f["pass"]}
assert gpus == {"rank 2"}, gpus
print("json: %d checks, %d failed, failed GPUs %s" % (d["checks"], d["failed"], sorted(gpus)))
PY

cat > "$work/baseline.yaml" <<'YAML'
name: against last run
rules:
  - {name: same-as-before, match: {bench: gemm}, baseline_within: 40%}
YAML
code=0
"$bin/ringmaster" verdict "$work/slow" --rules "$work/baseline.yaml" \
  --baseline "$work/normal" > "$work/v-base.txt" || code=$?
grep -E "^ FAIL|verdict:" "$work/v-base.txt"
[ "$code" -eq 1 ] || fail "baseline: exit $code, expected 1"
failed_subjects=$(grep "^ FAIL" "$work/v-base.txt" | awk '{print $2, $3}' | sort -u)
[ "$failed_subjects" = "rank 2" ] || fail "baseline: failed subjects '$failed_subjects', expected rank 2 only"
code=0
"$bin/ringmaster" verdict "$work/slow" --rules "$work/baseline.yaml" > /dev/null 2>&1 || code=$?
[ "$code" -eq 2 ] || fail "baseline rule without --baseline: exit $code, expected 2"

printf 'rules:\n  - {name: a, match: {bench: gemm}, fleet_within: lots}\n' > "$work/bad.yaml"
code=0
msg=$("$bin/ringmaster" verdict "$work/normal" --rules "$work/bad.yaml" 2>&1) || code=$?
echo "$msg"
[ "$code" -eq 2 ] || fail "bad rules: exit $code, expected 2"
[[ $msg == *"bad.yaml:2: rules[0].fleet_within: expected a share"* ]] || fail "bad rules message"

slow_failed=$(grep -c "^ FAIL" "$work/v-slow.txt" || true)
echo "FIGURE Verdict normal run: $normal_checks checks, all passed; rank 2 slowed 3x: $slow_failed failed checks, all about rank 2, the one suspect; baseline rule: rank 2 only; bad rules file: exit 2 with file:line => $([ $status -eq 0 ] && echo PASS || echo FAIL)"
exit $status
