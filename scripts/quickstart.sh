#!/usr/bin/env bash
# The README's first command: install what is missing, build, and run the main job on the
# bundled defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
build/bin/moeplan plan
