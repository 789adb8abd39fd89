#!/usr/bin/env bash
# Builds and runs the libFuzzer target of the TCPStore wire parser.
#
#   tools/fuzz_store.sh [seconds=60] [work_dir=build-fuzz]
#
# Independent of the CMake build (which uses g++): compiles with clang++ and
# -fsanitize=fuzzer,address,undefined. Seeds come from tests/fuzz/store_corpus (read-only);
# new inputs go to <work_dir>/corpus, crashes to <work_dir>/artifacts. Exits 77 (skip)
# when clang++ or the libFuzzer runtime (libclang-rt-*-dev) is missing, 0 when the run
# found nothing, non-zero with the crashing input's path otherwise.
set -euo pipefail

secs=${1:-60}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=${2:-$root/build-fuzz}
cxx=${FUZZ_CXX:-clang++}

if ! command -v "$cxx" >/dev/null 2>&1; then
  echo "fuzz_store: $cxx not found; skipping (install clang and libclang-rt-14-dev)"
  exit 77
fi
mkdir -p "$work/corpus" "$work/artifacts"
probe="$work/probe.cc"
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' >"$probe"
if ! "$cxx" -fsanitize=fuzzer "$probe" -o "$work/probe" >/dev/null 2>&1; then
  echo "fuzz_store: $cxx cannot link libFuzzer; skipping (install libclang-rt-14-dev)"
  exit 77
fi

bin="$work/store_protocol_fuzzer"
src=("$root/tests/fuzz/store_protocol_fuzzer.cc" "$root/phi/core/distributed/store/tcp_store_protocol.cc")
if [[ ! -x "$bin" || -n "$(find "${src[@]}" "$root/phi/core/distributed/store/tcp_store_protocol.h" -newer "$bin")" ]]; then
  "$cxx" -std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I"$root" "${src[@]}" -o "$bin"
fi

echo "fuzz_store: running for ${secs}s"
"$bin" -max_total_time="$secs" -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix="$work/artifacts/" -print_final_stats=1 \
  "$work/corpus" "$root/tests/fuzz/store_corpus"
