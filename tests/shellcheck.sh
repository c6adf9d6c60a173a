#!/usr/bin/env bash
# Every shell script in the repository passes shellcheck.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v shellcheck >/dev/null || { echo "shellcheck is not installed (scripts/setup)" >&2; exit 1; }
scripts=()
while IFS= read -r f; do
  if [[ $f == *.sh ]] || head -1 "$f" 2>/dev/null | grep -qE '^#!.*\b(bash|sh)$'; then
    scripts+=("$f")
  fi
done < <(git ls-files 2>/dev/null || find . -type f -not -path './build*' -not -path './.git/*')
echo "shellcheck: ${#scripts[@]} scripts"
shellcheck -x "${scripts[@]}"
