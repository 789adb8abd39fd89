#!/usr/bin/env bash
# The main job, from a fresh clone on a fresh Debian machine:
#   1. install the Debian build dependencies (tools/install_deps.sh),
#   2. configure and build launch + comm_bench (Release, in build/ by default, -j2),
#   3. run every collective on 4 local ranks through the launcher, 8 B .. 4 MiB, every result
#      verified (#wrong columns), and exit non-zero if anything is wrong or fails.
#
# usage: tools/run_demo.sh [--build-dir DIR] [--nproc N] [--jobs J] [--all] [-- comm_bench args]
#   --all     build everything (tests too), not just the two tools
#   Extra arguments after -- replace the default comm_bench size/iteration arguments.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="$ROOT/build"
NPROC=4
JOBS=2
TARGETS=(--target launch comm_bench)
BENCH_ARGS=(-b 8 -e 4M -f 4 -n 20 -w 5)

while (($#)); do
  case "$1" in
    --build-dir) BUILD_DIR="$2"; shift 2 ;;
    --nproc) NPROC="$2"; shift 2 ;;
    --jobs) JOBS="$2"; shift 2 ;;
    --all) TARGETS=(); shift ;;
    --) shift; BENCH_ARGS=("$@"); break ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "run_demo: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

echo "== run_demo: dependencies"
"$ROOT/tools/install_deps.sh"

echo "== run_demo: configure + build (Release) in $BUILD_DIR"
cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release
cmake --build "$BUILD_DIR" -j "$JOBS" "${TARGETS[@]}"

LAUNCH="$BUILD_DIR/tools/launch/launch"
BENCH="$BUILD_DIR/tools/comm_bench/comm_bench"
JSON="$BUILD_DIR/comm_bench_demo.json"
LOG="$BUILD_DIR/comm_bench_demo.txt"

echo "== run_demo: launch --nproc_per_node $NPROC comm_bench -c all ${BENCH_ARGS[*]}"
set +e
"$LAUNCH" --nproc_per_node "$NPROC" -- "$BENCH" -c all "${BENCH_ARGS[@]}" --json "$JSON" \
  2>&1 | tee "$LOG"
status=${PIPESTATUS[0]}
set -e

if [[ $status -ne 0 ]]; then
  echo "run_demo: FAILED (launch exited with $status)" >&2
  exit "$status"
fi
if ! grep -q "# Out of bounds values : 0 OK" "$LOG"; then
  echo "run_demo: FAILED (the table does not report 0 wrong values)" >&2
  exit 1
fi
echo "run_demo: OK: every collective verified on $NPROC ranks (table: $LOG, JSON: $JSON)"
