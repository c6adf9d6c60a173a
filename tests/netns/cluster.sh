#!/usr/bin/env bash
# A virtual cluster on one machine: N "nodes" as network namespaces joined
# by veth pairs to a bridge (198.18.0.1/24 in the root namespace, node i at
# 198.18.0.(10+i)), optionally one node's link (or every node's: SLOW_NODE
# "all") limited with tbf in both directions. Writes DIR/hosts (an mpirun hostfile by address) and
# DIR/agent.sh (mpirun's rsh agent: it enters the node's namespace and
# gives it the hostname node<i>). Needs root, iproute2 and tc.
#   tests/netns/cluster.sh up DIR NODES SLOTS [SLOW_NODE RATE]
#   tests/netns/cluster.sh down DIR
set -euo pipefail
cmd=${1:?up or down}
dir=${2:?state folder}
tag=${RM_NET_TAG:-rmt}  # names: ${tag}br0, ${tag}v<i>, ${tag}-node<i>

down() {
  local n
  n=$(cat "$dir/nodes" 2>/dev/null || echo 16)
  for i in $(seq 1 "$n"); do
    ip netns del "$tag-node$i" 2>/dev/null || true
    ip link del "${tag}v$i" 2>/dev/null || true
  done
  ip link del "${tag}br0" 2>/dev/null || true
}

if [ "$cmd" = down ]; then
  down
  exit 0
fi
[ "$cmd" = up ] || { echo "usage: $0 up DIR NODES SLOTS [SLOW_NODE RATE] | down DIR" >&2; exit 2; }
nodes=${3:?number of nodes}
slots=${4:?ranks per node}
slow=${5:-0}
rate=${6:-200mbit}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
echo "$nodes" > "$dir/nodes"
down
ip link add "${tag}br0" type bridge
ip addr add 198.18.0.1/24 dev "${tag}br0"
ip link set "${tag}br0" up
: > "$dir/hosts"
for i in $(seq 1 "$nodes"); do
  ns="$tag-node$i"
  ip netns add "$ns"
  ip link add "${tag}v$i" type veth peer name eth0 netns "$ns"
  ip link set "${tag}v$i" master "${tag}br0" up
  ip -n "$ns" addr add "198.18.0.$((10 + i))/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
  echo "198.18.0.$((10 + i)) slots=$slots" >> "$dir/hosts"
done
limited=()
if [ "$slow" = all ]; then
  mapfile -t limited < <(seq 1 "$nodes")
elif [ "$slow" -gt 0 ]; then
  limited=("$slow")
fi
# Queue length and burst of the limit (RM_NET_TBF_LATENCY, RM_NET_TBF_BURST):
# a short queue drops packets under load and TCP then stalls on timeouts.
tbf=(rate "$rate" burst "${RM_NET_TBF_BURST:-64kb}" latency "${RM_NET_TBF_LATENCY:-100ms}")
for i in "${limited[@]}"; do
  # Both directions: into the node (the bridge side) and out of it.
  tc qdisc add dev "${tag}v$i" root tbf "${tbf[@]}"
  ip netns exec "$tag-node$i" tc qdisc add dev eth0 root tbf "${tbf[@]}"
done
cat > "$dir/agent.sh" <<AGENT
#!/usr/bin/env bash
# mpirun's rsh agent for the virtual cluster: run the command in the node's
# namespace, under the node's own hostname.
host=\$1
shift
i=\$(( \${host##*.} - 10 ))
exec ip netns exec "$tag-node\$i" unshare --uts bash -c 'hostname "\$1"; shift; eval "\$*"' agent "node\$i" "\$@"
AGENT
chmod +x "$dir/agent.sh"
echo "cluster: $nodes nodes x $slots slots in $dir${limited[*]:+, node(s) ${limited[*]} limited to $rate}"
