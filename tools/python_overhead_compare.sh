#!/usr/bin/env bash
# What Python adds: the same sync float32 sum all-reduce (in place) from C++ (comm_bench),
# from Python (paddle_like.distributed, tools/python_bench.py) and from torch.distributed's
# gloo (tools/torch_gloo_bench.py), each in processes of its own, alternating, side by side
# in one session. Prints a Markdown table of medians (p90) per op, each the median over the
# repetitions.
#
#   tools/python_overhead_compare.sh [--build DIR] [--sizes 8,1M] [--reps N] [--nproc N]
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$ROOT/build
SIZES=8,1M
REPS=3
NPROC=2
while (($#)); do
  case "$1" in
    --build) BUILD=$2; shift 2 ;;
    --sizes) SIZES=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --nproc) NPROC=$2; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "python_overhead_compare: unknown option $1" >&2; exit 2 ;;
  esac
done
LAUNCH=$BUILD/tools/launch/launch
BENCH=$BUILD/tools/comm_bench/comm_bench
PY=/usr/bin/python3
for b in "$LAUNCH" "$BENCH" "$BUILD/python/paddle_like/__init__.py"; do
  [[ -e $b ]] || { echo "python_overhead_compare: $b not built" >&2; exit 2; }
done
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
HAVE_TORCH=0
if $PY -c 'import torch' 2>/dev/null; then HAVE_TORCH=1; fi
for ((rep = 0; rep < REPS; rep++)); do
  for s in ${SIZES//,/ }; do
    echo "python_overhead_compare: rep $rep, $s: C++" >&2
    "$LAUNCH" --quiet --nproc_per_node "$NPROC" -- "$BENCH" -c allreduce -b "$s" -e "$s" \
      --sync -n 200 -w 20 --rounds 5 --no-outofplace --json "$TMP/cpp.$rep.$s.json" \
      > "$TMP/cpp.$rep.$s.log" 2>&1
  done
  echo "python_overhead_compare: rep $rep: Python" >&2
  PYTHONPATH=$BUILD/python "$LAUNCH" --quiet --nproc_per_node "$NPROC" -- \
    $PY "$ROOT/tools/python_bench.py" --sizes "$SIZES" > "$TMP/py.$rep.log" 2>&1
  grep -ho '{.*}' "$TMP/py.$rep.log" > "$TMP/py.$rep.jsonl"
  if ((HAVE_TORCH)); then
    echo "python_overhead_compare: rep $rep: torch gloo" >&2
    $PY "$ROOT/tools/torch_gloo_bench.py" --nproc "$NPROC" --sizes "$SIZES" --rounds 5 \
      > "$TMP/torch.$rep.jsonl" 2> "$TMP/torch.$rep.log"
  fi
done
$PY - "$TMP" "$REPS" "$SIZES" "$NPROC" "$HAVE_TORCH" <<'PY'
import json, os, statistics, sys
tmp, reps, sizes, nproc, have_torch = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(","), sys.argv[4], sys.argv[5] == "1"
def lines(path):
    return {r["size_bytes"]: r for r in map(json.loads, open(path))} if os.path.exists(path) else {}
med = statistics.median
print(f"float32 sum all-reduce, {nproc} ranks, sync, in place; per-op median (p90) in us, "
      f"each the median of {reps} repetition(s).\n")
print("| size | C++ (comm_bench) | Python (paddle_like) | Python - C++ | torch gloo (Python) | paddle_like / torch |")
print("|---|---|---|---|---|---|")
for s in sizes:
    cpp = [json.load(open(os.path.join(tmp, f"cpp.{r}.{s}.json")))["results"][0] for r in range(reps)]
    size_b = cpp[0]["size_bytes"]
    cm, cp = med(c["in_place"]["median_us"] for c in cpp), med(c["in_place"]["p90_us"] for c in cpp)
    py = [lines(os.path.join(tmp, f"py.{r}.jsonl"))[size_b] for r in range(reps)]
    pm, pp = med(p["median_us"] for p in py), med(p["p90_us"] for p in py)
    row = f"| {s} | {cm:.1f} ({cp:.1f}) | {pm:.1f} ({pp:.1f}) | {pm - cm:+.1f} |"
    if have_torch:
        t = [lines(os.path.join(tmp, f"torch.{r}.jsonl"))[size_b] for r in range(reps)]
        tm, tp = med(x["median_us"] for x in t), med(x["p90_us"] for x in t)
        row += f" {tm:.1f} ({tp:.1f}) | {pm / tm:.2f} |"
    else:
        row += " - | - |"
    print(row)
PY
