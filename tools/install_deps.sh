#!/usr/bin/env bash
# Installs every build and test dependency from Debian packages. Idempotent: when
# everything is present it only checks (dpkg-query) and returns in well under a second.
#   tools/install_deps.sh          # build, tests, demo
#   tools/install_deps.sh --bench  # also what the benchmarks use beyond that (perf)
set -euo pipefail
BENCH=0
for a in "$@"; do
  case "$a" in
    --bench) BENCH=1 ;;
    *) echo "install_deps: unknown option $a (--bench)" >&2; exit 2 ;;
  esac
done

PKGS=(
  g++ cmake make pkg-config
  libgoogle-glog-dev libgflags-dev libeigen3-dev
  libgtest-dev libgmock-dev
  libgloo-dev
  libopenmpi-dev openmpi-bin
  clang libclang-rt-14-dev   # libFuzzer for the store's wire-parser fuzzer
  gnuplot-nox                # comm_bench's and the demo's PNG plots
  zlib1g-dev                 # the demo reads the gzip IDX files
  dataset-fashion-mnist      # the demo's dataset (/usr/share/datasets/fashion-mnist)
  libopenblas-dev            # phi's CPU matmul (cblas)
  python3-dev pybind11-dev   # the Python package paddle_like (paddle_like._C)
  python3-numpy python3-pytest  # its arrays and its test suite
  python3-torch libtorch-dev # the torch.distributed backend (paddle_like.torch_backend),
                             # its tests and the DLPack tests; torch's gloo for benchmarks
)
if ((BENCH)); then
  PKGS+=(linux-perf)         # profiles (docs/benchmarks.md)
fi

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  echo "install_deps: installing ${missing[*]}"
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "install_deps: all ${#PKGS[@]} packages present"
fi

# The CUDA toolkit (with NCCL) is not a Debian package here; it is used when present.
if [[ -x /usr/local/cuda/bin/nvcc ]]; then
  echo "install_deps: CUDA toolkit found at /usr/local/cuda (GPU code paths will compile)"
else
  echo "install_deps: no CUDA toolkit; building CPU-only"
fi
