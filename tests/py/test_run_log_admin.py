"""`qinglong admin run log` (SPEC §15.3) as a process against real PostgreSQL: the
stored text as is, the truncated / incomplete trailer line, `--json`, errors,
and `--follow` printing a running attempt's new line within 3 s. The log is
written through the real append function (tests/py/log_support.py)."""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import time
from collections.abc import Iterator

import psycopg
import pytest

from tests.py.log_support import start_attempt

FOLLOW_DEADLINE_S = 3.0
CHUNK = 65536


@pytest.fixture
def conn(db_dsn: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(db_dsn, autocommit=True) as connection:
        yield connection


def admin_log(dsn: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "qinglong", "admin", "run", "log", "--dsn", dsn, *args],
        capture_output=True,
        timeout=60,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )


def test_prints_the_stored_text_as_is_over_several_pages(
    db_dsn: str, conn: psycopg.Connection
) -> None:
    live = start_attempt(conn)
    first = "línea 1 ✓ <b>\n"
    live.append(first)
    # More than one database page (1 MiB): the command reads on from nextOffset.
    filler = ("x" * 99 + "\n") * (CHUNK // 100)
    for _ in range(18):
        live.append(filler)
    live.append("last line without newline")
    expected = first + filler * 18 + "last line without newline"
    assert live.stored == len(expected.encode()) > 1048576
    live.complete(live.stored)

    done = admin_log(db_dsn, "--run", live.run_id)
    assert done.returncode == 0, done.stderr
    assert done.stdout == expected.encode(), "the text as stored, and no trailer"

    done = admin_log(db_dsn, "--run", live.run_id, "--attempt", "1", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc == {
        "runId": live.run_id,
        "attemptNumber": 1,
        "text": expected,
        "storedBytes": live.stored,
        "logBytes": live.stored,
        "truncated": False,
        "complete": True,
    }


def test_a_truncated_log_ends_with_the_truncated_line(
    db_dsn: str, conn: psycopg.Connection
) -> None:
    live = start_attempt(conn, log_limit_bytes=1024)
    answer = live.append("a" * 1000 + "é" * 100)  # 1200 bytes: cut at 1024
    assert answer["truncated"] is True and live.stored == 1024
    live.complete(1200)
    done = admin_log(db_dsn, "--run", live.run_id)
    assert done.returncode == 0, done.stderr
    stored = ("a" * 1000 + "é" * 12).encode()
    assert done.stdout == stored + b"\n[qinglong: log truncated at 1024 bytes]\n"
    doc = json.loads(admin_log(db_dsn, "--run", live.run_id, "--json").stdout)
    assert (doc["truncated"], doc["storedBytes"], doc["logBytes"]) == (True, 1024, 1200)
    assert doc["text"].encode() == stored


def test_a_log_shorter_than_log_bytes_is_marked_incomplete(
    db_dsn: str, conn: psycopg.Connection
) -> None:
    live = start_attempt(conn)
    live.append("only this\n")
    live.complete(25, outcome="failed")
    done = admin_log(db_dsn, "--run", live.run_id, "--attempt", "1")
    assert done.returncode == 0, done.stderr
    assert done.stdout == b"only this\n[qinglong: log incomplete: 10 of 25 bytes stored]\n"
    doc = json.loads(admin_log(db_dsn, "--run", live.run_id, "--attempt", "1", "--json").stdout)
    assert doc == {
        "runId": live.run_id,
        "attemptNumber": 1,
        "text": "only this\n",
        "storedBytes": 10,
        "logBytes": 25,
        "truncated": False,
        "complete": False,
    }
    # The failure queued a retry: without --attempt the latest (2, no log yet) is read.
    latest = json.loads(admin_log(db_dsn, "--run", live.run_id, "--json").stdout)
    assert (latest["attemptNumber"], latest["text"], latest["storedBytes"]) == (2, "", 0)


def test_errors_name_what_is_wrong(db_dsn: str, conn: psycopg.Connection) -> None:
    live = start_attempt(conn)
    unknown = admin_log(db_dsn, "--run", "00000000-0000-4000-8000-000000000000")
    assert unknown.returncode == 1 and unknown.stdout == b""
    assert json.loads(unknown.stderr)["error"] == "not_found"
    attempt = admin_log(db_dsn, "--run", live.run_id, "--attempt", "2")
    assert attempt.returncode == 1
    assert json.loads(attempt.stderr)["error"] == "not_found"
    assert "attempt" in json.loads(attempt.stderr)["detail"]
    for args, field in (
        (["--run", "not-a-uuid"], "runId"),
        (["--run", live.run_id, "--attempt", "0"], "attempt"),
        (["--run", live.run_id, "--attempt", "x"], "attempt"),
    ):
        bad = admin_log(db_dsn, *args)
        assert bad.returncode == 2, bad.stderr
        assert json.loads(bad.stderr)["field"] == field


def _read_until(proc: subprocess.Popen[bytes], wanted: bytes, deadline_s: float) -> bytes:
    """What the process printed until `wanted` appeared (or the deadline passed)."""
    assert proc.stdout is not None
    seen = b""
    deadline = time.monotonic() + deadline_s
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        while wanted not in seen and time.monotonic() < deadline:
            if selector.select(max(0.0, deadline - time.monotonic())):
                data = os.read(proc.stdout.fileno(), 65536)
                if not data:
                    break
                seen += data
    return seen


def test_follow_prints_a_running_attempts_new_line_within_3_s(
    db_dsn: str, conn: psycopg.Connection
) -> None:
    live = start_attempt(conn)
    live.append("started\n")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "qinglong",
            "admin",
            "run",
            "log",
            "--dsn",
            db_dsn,
            "--run",
            live.run_id,
            "--follow",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert _read_until(proc, b"started\n", 30) == b"started\n"
        for n in range(2):
            line = f"step {n} ✓\n"
            written = time.monotonic()
            live.append(line)
            seen = _read_until(proc, line.encode(), FOLLOW_DEADLINE_S)
            assert seen == line.encode(), f"not within {FOLLOW_DEADLINE_S} s: {seen!r}"
            assert time.monotonic() - written <= FOLLOW_DEADLINE_S
        assert proc.poll() is None, "a follower of a running attempt stays"
        live.append("no newline at the end")
        live.complete(live.stored + 5)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    stored = live.stored
    assert out == (
        b"no newline at the end\n[qinglong: log incomplete: "
        + f"{stored} of {stored + 5} bytes stored]\n".encode()
    )


def test_a_ql_readonly_login_reads_the_log(
    conn: psycopg.Connection, pg_cluster, db_name: str
) -> None:
    live = start_attempt(conn)
    live.append("read me\n")
    role = f"ql_reader_{db_name}"
    conn.execute(f"CREATE ROLE {role} LOGIN IN ROLE ql_readonly")
    try:
        done = admin_log(str(pg_cluster.dsn(db_name, user=role)), "--run", live.run_id)
    finally:
        conn.execute(f"DROP ROLE {role}")
    assert done.returncode == 0, done.stderr
    assert done.stdout == b"read me\n"
