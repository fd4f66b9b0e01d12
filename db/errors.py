"""What a failed database call means: one exception hierarchy, one translation.

Every psycopg error that reaches Python code of this project goes through
`translate` (or, for a batched call's per-item SQLSTATE, `from_sqlstate`) once
and comes out as a `DbError` of a specific class; the surfaces (the ingress's
gateway, the control-plane commands, the console) decide what each class
answers. The project's own `QLxxx` states are mapped through
`qinglong.service.sqlstates`, the one SQLSTATE table.

    DbError
    ├── Refused            a QingLong SQLSTATE (the request is wrong or a fence moved)
    ├── Unavailable        the server could not answer
    │   ├── ConnectionFailed   no usable connection (lost, refused, shut down)
    │   ├── StatementTimeout   57014: the statement was cancelled
    │   └── ReadOnlyServer     25006: a standby / demoted primary refused a write
    ├── NotMigrated        42883 / 3F000: the ql schema or a function is missing
    ├── PermissionDenied   42501: the role lacks a grant
    └── Unexpected         anything else (our bug or a broken deployment)
"""

from __future__ import annotations

import psycopg
from psycopg import errors as pg_errors

from qinglong.service.sqlstates import READ_ONLY_SQL_TRANSACTION, QlSqlState, lookup

QUERY_CANCELED = "57014"
NOT_MIGRATED = frozenset({"42883", "3F000"})  # undefined_function, invalid_schema_name
INSUFFICIENT_PRIVILEGE = "42501"


class DbError(Exception):
    """A database call failed. `message`: the server's primary message (or the
    driver's, when no server answered); `detail` its DETAIL; `column` its COLUMN
    (the wire name of the argument at fault, when a function names one)."""

    reason = "database_error"

    def __init__(
        self,
        sqlstate: str | None,
        message: str = "",
        *,
        detail: str | None = None,
        column: str | None = None,
    ) -> None:
        super().__init__(message or self.reason)
        self.sqlstate = sqlstate
        self.message = message
        self.detail = detail
        self.column = column


class Refused(DbError):
    """A QingLong SQLSTATE (`service.sqlstates`): its reason and HTTP status."""

    def __init__(
        self,
        state: QlSqlState,
        message: str = "",
        *,
        detail: str | None = None,
        column: str | None = None,
    ) -> None:
        super().__init__(state.code, message, detail=detail, column=column)
        self.state = state
        self.reason = state.reason

    @property
    def http_status(self) -> int | None:
        return self.state.http_status


class Unavailable(DbError):
    reason = "database_unavailable"


class ConnectionFailed(Unavailable):
    """No usable connection: never reached, lost, or the server is shutting down."""


class StatementTimeout(Unavailable):
    reason = "statement_timeout"


class ReadOnlyServer(Unavailable):
    """SPEC §17.2: the server takes no writes; its connections are discarded."""


class NotMigrated(DbError):
    reason = "database_not_migrated"


class PermissionDenied(DbError):
    reason = "permission_denied"


class Unexpected(DbError):
    reason = "database_error"


def from_sqlstate(
    sqlstate: str | None,
    message: str = "",
    *,
    detail: str | None = None,
    column: str | None = None,
    operational: bool = False,
) -> DbError:
    """The one translation: a SQLSTATE (with what the server said) to its class.
    `operational`: the driver raised an OperationalError (a connection problem
    unless the state says otherwise)."""
    known = lookup(sqlstate)
    if known is not None:
        return Refused(known, message, detail=detail, column=column)
    kind: type[DbError]
    if sqlstate == QUERY_CANCELED:
        kind = StatementTimeout
    elif sqlstate == READ_ONLY_SQL_TRANSACTION:
        kind = ReadOnlyServer
    elif operational:
        kind = ConnectionFailed
    elif sqlstate in NOT_MIGRATED:
        kind = NotMigrated
    elif sqlstate == INSUFFICIENT_PRIVILEGE:
        kind = PermissionDenied
    else:
        kind = Unexpected
    return kind(sqlstate, message, detail=detail, column=column)


def translate(exc: psycopg.Error) -> DbError:
    """A psycopg error as a `DbError` (raise it `from None`: the driver's
    exception may quote parameters)."""
    diag = exc.diag
    operational = isinstance(exc, psycopg.OperationalError) and not isinstance(
        exc, pg_errors.QueryCanceled
    )
    # With no server answer there is no primary message: the driver's text says why.
    message = diag.message_primary or (
        str(exc).strip() if operational and exc.sqlstate is None else ""
    )
    return from_sqlstate(
        exc.sqlstate,
        message,
        detail=diag.message_detail,
        column=diag.column_name or None,
        operational=operational,
    )
