#!/usr/bin/env bash
# Reliability of hang diagnosis (not run by CI): N trials (default 20) of a 4-rank job under
# launch in which a random rank misbehaves at a random all-reduce: it skips the op, stops
# itself (SIGSTOP: alive, silent) or dies (SIGKILL). A trial passes when the job ends within
# the group timeout (1.5 s) + 2 s + the launcher's overhead, and the watchdog's report names
# that rank (as behind, or as without heartbeat) for skip and stall, and the launcher names it
# for kill. Prints one line per trial and the summary.
#
# usage: tools/hang_trials.sh [--trials N] [--build-dir DIR]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="$ROOT/build"
TRIALS=20
while (($#)); do
  case "$1" in
    --trials) TRIALS="$2"; shift 2 ;;
    --build-dir) BUILD_DIR="$2"; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "hang_trials: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
LAUNCH="$BUILD_DIR/tools/launch/launch"
JOB="$BUILD_DIR/tests/skip_one_allreduce"
[[ -x "$LAUNCH" && -x "$JOB" ]] || { echo "build launch and skip_one_allreduce first" >&2; exit 2; }
modes=(skip stall kill)
passed=0
for ((t = 1; t <= TRIALS; ++t)); do
  rank=$((RANDOM % 4)); at=$((1 + RANDOM % 6)); mode=${modes[$((RANDOM % 3))]}
  logs=$(mktemp -d)
  start=$(date +%s.%N)
  out=$(FLAGS_comm_watchdog_interval_ms=100 timeout 60 "$LAUNCH" --nproc_per_node 4 \
        --grace_s 1 --log_dir "$logs" -- "$JOB" --rank "$rank" --at "$at" --mode "$mode" 2>&1) || true
  secs=$(echo "$(date +%s.%N) - $start" | bc)
  case "$mode" in
    kill) named=$(grep -c "launch: rank $rank was killed by signal 9" <<<"$out" || true) ;;
    *) named=$(grep -cE "Ranks behind \(have not issued seq $((at + 1))\): rank $rank\.|No heartbeat for more than [0-9]+ ms \(dead or hung\): rank $rank\." <<<"$out" || true) ;;
  esac
  ok=0
  if [[ $named -gt 0 ]] && (( $(echo "$secs < 1.5 + 2 + 3" | bc) )); then ok=1; passed=$((passed + 1)); fi
  printf 'trial %2d: rank %d %-5s at op %d: ended in %.1f s, named: %s\n' "$t" "$rank" "$mode" \
    "$((at + 1))" "$secs" "$([[ $ok == 1 ]] && echo OK || echo FAILED)"
  [[ $ok == 1 ]] || echo "$out" | grep -E "launch:|Ranks behind|No heartbeat|is at|are at" | head -12 | sed 's/^/    /'
  rm -rf "$logs"
done
echo "hang_trials: $passed / $TRIALS diagnosed correctly"
[[ $passed -eq $TRIALS ]]
