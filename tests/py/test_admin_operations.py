"""`qinglong admin` for operating it for months (SPEC §9), against a real database.

Most commands run in-process through `qinglong.cli.main` (the real parser and
handlers, stdout/stderr captured; a subprocess per call would cost the fast
lane seconds); `test_process_level_*` run the same commands as subprocesses
to pin what a process sees (one line, exit status). Rows are made through the
SQL API (tests/py/provision.py): pull + ack + complete, never table inserts.
"""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from psycopg import sql

from qinglong.cli import main
from qinglong.db import api
from qinglong.service.compiler import compile_command
from qinglong.throwaway_postgres import ThrowawayPostgres
from tests.py.provision import (
    DEFAULT_CAPABILITIES,
    Intent,
    Provisioner,
    Session,
    command,
    table_fingerprint,
)

TERMINAL = ("succeeded", "failed", "cancelled")
RESULT = {"exitCode": 0, "durationMs": 12, "outputTail": "done\n", "outputBytes": 5}


@dataclass(frozen=True)
class Outcome:
    code: int
    stdout: str
    stderr: str

    @property
    def doc(self) -> dict[str, Any]:
        lines = self.stdout.strip().splitlines()
        assert self.code == 0, self.stderr
        assert len(lines) == 1, self.stdout
        return json.loads(lines[0])

    @property
    def error(self) -> dict[str, Any]:
        assert self.stdout == ""
        assert "Traceback" not in self.stderr
        return json.loads(self.stderr.strip().splitlines()[-1])


def admin(*args: str) -> Outcome:
    """`qinglong admin …` in-process: the real parser and handler."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(["admin", *args])
        except SystemExit as exc:  # argparse usage errors
            code = int(exc.code or 0)
    return Outcome(code, out.getvalue(), err.getvalue())


def ok(*args: str) -> dict[str, Any]:
    return admin(*args).doc


def invalid(*args: str, field: str | None) -> dict[str, Any]:
    """Refused as invalid input: exit 2, a JSON error naming the field."""
    outcome = admin(*args)
    assert outcome.code == 2, (outcome.stdout, outcome.stderr)
    doc = outcome.error
    assert doc["error"] == "invalid_input", doc
    assert doc["field"] == field, doc
    return doc


def fails(*args: str, reason: str) -> dict[str, Any]:
    """Refused for a reason other than its input: exit 1."""
    outcome = admin(*args)
    assert outcome.code == 1, (outcome.stdout, outcome.stderr)
    doc = outcome.error
    assert doc["reason"] == reason, doc
    return doc


# ------------------------------------------------------------------ fixtures


@pytest.fixture
def conn(db_dsn: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(db_dsn, autocommit=True) as connection:
        yield connection


@pytest.fixture
def prov(conn: psycopg.Connection) -> Provisioner:
    return Provisioner(conn)


@pytest.fixture
def task_id(prov: Provisioner) -> str:
    return prov.task("ops")


@pytest.fixture
def session(prov: Provisioner) -> Session:
    return prov.session(prov.worker("ops-worker"), dict(DEFAULT_CAPABILITIES, slots=16))


def _offer(prov: Provisioner, session: Session) -> tuple[Intent, dict[str, Any]]:
    intent = Intent()
    pulled = prov.pull(session, intent)
    assert pulled["status"] == "offered", pulled
    return intent, pulled["offer"]


def start(prov: Provisioner, session: Session) -> tuple[Intent, str]:
    """Pull the next run and ACK it `starting`: a live, started run."""
    intent, offer = _offer(prov, session)
    ack = prov.call(api.ack_lease(**session.lease(intent), lease_version=1, phase="starting")).doc
    assert ack["status"] == "ok", ack
    return intent, offer["candidate"]["runId"]


def finish(
    prov: Provisioner,
    session: Session,
    outcome: str = "succeeded",
    result: dict[str, Any] | None = None,
) -> str:
    """Pull, start and complete the next run; returns its id."""
    intent, run_id = start(prov, session)
    done = prov.call(
        api.complete_lease(
            **session.lease(intent),
            lease_version=2,
            outcome=outcome,
            exit_code=0 if outcome == "succeeded" else 1,
            result=result,
        )
    ).doc
    assert done["status"] == "ok", done
    return run_id


def _count(conn: psycopg.Connection, query: str, *params: Any) -> int:
    row = conn.execute(query, params).fetchone()
    assert row is not None
    return int(row[0])


def _run_rows(conn: psycopg.Connection, run_ids: list[str]) -> dict[str, int]:
    """Rows that belong to these runs, per table (what prune must delete)."""
    ids = [uuid.UUID(r) for r in run_ids]
    return {
        "runs": _count(conn, "SELECT count(*) FROM ql_private.runs WHERE id = ANY(%s)", ids),
        "attempts": _count(
            conn, "SELECT count(*) FROM ql_private.attempts WHERE run_id = ANY(%s)", ids
        ),
        "leases": _count(
            conn,
            "SELECT count(*) FROM ql_private.run_leases l"
            " JOIN ql_private.attempts a ON a.id = l.attempt_id"
            " WHERE a.run_id = ANY(%s)",
            ids,
        ),
        "events": _count(
            conn, "SELECT count(*) FROM ql_private.events WHERE run_id = ANY(%s)", ids
        ),
    }


# ------------------------------------------------------------ 9.1 task settings

SETTINGS_KEYS = {
    "taskId",
    "leaseTtlS",
    "maxAttempts",
    "retryBaseMs",
    "retryCapMs",
    "enabled",
    "logLimitBytes",
}


def test_task_configure_changes_and_prints_the_settings(db_dsn: str, task_id: str) -> None:
    before = ok("task", "configure", "--dsn", db_dsn, "--task", task_id)
    assert set(before) == SETTINGS_KEYS
    assert before["taskId"] == task_id and before["enabled"] is True
    assert before["logLimitBytes"] == 4 * 1024 * 1024  # SPEC 15.2: the default 4 MiB
    after = ok(
        "task",
        "configure",
        "--dsn",
        db_dsn,
        "--task",
        task_id,
        "--lease-ttl-s",
        "86400",
        "--max-attempts",
        "7",
        "--retry-base-ms",
        "100",
        "--retry-cap-ms",
        "86400000",
        "--enabled",
        "false",
        "--log-limit-bytes",
        "1024",
    )
    assert after == {
        "taskId": task_id,
        "leaseTtlS": 86400,
        "maxAttempts": 7,
        "retryBaseMs": 100,
        "retryCapMs": 86400000,
        "enabled": False,
        "logLimitBytes": 1024,
    }
    assert ok("task", "configure", "--dsn", db_dsn, "--task", task_id) == after
    # Only the given settings change.
    again = ok("task", "configure", "--dsn", db_dsn, "--task", task_id, "--enabled", "true")
    assert again == {**after, "enabled": True}


SETTING_REFUSALS = [
    ("--lease-ttl-s", "4", "leaseTtlS"),
    ("--lease-ttl-s", "86401", "leaseTtlS"),
    ("--max-attempts", "0", "maxAttempts"),
    ("--max-attempts", "101", "maxAttempts"),
    ("--retry-base-ms", "99", "retryBaseMs"),
    ("--retry-base-ms", "3600001", "retryBaseMs"),
    ("--retry-cap-ms", "86400001", "retryCapMs"),
    ("--retry-cap-ms", "999", "retryCapMs"),  # below the task's base (1000)
    ("--max-attempts", "x", "maxAttempts"),
    ("--lease-ttl-s", "99999999999", "leaseTtlS"),
    ("--enabled", "yes", "enabled"),
    ("--log-limit-bytes", "1023", "logLimitBytes"),
    ("--log-limit-bytes", "67108865", "logLimitBytes"),
    ("--log-limit-bytes", "4MiB", "logLimitBytes"),
]


def test_task_configure_out_of_bounds_changes_nothing(
    db_dsn: str, conn: psycopg.Connection, task_id: str
) -> None:
    # One database for every case (a fresh one each would cost the fast lane).
    before = table_fingerprint(conn)
    for flag, value, field in SETTING_REFUSALS:
        invalid("task", "configure", "--dsn", db_dsn, "--task", task_id, flag, value, field=field)
        assert table_fingerprint(conn) == before, (flag, value)


def test_task_configure_unknown_and_malformed_task(db_dsn: str) -> None:
    fails(
        "task",
        "configure",
        "--dsn",
        db_dsn,
        "--task",
        str(uuid.uuid4()),
        "--max-attempts",
        "2",
        reason="not_found",
    )
    fails("task", "configure", "--dsn", db_dsn, "--task", str(uuid.uuid4()), reason="not_found")
    invalid("task", "configure", "--dsn", db_dsn, "--task", "nope", field="taskId")


def test_task_publish_applies_settings_in_the_same_transaction(
    db_dsn: str, conn: psycopg.Connection, tmp_path: Any
) -> None:
    command = tmp_path / "command.json"
    command.write_text(
        json.dumps({"schema": "qinglong/command@v1", "argv": ["true"], "env": {}, "timeoutS": 30})
    )
    publish = (
        "task",
        "publish",
        "--dsn",
        db_dsn,
        "--project",
        "p",
        "--name",
        "n",
        "--command-file",
        str(command),
    )
    before = table_fingerprint(conn)
    invalid(*publish, "--lease-ttl-s", "3", field="leaseTtlS")
    invalid(*publish, "--log-limit-bytes", "100", field="logLimitBytes")
    assert table_fingerprint(conn) == before, "a refused setting leaves no task/revision"
    published = ok(
        *publish, "--lease-ttl-s", "600", "--max-attempts", "1", "--log-limit-bytes", "65536"
    )
    assert set(published) == {
        "taskId",
        "revisionId",
        "revision",
        "pool",
        "contentDigest",
        "signatureKid",
    }
    assert published["signatureKid"] is None  # published without --sign-key
    settings = ok("task", "configure", "--dsn", db_dsn, "--task", published["taskId"])
    assert (settings["leaseTtlS"], settings["maxAttempts"], settings["logLimitBytes"]) == (
        600,
        1,
        65536,
    )


def test_a_disabled_task_refuses_enqueue(db_dsn: str, task_id: str) -> None:
    ok("task", "configure", "--dsn", db_dsn, "--task", task_id, "--enabled", "false")
    invalid("run", "enqueue", "--dsn", db_dsn, "--task", task_id, field="taskId")


def test_new_lease_ttl_applies_to_attempts_claimed_afterwards(
    db_dsn: str, conn: psycopg.Connection, prov: Provisioner, task_id: str, session: Session
) -> None:
    prov.enqueue(task_id, count=1)
    ok("task", "configure", "--dsn", db_dsn, "--task", task_id, "--lease-ttl-s", "7200")
    _, offer = _offer(prov, session)
    ttl = conn.execute(
        "SELECT extract(epoch FROM expires_at - claimed_at)"
        " FROM ql_private.run_leases WHERE offer_id = %s",
        (offer["offerId"],),
    ).fetchone()
    assert ttl is not None and 7190 <= float(ttl[0]) <= 7200


# ------------------------------------------------- 9.2 scheduled, idempotent enqueue


def test_enqueue_with_delay_is_not_offered_before_its_time(
    db_dsn: str, prov: Provisioner, task_id: str, session: Session
) -> None:
    now_ms = int(time.time() * 1000)
    later = ok("run", "enqueue", "--dsn", db_dsn, "--task", task_id, "--delay-s", "3600")
    assert later["existing"] is False and len(later["runIds"]) == 1
    shown = ok("run", "show", "--dsn", db_dsn, "--run", later["runIds"][0])["run"]
    assert shown["state"] == "queued"
    assert now_ms + 3590_000 <= shown["notBeforeMs"] <= now_ms + 3610_000
    assert prov.pull(session, Intent())["status"] == "idle"
    # A not-before in the past is ready now.
    past = ok(
        "run",
        "enqueue",
        "--dsn",
        db_dsn,
        "--task",
        task_id,
        "--not-before-ms",
        str(now_ms - 60_000),
    )
    _, offer = _offer(prov, session)
    assert offer["candidate"]["runId"] == past["runIds"][0]


ENQUEUE_REFUSALS = [
    (("--delay-s", "-1"), "delayMs"),
    (("--delay-s", "31536001"), "delayMs"),
    (("--delay-s", "soon"), "delayMs"),
    (("--not-before-ms", str(int(time.time() * 1000) + 400 * 86400_000)), "notBeforeMs"),
    (("--not-before-ms", "-5"), "notBeforeMs"),
    (("--key", "k", "--count", "2"), "key"),
    (("--key", ""), "key"),
    (("--key", "x" * 129), "key"),
    (("--key", "tab\there"), "key"),
]


def test_enqueue_refuses_bad_schedules_and_keys(
    db_dsn: str, conn: psycopg.Connection, task_id: str
) -> None:
    before = table_fingerprint(conn)
    for extra, field in ENQUEUE_REFUSALS:
        invalid("run", "enqueue", "--dsn", db_dsn, "--task", task_id, *extra, field=field)
        assert table_fingerprint(conn) == before, extra


def test_delay_and_not_before_together_is_a_usage_error(db_dsn: str, task_id: str) -> None:
    outcome = admin(
        "run",
        "enqueue",
        "--dsn",
        db_dsn,
        "--task",
        task_id,
        "--delay-s",
        "1",
        "--not-before-ms",
        "1",
    )
    assert outcome.code == 2 and outcome.stdout == ""


def test_the_same_key_returns_the_same_run(
    db_dsn: str, conn: psycopg.Connection, task_id: str, prov: Provisioner
) -> None:
    first = ok("run", "enqueue", "--dsn", db_dsn, "--task", task_id, "--key", "nightly-42")
    second = ok("run", "enqueue", "--dsn", db_dsn, "--task", task_id, "--key", "nightly-42")
    assert first["existing"] is False and second["existing"] is True
    assert second["runIds"] == first["runIds"]
    other_task = prov.task("other")
    third = ok("run", "enqueue", "--dsn", db_dsn, "--task", other_task, "--key", "nightly-42")
    assert third["existing"] is False and third["runIds"] != first["runIds"]
    assert _count(conn, "SELECT count(*) FROM ql_private.runs") == 2
    assert (
        ok("run", "show", "--dsn", db_dsn, "--run", first["runIds"][0])["run"]["key"]
        == "nightly-42"
    )


def test_the_same_key_from_eight_connections_at_once_makes_one_run(
    db_dsn: str, conn: psycopg.Connection, task_id: str
) -> None:
    barrier = threading.Barrier(8)
    answers: list[dict[str, Any]] = []
    errors: list[BaseException] = []

    def enqueue() -> None:
        try:
            with psycopg.connect(db_dsn, autocommit=True) as own:
                barrier.wait(timeout=30)
                answers.append(
                    api.enqueue_runs(task_id=task_id, priority=0, count=1, key="once").run(own).doc
                )
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=enqueue) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert len({tuple(a["runIds"]) for a in answers}) == 1
    assert sorted(a["existing"] for a in answers) == [False] + [True] * 7
    assert _count(conn, "SELECT count(*) FROM ql_private.runs") == 1


# ------------------------------------------------------------ 9.3 results, 9.4 show


def test_run_show_has_attempts_results_and_events(
    db_dsn: str, prov: Provisioner, task_id: str, session: Session
) -> None:
    prov.enqueue(task_id, count=1)
    run_id = finish(prov, session, result=RESULT)
    shown = ok("run", "show", "--dsn", db_dsn, "--run", run_id)
    assert set(shown) == {"run", "attempts", "events"}
    assert set(shown["run"]) == {
        "runId",
        "taskId",
        "projectId",
        "project",
        "taskName",
        "pool",
        "state",
        "priority",
        "queuedAtMs",
        "notBeforeMs",
        "attempts",
        "updatedAtMs",
        "finishedAtMs",
        "cancelRequested",
        "executionRevisionId",
        "key",
    }
    assert (shown["run"]["project"], shown["run"]["taskName"], shown["run"]["pool"]) == (
        "p",
        "ops",
        "p/default",
    )
    assert shown["run"]["state"] == "succeeded" and shown["run"]["attempts"] == 1
    (attempt,) = shown["attempts"]
    assert set(attempt) == {
        "attemptId",
        "number",
        "state",
        "workerId",
        "sessionId",
        "claimedAtMs",
        "startedAtMs",
        "finishedAtMs",
        "exitCode",
        "reason",
        "result",
    }
    assert attempt["number"] == 1 and attempt["state"] == "succeeded"
    assert attempt["workerId"] == session.worker.worker_id
    assert attempt["sessionId"] == session.session_id
    assert attempt["result"] == RESULT
    types = [event["type"] for event in shown["events"]]
    assert types[0] == "run.queued" and types[-1].endswith("succeeded"), types
    assert all(isinstance(event["atMs"], int) for event in shown["events"])


def test_complete_result_is_validated(prov: Provisioner, task_id: str, session: Session) -> None:
    prov.enqueue(task_id, count=1)
    intent, _ = start(prov, session)
    for bad in (
        {**RESULT, "extra": 1},
        {**RESULT, "outputTail": "x" * 8193},
        {**RESULT, "durationMs": -1},
        {"durationMs": 1},
    ):
        with pytest.raises(psycopg.Error) as caught:
            prov.call(
                api.complete_lease(
                    **session.lease(intent), lease_version=2, outcome="succeeded", result=bad
                )
            )
        assert caught.value.sqlstate == "QL001"
        assert caught.value.diag.column_name == "result"


def test_run_show_refusals(db_dsn: str) -> None:
    fails("run", "show", "--dsn", db_dsn, "--run", str(uuid.uuid4()), reason="not_found")
    invalid("run", "show", "--dsn", db_dsn, "--run", "RUN", field="runId")


# ------------------------------------------------------------------ 9.4 list

RUN_KEYS = {
    "runId",
    "taskId",
    "project",
    "taskName",
    "pool",
    "state",
    "priority",
    "queuedAtMs",
    "notBeforeMs",
    "attempts",
    "updatedAtMs",
}


def _page_through(db_dsn: str, *filters: str) -> tuple[list[str], int]:
    seen: list[str] = []
    pages = 0
    after: list[str] = []
    while True:
        page = ok("run", "list", "--dsn", db_dsn, *filters, *after)
        pages += 1
        assert set(page) == {"runs", "next"}
        assert all(set(run) == RUN_KEYS for run in page["runs"])
        seen += [run["runId"] for run in page["runs"]]
        if page["next"] is None:
            return seen, pages
        after = ["--after", page["next"]]


def test_run_list_pages_through_250_succeeded_runs_exactly_once(
    db_dsn: str, prov: Provisioner, task_id: str, session: Session
) -> None:
    queued = prov.enqueue(task_id, count=250)
    done = [finish(prov, session) for _ in range(250)]
    assert sorted(done) == sorted(queued)
    live = prov.enqueue(task_id, count=3)
    seen, pages = _page_through(db_dsn, "--state", "succeeded", "--limit", "100")
    assert pages == 3
    assert seen == list(reversed(queued)), "every succeeded run once, newest first"
    everything, _ = _page_through(db_dsn, "--task", task_id, "--limit", "1000")
    assert everything == list(reversed(queued + live))
    both, _ = _page_through(db_dsn, "--state", "queued", "succeeded", "--limit", "100")
    assert both == list(reversed(queued + live))
    first = ok("run", "list", "--dsn", db_dsn, "--state", "queued")["runs"][0]
    assert first["runId"] == live[-1] and first["state"] == "queued"
    assert first["attempts"] == 1 and first["taskId"] == task_id


def test_run_list_refuses_bad_arguments(db_dsn: str) -> None:
    for args, field in [
        (("--limit", "0"), "limit"),
        (("--limit", "1001"), "limit"),
        (("--limit", "many"), "limit"),
        (("--state", "done"), "state"),
        (("--after", "not-a-cursor"), "after"),
        (("--task", "T"), "taskId"),
    ]:
        invalid("run", "list", "--dsn", db_dsn, *args, field=field)


# ------------------------------------------------------- 9.5 operator actions


def _events(conn: psycopg.Connection, kind: str) -> list[dict[str, Any]]:
    rows = conn.execute(
        "SELECT payload FROM ql_private.events WHERE type = %s ORDER BY id", (kind,)
    ).fetchall()
    return [row[0] for row in rows]


def test_run_retry_gives_a_failed_run_a_new_attempt(
    db_dsn: str, conn: psycopg.Connection, prov: Provisioner, task_id: str, session: Session
) -> None:
    prov.call(api.configure_task(task_id=task_id, max_attempts=1))
    prov.enqueue(task_id, count=2)
    failed = finish(prov, session, "failed")
    assert ok("run", "show", "--dsn", db_dsn, "--run", failed)["run"]["state"] == "failed"
    retried = ok("run", "retry", "--dsn", db_dsn, "--run", failed)
    assert set(retried) == {"runId", "attemptId", "attemptNo", "state"}
    assert (retried["runId"], retried["attemptNo"], retried["state"]) == (failed, 2, "queued")
    actor = conn.execute("SELECT session_user").fetchone()
    assert [e.get("actor") for e in _events(conn, "run.retried")] == [actor[0] if actor else 0]
    # A live run cannot be retried; the retried one is a candidate again (the
    # oldest in the queue, so offered first).
    fails("run", "retry", "--dsn", db_dsn, "--run", failed, reason="illegal_transition")
    _, offer = _offer(prov, session)
    assert (offer["candidate"]["runId"], offer["candidate"]["attemptId"]) == (
        failed,
        retried["attemptId"],
    )
    fails("run", "retry", "--dsn", db_dsn, "--run", str(uuid.uuid4()), reason="not_found")
    invalid("run", "retry", "--dsn", db_dsn, "--run", "x", field="runId")


def test_run_retry_of_a_cancelled_run(db_dsn: str, prov: Provisioner, task_id: str) -> None:
    (run_id,) = prov.enqueue(task_id)
    ok("run", "cancel", "--dsn", db_dsn, "--run", run_id)
    assert ok("run", "retry", "--dsn", db_dsn, "--run", run_id)["attemptNo"] == 2
    shown = ok("run", "show", "--dsn", db_dsn, "--run", run_id)
    assert shown["run"]["state"] == "queued" and shown["run"]["cancelRequested"] is False
    assert [a["number"] for a in shown["attempts"]] == [1, 2]


def test_run_retry_refused_for_a_disabled_task(
    db_dsn: str, conn: psycopg.Connection, prov: Provisioner, task_id: str
) -> None:
    """A disabled task refuses new work (SPEC 9.1): exit 1, reason task_disabled,
    and the run stays cancelled with its one attempt."""
    (run_id,) = prov.enqueue(task_id)
    ok("run", "cancel", "--dsn", db_dsn, "--run", run_id)
    ok("task", "configure", "--dsn", db_dsn, "--task", task_id, "--enabled", "false")
    doc = fails("run", "retry", "--dsn", db_dsn, "--run", run_id, reason="task_disabled")
    assert "disabled" in doc["detail"], doc
    shown = ok("run", "show", "--dsn", db_dsn, "--run", run_id)
    assert shown["run"]["state"] == "cancelled" and len(shown["attempts"]) == 1
    assert _events(conn, "run.retried") == []
    ok("task", "configure", "--dsn", db_dsn, "--task", task_id, "--enabled", "true")
    assert ok("run", "retry", "--dsn", db_dsn, "--run", run_id)["attemptNo"] == 2


def test_run_cancel_bulk(
    db_dsn: str, conn: psycopg.Connection, prov: Provisioner, task_id: str, session: Session
) -> None:
    prov.enqueue(task_id, count=4)
    _, started = start(prov, session)
    other = prov.enqueue(prov.task("other"), count=1)
    out = ok("run", "cancel", "--dsn", db_dsn, "--task", task_id, "--state", "queued")
    assert out["cancelled"] == 3
    states = dict(conn.execute("SELECT id::text, state FROM ql_private.runs").fetchall())
    assert states.pop(started) == "starting"
    assert states.pop(other[0]) == "queued"
    assert set(states.values()) == {"cancelled"}
    assert len(_events(conn, "run.cancelled")) == 3
    assert all("actor" in e for e in _events(conn, "run.cancelled"))
    assert (
        ok("run", "cancel", "--dsn", db_dsn, "--task", task_id, "--state", "queued")["cancelled"]
        == 0
    )
    fails(
        "run",
        "cancel",
        "--dsn",
        db_dsn,
        "--task",
        str(uuid.uuid4()),
        "--state",
        "queued",
        reason="not_found",
    )


def _hold_runs(db_dsn: str, run_ids: list[str]) -> psycopg.Connection:
    """A second connection holding the runs' rows in an open transaction, as a
    claim or a sweeper does while it works on them."""
    holder = psycopg.connect(db_dsn)
    holder.execute(
        "SELECT 1 FROM ql_private.runs WHERE id = ANY(%s::uuid[]) FOR NO KEY UPDATE", (run_ids,)
    )
    return holder


def _states(conn: psycopg.Connection, run_ids: list[str]) -> dict[str, str]:
    rows = conn.execute(
        "SELECT r.id::text, r.state || '/' || a.state FROM ql_private.runs r"
        " JOIN ql_private.attempts a ON a.id = r.current_attempt_id"
        " WHERE r.id = ANY(%s::uuid[])",
        (run_ids,),
    ).fetchall()
    return dict(rows)


def test_run_cancel_bulk_waits_for_runs_another_transaction_holds(
    db_dsn: str, conn: psycopg.Connection, prov: Provisioner, task_id: str
) -> None:
    """SPEC 9.5: every run queued when the command started is cancelled when it
    returns — 3 of 10 are held by another transaction that lets go within the
    bound: the command waits for them and cancels all 10, exit 0."""
    runs = prov.enqueue(task_id, count=10)
    holder = _hold_runs(db_dsn, runs[:3])
    release = threading.Timer(0.5, holder.commit)
    release.start()
    try:
        out = ok(
            "run",
            "cancel",
            "--dsn",
            db_dsn,
            "--task",
            task_id,
            "--state",
            "queued",
            "--wait-ms",
            "10000",
        )
    finally:
        release.join()
        holder.close()
    assert out == {"cancelled": 10, "notCancelled": []}
    assert set(_states(conn, runs).values()) == {"cancelled/cancelled"}
    assert len(_events(conn, "run.cancelled")) == 10


def test_run_cancel_bulk_lists_what_it_could_not_cancel(
    db_dsn: str, conn: psycopg.Connection, prov: Provisioner, task_id: str
) -> None:
    """Held past the bound: the held runs are listed (reason locked) and the exit
    status is 1; the others are cancelled, and nothing of the held ones is
    half-done (still queued, attempt claimed, no event)."""
    runs = prov.enqueue(task_id, count=10)
    holder = _hold_runs(db_dsn, runs[:3])
    try:
        began = time.monotonic()
        outcome = admin(
            "run",
            "cancel",
            "--dsn",
            db_dsn,
            "--task",
            task_id,
            "--state",
            "queued",
            "--wait-ms",
            "300",
        )
        took = time.monotonic() - began
        held = _states(conn, runs[:3])
    finally:
        holder.close()
    assert outcome.code == 1, outcome.stderr
    doc = json.loads(outcome.stdout)
    assert doc["cancelled"] == 7
    assert doc["notCancelled"] == [
        {"runId": r, "state": "queued", "reason": "locked"} for r in runs[:3]
    ]
    assert 0.3 <= took < 5, took
    assert held == {r: "queued/claimed" for r in runs[:3]}
    assert set(_states(conn, runs[3:]).values()) == {"cancelled/cancelled"}
    cancelled_events = {e["attemptId"] for e in _events(conn, "run.cancelled")}
    assert len(cancelled_events) == 7
    assert ok("run", "cancel", "--dsn", db_dsn, "--task", task_id, "--state", "queued") == {
        "cancelled": 3,
        "notCancelled": [],
    }


def test_run_cancel_bulk_decides_on_what_the_holder_left(
    db_dsn: str, conn: psycopg.Connection, prov: Provisioner, task_id: str, session: Session
) -> None:
    """Two queued runs are being claimed by a pull that has not committed yet; one
    of them its worker even starts in that transaction. The bulk cancel waits for
    both: the claimed, unstarted one is cancelled (its offer's lease released
    `cancelled`), the started one is listed (`started`, exit 1) and left to
    `--run` (its worker must be told)."""
    runs = prov.enqueue(task_id, count=5)
    claimer = psycopg.connect(db_dsn)
    first, second = Intent(), Intent()
    offered = [
        api.pull_offer(**session.lease(i)).run(claimer).doc["offer"]["candidate"]["runId"]
        for i in (first, second)
    ]
    acked = api.ack_lease(**session.lease(second), lease_version=1, phase="starting").run(claimer)
    assert acked.status == "ok", acked
    release = threading.Timer(0.5, claimer.commit)
    release.start()
    try:
        outcome = admin(
            "run",
            "cancel",
            "--dsn",
            db_dsn,
            "--task",
            task_id,
            "--state",
            "queued",
            "--wait-ms",
            "10000",
        )
    finally:
        release.join()
        claimer.close()
    assert outcome.code == 1, outcome.stderr
    doc = json.loads(outcome.stdout)
    assert doc == {
        "cancelled": 4,
        "notCancelled": [{"runId": offered[1], "state": "starting", "reason": "started"}],
    }
    states = _states(conn, runs)
    assert states.pop(offered[1]) == "starting/starting"
    assert set(states.values()) == {"cancelled/cancelled"}
    lease = conn.execute(
        "SELECT release_reason FROM ql_private.run_leases WHERE run_id = %s", (offered[0],)
    ).fetchone()
    assert lease == ("cancelled",)
    released = [e for e in _events(conn, "run.cancelled") if e.get("leaseReleased")]
    assert [e["bulk"] for e in released] == [True]


CANCEL_REFUSALS = [
    (("--task", "{task}", "--state", "running"), "state"),
    (("--task", "{task}", "--state", "nope"), "state"),
    (("--task", "{task}"), "state"),
    (("--run", "{run}", "--task", "{task}", "--state", "queued"), "runId"),
    ((), "runId"),
    (("--task", "{task}", "--state", "queued", "--wait-ms", "60001"), "waitMs"),
    (("--task", "{task}", "--state", "queued", "--wait-ms", "soon"), "waitMs"),
    (("--run", "{run}", "--wait-ms", "100"), "runId"),
]


def test_run_cancel_refusals(
    db_dsn: str, conn: psycopg.Connection, prov: Provisioner, task_id: str
) -> None:
    (run_id,) = prov.enqueue(task_id)
    before = table_fingerprint(conn)
    for args, field in CANCEL_REFUSALS:
        filled = [a.format(task=task_id, run=run_id) for a in args]
        invalid("run", "cancel", "--dsn", db_dsn, *filled, field=field)
        assert table_fingerprint(conn) == before, args


def test_worker_list_disable_enable(
    db_dsn: str, conn: psycopg.Connection, prov: Provisioner, task_id: str, session: Session
) -> None:
    idle = prov.worker("idle-worker")
    prov.enqueue(task_id, count=2)
    _offer(prov, session)  # one unstarted lease
    listed = ok("worker", "list", "--dsn", db_dsn)
    assert set(listed) == {"workers", "next"}
    by_id = {w["workerId"]: w for w in listed["workers"]}
    assert set(by_id) == {session.worker.worker_id, idle.worker_id}
    mine = by_id[session.worker.worker_id]
    assert set(mine) == {
        "workerId",
        "name",
        "disabled",
        "allPools",
        "pools",
        "poolsCapped",
        "selfLabels",
        "grantedLabels",
        "credentials",
        "session",
    }
    assert (mine["allPools"], mine["pools"], mine["poolsCapped"]) == (True, [], False)
    assert mine["name"] == "ops-worker" and mine["disabled"] is False
    assert mine["credentials"] == [
        {"credentialId": session.worker.credential_id, "state": "active"}
    ]
    assert set(mine["session"]) == {
        "sessionId",
        "generation",
        "state",
        "labels",
        "slots",
        "liveLeases",
        "lastSeenAtMs",
    }
    assert (
        mine["session"]["sessionId"],
        mine["session"]["slots"],
        mine["session"]["liveLeases"],
    ) == (session.session_id, 16, 1)
    assert by_id[idle.worker_id]["session"] is None
    text = json.dumps(listed)
    assert session.worker.secret not in text and session.worker.secret_digest.hex() not in text

    disabled = ok("worker", "disable", "--dsn", db_dsn, "--worker", session.worker.worker_id)
    assert disabled == {
        "workerId": session.worker.worker_id,
        "disabled": True,
        "drain": False,
        "sessionsClosed": 1,
        "sessionsDraining": 0,
        "leasesReleased": 1,
    }
    denied = api.heartbeat_session(**session.fence()).run(conn).doc
    assert (denied["status"], denied["httpStatus"], denied["reason"]) == (
        "denied",
        403,
        "worker_disabled",
    )
    assert (
        ok("worker", "disable", "--dsn", db_dsn, "--worker", session.worker.worker_id)["disabled"]
        is True
    )  # idempotent
    relisted = {w["workerId"]: w for w in ok("worker", "list", "--dsn", db_dsn)["workers"]}
    assert relisted[session.worker.worker_id]["disabled"] is True
    assert relisted[session.worker.worker_id]["session"] is None
    enabled = ok("worker", "enable", "--dsn", db_dsn, "--worker", session.worker.worker_id)
    assert enabled == {"workerId": session.worker.worker_id, "disabled": False}
    assert prov.session(session.worker).session_id
    kinds = {
        row[0]
        for row in conn.execute(
            "SELECT type FROM ql_private.events WHERE type LIKE 'worker.%'"
        ).fetchall()
    }
    assert {"worker.disabled", "worker.enabled"} <= kinds
    fails("worker", "disable", "--dsn", db_dsn, "--worker", str(uuid.uuid4()), reason="not_found")
    invalid("worker", "enable", "--dsn", db_dsn, "--worker", "w", field="workerId")
    invalid("worker", "list", "--dsn", db_dsn, "--limit", "0", field="limit")


def test_reads_name_the_project_task_pool_and_grants(db_dsn: str, prov: Provisioner) -> None:
    """run show / run list name the run's project, task and pool (P/N); worker
    list shows each worker's pool grants and granted labels (SPEC §13)."""
    for name in ("fast", "slow"):
        prov.call(api.create_pool(project="p", name=name))
    task = prov.call(
        api.publish_revision(
            project="p",
            task="deploy",
            canonical=compile_command(command()).canonical,
            pool="p/fast",
        )
    ).doc["taskId"]
    (run_id,) = prov.enqueue(task)
    named = {"project": "p", "taskName": "deploy", "pool": "p/fast"}
    shown = ok("run", "show", "--dsn", db_dsn, "--run", run_id)["run"]
    assert {k: shown[k] for k in named} == named and shown["taskId"] == task
    (listed,) = ok("run", "list", "--dsn", db_dsn, "--task", task)["runs"]
    assert {k: listed[k] for k in named} == named and listed["runId"] == run_id
    tenant = prov.worker("tenant", self_labels=False, all_pools=False)
    for pool in ("p/slow", "p/fast"):
        assert (
            ok("worker", "grant", "--dsn", db_dsn, "--worker", tenant.worker_id, "--pool", pool)[
                "granted"
            ]
            is True
        )
    ok("worker", "label", "--dsn", db_dsn, "--worker", tenant.worker_id, "--label", "site=plant-3")
    everyone = prov.worker("everyone")
    workers = {w["workerId"]: w for w in ok("worker", "list", "--dsn", db_dsn)["workers"]}
    mine = workers[tenant.worker_id]
    assert (mine["allPools"], mine["pools"], mine["poolsCapped"]) == (
        False,
        ["p/fast", "p/slow"],
        False,
    )
    assert (mine["grantedLabels"], mine["selfLabels"]) == ({"site": "plant-3"}, False)
    assert (
        workers[everyone.worker_id]["allPools"],
        workers[everyone.worker_id]["pools"],
        workers[everyone.worker_id]["selfLabels"],
    ) == (True, [], True)


def test_session_close(
    db_dsn: str, conn: psycopg.Connection, prov: Provisioner, task_id: str, session: Session
) -> None:
    prov.enqueue(task_id, count=1)
    _offer(prov, session)
    closed = ok("session", "close", "--dsn", db_dsn, "--session", session.session_id)
    assert closed == {
        "sessionId": session.session_id,
        "workerId": session.worker.worker_id,
        "state": "closed",
        "drain": False,
        "leasesReleased": 1,
        "leasesRunning": 0,
    }
    again = ok("session", "close", "--dsn", db_dsn, "--session", session.session_id)
    assert again == {**closed, "leasesReleased": 0}
    assert _count(conn, "SELECT count(*) FROM ql_private.run_leases WHERE released_at IS NULL") == 0
    fails("session", "close", "--dsn", db_dsn, "--session", str(uuid.uuid4()), reason="not_found")
    invalid("session", "close", "--dsn", db_dsn, "--session", "s", field="sessionId")


def test_session_close_and_worker_disable_drain(
    db_dsn: str, conn: psycopg.Connection, prov: Provisioner, task_id: str, session: Session
) -> None:
    """`--drain`: the unstarted lease is released, the started one runs on (it can
    still complete), the session closes with it; each action's JSON states the mode
    and appends its event naming the acting role."""
    prov.enqueue(task_id, count=3)
    running, _ = start(prov, session)
    _offer(prov, session)  # unstarted
    drained = ok("session", "close", "--dsn", db_dsn, "--session", session.session_id, "--drain")
    assert drained == {
        "sessionId": session.session_id,
        "workerId": session.worker.worker_id,
        "state": "draining",
        "drain": True,
        "leasesReleased": 1,
        "leasesRunning": 1,
    }
    done = prov.call(
        api.complete_lease(
            **session.lease(running), lease_version=2, outcome="succeeded", exit_code=0
        )
    ).doc
    assert done["status"] == "ok", done
    assert (
        _count(
            conn,
            "SELECT count(*) FROM ql_private.worker_sessions WHERE session_id = %s"
            " AND state = 'closed'",
            session.session_id,
        )
        == 1
    )
    fresh = prov.session(session.worker, dict(DEFAULT_CAPABILITIES, slots=16))
    start(prov, fresh)
    disabled = ok(
        "worker", "disable", "--dsn", db_dsn, "--worker", fresh.worker.worker_id, "--drain"
    )
    assert disabled == {
        "workerId": fresh.worker.worker_id,
        "disabled": True,
        "drain": True,
        "sessionsClosed": 0,
        "sessionsDraining": 1,
        "leasesReleased": 0,
    }
    actors = conn.execute(
        "SELECT type, payload ->> 'actor', payload -> 'drain'"
        " FROM ql_private.events WHERE type IN ('session.draining',"
        " 'worker.disabled') ORDER BY id"
    ).fetchall()
    assert [(kind, drain) for kind, _, drain in actors] == [
        ("session.draining", True),
        ("worker.disabled", True),
    ]
    assert all(actor for _, actor, _ in actors)


# ------------------------------------------------------------------ 9.6 prune


@pytest.fixture
def history(prov: Provisioner, task_id: str, session: Session) -> dict[str, list[str]]:
    """Terminal runs of each kind plus live ones (queued, offered, started)."""
    prov.call(api.configure_task(task_id=task_id, max_attempts=1))
    prov.enqueue(task_id, count=5)
    succeeded = [finish(prov, session, result=RESULT) for _ in range(3)]
    failed = [finish(prov, session, "failed")]
    _, started = start(prov, session)
    cancelled = prov.enqueue(task_id, count=2)
    for run_id in cancelled:
        prov.call(api.cancel_run(run_id=run_id))
    queued = prov.enqueue(task_id, count=2)
    return {"terminal": succeeded + failed + cancelled, "live": [started, *queued]}


def test_prune_removes_every_terminal_run_and_keeps_live_ones(
    db_dsn: str, conn: psycopg.Connection, prov: Provisioner, history: dict[str, list[str]]
) -> None:
    prov.call(
        api.record_auth_denial(
            credential_id=None, worker_id=None, action="pull", reason="missing_credential"
        )
    )
    audit = _count(conn, "SELECT count(*) FROM ql_private.security_audit")
    assert audit >= 1
    terminal = _run_rows(conn, history["terminal"])
    live = _run_rows(conn, history["live"])
    before = table_fingerprint(conn)

    kept = ok("prune", "--dsn", db_dsn)  # defaults 14d / 30d: nothing is that old
    assert kept == {
        "runs": 0,
        "attempts": 0,
        "leases": 0,
        "events": 0,
        "securityAudit": 0,
        **NO_FLEET,
        "dryRun": False,
    }
    dry = ok("prune", "--dsn", db_dsn, "--retain-runs", "0s", "--retain-audit", "0s", "--dry-run")
    assert dry == {**terminal, "securityAudit": audit, **NO_FLEET, "dryRun": True}
    assert table_fingerprint(conn) == before, "a dry run deletes nothing"

    pruned = ok(
        "prune", "--dsn", db_dsn, "--retain-runs", "0s", "--retain-audit", "0s", "--batch", "2"
    )
    # the worker's one session is its newest, the task's class its current one's;
    # the audit count also holds audit.pruned rows earlier batches of this pass left
    assert {k: v for k, v in pruned.items() if k != "securityAudit"} == {
        **terminal,
        **NO_FLEET,
        "dryRun": False,
    }
    assert pruned["securityAudit"] >= audit
    assert _run_rows(conn, history["terminal"]) == dict.fromkeys(terminal, 0)
    assert _run_rows(conn, history["live"]) == live
    # What is left of the audit: the prune's own rows, the newest naming who pruned
    # (the --dsn login) and with what retention (SPEC §13.6).
    left = conn.execute(
        "SELECT action, actor, detail ->> 'retainS' FROM ql_private.security_audit ORDER BY id"
    ).fetchall()
    assert {row[0] for row in left} == {"audit.pruned"}
    assert left[-1][1:] == (conn.info.user, "0")
    again = ok("prune", "--dsn", db_dsn, "--retain-runs", "0s", "--retain-audit", "0s")
    assert again["runs"] == 0 and again["securityAudit"] == len(left) - 1
    assert conn.execute("SELECT action, actor FROM ql_private.security_audit").fetchall() == [
        ("audit.pruned", conn.info.user)
    ], "the newest prune row is never pruned"


NO_FLEET = {"sessions": 0, "placementClasses": 0, "fleetEvents": 0}


def test_prune_removes_ended_sessions_unused_classes_and_fleet_events(
    db_dsn: str, conn: psycopg.Connection, prov: Provisioner, task_id: str
) -> None:
    """`admin prune` also prunes what the fleet leaves behind (ql.prune_fleet):
    sessions that ended before --retain-runs (never a worker's newest, never one
    with a live lease), placement classes nothing uses, worker/session events
    older than --retain-runs; --dry-run only counts."""
    worker = prov.worker("fleet")
    first = prov.session(worker)
    live = prov.session(worker)
    prov.enqueue(task_id)
    assert prov.pull(live, Intent())["status"] == "offered"
    conn.execute("UPDATE ql_private.run_leases SET started_at = clock_timestamp()")
    newest = prov.session(worker)  # closes `live`; its started lease stays live
    conn.execute(
        "UPDATE ql_private.worker_sessions SET closed_at = clock_timestamp()"
        " - interval '3 days' WHERE state = 'closed'"
    )
    conn.execute(
        "INSERT INTO ql_private.placement_classes (required) SELECT"
        " jsonb_build_object('executors', '[\"remote-worker\"]'::jsonb,"
        " 'labels', jsonb_build_object('old', jsonb_build_array(i::text)),"
        " 'runtimes', '{}'::jsonb) FROM generate_series(1, 3) i"
    )
    conn.execute(
        "INSERT INTO ql_private.events (type, worker_id, payload, created_at)"
        " VALUES ('worker.disabled', %s, '{}', clock_timestamp() - interval '3 days'),"
        " ('worker.enabled', %s, '{}', clock_timestamp())",
        (worker.worker_id, worker.worker_id),
    )
    before = table_fingerprint(conn)
    expected = {"sessions": 1, "placementClasses": 3, "fleetEvents": 1}
    dry = ok("prune", "--dsn", db_dsn, "--retain-runs", "1d", "--dry-run")
    assert {key: dry[key] for key in expected} == expected and dry["dryRun"] is True
    assert table_fingerprint(conn) == before, "a dry run deletes nothing"
    pruned = ok("prune", "--dsn", db_dsn, "--retain-runs", "1d", "--batch", "2")
    assert {key: pruned[key] for key in expected} == expected
    assert pruned["runs"] == 0 and pruned["dryRun"] is False
    left = {
        row[0]
        for row in conn.execute(
            "SELECT session_id::text FROM ql_private.worker_sessions WHERE worker_id = %s",
            (worker.worker_id,),
        ).fetchall()
    }
    assert left == {live.session_id, newest.session_id} and first.session_id not in left
    assert _count(conn, "SELECT count(*) FROM ql_private.events WHERE run_id IS NULL") == 1
    assert _count(conn, "SELECT count(*) FROM ql_private.placement_classes") == 1


def test_prune_skips_a_class_a_concurrent_retry_is_queueing_into(
    db_dsn: str, conn: psycopg.Connection, prov: Provisioner
) -> None:
    """A class only a failed run names is unused — until an operator retry puts
    the run back in it. The retry holds the class row FOR KEY SHARE
    (placement_class_of) while its transaction is open; a prune on another
    connection meanwhile skips the class instead of deleting it under the
    retry's feet, and after the commit the class is in use."""
    task = prov.task("retried", command(placement={"required": {"labels": {"gpu": "yes"}}}))
    (run_id,) = prov.enqueue(task)
    class_id = conn.execute(
        "SELECT placement_class FROM ql_private.runs WHERE id = %s", (run_id,)
    ).fetchone()[0]
    conn.execute(
        "UPDATE ql_private.runs SET state = 'failed', finished_at = clock_timestamp()"
        " WHERE id = %s",
        (run_id,),
    )
    conn.execute("UPDATE ql_private.attempts SET state = 'failed' WHERE run_id = %s", (run_id,))
    prov.task("retried", command(placement={"required": {"labels": {"gpu": "big"}}}))
    dry = prov.call(api.prune_fleet(retain_s=14 * 86400, dry_run=True)).doc
    assert dry["placementClasses"] == 1  # the failed run's class: nothing uses it
    with psycopg.connect(db_dsn) as retrying:  # a transaction left open
        retried = api.retry_run(run_id=run_id).run(retrying).doc
        assert retried["state"] == "queued"
        pruned = prov.call(api.prune_fleet(retain_s=14 * 86400)).doc
        assert pruned["placementClasses"] == 0, "the class the retry holds was pruned"
        retrying.commit()
    assert prov.call(api.prune_fleet(retain_s=14 * 86400)).doc["placementClasses"] == 0
    row = conn.execute(
        "SELECT r.state, pc.id FROM ql_private.runs r LEFT JOIN"
        " ql_private.placement_classes pc ON pc.id = r.placement_class"
        " WHERE r.id = %s",
        (run_id,),
    ).fetchone()
    assert row == ("queued", class_id)


def test_prune_keeps_runs_within_retention(
    db_dsn: str, conn: psycopg.Connection, history: dict[str, list[str]]
) -> None:
    ids = [uuid.UUID(r) for r in history["terminal"][:2]]
    conn.execute(
        "UPDATE ql_private.runs SET finished_at = clock_timestamp()"
        " - interval '2 days' WHERE id = ANY(%s)",
        (ids,),
    )
    pruned = ok("prune", "--dsn", db_dsn, "--retain-runs", "1d")
    assert pruned["runs"] == 2
    assert _run_rows(conn, history["terminal"])["runs"] == len(history["terminal"]) - 2


PRUNE_REFUSALS = [
    (("--retain-runs", "14"), "retainRuns"),
    (("--retain-runs=-1d",), "retainRuns"),
    (("--retain-audit", "2w"), "retainAudit"),
    (("--retain-audit", "99999999d"), "retainAudit"),
    (("--batch", "0"), "batch"),
    (("--batch", "10001"), "batch"),
]


def test_prune_refuses_bad_arguments(
    db_dsn: str, conn: psycopg.Connection, history: dict[str, list[str]]
) -> None:
    before = table_fingerprint(conn)
    for args, field in PRUNE_REFUSALS:
        invalid("prune", "--dsn", db_dsn, "--retain-runs", "0s", *args, field=field)
        assert table_fingerprint(conn) == before, args


# ------------------------------------------------- roles and process level


@pytest.fixture
def readonly_dsn(
    pg_cluster: ThrowawayPostgres, db_name: str, conn: psycopg.Connection
) -> Iterator[str]:
    role = f"ql_ro_{uuid.uuid4().hex[:10]}"
    conn.execute(sql.SQL("CREATE ROLE {} LOGIN IN ROLE ql_readonly").format(sql.Identifier(role)))
    try:
        yield pg_cluster.dsn(db_name, user=role)
    finally:
        conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def test_reads_work_for_ql_readonly_and_actions_do_not(
    readonly_dsn: str, prov: Provisioner, task_id: str
) -> None:
    (run_id,) = prov.enqueue(task_id)
    assert ok("run", "list", "--dsn", readonly_dsn)["runs"][0]["runId"] == run_id
    assert ok("run", "show", "--dsn", readonly_dsn, "--run", run_id)["run"]["runId"] == run_id
    assert ok("worker", "list", "--dsn", readonly_dsn)["workers"] == []
    assert ok("task", "configure", "--dsn", readonly_dsn, "--task", task_id)["taskId"] == task_id
    fails("run", "retry", "--dsn", readonly_dsn, "--run", run_id, reason="permission_denied")
    fails("prune", "--dsn", readonly_dsn, reason="permission_denied")


def _process(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "qinglong", "admin", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_process_level_exit_codes_and_one_line(
    db_dsn: str, prov: Provisioner, task_id: str
) -> None:
    (run_id,) = prov.enqueue(task_id)
    listed = _process("run", "list", "--dsn", db_dsn, "--task", task_id)
    assert listed.returncode == 0, listed.stderr
    (line,) = listed.stdout.splitlines()
    assert json.loads(line)["runs"][0]["runId"] == run_id
    bad = _process("run", "list", "--dsn", db_dsn, "--limit", "5000")
    assert bad.returncode == 2 and bad.stdout == ""
    error = json.loads(bad.stderr)
    assert {k: error[k] for k in ("error", "reason", "field")} == {
        "error": "invalid_input",
        "reason": "out_of_bounds",
        "field": "limit",
    }
    live = _process("run", "retry", "--dsn", db_dsn, "--run", run_id)
    assert live.returncode == 1
    assert json.loads(live.stderr)["reason"] == "illegal_transition"


def test_prune_pauses_after_each_batch_for_pace_times_its_duration(
    db_dsn: str, history: dict[str, list[str]]
) -> None:
    """Pacing (`PRUNE_PACE`): between batches the pruner sleeps `pace` x the batch's
    duration, so a backlog never takes a whole CPU from the claims; no pause after
    the last batch. Clock and sleep are injected; the batches are real."""
    from qinglong.service import control_plane

    ticks = iter(range(0, 10_000, 3))  # each batch "takes" 3 clock units
    pauses: list[float] = []
    with control_plane.connect(db_dsn) as conn:
        totals = control_plane.prune(
            conn,
            control_plane.Retention(runs_s=0, audit_s=0, batch=1, pace=2.0),
            clock=lambda: float(next(ticks)),
            sleep=pauses.append,
        )
    batches = len(history["terminal"])  # one run per batch, then one that finds none
    assert totals.runs == batches and totals.calls >= batches + 1
    assert pauses and set(pauses) == {6.0}  # 2.0 x 3
    assert len(pauses) == totals.calls - 3  # none after each loop's last batch
    assert control_plane.PRUNE_PACE == 2.0 and control_plane.Retention(0, 0).pace == 2.0
