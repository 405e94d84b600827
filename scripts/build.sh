#!/usr/bin/env bash
# Configures and builds moeplan into BUILD_DIR (default build/). Extra arguments go to CMake.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/moeplan-ccache}
# The configure's own log is kept in the build directory; its moeplan: lines (what is built,
# whether CUDA was found) are shown, and on failure the whole output.
mkdir -p "$build_dir"
if ! cmake -S . -B "$build_dir" -G Ninja "$@" >"$build_dir/configure.log" 2>&1; then
  cat "$build_dir/configure.log" >&2
  exit 2
fi
grep '^-- moeplan: ' "$build_dir/configure.log" || true
cmake --build "$build_dir" --parallel "$(nproc)"
