"""Error envelope `qinglong/error@v1` and the one exception handlers raise.

Every value in an envelope is a low-cardinality code; nothing from the request
(ids, tokens, headers, body text) is ever placed in it, with two exceptions the
SPEC names: `detail.key`, the label key of `label_not_granted` (§4.3; a key
already validated against `^[a-z0-9][a-z0-9._/-]{0,62}$`, never its value), and
`offset` (also `detail.offset`), the stored length of the live log a
`log_offset` conflict answers (§15.1; a number the database counted).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import StrEnum

from aiohttp import web

ERROR_SCHEMA = "qinglong/error@v1"
# SPEC §4.4 label keys: the only request-derived value an error may carry (detail.key).
LABEL_KEY = re.compile(r"[a-z0-9][a-z0-9._/-]{0,62}")


class ErrorKind(StrEnum):
    """`error` field per HTTP status."""

    BAD_REQUEST = "bad_request"
    UNAUTHORIZED = "unauthorized"
    FORBIDDEN = "forbidden"
    NOT_FOUND = "not_found"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    REQUEST_TIMEOUT = "request_timeout"
    CONFLICT = "conflict"
    PAYLOAD_TOO_LARGE = "payload_too_large"
    RATE_LIMITED = "rate_limited"
    INTERNAL = "internal_error"
    NOT_IMPLEMENTED = "not_implemented"
    UNAVAILABLE = "unavailable"


_KIND_BY_STATUS: dict[int, ErrorKind] = {
    400: ErrorKind.BAD_REQUEST,
    401: ErrorKind.UNAUTHORIZED,
    403: ErrorKind.FORBIDDEN,
    404: ErrorKind.NOT_FOUND,
    405: ErrorKind.METHOD_NOT_ALLOWED,
    408: ErrorKind.REQUEST_TIMEOUT,
    409: ErrorKind.CONFLICT,
    413: ErrorKind.PAYLOAD_TOO_LARGE,
    429: ErrorKind.RATE_LIMITED,
    500: ErrorKind.INTERNAL,
    501: ErrorKind.NOT_IMPLEMENTED,
    503: ErrorKind.UNAVAILABLE,
}


def kind_for_status(status: int) -> ErrorKind:
    if status in _KIND_BY_STATUS:
        return _KIND_BY_STATUS[status]
    return ErrorKind.BAD_REQUEST if status < 500 else ErrorKind.UNAVAILABLE


@dataclass
class ApiError(Exception):
    """Raised by handlers; the middleware renders it as the envelope."""

    status: int
    reason: str
    retry_after_s: int | None = None
    close_connection: bool = False
    # `detail.key` of the envelope: the label key `label_not_granted` names.
    detail_key: str | None = None
    # `offset` (and `detail.offset`): the stored log length of a `log_offset` conflict.
    offset: int | None = None

    def __str__(self) -> str:
        return f"{self.status} {self.reason}"


def error_body(
    status: int, reason: str, detail_key: str | None = None, offset: int | None = None
) -> bytes:
    doc: dict[str, object] = {
        "schema": ERROR_SCHEMA,
        "error": kind_for_status(status).value,
        "reason": reason,
    }
    detail: dict[str, object] = {}
    if detail_key is not None and LABEL_KEY.fullmatch(detail_key):
        detail["key"] = detail_key
    if isinstance(offset, int) and not isinstance(offset, bool) and offset >= 0:
        doc["offset"] = detail["offset"] = offset
    if detail:
        doc["detail"] = detail
    return json.dumps(doc, separators=(",", ":")).encode("ascii")


def error_response(
    status: int,
    reason: str,
    retry_after_s: int | None = None,
    close_connection: bool = False,
    detail_key: str | None = None,
    offset: int | None = None,
) -> web.Response:
    response = web.Response(
        status=status,
        body=error_body(status, reason, detail_key, offset),
        content_type="application/json",
    )
    if retry_after_s is not None:
        response.headers["Retry-After"] = str(max(1, int(retry_after_s)))
    if close_connection:
        response.force_close()
    return response
