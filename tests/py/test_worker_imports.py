"""R-LAY-1: the worker runtime imports no server/database code, and loads TLS lazily."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

FORBIDDEN = (
    "aiohttp",
    "psycopg",
    "psycopg_pool",
    "qinglong.db",
    "qinglong.service",
    "httpx",
    "qinglong.client",
)


def loaded_after(code: str) -> set[str]:
    script = textwrap.dedent(code) + "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))\n"
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout
    return set(json.loads(out.strip().splitlines()[-1]))


def roots(modules: set[str]) -> set[str]:
    """Top-level packages, and `qinglong.<part>` for the namespaced folders."""
    found = set()
    for name in modules:
        parts = name.split(".")
        found.add(".".join(parts[:2]) if parts[0] == "qinglong" else parts[0])
    return found


def test_import_worker_loads_no_network():
    mods = loaded_after("import qinglong.worker")
    assert not roots(mods) & set(FORBIDDEN)
    assert "ssl" not in mods and "http.client" not in mods


def test_steady_state_modules_load_no_network_or_schema_code():
    names = ["qinglong.worker"] + [
        f"qinglong.worker.{m}"
        for m in (
            "journal",
            "owner_lock",
            "backoff",
            "fsio",
            "errors",
            "coordinator",
            "cli",
            "runner",
            "session",
            "config",
            "faults",
            "eventlog",
        )
    ]
    mods = loaded_after("\n".join(f"import {n}" for n in names))
    assert not roots(mods) & set(FORBIDDEN)
    # Network and offer validation are loaded only when used.
    for lazy in (
        "ssl",
        "http.client",
        "jsonschema",
        "qinglong.worker.transport",
        "qinglong.worker.offer_validation",
    ):
        assert lazy not in mods, lazy


def test_transport_and_validation_still_avoid_server_code():
    mods = loaded_after("import qinglong.worker.transport, qinglong.worker.offer_validation")
    assert "ssl" in mods
    assert not roots(mods) & set(FORBIDDEN)
    # The transport speaks HTTP/1.1 itself: http.client would load the email package,
    # and offer validation loads jsonschema only for an offer (docs/EDGE.md).
    for lazy in ("http.client", "email", "jsonschema", "logging", "uuid"):
        assert lazy not in mods, lazy


def test_worker_cli_parser_loads_no_server_or_network_code():
    """`qinglong worker run …` builds its parser without loading the run loop's deps."""
    mods = loaded_after(
        """
        from qinglong.cli import build_parser
        args = build_parser().parse_args(
            ["worker", "run", "--dev-env", "env.json", "--journal", "j", "--slots", "2"])
        assert args.handler is not None
        """
    )
    assert not roots(mods) & set(FORBIDDEN)
    for lazy in (
        "ssl",
        "http.client",
        "jsonschema",
        "qinglong.worker.transport",
        "qinglong.worker.runner",
    ):
        assert lazy not in mods, lazy


def test_worker_command_line_imports_no_other_command_module():
    """`qinglong worker …` registers only the worker's parser: the other commands'
    modules (dev environment, admin, ingress serve, chaos …) are never imported."""
    mods = loaded_after(
        """
        from qinglong.cli import build_parser
        argv = ["worker", "run", "--dev-env", "env.json", "--journal", "j"]
        args = build_parser(argv).parse_args(argv)
        assert args.handler is not None
        """
    )
    assert "qinglong.worker_cli" in mods
    for other in (
        "qinglong.dev_cli",
        "qinglong.admin_cli",
        "qinglong.serve_cli",
        "qinglong.status_cli",
        "qinglong.ops_cli",
    ):
        assert other not in mods, other
