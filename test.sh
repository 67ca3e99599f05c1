#!/usr/bin/env bash
# Runs ruff, then the whole test suite (sets up first if needed). Arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")"
./setup.sh --no-demo
export PATH="$PWD/.venv/bin:$PATH"
.venv/bin/ruff check --quiet .   # zero findings, or the suite does not run
exec .venv/bin/python -m pytest -n 2 "$@"
