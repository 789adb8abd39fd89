#!/usr/bin/env bash
# The project's test command: installs dependencies, configures and builds, runs the whole
# GoogleTest suite through ctest, and exits with ctest's status.
#
#   tools/run_tests.sh                      # RelWithDebInfo build in build/
#   tools/run_tests.sh --sanitize address   # ASan+UBSan build in build-asan/ (leak checks on)
#   tools/run_tests.sh --sanitize thread    # TSan build in build-tsan/
#   tools/run_tests.sh -- -L phi            # anything after -- goes to ctest (-L label, -R regex)
#
# Options: --build-dir DIR (default build/, build-asan/, build-tsan/), --jobs N (default:
# nproc capped at 2), --no-deps (skip tools/install_deps.sh). Each test has its timeout
# in CMake; a GPU-less machine skips the GPU tests at run time.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SANITIZE=""
BUILD_DIR=""
JOBS=""
DEPS=1
CTEST_ARGS=()

usage() { sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

while (($#)); do
  case "$1" in
    --sanitize) SANITIZE=${2:?--sanitize needs address or thread}; shift 2 ;;
    --sanitize=*) SANITIZE=${1#*=}; shift ;;
    --build-dir) BUILD_DIR=${2:?}; shift 2 ;;
    --build-dir=*) BUILD_DIR=${1#*=}; shift ;;
    --jobs|-j) JOBS=${2:?}; shift 2 ;;
    --no-deps) DEPS=0; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; CTEST_ARGS=("$@"); break ;;
    *) echo "run_tests: unknown option '$1'" >&2; usage >&2; exit 2 ;;
  esac
done

case "$SANITIZE" in
  "") : "${BUILD_DIR:=$ROOT/build}" ;;
  address) : "${BUILD_DIR:=$ROOT/build-asan}" ;;
  thread) : "${BUILD_DIR:=$ROOT/build-tsan}" ;;
  *) echo "run_tests: --sanitize takes 'address' or 'thread', got '$SANITIZE'" >&2; exit 2 ;;
esac
if [[ -z "$JOBS" ]]; then
  JOBS=$(nproc 2>/dev/null || echo 2)
  ((JOBS > 2)) && JOBS=2
fi

if ((DEPS)); then
  "$ROOT/tools/install_deps.sh"
fi

echo "run_tests: configuring $BUILD_DIR (RelWithDebInfo${SANITIZE:+, SANITIZE=$SANITIZE})"
# The plain build is warning-free and kept so (-Werror); sanitizer builds are not, as GCC's
# instrumentation raises false -Wmaybe-uninitialized alarms.
WERROR=ON
[[ -n "$SANITIZE" ]] && WERROR=OFF
cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSANITIZE="$SANITIZE" \
  -DWARNINGS_AS_ERRORS="$WERROR"
echo "run_tests: building with -j$JOBS"
cmake --build "$BUILD_DIR" -j "$JOBS"

# Sanitizer runtime options. Leak checking stays on under ASan: a leak is a finding.
# (fork-based tests: children leave with _exit, which skips LSan's exit-time check, so
# only whole test processes are leak-checked.) Any report fails the test.
SUPP="$ROOT/tests/sanitizers"  # tsan.supp / lsan.supp, when present
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
if [[ "$SANITIZE" == address ]]; then
  ASAN_DEFAULT="detect_leaks=1:abort_on_error=0:detect_stack_use_after_return=1:check_initialization_order=1"
  # CUDA maps memory into ASan's shadow gap; only relevant where a GPU is present.
  if [[ -e /dev/nvidia0 ]]; then ASAN_DEFAULT+=":protect_shadow_gap=0"; fi
  export ASAN_OPTIONS="$ASAN_DEFAULT${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
  if [[ -f "$SUPP/lsan.supp" ]]; then
    export LSAN_OPTIONS="suppressions=$SUPP/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
  fi
elif [[ "$SANITIZE" == thread ]]; then
  TSAN_DEFAULT="die_after_fork=0:halt_on_error=1:second_deadlock_stack=1:history_size=4"
  if [[ -f "$SUPP/tsan.supp" ]]; then TSAN_DEFAULT+=":suppressions=$SUPP/tsan.supp"; fi
  export TSAN_OPTIONS="$TSAN_DEFAULT${TSAN_OPTIONS:+:$TSAN_OPTIONS}"
fi

echo "run_tests: ctest --output-on-failure -j$JOBS ${CTEST_ARGS[*]:-}"
set +e
(cd "$BUILD_DIR" && ctest --output-on-failure -j "$JOBS" "${CTEST_ARGS[@]}")
status=$?
set -e
exit $status
