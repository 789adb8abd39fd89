#!/usr/bin/env bash
# The CPU backend against Gloo's own algorithms, OpenMPI and torch's gloo backend, every engine
# in processes of its own, side by side in one session (issues 15 and 29).
#
#   tools/gloo_latency_compare.sh [--build DIR] [--sizes 8,1K,...] [--reps N] [--nproc N]
#                                 [--out FILE.md]
#
# For each repetition and size, alternating:
#   ours      launch -- comm_bench --sync --baseline   (our group; the five raw Gloo algorithms
#                                                     in the same processes, "in-process")
#   raw       launch -- comm_bench --raw_only          (only the raw algorithms: no group, no
#                                                     engine thread in these processes)
#   tcp       ours with FLAGS_cpu_shm_transport=0      (loopback TCP instead of shared memory)
#   mpi       launch --backend mpi -- comm_bench --backend mpi --baseline
#                                                    (MPI_Allreduce: OpenMPI's shared memory;
#                                                     when mpirun and an MPI build exist)
#   torch     tools/torch_gloo_bench.py                (Debian's python3-torch, if installed:
#                                                     tools/install_deps.sh --bench)
# and prints a Markdown table of medians (p90) per op, float32 sum all-reduce, sync ops, in
# place (as the raw algorithms and torch's all_reduce run), with
# the figures of each repetition and their median. Ratios are our median / the other's.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$ROOT/build
SIZES=8,1K,16K,256K,1M,16M,64M
REPS=2
NPROC=2
OUT=""
while (($#)); do
  case "$1" in
    --build) BUILD=$2; shift 2 ;;
    --sizes) SIZES=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --nproc) NPROC=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gloo_latency_compare: unknown option $1" >&2; exit 2 ;;
  esac
done
LAUNCH=$BUILD/tools/launch/launch
BENCH=$BUILD/tools/comm_bench/comm_bench
for b in "$LAUNCH" "$BENCH"; do
  [[ -x $b ]] || { echo "gloo_latency_compare: $b not built" >&2; exit 2; }
done
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# Every run is bounded: an engine that hangs (Gloo's unbound-buffer allreduce once did, at
# 4 ranks and 64 MiB, in-process beside ours) ends the script with its log instead of waiting.
RUN_LIMIT=${RUN_LIMIT:-600}
# The raw algorithms beside ours in the same processes, on two ranks only: on four, Gloo's
# unbound-buffer allreduce, run on the context its other algorithms share, now and then
# never completes (ranks blocked in waitSend/waitRecv; seen at 1 and 64 MiB). The separate-
# process raw run is the baseline either way.
INPROC=""
((NPROC == 2)) && INPROC=--baseline
bounded() {
  timeout "$RUN_LIMIT" "$@" || {
    echo "gloo_latency_compare: '$*' failed or ran past ${RUN_LIMIT}s (RUN_LIMIT)" >&2
    return 1
  }
}

bytes() {  # 8 / 1K / 16M -> bytes
  local s=$1 m=1
  case "$s" in *K) m=1024; s=${s%K} ;; *M) m=$((1 << 20)); s=${s%M} ;; esac
  echo $((s * m))
}
iters_for() {  # per-op time grows with size: fewer ops per round above 1 MiB
  if (($(bytes "$1") <= 1048576)); then echo "-n 200 -w 20 --rounds 5"; else echo "-n 8 -w 2 --rounds 3"; fi
}

HAVE_MPI=0
if command -v mpirun >/dev/null && "$BENCH" --help 2>&1 | grep -q "mpi (MPI builds"; then
  HAVE_MPI=1
fi
HAVE_TORCH=0
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then HAVE_TORCH=1; fi
for ((rep = 0; rep < REPS; rep++)); do
  for s in ${SIZES//,/ }; do
    common="-c allreduce -b $s -e $s --sync $(iters_for "$s")"
    echo "gloo_latency_compare: rep $rep, $s: ours${INPROC:+ (+ in-process raw)}" >&2
    bounded "$LAUNCH" --nproc_per_node "$NPROC" -- "$BENCH" $common --no-outofplace $INPROC \
      --json "$TMP/ours.$rep.$s.json" > "$TMP/ours.$rep.$s.log" 2>&1
    echo "gloo_latency_compare: rep $rep, $s: ours over TCP" >&2
    FLAGS_cpu_shm_transport=0 bounded "$LAUNCH" --nproc_per_node "$NPROC" -- "$BENCH" $common \
      --no-outofplace --json "$TMP/tcp.$rep.$s.json" > "$TMP/tcp.$rep.$s.log" 2>&1
    if ((HAVE_MPI)); then
      echo "gloo_latency_compare: rep $rep, $s: OpenMPI" >&2
      bounded "$LAUNCH" --backend mpi --nproc_per_node "$NPROC" -- "$BENCH" $common --backend mpi \
        --no-outofplace --baseline --json "$TMP/mpi.$rep.$s.json" > "$TMP/mpi.$rep.$s.log" 2>&1
    fi
    echo "gloo_latency_compare: rep $rep, $s: raw Gloo, separate processes" >&2
    bounded "$LAUNCH" --nproc_per_node "$NPROC" -- "$BENCH" $common --raw_only \
      --json "$TMP/raw.$rep.$s.json" > "$TMP/raw.$rep.$s.log" 2>&1
  done
  if ((HAVE_TORCH)); then
    echo "gloo_latency_compare: rep $rep: torch gloo" >&2
    bounded /usr/bin/python3 "$ROOT/tools/torch_gloo_bench.py" --nproc "$NPROC" --sizes "$SIZES" \
      --iters 200 --big_iters 8 --rounds 5 > "$TMP/torch.$rep.jsonl" 2> "$TMP/torch.$rep.log"
  fi
done

python3 - "$TMP" "$REPS" "$SIZES" "$NPROC" "$HAVE_TORCH" "$HAVE_MPI" > "$TMP/table.md" <<'PY'
import json, os, statistics, sys
tmp, reps, sizes, nproc, have_torch = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(","), sys.argv[4], sys.argv[5] == "1"
have_mpi = sys.argv[6] == "1"
def load(path, half="out_of_place"):
    with open(path) as f:
        return json.load(f)["results"][0][half]
def best(raws):
    b = min(raws, key=lambda r: r["median_us"])
    return b["name"], b["median_us"], b["p90_us"]
def fmt(m, p): return f"{m:.0f} ({p:.0f})" if m < 1000 else f"{m/1000:.2f} ms ({p/1000:.2f})"
torch = {}
if have_torch:
    for rep in range(reps):
        for line in open(os.path.join(tmp, f"torch.{rep}.jsonl")):
            r = json.loads(line); torch.setdefault(r["size_bytes"], []).append(r)
print(f"float32 sum all-reduce, {nproc} ranks, sync ops, per-op median (p90) in us; {reps} repetition(s), "
      "each figure the median over them; ratios are our median / theirs (< 1: ours faster).\n")
print("| size | ours | ours over TCP | OpenMPI | ours / OpenMPI | raw Gloo, separate processes: best | ours / best | in-process best | in-process / separate | torch gloo | ours / torch |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for s in sizes:
    ours, sep, inproc, names, tcp, mpi = [], [], [], [], [], []
    for rep in range(reps):
        t = load(os.path.join(tmp, f"tcp.{rep}.{s}.json"), "in_place")
        tcp.append((t["median_us"], t["p90_us"]))
        if have_mpi:
            mpi.append(best(load(os.path.join(tmp, f"mpi.{rep}.{s}.json"), "in_place")["raw"])[1:])
        o = load(os.path.join(tmp, f"ours.{rep}.{s}.json"), "in_place")
        r = load(os.path.join(tmp, f"raw.{rep}.{s}.json"))
        ours.append((o["median_us"], o["p90_us"]))
        n, m, p = best(r["raw"]); sep.append((m, p)); names.append(n)
        if o.get("raw"): inproc.append(best(o["raw"])[1:])
    med = lambda xs, i: statistics.median(x[i] for x in xs)
    om, op, sm, sp = med(ours, 0), med(ours, 1), med(sep, 0), med(sep, 1)
    ip = f"{med(inproc, 0):.0f} | {med(inproc, 0)/sm:.2f}" if inproc else "- | -"
    size_b = json.load(open(os.path.join(tmp, f"ours.0.{s}.json")))["results"][0]["size_bytes"]
    mm = f"{fmt(med(mpi, 0), med(mpi, 1))} | {om/med(mpi, 0):.2f}" if mpi else "- | -"
    row = f"| {s} | {fmt(om, op)} | {fmt(med(tcp, 0), med(tcp, 1))} | {mm} | {'/'.join(sorted(set(names)))} {fmt(sm, sp)} | {om/sm:.2f} | {ip} |"
    t = torch.get(size_b)
    if t:
        tm = statistics.median(x["median_us"] for x in t); tp = statistics.median(x["p90_us"] for x in t)
        row += f" {fmt(tm, tp)} | {om/tm:.2f} |"
    else:
        row += " - | - |"
    print(row)
print("\nPer repetition (ours median / best separate raw median):",
      "; ".join(s + ": " + ", ".join(
          f"{load(os.path.join(tmp, f'ours.{rep}.{s}.json'), 'in_place')['median_us'] / best(load(os.path.join(tmp, f'raw.{rep}.{s}.json'))['raw'])[1]:.2f}"
          for rep in range(reps)) for s in sizes))
PY
cat "$TMP/table.md"
if [[ -n "$OUT" ]]; then cp "$TMP/table.md" "$OUT"; fi
