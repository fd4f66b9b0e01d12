"""`qinglong status` and ql.status_snapshot() against a real PostgreSQL (black-box
through the CLI, plus the rendering helpers)."""

from __future__ import annotations

import json
import subprocess
import sys

import psycopg
import pytest
from psycopg import sql

from qinglong.db import api
from qinglong.status_cli import count, duration, render
from tests.py.provision import DEFAULT_CAPABILITIES, Intent, Provisioner


@pytest.fixture
def conn(db_dsn: str):
    with psycopg.connect(db_dsn, autocommit=True) as connection:
        yield connection


def _status(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "qinglong", "status", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_json_is_the_snapshot_and_counts_are_right(db_dsn: str, conn) -> None:
    prov = Provisioner(conn)
    task = prov.task("build")
    prov.enqueue(task, count=4, priority=2)
    prov.enqueue(prov.task("lint"), count=3)
    caps = dict(DEFAULT_CAPABILITIES, labels={"zone": "a"}, slots=3)
    session = prov.session(prov.worker("w1"), caps)
    assert prov.pull(session, Intent())["status"] == "offered"
    result = _status("--dsn", db_dsn, "--json")
    assert result.returncode == 0, result.stderr
    snap = json.loads(result.stdout)
    direct = api.status_snapshot().run(conn).doc
    assert (
        set(snap)
        == set(direct)
        == {
            "generatedAtMs",
            "queue",
            "sessions",
            "leases",
            "denials",
            "notificationQueueUsage",
            "expiring",
        }
    )
    queue = snap["queue"]
    assert (queue["runs"], queue["offered"], queue["waiting"]) == (7, 1, 6)
    assert [(p["priority"], p["runs"]) for p in queue["byPriority"]] == [(2, 4), (0, 3)]
    assert [(t["task"], t["runs"]) for t in queue["byTask"]] == [("build", 4), ("lint", 3)]
    (listed,) = snap["sessions"]["list"]
    assert (listed["worker"], listed["slots"], listed["slotsUsed"], listed["slotsFree"]) == (
        "w1",
        3,
        1,
        2,
    )
    assert listed["labels"] == {"zone": "a"}
    assert snap["leases"] == {
        "unstarted": 1,
        "started": 0,
        "expiredUnstarted": 0,
        "expiredStarted": 0,
    }


def test_human_form_is_a_compact_table(db_dsn: str, conn) -> None:
    prov = Provisioner(conn)
    prov.enqueue(prov.task("build"), count=2, priority=1)
    prov.session(prov.worker("edge-1"))
    api.record_auth_denial(
        credential_id=None, worker_id=None, action="offer.pull", reason="bad_secret"
    ).run(conn)
    result = _status("--dsn", db_dsn)
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert text.startswith("QingLong status at ")
    assert "queue     runs 2  waiting 2  offered 0" in text
    assert "p/build" in text and "edge-1" in text
    assert "denials   last hour 1  (bad_secret 1)" in text
    assert "leases    unstarted 0" in text


def test_read_only_role_may_run_it(pg_cluster, db_name: str, db_dsn: str) -> None:
    role = f"ql_status_{db_name}"
    with psycopg.connect(db_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))
        admin.execute(
            sql.SQL("CREATE ROLE {} LOGIN IN ROLE ql_readonly").format(sql.Identifier(role))
        )
    try:
        result = _status("--dsn", pg_cluster.dsn(db_name, user=role), "--json")
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["queue"]["runs"] == 0
    finally:
        with psycopg.connect(db_dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


def test_unmigrated_database_is_a_json_error(empty_db_dsn: str) -> None:
    result = _status("--dsn", empty_db_dsn)
    assert result.returncode == 1
    error = json.loads(result.stderr)
    assert (error["error"], error["reason"]) == ("status_failed", "database_not_migrated")
    assert result.stdout == ""


def test_counts_stop_at_the_group_cap(conn) -> None:
    prov = Provisioner(conn)
    task = prov.task("deep")
    prov.enqueue(task, count=10000)
    prov.enqueue(task, count=1)
    snap = api.status_snapshot().run(conn).doc
    queue = snap["queue"]
    assert queue["runs"] == 10001 and queue["capped"] is False  # total cap is 100000
    assert queue["byPriority"] == [
        {
            "priority": 0,
            "runs": 10000,
            "capped": True,
            "oldestWaitingAgeMs": queue["byPriority"][0]["oldestWaitingAgeMs"],
        }
    ]
    assert queue["byTask"][0]["runs"] == 10000 and queue["byTask"][0]["capped"] is True
    assert "10,000+" in render(snap)


def test_formatting_helpers() -> None:
    assert [duration(v) for v in (None, 5, 999, 1000, 61_000, 3_600_000, 3 * 86_400_000)] == [
        "-",
        "5ms",
        "999ms",
        "1s",
        "1m01s",
        "1h00m",
        "3d00h",
    ]
    assert count(1234567) == "1,234,567" and count(5, capped=True) == "5+"


def test_a_pinned_notify_queue_is_shown_with_a_pointer(conn) -> None:
    """A listener holding a transaction open pins the NOTIFY queue; the glance says so."""
    snap = api.status_snapshot().run(conn).doc
    assert snap["notificationQueueUsage"] == 0.0
    assert "notify    queue 0.0% used" in render(snap)
    pinned = {**snap, "notificationQueueUsage": 0.25}
    line = next(x for x in render(pinned).splitlines() if x.startswith("notify"))
    assert "25.0% used" in line and "docs/OPERATIONS.md" in line
