#!/usr/bin/env bash
# Regenerates the README's pictures of moeplan-gui (docs/images/<W>x<H>/<view>.png): the walk
# through every view in a real X server at 1366×768 and 1600×1000 (scripts/gui-walk.sh, which CI
# runs too). Inputs: the default model on the default cluster with a skewed synthetic expert
# load, costed with EPLB's placement and one redundant expert slot per EP rank; the Profiling
# view's picture is of a real profile and validate of this machine (1/8 widths, 2 in-process
# ranks, rows up to 256) that the app runs first (about a minute).
# Usage: scripts/screenshots.sh [BUILD_DIR]   (default: build; builds moeplan-gui if needed)
# Without an X server: QT_QPA_PLATFORM=offscreen moeplan-gui --screenshot DIR renders the views.
set -euo pipefail
cd "$(dirname "$0")/.."
exec bash scripts/gui-walk.sh --build "${1:-build}" --out docs/images
