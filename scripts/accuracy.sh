#!/usr/bin/env bash
# Profiler accuracy on this machine (issue 18): profile, then validate, in each CPU mode —
# in-process ranks (what moeplan-gui's Profiling view runs), mpirun -np 2 and mpirun -np 4 —
# RUNS times, each run with its own fresh profile. Mode `attn` (issue 20) profiles the attention
# core alone on one rank and runs validate --attention (contexts 512 and 2048, decode batches 3
# and 12: off the profile's grid). Mode `layer` profiles Qwen3-30B-A3B at full width on one rank
# (every op) and runs validate --attention --scope block, then --scope layer (the whole decoder
# layer: attention block + MoE layer) at the same contexts and batches; it prints a line for
# each. Mode `mla` does the same for DeepSeek-V2-Lite (MLA: prefill expanded, decode absorbed).
# Prints one line per run and mode (median and
# worst |error| of the cost DB and of the roofline over layouts x dispatchers x 256/512/1024
# tokens), validate's own pace check (the profile's recorded probe range against validate's
# probe before and after its cases, with its drift and STALE PROFILE beyond 5%: docs/PROFILER.md),
# how many unsettled profile points and validate cases were measured again after the others,
# and the machine's pace before the profile and after validate (bench_kernels' dense GEMM and bf16
# grouped FFN), and keeps every profile and validate JSON under OUT.
#
#   scripts/accuracy.sh [--moeplan BIN] [--out DIR] [--runs N] [--first K] [--modes inproc,np2,np4,attn,layer,mla]
#       [--cold-mib MIB]
#
# Runs are numbered K..K+N-1 (default K = 1), so a series can be continued into the same DIR.
# --cold-mib passes profile's operand rotation on (default: profile's own, 256 MiB); validate reads
# it from the profile, so both sides are equally cold (docs/PROFILER.md, "Cold operands").
#
# The documented commands of docs/PROFILER.md, unchanged: profile --scale 8 --max-tokens 1024
# --max-seconds 0.4; validate --scale 8 --tokens 256,512,1024 --max-seconds 2. Run it on quiet
# cores: another tenant's work on the same cores slows the layer and no profile predicts it.
set -euo pipefail
cd "$(dirname "$0")/.."
moeplan=build/bin/moeplan
out=/tmp/moeplan-accuracy
runs=3
first=1
modes=inproc,np2,np4
cold=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --moeplan) moeplan=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --first) first=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    --cold-mib) cold=(--cold-mib "$2"); shift 2 ;;
    -h|--help) sed -n 2,23p "$0"; exit 0 ;;
    *) echo "accuracy.sh: unknown argument '$1' (expected --moeplan, --out, --runs, --first, --modes or --cold-mib)" >&2; exit 2 ;;
  esac
done
[[ -x $moeplan ]] || { echo "accuracy.sh: $moeplan: no such executable (build first)" >&2; exit 2; }
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "accuracy.sh: --runs: expected a positive integer, got '$runs'" >&2; exit 2; }
[[ $first =~ ^[1-9][0-9]*$ ]] || { echo "accuracy.sh: --first: expected a positive integer, got '$first'" >&2; exit 2; }
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
echo "accuracy: $(date -u +%FT%TZ), $(nproc) cores of ${cpu:-an unknown CPU}, $("$moeplan" --version | head -1)"

launch() {  # mode, then the moeplan arguments
  local mode=$1
  shift
  case $mode in
    inproc) "$moeplan" "$@" --ranks 2 ;;
    np2) mpirun --oversubscribe -np 2 "$moeplan" "$@" ;;
    np4) mpirun --oversubscribe -np 4 "$moeplan" "$@" ;;
    attn | layer | mla) "$moeplan" "$@" --ranks 1 ;;
    *) echo "accuracy.sh: unknown mode '$mode' (expected inproc, np2, np4, attn, layer or mla)" >&2; return 2 ;;
  esac
}

# The machine's own pace around each run (this machine is shared: its GEMM rate and memory speed
# have moved by up to 2x between days and by tens of percent within minutes), so a reader can
# tell drift between the profile and validate from model error: a dense GEMM (compute) and a
# grouped bf16 expert FFN at 64 rows (weight streaming), from bench_kernels beside moeplan.
bench=$(dirname "$moeplan")/bench_kernels
machine_pace() {
  if [[ ! -x $bench ]]; then
    echo "$bench not built"
    return
  fi
  "$bench" --benchmark_filter='BM_EigenDenseGemm/512|BM_GroupedExpertFfnBf16/64' \
    --benchmark_min_time=0.3 --benchmark_format=json 2>/dev/null | python3 -c '
import json, sys
b = {x["name"].split("/")[0]: x for x in json.load(sys.stdin)["benchmarks"]}
rate = b["BM_EigenDenseGemm"]["GFLOP"]
ms = b["BM_GroupedExpertFfnBf16"]["real_time"]
print("GEMM %.1f GFLOP/s, bf16 FFN at 64 rows %.1f ms" % (rate, ms))' ||
    echo "bench_kernels failed"
}

IFS=, read -r -a mode_list <<<"$modes"
for run in $(seq "$first" "$((first + runs - 1))"); do
  for mode in "${mode_list[@]}"; do
    db=$out/$mode-run$run.db
    json=$out/$mode-run$run.json
    rm -f "$db" "$db-wal" "$db-shm"
    pace_before=$(machine_pace)
    t0=$(date +%s)
    if [[ $mode == layer || $mode == mla ]]; then
      model=qwen3-30b-a3b
      [[ $mode == mla ]] && model=deepseek-v2-lite
      launch "$mode" profile "${cold[@]}" --model "$model" --max-seconds 0.4 --out "$db" \
        >"$out/$mode-run$run.profile.log" 2>&1
      t1=$(date +%s)
      launch "$mode" validate --attention --scope block --model "$model" --costs "$db" \
        --max-seconds 2 --json >"$out/$mode-block-run$run.json" \
        2>"$out/$mode-block-run$run.validate.log"
      launch "$mode" validate --attention --scope layer --model "$model" --costs "$db" \
        --max-seconds 2 --json >"$json.tmp" 2>"$out/$mode-run$run.validate.log"
    elif [[ $mode == attn ]]; then
      launch "$mode" profile "${cold[@]}" --ops attention --max-seconds 0.4 --out "$db" \
        >"$out/$mode-run$run.profile.log" 2>&1
      t1=$(date +%s)
      launch "$mode" validate --attention --costs "$db" --max-seconds 2 --json \
        >"$json.tmp" 2>"$out/$mode-run$run.validate.log"
    else
      launch "$mode" profile "${cold[@]}" --scale 8 --max-tokens 1024 --max-seconds 0.4 --out "$db" \
        >"$out/$mode-run$run.profile.log" 2>&1
      t1=$(date +%s)
      launch "$mode" validate --scale 8 --costs "$db" --tokens 256,512,1024 --max-seconds 2 \
        --json >"$json.tmp" 2>"$out/$mode-run$run.validate.log"
    fi
    mv "$json.tmp" "$json"
    t2=$(date +%s)
    pace_after=$(machine_pace)
    python3 - "$json" "$mode" "$run" "$((t1 - t0))" "$((t2 - t1))" "$out/$mode-block-run$run.json" <<'EOF'
import json, sys
path, mode, run, tp, tv, block = sys.argv[1:]
runs = [(mode, path)] + ([(mode + "-block", block)] if mode in ("layer", "mla") else [])
for name, p in runs:
    j = json.load(open(p))
    s = j["summary"]
    again = s.get("remeasured_cases") or 0
    print(f"{name:9} run {run}: DB median {100*s['median_abs_error']:.1f}% worst "
          f"{100*s['worst_abs_error']:.1f}%; roofline median {100*s['roofline_median_abs_error']:.1f}% "
          f"worst {100*s['roofline_worst_abs_error']:.1f}% (profile {tp} s, validate {tv} s"
          + (f"; {again} unsettled case(s) measured again, {s['replaced_cases']} replaced" if again else "")
          + ")")
    # validate's own pace check (docs/PROFILER.md): the profile's probe range against validate's.
    pace = j.get("pace") or {}
    prof = pace.get("profile")
    if prof and pace.get("drift") is not None:
        def g(v):
            return "not measured" if v is None else f"{v:.1f}"
        print(f"          pace (GFLOP/s): profile {prof['low_gflops']:.1f}-{prof['high_gflops']:.1f}, "
              f"validate {g(pace['before_gflops'])} -> {g(pace['after_gflops'])}: drift "
              f"{100*pace['drift']:+.1f}%{' STALE PROFILE' if pace['stale'] else ''}")
EOF
    # The profile's own second look at its unsettled points (docs/PROFILER.md), when it took one.
    grep -h "had not settled" "$out/$mode-run$run.profile.log" | sed 's/^/          profile: /' || true
    echo "          machine pace before the profile: $pace_before; after validate: $pace_after"
  done
done
