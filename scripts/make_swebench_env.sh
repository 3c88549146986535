#!/usr/bin/env bash
# Build the swebench package's own venv (the log-parser cross-check of tests/envs/test_swe_swebench_compat.py).
# Usage: VENV=.venv-swebench bash scripts/make_swebench_env.sh   (or `make swebench-venv`, which caches it)
set -euo pipefail
VENV="${VENV:?set VENV to the folder to build}"
SWEBENCH_VERSION=5.0.2
[ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import swebench" 2>/dev/null && exit 0
python3 -m venv "$VENV"
"$VENV/bin/pip" install --progress-bar off "swebench==$SWEBENCH_VERSION"
"$VENV/bin/python" -c "import swebench; print('swebench', swebench.__version__)"
