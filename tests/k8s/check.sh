#!/usr/bin/env bash
# Generated Kubernetes manifests: each golden file is what `ringmaster
# launch-spec` prints for its arguments (in a fixed environment), and every
# golden file and deploy/k8s manifest validates (tests/k8s/validate.py).
#   tests/k8s/check.sh BIN_DIR            # check
#   UPDATE=1 tests/k8s/check.sh BIN_DIR   # rewrite the golden files
set -euo pipefail
bin=${1:?the folder with the ringmaster binary}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
status=0

generate() {  # golden-name, launch-spec arguments...
  local name=$1
  shift
  local out
  out=$(mktemp)
  (cd "$root" && env -i PATH=/usr/bin:/bin NCCL_NVLS_ENABLE=0 NCCL_DEBUG=WARN \
    "$bin/ringmaster" launch-spec "$@") > "$out"
  if [ "${UPDATE:-0}" = 1 ]; then
    cp "$out" "$here/golden/$name"
  elif ! diff -u "$here/golden/$name" "$out"; then
    echo "check.sh: $name differs from launch-spec's output (UPDATE=1 rewrites it)" >&2
    status=1
  fi
  rm -f "$out"
}

generate mpijob-collectives-2x8.yaml --launcher k8s-mpijob --np 16 \
  --ranks-per-node 8 --gpus-per-node 8 \
  --image registry.example/ringmaster-worker:0.1 \
  --coordinator ringmaster.ringmaster.svc:7450 \
  --job 20261201-000000-abcdef plans/collectives.yaml
generate mpijob-quickstart-1x2.yaml --launcher k8s-mpijob --np 2 \
  --gpus-per-node 2 --namespace benchmarks \
  --image registry.example/ringmaster-worker:0.1 \
  --coordinator 10.0.0.5:7450 --job 20261201-000000-123456 \
  plans/quickstart.yaml

generate job-collectives-2x8.yaml --launcher k8s-job --np 16 \
  --ranks-per-node 8 --gpus-per-node 8 \
  --image registry.example/ringmaster-worker:0.1 \
  --coordinator ringmaster.ringmaster.svc:7450 \
  --job 20261201-000000-abcdef plans/collectives.yaml
generate job-quickstart-2x1.yaml --launcher k8s-job --np 2 --tls-ca-secret ringmaster-ca \
  --ranks-per-node 1 --gpus-per-node 1 --namespace benchmarks \
  --image registry.example/ringmaster-worker:0.1 \
  --coordinator 10.0.0.5:7450 --job 20261201-000000-123456 \
  plans/quickstart.yaml

# The MPIJob's workers run sshd: the shipped worker image must have it.
if ! grep -q "openssh-server" "$root/deploy/docker/worker.Dockerfile"; then
  echo "check.sh: deploy/docker/worker.Dockerfile installs no openssh-server (MPIJob workers run sshd)" >&2
  status=1
fi
# Kubernetes launchers name every missing required option in one message.
for launcher in k8s-job k8s-mpijob; do
  set +e
  err=$("$bin/ringmaster" launch-spec --launcher "$launcher" "$root/plans/quickstart.yaml" 2>&1 >/dev/null)
  code=$?
  set -e
  if [ "$code" != 2 ] || ! grep -q -- "--coordinator, --job, --image" <<< "$err"; then
    echo "check.sh: launch-spec --launcher $launcher without options: exit $code, '$err'" >&2
    status=1
  fi
done
if ! "$bin/ringmaster" launch-spec --help | grep -q "required for k8s-mpijob and k8s-job"; then
  echo "check.sh: launch-spec --help does not mark the Kubernetes options required" >&2
  status=1
fi

python3 "$here/validate.py" "$here/schemas/kubeflow.org_mpijobs.yaml" \
  "$here"/golden/*.yaml "$root"/deploy/k8s/*.yaml || status=1
exit "$status"
