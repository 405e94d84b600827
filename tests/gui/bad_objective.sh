#!/usr/bin/env bash
# moeplan-gui --objective with a value other than tokens or time: exactly one error line naming
# the option and what was expected, exit 2, no screenshots written.
# Usage: bad_objective.sh MOEPLAN_GUI SCREENSHOT_DIR
set -u
gui="$1"
shots="$2"
rm -rf "$shots"
XDG_RUNTIME_DIR="$(mktemp -d)"  # Qt's note about an unset runtime directory is not the error
export XDG_RUNTIME_DIR
trap 'rm -rf "$XDG_RUNTIME_DIR"' EXIT
out="$("$gui" --objective banana --screenshot "$shots" 2>&1)"
rc=$?
expected="moeplan-gui: error: --objective: expected tokens or time, got 'banana'"
[ "$rc" -eq 2 ] || { echo "exit $rc, expected 2; output: $out"; exit 1; }
[ "$out" = "$expected" ] || { echo "output: '$out', expected: '$expected'"; exit 1; }
[ ! -e "$shots" ] || { echo "$shots was written"; exit 1; }
echo "refused: $out"
