#!/usr/bin/env bash
# The full test suite, doing its own setup on a fresh Debian 12 machine:
# pgTAP + pg_prove and headless Chromium (apt), the Python package with its dev extra (pip), then
# ruff (lint + format check), mypy, pytest (which starts its own throwaway PostgreSQL and runs pg_prove).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v pg_prove >/dev/null 2>&1 \
   || [ ! -f /usr/share/postgresql/15/extension/pgtap.control ]; then
    if [ "$(id -u)" -eq 0 ]; then
        apt-get update
        apt-get install -y postgresql-15-pgtap libtap-parser-sourcehandler-pgtap-perl
    else
        sudo apt-get update
        sudo apt-get install -y postgresql-15-pgtap libtap-parser-sourcehandler-pgtap-perl
    fi
fi

# Headless Chromium for the console's browser tests (tests/py/test_console_browser.py).
# No recommends: a font still comes (chromium -> libfontconfig1 -> fontconfig-config
# depends on fonts-dejavu-core), which is all headless screenshots need.
if ! command -v chromium >/dev/null 2>&1; then
    if [ "$(id -u)" -eq 0 ]; then
        apt-get update
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium
    else
        sudo apt-get update
        sudo DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium
    fi
fi

# The availability drill (tests/py/test_ha_drill.py, `python -m tools.chaos drill`): etcd,
# Patroni (run by the system's /usr/bin/python3) and HAProxy, all from Debian packages.
if ! command -v patroni >/dev/null 2>&1 || ! command -v etcd >/dev/null 2>&1 \
   || ! command -v haproxy >/dev/null 2>&1; then
    if [ "$(id -u)" -eq 0 ]; then
        apt-get update
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
            patroni etcd-server etcd-client haproxy
    else
        sudo apt-get update
        sudo DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
            patroni etcd-server etcd-client haproxy
    fi
fi

python3 -m pip install --quiet --disable-pip-version-check -e ".[dev]"
python3 -m ruff check .
# One style: `ruff format` (pinned minor in the dev extra); CI fails on a file it would change.
python3 -m ruff format --check .
# Strict typing of the whole `qinglong` package (settings in pyproject.toml [tool.mypy]).
python3 -m mypy
exec python3 -m pytest "$@"
