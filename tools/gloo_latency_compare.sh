#!/usr/bin/env bash
# The CPU backend against Gloo's own algorithms, OpenMPI and torch's gloo backend, every engine
# in processes of its own, side by side in one session.
#
#   tools/gloo_latency_compare.sh [--build DIR] [--sizes 8,1K,...] [--reps N] [--nproc N]
#                                 [--out FILE.md]
#
# For each repetition and size, alternating:
#   ours      launch -- comm_bench --sync              (our group alone)
#   inproc    launch -- comm_bench --sync --baseline   (2 ranks: the five raw Gloo algorithms
#                                                     in processes that hold our group,
#                                                     "in-process")
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
# Every run is bounded: an engine that hangs (Gloo's allreduce now and then does on 4 ranks,
# at 1 and 64 MiB) is cut off there, its figures are "-", and the script goes on.
RUN_LIMIT=${RUN_LIMIT:-600}
# The raw algorithms beside ours in the same processes, on two ranks only: on four, Gloo's
# unbound-buffer allreduce, run on the context its other algorithms share, now and then
# never completes (ranks blocked in waitSend/waitRecv; seen at 1 and 64 MiB). The separate-
# process raw run is the baseline either way.
INPROC=""
((NPROC == 2)) && INPROC=--baseline
bounded() {  # a failed run leaves no JSON: the table shows "-" there and the script goes on
  timeout "$RUN_LIMIT" "$@" || {
    echo "gloo_latency_compare: '$*' failed or ran past ${RUN_LIMIT}s (RUN_LIMIT)" >&2
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
    echo "gloo_latency_compare: rep $rep, $s: ours" >&2
    bounded "$LAUNCH" --nproc_per_node "$NPROC" -- "$BENCH" $common --no-outofplace \
      --json "$TMP/ours.$rep.$s.json" > "$TMP/ours.$rep.$s.log" 2>&1
    if [[ -n $INPROC ]]; then
      # A run of its own: rounds of the raw algorithms in our processes leave our next
      # ops slower (a p90 of 11 us against 1.2 at 8 B), so ours is timed without them.
      echo "gloo_latency_compare: rep $rep, $s: raw Gloo inside our processes" >&2
      bounded "$LAUNCH" --nproc_per_node "$NPROC" -- "$BENCH" $common --no-outofplace $INPROC \
        --json "$TMP/inproc.$rep.$s.json" > "$TMP/inproc.$rep.$s.log" 2>&1
    fi
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
tmp, reps, sizes, nproc = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(","), sys.argv[4]
have_torch, have_mpi = sys.argv[5] == "1", sys.argv[6] == "1"
def load(name, half="out_of_place"):  # None where the run failed or hung (RUN_LIMIT)
    path = os.path.join(tmp, name)
    if not os.path.exists(path):
        return None
    try:
        with open(path) as f:
            return json.load(f)["results"][0][half]
    except (ValueError, KeyError, IndexError):  # cut off while writing
        return None
def best(raws):
    b = min(raws, key=lambda r: r["median_us"])
    return b["name"], b["median_us"], b["p90_us"]
def fmt(m, p):
    if m < 100:
        return f"{m:.1f} ({p:.1f})"
    return f"{m:.0f} ({p:.0f})" if m < 1000 else f"{m/1000:.2f} ms ({p/1000:.2f})"
med = lambda xs, i: statistics.median(x[i] for x in xs)
def cell(xs, ours_median):  # "median (p90) | ours / it", or dashes
    if not xs or ours_median is None:
        return "- | -"
    return f"{fmt(med(xs, 0), med(xs, 1))} | {ours_median / med(xs, 0):.2f}"
torch = {}
for rep in range(reps):
    path = os.path.join(tmp, f"torch.{rep}.jsonl")
    if have_torch and os.path.exists(path):
        for line in open(path):
            r = json.loads(line); torch.setdefault(r["size_bytes"], []).append((r["median_us"], r["p90_us"]))
print(f"float32 sum all-reduce, {nproc} ranks, sync ops, per-op median (p90) in us; {reps} repetition(s), "
      "each figure the median over them; ratios are our median / theirs (< 1: ours faster); "
      "-: not run, or failed or hung (see the script's log).\n")
print("| size | ours | ours over TCP | ours / TCP | OpenMPI | ours / OpenMPI | raw Gloo, separate processes: best | ours / best | in-process best | in-process / separate | torch gloo | ours / torch |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for s in sizes:
    ours, sep, inproc, names, tcp, mpi, size_b = [], [], [], [], [], [], None
    for rep in range(reps):
        o = load(f"ours.{rep}.{s}.json", "in_place")
        if o: ours.append((o["median_us"], o["p90_us"]))
        i = load(f"inproc.{rep}.{s}.json", "in_place")
        if i and i.get("raw"): inproc.append(best(i["raw"])[1:])
        t = load(f"tcp.{rep}.{s}.json", "in_place")
        if t: tcp.append((t["median_us"], t["p90_us"]))
        m = load(f"mpi.{rep}.{s}.json", "in_place")
        if m and m.get("raw"): mpi.append(best(m["raw"])[1:])
        r = load(f"raw.{rep}.{s}.json")
        if r and r.get("raw"):
            n, rm, rp = best(r["raw"]); sep.append((rm, rp)); names.append(n)
        for kind in ("ours", "tcp", "mpi"):
            path = os.path.join(tmp, f"{kind}.{rep}.{s}.json")
            if size_b is None and os.path.exists(path):
                size_b = json.load(open(path))["results"][0]["size_bytes"]
    om = med(ours, 0) if ours else None
    row = f"| {s} | {fmt(om, med(ours, 1)) if ours else '-'} | {cell(tcp, om)} | {cell(mpi, om)} | "
    row += f"{'/'.join(sorted(set(names)))} {cell(sep, om)} | " if sep else "- | - | "
    row += f"{med(inproc, 0):.0f} | {med(inproc, 0) / med(sep, 0):.2f} |" if inproc and sep else "- | - |"
    row += f" {cell(torch.get(size_b, []), om)} |"
    print(row)
PY
cat "$TMP/table.md"
if [[ -n "$OUT" ]]; then cp "$TMP/table.md" "$OUT"; fi
