#!/usr/bin/env bash
# sim_cluster.sh: simulated nodes on one machine, as network namespaces behind a switch.
#
# Each node is a network namespace with one interface, eth0, at 10.77.0.<i+1>/24, joined to a
# Linux bridge that lives in a "switch" namespace of its own, so the host's network is never
# touched and two clusters never see each other (addresses may repeat across clusters: each
# has its own switch). A rate cap is a tbf qdisc on both ends of a node's link (its egress and
# its ingress as seen from the switch). "link down" takes the switch's end of a node's link
# down: the node's packets vanish with no FIN, no RST and no ICMP, as in a real partition.
#
#   sim_cluster.sh up NAME N [--rate RATE]    create nodes 0..N-1 (RATE: tc syntax, 1gbit)
#   sim_cluster.sh addr NAME I                print node I's address
#   sim_cluster.sh exec NAME I CMD [ARGS...]  run CMD inside node I (exit status is CMD's)
#   sim_cluster.sh link NAME I down|up        cut node I off the switch / reconnect it
#   sim_cluster.sh down NAME                  kill what runs in the nodes, remove everything
#   sim_cluster.sh run N [--rate RATE] -- CMD up a fresh cluster, run CMD with SIM_CLUSTER,
#                                             SIM_NODES and SIM_ADDR_<i> set, tear it down on
#                                             any exit (a trap, also on INT/TERM)
#   sim_cluster.sh cleanup [--all]            remove clusters whose creator has exited
#                                             (--all: every cluster of this script)
#   sim_cluster.sh check                      exit 0 when clusters can be made here, else
#                                             print why on stdout and exit 1
#
# NAME: [a-z0-9]{1,12}. Namespaces are named plsim-<NAME>-<pid of the creator>-sw and
# ...-n<i>, so `cleanup` can tell a crashed run's leftovers from a live one. Needs root and
# iproute2 (ip, tc). See docs/multinode.md.
set -euo pipefail

readonly PREFIX=plsim
readonly SUBNET=10.77.0

die() { echo "sim_cluster: $*" >&2; exit 2; }

# Namespaces of cluster NAME (any creator pid).
cluster_netns() { ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${PREFIX}-$1-[0-9]+-" || true; }

node_ns() {  # NAME I -> the namespace of node I
  local ns
  ns=$(cluster_netns "$1" | grep -E -- "-n$2\$" | head -n1)
  [[ -n $ns ]] || die "no node $2 in cluster '$1'"
  echo "$ns"
}

switch_ns() {
  local ns
  ns=$(cluster_netns "$1" | grep -E -- "-sw\$" | head -n1)
  [[ -n $ns ]] || die "no cluster '$1'"
  echo "$ns"
}

check() {
  if [[ $(id -u) != 0 ]]; then echo "not root (network namespaces need CAP_NET_ADMIN)"; return 1; fi
  command -v ip >/dev/null || { echo "no 'ip' command (iproute2)"; return 1; }
  command -v tc >/dev/null || { echo "no 'tc' command (iproute2)"; return 1; }
  local probe="${PREFIX}-probe$$"
  if ! ip netns add "$probe" 2>/dev/null; then echo "cannot create a network namespace"; return 1; fi
  ip netns del "$probe" 2>/dev/null || true
  return 0
}

cap_link() {  # NS DEV RATE: a token bucket, burst and queue sized for the rate
  # 256 KiB of burst keeps a 1 Gbit/s bucket busy between kernel timer ticks; 50 ms of queue
  # at the rate absorbs Gloo's bursts without drops.
  tc -n "$1" qdisc replace dev "$2" root tbf rate "$3" burst 256kb latency 50ms
}

up() {
  local name=$1 n=$2 rate=""
  shift 2
  [[ $name =~ ^[a-z0-9]{1,12}$ ]] || die "NAME must be 1-12 of [a-z0-9]"
  [[ $n =~ ^[0-9]+$ && $n -ge 1 && $n -le 200 ]] || die "N must be 1..200"
  while [[ $# -gt 0 ]]; do
    case $1 in
      --rate) rate=$2; shift 2 ;;
      *) die "unknown option $1" ;;
    esac
  done
  [[ -z $(cluster_netns "$name") ]] || die "cluster '$name' exists"
  local base="${PREFIX}-${name}-${CREATOR_PID:-$PPID}"
  local sw="${base}-sw"
  ip netns add "$sw"
  ip -n "$sw" link set lo up
  ip -n "$sw" link add br0 type bridge
  ip -n "$sw" link set br0 up
  local i ns tmp
  for ((i = 0; i < n; i++)); do
    ns="${base}-n${i}"
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    # Created inside the switch namespace (names there are private to it), then one end moves.
    ip -n "$sw" link add "p$i" type veth peer name "eth0n$i"
    ip -n "$sw" link set "eth0n$i" netns "$ns"
    ip -n "$ns" link set "eth0n$i" name eth0
    ip -n "$ns" addr add "${SUBNET}.$((i + 1))/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$sw" link set "p$i" master br0 up
    if [[ -n $rate ]]; then
      cap_link "$ns" eth0 "$rate"
      cap_link "$sw" "p$i" "$rate"
    fi
  done
  for ((i = 0; i < n; i++)); do echo "${SUBNET}.$((i + 1))"; done
}

down_ns() {  # NS: kill its processes (ours: only this script's nodes run them), remove it
  local pids
  pids=$(ip netns pids "$1" 2>/dev/null || true)
  # shellcheck disable=SC2086
  [[ -z $pids ]] || kill -9 $pids 2>/dev/null || true
  ip netns del "$1" 2>/dev/null || true
}

down() {
  local ns
  for ns in $(cluster_netns "$1"); do down_ns "$ns"; done
}

cleanup() {
  local ns pid
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${PREFIX}-[a-z0-9]+-[0-9]+-" || true); do
    pid=$(echo "$ns" | sed -E "s/^${PREFIX}-[a-z0-9]+-([0-9]+)-.*/\1/")
    if [[ ${1:-} == --all ]] || ! kill -0 "$pid" 2>/dev/null; then
      echo "removing $ns"
      down_ns "$ns"
    fi
  done
}

run() {
  local n=$1 rate_args=()
  shift
  while [[ $# -gt 0 && $1 != -- ]]; do
    case $1 in
      --rate) rate_args=(--rate "$2"); shift 2 ;;
      *) die "unknown option $1" ;;
    esac
  done
  [[ ${1:-} == -- ]] && shift
  [[ $# -gt 0 ]] || die "run: no command"
  RUN_NAME="r$$"  # global: the EXIT trap runs after this function has returned
  trap 'down "$RUN_NAME"' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  local i=0 addr
  export SIM_CLUSTER=$RUN_NAME SIM_NODES=$n
  for addr in $(CREATOR_PID=$$ up "$RUN_NAME" "$n" "${rate_args[@]}"); do
    export "SIM_ADDR_$i=$addr"
    i=$((i + 1))
  done
  "$@"
}

[[ $# -ge 1 ]] || { sed -n '2,28p' "$0"; exit 2; }
cmd=$1
shift
case $cmd in
  check) check ;;
  up) [[ $# -ge 2 ]] || die "up NAME N [--rate RATE]"; up "$@" ;;
  addr) [[ $# -eq 2 ]] || die "addr NAME I"; node_ns "$1" "$2" >/dev/null; echo "${SUBNET}.$(($2 + 1))" ;;
  exec)
    [[ $# -ge 3 ]] || die "exec NAME I CMD [ARGS...]"
    ns=$(node_ns "$1" "$2"); shift 2
    exec ip netns exec "$ns" "$@" ;;
  link)
    [[ $# -eq 3 && ($3 == down || $3 == up) ]] || die "link NAME I down|up"
    node_ns "$1" "$2" >/dev/null
    ip -n "$(switch_ns "$1")" link set "p$2" "$3" ;;
  down) [[ $# -eq 1 ]] || die "down NAME"; down "$1" ;;
  run) [[ $# -ge 2 ]] || die "run N [--rate RATE] -- CMD"; run "$@" ;;
  cleanup) cleanup "${1:-}" ;;
  *) die "unknown command '$cmd' (up, addr, exec, link, down, run, cleanup, check)" ;;
esac
