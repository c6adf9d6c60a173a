#!/usr/bin/env bash
# README.md's layout table against the tree: every top-level folder that git
# tracks is in the table, and every folder the table names exists.
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"
table=$(sed -n '/^## Layout$/,/^## /p' README.md | grep '^| `')
# The backticks are the table's, not a command: single quotes on purpose.
# shellcheck disable=SC2016
named=$(printf '%s\n' "$table" | cut -d'|' -f2 | grep -o '`[^`]*`' | tr -d '`' |
  sed 's#/$##' | sort -u)
fail=0
while read -r dir; do
  [ -z "$dir" ] && continue
  if ! printf '%s\n' "$named" | cut -d/ -f1 | grep -qx "$dir"; then
    echo "README layout: folder $dir/ is not in the table"
    fail=1
  fi
done < <(git ls-files | grep / | cut -d/ -f1 | grep -v '^\.' | sort -u)
while read -r path; do
  [ -z "$path" ] && continue
  if [ ! -e "$path" ]; then
    echo "README layout: the table names $path, which does not exist"
    fail=1
  fi
done <<< "$named"
[ "$fail" -eq 0 ] && echo "README layout: $(printf '%s\n' "$named" | wc -l) entries match the tree"
exit "$fail"
