#!/usr/bin/env bash
# Fails when a tracked C++/CUDA file differs from .clang-format's layout.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.cu' '*.cuh')
[ ${#files[@]} -eq 0 ] && exit 0
clang-format --dry-run -Werror "${files[@]}"
echo "check-format: ${#files[@]} files formatted"
# The test suites compile as unity builds (several files one translation unit): a test file's
# helpers live in `namespace <the file's name> { namespace { ... } }`, so two files' `Fixture`
# or `model()` never meet in one batch.
bad=0
while IFS= read -r f; do
  stem=$(basename "$f" .cpp)
  if ! grep -A1 "^namespace $stem {\$" "$f" | grep -q '^namespace {$'; then
    echo "check-format: $f: its helpers belong in 'namespace $stem { namespace { ... } }'" >&2
    bad=1
  fi
done < <(git ls-files 'tests/*/test_*.cpp')
[ $bad -eq 0 ] || exit 1
echo "check-format: test files keep their helpers in a namespace of their own"
