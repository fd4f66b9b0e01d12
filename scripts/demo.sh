#!/usr/bin/env bash
# The demo, doing its own setup: installs the package (ingress + worker extras)
# and runs `qinglong demo`, which starts an embedded throwaway PostgreSQL.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install --quiet --disable-pip-version-check -e ".[ingress,worker]"
exec qinglong demo "$@"
