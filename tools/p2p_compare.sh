#!/usr/bin/env bash
# Point-to-point on one host, side by side: ours (large messages read from the sender's
# memory), ours over the socket only (FLAGS_cpu_shm_transport=0) and OpenMPI (our MPI engine:
# OpenMPI's own shared-memory transport), each in processes of its own, alternating per size,
# sync, float32. Prints a Markdown table of the medians (p90) over the repetitions, in us.
#
#   tools/p2p_compare.sh [BUILD] [--ranks N] [--reps R] [--sizes "8 1K ... 64M"]
#
# sendrecv: a ring shift as one group; isendrecv: the same as ungrouped irecv + isend.
set -euo pipefail
B=build
if (($#)) && [[ $1 != --* ]]; then B=$1; shift; fi
RANKS=2 REPS=3 SIZES="8 1K 64K 256K 1M 4M 16M 64M"
while (($#)); do
  case "$1" in
    --ranks) RANKS=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --sizes) SIZES=$2; shift 2 ;;
    *) echo "p2p_compare: unknown option $1" >&2; exit 2 ;;
  esac
done
command -v mpirun >/dev/null || { echo "p2p_compare: needs mpirun (tools/install_deps.sh)" >&2; exit 2; }
MPI_FLAGS=(--oversubscribe)
[[ $(id -u) == 0 ]] && MPI_FLAGS+=(--allow-run-as-root)
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
BENCH=$B/tools/comm_bench/comm_bench
for rep in $(seq 1 "$REPS"); do
  for op in sendrecv isendrecv; do
    for s in $SIZES; do
      it=(-n 200 -w 20 --rounds 5)
      case $s in 4M|16M|32M|64M) it=(-n 8 -w 2 --rounds 3) ;; esac
      args=(-c "$op" -b "$s" -e "$s" --sync "${it[@]}" --no-inplace)
      for v in lent tcp mpi; do
        f=$OUT/$v.$op.$s.$rep
        case $v in
          lent|tcp)
            FLAGS_cpu_shm_transport=$([[ $v == lent ]] && echo 1 || echo 0) timeout 300 \
              "$B/tools/launch/launch" --quiet --nproc_per_node "$RANKS" -- "$BENCH" "${args[@]}" \
              --json "$f.json" > "$f.log" 2>&1 ;;
          mpi)
            timeout 300 mpirun "${MPI_FLAGS[@]}" -np "$RANKS" "$BENCH" --backend mpi "${args[@]}" \
              --json "$f.json" > "$f.log" 2>&1 ;;
        esac || echo "p2p_compare: $v $op $s rep $rep failed (see $f.log)" >&2
      done
    done
  done
done
python3 - "$OUT" "$(dirname "${BASH_SOURCE[0]}")" <<'PY'
import glob, os, statistics, sys
sys.path.insert(0, sys.argv[2])
from bench_common import comm_bench_median_p90, parse_size  # tools/bench_common.py
rows = {}
for f in glob.glob(os.path.join(sys.argv[1], "*.json")):
    v, op, s, rep = os.path.basename(f)[:-5].split(".")
    m = comm_bench_median_p90(f)
    if m:
        rows.setdefault((op, s), {}).setdefault(v, []).append(m)
def key(k):
    return (k[0], parse_size(k[1]))
def cell(x):
    med = statistics.median(a for a, _ in x)
    return med, f"{med:.1f} ({statistics.median(b for _, b in x):.1f})"
print("| op | size | ours, lent above 64 KiB | ours over the socket | OpenMPI | ours / OpenMPI |")
print("|---|---|---|---|---|---|")
for k in sorted(rows, key=key):
    r = rows[k]
    if not all(v in r for v in ("lent", "tcp", "mpi")):
        continue
    (lm, l), (_, t), (mm, m) = cell(r["lent"]), cell(r["tcp"]), cell(r["mpi"])
    print(f"| {k[0]} | {k[1]} | {l} | {t} | {m} | {lm / mm:.2f} |")
PY
