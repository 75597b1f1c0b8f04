#!/usr/bin/env bash
# Installs Bastion's build dependencies from Debian's packages (skips apt when everything is present).
# Extra package names given as arguments are installed too (scripts/fuzz.sh adds clang and its runtimes).
set -euo pipefail
packages=(cmake g++ make pkg-config libopenblas-dev zlib1g-dev libgtest-dev libgmock-dev libbenchmark-dev
          libstb-dev libcli11-dev nlohmann-json3-dev libtomlplusplus-dev dataset-fashion-mnist
          libopenmpi-dev openmpi-bin libcurl4-openssl-dev libssl-dev libarchive-dev "$@")
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo_cmd apt-get update -q
  $sudo_cmd apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
