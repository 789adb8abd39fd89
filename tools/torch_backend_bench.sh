#!/usr/bin/env bash
# torch.distributed on the paddle_like backend against torch's own gloo, side by side in one
# session, each run in processes of its own (launch --no_store: env://, rank 0 hosts torch's
# store): float32 all_reduce medians/p90 from 8 B to 64 MiB, and the DDP training step of the
# Fashion-MNIST MLP (samples/s), at 2 and 4 ranks. The backends alternate within each rep;
# a figure is the median over reps. Prints a markdown table with ours / gloo (and the DDP
# step's CPU time per step, which other load on the machine moves less than its wall time).
#
# usage: tools/torch_backend_bench.sh [--build DIR] [--reps R] [--nprocs "2 4"]
#                                     [--sizes 8,64,...] [--budget_s S] [--steps N]
# Needs the torch backend built (cmake --build DIR --target paddle_like_torch_ext
# paddle_like_python_files launch) and Debian's python3-torch.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build-torch
REPS=2
NPROCS="2 4"
SIZES=8,64,512,4K,32K,256K,2M,16M,64M
BUDGET=0.4
STEPS=60
while [ $# -gt 0 ]; do
  case $1 in
    --build) BUILD=$(cd "$2" && pwd); shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --nprocs) NPROCS=$2; shift 2 ;;
    --sizes) SIZES=$2; shift 2 ;;
    --budget_s) BUDGET=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    -h|--help) sed -n 2,12p "$0"; exit 0 ;;
    *) echo "torch_backend_bench: unknown argument $1" >&2; exit 2 ;;
  esac
done
LAUNCH=$BUILD/tools/launch/launch
PY=/usr/bin/python3
[ -x "$LAUNCH" ] || { echo "torch_backend_bench: no launcher at $LAUNCH" >&2; exit 2; }
ls "$BUILD"/python/paddle_like/_torch_backend*.so > /dev/null 2>&1 ||
  { echo "torch_backend_bench: the torch backend is not built in $BUILD" >&2; exit 2; }
export PYTHONPATH=$BUILD/python PYTHONWARNINGS=ignore
TMP=$(mktemp -d /tmp/torch_backend_bench.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

run() {  # nproc backend mode out
  "$LAUNCH" --nproc_per_node "$1" --no_store --quiet -- "$PY" "$ROOT/tools/torch_backend_bench.py" \
    --backend "$2" "$3" --sizes "$SIZES" --budget_s "$BUDGET" --steps "$STEPS" \
    2> "$4.log" | sed -n 's/^\[rank 0\] //p' | grep '^{' >> "$4" ||
    { echo "torch_backend_bench: $2 $3 on $1 ranks failed:" >&2; tail -20 "$4.log" >&2; exit 1; }
}

for rep in $(seq 1 "$REPS"); do
  order="paddle_like gloo"
  [ $((rep % 2)) -eq 0 ] && order="gloo paddle_like"
  for n in $NPROCS; do
    for b in $order; do
      echo "torch_backend_bench: rep $rep/$REPS, $n ranks, $b" >&2
      run "$n" "$b" allreduce "$TMP/results.jsonl"
      run "$n" "$b" ddp "$TMP/results.jsonl"
    done
  done
done

"$PY" - "$TMP/results.jsonl" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
med = statistics.median
def fmt_size(b):
    for unit, m in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= m:
            return f"{b // m} {unit}"
    return f"{b} B"
nprocs = sorted({r["nproc"] for r in rows})
print("all_reduce (float32, SUM), per-op time in us: median / p90 over the ranks' worst, "
      "median of reps\n")
print("| ranks | size | paddle_like median | gloo median | ours/gloo | paddle_like p90 | "
      "gloo p90 | ours/gloo p90 | ours/gloo CPU per op |")
print("|---|---|---|---|---|---|---|---|---|")
for n in nprocs:
    sizes = sorted({r["size_bytes"] for r in rows if r["bench"] == "allreduce" and r["nproc"] == n})
    for s in sizes:
        get = lambda b, k: med([r[k] for r in rows if r["bench"] == "allreduce" and
                                r["nproc"] == n and r["size_bytes"] == s and r["backend"] == b])
        om, gm, op, gp = get("paddle_like", "median_us"), get("gloo", "median_us"), \
            get("paddle_like", "p90_us"), get("gloo", "p90_us")
        oc, gc = get("paddle_like", "cpu_us"), get("gloo", "cpu_us")
        print(f"| {n} | {fmt_size(s)} | {om:.1f} | {gm:.1f} | {om / gm:.2f}x | {op:.1f} | "
              f"{gp:.1f} | {op / gp:.2f}x | {oc / gc:.2f}x |")
print("\nDDP step, Fashion-MNIST MLP 784-256-128-10, Adam, global batch 128 (samples/s, "
      "median of reps)\n")
print("| ranks | paddle_like samples/s | gloo samples/s | ours/gloo | paddle_like CPU ms/step | "
      "gloo CPU ms/step | ours/gloo CPU |")
print("|---|---|---|---|---|---|---|")
for n in nprocs:
    get = lambda b, k: med([r[k] for r in rows if r["bench"] == "ddp" and
                            r["nproc"] == n and r["backend"] == b])
    o, g = get("paddle_like", "samples_per_s"), get("gloo", "samples_per_s")
    oc, gc = get("paddle_like", "cpu_ms_per_step"), get("gloo", "cpu_ms_per_step")
    print(f"| {n} | {o:.0f} | {g:.0f} | {o / g:.2f}x | {oc:.2f} | {gc:.2f} | {oc / gc:.2f}x |")
print("\n(CPU ms/step: the process's CPU time, every thread, per step, averaged over the ranks; "
      "samples/s: wall clock, which other load on the machine moves)")
EOF
