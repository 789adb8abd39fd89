#!/usr/bin/env bash
# Reliability of elastic DataParallel (not run by CI): N trials (default 20) of the
# Fashion-MNIST trainer on 4 ranks under `launch --elastic`, each killing a random rank
# (SIGKILL) at a random step; a trial passes when the job exits 0, the survivors report the
# death, and the final test accuracy is within 1 point of an uninterrupted run. Prints one
# line per trial and the summary (passed / trials, detection+shrink times).
#
# usage: tools/elastic_trials.sh [--trials N] [--build-dir DIR] [--heartbeat-only]
#   --heartbeat-only   the launcher does not mark deaths in the store
#                      (launch --no_dead_mark): the survivors find the death by its
#                      heartbeat stopping alone (deadline 2 s here).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="$ROOT/build"
TRIALS=20
HEARTBEAT_ONLY=0
while (($#)); do
  case "$1" in
    --trials) TRIALS="$2"; shift 2 ;;
    --build-dir) BUILD_DIR="$2"; shift 2 ;;
    --heartbeat-only) HEARTBEAT_ONLY=1; shift ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "elastic_trials: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
LAUNCH="$BUILD_DIR/tools/launch/launch"
TRAIN="$BUILD_DIR/tools/train_fashion_mnist/train_fashion_mnist"
[[ -x "$LAUNCH" && -x "$TRAIN" ]] || { echo "build launch and train_fashion_mnist first" >&2; exit 2; }
STEPS=200
ARGS=(--epochs 1 --max_steps "$STEPS" --hidden 128 --log_every 1000 --verify_steps 0 --elastic
      --heartbeat_deadline_ms 2000)
LAUNCH_ARGS=(--elastic)
((HEARTBEAT_ONLY)) && LAUNCH_ARGS+=(--no_dead_mark)
accuracy() { grep -o 'test accuracy: [0-9.]*' | tail -1 | grep -o '[0-9.]*$'; }

base=$("$LAUNCH" "${LAUNCH_ARGS[@]}" --nproc_per_node 4 -- "$TRAIN" "${ARGS[@]}" 2>&1 | accuracy)
echo "uninterrupted: test accuracy $base%"
passed=0
times=()
for ((t = 1; t <= TRIALS; ++t)); do
  rank=$((RANDOM % 4))
  step=$((1 + RANDOM % (STEPS - 2)))
  out=$("$LAUNCH" "${LAUNCH_ARGS[@]}" --nproc_per_node 4 -- "$TRAIN" "${ARGS[@]}" \
        --kill_rank "$rank" --kill_step "$step" 2>&1) && status=0 || status=$?
  acc=$(accuracy <<<"$out" || true)
  secs=$(grep -o 'shrunk in [0-9.]* s' <<<"$out" | grep -o '[0-9.]*' | head -1 || true)
  ok=0
  if [[ $status -eq 0 && -n "$acc" && -n "$secs" ]] &&
     awk -v a="$acc" -v b="$base" 'BEGIN { d = a - b; exit !(d <= 1 && d >= -1) }'; then
    ok=1
    passed=$((passed + 1))
    times+=("$secs")
  fi
  printf 'trial %2d: kill rank %d at step %3d: exit %d, accuracy %s%%, detected+shrunk in %s s: %s\n' \
    "$t" "$rank" "$step" "$status" "${acc:-?}" "${secs:-?}" "$([[ $ok == 1 ]] && echo OK || echo FAILED)"
  if [[ $ok == 0 ]]; then echo "$out" | tail -20 | sed 's/^/    /'; fi
done
summary=$(printf '%s\n' "${times[@]:-}" | sort -n | awk 'NF { a[n++] = $1 } END {
  if (n) printf "median %.3f s, p90 %.3f s, max %.3f s", a[int(n / 2)], a[int(0.9 * (n - 1))], a[n - 1] }')
echo "elastic_trials: $passed / $TRIALS passed; detection+shrink: $summary"
[[ $passed -eq $TRIALS ]]
