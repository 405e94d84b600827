#!/usr/bin/env bash
# CI smoke job for moeplan under Slurm (issue 22): starts a local Slurm (scripts/slurm-local.sh:
# munged, slurmctld, two slurmd emulating nodeA and nodeB on this host), runs moeplan through
# srun as a user would, and stops every daemon it started (trap), whatever happens.
#
#   bash tests/slurm/run.sh [MOEPLAN]        # default build/bin/moeplan
#
# Tests (each prints "ok: …" or "FAIL: …"; the script exits 1 if any failed, 77 if Slurm or munge
# is not installed — CTest's SKIP_RETURN_CODE convention):
#   launcher_check  srun --mpi=none -n2: every task exits 2 and one line says to use --mpi=pmix
#                   (no Open MPI banner, no crash)
#   verify          srun --mpi=pmix -N2 -n2 moeplan verify: every case passes
#   profile         srun --mpi=pmix -N2 -n2 moeplan profile --quick: every point stored, the
#                   database is valid, plan --cluster local:2 --costs reads it
#   kill9           rank 1 SIGKILLs itself after 5 points under srun --kill-on-bad-exit=1: the
#                   job fails and ends <= 5 s after the fault, the database passes
#                   integrity_check and holds exactly the 5 completed points, --resume finishes
#   exit_early      rank 1 exits 0 without MPI_Finalize after 5 points: the job fails (non-zero)
#                   and ends <= 10 s after the fault, the database holds the 5 points
#
# Without moeplan's launcher check and rank watchdog (kernels/job_world.cpp,
# kernels/rank_watchdog.cpp) launcher_check, kill9 and exit_early fail: the tasks die in MPI_Init
# with Open MPI's banner; the survivor of a SIGKILL waits for Slurm's KillWait (30 s) in a
# collective; a rank that exits 0 leaves the job hanging. A guard SIGKILLs a step still running
# 10 s past its bound, so a failing run stays under ~1 minute. A passing run takes about 20 s on
# 2 cores (docs/RELIABILITY.md has the figures).
#
# Environment: SLURM_LOCAL_PORT (first of 3 ports; default: a free one from 20000 up),
# KEEP_WORK=1 (keep the work directory with the logs and the Slurm state).
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
MOEPLAN=$(realpath -m "${1:-$ROOT/build/bin/moeplan}")
KILL_BOUND=5    # s from a peer's SIGKILL to the end of the job
EXIT_BOUND=10   # s from a rank's early exit 0 to the end of the job
GUARD_EXTRA=10  # the guard stops a step this long past its bound

for b in munged slurmctld slurmd srun sinfo scancel squeue sqlite3; do
  if ! command -v "$b" >/dev/null; then
    echo "skipped: $b not found (apt-get install -y --no-install-recommends slurm-wlm munge sqlite3)"
    exit 77
  fi
done
[[ -x $MOEPLAN ]] || { echo "FAIL: $MOEPLAN is not an executable" >&2; exit 1; }
[[ $(id -u) == 0 ]] || { echo "skipped: needs root (slurmd)"; exit 77; }

# seconds since an $EPOCHREALTIME stamp (awk: no bc needed)
since() { awk -v now="$EPOCHREALTIME" -v t0="$1" 'BEGIN { printf "%.3f", now - t0 }'; }
T_START=$EPOCHREALTIME
WORK=$(mktemp -d "${TMPDIR:-/tmp}/moeplan-slurm-ci.XXXXXX")
export SLURM_LOCAL_DIR=$WORK/slurm
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
if [[ -z ${SLURM_LOCAL_PORT:-} ]]; then
  p=$((20000 + $$ % 20000))
  while ! { port_free "$p" && port_free $((p + 1)) && port_free $((p + 2)); }; do p=$((p + 3)); done
  export SLURM_LOCAL_PORT=$p
fi
FAILED=()
cleanup() {
  bash "$ROOT/scripts/slurm-local.sh" stop 2>&1 | sed 's/^/  /' ||
    echo "warning: slurm-local.sh stop failed (state in $SLURM_LOCAL_DIR)" >&2
  if [[ ${KEEP_WORK:-0} == 1 || ${#FAILED[@]} -gt 0 ]]; then
    echo "logs: $WORK/logs (Slurm's in $SLURM_LOCAL_DIR/log)"
  else
    rm -rf "$WORK"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$WORK/logs"
cd "$WORK"

bash "$ROOT/scripts/slurm-local.sh" start 2>"$WORK/logs/start.err" ||
  { cat "$WORK/logs/start.err" >&2; FAILED+=(start); exit 1; }
export SLURM_CONF=$SLURM_LOCAL_DIR/etc/slurm.conf
printf 'local Slurm up in %.1f s (ports %s..%s)\n' "$(since "$T_START")" \
  "$SLURM_LOCAL_PORT" $((SLURM_LOCAL_PORT + 2))

MODEL=(--model qwen1.5-moe-a2.7b --scale 16)
PROFILE=(profile "${MODEL[@]}" --quick --max-tokens 32 --max-bytes 16384 --cold-mib 4)
# The fault tests profile the collectives only (14 points, under a second): rank 1 fails at the
# start of point 6, inside the sweep, and --resume has little left to measure.
FAULT_PROFILE=("${PROFILE[@]}" --ops all_reduce,all_to_all_v)
SRUN=(srun --mpi=pmix -N2 -n2 --kill-on-bad-exit=1)

ok() { printf 'ok: %s\n' "$*"; }
fail() { # fail TEST MESSAGE LOG…
  local t=$1 m=$2; shift 2
  FAILED+=("$t")
  printf 'FAIL: %s: %s\n' "$t" "$m"
  local f
  for f in "$@"; do [[ -s $f ]] && { echo "--- $f (last 15 lines)"; tail -n 15 "$f"; }; done
}
wait_idle() { # until no job is left (a step being killed holds its nodes for a moment)
  local i
  for i in $(seq 150); do [[ -z $(squeue -h 2>/dev/null) ]] && return 0; sleep 0.2; done
  return 1
}

# run_timed NAME GUARD_S CMD… : runs CMD with its output (stdout and stderr) in logs/NAME.log,
# each line prefixed with the seconds since the start; a guard SIGKILLs the step (job name NAME)
# if it still runs after GUARD_S s. Sets RC, ELAPSED, GUARDED (1 when the guard fired).
run_timed() {
  local name=$1 guard_s=$2; shift 2
  local log=$WORK/logs/$name.log t0=$EPOCHREALTIME
  rm -f "$WORK/$name.guard"
  (
    # killed by run_timed when the command ends first; take the sleep along
    trap 'kill "$sl" 2>/dev/null; exit 0' TERM
    sleep "$guard_s" &
    sl=$!
    wait "$sl"
    j=$(squeue -h -n "$name" -o %i 2>/dev/null | head -n 1)
    [[ -n $j ]] || exit 0
    touch "$WORK/$name.guard"
    # A step Slurm is already terminating (--kill-on-bad-exit) refuses another signal until
    # KillWait ends: SIGKILL the tasks themselves, which Slurm lists per node.
    pids=$(for n in $(sinfo -h -N -o %N); do scontrol listpids "$j" "$n" 2>/dev/null; done |
      awk '$1 ~ /^[0-9]+$/ {print $1}')
    [[ -n $pids ]] && kill -KILL $pids 2>/dev/null
    scancel --signal=KILL "$j" 2>/dev/null
    exit 0
  ) >/dev/null 2>&1 &
  local guard=$!
  { "$@" 2>&1; echo "__rc=$?"; } | while IFS= read -r line; do
    printf '%.3f %s\n' "$(since "$t0")" "$line"
  done >"$log"
  kill "$guard" 2>/dev/null
  wait "$guard" 2>/dev/null
  RC=$(sed -n 's/^[0-9.]* __rc=//p' "$log")
  ELAPSED=$(sed -n 's/^\([0-9.]*\) __rc=.*/\1/p' "$log")
  GUARDED=0
  [[ -e $WORK/$name.guard ]] && GUARDED=1
  return 0
}

# fault_time LOG RANK AFTER: seconds (from the log's start) of the earliest sign of the fault:
# the injection line, srun's line about the task, or rank 0's progress line for point AFTER
# (rank 0 blocks in the collective that starts point AFTER + 1, where the rank fails).
fault_time() {
  local log=$1 rank=$2 after=$3
  grep -E "fault injection: rank $rank |srun: error: [^:]*: task $rank: |^[0-9.]* profile: $after/" \
    "$log" | head -n 1 | cut -d' ' -f1
}

# ---- launcher_check: srun without PMIx must fail fast with one clear line -----------------
wait_idle
run_timed launcher_check 20 srun -J launcher_check --mpi=none -N2 -n2 "$MOEPLAN" verify "${MODEL[@]}" \
  --tokens 32 --layouts 2x1 --dtype fp32
log=$WORK/logs/launcher_check.log
n_err=$(grep -c "moeplan: error: .*--mpi=pmix" "$log")
if [[ $RC != 2 ]]; then
  fail launcher_check "exit $RC, expected 2 (moeplan's bad-input code, before MPI_Init)" "$log"
elif [[ $n_err != 1 ]]; then
  fail launcher_check "$n_err lines 'moeplan: error: … --mpi=pmix', expected exactly one" "$log"
elif grep -q -E "OMPI was not built|MPI_Init|Segmentation" "$log"; then
  fail launcher_check "Open MPI's own failure is shown: the check must run before MPI_Init" "$log"
else
  ok "launcher_check: srun --mpi=none: exit 2 and one line naming --mpi=pmix (${ELAPSED} s)"
fi

# ---- verify: the sharded layer across two nodes ---------------------------------------------
wait_idle
# One rank per node: 2x1 runs all five dispatchers (deepep_normal's rail hop between the two
# nodes), 1x2 the three that take tp > 1; 2 token counts: 16 cases.
run_timed verify 60 "${SRUN[@]}" -J verify "$MOEPLAN" verify "${MODEL[@]}" --tokens 32,64 \
  --layouts 2x1,1x2 --dtype fp32 --ranks-per-node 1
log=$WORK/logs/verify.log
if [[ $RC != 0 ]]; then
  fail verify "exit $RC" "$log"
elif ! grep -q "16 passed, 0 failed" "$log"; then
  fail verify "expected '16 passed, 0 failed'" "$log"
else
  ok "verify: srun -N2 -n2, 16 cases passed (${ELAPSED} s)"
fi

# ---- profile: a small profile across two nodes, then plan from it -------------------------
wait_idle
db=$WORK/profile.db
run_timed profile 90 "${SRUN[@]}" -J profile "$MOEPLAN" "${PROFILE[@]}" --out "$db"
log=$WORK/logs/profile.log
total=$(sed -n 's/^[0-9.]* profile [^:]*: \([0-9]*\) points.*/\1/p' "$log")
rows=$(sqlite3 "$db" 'SELECT count(*) FROM points;' 2>/dev/null)
if [[ $RC != 0 ]]; then
  fail profile "exit $RC" "$log"
elif [[ -z $total || $rows != "$total" ]]; then
  fail profile "the database holds '$rows' points, the summary says '$total'" "$log"
elif [[ $(sqlite3 "$db" 'PRAGMA integrity_check;') != ok ]]; then
  fail profile "integrity_check" "$log"
elif ! "$MOEPLAN" plan --model qwen1.5-moe-a2.7b --cluster local:2 --costs "$db" --tokens 64 \
  >"$WORK/logs/plan.log" 2>&1; then
  fail profile "plan --cluster local:2 --costs could not plan from the profile" "$WORK/logs/plan.log"
else
  ok "profile: srun -N2 -n2 --quick, $rows points, plan --cluster local:2 reads it (${ELAPSED} s)"
fi

# ---- fault tests ---------------------------------------------------------------------------
# fault_test NAME MODE BOUND: rank 1 fails (MODE kill|exit) at the start of point 6 of the
# profile; the job must fail and end within BOUND s of the fault, keeping the 5 points.
fault_test() {
  local name=$1 mode=$2 bound=$3 after=5
  local db=$WORK/$name.db log=$WORK/logs/$name.log
  wait_idle
  MOEPLAN_FAULT_INJECT="rank=1,after_points=$after,mode=$mode" \
    run_timed "$name" $((bound + GUARD_EXTRA)) "${SRUN[@]}" -J "$name" "$MOEPLAN" "${FAULT_PROFILE[@]}" --out "$db"
  local ft took rows
  ft=$(fault_time "$log" 1 "$after")
  took=$(awk -v a="$ELAPSED" -v b="${ft:-0}" 'BEGIN { printf "%.3f", a - b }')
  rows=$(sqlite3 "$db" 'SELECT count(*) FROM points;' 2>/dev/null)
  if [[ -z $ft ]]; then
    fail "$name" "no sign of the injected fault in the output" "$log"
  elif [[ $GUARDED == 1 ]]; then
    fail "$name" "still running $((bound + GUARD_EXTRA)) s after the start (the test's guard SIGKILLed it); expected the end <= $bound s after the fault (at ${ft} s)" "$log"
  elif awk -v t="$took" -v b="$bound" 'BEGIN { exit !(t > b) }'; then
    fail "$name" "ended ${took} s after the fault, expected <= $bound s" "$log"
  elif [[ $RC == 0 ]]; then
    fail "$name" "the job exited 0 although rank 1 failed" "$log"
  elif [[ $(sqlite3 "$db" 'PRAGMA integrity_check;' 2>&1) != ok ]]; then
    fail "$name" "the database fails integrity_check" "$log"
  elif [[ $rows != "$after" ]]; then
    fail "$name" "the database holds '$rows' points, expected the $after completed before the fault" "$log"
  else
    ok "$name: rank 1 $mode after $after points: exit $RC, ended ${took} s after the fault (<= $bound s), $rows points kept, integrity ok"
    return 0
  fi
  return 1
}

if fault_test kill9 kill "$KILL_BOUND"; then
  # --resume on the same ranks finishes the sweep and keeps the 5 points
  wait_idle
  run_timed kill9_resume 90 "${SRUN[@]}" -J kill9_resume "$MOEPLAN" "${FAULT_PROFILE[@]}" \
    --out "$WORK/kill9.db" --resume
  log=$WORK/logs/kill9_resume.log
  total=$(sed -n 's/^[0-9.]* profile [^:]*: \([0-9]*\) points.*/\1/p' "$log")
  rows=$(sqlite3 "$WORK/kill9.db" 'SELECT count(*) FROM points;' 2>/dev/null)
  if [[ $RC != 0 ]] || ! grep -q " 5 kept from before" "$log" || [[ $rows != "$total" ]]; then
    fail kill9_resume "exit $RC; expected 5 points kept from before and every point stored ($rows of '$total')" "$log"
  else
    ok "kill9_resume: --resume kept the 5 points and finished the sweep ($rows points, ${ELAPSED} s)"
  fi
fi
fault_test exit_early exit "$EXIT_BOUND" || true

wait_idle || true
printf '%d tests failed%s; %.1f s in all\n' "${#FAILED[@]}" \
  "$( ((${#FAILED[@]})) && printf ' (%s)' "${FAILED[*]}")" "$(since "$T_START")"
((${#FAILED[@]} == 0))
