"""`qinglong runtime sweep` (service/sweeper.py, qinglong/runtime_cli.py) as a
subprocess against a real database: --once, the per-pass JSON line, a login
role that is only a member of ql_sweeper (SPEC §13.6: it sweeps, promotes and
prunes, and can publish, enqueue or cancel nothing), database errors, SIGTERM."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import psycopg
import pytest

from qinglong.db import api
from qinglong.runtime_cli import parse_batch, parse_every, parse_retention
from qinglong.service.sweeper import Sweeper
from qinglong.throwaway_postgres import ThrowawayPostgres
from tests.py.provision import DEFAULT_CAPABILITIES, Intent, Provisioner


def _cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "qinglong", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )


def _lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.fixture
def conn(db_dsn: str):
    with psycopg.connect(db_dsn, autocommit=True) as connection:
        yield connection


def _login(pg_cluster: ThrowawayPostgres, db_name: str, conn, group: str):
    role = f"sweeper_{uuid.uuid4().hex[:12]}"
    conn.execute(f"CREATE ROLE {role} LOGIN IN ROLE {group}")
    try:
        yield pg_cluster.dsn(db_name, user=role)
    finally:
        conn.execute(f"DROP ROLE {role}")


@pytest.fixture
def sweeper_dsn(pg_cluster: ThrowawayPostgres, db_name: str, conn):
    """A login role that is nothing but a member of ql_sweeper: how the sweeper
    runs on an ingress host (docs/OPERATIONS.md)."""
    yield from _login(pg_cluster, db_name, conn, "ql_sweeper")


@pytest.fixture
def runtime_dsn(pg_cluster: ThrowawayPostgres, db_name: str, conn):
    """A login role that is nothing but a member of ql_runtime (an operator's)."""
    yield from _login(pg_cluster, db_name, conn, "ql_runtime")


def _expired_leases(conn: psycopg.Connection, started: int, unstarted: int) -> None:
    prov = Provisioner(conn)
    task = prov.task("sweep")
    conn.execute("UPDATE ql_private.tasks SET retry_base_ms = 0 WHERE id = %s", (task,))
    prov.enqueue(task, count=started + unstarted)
    session = prov.session(prov.worker(), dict(DEFAULT_CAPABILITIES, slots=16))
    for i in range(started + unstarted):
        intent = Intent()
        assert prov.pull(session, intent)["status"] == "offered"
        if i < started:
            ack = prov.call(
                api.ack_lease(**session.lease(intent), lease_version=1, phase="starting")
            ).doc
            assert ack["status"] == "ok", ack
    conn.execute(
        "UPDATE ql_private.run_leases SET expires_at = clock_timestamp()"
        " - interval '1 second' WHERE released_at IS NULL"
    )


@pytest.mark.parametrize("login", ["sweeper_dsn", "runtime_dsn"])
def test_once_sweeps_everything_and_prints_one_pass_line(
    conn, login: str, request: pytest.FixtureRequest
) -> None:
    """The sweeper's own login (how it runs on an ingress host), and an
    operator's ql_runtime login (a one-off sweep), do the same."""
    dsn = request.getfixturevalue(login)
    _expired_leases(conn, started=2, unstarted=3)
    result = _cli("runtime", "sweep", "--dsn", dsn, "--once", "--batch", "1")
    assert result.returncode == 0, result.stderr
    (line,) = _lines(result.stdout)
    assert line["event"] == "sweep.pass"
    assert {k: line[k] for k in ("expired", "lost", "retried", "failed", "cancelled")} == {
        "expired": 3,
        "lost": 2,
        "retried": 2,
        "failed": 0,
        "cancelled": 0,
    }
    assert line["calls"] == 6  # batch 1: five full batches, then an empty one
    assert line["more"] is False
    assert isinstance(line["timeMs"], int) and isinstance(line["durationMs"], int)
    live = conn.execute(
        "SELECT count(*) FROM ql_private.run_leases WHERE released_at IS NULL"
    ).fetchone()[0]
    assert live == 0
    again = _cli("runtime", "sweep", "--dsn", dsn, "--once")
    assert again.returncode == 0, again.stderr
    assert _lines(again.stdout)[0]["calls"] == 1
    assert _lines(again.stdout)[0]["lost"] == 0


# What a sweeper login must never do (SPEC §13.6): each typed call, made as the
# ql_sweeper login, is refused by PostgreSQL before the function runs.
SWEEPER_REFUSED = {
    "publish_revision": lambda ids: api.publish_revision(
        project="evil", task="evil", canonical=b'{"schema":"qinglong/command@v1"}'
    ),
    "enqueue_runs": lambda ids: api.enqueue_runs(task_id=ids["task"], priority=0, count=1),
    "cancel_run": lambda ids: api.cancel_run(run_id=ids["run"]),
    "cancel_runs": lambda ids: api.cancel_runs(task_id=ids["task"], state="queued"),
    "retry_run": lambda ids: api.retry_run(run_id=ids["run"]),
    "configure_task": lambda ids: api.configure_task(task_id=ids["task"], max_attempts=1),
    "register_worker": lambda ids: api.register_worker(name="evil"),
    "disable_worker": lambda ids: api.disable_worker(worker_id=ids["worker"]),
    "status_snapshot": lambda ids: api.status_snapshot(),
    "list_runs": lambda ids: api.list_runs(),
}


@pytest.mark.parametrize("name", sorted(SWEEPER_REFUSED))
def test_the_sweeper_login_cannot_publish_enqueue_cancel_or_read(
    conn, sweeper_dsn: str, name: str
) -> None:
    prov = Provisioner(conn)
    task = prov.task("guarded")
    (run,) = prov.enqueue(task)
    ids = {"task": task, "run": run, "worker": prov.worker().worker_id}
    before = conn.execute("SELECT count(*) FROM ql_private.runs").fetchone()
    with psycopg.connect(sweeper_dsn, autocommit=True) as sweeper:
        with pytest.raises(psycopg.errors.InsufficientPrivilege) as caught:
            SWEEPER_REFUSED[name](ids).run(sweeper)
        assert caught.value.sqlstate == "42501"
        assert f"permission denied for function {name}" in str(caught.value)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            sweeper.execute("SELECT count(*) FROM ql_private.runs")
    assert conn.execute("SELECT count(*) FROM ql_private.runs").fetchone() == before
    assert conn.execute("SELECT state FROM ql_private.runs WHERE id = %s", (run,)).fetchone() == (
        "queued",
    )


def test_once_reports_an_unreachable_database(pg_cluster: ThrowawayPostgres) -> None:
    dsn = pg_cluster.dsn("no_such_database_here")
    result = _cli("runtime", "sweep", "--dsn", dsn, "--once")
    assert result.returncode == 1
    assert result.stdout == ""
    (line,) = _lines(result.stderr)
    assert line["event"] == "sweep.error"
    assert line["reason"] == "database_unavailable"


def test_a_role_without_ql_runtime_is_refused(
    pg_cluster: ThrowawayPostgres, db_name: str, conn
) -> None:
    role = f"ingress_{uuid.uuid4().hex[:12]}"
    conn.execute(f"CREATE ROLE {role} LOGIN IN ROLE ql_worker_ingress")
    try:
        result = _cli("runtime", "sweep", "--dsn", pg_cluster.dsn(db_name, user=role), "--once")
    finally:
        conn.execute(f"DROP ROLE {role}")
    assert result.returncode == 1
    assert _lines(result.stderr)[0]["reason"] == "permission_denied"


def test_loop_stops_cleanly_on_sigterm(conn, sweeper_dsn: str) -> None:
    _expired_leases(conn, started=1, unstarted=0)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "qinglong",
            "runtime",
            "sweep",
            "--dsn",
            sweeper_dsn,
            "--every",
            "100ms",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            done = conn.execute(
                "SELECT count(*) FROM ql_private.events WHERE type = 'attempt.lost'"
            ).fetchone()[0]
            if done:
                break
            time.sleep(0.05)
        time.sleep(0.3)  # a few more (empty) passes
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    passes = _lines(out)
    assert len(passes) >= 2
    assert sum(p["lost"] for p in passes) == 1
    assert all(p["event"] == "sweep.pass" for p in passes)
    assert any(
        line.get("event") == "sweep.stopping" and line.get("signal") == "SIGTERM"
        for line in _lines(err)
    )


def test_bad_arguments_exit_2_without_touching_a_database() -> None:
    assert _cli("runtime", "sweep", "--dsn", "x", "--batch", "0").returncode == 2
    assert _cli("runtime", "sweep", "--dsn", "x", "--batch", "5001").returncode == 2
    assert _cli("runtime", "sweep", "--dsn", "x", "--every", "5y").returncode == 2
    assert _cli("runtime", "sweep", "--dsn", "x", "--every", "10ms").returncode == 2
    assert _cli("runtime", "sweep", "--dsn", "x", "--retain-runs", "14").returncode == 2
    assert _cli("runtime", "sweep", "--dsn", "x", "--retain-audit", "-1d").returncode == 2
    assert _cli("runtime", "sweep", "--dsn", "x", "--prune-batch", "10001").returncode == 2


def test_argument_parsers() -> None:
    assert parse_every("5s") == 5.0
    assert parse_every("500ms") == 0.5
    assert parse_every("2m") == 120.0
    assert parse_every("1.5") == 1.5
    assert parse_batch("5000") == 5000
    assert parse_retention("0s") == 0
    assert parse_retention("90m") == 5400
    assert parse_retention("14d") == 14 * 86400


def _finished_runs(conn: psycopg.Connection, count: int) -> list[str]:
    """`count` succeeded runs (pull, ACK, complete through the API) + 1 queued."""
    prov = Provisioner(conn)
    task = prov.task("prune")
    run_ids = prov.enqueue(task, count=count + 1)
    session = prov.session(prov.worker(), dict(DEFAULT_CAPABILITIES, slots=16))
    for _ in range(count):
        intent = Intent()
        assert prov.pull(session, intent)["status"] == "offered"
        prov.call(api.ack_lease(**session.lease(intent), lease_version=1, phase="starting"))
        done = prov.call(
            api.complete_lease(
                **session.lease(intent), lease_version=2, outcome="succeeded", exit_code=0
            )
        ).doc
        assert done["status"] == "ok", done
    return run_ids


def test_once_prunes_past_retention_in_batches(conn, sweeper_dsn: str) -> None:
    _finished_runs(conn, 5)
    prov = Provisioner(conn)
    prov.call(
        api.record_auth_denial(
            credential_id=None, worker_id=None, action="pull", reason="missing_credential"
        )
    )
    kept = _cli("runtime", "sweep", "--dsn", sweeper_dsn, "--once")  # defaults 14d / 30d
    assert kept.returncode == 0, kept.stderr
    assert _lines(kept.stdout)[0]["pruned"]["runs"] == 0
    result = _cli(
        "runtime",
        "sweep",
        "--dsn",
        sweeper_dsn,
        "--once",
        "--retain-runs",
        "0s",
        "--retain-audit",
        "0s",
        "--prune-batch",
        "2",
    )
    assert result.returncode == 0, result.stderr
    pruned = _lines(result.stdout)[0]["pruned"]
    assert pruned["runs"] == 5 and pruned["attempts"] == 5 and pruned["securityAudit"] >= 1
    # runs 2+2+1, audit 1, fleet 1
    assert pruned["calls"] == 3 + 1 + 1 and pruned["more"] is False
    left = conn.execute("SELECT state FROM ql_private.runs").fetchall()
    assert left == [("queued",)]
    # The audit prune left one row naming the sweeper's login and what it deleted.
    audit = conn.execute(
        "SELECT action, outcome, actor, detail FROM ql_private.security_audit ORDER BY id"
    ).fetchall()
    login = psycopg.conninfo.conninfo_to_dict(sweeper_dsn)["user"]
    assert [row[:3] for row in audit] == [("audit.pruned", "allowed", login)]
    assert {k: audit[0][3][k] for k in ("securityAudit", "retainS", "batch")} == {
        "securityAudit": 1,
        "retainS": 0,
        "batch": 2,
    }


def test_once_prunes_ended_sessions_unused_classes_and_fleet_events(conn, sweeper_dsn: str) -> None:
    """The sweeper's retention covers what the fleet leaves behind (ql.prune_fleet):
    a session closed 20 days ago (not its worker's newest), a placement class no
    run or task uses, worker/session events 20 days old — with the default 14d."""
    prov = Provisioner(conn)
    worker = prov.worker()
    old = prov.session(worker)
    newest = prov.session(worker)  # replaces (closes) the first
    task = prov.task("kept")
    prov.enqueue(task)
    conn.execute(
        "UPDATE ql_private.worker_sessions SET closed_at = clock_timestamp()"
        " - interval '20 days' WHERE state = 'closed'"
    )
    conn.execute(
        "INSERT INTO ql_private.placement_classes (required) VALUES"
        ' (\'{"executors": ["remote-worker"], "labels": {"gone": ["1"]},'
        ' "runtimes": {}}\')'
    )
    conn.execute(
        "INSERT INTO ql_private.events (type, worker_id, payload, created_at)"
        " SELECT t, %s, '{}', clock_timestamp() - interval '20 days'"
        " FROM unnest(ARRAY['worker.disabled', 'session.closed']) t",
        (worker.worker_id,),
    )
    result = _cli("runtime", "sweep", "--dsn", sweeper_dsn, "--once")
    assert result.returncode == 0, result.stderr
    pruned = _lines(result.stdout)[0]["pruned"]
    assert (pruned["sessions"], pruned["placementClasses"], pruned["fleetEvents"]) == (1, 1, 2)
    sessions = conn.execute("SELECT session_id::text FROM ql_private.worker_sessions").fetchall()
    assert sessions == [(newest.session_id,)] and old.session_id != newest.session_id
    classes = conn.execute("SELECT count(*) FROM ql_private.placement_classes").fetchone()[0]
    assert classes == 1  # the queued run's (and the task's current revision's)
    again = _lines(_cli("runtime", "sweep", "--dsn", sweeper_dsn, "--once").stdout)[0]
    assert (
        again["pruned"]["sessions"],
        again["pruned"]["placementClasses"],
        again["pruned"]["fleetEvents"],
    ) == (0, 0, 0)


# ------------------------------------------------------------------ reconnect (SPEC §17.2)


class _Loop:
    """`Sweeper.run()` (the loop, not --once) in a thread, its lines captured."""

    def __init__(self, dsn: str) -> None:
        self.out, self.err = io.StringIO(), io.StringIO()
        self.stop = threading.Event()
        self.sweeper = Sweeper(dsn, 0.05, 100, out=self.out, err=self.err, stop=self.stop)
        self.thread = threading.Thread(target=self.sweeper.run, daemon=True)

    def passes(self) -> list[dict]:
        return _lines(self.out.getvalue())

    def errors(self) -> list[dict]:
        return _lines(self.err.getvalue())

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=30)
        assert not self.thread.is_alive()


def _until(condition, what: str, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while True:
        found = condition()
        if found:
            return found
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _sweeper_pid(conn: psycopg.Connection) -> int | None:
    row = conn.execute(
        "SELECT pid FROM pg_stat_activity WHERE application_name = 'qinglong-sweeper'"
    ).fetchall()
    assert len(row) <= 1, row
    return row[0][0] if row else None


def _passes_after(loop: _Loop, count: int) -> int:
    return len(loop.passes()) > count + 1  # one more whole pass on the new connection


def test_the_loop_drops_a_connection_that_lost_its_server_and_reconnects(
    conn, sweeper_dsn: str
) -> None:
    loop = _Loop(sweeper_dsn)
    loop.thread.start()
    try:
        first = _until(lambda: loop.passes() and _sweeper_pid(conn), "a first pass")
        conn.execute("SELECT pg_terminate_backend(%s)", (first,))
        _until(lambda: loop.errors(), "the failed pass on the terminated connection")
        passes = len(loop.passes())
        _until(lambda: _passes_after(loop, passes), "passes after the reconnect")
        second = _sweeper_pid(conn)
        assert second is not None and second != first
        _expired_leases(conn, started=1, unstarted=0)
        _until(lambda: sum(p["lost"] for p in loop.passes()) == 1, "the lease swept")
    finally:
        loop.close()
    assert all(e["event"] == "sweep.error" for e in loop.errors())


def test_a_read_only_server_fails_the_pass_drops_the_connection_and_passes_resume(
    conn, sweeper_dsn: str
) -> None:
    """A connection that found a read-only server (25006: a demoted primary) is
    discarded, never reused: once the server is writable again, the passes
    resume on a new backend and sweep what expired meanwhile."""
    conn.execute("SET default_transaction_read_only = off")  # this session stays writable
    loop = _Loop(sweeper_dsn)
    loop.thread.start()
    try:
        first = _until(lambda: loop.passes() and _sweeper_pid(conn), "a first pass")
        conn.execute("ALTER SYSTEM SET default_transaction_read_only = on")
        conn.execute("SELECT pg_reload_conf()")
        read_only = _until(
            lambda: [e for e in loop.errors() if e["sqlstate"] == "25006"],
            "a pass refused by the read-only server",
        )
        assert read_only[0]["event"] == "sweep.error"
        _expired_leases(conn, started=1, unstarted=1)
        time.sleep(0.3)  # several refused passes: nothing swept
        assert sum(p["expired"] + p["lost"] for p in loop.passes()) == 0
    finally:
        conn.execute("ALTER SYSTEM RESET default_transaction_read_only")
        conn.execute("SELECT pg_reload_conf()")
    try:
        _until(
            lambda: (
                [(p["expired"], p["lost"]) for p in loop.passes() if p["expired"] + p["lost"]]
                == [(1, 1)]
            ),
            "passes resumed",
        )
        second = _sweeper_pid(conn)
        assert second is not None and second != first
    finally:
        loop.close()
