"""`qinglong.db.errors`: real PostgreSQL errors land in their class, once.

Each class is provoked on a real server (no hand-built psycopg exceptions), then
the one translation is checked, and the surfaces' renderings of it (the
control-plane commands, the ingress gateway) keep their documented answers.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from qinglong.db import api, errors
from qinglong.service.control_plane import ControlPlaneError
from qinglong.service.gateway import DbRefused, refusal
from qinglong.service.sqlstates import QlSqlState


def _raised(dsn: str, action: Callable[[psycopg.Connection[Any]], object]) -> psycopg.Error:
    with psycopg.connect(dsn, autocommit=True) as conn:
        with pytest.raises(psycopg.Error) as caught:
            action(conn)
    return caught.value


def test_a_qinglong_state_is_refused_with_its_reason_status_and_message(db_dsn: str) -> None:
    unknown = "00000000-0000-4000-8000-000000000000"
    exc = _raised(db_dsn, lambda c: api.show_run(run_id=unknown).run(c))
    error = errors.translate(exc)
    assert type(error) is errors.Refused
    assert error.state is QlSqlState.NOT_FOUND and error.sqlstate == "QL004"
    assert (error.reason, error.http_status) == ("not_found", 404)
    assert error.message == exc.diag.message_primary and error.message
    shown = ControlPlaneError.of(error)
    assert (shown.reason, shown.http_status, shown.sqlstate) == ("not_found", 404, "QL004")
    refused = refusal(error)
    assert isinstance(refused, DbRefused) and (refused.reason, refused.http_status) == (
        "not_found",
        404,
    )


def test_the_column_a_function_names_is_kept(db_dsn: str) -> None:
    exc = _raised(db_dsn, lambda c: api.enqueue_runs(task_id="t", priority=0, count=0).run(c).doc)
    error = errors.translate(exc)
    assert isinstance(error, errors.Refused) and error.reason == "invalid_input"
    assert error.column and error.column == exc.diag.column_name
    assert ControlPlaneError.of(error).field == error.column


def test_postgres_states_an_operator_meets_have_their_class(db_dsn: str) -> None:
    missing = errors.translate(_raised(db_dsn, lambda c: c.execute("SELECT public.nope()")))
    assert type(missing) is errors.NotMigrated and missing.sqlstate == "42883"
    assert ControlPlaneError.of(missing).reason == "database_not_migrated"

    def timeout(conn: psycopg.Connection[Any]) -> None:
        conn.execute("SET statement_timeout = 10")
        conn.execute("SELECT pg_sleep(1)")

    timed_out = errors.translate(_raised(db_dsn, timeout))
    assert type(timed_out) is errors.StatementTimeout
    assert isinstance(timed_out, errors.Unavailable)
    assert ControlPlaneError.of(timed_out).reason == "statement_timeout"

    def write_read_only(conn: psycopg.Connection[Any]) -> None:
        conn.execute("SET default_transaction_read_only = on")
        api.register_worker(name="w").run(conn)

    read_only = errors.translate(_raised(db_dsn, write_read_only))
    assert type(read_only) is errors.ReadOnlyServer and read_only.sqlstate == "25006"
    assert refusal(read_only) is None
    assert ControlPlaneError.of(read_only).reason == "database_error"

    def not_granted(conn: psycopg.Connection[Any]) -> None:
        conn.execute("CREATE ROLE errors_nobody")
        conn.execute("SET ROLE errors_nobody")
        api.status_snapshot().run(conn)

    denied = errors.translate(_raised(db_dsn, not_granted))
    assert type(denied) is errors.PermissionDenied
    assert ControlPlaneError.of(denied).reason == "permission_denied"

    other = errors.translate(_raised(db_dsn, lambda c: c.execute("SELECT 1/0")))
    assert type(other) is errors.Unexpected and other.sqlstate == "22012"
    assert ControlPlaneError.of(other).reason == "database_error"


def test_a_server_never_reached_is_connection_failed_with_the_drivers_reason() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(psycopg.OperationalError) as caught:
        psycopg.connect(f"host=127.0.0.1 port={port} dbname=x connect_timeout=2")
    error = errors.translate(caught.value)
    assert type(error) is errors.ConnectionFailed and error.sqlstate is None
    assert error.message == str(caught.value).strip()
    shown = ControlPlaneError.of(error)
    assert (shown.reason, shown.http_status) == ("database_unavailable", 503)


def test_a_batched_items_state_translates_like_a_raised_one() -> None:
    item = errors.from_sqlstate("QL012")
    assert isinstance(item, errors.Refused) and item.reason == "session_expired"
    assert type(errors.from_sqlstate("XX000")) is errors.Unexpected
    assert type(errors.from_sqlstate(None)) is errors.Unexpected
