#!/usr/bin/env bash
# The Debian package end to end (issue 40): builds it (scripts/package.sh), installs it with apt-get, runs
# `bastion reproduce pfedsam-table1 --quick` from a folder outside the checkout with the installed binary
# and presets, removes the package, and fails if any file it installed is left behind. Maintainer-only: it
# installs into the system (root or sudo) and needs MNIST where the loaders look ($BASTION_DATA, ./data,
# /usr/share/datasets; `bastion data get mnist`).
#   scripts/check_package.sh
set -euo pipefail
cd "$(dirname "$0")/.."
sudo_cmd=""
[ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
scripts/package.sh
deb="$(ls -t build-package/bastion_*.deb | head -1)"
export DEBIAN_FRONTEND=noninteractive
$sudo_cmd apt-get install -y -q "./$deb"
mapfile -t installed < <(dpkg -L bastion)
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "== installed: $(command -v bastion); $(bastion --version)"
[ "$(command -v bastion)" = /usr/bin/bastion ] || { echo "bastion on PATH is not the package's" >&2; exit 1; }
(cd "$work" && bastion reproduce pfedsam-table1 --quick --out quick)
test -s "$work/quick/table.md"
echo "== $work/quick/table.md written from the installed presets"
$sudo_cmd apt-get remove -y -q bastion
left=0
for path in "${installed[@]}"; do
  # dpkg -L lists the folders too; shared ones (/usr, /usr/bin) stay, the package's own must go.
  if [ -f "$path" ] || { [ -d "$path" ] && [[ "$path" == */bastion* ]]; }; then
    echo "left behind: $path" >&2
    left=1
  fi
done
[ "$left" = 0 ] && echo "== removed: none of the ${#installed[@]} paths it installed is left"
exit "$left"
