#!/usr/bin/env bash
# One rank of an mpirun job fails on purpose (MOEPLAN_FAULT_INJECT, docs/RELIABILITY.md) during
# `profile`, `verify` or `validate`. Checks: the job ends with a non-zero status within
# FAULT_BOUND_S (no hang), a message names the failed rank, and rank
# 0 kept what it had finished: for profile the cost database passes integrity_check and holds
# exactly the points completed before the fault, and `--resume` then finishes the sweep; for
# verify and validate rank 0's progress lines hold every case finished before the fault.
#
#   mpi_rank_failure.sh MOEPLAN MPIEXEC NP COMMAND MODE RANK AFTER
#     COMMAND: profile | verify | validate;  MODE: kill | exit;  RANK: the failing rank;
#     AFTER: points (cases) that rank finishes first
set -euo pipefail
MOEPLAN=$1 MPIEXEC=$2 NP=$3 COMMAND=$4 MODE=$5 RANK=$6 AFTER=$7
WORK=$(mktemp -d "${TMPDIR:-/tmp}/mpi_rank_failure.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
MPIRUN=("$MPIEXEC" --allow-run-as-root --oversubscribe -np "$NP")
fail() {
  echo "FAIL: $*" >&2
  echo "--- output:" >&2
  cat "$WORK/out" "$WORK/err" >&2 || true
  exit 1
}
db=$WORK/p.db
model=(--model qwen1.5-moe-a2.7b --scale 16)
case "$COMMAND" in
  profile)
    args=(profile "${model[@]}" --quick --max-tokens 32 --max-bytes 16384 --cold-mib 4 --out "$db") ;;
  verify)
    args=(verify "${model[@]}" --tokens 32,64 --dtype fp32,bf16 --layouts "${NP}x1,1x${NP}") ;;
  validate)
    # A cost database to predict from: a tiny profile on the same ranks, no faults.
    "${MPIRUN[@]}" "$MOEPLAN" profile "${model[@]}" --quick --max-tokens 32 --max-bytes 16384 --cold-mib 4 \
      --ops gemm,all_to_all_v,all_gather,all_reduce --out "$db" >"$WORK/out" 2>"$WORK/err" ||
      fail "the fault-free profile for validate failed"
    args=(validate "${model[@]}" --layouts "${NP}x1" --dispatcher a2av,allgather
      --tokens $((NP * 8)),$((NP * 16)) --max-seconds 0.05 --costs "$db") ;;
  *) echo "unknown command $COMMAND" >&2; exit 2 ;;
esac

# The faulted job must end on its own: FAULT_BOUND_S bounds it here, so that a hang fails with
# the job's output (CTest's TIMEOUT also covers the set-up and the --resume sweep, whose length
# depends on the machine's load).
FAULT_BOUND_S=${FAULT_BOUND_S:-90}
t0=$SECONDS
set +e
MOEPLAN_FAULT_INJECT="rank=$RANK,after_points=$AFTER,mode=$MODE" \
  timeout -k 5 "$FAULT_BOUND_S" "${MPIRUN[@]}" "$MOEPLAN" "${args[@]}" >"$WORK/out" 2>"$WORK/err" </dev/null
rc=$?
set -e
# (124: timeout stopped it; mpirun itself may exit 137 for a rank killed by SIGKILL, so the
# elapsed time, not the status, tells a kill by timeout -k)
[ "$rc" != 124 ] && [ $((SECONDS - t0)) -lt "$FAULT_BOUND_S" ] ||
  fail "the job did not end within $FAULT_BOUND_S s of its start"
[ "$rc" != 0 ] || fail "the job exited 0 although rank $RANK failed"
grep -q "fault injection: rank $RANK " "$WORK/err" || fail "the fault was not injected"
# The rank that was killed or exited without MPI_Finalize is named: by moeplan's rank watchdog
# ("rank 1 (host) is gone", on rank 0; rank 1 says it when rank 0 is lost), or by Open MPI's
# mpirun when it notices first ("process rank 1 with PID").
grep -Eq "process rank $RANK with PID|moeplan: error: rank $RANK \(.*\) is gone" \
  "$WORK/err" "$WORK/out" || fail "no message names rank $RANK"

case "$COMMAND" in
  profile)
    [ "$(sqlite3 "$db" 'PRAGMA integrity_check;')" = ok ] || fail "integrity_check"
    n=$(sqlite3 "$db" 'SELECT count(*) FROM points;')
    # Rank 0 commits a point before the collective that starts the next one, and rank $RANK
    # fails at the start of point AFTER + 1: exactly AFTER points are kept.
    [ "$n" = "$AFTER" ] || fail "the database holds $n points, expected $AFTER"
    "${MPIRUN[@]}" "$MOEPLAN" profile "${model[@]}" --quick --max-tokens 32 --max-bytes 16384 --cold-mib 4 \
      --out "$db" --resume >"$WORK/out" 2>"$WORK/err" || fail "--resume after the failure"
    grep -q "$AFTER kept from before" "$WORK/out" || fail "--resume did not keep $AFTER points"
    total=$(sed -n 's/^profile [^:]*: \([0-9]*\) points.*/\1/p' "$WORK/out")
    [ "$(sqlite3 "$db" 'SELECT count(*) FROM points;')" = "$total" ] || fail "rows != total"
    dup=$(sqlite3 "$db" "SELECT count(*) FROM (SELECT 1 FROM points GROUP BY device, backend,
          op, dtype, shape, group_size HAVING count(*) > 1);")
    [ "$dup" = 0 ] || fail "$dup duplicate points"
    ;;
  verify | validate)
    # Rank 0 printed a progress line with the result of every case finished before the fault.
    n=$(grep -c "^$COMMAND: [0-9]*/[0-9]* done" "$WORK/err" || true)
    [ "$n" -ge "$AFTER" ] || fail "rank 0 reported $n finished cases, expected $AFTER"
    if [ "$COMMAND" = verify ]; then
      [ "$(grep -c ': pass (bound use' "$WORK/err")" -ge "$AFTER" ] || fail "no case results"
    else
      [ "$(grep -c ': measured [0-9.]* ms' "$WORK/err")" -ge "$AFTER" ] || fail "no measurements"
    fi
    ;;
esac
echo "ok: $COMMAND, rank $RANK $MODE after $AFTER: exit $rc, rank named, rank 0 kept its results"
