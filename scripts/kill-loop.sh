#!/usr/bin/env bash
# The kill -9 loop of docs/RELIABILITY.md: runs a small profile again and again with --resume on
# one cost database and kills it with SIGKILL after a random delay; after every kill it checks
# the database: SQLite opens it, `PRAGMA integrity_check` says ok, no point identity (device,
# backend, op, dtype, shape, group_size) is stored twice, every stored point is complete, the
# database holds at least every point the killed run had reported done, and nothing stored
# before was lost. When a run finishes before its kill, the sweep is checked whole (exit 0, rows
# = the sweep's total, no duplicates, moeplan's own reader plans from it) and a new database
# starts. At the end, a last --resume finishes the current sweep and it is checked the same way.
#
#   scripts/kill-loop.sh [-n ITERATIONS] [--np N] [--keep DIR]
#     -n N      kills to make (default 50)
#     --np N    run the profile under `mpirun -np N` and kill -9 a random rank (rank 0, the
#               writer, or another); default: one process with 2 in-process ranks
#     --keep D  work in D and leave it (default: a temporary directory, removed)
#   env: MOEPLAN (default build/bin/moeplan), SEED (default: from the clock)
# Prints one line per kill and a summary; exit 0 only when every check passed.
set -euo pipefail
cd "$(dirname "$0")/.."

ITER=50
NP=0
KEEP=""
while [ $# -gt 0 ]; do
  case "$1" in
    -n) ITER=$2; shift 2 ;;
    --np) NP=$2; shift 2 ;;
    --keep) KEEP=$2; shift 2 ;;
    -h | --help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "kill-loop: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
MOEPLAN=${MOEPLAN:-$PWD/build/bin/moeplan}
SEED=${SEED:-$(date +%s%N | cut -c10-18)}
RANDOM=$((10#$SEED % 32768))  # 10#: digits with a leading 0 are not octal
command -v sqlite3 >/dev/null || { echo "kill-loop: sqlite3 (the CLI) is required" >&2; exit 2; }
[ -x "$MOEPLAN" ] || { echo "kill-loop: $MOEPLAN is not built" >&2; exit 2; }

if [ -n "$KEEP" ]; then
  mkdir -p "$KEEP"
  WORK=$(cd "$KEEP" && pwd)
else
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/kill-loop.XXXXXX")
  trap '[ -e "$WORK/FAILED" ] || rm -rf "$WORK"' EXIT
fi

# Qwen1.5-MoE at 1/16 width, powers of two: ~170 points in a few seconds on 2 cores.
PROFILE_ARGS=(profile --model qwen1.5-moe-a2.7b --scale 16 --quick --max-tokens 32
  --max-bytes 16384 --cold-mib 4 --resume)
if [ "$NP" -gt 0 ]; then
  LAUNCH=(mpirun --allow-run-as-root --oversubscribe -np "$NP" "$MOEPLAN")
  CLUSTER=local:$NP
else
  LAUNCH=("$MOEPLAN")
  PROFILE_ARGS+=(--ranks 2)
  CLUSTER=local:2
fi

fail() {
  echo "kill-loop: FAIL: $*" >&2
  echo "kill-loop: the database and logs are kept in $WORK" >&2
  touch "$WORK/FAILED"  # also from a $(...) subshell: the EXIT trap keeps the directory
  exit 1
}

q() { sqlite3 -batch -noheader "$1" "$2"; }

# Checks the database after a kill; prints its point count. $2: the count before the kill.
check_db() {
  local db=$1 before=$2 log=$3
  [ -f "$db" ] || { echo 0; return; }
  local integrity
  integrity=$(q "$db" "PRAGMA integrity_check;") || fail "sqlite3 cannot open $db"
  [ "$integrity" = "ok" ] || fail "integrity_check: $integrity"
  if [ "$(q "$db" "SELECT count(*) FROM sqlite_master WHERE name='points';")" = 0 ]; then
    # Killed before the schema's first commit: nothing was stored, nothing was reported done.
    [ "$before" = 0 ] || fail "the points table vanished (had $before points)"
    if grep -q "done" "$log" 2>/dev/null; then fail "points reported done but no schema"; fi
    echo 0
    return
  fi
  local n dup incomplete reported
  n=$(q "$db" "SELECT count(*) FROM points;")
  dup=$(q "$db" "SELECT count(*) FROM (SELECT 1 FROM points GROUP BY device, backend, op, dtype,
        shape, group_size HAVING count(*) > 1);")
  [ "$dup" = 0 ] || fail "$dup point identities stored twice"
  incomplete=$(q "$db" "SELECT count(*) FROM points WHERE disposition NOT IN ('passed',
        'incorrect', 'not_supported') OR measured_at = '' OR (disposition = 'passed' AND
        (median_s <= 0 OR p10_s <= 0 OR p90_s < p10_s OR repetitions < 1));")
  [ "$incomplete" = 0 ] || fail "$incomplete incomplete points"
  [ "$n" -ge "$before" ] || fail "points lost: $before before the kill, $n after"
  # The last "profile: D/T done" line the killed run printed: D points were committed.
  reported=$(grep -o '^profile: [0-9]*/' "$log" 2>/dev/null | tail -n 1 | tr -dc '0-9' || true)
  if [ -n "$reported" ] && [ "$n" -lt "$reported" ]; then
    fail "the run reported $reported points done but the database holds $n"
  fi
  echo "$n"
}

# Finishes (or has finished) the sweep: exit 0, rows = total, no duplicates, the planner reads it.
check_complete() {
  local db=$1 out=$2
  local total n dup
  total=$(sed -n 's/^profile [^:]*: \([0-9]*\) points.*/\1/p' "$out")
  [ -n "$total" ] || fail "no summary line in $out"
  n=$(q "$db" "SELECT count(*) FROM points;")
  dup=$(q "$db" "SELECT count(*) FROM (SELECT 1 FROM points GROUP BY device, backend, op, dtype,
        shape, group_size HAVING count(*) > 1);")
  [ "$n" = "$total" ] || fail "the finished sweep has $total points but the database $n"
  [ "$dup" = 0 ] || fail "$dup duplicates after the sweep finished"
  [ "$(q "$db" "PRAGMA integrity_check;")" = ok ] || fail "integrity_check after the sweep"
  "$MOEPLAN" plan --model qwen1.5-moe-a2.7b --cluster "$CLUSTER" --tokens 32 --costs "$db" \
    >"$WORK/plan.out" 2>&1 || fail "moeplan plan --costs cannot read $db ($(head -c 300 "$WORK/plan.out"))"
  echo "$total"
}

round=1
db=$WORK/round$round.db
before=0
kills=0
sweeps=0
empty_kills=0
total_points=0
start=$(date +%s)
# Calibration: one whole sweep without a kill (checked like any finished sweep) sets the range of
# the random delays: uniform in [0, 1.2 × its wall time], so kills land anywhere in a sweep,
# from before the database exists to after the last point.
t0=$(date +%s%N)
"${LAUNCH[@]}" "${PROFILE_ARGS[@]}" --out "$WORK/calibrate.db" >"$WORK/run.out" \
  2>"$WORK/run.err" </dev/null || fail "the calibration sweep failed: $(tail -n 3 "$WORK/run.err")"
sweep_ms=$((($(date +%s%N) - t0) / 1000000))
total_points=$(check_complete "$WORK/calibrate.db" "$WORK/run.out")
max_delay_ms=$((sweep_ms * 12 / 10 + 1))
echo "calibration: a sweep of $total_points points takes $sweep_ms ms; kills in [0, $max_delay_ms) ms"
for ((i = 1; i <= ITER; i++)); do
  log=$WORK/run.err
  out=$WORK/run.out
  "${LAUNCH[@]}" "${PROFILE_ARGS[@]}" --out "$db" >"$out" 2>"$log" </dev/null &
  pid=$!
  delay=$(((RANDOM * 32768 + RANDOM) % max_delay_ms))
  sleep "$(printf '%d.%03d' $((delay / 1000)) $((delay % 1000)))"
  victim=$pid
  what="moeplan"
  if [ "$NP" -gt 0 ]; then
    # The rank processes are mpirun's children; pick one at random.
    mapfile -t ranks < <(pgrep -P "$pid" || true)
    if [ "${#ranks[@]}" -gt 0 ]; then
      victim=${ranks[$((RANDOM % ${#ranks[@]}))]}
      what="rank pid $victim of ${#ranks[@]}"
    fi
  fi
  kill -9 "$victim" 2>/dev/null || true
  set +e
  wait "$pid" 2>/dev/null
  rc=$?
  set -e
  if [ "$rc" = 0 ]; then
    # It finished before the kill: check the whole sweep and start a new database.
    total_points=$(check_complete "$db" "$out")
    echo "iteration $i: finished before the kill after ${delay} ms: $total_points points, complete"
    sweeps=$((sweeps + 1))
    round=$((round + 1))
    db=$WORK/round$round.db
    before=0
    continue
  fi
  kills=$((kills + 1))
  n=$(check_db "$db" "$before" "$log")
  [ "$n" = 0 ] && empty_kills=$((empty_kills + 1))
  echo "iteration $i: killed ($what, exit $rc) after ${delay} ms: $n points (was $before): ok"
  before=$n
done
# The last database: --resume finishes it.
"${LAUNCH[@]}" "${PROFILE_ARGS[@]}" --out "$db" >"$WORK/run.out" 2>"$WORK/run.err" </dev/null ||
  fail "the final --resume failed: $(tail -n 3 "$WORK/run.err")"
total_points=$(check_complete "$db" "$WORK/run.out")
kept=$(sed -n 's/.*measured, \([0-9]*\) kept from before.*/\1/p' "$WORK/run.out")
[ "$kept" = "$before" ] || fail "the final --resume kept $kept points, the database had $before"
sweeps=$((sweeps + 1))
echo "kill-loop: $ITER iterations in $(($(date +%s) - start)) s: $kills kills ($empty_kills before" \
  "the first commit), $sweeps sweeps of $total_points points completed, every check passed" \
  "(seed $SEED)"
