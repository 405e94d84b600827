#!/usr/bin/env bash
# The README's second command: install what is missing, build, and run the whole test suite.
#   --sanitize   build into build-asan/ with ASan+UBSan (CUDA off) and run the suite there
#   --tsan       build into build-tsan/ with ThreadSanitizer (CUDA off) and run the tests of
#                the code with threads there (not the mpirun tests: Open MPI is not
#                instrumented); suppressions: scripts/tsan.supp (docs/RELIABILITY.md)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
if [ "${1:-}" = "--tsan" ]; then
  # The tests of the code with threads: in-process ranks and the rank watchdog (kernels_test),
  # the profiler on in-process ranks (profiler_test), and of cli_test the tests whose TSan-built
  # moeplan starts ranks — profile, validate, verify, Ctrl-C, kill -9 and fault injection
  # (ProfileCli, CliVerify); and `best`'s layer search, which shares the layers among the cores
  # (planner_test's Best.*: `place`, `plan --placement best` and `rebalance` run that same
  # function). The other CLI commands start no thread, so TSan has nothing to check there. Not
  # gui_test: Debian's Qt is not built with TSan, which then cannot see Qt's thread-pool
  # hand-offs (docs/RELIABILITY.md). -O1 -g1: ThreadSanitizer's recommended optimisation, line
  # tables for its reports.
  cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1" -DMOEPLAN_TSAN=ON -DMOEPLAN_ENABLE_CUDA=OFF \
    -DMOEPLAN_BUILD_BENCHMARKS=OFF >/dev/null
  suites=(kernels_test profiler_test cli_test planner_test)
  cmake --build build-tsan --parallel "$(nproc)" --target moeplan "${suites[@]}"
  export TSAN_OPTIONS="suppressions=$PWD/scripts/tsan.supp halt_on_error=1 second_deadlock_stack=1"
  for suite in "${suites[@]}"; do
    filter='*'
    [ "$suite" = cli_test ] && filter='ProfileCli.*:CliVerify.*'
    # The fp8 block-scale arithmetic on every layout: no thread of its own beyond the fp8 sends of
    # every dispatcher that Fp8WeightsSendFp8OnEveryDispatcher runs here; 159 s under TSan on an
    # Intel Xeon (docs/RELIABILITY.md). The release and ASan+UBSan suites run it.
    [ "$suite" = kernels_test ] && filter='-MoeLayer.Fp8BlockWeightsOnEveryLayoutAndDispatcher'
    [ "$suite" = planner_test ] && filter='Best.*'
    echo "tsan: $suite ($filter)"
    "build-tsan/bin/$suite" --gtest_brief=1 "--gtest_filter=$filter"
  done
  exit 0
elif [ "${1:-}" = "--sanitize" ]; then
  export BUILD_DIR=build-asan
  # -O1 -g1 (line tables, all a report's stack needs), as AddressSanitizer recommends: about half
  # the compile time of -O2 -g (this build was ~21 of CI's minutes, the largest single step); the
  # unity build of the libraries and test suites (MOEPLAN_UNITY_BUILD) halves it again
  # (docs/RELIABILITY.md).
  bash scripts/build.sh -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1" -DMOEPLAN_SANITIZE=ON -DMOEPLAN_ENABLE_CUDA=OFF \
    -DMOEPLAN_BUILD_BENCHMARKS=OFF
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
  export LSAN_OPTIONS=suppressions=$PWD/scripts/lsan.supp:print_suppressions=0
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
else
  export BUILD_DIR=build
  bash scripts/build.sh
fi
cd "$BUILD_DIR"
# The JUnit file lets scripts/check_suite.py (run by .ci/run) prove which suites actually ran.
ctest --output-on-failure --timeout 600 -j "$(nproc)" --output-junit "$PWD/ctest-results.xml"
