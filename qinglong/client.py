"""`qinglong.client`: a small typed client (sync and async) for the producer API.

SPEC §13.4/§13.5. Built on `httpx` (one library for both the blocking and the
asyncio client, TLS verification with a CA file, timeouts); nothing here speaks
HTTP by hand. Both clients share the request builders and response parsers below,
so they send byte-identical requests and raise the same exceptions:

- `ApiError` (and one subclass per status: `BadRequest` 400, `Unauthorized` 401,
  `Forbidden` 403, `NotFound` 404, `Conflict` 409, `PayloadTooLarge` 413,
  `RateLimited` 429, `Unavailable` 503) for every non-2xx answer, built from its
  `qinglong/error@v1` body — or from the status alone when the body is not one
  (a proxy's HTML page still raises the status's class);
- `TransportError` (`RequestTimeout`, `TlsVerificationError`) when no answer came;
- `ResponseError` for a 2xx answer that is not the documented document;
- `ClientInputError` (also a `ValueError`) for arguments refused before sending,
  and `ClientSetupError` for an unusable base URL, token file or CA file.

The token is read once (from a file that only its owner may read: mode 0600 or
stricter) and lives only in the HTTP client's headers, whose repr is redacted by
httpx; no repr, log line or exception message of this module contains it. Nothing
is retried automatically (an enqueue without a key is not idempotent).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import ssl
import stat
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import httpx

from qinglong.log_text import LogPage, LogShapeError

ENQUEUE_SCHEMA = "qinglong/run-enqueue-request@v1"
ERROR_SCHEMA = "qinglong/error@v1"
# The answers' schema ids: a document naming another schema is a ResponseError.
ENQUEUED_SCHEMA = "qinglong/run-enqueued@v1"
RUN_SCHEMA = "qinglong/run@v1"
RUN_PAGE_SCHEMA = "qinglong/run-page@v1"
RUN_LOG_SCHEMA = "qinglong/run-log@v1"
USER_AGENT = "qinglong-client/1"
DEFAULT_TIMEOUT_S = 30.0
TOKEN_FILE_LIMIT = 4096
TOKEN_PATTERN = re.compile(r"qlp_[a-z0-9]{16}_[A-Za-z0-9_-]{43}")
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
# The `error` of an error body that is not a qinglong/error@v1 document.
_KIND_BY_STATUS = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    408: "request_timeout",
    409: "conflict",
    413: "payload_too_large",
    429: "rate_limited",
    500: "internal_error",
    501: "not_implemented",
    503: "unavailable",
}
UNRECOGNIZED_BODY = "unrecognized_body"


# ------------------------------------------------------------------ errors


class ClientError(Exception):
    """Every exception this module raises."""


class ClientSetupError(ClientError):
    """The base URL, token file or CA file cannot be used (`field` names which)."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(message)
        self.field = field_name


class ClientInputError(ClientError, ValueError):
    """An argument refused before anything was sent (`field`: its wire name)."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(message)
        self.field = field_name


class TransportError(ClientError):
    """No HTTP answer: connection refused or reset, DNS, TLS, timeout."""

    reason = "connect_failed"


class RequestTimeout(TransportError):
    reason = "timeout"


class TlsVerificationError(TransportError):
    """The server's certificate did not verify against the CA file (or system store)."""

    reason = "tls_verify_failed"


class ResponseError(ClientError):
    """A 2xx answer that is not the documented JSON document."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status


class ApiError(ClientError):
    """A non-2xx answer. `error`/`reason` are the body's low-cardinality codes, `detail`
    its optional `{field?, key?, offset?}`; `retry_after_s` the Retry-After header."""

    def __init__(
        self,
        status: int,
        error: str,
        reason: str,
        detail: Mapping[str, Any] | None = None,
        retry_after_s: int | None = None,
    ) -> None:
        self.status = status
        self.error = error
        self.reason = reason
        self.detail: dict[str, Any] | None = None if detail is None else dict(detail)
        self.retry_after_s = retry_after_s
        text = f"{status} {error}: {reason}"
        if self.detail:
            text += " " + json.dumps(self.detail, sort_keys=True)
        super().__init__(text)

    def as_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"error": self.error, "reason": self.reason, "status": self.status}
        if self.detail:
            doc["detail"] = self.detail
        if self.retry_after_s is not None:
            doc["retryAfterS"] = self.retry_after_s
        return doc


class BadRequest(ApiError):
    pass


class Unauthorized(ApiError):
    pass


class Forbidden(ApiError):
    pass


class NotFound(ApiError):
    pass


class Conflict(ApiError):
    pass


class PayloadTooLarge(ApiError):
    pass


class RateLimited(ApiError):
    pass


class Unavailable(ApiError):
    pass


ERROR_CLASSES: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: PayloadTooLarge,
    429: RateLimited,
    503: Unavailable,
}


def api_error(status: int, body: bytes, retry_after: str | None = None) -> ApiError:
    """The exception for a non-2xx answer: its class from the status, its codes from a
    `qinglong/error@v1` body when there is one, else from the status alone."""
    cls = ERROR_CLASSES.get(status, ApiError)
    error = _KIND_BY_STATUS.get(status, "bad_request" if status < 500 else "unavailable")
    reason, detail = UNRECOGNIZED_BODY, None
    doc = _json_or_none(body)
    if (
        isinstance(doc, dict)
        and doc.get("schema") == ERROR_SCHEMA
        and isinstance(doc.get("error"), str)
        and isinstance(doc.get("reason"), str)
    ):
        error, reason = doc["error"], doc["reason"]
        detail = doc["detail"] if isinstance(doc.get("detail"), dict) else None
    retry = int(retry_after) if retry_after and retry_after.isdigit() else None
    return cls(status, error, reason, detail, retry)


def _json_or_none(body: bytes | str) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        return None


# ------------------------------------------------------------- typed results


@dataclass(frozen=True)
class EnqueueResult:
    run_ids: list[str]
    existing: bool


@dataclass(frozen=True)
class Run:
    """`run` of the §9.4 show document."""

    run_id: str
    task_id: str
    state: str
    priority: int | None = None
    project_id: str | None = None
    queued_at_ms: int | None = None
    not_before_ms: int | None = None
    attempts: int | None = None
    updated_at_ms: int | None = None
    finished_at_ms: int | None = None
    cancel_requested: bool | None = None
    execution_revision_id: str | None = None
    key: str | None = None
    project: str | None = None
    task_name: str | None = None
    pool: str | None = None


@dataclass(frozen=True)
class AttemptResult:
    """What the executor reported with the completion (§9.3)."""

    duration_ms: int | None
    output_tail: str
    output_bytes: int | None
    exit_code: int | None = None


@dataclass(frozen=True)
class Attempt:
    attempt_id: str
    number: int
    state: str
    worker_id: str | None = None
    session_id: str | None = None
    claimed_at_ms: int | None = None
    started_at_ms: int | None = None
    finished_at_ms: int | None = None
    exit_code: int | None = None
    reason: str | None = None
    result: AttemptResult | None = None


@dataclass(frozen=True)
class RunEvent:
    """One event; `payload` holds its fields beyond type, atMs and attemptId."""

    type: str
    at_ms: int | None
    attempt_id: str | None = None
    payload: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RunDocument:
    """The §9.4 show document (`GET /v1/runs/{id}`, and the answer of cancel/retry);
    `raw` is the document as received."""

    run: Run
    attempts: list[Attempt]
    events: list[RunEvent]
    raw: dict[str, Any] = field(repr=False, compare=False)


@dataclass(frozen=True)
class RunSummary:
    """One row of the §9.4 list document."""

    run_id: str
    task_id: str
    state: str
    priority: int | None = None
    queued_at_ms: int | None = None
    not_before_ms: int | None = None
    attempts: int | None = None
    updated_at_ms: int | None = None
    project: str | None = None
    task_name: str | None = None
    pool: str | None = None


@dataclass(frozen=True)
class RunList:
    runs: list[RunSummary]
    next: str | None
    raw: dict[str, Any] = field(repr=False, compare=False)


class _Shape:
    """Reads one JSON object of an answer; a missing or mistyped field is a ResponseError."""

    def __init__(self, status: int, doc: Any, where: str, schema: str | None = None) -> None:
        if not isinstance(doc, dict):
            raise ResponseError(status, f"{where} is not a JSON object")
        if schema is not None and doc.get("schema", schema) != schema:
            raise ResponseError(status, f"{where} is not a {schema} document")
        self.status, self.doc, self.where = status, doc, where

    def _get(self, name: str, kinds: tuple[type, ...], required: bool) -> Any:
        value = self.doc.get(name)
        if value is None and not required:
            return None
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            raise ResponseError(self.status, f"{self.where}.{name} is missing or mistyped")
        return value

    def text(self, name: str, required: bool = False) -> Any:
        return self._get(name, (str,), required)

    def integer(self, name: str, required: bool = False) -> Any:
        return self._get(name, (int,), required)

    def flag(self, name: str, required: bool = False) -> Any:
        return self._get(name, (bool,), required)

    def items(self, name: str) -> list[Any]:
        return list(self._get(name, (list,), True))

    def child(self, name: str) -> _Shape:
        return _Shape(self.status, self.doc.get(name), f"{self.where}.{name}")


def _run(s: _Shape) -> Run:
    return Run(
        run_id=s.text("runId", True),
        task_id=s.text("taskId", True),
        state=s.text("state", True),
        priority=s.integer("priority"),
        project_id=s.text("projectId"),
        queued_at_ms=s.integer("queuedAtMs"),
        not_before_ms=s.integer("notBeforeMs"),
        attempts=s.integer("attempts"),
        updated_at_ms=s.integer("updatedAtMs"),
        finished_at_ms=s.integer("finishedAtMs"),
        cancel_requested=s.flag("cancelRequested"),
        execution_revision_id=s.text("executionRevisionId"),
        key=s.text("key"),
        project=s.text("project"),
        task_name=s.text("taskName"),
        pool=s.text("pool"),
    )


def _attempt(s: _Shape) -> Attempt:
    result = None
    if s.doc.get("result") is not None:
        r = s.child("result")
        result = AttemptResult(
            duration_ms=r.integer("durationMs"),
            output_tail=r.text("outputTail") or "",
            output_bytes=r.integer("outputBytes"),
            exit_code=r.integer("exitCode"),
        )
    return Attempt(
        attempt_id=s.text("attemptId", True),
        number=s.integer("number", True),
        state=s.text("state", True),
        worker_id=s.text("workerId"),
        session_id=s.text("sessionId"),
        claimed_at_ms=s.integer("claimedAtMs"),
        started_at_ms=s.integer("startedAtMs"),
        finished_at_ms=s.integer("finishedAtMs"),
        exit_code=s.integer("exitCode"),
        reason=s.text("reason"),
        result=result,
    )


def _event(s: _Shape) -> RunEvent:
    payload = {k: v for k, v in s.doc.items() if k not in ("type", "atMs", "attemptId")}
    return RunEvent(
        type=s.text("type", True),
        at_ms=s.integer("atMs"),
        attempt_id=s.text("attemptId"),
        payload=payload,
    )


def parse_run_document(status: int, doc: Any) -> RunDocument:
    s = _Shape(status, doc, "body", RUN_SCHEMA)
    attempts = [_attempt(_Shape(status, a, "body.attempts[]")) for a in s.items("attempts")]
    events = [_event(_Shape(status, e, "body.events[]")) for e in s.items("events")]
    return RunDocument(run=_run(s.child("run")), attempts=attempts, events=events, raw=s.doc)


def parse_run_list(status: int, doc: Any) -> RunList:
    s = _Shape(status, doc, "body", RUN_PAGE_SCHEMA)
    runs = []
    for item in s.items("runs"):
        r = _Shape(status, item, "body.runs[]")
        runs.append(
            RunSummary(
                run_id=r.text("runId", True),
                task_id=r.text("taskId", True),
                state=r.text("state", True),
                priority=r.integer("priority"),
                queued_at_ms=r.integer("queuedAtMs"),
                not_before_ms=r.integer("notBeforeMs"),
                attempts=r.integer("attempts"),
                updated_at_ms=r.integer("updatedAtMs"),
                project=r.text("project"),
                task_name=r.text("taskName"),
                pool=r.text("pool"),
            )
        )
    return RunList(runs=runs, next=s.text("next"), raw=s.doc)


def parse_log_page(status: int, doc: Any) -> LogPage:
    """One `qinglong/run-log@v1` document (an answer, or a line of a follow stream)."""
    _Shape(status, doc, "body", RUN_LOG_SCHEMA)
    try:
        return LogPage.from_json(doc)
    except LogShapeError as exc:
        raise ResponseError(status, f"body: {exc}") from None


def parse_log_line(line: str) -> LogPage:
    """A line of a follow stream: a page, or the `qinglong/error@v1` that ended it
    (raised as the ApiError of the status its `error` names)."""
    doc = _json_or_none(line)
    if isinstance(doc, dict) and doc.get("schema") == ERROR_SCHEMA:
        status = next((s for s, kind in _KIND_BY_STATUS.items() if kind == doc.get("error")), 503)
        raise api_error(status, line.encode())
    if doc is None:
        raise ResponseError(200, "a line of the follow stream is not JSON")
    return parse_log_page(200, doc)


def parse_enqueue(status: int, doc: Any) -> EnqueueResult:
    s = _Shape(status, doc, "body", ENQUEUED_SCHEMA)
    run_ids = s.items("runIds")
    if not all(isinstance(r, str) for r in run_ids):
        raise ResponseError(status, "body.runIds holds a non-string")
    return EnqueueResult(run_ids=run_ids, existing=s.flag("existing", True))


# ---------------------------------------------------------------- requests


@dataclass(frozen=True)
class ApiRequest:
    """One request as both clients send it (and the curl line renders it)."""

    method: str
    path: str
    params: tuple[tuple[str, str], ...] = ()
    body: dict[str, Any] | None = None

    def content(self) -> bytes | None:
        return None if self.body is None else json.dumps(self.body, separators=(",", ":")).encode()


def _integer_arg(value: object, field_name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ClientInputError(field_name, f"{field_name} must be an integer")
    return value


def enqueue_request(
    task: str,
    *,
    count: int | None = None,
    priority: int | None = None,
    delay_ms: int | None = None,
    not_before_ms: int | None = None,
    key: str | None = None,
) -> ApiRequest:
    """`POST /v1/runs`: `task` is "P/name" or a task id. Bounds are the server's."""
    if not isinstance(task, str) or not task:
        raise ClientInputError("task", 'task must be a task id or "project/name"')
    if delay_ms is not None and not_before_ms is not None:
        raise ClientInputError("delayMs", "give delayMs or notBeforeMs, not both")
    body: dict[str, Any] = {"schema": ENQUEUE_SCHEMA, "task": task}
    for name, value in (
        ("count", count),
        ("priority", priority),
        ("delayMs", delay_ms),
        ("notBeforeMs", not_before_ms),
    ):
        if value is not None:
            body[name] = _integer_arg(value, name)
    if key is not None:
        if not isinstance(key, str):
            raise ClientInputError("key", "key must be a string")
        body["key"] = key
    return ApiRequest("POST", "/v1/runs", body=body)


def run_path(run_id: str, action: str = "") -> str:
    """`/v1/runs/{id}[/action]`; the id must be a UUID (nothing else reaches the path)."""
    if not isinstance(run_id, str) or not _UUID.fullmatch(run_id):
        raise ClientInputError("runId", "runId must be a canonical UUID")
    return f"/v1/runs/{run_id.lower()}" + (f"/{action}" if action else "")


def list_request(
    *,
    task: str | None = None,
    state: str | Sequence[str] | None = None,
    after: str | None = None,
    limit: int | None = None,
) -> ApiRequest:
    """`GET /v1/runs`: `state` one state or several (the parameter repeats)."""
    params: list[tuple[str, str]] = []
    if task is not None:
        params.append(("task", task))
    states = [state] if isinstance(state, str) else list(state or ())
    params.extend(("state", s) for s in states)
    if after is not None:
        params.append(("after", after))
    if limit is not None:
        params.append(("limit", str(_integer_arg(limit, "limit"))))
    return ApiRequest("GET", "/v1/runs", tuple(params))


def log_request(
    run_id: str, *, attempt: int | None = None, offset: int = 0, follow: bool = False
) -> ApiRequest:
    """`GET /v1/runs/{id}/log?offset=&attempt=&follow=1` (SPEC §15.3)."""
    params = [("offset", str(_integer_arg(offset, "offset")))]
    if attempt is not None:
        params.append(("attempt", str(_integer_arg(attempt, "attempt"))))
    if follow:
        params.append(("follow", "1"))
    return ApiRequest("GET", run_path(run_id, "log"), tuple(params))


def _resume(run_id: str, last: LogPage | None) -> ApiRequest | None:
    """After a follow stream ended: None when the log is finished, else the request
    that goes on from its last line (the server caps a stream's duration)."""
    if last is None:
        raise ResponseError(200, "the follow stream ended without a line")
    if last.finished:
        return None
    return log_request(run_id, attempt=last.attempt_number, offset=last.next_offset, follow=True)


def _advanced(previous: LogPage, page: LogPage) -> LogPage:
    """`page`, read at `previous.next_offset`, unless it moves the log nowhere."""
    if page.offset != previous.next_offset or (not page.text and not page.caught_up):
        raise ResponseError(200, "the log page does not advance from the previous one")
    return page


def _action_request(run_id: str, action: str) -> ApiRequest:
    return ApiRequest("POST", run_path(run_id, action), body={})


# -------------------------------------------------------------- setup


def read_token_file(path: str | os.PathLike[str]) -> str:
    """The token in `path`: a regular file only its owner may read or write (0600 or
    stricter), holding one `qlp_<id>_<secret>` line. Errors never echo the content."""
    name = os.fspath(path)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise ClientSetupError(
            "tokenFile", f"token file {name}: cannot open it: {exc.strerror or exc}"
        ) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ClientSetupError("tokenFile", f"token file {name}: not a regular file")
        if st.st_mode & 0o077:
            raise ClientSetupError(
                "tokenFile",
                f"token file {name}: readable or writable by group/other "
                f"(mode {stat.S_IMODE(st.st_mode):04o}); chmod 600 it",
            )
        raw = os.read(fd, TOKEN_FILE_LIMIT + 1)
    finally:
        os.close(fd)
    text = raw.decode("ascii", "replace").strip()
    if len(raw) > TOKEN_FILE_LIMIT or not TOKEN_PATTERN.fullmatch(text):
        raise ClientSetupError(
            "tokenFile",
            f"token file {name}: does not hold one qlp_<tokenId>_<secret> producer token",
        )
    return text


def _check_token(token: str | None) -> str:
    if not isinstance(token, str) or not TOKEN_PATTERN.fullmatch(token):
        raise ClientSetupError("token", "token is not a qlp_<tokenId>_<secret> producer token")
    return token


def tls_context(ca_file: str | os.PathLike[str] | None) -> ssl.SSLContext:
    """Server verification (hostname included), TLS 1.2+: the CA file, else the system
    trust store."""
    try:
        ctx = ssl.create_default_context(cafile=None if ca_file is None else os.fspath(ca_file))
    except (OSError, ssl.SSLError) as exc:
        raise ClientSetupError(
            "caFile", f"CA file {ca_file}: cannot load it: {getattr(exc, 'strerror', None) or exc}"
        ) from None
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    return ctx


def _base_url(url: str) -> str:
    try:
        parsed = httpx.URL(url) if isinstance(url, str) else None
    except httpx.InvalidURL:
        parsed = None
    if parsed is None or parsed.scheme != "https" or not parsed.host:
        raise ClientSetupError(
            "api",
            "the API URL must be https://host[:port][/prefix] (the token is never sent in clear)",
        )
    if parsed.query or parsed.fragment or parsed.userinfo:
        raise ClientSetupError("api", "the API URL takes no query, fragment or user info")
    return str(parsed).rstrip("/")


@dataclass(frozen=True)
class ApiTarget:
    """Where the API is and how to reach it: `api` of dev-env.json, or CLI flags."""

    url: str
    token_file: Path
    ca_file: Path | None = None

    @classmethod
    def from_dev_env(cls, path: str | os.PathLike[str]) -> ApiTarget:
        try:
            doc = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ClientSetupError("devEnv", f"{path}: cannot read it: {exc}") from None
        api = doc.get("api") if isinstance(doc, dict) else None
        if not (
            isinstance(api, dict)
            and isinstance(api.get("url"), str)
            and isinstance(api.get("tokenFile"), str)
            and isinstance(api.get("caFile"), str | None)
        ):
            raise ClientSetupError("devEnv", f"{path} has no api {{url, caFile, tokenFile}}")
        ca = api.get("caFile")
        return cls(
            url=api["url"],
            token_file=Path(api["tokenFile"]),
            ca_file=None if ca is None else Path(ca),
        )


# ---------------------------------------------------------------- clients


def _decode(response: httpx.Response, expected: int | None = None) -> Any:
    """The JSON body of a 2xx answer, or the ApiError/ResponseError it means."""
    status = response.status_code
    if not 200 <= status < 300:
        if 300 <= status < 400:
            raise ResponseError(status, "unexpected redirect (redirects are not followed)")
        raise api_error(status, response.content, response.headers.get("retry-after"))
    if expected is not None and status != expected:
        raise ResponseError(status, f"expected status {expected}")
    doc = _json_or_none(response.content)
    if doc is None:
        raise ResponseError(status, "the body is not JSON")
    return doc


def _transport_error(method: str, path: str, exc: httpx.HTTPError) -> TransportError:
    cls: type[TransportError] = TransportError
    if isinstance(exc, httpx.TimeoutException):
        cls = RequestTimeout
    elif _caused_by(exc, ssl.SSLCertVerificationError):
        cls = TlsVerificationError
    return cls(f"{method} {path}: {type(exc).__name__}: {exc}")


def _caused_by(exc: BaseException, kind: type[BaseException]) -> bool:
    seen: BaseException | None = exc
    for _ in range(10):
        if seen is None:
            return False
        if isinstance(seen, kind):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


class _Common:
    """Configuration both clients share; the token goes only into httpx's headers."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        token_file: str | os.PathLike[str] | None = None,
        ca_file: str | os.PathLike[str] | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        connect_timeout_s: float | None = None,
    ) -> None:
        if (token is None) == (token_file is None):
            raise ClientSetupError("token", "give exactly one of token and token_file")
        for name, value in (("timeoutS", timeout_s), ("connectTimeoutS", connect_timeout_s)):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int | float) or not value > 0
            ):
                raise ClientSetupError(name, f"{name} must be a positive number of seconds")
        self.base_url = _base_url(base_url)
        secret = read_token_file(token_file) if token_file is not None else _check_token(token)
        self._settings: dict[str, Any] = {
            "base_url": self.base_url,
            "verify": tls_context(ca_file),
            "timeout": httpx.Timeout(timeout_s, connect=connect_timeout_s or timeout_s),
            "headers": {
                "Authorization": f"Bearer {secret}",
                "Accept": "application/json",
                "User-Agent": USER_AGENT,
            },
            "follow_redirects": False,
        }

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self.base_url!r})"

    @staticmethod
    def _kwargs(request: ApiRequest) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"params": list(request.params)}
        content = request.content()
        if content is not None:
            kwargs["content"] = content
            kwargs["headers"] = {"Content-Type": "application/json"}
        return kwargs


class Client(_Common):
    """Blocking client: `with Client(url, token_file=…, ca_file=…) as api: api.enqueue(…)`."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        token_file: str | os.PathLike[str] | None = None,
        ca_file: str | os.PathLike[str] | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        connect_timeout_s: float | None = None,
    ) -> None:
        super().__init__(
            base_url,
            token=token,
            token_file=token_file,
            ca_file=ca_file,
            timeout_s=timeout_s,
            connect_timeout_s=connect_timeout_s,
        )
        self._http = httpx.Client(**self._settings)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def send(self, request: ApiRequest, expected: int | None = None) -> Any:
        """Send one request; the decoded JSON of its 2xx answer."""
        try:
            response = self._http.request(request.method, request.path, **self._kwargs(request))
        except httpx.HTTPError as exc:
            raise _transport_error(request.method, request.path, exc) from None
        return _decode(response, expected)

    def enqueue(
        self,
        task: str,
        *,
        count: int | None = None,
        priority: int | None = None,
        delay_ms: int | None = None,
        not_before_ms: int | None = None,
        key: str | None = None,
    ) -> EnqueueResult:
        request = enqueue_request(
            task,
            count=count,
            priority=priority,
            delay_ms=delay_ms,
            not_before_ms=not_before_ms,
            key=key,
        )
        return parse_enqueue(201, self.send(request, 201))

    def show(self, run_id: str) -> RunDocument:
        return parse_run_document(200, self.send(ApiRequest("GET", run_path(run_id))))

    def list(
        self,
        *,
        task: str | None = None,
        state: str | Sequence[str] | None = None,
        after: str | None = None,
        limit: int | None = None,
    ) -> RunList:
        request = list_request(task=task, state=state, after=after, limit=limit)
        return parse_run_list(200, self.send(request))

    def cancel(self, run_id: str) -> RunDocument:
        return parse_run_document(200, self.send(_action_request(run_id, "cancel")))

    def retry(self, run_id: str) -> RunDocument:
        return parse_run_document(200, self.send(_action_request(run_id, "retry")))

    def run_log(self, run_id: str, *, attempt: int | None = None, offset: int = 0) -> LogPage:
        """One page (at most 1 MiB) of an attempt's stored log from `offset` (SPEC §15.3);
        `attempt` None: the run's latest."""
        return parse_log_page(200, self.send(log_request(run_id, attempt=attempt, offset=offset)))

    def log_pages(self, run_id: str, *, attempt: int | None = None) -> Iterator[LogPage]:
        """Every page of what is stored now, from offset 0 (the attempt fixed by the first)."""
        page = self.run_log(run_id, attempt=attempt)
        yield page
        while not page.caught_up:
            page = _advanced(
                page, self.run_log(run_id, attempt=page.attempt_number, offset=page.next_offset)
            )
            yield page

    def follow_log(
        self, run_id: str, *, attempt: int | None = None, offset: int = 0
    ) -> Iterator[LogPage]:
        """The log as it grows (`follow=1`): a page per line of the stream, until the
        attempt ended and all of it was read; reconnects from the last `nextOffset`
        when the server ends a stream early (its duration cap)."""
        request: ApiRequest | None = log_request(
            run_id, attempt=attempt, offset=offset, follow=True
        )
        while request is not None:
            last = None
            for last in self._lines(request):
                yield last
            request = _resume(run_id, last)

    def _lines(self, request: ApiRequest) -> Iterator[LogPage]:
        try:
            with self._http.stream(
                request.method, request.path, **self._kwargs(request)
            ) as response:
                if not 200 <= response.status_code < 300:
                    response.read()
                    _decode(response)
                for line in response.iter_lines():
                    if line.strip():
                        yield parse_log_line(line)
        except httpx.HTTPError as exc:
            raise _transport_error(request.method, request.path, exc) from None


class AsyncClient(_Common):
    """asyncio client with the same methods as `Client`, as coroutines."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        token_file: str | os.PathLike[str] | None = None,
        ca_file: str | os.PathLike[str] | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        connect_timeout_s: float | None = None,
    ) -> None:
        super().__init__(
            base_url,
            token=token,
            token_file=token_file,
            ca_file=ca_file,
            timeout_s=timeout_s,
            connect_timeout_s=connect_timeout_s,
        )
        self._http = httpx.AsyncClient(**self._settings)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        await self._http.aclose()

    async def send(self, request: ApiRequest, expected: int | None = None) -> Any:
        try:
            response = await self._http.request(
                request.method, request.path, **self._kwargs(request)
            )
        except httpx.HTTPError as exc:
            raise _transport_error(request.method, request.path, exc) from None
        return _decode(response, expected)

    async def enqueue(
        self,
        task: str,
        *,
        count: int | None = None,
        priority: int | None = None,
        delay_ms: int | None = None,
        not_before_ms: int | None = None,
        key: str | None = None,
    ) -> EnqueueResult:
        request = enqueue_request(
            task,
            count=count,
            priority=priority,
            delay_ms=delay_ms,
            not_before_ms=not_before_ms,
            key=key,
        )
        return parse_enqueue(201, await self.send(request, 201))

    async def show(self, run_id: str) -> RunDocument:
        return parse_run_document(200, await self.send(ApiRequest("GET", run_path(run_id))))

    async def list(
        self,
        *,
        task: str | None = None,
        state: str | Sequence[str] | None = None,
        after: str | None = None,
        limit: int | None = None,
    ) -> RunList:
        request = list_request(task=task, state=state, after=after, limit=limit)
        return parse_run_list(200, await self.send(request))

    async def cancel(self, run_id: str) -> RunDocument:
        return parse_run_document(200, await self.send(_action_request(run_id, "cancel")))

    async def retry(self, run_id: str) -> RunDocument:
        return parse_run_document(200, await self.send(_action_request(run_id, "retry")))

    async def run_log(self, run_id: str, *, attempt: int | None = None, offset: int = 0) -> LogPage:
        return parse_log_page(
            200, await self.send(log_request(run_id, attempt=attempt, offset=offset))
        )

    async def log_pages(self, run_id: str, *, attempt: int | None = None) -> AsyncIterator[LogPage]:
        page = await self.run_log(run_id, attempt=attempt)
        yield page
        while not page.caught_up:
            page = _advanced(
                page,
                await self.run_log(run_id, attempt=page.attempt_number, offset=page.next_offset),
            )
            yield page

    async def follow_log(
        self, run_id: str, *, attempt: int | None = None, offset: int = 0
    ) -> AsyncIterator[LogPage]:
        request: ApiRequest | None = log_request(
            run_id, attempt=attempt, offset=offset, follow=True
        )
        while request is not None:
            last = None
            async for last in self._lines(request):
                yield last
            request = _resume(run_id, last)

    async def _lines(self, request: ApiRequest) -> AsyncIterator[LogPage]:
        try:
            async with self._http.stream(
                request.method, request.path, **self._kwargs(request)
            ) as response:
                if not 200 <= response.status_code < 300:
                    await response.aread()
                    _decode(response)
                async for line in response.aiter_lines():
                    if line.strip():
                        yield parse_log_line(line)
        except httpx.HTTPError as exc:
            raise _transport_error(request.method, request.path, exc) from None


# ------------------------------------------------------------------- curl


def curl_enqueue(
    target: ApiTarget,
    task: str,
    *,
    count: int | None = None,
    priority: int | None = None,
    delay_ms: int | None = None,
    not_before_ms: int | None = None,
    key: str | None = None,
) -> str:
    """The shell line that sends the same enqueue as `Client.enqueue` with curl. The
    token is read from the token file when the line runs (`$(cat FILE)`): it is never
    part of the line."""
    request = enqueue_request(
        task,
        count=count,
        priority=priority,
        delay_ms=delay_ms,
        not_before_ms=not_before_ms,
        key=key,
    )
    url = _base_url(target.url) + request.path
    parts = ["curl", "-sS", "--fail-with-body", "--proto", "=https"]
    if target.ca_file is not None:
        parts += ["--cacert", shlex.quote(str(target.ca_file))]
    parts += [
        "-X",
        request.method,
        f'-H "Authorization: Bearer $(cat {shlex.quote(str(target.token_file))})"',
        "-H",
        shlex.quote("Content-Type: application/json"),
        "--data",
        shlex.quote((request.content() or b"").decode()),
        shlex.quote(url),
    ]
    return " ".join(parts)
