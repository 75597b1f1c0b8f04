#!/usr/bin/env bash
# Configures and builds Bastion into ${BUILD_DIR:-build}. CUDA sources are compiled when nvcc exists
# (BASTION_CUDA=AUTO); extra CMake arguments pass through, e.g. scripts/build.sh -DBASTION_SANITIZE=ON.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${BUILD_DIR:-build}"
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" "$@" >/dev/null
cmake --build "$build_dir" -j "$(nproc)"
