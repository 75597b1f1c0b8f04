#!/usr/bin/env bash
# Builds the Debian package of the CPU binary and its configs: build-package/bastion_<version>_<arch>.deb.
# CUDA and MPI are off: the package depends only on Debian's libraries (dpkg-shlibdeps lists them), and a
# CUDA build would tie it to a toolkit that Debian main does not carry; no -march=native, so it runs on any
# x86-64 machine. Only the binary is built (the install step does not build the tests).
#   scripts/package.sh            then: sudo apt install ./build-package/bastion_*.deb
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build-package}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr -DBASTION_CUDA=OFF -DBASTION_MPI=OFF \
  -DBASTION_NATIVE=OFF -DBASTION_BUILD_BENCH=OFF -DCMAKE_SKIP_INSTALL_ALL_DEPENDENCY=ON >/dev/null
cmake --build "$build" -j"$(nproc)" --target bastion
(cd "$build" && cpack -G DEB >/dev/null)
ls "$build"/bastion_*.deb
