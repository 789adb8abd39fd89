#!/usr/bin/env bash
# The main job, from a fresh clone on a fresh Debian machine:
#   1. install the Debian dependencies (tools/install_deps.sh: the build tools, and the
#      Fashion-MNIST dataset from the dataset-fashion-mnist package),
#   2. configure and build launch, train_fashion_mnist and comm_bench (Release, in build/ by
#      default, -j2),
#   3. train an MLP classifier on Fashion-MNIST with DataParallel on 4 local ranks through the
#      launcher: progress lines, test accuracy (must reach 85%), a loss/accuracy curve PNG and
#      a check line (the same steps in float64 on 4 ranks vs one process: max |dw| <= 1e-10),
#   4. a short verified comm_bench sweep of every collective on the same 4 ranks (#wrong = 0).
#   Exits non-zero when anything fails or is wrong.
#
# usage: tools/run_demo.sh [--build-dir DIR] [--nproc N] [--jobs J] [--all] [--no-bench]
#                          [-- train_fashion_mnist args]
#   --all       build everything (tests too), not just the tools the demo runs
#   --no-bench  skip the comm_bench part
#   Extra arguments after -- go to train_fashion_mnist (e.g. -- --epochs 1 --dtype float64).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="$ROOT/build"
NPROC=4
JOBS=2
TARGETS=(--target launch train_fashion_mnist comm_bench)
BENCH=1
TRAIN_ARGS=()

while (($#)); do
  case "$1" in
    --build-dir) BUILD_DIR="$2"; shift 2 ;;
    --nproc) NPROC="$2"; shift 2 ;;
    --jobs) JOBS="$2"; shift 2 ;;
    --all) TARGETS=(); shift ;;
    --no-bench) BENCH=0; shift ;;
    --) shift; TRAIN_ARGS=("$@"); break ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "run_demo: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

echo "== run_demo: dependencies"
"$ROOT/tools/install_deps.sh"

echo "== run_demo: configure + build (Release) in $BUILD_DIR"
cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release
cmake --build "$BUILD_DIR" -j "$JOBS" "${TARGETS[@]}"

LAUNCH="$BUILD_DIR/tools/launch/launch"
TRAIN="$BUILD_DIR/tools/train_fashion_mnist/train_fashion_mnist"
BENCH_BIN="$BUILD_DIR/tools/comm_bench/comm_bench"
CURVE="$BUILD_DIR/fashion_mnist_curve.png"
TRAIN_LOG="$BUILD_DIR/fashion_mnist_train.txt"

echo "== run_demo: DataParallel training on $NPROC ranks (train_fashion_mnist ${TRAIN_ARGS[*]})"
set +e
"$LAUNCH" --nproc_per_node "$NPROC" -- "$TRAIN" --epochs 5 --min_accuracy 0.85 \
  --plot "$CURVE" "${TRAIN_ARGS[@]}" 2>&1 | tee "$TRAIN_LOG"
status=${PIPESTATUS[0]}
set -e
if [[ $status -ne 0 ]]; then
  echo "run_demo: FAILED (training exited with $status; log: $TRAIN_LOG)" >&2
  exit "$status"
fi
if ! grep -q "check: .* OK" "$TRAIN_LOG"; then
  echo "run_demo: FAILED (no passing N-ranks vs 1-process check line)" >&2
  exit 1
fi

if ((BENCH)); then
  BENCH_LOG="$BUILD_DIR/comm_bench_demo.txt"
  echo "== run_demo: every collective on $NPROC ranks, 8 B .. 1 MiB, verified"
  set +e
  "$LAUNCH" --nproc_per_node "$NPROC" -- "$BENCH_BIN" -c all -b 8 -e 1M -f 8 -n 10 -w 3 \
    --json "$BUILD_DIR/comm_bench_demo.json" 2>&1 | tee "$BENCH_LOG"
  status=${PIPESTATUS[0]}
  set -e
  if [[ $status -ne 0 ]] || ! grep -q "# Out of bounds values : 0 OK" "$BENCH_LOG"; then
    echo "run_demo: FAILED (comm_bench exited with $status or reported wrong values)" >&2
    exit 1
  fi
fi
echo "run_demo: OK: trained on $NPROC ranks ($(grep -o 'test accuracy: [0-9.]*%' "$TRAIN_LOG")), curve: $CURVE"
