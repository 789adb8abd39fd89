#!/usr/bin/env bash
# Runs the differential fuzz test of the Gloo collectives (tests/distributed/gloo_fuzz_test.cc)
# longer than its ctest entries do.
#
#   tools/fuzz_collectives.sh [seconds=60] [extra gtest args]
#
# Each world size (GlooFuzz.RandomSequencesWorld1..4, one after the other) runs new seeds
# for `seconds`. FUZZ_WORLD=N keeps one world size, FUZZ_SEED sets the first seed (default:
# from the clock), FUZZ_STEPS the steps per seed. Uses build/tests/distributed_tests
# (FUZZ_BUILD_DIR replaces build/) and builds it only when it is missing. The whole output
# goes to <build>/fuzz_collectives.log; a wrong result shows its seed, step, op, parameters
# and the command that replays it. Exits with the test binary's status: 0 when every check
# passed.
set -euo pipefail

secs=${1:-60}
[[ $# -gt 0 ]] && shift
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${FUZZ_BUILD_DIR:-$root/build}
bin="$build/tests/distributed_tests"

if [[ ! -x "$bin" ]]; then
  echo "fuzz_collectives: $bin is missing; building distributed_tests in $build"
  if [[ ! -f "$build/CMakeCache.txt" ]]; then
    cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo
  fi
  cmake --build "$build" --target distributed_tests -j "${JOBS:-2}"
fi

filter='GlooFuzz.*'
[[ -n "${FUZZ_WORLD:-}" ]] && filter="GlooFuzz.RandomSequencesWorld$FUZZ_WORLD"
log="$build/fuzz_collectives.log"
echo "fuzz_collectives: ${secs}s per world size, full output in $log"
set +e
FUZZ_SECONDS="$secs" "$bin" --gtest_filter="$filter" "$@" 2>&1 | tee "$log" |
  grep --line-buffered -E '^\[GlooFuzz\]|^WRONG|^  replay:|^\[  (FAILED|SKIPPED) '
rc=${PIPESTATUS[0]}
set -e

# "[GlooFuzz] rank 0: 1234 checks, 0 wrong, seed ..." per rank and world size.
awk '/^\[GlooFuzz\] rank/ { runs++; checks += $4; wrong += $6 }
     END { printf "fuzz_collectives: %d rank runs, %d checks, %d wrong\n", runs, checks, wrong }' "$log"
if [[ $rc -ne 0 ]]; then
  echo "fuzz_collectives: FAILED (exit $rc); see $log"
else
  echo "fuzz_collectives: passed"
fi
exit "$rc"
