#!/usr/bin/env bash
# Installs a built tree into a temporary prefix and builds + runs the consumer project in
# this folder against it (find_package(paddle_like) -> paddle_like::phi, ::distributed).
#   tests/install_consumer/check_install.sh BUILD_DIR [SANITIZE]
set -euo pipefail
BUILD_DIR=$(cd "${1:?usage: check_install.sh BUILD_DIR [address|thread]}" && pwd)
SANITIZE=${2:-}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/paddle_like_install.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

cmake --install "$BUILD_DIR" --prefix "$WORK/prefix" > "$WORK/install.log"
# No installed header may include a CUDA, NCCL or Gloo header.
if grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*<(cuda|nccl|gloo/|cublas|mpi)' \
     "$WORK/prefix/include"; then
  echo "check_install: an installed header includes a CUDA/NCCL/Gloo/MPI header (above)"
  exit 1
fi
FLAGS=""
case "$SANITIZE" in
  address) FLAGS="-fsanitize=address,undefined" ;;
  thread) FLAGS="-fsanitize=thread" ;;
esac
cmake -S "$HERE" -B "$WORK/build" -DCMAKE_PREFIX_PATH="$WORK/prefix" \
      -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS="$FLAGS" -DCMAKE_EXE_LINKER_FLAGS="$FLAGS" \
      > "$WORK/configure.log" || { cat "$WORK/configure.log"; exit 1; }
cmake --build "$WORK/build" > "$WORK/build.log" 2>&1 || { cat "$WORK/build.log"; exit 1; }
"$WORK/build/consumer"
