#!/usr/bin/env bash
# Ranks started with different arguments (an MPMD line): every command that runs under mpirun
# detects it at start, rank 0 prints one line naming the differing rank, the job exits 2.
#   mpi_mismatch.sh MOEPLAN MPIEXEC
set -euo pipefail
MOEPLAN=$1 MPIEXEC=$2
WORK=$(mktemp -d "${TMPDIR:-/tmp}/mpi_mismatch.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
run() {  # run EXPECTED_RANK ARGS_RANK0 -- ARGS_OTHERS (mpirun -np 1 A : -np 2 B)
  local rank=$1 a=$2 b=$3 rc
  set +e
  # shellcheck disable=SC2086
  "$MPIEXEC" --allow-run-as-root --oversubscribe -np 1 "$MOEPLAN" $a : -np 2 "$MOEPLAN" $b \
    >"$WORK/out" 2>"$WORK/err" </dev/null
  rc=$?
  set -e
  local lines
  lines=$(grep -c "moeplan: error: " "$WORK/err" || true)
  if [ "$rc" != 2 ] || [ "$lines" != 1 ] ||
    ! grep -q "moeplan: error: rank $rank was started with other arguments than rank 0" \
      "$WORK/err" || [ -s "$WORK/out" ]; then
    echo "FAIL: '$a' : '$b': exit $rc, $lines error lines (expected 2, 1 naming rank $rank)" >&2
    cat "$WORK/out" "$WORK/err" >&2
    exit 1
  fi
  echo "ok: '$a' : '$b' -> exit 2, rank $rank named"
}
run 1 "verify --scale 32 --tokens 48" "verify --scale 16 --tokens 48"
run 1 "profile --scale 16 --quick --out $WORK/p.db" "profile --scale 8 --quick --out $WORK/p.db"
run 1 "validate --model qwen1.5-moe-a2.7b --costs x.db" "validate --model qwen3-30b-a3b --costs x.db"
[ ! -e "$WORK/p.db" ] || { echo "FAIL: profile wrote $WORK/p.db" >&2; exit 1; }
# The same arguments on every rank still run (the check itself is not in the way).
same=(verify --model qwen1.5-moe-a2.7b --scale 32 --tokens 48 --layouts 3x1 --dtype fp32)
"$MPIEXEC" --allow-run-as-root --oversubscribe -np 1 "$MOEPLAN" "${same[@]}" : -np 2 "$MOEPLAN" \
  "${same[@]}" >"$WORK/out" 2>"$WORK/err" || { cat "$WORK/err" >&2; echo "FAIL: same args" >&2; exit 1; }
# 3x1: padded_a2a, allgather, a2av and deepep_ll (deepep_normal needs the ranks in nodes)
grep -q "4 passed, 0 failed" "$WORK/out" || { cat "$WORK/out" >&2; echo "FAIL: same args" >&2; exit 1; }
echo "ok: the same arguments on every rank run"
