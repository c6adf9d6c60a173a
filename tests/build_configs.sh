#!/usr/bin/env bash
# The CMake configurations that CI's lanes do not build still configure:
#   - the user's build (scripts/build: no tests, no fuzz targets), what
#     the README's first command runs;
#   - the fuzz targets alone (FUZZ=1 scripts/test without SANITIZERS=1:
#     clang, RINGMASTER_FUZZ=ON, no tests), where CMakeLists.txt adds only
#     what the fuzz targets use.
# Configure only (no build): a target linking one that the configuration
# does not define fails here. Exit 77 (skipped) where clang is missing
# for the second.
#   tests/build_configs.sh SOURCE_DIR WORK_DIR
set -uo pipefail
src=${1:?the source folder} work=${2:?a scratch folder}
rm -rf "$work"
mkdir -p "$work"
gen=()
if command -v ninja >/dev/null; then gen=(-G Ninja); fi
status=0
configure() {
  local name=$1
  shift
  if ! "$@" > "$work/$name.log" 2>&1; then
    echo "build_configs: the $name configuration failed to configure:" >&2
    grep -A8 "CMake Error" "$work/$name.log" >&2
    status=1
  else
    echo "build_configs: $name configures"
  fi
}
configure user cmake -S "$src" -B "$work/user" "${gen[@]}" \
  -DRINGMASTER_BUILD_TESTS=OFF -DRINGMASTER_FUZZ=OFF
if command -v clang++ >/dev/null && command -v clang >/dev/null; then
  configure fuzz-only env CC=clang CXX=clang++ cmake -S "$src" \
    -B "$work/fuzz-only" "${gen[@]}" -DRINGMASTER_BUILD_TESTS=OFF \
    -DRINGMASTER_FUZZ=ON -DRINGMASTER_SANITIZE=address,undefined \
    -DRINGMASTER_CUDA=OFF
elif [ "$status" = 0 ]; then
  echo "build_configs: no clang; the fuzz-only configuration not checked"
  exit 77
fi
rm -rf "$work"
exit "$status"
