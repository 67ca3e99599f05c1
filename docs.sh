#!/usr/bin/env bash
# Serves the documentation site at http://127.0.0.1:8000 with live reload (mkdocs serve; sets up
# first if needed). Arguments go to mkdocs serve, e.g. ./docs.sh -a 0.0.0.0:8000.
# Build it once instead: .venv/bin/mkdocs build --strict   (into site/; open site/index.html)
set -euo pipefail
cd "$(dirname "$0")"
./setup.sh --no-demo
exec .venv/bin/mkdocs serve "$@"
