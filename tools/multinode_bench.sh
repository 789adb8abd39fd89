#!/usr/bin/env bash
# multinode_bench.sh: all-reduce across simulated nodes whose links are capped (a benchmark,
# not a test; the table goes to docs/benchmarks.md).
#
#   tools/multinode_bench.sh [--rate 1gbit] [--out DIR]
#
# 1. 2 nodes x 1 rank, every node link capped at RATE (tbf both ways): all-reduce busbw from
#    1 MiB to 64 MiB against the cap.
# 2. 4 nodes x 1 rank at the same cap: ring against halving-doubling
#    (FLAGS_gloo_allreduce_algo), 4 KiB to 64 MiB, and where one overtakes the other.
#
# Needs root and iproute2 (tools/sim_cluster.sh); prints why and exits 0 where it cannot run.
# BUILD=dir picks the build tree (default: build/). Every node runs tools/launch, so the store,
# the rendezvous and Gloo cross the capped links exactly as on real nodes.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
sim=$root/tools/sim_cluster.sh
launch=$build/tools/launch/launch
bench=$build/tools/comm_bench/comm_bench
rate=1gbit
out=$(mktemp -d /tmp/multinode_bench.XXXXXX)

# Inside `sim_cluster.sh run`: one launcher per node, one rank each; JSON to $1.
on_cluster() {
  local json=$1
  shift
  local pids=() i
  for ((i = 0; i < SIM_NODES; i++)); do
    "$sim" exec "$SIM_CLUSTER" "$i" "$launch" --quiet --nnodes "$SIM_NODES" --node_rank "$i" \
      --nproc_per_node 1 --master_addr "$SIM_ADDR_0" --master_port 29500 -- \
      "$bench" -c allreduce --no-inplace --timeout_s 120 --json "$json" "$@" \
      >"$json.node$i.log" 2>&1 &
    pids+=($!)
  done
  local rc=0
  for i in "${pids[@]}"; do wait "$i" || rc=1; done
  [[ $rc == 0 ]] || { cat "$json".node*.log >&2; return 1; }
}

if [[ ${1:-} == _on_cluster ]]; then
  shift
  on_cluster "$@"
  exit
fi

while [[ $# -gt 0 ]]; do
  case $1 in
    --rate) rate=$2; shift 2 ;;
    --out) out=$2; mkdir -p "$out"; shift 2 ;;
    *) echo "usage: $0 [--rate 1gbit] [--out DIR]" >&2; exit 2 ;;
  esac
done
if ! why=$("$sim" check); then
  echo "multinode_bench: skipped: $why"
  exit 0
fi
[[ -x $launch && -x $bench ]] || { echo "multinode_bench: build launch and comm_bench first" >&2; exit 2; }

# NODES ALGO JSON [comm_bench args]: a fresh cluster for each run (no state carried over).
run() {
  local nodes=$1 algo=$2 json=$3
  shift 3
  FLAGS_gloo_allreduce_algo=$algo "$sim" run "$nodes" --rate "$rate" -- \
    "$0" _on_cluster "$json" "$@"
}

echo "multinode_bench: links capped at $rate; results in $out"
run 2 ring "$out/two_nodes.json" -b 1M -e 64M -f 2 -n 5 -w 1
run 4 ring "$out/ring4.json" -b 4K -e 64M -f 4 -n 10 -w 2
run 4 halving_doubling "$out/hd4.json" -b 4K -e 64M -f 4 -n 10 -w 2

python3 - "$rate" "$out" <<'EOF'
import json, re, sys
rate, out = sys.argv[1], sys.argv[2]
m = re.fullmatch(r"([0-9.]+)([kmg]?)bit", rate)
cap = float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)] / 8 / 1e9  # GB/s
def rows(name):
    return {r["size_bytes"]: r["out_of_place"] for r in json.load(open(f"{out}/{name}"))["results"]}
def size(b):
    return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"
print(f"\n2 nodes x 1 rank, links capped at {rate} ({cap:.4f} GB/s)\n")
print("| size | time (ms) | busbw (GB/s) | busbw / cap | wrong |")
print("|---:|---:|---:|---:|---:|")
for b, h in sorted(rows("two_nodes.json").items()):
    print(f"| {size(b)} | {h['time_us'] / 1e3:.1f} | {h['busbw_gbps']:.4f} | "
          f"{h['busbw_gbps'] / cap:.2f} | {h['wrong']} |")
ring, hd = rows("ring4.json"), rows("hd4.json")
print(f"\n4 nodes x 1 rank, links capped at {rate}: ring vs halving-doubling\n")
print("| size | ring (us) | ring busbw / cap | halving-doubling (us) | h-d busbw / cap | faster |")
print("|---:|---:|---:|---:|---:|---|")
for b in sorted(ring):
    r, h = ring[b], hd[b]
    faster = "ring" if r["time_us"] < h["time_us"] else "halving-doubling"
    print(f"| {size(b)} | {r['time_us']:.0f} | {r['busbw_gbps'] / cap:.2f} | {h['time_us']:.0f} | "
          f"{h['busbw_gbps'] / cap:.2f} | {faster} |")
EOF
