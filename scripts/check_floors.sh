#!/usr/bin/env bash
# Checks that fl/ is built in floors (fl/README.md "Floors"): every `#include "fl/..."` in a file of fl/
# names a file on the includer's floor or below. Prints each include that runs upward and exits 1 when
# there is one, or when a file of fl/ sits in no floor (a new folder must be given one here and in the
# README). Usage: scripts/check_floors.sh [ROOT]   (default: the repository root)
set -euo pipefail
root="${1:-$(cd "$(dirname "$0")/.." && pwd)}"
cd "$root"

# fl/<path> -> floor number; empty for a path in no floor.
floor_of() {
  case "$1" in
    fl/base/*) echo 0 ;;
    fl/attacks/* | fl/clients/* | fl/defenses/* | fl/metrics/* | fl/evaluate.*) echo 1 ;;
    fl/registry.*) echo 2 ;;
    fl/core/*) echo 3 ;;
    fl/reproduce/*) echo 4 ;;
    *) echo "" ;;
  esac
}

status=0
checked=0
while IFS= read -r file; do
  from="$(floor_of "$file")"
  if [ -z "$from" ]; then
    echo "check_floors: $file is in no floor (scripts/check_floors.sh, fl/README.md \"Floors\")"
    status=1
    continue
  fi
  while IFS= read -r included; do
    to="$(floor_of "$included")"
    checked=$((checked + 1))
    if [ -z "$to" ]; then
      echo "check_floors: $file includes $included, which is in no floor"
      status=1
    elif [ "$to" -gt "$from" ]; then
      echo "check_floors: $file (floor $from) includes $included (floor $to): an include upward"
      status=1
    fi
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\(fl\/[^"]*\)".*/\1/p' "$file")
done < <(find fl -type f \( -name '*.h' -o -name '*.cpp' \) | sort)

[ "$status" = 0 ] && echo "check_floors: $checked includes of fl/, none upward"
exit "$status"
