#!/usr/bin/env bash
# The README's second command: install what is missing, build, and run the whole test suite.
#   --sanitize   build into build-asan/ with ASan+UBSan (CUDA off) and run the suite there
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
if [ "${1:-}" = "--sanitize" ]; then
  export BUILD_DIR=build-asan
  bash scripts/build.sh -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMOEPLAN_SANITIZE=ON \
    -DMOEPLAN_ENABLE_CUDA=OFF -DMOEPLAN_BUILD_BENCHMARKS=OFF
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
  export LSAN_OPTIONS=suppressions=$PWD/scripts/lsan.supp:print_suppressions=0
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
else
  export BUILD_DIR=build
  bash scripts/build.sh
fi
cd "$BUILD_DIR"
ctest --output-on-failure --timeout 600 -j "$(nproc)"
