#!/usr/bin/env bash
# Old binary against new, side by side in one session: float32 sum all-reduce, sync, in
# place, each build's launch + comm_bench in processes of their own, old and new alternating
# per size. Prints a Markdown table of the medians (p90) over the repetitions, and new / old.
#
#   tools/allreduce_ab.sh OLD_BUILD NEW_BUILD [--ranks "2 4"] [--sizes "8 1K ... 64M"]
#                         [--reps N] [--shm 0|1]
#
# OLD_BUILD: e.g. a worktree of the old commit built with
#   cmake -S old -B old/build -DCMAKE_BUILD_TYPE=RelWithDebInfo && make -C old/build comm_bench launch
# --shm 0 (the default) runs the TCP paths (FLAGS_cpu_shm_transport=0), 1 the shared-memory ones.
set -euo pipefail
OLD=${1:?usage: allreduce_ab.sh OLD_BUILD NEW_BUILD [options]}
NEW=${2:?usage: allreduce_ab.sh OLD_BUILD NEW_BUILD [options]}
shift 2
RANKS="2 4" SIZES="8 1K 16K 64K 256K 1M 4M 16M 64M" REPS=3 SHM=0
while (($#)); do
  case "$1" in
    --ranks) RANKS=$2; shift 2 ;;
    --sizes) SIZES=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --shm) SHM=$2; shift 2 ;;
    *) echo "allreduce_ab: unknown option $1" >&2; exit 2 ;;
  esac
done
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
iters() {  # fewer ops per round above 1 MiB
  case $1 in 8|1K|16K|64K|256K|1M) echo "-n 200 -w 20 --rounds 5" ;; *) echo "-n 8 -w 2 --rounds 3" ;; esac
}
for rep in $(seq 1 "$REPS"); do
  for n in $RANKS; do
    for s in $SIZES; do
      for v in old new; do
        B=$OLD; [[ $v == new ]] && B=$NEW
        FLAGS_cpu_shm_transport=$SHM timeout 300 "$B/tools/launch/launch" --nproc_per_node "$n" -- \
          "$B/tools/comm_bench/comm_bench" -c allreduce -b "$s" -e "$s" --sync $(iters "$s") \
          --no-outofplace --json "$OUT/$v.$n.$s.$rep.json" > "$OUT/$v.$n.$s.$rep.log" 2>&1 ||
          echo "allreduce_ab: $v, $n ranks, $s, rep $rep failed" >&2
      done
    done
  done
done
python3 - "$OUT" <<'PY'
import glob, json, os, statistics, sys
rows = {}
for f in glob.glob(os.path.join(sys.argv[1], "*.json")):
    v, n, s, rep = os.path.basename(f)[:-5].split(".")
    try:
        r = json.load(open(f))["results"][0]["in_place"]
    except (ValueError, KeyError, IndexError, TypeError):
        continue
    rows.setdefault((int(n), s), {}).setdefault(v, []).append((r["median_us"], r["p90_us"]))
def key(k):
    n, s = k
    m = {"K": 1 << 10, "M": 1 << 20}
    return (n, int(s[:-1]) * m[s[-1]] if s[-1] in m else int(s))
print("| ranks | size | old median (p90) us | new median (p90) us | new / old median | new / old p90 |")
print("|---|---|---|---|---|---|")
for k in sorted(rows, key=key):
    o, w = rows[k].get("old", []), rows[k].get("new", [])
    if not o or not w:
        continue
    om, op = statistics.median(x[0] for x in o), statistics.median(x[1] for x in o)
    nm, np_ = statistics.median(x[0] for x in w), statistics.median(x[1] for x in w)
    print(f"| {k[0]} | {k[1]} | {om:.1f} ({op:.1f}) | {nm:.1f} ({np_:.1f}) | {nm/om:.2f} | {np_/op:.2f} |")
PY
