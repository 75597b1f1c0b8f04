#!/usr/bin/env bash
# The README's test command: install dependencies, build, run the whole test suite with CTest.
# Datasets: tests look in $BASTION_DATA (default ../shared/datasets beside the checkout) and in
# /usr/share/datasets; tests whose data is missing are reported as skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh "$@"
if [ -z "${BASTION_DATA:-}" ] && [ -d ../shared/datasets ]; then
  export BASTION_DATA="$(cd ../shared/datasets && pwd)"
fi
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j "$(nproc)"
