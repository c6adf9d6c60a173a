#!/usr/bin/env bash
# The user documentation stands alone and reads as documentation:
#   - README.md and docs/ point nowhere outside the repository (no shared/);
#   - the README's first paragraph names the launchers that exist (none is
#     "planned");
#   - docs/ holds no development log: no dates of changes, no issue numbers;
#   - prices: some shipped topology sets price_per_gpu_hour and docs/model.md
#     says what it is;
#   - scripts/setup installs what building and running need, and only
#     --tests adds the test tools (Slurm daemons, munge, nftables, Chromium,
#     clang, GoogleTest).
#   tests/docs_check.sh SOURCE_DIR
set -euo pipefail
root=${1:?the source folder}
cd "$root"
status=0
fail() {
  echo "docs_check: $*" >&2
  status=1
}

if grep -n -E '(\.\./)?shared/(RELIABILITY|anchors|ARCHITECTURE|STYLE|GPU-MACHINE|BUILD-NOTES)|\.\./shared' README.md docs/*.md; then
  fail "README.md or docs/ point into shared/, which is not in the repository"
fi
first_paragraph=$(awk 'NR > 2 && /^$/ { exit } NR > 2 { print }' README.md)
if grep -q -i "planned" <<< "$first_paragraph"; then
  fail "the README's first paragraph calls something planned: $first_paragraph"
fi
for launcher in mpirun Slurm Kubernetes; do
  grep -q "$launcher" <<< "$first_paragraph" || fail "the README's first paragraph does not name $launcher"
done
if grep -n -E '\b20[0-9]{2}-[01][0-9]-[0-3][0-9]\b' docs/*.md; then
  fail "docs/ carry dates of changes (keep them in bench/results and commit messages)"
fi
if grep -n -i -E '\bissues? #?[0-9]+|\(#[0-9]+\)' docs/*.md; then
  fail "docs/ name issue numbers"
fi
if ! grep -l -E '^price_per_gpu_hour: [0-9.]*[1-9]' topologies/*.yaml > /dev/null; then
  fail "no shipped topology sets price_per_gpu_hour"
fi
grep -q "price_per_gpu_hour" docs/model.md || fail "docs/model.md does not explain price_per_gpu_hour"

build_run=$(bash scripts/setup --list)
with_tests=$(bash scripts/setup --list --tests)
for p in slurmctld slurmd munge nftables chromium clang libgtest-dev; do
  if grep -q -x "$p" <<< "$build_run"; then
    fail "scripts/setup (build and run) installs $p"
  fi
  grep -q -x "$p" <<< "$with_tests" || fail "scripts/setup --tests does not install $p"
done
for p in cmake libgrpc++-dev libopenmpi-dev openmpi-bin libopenblas-dev; do
  grep -q -x "$p" <<< "$build_run" || fail "scripts/setup does not install $p"
done
grep -q -F 'scripts/setup --tests' scripts/test || fail "scripts/test does not install the test packages"

if [ "$status" = 0 ]; then echo "docs_check: ok"; fi
exit "$status"
