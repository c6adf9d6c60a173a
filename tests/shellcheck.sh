#!/usr/bin/env bash
# Every shell script in the repository passes shellcheck.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v shellcheck >/dev/null || { echo "shellcheck is not installed (scripts/setup)" >&2; exit 1; }
# The scripts: *.sh, and files whose first line runs bash or sh (one
# python3 reads every tracked file's first line: processes per file cost
# seconds on CI's two cores).
mapfile -t scripts < <(
  { git ls-files -z 2>/dev/null ||
      find . -type f -not -path './build*' -not -path './.git/*' -print0; } |
    python3 -c '
import re, sys
shebang = re.compile(rb"^#!.*\b(bash|sh)$")
for f in sys.stdin.buffer.read().decode().split("\0"):
    if not f:
        continue
    if f.endswith(".sh"):
        print(f)
        continue
    try:
        with open(f, "rb") as h:
            first = h.readline().rstrip(b"\n")
    except OSError:
        continue
    if shebang.match(first):
        print(f)
')
echo "shellcheck: ${#scripts[@]} scripts"
shellcheck -x "${scripts[@]}"
