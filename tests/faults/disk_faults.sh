#!/usr/bin/env bash
# A cost database that cannot be written fails cleanly: one "moeplan: error:" line, a non-zero
# exit, and every point completed before stays in the database (integrity_check ok, --resume
# finishes the sweep with no duplicates).
#   1. full disk, everywhere: RLIMIT_FSIZE (`ulimit -f`, SIGXFSZ ignored so a write past it
#      fails with EFBIG as a full disk's fails with ENOSPC) stops the profile part-way;
#   2. a read-only place, everywhere: --out under /proc, where not even root creates files;
#   3. where this process may mount (root outside a container): a real 256 KiB tmpfs filling
#      up (ENOSPC), and the same tmpfs remounted read-only under `--resume`. Skipped, saying
#      so, where mounting is not permitted.
#   disk_faults.sh MOEPLAN
set -euo pipefail
MOEPLAN=$1
WORK=$(mktemp -d "${TMPDIR:-/tmp}/disk_faults.XXXXXX")
MNT=""
cleanup() {
  if [ -n "$MNT" ]; then umount "$MNT" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
PROFILE=(profile --model qwen1.5-moe-a2.7b --scale 16 --quick --max-tokens 32 --max-bytes 16384 --cold-mib 4
  --ranks 2)
fail() {
  echo "FAIL: $*" >&2
  cat "$WORK/out" "$WORK/err" >&2 2>/dev/null || true
  exit 1
}
# expect_clean_failure DB: exit non-zero, nothing but one error line on stderr (progress lines
# aside), the database intact with its completed points; prints the number of points.
expect_clean_failure() {
  local rc=$1 db=$2
  [ "$rc" != 0 ] || fail "exit 0 although the database could not be written"
  [ "$(grep -c '^moeplan: error: ' "$WORK/err")" = 1 ] || fail "expected one error line"
  [ "$(grep -vc -e '^moeplan: error: ' -e '^profile: [0-9]*/[0-9]* done' "$WORK/err")" = 0 ] ||
    fail "stderr has more than the error line and progress"
  if [ -f "$db" ]; then
    [ "$(sqlite3 "$db" 'PRAGMA integrity_check;')" = ok ] || fail "integrity_check"
    local n reported
    n=$(sqlite3 "$db" 'SELECT count(*) FROM points;')
    reported=$(grep -o '^profile: [0-9]*/' "$WORK/err" | tail -n 1 | tr -dc '0-9' || true)
    [ "$n" -ge "${reported:-0}" ] || fail "reported $reported points done, the database has $n"
    echo "$n"
  else
    echo 0
  fi
}
resume_completes() {
  local db=$1 kept=$2
  "$MOEPLAN" "${PROFILE[@]}" --resume --out "$db" >"$WORK/out" 2>"$WORK/err" ||
    fail "--resume after the failure"
  grep -q "$kept kept from before" "$WORK/out" || fail "--resume did not keep $kept points"
  local total
  total=$(sed -n 's/^profile [^:]*: \([0-9]*\) points.*/\1/p' "$WORK/out")
  [ "$(sqlite3 "$db" 'SELECT count(*) FROM points;')" = "$total" ] || fail "rows != total"
}

# 1. RLIMIT_FSIZE: 160 KiB per file.
db=$WORK/fsize.db
set +e
(
  trap '' XFSZ
  ulimit -f 160
  exec "$MOEPLAN" "${PROFILE[@]}" --out "$db"
) >"$WORK/out" 2>"$WORK/err" </dev/null
rc=$?
set -e
n=$(expect_clean_failure "$rc" "$db")
[ "$n" -gt 0 ] || fail "RLIMIT_FSIZE: no point was completed before the limit (raise it)"
echo "ok: file size limit: exit $rc, $(grep '^moeplan: error' "$WORK/err"), $n points kept"
resume_completes "$db" "$n"
echo "ok: --resume finished the sweep"

# 2. A read-only place.
set +e
"$MOEPLAN" "${PROFILE[@]}" --out /proc/moeplan-disk-faults.db >"$WORK/out" 2>"$WORK/err" </dev/null
rc=$?
set -e
[ "$rc" = 2 ] || fail "read-only path: exit $rc, expected 2"
expect_clean_failure "$rc" /nonexistent >/dev/null
echo "ok: read-only path: exit 2, $(cat "$WORK/err")"

# 3. A real full file system and a read-only remount, where mounting is permitted.
MNT=$WORK/mnt
mkdir -p "$MNT"
if ! mount -t tmpfs -o size=256k tmpfs "$MNT" 2>/dev/null; then
  MNT=""
  echo "skipped: tmpfs full disk and read-only remount (mounting is not permitted here)"
  exit 0
fi
db=$MNT/full.db
set +e
"$MOEPLAN" "${PROFILE[@]}" --out "$db" >"$WORK/out" 2>"$WORK/err" </dev/null
rc=$?
set -e
n=$(expect_clean_failure "$rc" "$db")
echo "ok: full tmpfs: exit $rc, $(grep '^moeplan: error' "$WORK/err"), $n points kept"
mount -o remount,ro "$MNT"
set +e
"$MOEPLAN" "${PROFILE[@]}" --resume --out "$db" >"$WORK/out" 2>"$WORK/err" </dev/null
rc=$?
set -e
n2=$(expect_clean_failure "$rc" "$db")
[ "$n2" = "$n" ] || fail "read-only remount: $n points before, $n2 after"
echo "ok: read-only file system: exit $rc, $(grep '^moeplan: error' "$WORK/err"), $n2 points kept"
