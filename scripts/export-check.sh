#!/usr/bin/env bash
# Check moeplan's exports against the frameworks' own argument parsers (tests/exports).
#   scripts/export-check.sh [--slim] [--frameworks sglang,vllm,...] [--allow-missing]
# MOEPLAN (default build/bin/moeplan) is the binary; the framework packages are cached in
# MOEPLAN_EXPORTS_CACHE (default ~/.cache/moeplan-exports). Needs Python >= 3.11 and, for
# Megatron-Core, a Python >= 3.12 (python3.12 on PATH or under ~/.pyenv).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MOEPLAN="${MOEPLAN:-$ROOT/build/bin/moeplan}"
exec python3 "$ROOT/tests/exports/check_exports.py" --moeplan "$MOEPLAN" "$@"
