#!/usr/bin/env bash
# Installs the Debian 12 packages moeplan builds against (as root, or with sudo). Skips apt when
# everything is already installed. The CUDA toolkit is optional and comes from /usr/local/cuda.
set -euo pipefail
packages=(cmake ninja-build g++ ccache clang-format clang libclang-rt-14-dev pkg-config
  qt6-base-dev qt6-charts-dev qt6-svg-dev libgl-dev
  libeigen3-dev libboost-graph-dev nlohmann-json3-dev libcli11-dev
  libopenmpi-dev openmpi-bin libsqlite3-dev sqlite3 libgtest-dev libgmock-dev libbenchmark-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
