#!/usr/bin/env bash
# Installs every Debian 12 package the full build and the whole test suite need (as root, or with
# sudo); skips apt when everything is already installed. The list matches what
# cmake/MoeplanDependencies.cmake requires for the components that are ON by default (the GUI,
# MPI, tests, benchmarks), plus the tools the scripts and tests run. The CUDA toolkit is optional
# and comes from /usr/local/cuda. scripts/fresh-machine-check.sh proves the list on a bare
# Debian 12 root file system.
#
# --gpu-tables (optional, not part of the build): also the Python packages of
# `moeplan costs import aiconfigurator` and scripts/aiconfigurator/ (aiconfigurator-core 0.12.0,
# pyarrow, numpy, scipy) from PyPI into a venv, ${XDG_CACHE_HOME:-~/.cache}/moeplan/gpu-tables-venv,
# which moeplan finds by itself (docs/GPU_COSTS.md).
set -euo pipefail
gpu_tables=0
for arg in "$@"; do
  case "$arg" in
    --gpu-tables) gpu_tables=1 ;;
    *) echo "install-deps: unknown option $arg; expected --gpu-tables or nothing" >&2; exit 2 ;;
  esac
done
packages=(
  # build tools; clang and its runtime for the libFuzzer targets, clang-format for the check
  cmake ninja-build g++ ccache pkg-config clang libclang-rt-14-dev clang-format
  # libraries every build needs
  libeigen3-dev libboost-graph-dev nlohmann-json3-dev libcli11-dev libsqlite3-dev
  # MPI: the distributed engine (MOEPLAN_ENABLE_MPI)
  libopenmpi-dev openmpi-bin
  # the desktop app (MOEPLAN_BUILD_GUI): Qt6 Charts needs Qt6 OpenGL, whose CMake files are in
  # libqt6opengl6-dev; libgl-dev for the OpenGL headers it pulls in
  qt6-base-dev qt6-charts-dev qt6-svg-dev libqt6opengl6-dev libgl-dev
  # the GUI walk in a real X server (scripts/gui-walk.sh): a virtual X server, a small window
  # manager that frames and maximizes the window, and xdotool to press keys as a user does
  xvfb openbox xdotool
  # tests and benchmarks (MOEPLAN_BUILD_TESTS, MOEPLAN_BUILD_BENCHMARKS)
  libgtest-dev libgmock-dev libbenchmark-dev
  # run by the tests and scripts: sqlite3 checks cost databases, python3 the helper scripts;
  # the export check (tests/exports, CTest label exports) downloads the frameworks with pip,
  # gives them virtual environments and reads TensorRT-LLM's YAML options with PyYAML
  sqlite3 python3 python3-pip python3-venv python3-yaml ca-certificates
  # the Slurm smoke test (tests/slurm/run.sh, CTest label slurm): a local Slurm of two emulated
  # nodes (scripts/slurm-local.sh); beyond the packages above they add 11 packages, 3.7 MB
  slurm-wlm munge)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
else
  echo "install-deps: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  echo "install-deps: done"
fi
if [ "$gpu_tables" -eq 1 ]; then
  venv="${XDG_CACHE_HOME:-$HOME/.cache}/moeplan/gpu-tables-venv"
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip
  "$venv/bin/python" -m pip install -q "aiconfigurator-core==0.12.0" pyarrow numpy scipy
  echo "install-deps: GPU-table importer packages in $venv"
fi
