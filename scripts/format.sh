#!/usr/bin/env bash
# The house format (.clang-format, issue 37): Google's style at 120 columns, includes and comments as
# written. `scripts/format.sh` formats every C++ and CUDA source that git tracks, in place;
# `scripts/format.sh --check [ROOT]` formats nothing, lists the files that would change and exits 1 if any
# would (ROOT: a git work tree, default this repository; tests/test_format.cpp checks both).
# kernels/cuda/ keeps its own layout (kernels/cuda/.clang-format disables formatting there: clang-format 14
# splits the CUDA launch `<<<grid, block>>>` into `<< <`, which nvcc rejects).
# Needs clang-format 14 (Debian bookworm's `clang-format`): other versions place some constructs
# differently, so a check with another version would report files that 14 leaves alone.
set -euo pipefail
script_dir="$(cd "$(dirname "$0")" && pwd)"
cd "${2:-$script_dir/..}"
command -v clang-format >/dev/null || { echo "format.sh: clang-format not found (apt-get install clang-format)"; exit 2; }
version="$(clang-format --version | sed -n 's/.*version \([0-9]*\).*/\1/p')"
[ "$version" = 14 ] || echo "format.sh: clang-format $version, not 14: expect differences in the check"

mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh')
if [ "${1:-}" != --check ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
# One clang-format process for every file: it warns "FILE:LINE:COL: warning: code should be clang-formatted"
# at each place it would change (without --Werror, which stops at the first file).
bad="$(clang-format --dry-run "${files[@]}" 2>&1 |
  sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: warning: code should be clang-formatted.*/\1/p' | sort -u)"
if [ -n "$bad" ]; then
  echo "$bad" | sed 's/^/format.sh: not in the house format (run scripts\/format.sh): /'
  exit 1
fi
echo "format.sh: ${#files[@]} files in the house format"
