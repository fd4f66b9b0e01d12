"""The ingress's only way into PostgreSQL: one `qinglong.db.api` call per round trip.

Connections come from an `AsyncConnectionPool` logged in as a role that is a
member of `ql_worker_ingress`, in autocommit mode so each call is exactly one
round trip (no BEGIN/COMMIT). `prepare_threshold=0` makes psycopg prepare every
statement server-side on first use; `None` turns that off for PgBouncer
transaction pooling, where a prepared statement may land on another backend.

Failures are translated once (`qinglong.db.errors`) and classified here so
handlers never see a driver exception: `DbUnavailable` (pool/connection/timeout:
503) or `DbRefused` (a project SQLSTATE with its reason and HTTP status from
`service.sqlstates`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any, TypeVar

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolClosed, PoolTimeout, TooManyRequests

from qinglong.db.api import Call
from qinglong.db.errors import (
    ConnectionFailed,
    DbError,
    ReadOnlyServer,
    Refused,
    StatementTimeout,
    translate,
)
from qinglong.service.config import IngressConfig
from qinglong.service.metrics import IngressMetrics

log = logging.getLogger("qinglong.ingress.db")
T = TypeVar("T")

# A little above the server-side statement_timeout so the server normally cancels
# first (its error is precise); this guard only catches a silent network partition.
_CLIENT_GRACE_S = 1.0


class DbUnavailable(Exception):
    """The database could not answer in time (503 + Retry-After)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class DbRefused(Exception):
    """A QingLong SQLSTATE: the request is wrong or a fence moved."""

    def __init__(
        self,
        sqlstate: str,
        reason: str,
        http_status: int,
        detail: str | None = None,
        *,
        field: str | None = None,
    ) -> None:
        super().__init__(reason)
        self.sqlstate = sqlstate
        self.reason = reason
        self.http_status = http_status
        # The error's DETAIL: what a few states name (the label key of QL016).
        self.detail = detail
        # The error's COLUMN: the wire field a 400 names (producer API).
        self.field = field


def refusal(error: DbError) -> DbRefused | None:
    """The worker-facing refusal a QingLong SQLSTATE answers (None: not the
    caller's fault, a 5xx)."""
    if isinstance(error, Refused) and error.http_status is not None and error.http_status < 500:
        return DbRefused(
            error.state.code, error.reason, error.http_status, error.detail, field=error.column
        )
    return None


def connection_kwargs(config: IngressConfig) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "autocommit": True,
        "prepare_threshold": config.prepare_threshold,
        "application_name": "qinglong-ingress",
        "connect_timeout": config.connect_timeout_s,
    }
    if config.statement_timeout_mode == "options":
        kwargs["options"] = f"-c statement_timeout={int(config.statement_timeout_ms)}"
    return kwargs


@dataclass
class Gateway:
    config: IngressConfig
    metrics: IngressMetrics
    _pool: AsyncConnectionPool | None = None
    _check_task: asyncio.Task[None] | None = field(default=None, repr=False)

    async def open(self) -> None:
        """Start the pool without waiting: the ingress starts (and answers 503)
        even while the database is down, and recovers when it comes back."""
        self._pool = AsyncConnectionPool(
            self.config.dsn,
            kwargs=connection_kwargs(self.config),
            min_size=self.config.pool_min_size,
            max_size=self.config.pool_max_size,
            max_waiting=self.config.pool_max_waiting,
            timeout=self.config.acquire_timeout_ms / 1000,
            configure=self._configure if self.config.statement_timeout_mode == "set" else None,
            # Give up a background reconnect quickly: a request that finds no
            # connection starts a fresh attempt, so recovery after an outage follows
            # demand instead of waiting out a long exponential backoff.
            reconnect_timeout=5.0,
            name="qinglong-ingress",
            open=False,
        )
        await self._pool.open(wait=False)

    async def close(self) -> None:
        if self._check_task is not None:
            self._check_task.cancel()
        if self._pool is not None:
            await self._pool.close()

    async def _configure(self, conn: psycopg.AsyncConnection) -> None:
        # For poolers that refuse startup `options`: one SET per new server connection.
        await conn.execute(f"SET statement_timeout = {int(self.config.statement_timeout_ms)}")

    @property
    def _deadline_s(self) -> float:
        return (
            self.config.acquire_timeout_ms + self.config.statement_timeout_ms
        ) / 1000 + _CLIENT_GRACE_S

    async def call(self, call: Call[T]) -> T:
        """One `ql.` function call (`qinglong.db.api`): one round trip, its value."""
        started = time.monotonic()
        try:
            async with asyncio.timeout(self._deadline_s):
                return await self._execute(call)
        except TimeoutError:
            self._failed("client_timeout")
            raise DbUnavailable("database_timeout") from None
        finally:
            self.metrics.db_calls.observe(time.monotonic() - started, call.function)

    async def _execute(self, call: Call[T]) -> T:
        if self._pool is None:
            raise DbUnavailable("database_unavailable")
        try:
            async with self._pool.connection() as conn:
                try:
                    return await call.run_async(conn)
                except psycopg.Error as exc:
                    error = translate(exc)
                    if isinstance(error, ReadOnlyServer):
                        await self._discard(conn)
                    raise error from None
        except (PoolTimeout, TooManyRequests, PoolClosed):
            self._failed("pool")
            raise DbUnavailable("database_unavailable") from None
        except psycopg.Error as exc:  # getting or returning the connection
            raise self._classify(translate(exc)) from None
        except DbError as error:
            raise self._classify(error) from None

    async def _discard(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """SPEC §17.2: a connection that found its server read-only is never
        reused (a lost one is already broken: the pool drops it on return). It
        is closed here so the pool drops it, and every other idle connection is
        drained too — they were opened to the same server, which is now a
        standby or a demoted primary. Replacements connect afresh, so a
        multi-host DSN with `target_session_attrs=read-write` finds the new primary."""
        if self._pool is None:
            return
        log.warning(
            "server is read-only; discarding its connections",
            extra={"event": "db.read_only_server"},
        )
        await conn.close()
        await self._pool.drain()

    def _classify(self, error: DbError) -> Exception:
        """A `db.errors` class as the ingress answers it (`DbRefused` or `DbUnavailable`)."""
        refused = refusal(error)
        if refused is not None:
            return refused
        if isinstance(error, StatementTimeout):
            self._failed("statement_timeout")
            return DbUnavailable("statement_timeout")
        if isinstance(error, ConnectionFailed):
            self._failed("connection")
            self._schedule_pool_check()
            return DbUnavailable("database_unavailable")
        if isinstance(error, ReadOnlyServer):
            self._failed("read_only")
            return DbUnavailable("database_unavailable")
        # Anything else is our bug or a broken deployment (missing function, missing
        # grant): not the worker's fault, so 503 — and loud in our own log.
        self._failed("unexpected")
        log.error(
            "unexpected database error",
            extra={
                "event": "db.unexpected_error",
                "sqlstate": error.sqlstate,
                "error": type(error).__name__,
            },
        )
        return DbUnavailable("database_error")

    def _failed(self, kind: str) -> None:
        self.metrics.db_errors.inc(kind)

    def _schedule_pool_check(self) -> None:
        """After one broken connection the others are probably broken too (server
        restart): check them all in the background so recovery needs no restart
        and stale connections stop failing requests one by one."""
        if self._pool is None or (self._check_task is not None and not self._check_task.done()):
            return
        self._check_task = asyncio.create_task(self._pool.check())
        self._check_task.add_done_callback(_ignore_result)

    async def ready(self, timeout_s: float) -> bool:
        """True if a pooled connection answers `SELECT 1` within the deadline."""
        if self._pool is None:
            return False
        try:
            async with asyncio.timeout(timeout_s):
                async with self._pool.connection(timeout=timeout_s) as conn:
                    await conn.execute("SELECT 1")
        except (TimeoutError, psycopg.Error, PoolTimeout, TooManyRequests, PoolClosed):
            return False
        return True


def _ignore_result(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("pool check failed", extra={"event": "db.pool_check_failed"})
