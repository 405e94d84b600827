#!/usr/bin/env bash
# The prepared GPU check of issues 9 and 18: on a machine with an NVIDIA GPU, runs the GPU
# tests, a CUDA profile of the default model at 1/8 width and validate of its layer against the
# planner's prediction from that profile (one rank), the CUDA kernel benchmark, and
# `moeplan verify --backend cuda` on the default model (1024 and 16384 tokens, fp32/fp16/bf16);
# writes at most eight files into $OUT: summary.json, gpu-check.log, environment.txt,
# gpu_tests.json, cuda_profile.db, cuda_validate.json, bench_cuda_kernels.json, verify.json.
# Every step has its own time limit and runs even when one before it failed (the summary lists
# the failed ones). Budget: 9 minutes on one H200 with --prebuilt.
#
#   scripts/gpu-check.sh [--dry-run] [--no-build | --prebuilt] [--prepare]
#     (none)      build the three targets in Release in $BUILD_DIR (needs the project's
#                 dependencies there), then run everything on the GPU
#     --prebuilt  run binaries staged by --prepare in $BUILD_DIR/carry instead of building (for a
#                 bare GPU machine: carry that folder there); shared libraries the binaries miss
#                 (cuBLAS, NCCL) are looked up under /usr/local/cuda and Python's nvidia/* wheels
#     --prepare   no GPU needed: build Release in $BUILD_DIR (GUI and MPI off, x86-64-v3 host
#                 code so the binaries run on any current x86-64 server) and stage the binaries
#                 and the libraries a bare GPU machine may lack into $BUILD_DIR/carry; then stop
#     --dry-run   no GPU expected: checks the tools, runs the GPU tests (they must skip, saying
#                 why), the same profile/validate command lines on the CPU backend (quick, 1/32
#                 width) and verify's at 1/64 width, checks that --backend cuda refuses with the
#                 reason (writing nothing) and that the benchmark skips
#     --no-build  use the existing build in $BUILD_DIR (bin/)
#   env: OUT (default ./gpu-check-out), BUILD_DIR (default ./build-gpu), JOBS (default nproc),
#        PROFILE_SCALE (width divisor of the CUDA profile and validate, default 8),
#        SCALE_16K (width divisor of the 16384-token verify, default 8: the single-threaded dense
#        CPU reference of the full-width layer at 16384 tokens alone would take longer than the
#        budget; 1/8 width keeps the expert count, top-k and routing). The 1024-token verify runs
#        at full width. Host memory: ~15 GiB for each full-width verify process (three at once).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

DRY=0
BUILD=1
PREBUILT=0
PREPARE=0
for arg in "$@"; do
  case "$arg" in
    --dry-run) DRY=1 ;;
    --no-build) BUILD=0 ;;
    --prebuilt) BUILD=0; PREBUILT=1 ;;
    --prepare) PREPARE=1 ;;
    -h | --help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "gpu-check: unknown argument '$arg'" >&2; exit 2 ;;
  esac
done

OUT=${OUT:-$ROOT/gpu-check-out}
BUILD_DIR=${BUILD_DIR:-$ROOT/build-gpu}
JOBS=${JOBS:-$(nproc)}
SCALE_16K=${SCALE_16K:-8}
MODEL=qwen2-57b-a14b  # the default model (models/registry.hpp kDefaultModel)
BUDGET_S=540
TARGETS=(moeplan kernels_cuda_test bench_cuda_kernels)
export MOEPLAN_RESOURCES=$ROOT/resources  # the bundled models wherever the tree lies
mkdir -p "$OUT"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")  # intermediate files (not returned)
LOG=$OUT/gpu-check.log
: >"$LOG"
exec > >(tee -a "$LOG") 2>&1

START=$(date +%s)
MODE=gpu
[ "$DRY" = 1 ] && MODE=dry-run
[ "$PREPARE" = 1 ] && MODE=prepare
STEPS=()
elapsed() { echo $(($(date +%s) - START)); }
step() { echo; echo "== [$(elapsed) s] $*"; }
record() { STEPS+=("{\"step\": \"$1\", \"status\": \"$2\", \"at_s\": $(elapsed)}"); }
summary() {
  local status=$1 i
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
step "tools ($MODE)"
NVCC=$(command -v nvcc || true)
[ -z "$NVCC" ] && [ -x /usr/local/cuda/bin/nvcc ] && NVCC=/usr/local/cuda/bin/nvcc
{
  echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)"
  echo "host: $(hostname), $(nproc) cores, $(uname -m)"
  [ -n "$NVCC" ] && "$NVCC" --version | tail -2
  command -v cmake >/dev/null && cmake --version | head -1
  command -v ninja >/dev/null && echo "ninja $(ninja --version)"
} | tee "$OUT/environment.txt"
if [ "$BUILD" = 1 ] || [ "$PREPARE" = 1 ]; then
  [ -n "$NVCC" ] || fail "nvcc not found (PATH or /usr/local/cuda/bin)"
  command -v cmake >/dev/null || fail "cmake not found"
  command -v ninja >/dev/null || fail "ninja not found"
fi
DEVICE=
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv |
    tee -a "$OUT/environment.txt"
  DEVICE=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
elif [ "$DRY" = 1 ] || [ "$PREPARE" = 1 ]; then
  echo "nvidia-smi: no GPU visible (fine for $MODE)" | tee -a "$OUT/environment.txt"
else
  fail "no GPU visible to nvidia-smi: use --dry-run or --prepare on a machine without one"
fi
record tools ok

# ---- 2. build --------------------------------------------------------------------------------
CURRENT=build
BIN=$BUILD_DIR/bin
if [ "$PREPARE" = 1 ]; then
  step "prepare: Release build for carrying (GUI, MPI off; x86-64-v3) in $BUILD_DIR"
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMOEPLAN_BUILD_GUI=OFF \
    -DMOEPLAN_ENABLE_MPI=OFF -DMOEPLAN_NATIVE=OFF -DCMAKE_CXX_FLAGS=-march=x86-64-v3 \
    -DMOEPLAN_BUILD_TESTS=ON -DMOEPLAN_BUILD_BENCHMARKS=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    >"$WORK/configure.txt" || { cat "$WORK/configure.txt"; fail "configure"; }
  grep -q "CUDA backend ON" "$WORK/configure.txt" || fail "configure did not enable the CUDA backend"
  ninja -C "$BUILD_DIR" -j "$JOBS" "${TARGETS[@]}" || fail "build"
  rm -rf "$BUILD_DIR/carry"
  mkdir -p "$BUILD_DIR/carry"
  for exe in "${TARGETS[@]}"; do cp "$BIN/$exe" "$BUILD_DIR/carry/"; done
  # Libraries a bare GPU machine may lack: everything the binaries link but the C and C++
  # runtimes (the GPU machine's own are as new or newer) and CUDA's (the driver's and the
  # toolkit's there: cuBLAS, NCCL).
  for exe in "${TARGETS[@]}"; do
    ldd "$BIN/$exe" | awk '$3 ~ /^\// {print $1, $3}'
  done | sort -u | grep -Ev '^(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt|ld-linux[^ ]*|libcuda|libcudart|libcublas|libcublasLt|libnccl)\.so' |
    while read -r _ lib; do cp -L "$lib" "$BUILD_DIR/carry/"; done
  du -sh "$BUILD_DIR/carry"
  ls -la "$BUILD_DIR/carry"
  record build ok
  step "prepared: carry ${BUILD_DIR#"$ROOT"/}/carry to the GPU machine and run there:"
  echo "  BUILD_DIR=${BUILD_DIR#"$ROOT"/} scripts/gpu-check.sh --prebuilt"
  summary passed
  exit 0
elif [ "$BUILD" = 1 ]; then
  step "configure and build (Release, sm_90, GUI and MPI off) in $BUILD_DIR with $JOBS jobs"
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMOEPLAN_BUILD_GUI=OFF \
    -DMOEPLAN_ENABLE_MPI=OFF -DMOEPLAN_BUILD_TESTS=ON -DMOEPLAN_BUILD_BENCHMARKS=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 >"$WORK/configure.txt" ||
    { cat "$WORK/configure.txt"; fail "configure (missing dependencies? see --prepare/--prebuilt)"; }
  grep -q "CUDA backend ON" "$WORK/configure.txt" || fail "configure did not enable the CUDA backend"
  ninja -C "$BUILD_DIR" -j "$JOBS" "${TARGETS[@]}" || fail "build"
  record build ok
elif [ "$PREBUILT" = 1 ]; then
  step "build skipped (--prebuilt): binaries from $BUILD_DIR/carry"
  BIN=$BUILD_DIR/carry
  record build prebuilt
else
  step "build skipped (--no-build): using $BIN"
  record build skipped
fi
for exe in "${TARGETS[@]}"; do
  [ -x "$BIN/$exe" ] || fail "$BIN/$exe missing (targets: ${TARGETS[*]})"
done

# Shared libraries the binaries cannot find (a bare GPU machine): look in the CUDA toolkit and
# in Python's NVIDIA wheels, and put what is found on LD_LIBRARY_PATH.
CURRENT=libraries
missing() { ldd "$BIN/$1" 2>/dev/null | awk '/not found/ {print $1}'; }
export LD_LIBRARY_PATH=$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for exe in "${TARGETS[@]}"; do
  for lib in $(missing "$exe"); do
    dir=$(find /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets /opt /usr/lib \
      /usr/local/lib -name "$lib" 2>/dev/null | head -1 | xargs -r dirname)
    [ -n "$dir" ] && export LD_LIBRARY_PATH=$dir:$LD_LIBRARY_PATH && echo "found $lib in $dir"
  done
done
for exe in "${TARGETS[@]}"; do
  [ -z "$(missing "$exe")" ] || fail "$exe: shared libraries not found: $(missing "$exe" | tr '\n' ' ')"
done
"$BIN/moeplan" --version | tee -a "$OUT/environment.txt"

# On the GPU every step below runs even when one before it failed (a lent GPU is rare: one run
# must bring back all it can); each is bounded by its own timeout, and the summary lists the
# failed steps. In --dry-run the first failure ends the check.
FAILED_STEPS=()
step_failed() {
  echo "gpu-check: step $CURRENT FAILED: $*"
  [ "$DRY" = 1 ] && fail "$*"
  record "$CURRENT" failed
  FAILED_STEPS+=("$CURRENT")
}
# timeout(1) with the signal a step stops cleanly on; exit 124 means the step ran out of time.
bounded() { local t=$1; shift; timeout -s INT -k 10 "$t" "$@"; }

# ---- 3. GPU tests ----------------------------------------------------------------------------
CURRENT=gpu_tests
step "GPU tests (kernels_cuda_test: every op against the CPU backend, layer, verify, NCCL)"
set +e
bounded 120 "$BIN/kernels_cuda_test" --gtest_color=no --gtest_output="json:$OUT/gpu_tests.json" \
  >"$WORK/gpu_tests.txt" 2>&1
rc=$?
set -e
grep -E "^\[ +(OK|FAILED|SKIPPED) +\].*ms\)$|^\[  PASSED  \]|no usable|multi-GPU|Failure|Expected|Which is" \
  "$WORK/gpu_tests.txt" | sort -u | head -80 || true
mapfile -t skipped < <(grep -oE "^\[  SKIPPED \] Cuda[A-Za-z]*\.[A-Za-z0-9_]+" "$WORK/gpu_tests.txt" |
  awk '{print $4}' | sort -u)
if [ "$rc" != 0 ]; then
  cat "$WORK/gpu_tests.txt" >>"$LOG"
  step_failed "GPU tests failed (exit $rc; full output in the log)"
elif [ "$DRY" = 1 ]; then
  [ "${#skipped[@]}" -gt 0 ] || fail "--dry-run: expected the GPU tests to skip without a device"
  grep -q "no usable CUDA device: " "$WORK/gpu_tests.txt" || fail "skips do not say why"
  echo "dry-run: ${#skipped[@]} GPU tests skipped with their reason (as they must without a GPU)"
  record gpu_tests ok
else
  bad=()
  for t in "${skipped[@]}"; do
    # One GPU cannot run a two-rank NCCL group; everything else must run.
    [ "$t" = CudaOps.NcclCollectivesOnTwoGpus ] || bad+=("$t")
  done
  if [ "${#bad[@]}" -gt 0 ]; then step_failed "GPU tests skipped on a GPU machine: ${bad[*]}"; else
    record gpu_tests ok; fi
fi

# ---- 4. CUDA profile and validate (issue 18) -------------------------------------------------
# One rank on the one GPU: every compute op of the profile timed by CUDA events into a cost
# database (cuda_profile.db), then validate's whole layer on the same GPU against the planner's
# prediction from it (cuda_validate.json). The scaled default model keeps both inside the budget.
CURRENT=cuda_profile
PSCALE=${PROFILE_SCALE:-8}
PROFILE=("$BIN/moeplan" profile --model "$MODEL" --scale "$PSCALE" --dtype bf16 --ranks 1)
VALIDATE=("$BIN/moeplan" validate --model "$MODEL" --scale "$PSCALE" --dtype bf16 --ranks 1)
if [ "$DRY" = 1 ]; then
  step "CUDA profile and validate: --backend cuda must refuse with the reason"
  for cmd in profile validate; do
    set +e
    if [ "$cmd" = profile ]; then
      "${PROFILE[@]}" --backend cuda --quick --out "$WORK/refused.db" >/dev/null 2>"$WORK/refused.txt"
    else
      "${VALIDATE[@]}" --backend cuda --costs "$WORK/refused.db" >/dev/null 2>"$WORK/refused.txt"
    fi
    rc=$?
    set -e
    cat "$WORK/refused.txt"
    [ "$rc" = 2 ] && grep -qE "no usable CUDA device|cuda: not compiled in" "$WORK/refused.txt" ||
      fail "$cmd --backend cuda without a device: expected exit 2 and the reason (got $rc)"
    [ ! -e "$WORK/refused.db" ] || fail "$cmd --backend cuda refused but wrote $WORK/refused.db"
  done
  step "CUDA profile and validate: the same command lines on the CPU backend (quick, 1/32 width)"
  PROFILE=("$BIN/moeplan" profile --model "$MODEL" --scale 32 --dtype bf16 --ranks 1 --quick)
  VALIDATE=("$BIN/moeplan" validate --model "$MODEL" --scale 32 --dtype bf16 --ranks 1)
  BACKEND=cpu
  TOKENS=64,256
else
  step "CUDA profile on the GPU: $MODEL at 1/$PSCALE width, bf16, GEMM rows to 4096"
  BACKEND=cuda
  TOKENS=256,1024,4096
  PROFILE+=(--max-tokens 4096 --max-seconds 0.1)
fi
set +e
bounded 150 "${PROFILE[@]}" --backend "$BACKEND" --out "$WORK/cuda_profile.db" 2>&1 |
  tr '\r' '\n' | grep -v "done (" | tail -5
rc=${PIPESTATUS[0]}
set -e
# 130: stopped at its time limit, 1: some points failed verification; either way every
# completed point is kept and validated below.
case "$rc" in
  0) record cuda_profile ok ;;
  130) echo "gpu-check: profile stopped at its time limit; its points are kept"
    record cuda_profile partial ;;
  *) step_failed "profile --backend $BACKEND (exit $rc)" ;;
esac
if [ -s "$WORK/cuda_profile.db" ]; then
  [ "$DRY" = 1 ] || cp "$WORK/cuda_profile.db" "$OUT/cuda_profile.db"
  CURRENT=cuda_validate
  step "validate --backend $BACKEND: the layer against the planner's prediction from that profile"
  set +e
  bounded 80 "${VALIDATE[@]}" --backend "$BACKEND" --tokens "$TOKENS" --max-seconds 0.5 \
    --costs "$WORK/cuda_profile.db" --json >"$WORK/cuda_validate.json" 2>"$WORK/cuda_validate.err"
  rc=$?
  set -e
  tail -3 "$WORK/cuda_validate.err" | tr '\r' '\n' | tail -2
  if [ "$rc" = 0 ]; then
    [ "$DRY" = 1 ] || cp "$WORK/cuda_validate.json" "$OUT/cuda_validate.json"
    python3 - "$WORK/cuda_validate.json" <<'PY' || true
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["rows"]:
    print(f'{r["layout"]} {r["dispatcher"]:<13} {r["tokens"]:>5}  measured {r["measured_ms"]:8.3f} ms'
          f'  predicted {r["predicted_ms"]:8.3f} ms  error {100 * r["error"]:+6.1f}%'
          f'  roofline {100 * r["roofline_error"]:+6.1f}%'
          + (f'  STAND-IN (not compared): {r["stand_in"]}' if r.get("stand_in") else ''))
s = d["summary"]
if s["compared_cases"] > 0:
    print(f'cost DB: median |error| {100 * s["median_abs_error"]:.1f}%, worst '
          f'{100 * s["worst_abs_error"]:.1f}%; roofline: median {100 * s["roofline_median_abs_error"]:.1f}%'
          f', worst {100 * s["roofline_worst_abs_error"]:.1f}% ({s["compared_cases"]} cases)')
else:
    print('cost DB and roofline: no case compared')
if s["stand_in_cases"] > 0:
    print(f'{s["stand_in_cases"]} case(s) left out: a stand-in ran for one of their kernels')
PY
    record cuda_validate ok
  else
    cat "$WORK/cuda_validate.err"
    # Exit 1 with JSON: a case failed verification; the table is still worth bringing back.
    [ "$DRY" = 1 ] || [ ! -s "$WORK/cuda_validate.json" ] ||
      cp "$WORK/cuda_validate.json" "$OUT/cuda_validate.json"
    step_failed "validate --backend $BACKEND (exit $rc)"
  fi
fi
if [ "$DRY" = 0 ] && [ -s "$WORK/cuda_profile.db" ]; then
  # The expert GEMMs at the model's full width, added to the same database after validate used
  # it (a second run of its own): what plans of the real model on this GPU price experts from.
  CURRENT=cuda_profile_full
  step "CUDA profile of the full-width GEMMs ($MODEL, bf16, rows to 4096), added to cuda_profile.db"
  set +e
  bounded 60 "$BIN/moeplan" profile --backend cuda --model "$MODEL" --dtype bf16 --ranks 1 \
    --ops gemm --max-tokens 4096 --max-seconds 0.1 --resume --out "$WORK/cuda_profile.db" 2>&1 |
    tr '\r' '\n' | grep -v "done (" | tail -3
  rc=${PIPESTATUS[0]}
  set -e
  cp "$WORK/cuda_profile.db" "$OUT/cuda_profile.db"
  if [ "$rc" = 0 ] || [ "$rc" = 130 ]; then
    record cuda_profile_full "$([ "$rc" = 0 ] && echo ok || echo partial)"
  else
    step_failed "full-width profile (exit $rc)"
  fi
fi

# ---- 5. kernel benchmark ---------------------------------------------------------------------
CURRENT=benchmark
step "CUDA kernel benchmark (grouped FFN vs dense cuBLAS, fp8 block FFN, router + permute)"
set +e
bounded 60 "$BIN/bench_cuda_kernels" --benchmark_out="$OUT/bench_cuda_kernels.json" \
  --benchmark_out_format=json --benchmark_counters_tabular=true >"$WORK/bench.txt" 2>&1
rc=$?
set -e
cat "$WORK/bench.txt"
if [ "$rc" != 0 ]; then
  step_failed "bench_cuda_kernels (exit $rc)"
elif [ "$DRY" = 1 ]; then
  grep -q "skipped: no usable CUDA device" "$WORK/bench.txt" ||
    fail "--dry-run: expected the benchmark to skip with its reason"
  record benchmark ok
elif [ -s "$OUT/bench_cuda_kernels.json" ]; then
  record benchmark ok
else
  step_failed "no benchmark JSON written"
fi

# ---- 6. verify -------------------------------------------------------------------------------
# Six processes at once (2 token counts × 3 dtypes): the dense reference is single-threaded CPU
# work, so they overlap on the host's cores. verify.json collects the six JSON outputs.
CURRENT=verify
VERIFY=("$BIN/moeplan" verify --model "$MODEL" --ranks 1 --layouts 1x1 --dispatcher a2av --json)
if [ "$DRY" = 1 ]; then
  step "verify: --backend cuda must refuse with the reason"
  set +e
  "${VERIFY[@]}" --backend cuda --dtype bf16 --tokens 64 --scale 64 >/dev/null \
    2>"$WORK/verify_cuda_refused.txt"
  rc=$?
  set -e
  cat "$WORK/verify_cuda_refused.txt"
  [ "$rc" = 2 ] && grep -qE "no usable CUDA device|cuda: not compiled in" "$WORK/verify_cuda_refused.txt" ||
    fail "--backend cuda without a device: expected exit 2 and the reason (got $rc)"
  BACKEND=cpu
  SCALE_1K=64
  SCALE_16K=64
  step "verify: the same command lines on the CPU backend at 1/64 width"
else
  BACKEND=cuda
  SCALE_1K=1
  step "verify on the GPU: $MODEL, 1024 tokens at full width, 16384 at 1/$SCALE_16K width"
fi
pids=()
cases=()
for tokens in 1024 16384; do
  scale=$SCALE_1K
  [ "$tokens" = 16384 ] && scale=$SCALE_16K
  for dtype in fp32 fp16 bf16; do
    f="$WORK/verify_${tokens}_${dtype}"
    bounded 100 "${VERIFY[@]}" --backend "$BACKEND" --tokens "$tokens" --scale "$scale" \
      --dtype "$dtype" >"$f.json" 2>"$f.err" &
    pids+=($!)
    cases+=("$f")
  done
done
failed=()
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || failed+=("${cases[$i]##*/}")
done
{
  echo "["
  first=1
  for i in "${!cases[@]}"; do
    [ -s "${cases[$i]}.json" ] || continue
    [ "$first" = 1 ] || echo ","
    first=0
    cat "${cases[$i]}.json"
  done
  echo "]"
} >"$OUT/verify.json"
for f in "${cases[@]}"; do
  grep -E '"(dtype|tokens|max_abs_diff|max_bound_use|layer_ms)"' "$f.json" | tr -d ' ,' |
    paste - - - - - -d' ' || true
done
if [ "${#failed[@]}" -gt 0 ]; then
  for f in "${failed[@]}"; do echo "--- $f"; tail -5 "$WORK/$f.err"; done
  step_failed "verify failed or ran out of time: ${failed[*]}"
else
  notpassed=()
  for f in "${cases[@]}"; do grep -q '"passed": true' "$f.json" || notpassed+=("${f##*/}"); done
  if [ "${#notpassed[@]}" -gt 0 ]; then step_failed "not passed: ${notpassed[*]}"; else
    record verify ok; fi
fi

rm -rf "$WORK"
step "done in $(elapsed) s (budget $BUDGET_S s); results in $OUT"
[ "$(elapsed)" -le "$BUDGET_S" ] || echo "gpu-check: WARNING: over the $BUDGET_S s budget"
if [ "${#FAILED_STEPS[@]}" -gt 0 ]; then
  echo "gpu-check: FAILED steps: ${FAILED_STEPS[*]}"
  summary failed
  exit 1
fi
summary passed
