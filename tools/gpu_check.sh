#!/usr/bin/env bash
# GPU check for a fresh machine with an NVIDIA GPU, unattended, in under 5 minutes:
#   1. installs the build dependencies (tools/install_deps.sh),
#   2. configures and builds the GPU test suite (Release, -j$(nproc)) in build-gpu-check/,
#   3. runs gpu_tests with GoogleTest output (XML too),
#   4. runs a short NCCL benchmark (tools/comm_bench --backend nccl when it exists, else the
#      timing loop inside gpu_tests),
#   5. prints a summary.
# Exits non-zero, with a line starting "gpu_check: FAILED", when the build or any GPU test
# fails, and also when nvidia-smi shows a GPU but the GPU tests skipped (a build or
# runtime that cannot see the device must not pass as green).
#
# Environment: BUILD_DIR (default <repo>/build-gpu-check), GPU_CHECK_LOG_DIR (default
# $BUILD_DIR/gpu_check_logs), GPU_CHECK_SKIP_DEPS=1 to skip step 1, JOBS (default nproc).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build-gpu-check}
LOGS=${GPU_CHECK_LOG_DIR:-$BUILD/gpu_check_logs}
JOBS=${JOBS:-$(nproc)}
START=$(date +%s)
STEP="start"

fail() {
  echo "gpu_check: FAILED: $*" >&2
  echo "gpu_check: FAILED: $*"
  exit 1
}
on_exit() {
  local rc=$?
  if [[ $rc -ne 0 ]]; then
    echo "gpu_check: FAILED in step '$STEP' (exit $rc) after $(( $(date +%s) - START )) s" >&2
  fi
}
trap on_exit EXIT
step() {
  STEP=$1
  echo
  echo "==== gpu_check: $1 ($(( $(date +%s) - START )) s)"
}

mkdir -p "$LOGS"

step "device"
HAVE_GPU=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  HAVE_GPU=1
  nvidia-smi -L
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
else
  echo "nvidia-smi shows no GPU: the GPU tests will build and skip."
fi

step "dependencies"
if [[ "${GPU_CHECK_SKIP_DEPS:-0}" != 1 ]]; then
  "$ROOT/tools/install_deps.sh"
fi

step "configure"
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DWITH_GPU=ON -DWITH_TESTS=ON \
  -DWITH_TOOLS=ON 2>&1 | tee "$LOGS/configure.log"
if ! grep -q "^-- GPU: CUDA" "$LOGS/configure.log"; then
  grep "^-- GPU:" "$LOGS/configure.log" || true
  fail "CMake did not enable the CUDA/NCCL build (see the '-- GPU:' line above; is the toolkit at /usr/local/cuda with NCCL?)"
fi

step "build gpu_tests (-j$JOBS)"
if ! cmake --build "$BUILD" -j "$JOBS" --target gpu_tests >"$LOGS/build.log" 2>&1; then
  tail -60 "$LOGS/build.log"
  fail "the build of gpu_tests failed (see $LOGS/build.log)"
fi
tail -3 "$LOGS/build.log"
# comm_bench is optional: used for the benchmark when it builds and speaks NCCL.
HAVE_COMM_BENCH=0
if cmake --build "$BUILD" -j "$JOBS" --target comm_bench >"$LOGS/build_comm_bench.log" 2>&1; then
  BENCH_BIN=$(find "$BUILD" -type f -name comm_bench -perm -u+x | head -1)
  if [[ -n "$BENCH_BIN" ]] && [[ "$("$BENCH_BIN" --help 2>&1 || true)" == *nccl* ]]; then
    HAVE_COMM_BENCH=1
  fi
fi
TESTS=$(find "$BUILD" -type f -name gpu_tests -perm -u+x | head -1)
[[ -n "$TESTS" ]] || fail "gpu_tests was not built (see $LOGS/build.log)"

step "gpu_tests"
set +e
PADDLE_LIKE_REQUIRE_GPU=$HAVE_GPU timeout 240 "$TESTS" --gtest_color=no \
  --gtest_filter='-NCCLBench.*' --gtest_output="xml:$LOGS/gpu_tests.xml" 2>&1 |
  tee "$LOGS/gpu_tests.log"
TEST_RC=${PIPESTATUS[0]}
set -e
PASSED=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$LOGS/gpu_tests.log" | tail -1)
SKIPPED=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$LOGS/gpu_tests.log" | tail -1)
FAILED=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$LOGS/gpu_tests.log" | tail -1)
PASSED=${PASSED:-0} SKIPPED=${SKIPPED:-0} FAILED=${FAILED:-0}
if [[ $TEST_RC -eq 124 ]]; then fail "gpu_tests timed out after 240 s (see $LOGS/gpu_tests.log)"; fi
if [[ $TEST_RC -ne 0 ]]; then fail "gpu_tests: $FAILED test(s) failed (exit $TEST_RC; see $LOGS/gpu_tests.log)"; fi
if [[ $HAVE_GPU -eq 1 && $SKIPPED -ne 0 ]]; then
  fail "nvidia-smi shows a GPU but $SKIPPED GPU test(s) skipped: the build or the CUDA runtime cannot see the device"
fi

step "NCCL benchmark"
BENCH="skipped (no GPU)"
if [[ $HAVE_GPU -eq 1 ]]; then
  if [[ $HAVE_COMM_BENCH -eq 1 ]]; then
    # World size 1 (comm_bench alone): engine vs raw ncclAllReduce, results checked.
    timeout 150 "$BENCH_BIN" --backend nccl -c allreduce,allgather,reducescatter,broadcast \
      -b 8 -e 64M -f 8 -n 20 -w 5 --baseline --csv "$LOGS/bench.csv" 2>&1 |
      tee "$LOGS/bench.log" || fail "comm_bench --backend nccl failed (see $LOGS/bench.log)"
    BENCH="comm_bench --backend nccl (table above, CSV in $LOGS/bench.csv)"
  else
    PADDLE_LIKE_GPU_BENCH=1 timeout 120 "$TESTS" --gtest_color=no \
      --gtest_filter='NCCLBench.*' 2>&1 | tee "$LOGS/bench.log" ||
      fail "the NCCL timing loop failed (see $LOGS/bench.log)"
    grep -q '^\[       OK \] NCCLBench' "$LOGS/bench.log" || fail "the NCCL timing loop did not run"
    BENCH="gpu_tests NCCLBench.AllReduceFloat32"
  fi
fi

STEP="summary"
echo
echo "==== gpu_check: summary"
echo "GPU:        $([[ $HAVE_GPU -eq 1 ]] && nvidia-smi --query-gpu=name --format=csv,noheader | head -1 || echo none)"
echo "CUDA/NCCL:  $(grep '^-- GPU:' "$LOGS/configure.log" | sed 's/^-- GPU: //')"
echo "gpu_tests:  $PASSED passed, $SKIPPED skipped, $FAILED failed"
echo "benchmark:  $BENCH"
echo "logs:       $LOGS"
echo "time:       $(( $(date +%s) - START )) s"
echo "gpu_check: OK"
