#!/usr/bin/env bash
# Old binary against new, side by side in one session, each run in processes of its own, old
# and new alternating, for a refactor's "no loss of speed" check. Prints Markdown tables of
# the medians over the repetitions and new / old.
#
#   tools/old_vs_new.sh OLD_BUILD NEW_BUILD [--what allreduce|sendrecv|isendrecv|training] [--ranks "2 4"]
#                       [--sizes "8 1K ... 64M"] [--reps N] [--shm 0|1]
#
#   allreduce (the default): float32 sum all-reduce, sync, in place (comm_bench), per size:
#             median (p90) per op. --shm 0 (the default) runs the TCP paths
#             (FLAGS_cpu_shm_transport=0), 1 the shared-memory ones.
#   sendrecv: point-to-point, a ring shift (every rank sends to the next and receives from
#             the previous, one batch), sync, per size: median (p90); --shm as above (1 lets
#             ranks of one host read large messages from the sender's memory).
#   isendrecv: the same ring shift as ungrouped irecv + isend (the point-to-point lanes'
#             path; an old build's comm_bench needs the op: copy tools/comm_bench's
#             bench_ops.cc and bench_options.cc into it).
#   training: the DataParallel step (dp_bench, setting "(a) DataParallel, 25 MB", the
#             default bucket: rank 0's median (p90) step) and the main job
#             (train_fashion_mnist, one epoch: samples/s; an epoch is about a second, so ask
#             for --reps 7 or more).
#
# OLD_BUILD: a worktree of the old commit, built with
#   cmake -S old -B old/build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWITH_PYTHON=OFF &&
#   make -C old/build launch comm_bench dp_bench train_fashion_mnist
set -euo pipefail
OLD=${1:?usage: old_vs_new.sh OLD_BUILD NEW_BUILD [options]}
NEW=${2:?usage: old_vs_new.sh OLD_BUILD NEW_BUILD [options]}
shift 2
WHAT=allreduce RANKS="2 4" SIZES="8 1K 16K 64K 256K 1M 4M 16M 64M" REPS=3 SHM=0
while (($#)); do
  case "$1" in
    --what) WHAT=$2; shift 2 ;;
    --ranks) RANKS=$2; shift 2 ;;
    --sizes) SIZES=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --shm) SHM=$2; shift 2 ;;
    *) echo "old_vs_new: unknown option $1" >&2; exit 2 ;;
  esac
done
[[ $WHAT =~ ^(allreduce|sendrecv|isendrecv|training)$ ]] || { echo "old_vs_new: --what $WHAT?" >&2; exit 2; }
[[ $WHAT == training ]] && SIZES="dp job"
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
iters() {  # fewer ops per round above 1 MiB
  case $1 in 8|1K|16K|64K|256K|1M) echo "-n 200 -w 20 --rounds 5" ;; *) echo "-n 8 -w 2 --rounds 3" ;; esac
}
run() {  # run BUILD RANKS ITEM OUTFILE
  local b=$1 n=$2 item=$3 out=$4
  local launch=("$b/tools/launch/launch" --nproc_per_node "$n" --)
  case $item in
    dp) timeout 600 "${launch[@]}" "$b/tools/dp_bench/dp_bench" > "$out.log" 2>&1 ;;
    job) timeout 600 "${launch[@]}" "$b/tools/train_fashion_mnist/train_fashion_mnist" \
           --epochs 1 --verify_steps 0 > "$out.log" 2>&1 ;;
    *) local place=--no-outofplace
       [[ $WHAT == *sendrecv ]] && place=--no-inplace  # a send has no in-place form
       FLAGS_cpu_shm_transport=$SHM timeout 300 "${launch[@]}" "$b/tools/comm_bench/comm_bench" \
         -c "$WHAT" -b "$item" -e "$item" --sync $(iters "$item") "$place" \
         --json "$out.json" > "$out.log" 2>&1 ;;
  esac
}
for rep in $(seq 1 "$REPS"); do
  for n in $RANKS; do
    for s in $SIZES; do
      for v in old new; do
        B=$OLD; [[ $v == new ]] && B=$NEW
        run "$B" "$n" "$s" "$OUT/$v.$n.$s.$rep" || echo "old_vs_new: $v, $n ranks, $s, rep $rep failed" >&2
      done
    done
  done
done
WHAT=$WHAT python3 - "$OUT" "$(dirname "${BASH_SOURCE[0]}")" <<'PY'
import glob, os, re, statistics, sys
sys.path.insert(0, sys.argv[2])
from bench_common import comm_bench_median_p90, parse_size  # tools/bench_common.py
def measure(path, item):
    """(median, p90) of one run, or None."""
    try:
        if item == "dp":
            for line in open(path + ".log", errors="replace"):
                if "(a) DataParallel, 25 MB " in line:
                    return tuple(float(x) for x in re.findall(r"\s(\d+\.\d+)", line)[:2])
        elif item == "job":
            found = [float(m) for m in re.findall(r"test accuracy: .*, (\d+) samples/s\)",
                                                  open(path + ".log", errors="replace").read())]
            return (found[-1], found[-1]) if found else None
        else:
            return comm_bench_median_p90(path + ".json")
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return None
rows = {}
for f in glob.glob(os.path.join(sys.argv[1], "*.log")):
    v, n, s, rep = os.path.basename(f)[:-4].split(".")
    m = measure(f[:-4], s)
    if m: rows.setdefault((int(n), s), {}).setdefault(v, []).append(m)
def key(k):
    n, s = k
    return (n, parse_size(s) if s[0].isdigit() else -1)
unit = {"dp": "DataParallel step, ms", "job": "main job, samples/s (higher is better)"}
opname = {"sendrecv": "send/recv (a group)", "isendrecv": "irecv + isend"}.get(os.environ.get("WHAT"), "all-reduce")
print("| ranks | what | old median (p90) | new median (p90) | new / old median | new / old p90 |")
print("|---|---|---|---|---|---|")
for k in sorted(rows, key=key):
    o, w = rows[k].get("old", []), rows[k].get("new", [])
    if not o or not w:
        continue
    om, op = (statistics.median(x[i] for x in o) for i in (0, 1))
    nm, np_ = (statistics.median(x[i] for x in w) for i in (0, 1))
    what = unit.get(k[1], f"{opname} {k[1]}, us")
    print(f"| {k[0]} | {what} | {om:.1f} ({op:.1f}) | {nm:.1f} ({np_:.1f}) | {nm/om:.2f} | {np_/op:.2f} |")
PY
