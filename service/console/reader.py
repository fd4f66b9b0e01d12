"""The console's database access: a small async pool running `db.api` calls.

Every read is one `ql.` function granted to `ql_readonly` (the console's DSN
needs no other right). A QingLong SQLSTATE with an HTTP status (bad input 400,
unknown run 404) becomes a `ConsoleError` carrying the database's own message;
anything else is a 503 that names no internals.

Defence in depth: every connection is opened read-only
(default_transaction_read_only) with a statement timeout, so even a console
given a superuser's DSN cannot write through a page.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from qinglong.db import api
from qinglong.db.errors import DbError, PermissionDenied, Refused, translate

T = TypeVar("T")

STATEMENT_TIMEOUT_MS = 5000
CONNECTION_OPTIONS = (
    f"-c statement_timeout={STATEMENT_TIMEOUT_MS} -c default_transaction_read_only=on"
)


@dataclass(frozen=True)
class ConsoleError(Exception):
    """An answer other than 200: status and a message safe to show."""

    status: int
    message: str


def _error_of(error: DbError) -> ConsoleError:
    if isinstance(error, Refused) and error.http_status in (400, 404):
        return ConsoleError(error.http_status, error.message or error.reason)
    if isinstance(error, PermissionDenied):
        return ConsoleError(
            503, "the console's database role may not run this read (grant it ql_readonly)"
        )
    return ConsoleError(503, "database unavailable")


class Reader:
    """Runs `api.Call`s on pooled autocommit connections."""

    def __init__(self, dsn: str, *, max_size: int = 7) -> None:  # the overview: 7 reads
        self._pool = AsyncConnectionPool(
            dsn,
            min_size=1,
            max_size=max_size,
            open=False,
            name="qinglong-console",
            kwargs={
                "autocommit": True,
                "application_name": "qinglong-console",
                "options": CONNECTION_OPTIONS,
            },
            timeout=5.0,
            reconnect_timeout=5.0,
        )

    async def open(self) -> None:
        await self._pool.open(wait=False)

    async def close(self) -> None:
        await self._pool.close()

    async def read(self, call: api.Call[T]) -> T:
        try:
            async with self._pool.connection() as conn:
                return await call.run_async(conn)
        except psycopg.Error as exc:
            raise _error_of(translate(exc)) from None
        except PoolTimeout:
            raise ConsoleError(503, "database unavailable") from None

    async def read_all(self, calls: Sequence[api.Call[Any]]) -> list[Any]:
        """Several reads at once, each on its own pooled connection."""
        return list(await asyncio.gather(*(self.read(call) for call in calls)))
