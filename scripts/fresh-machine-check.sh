#!/usr/bin/env bash
# Proves the README's Quick start on a truly fresh Debian 12 root file system: debootstraps a
# minimal bookworm (nothing but Debian's minbase: no compiler, no CMake, no Qt) into a folder,
# copies this repository's committed HEAD in, and runs the README's two commands inside a chroot
# as root, then scripts/check_suite.py on the result. Reports the wall time of each step, the
# binaries built and the tests run, and writes the same into REPORT.
#   scripts/fresh-machine-check.sh [--dir DIR] [--report FILE] [--no-cuda] [--worktree] [--keep]
# --dir DIR    where the root file system goes (default /var/tmp/moeplan-fresh; emptied first)
# --report F   the report (default DIR.report.txt)
# --no-cuda    do not bind-mount /usr/local/cuda (machines of this kind have the toolkit there;
#              without it the configure must say that CUDA is off and everything else builds)
# --worktree   copy the working tree (tracked and untracked, not ignored files) instead of HEAD
# --keep       keep the root file system afterwards (it is about 3 GiB)
# Needs root, debootstrap (installed here when missing) and Debian's mirror. Takes about 20-30
# minutes on 2 cores (docs/RELIABILITY.md), so CI does not run it; run it before changing
# scripts/install-deps.sh, CMake's dependency checks or .ci/run lands.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
dir=/var/tmp/moeplan-fresh
report=""
cuda=1
worktree=0
keep=0
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) dir=$2; shift 2 ;;
    --report) report=$2; shift 2 ;;
    --no-cuda) cuda=0; shift ;;
    --worktree) worktree=1; shift ;;
    --keep) keep=1; shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "fresh-machine-check: unknown option $1" >&2; exit 2 ;;
  esac
done
[ -n "$report" ] || report=$dir.report.txt
[ "$(id -u)" -eq 0 ] || { echo "fresh-machine-check: must run as root (chroot, mounts)" >&2; exit 2; }
case "$dir" in /|/usr|/var|/tmp|/root|"") echo "fresh-machine-check: refusing --dir $dir" >&2; exit 2 ;; esac

mounts=()
cleanup() {
  local i
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount -l "${mounts[i]}" 2>/dev/null || true; done
  if [ "$keep" = 0 ] && [ -d "$dir" ]; then rm -rf --one-file-system "$dir"; fi
}
trap cleanup EXIT

log() { printf '%s\n' "$*" | tee -a "$report.tmp"; }
: >"$report.tmp"
now() { date +%s; }
t_start=$(now)
log "fresh-machine-check: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
log "host CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores"
log "commit: $(git -C "$repo" rev-parse HEAD)$([ "$worktree" = 1 ] && echo ' + working tree')"

# ---- 1. a bare bookworm ------------------------------------------------------------------------
if ! command -v debootstrap >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap \
    >/dev/null
fi
mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n1)
[ -n "$mirror" ] || mirror=http://deb.debian.org/debian
rm -rf --one-file-system "$dir"
mkdir -p "$dir"
t0=$(now)
debootstrap --variant=minbase bookworm "$dir" "$mirror" >"$dir.debootstrap.log" 2>&1 ||
  { tail -20 "$dir.debootstrap.log" >&2; echo "fresh-machine-check: debootstrap failed" >&2; exit 1; }
log "debootstrap (minbase bookworm from $mirror): $(($(now) - t0)) s, $(chroot "$dir" dpkg-query -W | wc -l) packages"
cp /etc/resolv.conf "$dir/etc/resolv.conf"
# The machine image's network trust, which is not software the README installs: the CAs its
# egress presents (update-ca-certificates adds them when install-deps installs ca-certificates)
# and its pip settings. Without them pip cannot reach PyPI here (certificate verify failed).
if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then
  mkdir -p "$dir/usr/local/share/ca-certificates"
  cp /usr/local/share/ca-certificates/*.crt "$dir/usr/local/share/ca-certificates/"
fi
[ ! -f /etc/pip.conf ] || cp /etc/pip.conf "$dir/etc/pip.conf"
# The security suite as on the host, so the chroot installs the same package versions.
cat >"$dir/etc/apt/sources.list" <<EOF
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
EOF

for m in proc sys dev dev/pts dev/shm; do
  mkdir -p "$dir/$m"
  case "$m" in
    proc) mount -t proc proc "$dir/proc" ;;
    sys) mount -t sysfs sys "$dir/sys" ;;
    dev/shm) mount -t tmpfs -o size=4g tmpfs "$dir/dev/shm" ;;
    *) mount --bind "/$m" "$dir/$m" ;;
  esac
  mounts+=("$dir/$m")
done
# A booted machine has its control groups mounted (slurmd will not start without them) and an
# /etc/hosts naming localhost and itself; debootstrap writes neither.
mkdir -p "$dir/sys/fs/cgroup"
mount --rbind /sys/fs/cgroup "$dir/sys/fs/cgroup"
mount --make-rslave "$dir/sys/fs/cgroup"
mounts+=("$dir/sys/fs/cgroup")
[ -e "$dir/etc/hosts" ] || printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n' "$(hostname)" >"$dir/etc/hosts"
if [ "$cuda" = 1 ] && [ -d /usr/local/cuda ]; then
  mkdir -p "$dir/usr/local/cuda"
  mount --bind /usr/local/cuda "$dir/usr/local/cuda"
  mount -o remount,bind,ro "$dir/usr/local/cuda"
  mounts+=("$dir/usr/local/cuda")
  real=$(readlink -f /usr/local/cuda)
  log "CUDA toolkit: /usr/local/cuda bind-mounted read-only (as on this machine kind: $real)"
else
  log "CUDA toolkit: not present in the chroot"
fi

# ---- 2. the clone --------------------------------------------------------------------------------
mkdir -p "$dir/root/moeplan"
if [ "$worktree" = 1 ]; then
  git -C "$repo" ls-files -z --cached --others --exclude-standard |
    (cd "$repo" && xargs -0 cp --parents -t "$dir/root/moeplan" 2>/dev/null || true)
else
  git -C "$repo" archive HEAD | tar -x -C "$dir/root/moeplan"
fi
log "sources: $(find "$dir/root/moeplan" -type f | wc -l) files copied"

# ---- 3. the README's two commands ---------------------------------------------------------------
run_in() {  # name, command
  local name=$1 cmd=$2 t rc
  t=$(now)
  set +e
  chroot "$dir" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8 TERM=dumb /bin/bash -c "cd /root/moeplan && $cmd" >"$dir.$name.log" 2>&1
  rc=$?
  set -e
  log "$name: rc $rc, $(($(now) - t)) s ($cmd; log $dir.$name.log)"
  return $rc
}
status=0
run_in quickstart "bash scripts/quickstart.sh" || status=1
tail -n 12 "$dir.quickstart.log" | sed 's/^/  | /' | tee -a "$report.tmp"
run_in tests "bash scripts/test.sh" || status=1
grep -E 'tests passed|tests failed|Total Test time' "$dir.tests.log" | sed 's/^/  | /' | tee -a "$report.tmp" || true
run_in check_suite "python3 scripts/check_suite.py build build/ctest-results.xml" || status=1
sed 's/^/  | /' "$dir.check_suite.log" | tee -a "$report.tmp"
grep '^-- moeplan: ' "$dir/root/moeplan/build/configure.log" 2>/dev/null | sed 's/^/  configure | /' |
  tee -a "$report.tmp" || true
log "binaries in build/bin: $(ls "$dir/root/moeplan/build/bin" 2>/dev/null | tr '\n' ' ')"
log "total: $(($(now) - t_start)) s, $([ "$status" = 0 ] && echo PASSED || echo FAILED)"
mv "$report.tmp" "$report"
echo "fresh-machine-check: report in $report"
exit "$status"
