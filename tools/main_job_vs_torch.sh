#!/usr/bin/env bash
# The main job (tools/train_fashion_mnist under tools/launch) against the same model in
# PyTorch DistributedDataParallel on torch's gloo (tools/torch_ddp_fashion_mnist.py), side
# by side: for each rank count, one epoch of each, in processes of their own, one after the
# other. Same MLP 784-256-128-10, Adam lr 1e-3, global batch 128 split over the ranks, same
# sample order and initial weights, float32; one BLAS thread per rank on both sides.
# Prints samples/s of each (the clock of each job's last line: the epoch and its test pass)
# and ours / torch.
#
# usage: tools/main_job_vs_torch.sh [--build-dir DIR] [--no-build] [--ranks "1 2 4"]
#                                   [--epochs E] [--repeat R]
#   --build-dir DIR  Release build of launch and train_fashion_mnist (default build/)
#   --no-build       use the binaries already in DIR
#   --repeat R       run each pair R times, alternating, and keep each side's best (default 1;
#                    on a shared machine the best of a few is the least disturbed)
# The torch side needs /usr/bin/python3 with torch (Debian's python3-torch); without it only
# our side runs. Exits non-zero when a run fails.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="$ROOT/build"
BUILD=1
RANKS="1 2 4"
EPOCHS=1
REPEAT=1
GLOBAL_BATCH=128
TORCH_PY=/usr/bin/python3

while (($#)); do
  case "$1" in
    --build-dir) BUILD_DIR="$2"; shift 2 ;;
    --no-build) BUILD=0; shift ;;
    --ranks) RANKS="$2"; shift 2 ;;
    --epochs) EPOCHS="$2"; shift 2 ;;
    --repeat) REPEAT="$2"; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "main_job_vs_torch: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

if ((BUILD)); then
  cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$BUILD_DIR" -j "${JOBS:-2}" --target launch train_fashion_mnist >/dev/null
fi
LAUNCH="$BUILD_DIR/tools/launch/launch"
TRAIN="$BUILD_DIR/tools/train_fashion_mnist/train_fashion_mnist"
for bin in "$LAUNCH" "$TRAIN"; do
  [[ -x "$bin" ]] || { echo "main_job_vs_torch: $bin is missing (build it, or drop --no-build)" >&2; exit 1; }
done

HAVE_TORCH=0
if [[ -x "$TORCH_PY" ]] && "$TORCH_PY" -c "import torch" 2>/dev/null; then
  HAVE_TORCH=1
else
  echo "main_job_vs_torch: $TORCH_PY has no torch (apt-get install python3-torch): torch side skipped"
fi

LOG_DIR="$(mktemp -d)"
trap 'rm -rf "$LOG_DIR"' EXIT

# The samples/s figure of a job's last timing line, from its log.
ours_rate() { grep -o 'test accuracy: .* samples/s)' "$1" | tail -1 | sed 's/.*, \([0-9.]*\) samples\/s)/\1/'; }
torch_rate() { grep -o '[0-9.]* samples/s' "$1" | tail -1 | cut -d' ' -f1; }
best() { awk -v a="$1" -v b="$2" 'BEGIN { print (b == "" || a + 0 > b + 0) ? a : b }'; }

run_ours() {  # ranks log
  local n=$1
  "$LAUNCH" --quiet --nproc_per_node "$n" -- "$TRAIN" --epochs "$EPOCHS" \
    --batch_size $((GLOBAL_BATCH / n)) --verify_steps 0 --log_every 1000000 >"$2" 2>&1 ||
    { echo "main_job_vs_torch: our job on $n ranks failed:" >&2; tail -20 "$2" >&2; exit 1; }
}
run_torch() {  # ranks log
  local n=$1
  "$TORCH_PY" "$ROOT/tools/torch_ddp_fashion_mnist.py" --nproc "$n" --epochs "$EPOCHS" \
    --batch_size $((GLOBAL_BATCH / n)) >"$2" 2>&1 ||
    { echo "main_job_vs_torch: the torch job on $n ranks failed:" >&2; tail -20 "$2" >&2; exit 1; }
}

declare -A OURS TORCH ACC_OURS ACC_TORCH
for n in $RANKS; do
  for ((r = 0; r < REPEAT; ++r)); do
    run_ours "$n" "$LOG_DIR/ours_$n.log"
    OURS[$n]=$(best "$(ours_rate "$LOG_DIR/ours_$n.log")" "${OURS[$n]:-}")
    ACC_OURS[$n]=$(grep -o 'test accuracy: [0-9.]*%' "$LOG_DIR/ours_$n.log" | tail -1 | cut -d' ' -f3)
    if ((HAVE_TORCH)); then
      run_torch "$n" "$LOG_DIR/torch_$n.log"
      TORCH[$n]=$(best "$(torch_rate "$LOG_DIR/torch_$n.log")" "${TORCH[$n]:-}")
      ACC_TORCH[$n]=$(grep -o 'test accuracy [0-9.]*%' "$LOG_DIR/torch_$n.log" | cut -d' ' -f3)
    fi
  done
done

echo "main job vs torch DDP: MLP 784-256-128-10, Adam, global batch $GLOBAL_BATCH, $EPOCHS epoch(s), best of $REPEAT"
echo "  ours:  BLAS $(grep -o 'blas: .* thread(s)' "$LOG_DIR/ours_${RANKS%% *}.log" | head -1 | sed 's/^blas: //') per rank"
if ((HAVE_TORCH)); then
  echo "  torch: $(grep -o 'torch_ddp: torch .*' "$LOG_DIR/torch_${RANKS%% *}.log" | sed 's/^torch_ddp: //')"
fi
printf "%-6s %-10s %14s %14s %7s %18s\n" ranks per-rank "ours (/s)" "torch (/s)" ratio "accuracy ours/torch"
for n in $RANKS; do
  if ((HAVE_TORCH)); then
    printf "%-6s %-10s %14.0f %14.0f %6.2fx %11s / %s\n" "$n" "$((GLOBAL_BATCH / n))" "${OURS[$n]}" \
      "${TORCH[$n]}" "$(awk -v a="${OURS[$n]}" -v b="${TORCH[$n]}" 'BEGIN { print a / b }')" \
      "${ACC_OURS[$n]}" "${ACC_TORCH[$n]}"
  else
    printf "%-6s %-10s %14.0f %14s %7s %11s\n" "$n" "$((GLOBAL_BATCH / n))" "${OURS[$n]}" - - "${ACC_OURS[$n]}"
  fi
done
