#!/usr/bin/env bash
# Regenerates the README's pictures of moeplan-gui (docs/images/*.png) without a display:
# every view of the default model on the default cluster with a skewed synthetic expert load,
# costed with EPLB's placement and one redundant expert slot per EP rank. The Profiling view's
# picture is of a real quick profile and validate of this machine (1/32 widths, 2 in-process
# ranks) that moeplan-gui --screenshot runs into a temporary database first (a minute or less).
# Usage: scripts/screenshots.sh [BUILD_DIR]   (default: build; builds moeplan-gui if needed)
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
ninja -C "$build" moeplan-gui >/dev/null
mkdir -p docs/images
QT_QPA_PLATFORM=offscreen "$build/bin/moeplan-gui" --screenshot docs/images \
  --model qwen2-57b-a14b --cluster 2x-hgx-h200 --load powerlaw:alpha=1.2,shuffle=1 \
  --placement eplb --redundant 1
