#!/usr/bin/env bash
# Fails when a tracked C++/CUDA file differs from .clang-format's layout.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.cu' '*.cuh')
[ ${#files[@]} -eq 0 ] && exit 0
clang-format --dry-run -Werror "${files[@]}"
echo "check-format: ${#files[@]} files formatted"
