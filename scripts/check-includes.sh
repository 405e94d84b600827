#!/usr/bin/env bash
# Compiles C++ sources one by one (-fsyntax-only) with the flags of the unity batch that holds
# them, so a file that relies on an #include another file of its batch provides is caught (a
# unity build hides it). Default: the .cpp files changed since BASE (default HEAD~1).
# Usage: scripts/check-includes.sh [--build DIR] [--base REV | FILE ...]
set -euo pipefail
cd "$(dirname "$0")/.."
build=build
base=HEAD~1
files=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --base) base="$2"; shift 2 ;;
    -*) echo "check-includes: unknown option $1; expected --build DIR, --base REV or files" >&2
        exit 2 ;;
    *) files+=("$1"); shift ;;
  esac
done
[ -f "$build/compile_commands.json" ] ||
  { echo "check-includes: $build/compile_commands.json not found; configure $build first" >&2; exit 2; }
if [ ${#files[@]} -eq 0 ]; then
  mapfile -t files < <(git diff --name-only --diff-filter=AM "$base" -- '*.cpp')
fi
[ ${#files[@]} -gt 0 ] || { echo "check-includes: no .cpp files to check"; exit 0; }
python3 - "$build/compile_commands.json" "${files[@]}" <<'PY'
import json, os, re, shlex, subprocess, sys
db, files = sys.argv[1], sys.argv[2:]
entries = json.load(open(db))
root = os.getcwd()
failed = 0
for f in files:
    path = os.path.abspath(f)
    entry = None
    for e in entries:
        src = e["file"]
        if src == path:
            entry = e
            break
        if "Unity" in src and os.path.exists(src):
            if f'#include "{path}"' in open(src).read():
                entry = e
                break
    if entry is None:
        print(f"check-includes: {f}: in no compile command of the build (not built?)")
        failed += 1
        continue
    args = shlex.split(entry["command"]) if "command" in entry else list(entry["arguments"])
    out = []
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        if a == "-o":
            skip = True
            continue
        if a == "-c" or a == entry["file"]:
            continue
        if a.startswith("-MD") or a in ("-MF", "-MT"):
            skip = a in ("-MF", "-MT")
            continue
        out.append(a)
    cmd = out + ["-fsyntax-only", path]
    r = subprocess.run(cmd, cwd=entry["directory"], capture_output=True, text=True)
    status = "ok" if r.returncode == 0 else "FAILED"
    print(f"check-includes: {f}: {status}")
    if r.returncode != 0:
        failed += 1
        sys.stdout.write(r.stderr[-4000:])
sys.exit(1 if failed else 0)
PY
