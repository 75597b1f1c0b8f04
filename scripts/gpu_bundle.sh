#!/usr/bin/env bash
# Packs a CUDA build of this machine into .gpu/ for the lent GPU machine (scripts/gpu_checks.sh runs it
# there). That machine has CUDA, cuBLAS and cuDNN but none of the Debian packages the binaries link
# (OpenBLAS, Open MPI, stb), so the shared libraries travel with them; glibc and libstdc++ do not (the
# GPU machine's are newer, and older builds run on newer ones, not the reverse).
#   scripts/gpu_bundle.sh [build-folder=build] [dataset-folder=/usr/share/datasets/fashion-mnist]
set -euo pipefail
build=${1:-build}
data=${2:-/usr/share/datasets/fashion-mnist}
root=$(cd "$(dirname "$0")/.." && pwd)
grep -q '^/.gpu/$' "$root/.git/info/exclude" 2>/dev/null || echo /.gpu/ >> "$root/.git/info/exclude"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib"
bins=("$build/bastion" "$build/tests/bastion_tests" "$build/bench/bench_gemm" "$build/bench/bench_conv"
      "$build/bench/bench_train_step")
for b in "${bins[@]}"; do
  [ -x "$b" ] || { echo "gpu_bundle: $b is missing; build with -DBASTION_CUDA=ON -DBASTION_BUILD_BENCH=ON" >&2; exit 2; }
  cp "$b" "$stage/bin/"
done
# Every resolved library except glibc's, libstdc++/libgcc_s and the CUDA libraries found there.
ldd "${bins[@]}" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
  grep -Ev '/(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|libcudnn[^/]*|libcublas[^/]*)\.so' |
  while read -r lib; do cp -L "$lib" "$stage/lib/"; done
mkdir -p "$root/.gpu"
tar -C "$stage" -cJf "$root/.gpu/bundle.tar.xz" bin lib
if [ -d "$data" ]; then mkdir -p "$root/.gpu/fashion-mnist" && cp "$data"/*.gz "$root/.gpu/fashion-mnist/"; fi
git -C "$root" rev-parse HEAD > "$root/.gpu/commit"
readlink -f "$build/bastion" > "$root/.gpu/built_at"
du -sh "$root/.gpu"/*
