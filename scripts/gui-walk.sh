#!/usr/bin/env bash
# A walk through every view of moeplan-gui as a user meets it: in a real X server (Xvfb) with a
# window manager (openbox) that frames and maximizes the window, at 1366×768 and at 1600×1000.
# xdotool presses Alt+2 … Alt+7 through the X server as a user would; the app (--walk DIR)
# captures the whole screen each time a view is shown. Pictures: OUT/<W>x<H>/<view>.png, each
# checked to be the screen's size. The README's pictures are docs/images/<W>x<H>/ made by this.
# Inputs: qwen2-57b-a14b on 2 × HGX H200, a power-law expert load, EPLB with one redundant slot
# per EP rank, requests of 4096 + 1024 tokens (the Serving view plans serving for them); the
# Profiling view shows a real profile and validate of this machine (1/8 widths,
# 2 in-process ranks, rows up to 256) that the app runs first (about a minute).
# Usage: scripts/gui-walk.sh [--build DIR] [--out DIR]   (defaults: build, docs/images)
set -euo pipefail
cd "$(dirname "$0")/.."
build=build
out=docs/images
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "gui-walk: unknown option $1; expected --build DIR or --out DIR" >&2; exit 2 ;;
  esac
done
for tool in Xvfb openbox xdotool; do
  command -v "$tool" >/dev/null ||
    { echo "gui-walk: $tool not found; run scripts/install-deps.sh (xvfb openbox xdotool)" >&2; exit 2; }
done
ninja -C "$build" moeplan-gui >/dev/null
app_bin="$build/bin/moeplan-gui"
views=(model topology layouts load_balance traffic profiling serving)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
trap cleanup EXIT

# Waits (up to $3 seconds) until file $1 holds line $2.
wait_for_line() {
  local i
  for ((i = 0; i < $3 * 10; i++)); do
    grep -qx "$2.*" "$1" 2>/dev/null && return 0
    if ! kill -0 "$app" 2>/dev/null; then
      echo "gui-walk: moeplan-gui exited before '$2':" >&2
      cat "$1" >&2
      return 1
    fi
    sleep 0.1
  done
  echo "gui-walk: no '$2' after $3 s:" >&2
  cat "$1" >&2
  return 1
}

n=0
for size in 1366x768 1600x1000; do
  n=$((n + 1))
  display=":$((70 + n + RANDOM % 20 * 2))"
  dir="$out/$size"
  mkdir -p "$dir"
  log="$(mktemp)"
  Xvfb "$display" -screen 0 "${size}x24" -nolisten tcp >/dev/null 2>&1 &
  pids+=($!)
  for ((i = 0; i < 100; i++)); do
    DISPLAY="$display" xdotool getdisplaygeometry >/dev/null 2>&1 && break
    sleep 0.1
  done
  DISPLAY="$display" xdotool getdisplaygeometry >/dev/null ||
    { echo "gui-walk: Xvfb $display did not start" >&2; exit 1; }
  DISPLAY="$display" openbox >/dev/null 2>&1 &
  pids+=($!)
  sleep 1
  DISPLAY="$display" QT_QPA_PLATFORM=xcb "$app_bin" --walk "$dir" \
    --model qwen2-57b-a14b --cluster 2x-hgx-h200 --load powerlaw:alpha=1.2,shuffle=1 \
    --placement eplb --redundant 1 --context 4096,1024 --targets 2000,50 >"$log" 2>&1 &
  app=$!
  pids+=("$app")
  # The first view is captured once the plan, the placement and the example profile are done.
  wait_for_line "$log" "walk: captured model" 600
  for i in 2 3 4 5 6 7; do
    view="${views[$((i - 1))]}"
    DISPLAY="$display" xdotool key --clearmodifiers "alt+$i"
    wait_for_line "$log" "walk: captured $view" 120
  done
  wait "$app" || { echo "gui-walk: moeplan-gui failed:" >&2; cat "$log" >&2; exit 1; }
  cleanup
  # Every view, at the screen's size.
  for view in "${views[@]}"; do
    python3 - "$dir/$view.png" "$size" <<'EOF'
import struct, sys
path, size = sys.argv[1], sys.argv[2]
with open(path, "rb") as f:
    head = f.read(24)
if head[:8] != b"\x89PNG\r\n\x1a\n":
    sys.exit(f"gui-walk: {path}: not a PNG")
w, h = struct.unpack(">II", head[16:24])
if f"{w}x{h}" != size:
    sys.exit(f"gui-walk: {path}: {w}x{h}, expected the screen's {size}")
EOF
  done
  echo "gui-walk: $size: ${views[*]} captured in $dir"
  rm -f "$log"
done
