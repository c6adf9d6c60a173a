#!/usr/bin/env bash
# The CLI's retry of UNAVAILABLE (comm/grpc_channel.cc) seen from a user:
# `ringmaster status` started DELAY seconds before `ringmaster serve`
# (answered, and how long it took), then against a port where nothing
# listens (exit 4, and after how long). TRIALS of each.
#   bench/coordinator/client-retry.sh [TRIALS=6] [DELAY=0.7]
set -euo pipefail
trials=${1:-6}
delay=${2:-0.7}
root=$(cd "$(dirname "$0")/../.." && pwd)
bin="$root/build/bin/ringmaster"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# A first start writes the data folder and its admin token.
"$bin" serve --listen "127.0.0.1:$port" --data d > serve.log 2>&1 &
sp=$!
for _ in $(seq 50); do [ -s d/admin.token ] && break; sleep 0.1; done
kill "$sp"; wait "$sp" 2> /dev/null || true
now() { date +%s.%N; }
echo "# $(date -u +%FT%TZ) git $(git -C "$root" rev-parse --short HEAD): status started ${delay} s before serve, $trials trials"
for ((i = 1; i <= trials; i++)); do
  (sleep "$delay"; exec "$bin" serve --listen "127.0.0.1:$port" --data d >> serve.log 2>&1) &
  sp=$!
  t0=$(now); rc=0
  "$bin" status --coordinator "127.0.0.1:$port" --token-file d/admin.token > /dev/null 2>&1 || rc=$?
  echo "late coordinator, trial $i: exit $rc after $(python3 -c "print(round($(now) - $t0, 2))") s"
  sleep 0.3; kill "$sp" 2> /dev/null || true; wait "$sp" 2> /dev/null || true
done
for ((i = 1; i <= 3; i++)); do
  t0=$(now); rc=0
  "$bin" status --coordinator "127.0.0.1:$port" --token-file d/admin.token > /dev/null 2>&1 || rc=$?
  echo "no coordinator, trial $i: exit $rc after $(python3 -c "print(round($(now) - $t0, 2))") s"
done
