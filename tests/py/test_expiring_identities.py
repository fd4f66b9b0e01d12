"""SPEC §16.3: `qinglong status`, the console and the ingress's /metrics show the
worker credentials and certificates that expire within 14 days.

Real workers made by the real CLI (`admin worker create --credential-ttl`,
`admin worker renew-cert`, `admin cert revoke`), a real status command, a real
console process logged in as a ql_readonly role, a real ingress.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.py import ingress_harness
from tests.py.console_scenario import console_process, drop_role, fetch, readonly_dsn
from tests.py.ingress_harness import PkiSet, ingress_config

ingress_dsn = ingress_harness.ingress_dsn
start_ingress_thread = ingress_harness.start_ingress_thread
test_pki = ingress_harness.test_pki

QL = [sys.executable, "-m", "qinglong"]
DAY_MS = 86400_000


def _ql(*args: str) -> dict[str, Any]:
    done = subprocess.run([*QL, *args], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture
def fleet(db_dsn: str, test_pki: PkiSet, tmp_path: Path) -> dict[str, Any]:
    """soon: a 2-day credential; later: a 30-day one; certs: a 6-day certificate
    (renew-cert --days 6) after the 365-day one of create, then a revoked 5-day one."""
    ca = str(test_pki.ca_dir)
    made = {
        name: _ql(
            "admin",
            "worker",
            "create",
            "--dsn",
            db_dsn,
            "--name",
            name,
            "--ca-dir",
            ca,
            "--out",
            str(tmp_path / name),
            "--credential-ttl",
            ttl,
        )
        for name, ttl in (("soon", "2d"), ("later", "30d"), ("certs", "90d"))
    }
    wid = made["certs"]["workerId"]
    short = _ql(
        "admin",
        "worker",
        "renew-cert",
        "--dsn",
        db_dsn,
        "--worker",
        wid,
        "--ca-dir",
        ca,
        "--out",
        str(tmp_path / "c6"),
        "--days",
        "6",
    )
    revoked = _ql(
        "admin",
        "worker",
        "renew-cert",
        "--dsn",
        db_dsn,
        "--worker",
        wid,
        "--ca-dir",
        ca,
        "--out",
        str(tmp_path / "c5"),
        "--days",
        "5",
    )
    _ql("admin", "cert", "revoke", "--dsn", db_dsn, "--serial", revoked["serial"])
    made["short"], made["revoked"] = short, revoked
    # `create` issued a 365-day certificate first: the later 6-day renewal replaced
    # it, so the 6-day one is the one to act on although the older one lasts longer.
    return made


def test_status_lists_what_expires_within_14_days(fleet: dict[str, Any], db_dsn: str) -> None:
    snapshot = _ql("status", "--dsn", db_dsn, "--json")
    expiring = snapshot["expiring"]
    token = Path(fleet["soon"]["credentialFile"]).read_text().strip()
    assert [c["credentialId"] for c in expiring["credentials"]] == [token[5:21]]
    assert [c["serial"] for c in expiring["certificates"]] == [fleet["short"]["serial"]]
    assert expiring["credentials"][0]["worker"] == "soon"
    now = snapshot["generatedAtMs"]
    assert 2 * DAY_MS - 60_000 < expiring["credentials"][0]["expiresAtMs"] - now <= 2 * DAY_MS
    text = subprocess.run(
        [*QL, "status", "--dsn", db_dsn], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert "expiring  within 14d: credentials 1  certificates 1" in text
    assert re.search(rf"credential\s+{token[5:21]}\s+soon\s+(47h5[0-9]m|48h00m)", text), text
    assert re.search(
        rf"certificate\s+{fleet['short']['serial']}\s+certs\s+(5d2[0-3]h|6d00h)", text
    ), text
    assert token[22:] not in text


def test_console_overview_lists_them(
    fleet: dict[str, Any], db_dsn: str, pg_cluster: Any, db_name: str
) -> None:
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        try:
            with console_process(readonly_dsn(conn, pg_cluster, db_name)) as url:
                page = fetch(url)
        finally:
            drop_role(conn, db_name)
    assert page.status == 200
    body = page.body if isinstance(page.body, str) else page.body.decode()
    section = body[body.index('id="expiring-section"') :]
    section = section[: section.index("</section>")]
    token = Path(fleet["soon"]["credentialFile"]).read_text().strip()
    assert token[5:21] in section and fleet["short"]["serial"] in section
    assert "credentials 1 · certificates 1" in section
    assert fleet["revoked"]["serial"] not in section
    assert Path(fleet["later"]["credentialFile"]).read_text().strip()[5:21] not in section


@pytest.fixture
def gauges(
    fleet: dict[str, Any], start_ingress_thread: Any, test_pki: PkiSet, ingress_dsn: str
) -> Iterator[str]:
    server = start_ingress_thread(ingress_config(test_pki, ingress_dsn))
    deadline = time.monotonic() + 10
    while "qinglong_worker_credentials_expiring 1" not in server.metrics_text():
        assert time.monotonic() < deadline, server.metrics_text()[-2000:]
        time.sleep(0.1)
    yield server.metrics_text()


def test_ingress_metrics_count_them(gauges: str) -> None:
    lines = set(gauges.splitlines())
    assert "qinglong_worker_credentials_expiring 1" in lines
    assert "qinglong_worker_certificates_expiring 1" in lines
