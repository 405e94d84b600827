#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) into build-fuzz/ with clang (ASan + UBSan + libFuzzer)
# and runs each on its committed seed corpus, tests/fuzz/corpus/<target>/.
#   scripts/fuzz.sh [--time SECONDS] [--runs N] [--no-build] [TARGET ...]
# --time S   run each target for S seconds (default 15: the CI smoke run)
# --runs N   run each target for N executions instead (the million-run figures in
#            docs/RELIABILITY.md use --runs 1000000); with --time after it, whichever comes first
# New inputs a --runs run discovers go to build-fuzz/corpus/<target>/ (kept between such runs);
# a timed run starts from the seeds alone (build-fuzz/corpus-smoke/, emptied first) so CI stays
# bounded; neither writes into the committed corpus. A crash, leak, timeout or out-of-memory
# leaves its input in build-fuzz/artifacts/<target>/ and makes the script exit 1. One line per
# target (executions, exec/s, peak RSS, corpus) is printed; full logs are in build-fuzz/logs/.
set -euo pipefail
cd "$(dirname "$0")/.."
time_limit=15
runs=()
build=1
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --time) time_limit=$2; shift 2 ;;
    --runs) runs=(-runs="$2"); time_limit=0; shift 2 ;;
    --no-build) build=0; shift ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
all=(fuzz_model_config fuzz_cluster fuzz_load_json fuzz_load_csv fuzz_load_npy fuzz_placement
     fuzz_plan fuzz_layout fuzz_cost_db)
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")
if ! command -v clang++ >/dev/null; then
  echo "fuzz.sh: clang++ not found (bash scripts/install-deps.sh installs it)" >&2
  exit 2
fi
dir=build-fuzz
if [ "$build" = 1 ]; then
  export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/moeplan-ccache}
  # -O1 -g1: libFuzzer's and ASan's recommended optimisation, line tables for the reports.
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1" -DCMAKE_C_COMPILER=clang \
    -DCMAKE_CXX_COMPILER=clang++ -DMOEPLAN_FUZZ=ON -DMOEPLAN_ENABLE_CUDA=OFF \
    -DMOEPLAN_ENABLE_MPI=OFF -DMOEPLAN_BUILD_GUI=OFF -DMOEPLAN_BUILD_TESTS=OFF \
    -DMOEPLAN_BUILD_BENCHMARKS=OFF >/dev/null
  cmake --build "$dir" --parallel "$(nproc)" --target "${targets[@]}"
fi
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
mkdir -p "$dir/logs"
failed=()
for t in "${targets[@]}"; do
  seeds=tests/fuzz/corpus/$t
  if [ ${#runs[@]} -gt 0 ]; then
    work=$dir/corpus/$t
  else
    work=$dir/corpus-smoke/$t
    rm -rf "$work"
  fi
  art=$dir/artifacts/$t
  mkdir -p "$work" "$art"
  case "$t" in
    fuzz_load_npy) dict=(-dict=tests/fuzz/npy.dict) ;;
    fuzz_load_csv|fuzz_cost_db) dict=() ;;
    *) dict=(-dict=tests/fuzz/json.dict) ;;
  esac
  log=$dir/logs/$t.log
  start=$(date +%s)
  if "$dir/bin/$t" "${runs[@]}" -max_total_time="$time_limit" -timeout=10 -rss_limit_mb=2048 \
      -max_len=16384 -print_final_stats=1 -artifact_prefix="$art/" "${dict[@]}" \
      "$work" "$seeds" >"$log" 2>&1; then
    status=ok
  else
    status=FAILED
    failed+=("$t")
  fi
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  peak=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -1)
  corpus=$(find "$work" -type f | wc -l)
  printf '%-18s %-6s %10s runs %6ss %7s exec/s peak %5s MB corpus %5s (seeds %s)\n' "$t" \
    "$status" "${execs:-?}" "$(($(date +%s) - start))" \
    "$(( ${execs:-0} / ( $(date +%s) - start > 0 ? $(date +%s) - start : 1 ) ))" "${peak:-?}" \
    "$corpus" "$(find "$seeds" -type f | wc -l)"
  [ "$status" = ok ] || { grep -m3 -E 'ERROR|SUMMARY|runtime error' "$log" >&2 || true; }
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz.sh: findings in ${failed[*]} (inputs in $dir/artifacts/, logs in $dir/logs/)" >&2
  exit 1
fi
