#!/usr/bin/env bash
# The HTML report in a real browser (issue 9, done-when 1): a host-backend
# run of tests/plans/report.yaml (collectives, a P2P matrix, copy and GEMM
# bars, a training ladder) rendered by `ringmaster report --html` and opened
# in headless Chromium. Passes when Chromium logged no console message, the
# page recorded no script error, and every plot drew the number of series
# it declares (the page's check reads the browser's layout: a series counts
# when its bounding box is not empty). Two sabotaged copies (one series
# removed, a script error added) must fail the same checks, so the checks
# can fail. The text, CSV and JSON Lines views are checked against the same
# results. A screenshot is kept under the build folder (artifacts/).
#   tests/report/check.sh BIN_DIR
# Exit 77 (skipped) when Chromium is not installed, unless
# RINGMASTER_REQUIRE_CHROMIUM=1 (CI sets it).
set -euo pipefail
bin=$(cd "${1:?the folder with the ringmaster binary}" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
artifacts="$bin/../artifacts"
browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
  if [ "${RINGMASTER_REQUIRE_CHROMIUM:-0}" = "1" ]; then
    echo "FAIL: chromium is not installed (scripts/setup installs it)"
    exit 1
  fi
  echo "SKIP: chromium is not installed"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
fail() { echo "FAIL: $*"; status=1; }

"$bin/ringmaster" run "$root/tests/plans/report.yaml" --np 4 --quiet \
  --out "$work/out" > "$work/run.txt"
"$bin/ringmaster" report "$work/out" --html "$work/report.html" \
  --topology "$root/topologies/hgx-h200-8.yaml" \
  --topology "$root/topologies/h100-pcie-8.yaml"

# Text, CSV and JSON Lines views of the same results.
"$bin/ringmaster" report "$work/out" --format jsonl > "$work/all.jsonl"
"$bin/ringmaster" report "$work/out" --format csv > "$work/all.csv"
"$bin/ringmaster" report "$work/out" > "$work/all.txt"
stored=$(find "$work/out" -name results.jsonl -exec cat {} + | grep -c .)
[ "$(grep -c . "$work/all.jsonl")" -eq "$stored" ] ||
  fail "jsonl view has $(grep -c . "$work/all.jsonl") results, stored $stored"
[ "$(grep -c . "$work/all.csv")" -eq $((stored + 1)) ] ||
  fail "csv view is not a header plus $stored rows"
grep -q "^# scaling (weak" "$work/all.txt" || fail "text view has no scaling table"
grep -q "^# status: SUCCEEDED" "$work/all.txt" || fail "text view has no job status"

# Runs the page in Chromium; prints "plots plots_ok errors console_lines".
inspect() {
  local page=$1
  "$browser" --headless --no-sandbox --disable-gpu --enable-logging=stderr \
    --v=0 --virtual-time-budget=3000 --dump-dom "file://$page" \
    > "$page.dom" 2> "$page.log" || true
  python3 - "$page" <<'PY'
import re, sys
page = sys.argv[1]
dom = open(page + ".dom", encoding="utf-8").read()
body = re.search(r"<body([^>]*)>", dom)
attrs = dict(re.findall(r'([\w-]+)="([^"]*)"', body.group(1) if body else ""))
figures = re.findall(r'<figure class="plot" data-expected-series="(\d+)"'
                     r'(?: data-drawn-series="(\d+)")?', dom)
console = [l for l in open(page + ".log", encoding="utf-8", errors="replace")
           if ":CONSOLE" in l]
for l in console:
    print("console:", l.strip(), file=sys.stderr)
for i, (want, got) in enumerate(figures):
    if want != got:
        print(f"figure {i}: expected {want} series, drew {got or 'nothing'}",
              file=sys.stderr)
print(attrs.get("data-plots", "0"), attrs.get("data-plots-ok", "0"),
      1 if attrs.get("data-errors") else 0, len(console), len(figures))
PY
}

read -r plots ok errors console figures < <(inspect "$work/report.html")
echo "report: $figures figures, the page checked $plots, $ok drew every series;" \
  "script errors $errors, console lines $console"
[ "$figures" -ge 12 ] || fail "expected at least 12 plots, found $figures"
[ "$plots" -eq "$figures" ] || fail "the page checked $plots of $figures plots"
[ "$ok" -eq "$plots" ] || fail "$((plots - ok)) plot(s) drew a different number of series"
[ "$errors" -eq 0 ] || fail "the page recorded script errors"
[ "$console" -eq 0 ] || fail "Chromium logged $console console message(s)"
for kind in "class=\"plot line\"" "class=\"plot heatmap\"" "class=\"plot bar\"" \
    "predicted (hgx-h200-8" "predicted (h100-pcie-8" "scaling efficiency" \
    "step breakdown" "telemetry: " \
    "pair tests over"; do
  grep -q "$kind" "$work/report.html" || fail "no $kind in the report"
done

# The checks can fail: one series removed, then a script error.
python3 - "$work/report.html" "$work/missing.html" <<'PY'
import sys
html = open(sys.argv[1], encoding="utf-8").read()
i = html.index('<g class="series"')
j = html.index("</g>", i) + len("</g>")
open(sys.argv[2], "w", encoding="utf-8").write(html[:i] + html[j:])
PY
read -r plots ok _ _ _ < <(inspect "$work/missing.html" 2>/dev/null)
[ "$ok" -eq $((plots - 1)) ] ||
  fail "a removed series went unnoticed ($ok of $plots plots ok)"
sed 's|</body>|<script>no_such_function();</script></body>|' \
  "$work/report.html" > "$work/broken.html"
read -r _ _ errors console _ < <(inspect "$work/broken.html" 2>/dev/null)
if [ "$errors" -ne 1 ] || [ "$console" -lt 1 ]; then
  fail "a script error went unnoticed (errors $errors, console $console)"
fi

mkdir -p "$artifacts"
cp "$work/report.html" "$artifacts/report.html"
"$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars \
  --window-size=1200,3000 --screenshot="$artifacts/report.png" \
  "file://$artifacts/report.html" > /dev/null 2>&1 || true
[ -s "$artifacts/report.png" ] || fail "no screenshot"
echo "screenshot: $artifacts/report.png"
[ "$status" -eq 0 ] && echo "PASS: the report renders every plot with its series"
exit "$status"
