#!/usr/bin/env bash
# The prepared GPU check of issue 9, for a machine with one (or more) NVIDIA GPUs: builds the
# CUDA pieces in Release, runs the GPU tests, `moeplan verify --backend cuda` on the default model
# (1024 and 16384 tokens, fp32/fp16/bf16) and the CUDA kernel benchmark; writes JSON, the
# environment and a log into $OUT. Budget: 8 minutes on one H200, build included.
#
#   scripts/gpu-check.sh [--dry-run] [--no-build]
#     --dry-run   no GPU expected: checks the tools, builds (unless --no-build), runs the GPU tests
#                 (they must skip, saying why), the same verify command lines on the CPU backend
#                 at 1/64 width, checks that --backend cuda refuses with the reason, and that the
#                 benchmark skips. Nothing is measured.
#     --no-build  use the existing build in $BUILD_DIR
#   env: OUT (default ./gpu-check-out), BUILD_DIR (default ./build-gpu), JOBS (default nproc),
#        SCALE_16K (width divisor of the 16384-token verify, default 8: the single-threaded dense
#        CPU reference of the full-width layer at 16384 tokens alone would take longer than the
#        budget; 1/8 width keeps the expert count, top-k and routing). The 1024-token verify runs
#        at full width. Host memory: ~15 GiB for each full-width verify process (three at once).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

DRY=0
BUILD=1
for arg in "$@"; do
  case "$arg" in
    --dry-run) DRY=1 ;;
    --no-build) BUILD=0 ;;
    -h | --help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "gpu-check: unknown argument '$arg' (expected --dry-run, --no-build)" >&2; exit 2 ;;
  esac
done

OUT=${OUT:-$ROOT/gpu-check-out}
BUILD_DIR=${BUILD_DIR:-$ROOT/build-gpu}
JOBS=${JOBS:-$(nproc)}
SCALE_16K=${SCALE_16K:-8}
MODEL=qwen2-57b-a14b  # the default model (models/registry.hpp kDefaultModel)
BUDGET_S=480
mkdir -p "$OUT"
LOG=$OUT/gpu-check.log
: >"$LOG"
exec > >(tee -a "$LOG") 2>&1

START=$(date +%s)
MODE=$([ "$DRY" = 1 ] && echo dry-run || echo gpu)
STEPS=()
elapsed() { echo $(($(date +%s) - START)); }
step() { echo; echo "== [$(elapsed) s] $*"; }
record() { STEPS+=("{\"step\": \"$1\", \"status\": \"$2\", \"at_s\": $(elapsed)}"); }
summary() {
  local status=$1
  {
    echo "{"
    echo "  \"mode\": \"$MODE\","
    echo "  \"status\": \"$status\","
    echo "  \"commit\": \"$(git rev-parse HEAD 2>/dev/null || echo unknown)\","
    echo "  \"date_utc\": \"$(date -u +%Y-%m-%dT%H:%M:%SZ)\","
    echo "  \"device\": \"${DEVICE:-none}\","
    echo "  \"elapsed_s\": $(elapsed),"
    echo "  \"budget_s\": $BUDGET_S,"
    echo "  \"steps\": ["
    local i
    for i in "${!STEPS[@]}"; do
      echo "    ${STEPS[$i]}$([ "$i" -lt $((${#STEPS[@]} - 1)) ] && echo ,)"
    done
    echo "  ]"
    echo "}"
  } >"$OUT/summary.json"
}
fail() {
  echo "gpu-check: FAILED: $*"
  record "${CURRENT:-setup}" failed
  summary failed
  exit 1
}

# ---- 1. tools --------------------------------------------------------------------------------
CURRENT=tools
step "tools"
NVCC=$(command -v nvcc || true)
[ -z "$NVCC" ] && [ -x /usr/local/cuda/bin/nvcc ] && NVCC=/usr/local/cuda/bin/nvcc
[ -n "$NVCC" ] || fail "nvcc not found (PATH or /usr/local/cuda/bin)"
command -v cmake >/dev/null || fail "cmake not found"
command -v ninja >/dev/null || fail "ninja not found"
{
  echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)"
  echo "host: $(hostname)"
  "$NVCC" --version | tail -2
  cmake --version | head -1
  echo "ninja $(ninja --version)"
} | tee "$OUT/environment.txt"
DEVICE=
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv |
    tee -a "$OUT/environment.txt"
  DEVICE=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
elif [ "$DRY" = 1 ]; then
  echo "nvidia-smi: no GPU visible (expected in --dry-run)" | tee -a "$OUT/environment.txt"
else
  fail "no GPU visible to nvidia-smi: run with --dry-run on a machine without one"
fi
record tools ok

# ---- 2. build --------------------------------------------------------------------------------
CURRENT=build
if [ "$BUILD" = 1 ]; then
  step "configure and build (Release, sm_90, GUI off) in $BUILD_DIR with $JOBS jobs"
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMOEPLAN_BUILD_GUI=OFF \
    -DMOEPLAN_BUILD_TESTS=ON -DMOEPLAN_BUILD_BENCHMARKS=ON -DCMAKE_CUDA_ARCHITECTURES=90 |
    tee "$OUT/configure.txt" | grep -E "moeplan:|Error" || true
  grep -q "CUDA backend ON" "$OUT/configure.txt" || fail "configure did not enable the CUDA backend"
  ninja -C "$BUILD_DIR" -j "$JOBS" moeplan kernels_cuda_test bench_cuda_kernels ||
    fail "build"
  record build ok
else
  step "build skipped (--no-build): using $BUILD_DIR"
  record build skipped
fi
BIN=$BUILD_DIR/bin
for exe in moeplan kernels_cuda_test bench_cuda_kernels; do
  [ -x "$BIN/$exe" ] || fail "$BIN/$exe missing (build the targets moeplan kernels_cuda_test bench_cuda_kernels)"
done

# ---- 3. GPU tests ----------------------------------------------------------------------------
CURRENT=gpu_tests
step "GPU tests (kernels_cuda_test: every op against the CPU backend, layer, verify, NCCL)"
set +e
"$BIN/kernels_cuda_test" --gtest_output="json:$OUT/gpu_tests.json" >"$OUT/gpu_tests.txt" 2>&1
rc=$?
set -e
grep -E "^\[ +(OK|FAILED|SKIPPED) +\].*ms\)$|^\[  PASSED  \]|no usable|need a multi-GPU" \
  "$OUT/gpu_tests.txt" | sort -u | head -60 || true
[ "$rc" = 0 ] || fail "GPU tests failed (exit $rc), see $OUT/gpu_tests.txt"
mapfile -t skipped < <(grep -oE "^\[  SKIPPED \] Cuda[A-Za-z]*\.[A-Za-z0-9_]+" "$OUT/gpu_tests.txt" |
  awk '{print $4}' | sort -u)
if [ "$DRY" = 1 ]; then
  [ "${#skipped[@]}" -gt 0 ] || fail "--dry-run: expected the GPU tests to skip without a device"
  grep -q "no usable CUDA device: " "$OUT/gpu_tests.txt" || fail "skips do not say why"
  echo "dry-run: ${#skipped[@]} GPU tests skipped with their reason (as they must without a GPU)"
else
  for t in "${skipped[@]}"; do
    # One GPU cannot run a two-rank NCCL group; everything else must run.
    [ "$t" = CudaOps.NcclCollectivesOnTwoGpus ] || fail "GPU test $t skipped on a GPU machine"
  done
fi
record gpu_tests ok

# ---- 4. verify -------------------------------------------------------------------------------
# Six processes at once (2 token counts × 3 dtypes): the dense reference is single-threaded CPU
# work, so they overlap on the host's cores; one JSON per case.
CURRENT=verify
VERIFY=("$BIN/moeplan" verify --model "$MODEL" --ranks 1 --layouts 1x1 --dispatcher a2av --json)
if [ "$DRY" = 1 ]; then
  step "verify: --backend cuda must refuse with the reason"
  set +e
  "${VERIFY[@]}" --backend cuda --dtype bf16 --tokens 64 --scale 64 >/dev/null \
    2>"$OUT/verify_cuda_refused.txt"
  rc=$?
  set -e
  cat "$OUT/verify_cuda_refused.txt"
  [ "$rc" = 2 ] && grep -q "no usable CUDA device" "$OUT/verify_cuda_refused.txt" ||
    fail "--backend cuda without a device: expected exit 2 and the reason (got $rc)"
  BACKEND=cpu
  SCALE_1K=64
  SCALE_16K=64
  step "verify: the same command lines on the CPU backend at 1/64 width"
else
  BACKEND=cuda
  SCALE_1K=1
  step "verify on the GPU: $MODEL, 1024 tokens at full width and 16384 at 1/$SCALE_16K width, fp32/fp16/bf16"
fi
pids=()
cases=()
for tokens in 1024 16384; do
  scale=$([ "$tokens" = 1024 ] && echo "$SCALE_1K" || echo "$SCALE_16K")
  for dtype in fp32 fp16 bf16; do
    f="$OUT/verify_${tokens}_${dtype}"
    "${VERIFY[@]}" --backend "$BACKEND" --tokens "$tokens" --scale "$scale" --dtype "$dtype" \
      >"$f.json" 2>"$f.err" &
    pids+=($!)
    cases+=("$f")
  done
done
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || fail "verify ${cases[$i]##*/}: see ${cases[$i]}.json and .err"
done
for f in "${cases[@]}"; do
  grep -q '"passed": true' "$f.json" || fail "${f##*/}: not passed"
  grep -E '"(dtype|tokens|max_abs_diff|max_bound_use|layer_ms)"' "$f.json" | tr -d ' ,' |
    paste - - - - - -d' ' || true
done
record verify ok

# ---- 5. kernel benchmark ---------------------------------------------------------------------
CURRENT=benchmark
step "CUDA kernel benchmark (grouped FFN vs dense cuBLAS, router + permute)"
"$BIN/bench_cuda_kernels" --benchmark_out="$OUT/bench_cuda_kernels.json" \
  --benchmark_out_format=json --benchmark_counters_tabular=true | tee "$OUT/bench_cuda_kernels.txt" ||
  fail "bench_cuda_kernels"
if [ "$DRY" = 1 ]; then
  grep -q "skipped: no usable CUDA device" "$OUT/bench_cuda_kernels.txt" ||
    fail "--dry-run: expected the benchmark to skip with its reason"
else
  [ -s "$OUT/bench_cuda_kernels.json" ] || fail "no benchmark JSON written"
fi
record benchmark ok

step "done in $(elapsed) s (budget $BUDGET_S s); results in $OUT"
[ "$(elapsed)" -le "$BUDGET_S" ] || echo "gpu-check: WARNING: over the $BUDGET_S s budget"
summary passed
