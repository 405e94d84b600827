#!/usr/bin/env bash
# The importer's and the fitter's Python tests (CTest: aiconfigurator_scripts). The interpreter:
# $MOEPLAN_PYTHON, else the --gpu-tables venv (scripts/install-deps.sh), else python3; tests that
# need pyarrow, numpy or the aiconfigurator-core package skip, saying why, where they are missing.
set -euo pipefail
cd "$(dirname "$0")"
py="${MOEPLAN_PYTHON:-${XDG_CACHE_HOME:-$HOME/.cache}/moeplan/gpu-tables-venv/bin/python}"
[ -x "$py" ] || py=python3
echo "aiconfigurator tests with $py"
exec "$py" -m unittest discover -v -s . -p 'test_*.py'
