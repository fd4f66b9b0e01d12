"""Handlers of the producer API (SPEC §13.4): authenticate, authorize, audit, act.

Every request: the bearer token is parsed here (a malformed or missing one is
401 before anything else); the body or query is checked against its schema
(400 naming the field, nothing written); then one `ql.producer_*` call, which
checks the token (digest, revocation, expiry), its scope and the project in
SQL on every call, and acts. One audit line per request names the token id
(the public part), the action, the outcome and the reason — never the token.
Errors are `qinglong/error@v1` with `detail.field` where a field is at fault.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from aiohttp import web

from qinglong.db import api
from qinglong.db.answers import AnswerError
from qinglong.db.api import Call
from qinglong.schemas.contract import ContractError, SchemaId, default_contract, parse_json_strict
from qinglong.service.audit import Emit
from qinglong.service.errors import ERROR_SCHEMA, ApiError, kind_for_status
from qinglong.service.gateway import DbRefused, DbUnavailable, Gateway
from qinglong.service.metrics import IngressMetrics
from qinglong.service.producer_config import ProducerConfig
from qinglong.service.producer_token import MalformedToken, TokenProof, parse_token
from qinglong.service.views import read_body

log = logging.getLogger("qinglong.api")
T = TypeVar("T")

RUNS = "/v1/runs"
RUN = "/v1/runs/{run_id}"
RUN_CANCEL = "/v1/runs/{run_id}/cancel"
RUN_RETRY = "/v1/runs/{run_id}/retry"
OPENAPI = "/v1/openapi.json"
# A field name an error may carry (never a value, never an arbitrary key).
FIELD_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")
_LIST_PARAMS = frozenset({"task", "state", "after", "limit"})
_HTTP_REASONS = {404: "unknown_route", 405: "method_not_allowed", 413: "body_too_large"}


@dataclass
class ProducerState:
    config: ProducerConfig
    gateway: Gateway
    audit: Emit


PRODUCER: web.AppKey[ProducerState] = web.AppKey("qinglong_producer", ProducerState)


class ProducerError(Exception):
    """Raised by handlers; rendered as `qinglong/error@v1`."""

    def __init__(
        self, status: int, reason: str, field: str | None = None, retry_after_s: int | None = None
    ) -> None:
        super().__init__(f"{status} {reason}")
        self.status = status
        self.reason = reason
        self.field = field
        self.retry_after_s = retry_after_s


def error_response(
    status: int, reason: str, field: str | None = None, retry_after_s: int | None = None
) -> web.Response:
    doc: dict[str, Any] = {
        "schema": ERROR_SCHEMA,
        "error": kind_for_status(status).value,
        "reason": reason,
    }
    if field is not None and FIELD_NAME.fullmatch(field):
        doc["detail"] = {"field": field}
    response = web.json_response(doc, status=status)
    if retry_after_s is not None:
        response.headers["Retry-After"] = str(max(1, retry_after_s))
    if status == 401:
        response.headers["WWW-Authenticate"] = 'Bearer realm="qinglong"'
    return response


@web.middleware
async def producer_envelope(
    request: web.Request,
    handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
) -> web.StreamResponse:
    try:
        return await handler(request)
    except ProducerError as exc:
        return error_response(exc.status, exc.reason, exc.field, exc.retry_after_s)
    except ApiError as exc:  # read_body: 413 / 408
        response = error_response(exc.status, exc.reason)
        if exc.close_connection:
            response.force_close()
        return response
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        response = error_response(exc.status, _HTTP_REASONS.get(exc.status, "http_error"))
        if exc.status == 405 and "Allow" in exc.headers:
            response.headers["Allow"] = exc.headers["Allow"]
        return response
    except Exception as exc:  # the envelope covers every failure
        log.error("unhandled error", extra={"event": "api.unhandled", "error": type(exc).__name__})
        return error_response(500, "internal_error")


# ------------------------------------------------------------------ the four steps


def _audit(
    state: ProducerState, action: str, token_id: str | None, outcome: str, reason: str, status: int
) -> None:
    state.audit(
        json.dumps(
            {
                "timeMs": int(time.time() * 1000),
                "stream": "audit",
                "api": "producer",
                "tokenId": token_id,
                "action": action,
                "outcome": outcome,
                "reason": reason,
                "status": status,
            },
            separators=(",", ":"),
        )
    )


def authenticate(request: web.Request, action: str) -> TokenProof:
    """The bearer token's id and digest; 401 (audited) when missing or malformed."""
    state = request.app[PRODUCER]
    header = request.headers.get("Authorization")
    if header is None:
        _audit(state, action, None, "denied", "token_missing", 401)
        raise ProducerError(401, "token_missing")
    scheme, _, value = header.partition(" ")
    try:
        if scheme.lower() != "bearer":
            raise MalformedToken()
        return parse_token(value.strip())
    except MalformedToken:
        _audit(state, action, None, "denied", "token_invalid", 401)
        raise ProducerError(401, "token_invalid") from None


async def act(
    request: web.Request,
    action: str,
    proof: TokenProof,
    call: Call[T],
    renames: Mapping[str, str] | None = None,
) -> T:
    """One producer call (the database authorizes and acts); every outcome audited."""
    state = request.app[PRODUCER]
    try:
        result = await state.gateway.call(call)
    except AnswerError:
        _audit(state, action, proof.token_id, "done", "ok", 200)
        raise ProducerError(503, "database_error") from None
    except DbRefused as exc:
        field = (renames or {}).get(exc.field or "", exc.field)
        outcome = "denied" if exc.http_status in (401, 403) else "refused"
        _audit(state, action, proof.token_id, outcome, exc.reason, exc.http_status)
        raise ProducerError(exc.http_status, exc.reason, field) from None
    except DbUnavailable as exc:
        _audit(state, action, proof.token_id, "undecided", exc.reason, 503)
        raise ProducerError(
            503, exc.reason, retry_after_s=state.config.unavailable_retry_after_s
        ) from None
    _audit(state, action, proof.token_id, "done", "ok", 200)
    if result is None:
        raise ProducerError(503, "database_error")
    return result


def invalid(
    action: str,
    request: web.Request,
    proof: TokenProof,
    field: str | None,
    reason: str = "invalid_input",
) -> ProducerError:
    _audit(request.app[PRODUCER], action, proof.token_id, "refused", reason, 400)
    return ProducerError(400, reason, field)


def _body(schema_id: SchemaId, doc: Mapping[str, Any]) -> web.Response:
    return web.json_response({"schema": schema_id.value, **doc})


# ------------------------------------------------------------------ bodies


def _contract_field(exc: ContractError, doc: object, schema_id: SchemaId) -> str | None:
    """The field a schema refusal names: the path's first segment, the missing
    property, or the first property the schema does not know."""
    detail = exc.detail
    if detail.startswith("$."):
        return re.split(r"[.\[:]", detail[2:], maxsplit=1)[0]
    missing = re.search(r"required \(([A-Za-z][A-Za-z0-9_]*)\)", detail)
    if missing:
        return missing.group(1)
    if exc.keyword == "additionalProperties" and isinstance(doc, dict):
        known = default_contract().schema(schema_id.value).get("properties", {})
        extra = sorted(key for key in doc if key not in known)
        return extra[0] if extra and FIELD_NAME.fullmatch(extra[0]) else None
    return None


async def _json_body(
    request: web.Request, action: str, proof: TokenProof, schema_id: SchemaId | None
) -> dict[str, Any]:
    """The body, strictly parsed and validated (None schema: empty or `{}` only)."""
    config = request.app[PRODUCER].config
    data = await read_body(request, config.max_body_bytes, config.body_timeout_s)
    if schema_id is None and not data.strip():
        return {}
    try:
        doc = parse_json_strict(data)
    except ContractError as exc:
        raise invalid(action, request, proof, None, exc.reason) from None
    if schema_id is None:
        if doc == {}:
            return {}
        extra = sorted(doc) if isinstance(doc, dict) else []
        field = extra[0] if extra and FIELD_NAME.fullmatch(extra[0]) else None
        raise invalid(action, request, proof, field)
    try:
        default_contract().validate(schema_id.value, doc)
    except ContractError as exc:
        raise invalid(action, request, proof, _contract_field(exc, doc, schema_id)) from None
    assert isinstance(doc, dict)
    return doc


# ------------------------------------------------------------------ endpoints


async def enqueue(request: web.Request) -> web.Response:
    proof = authenticate(request, "run.enqueue")
    doc = await _json_body(request, "run.enqueue", proof, SchemaId.RUN_ENQUEUE_REQUEST)
    call = api.producer_enqueue(
        token_id=proof.token_id,
        token_digest=proof.digest,
        task=doc["task"],
        priority=doc.get("priority", 0),
        count=doc.get("count", 1),
        not_before_ms=doc.get("notBeforeMs"),
        delay_ms=doc.get("delayMs"),
        key=doc.get("key"),
    )
    result = await act(request, "run.enqueue", proof, call, {"taskId": "task"})
    response = _body(SchemaId.RUN_ENQUEUED, {"runIds": result.run_ids, "existing": result.existing})
    response.set_status(201)
    return response


async def show(request: web.Request) -> web.Response:
    proof = authenticate(request, "run.show")
    call = api.producer_show_run(
        token_id=proof.token_id, token_digest=proof.digest, run_id=request.match_info["run_id"]
    )
    return _body(SchemaId.RUN, (await act(request, "run.show", proof, call)).doc)


async def list_runs(request: web.Request) -> web.Response:
    proof = authenticate(request, "run.list")
    query = request.query
    unknown = sorted(set(query) - _LIST_PARAMS)
    if unknown:
        raise invalid("run.list", request, proof, unknown[0])
    for name in ("task", "after", "limit"):
        if len(query.getall(name, [])) > 1:
            raise invalid("run.list", request, proof, name)
    states = [s for item in query.getall("state", []) for s in item.split(",") if s]
    limit_text = query.get("limit", "100")
    if not re.fullmatch(r"[0-9]{1,7}", limit_text):
        raise invalid("run.list", request, proof, "limit")
    call = api.producer_list_runs(
        token_id=proof.token_id,
        token_digest=proof.digest,
        task=query.get("task"),
        states=states or None,
        limit=int(limit_text),
        after=query.get("after"),
    )
    return _body(SchemaId.RUN_PAGE, (await act(request, "run.list", proof, call)).doc)


async def cancel(request: web.Request) -> web.Response:
    proof = authenticate(request, "run.cancel")
    await _json_body(request, "run.cancel", proof, None)
    call = api.producer_cancel_run(
        token_id=proof.token_id, token_digest=proof.digest, run_id=request.match_info["run_id"]
    )
    return _body(SchemaId.RUN, (await act(request, "run.cancel", proof, call)).doc)


async def retry(request: web.Request) -> web.Response:
    proof = authenticate(request, "run.retry")
    await _json_body(request, "run.retry", proof, None)
    call = api.producer_retry_run(
        token_id=proof.token_id, token_digest=proof.digest, run_id=request.match_info["run_id"]
    )
    return _body(SchemaId.RUN, (await act(request, "run.retry", proof, call)).doc)


def add_routes(app: web.Application, openapi_document: bytes) -> None:
    async def openapi(request: web.Request) -> web.Response:
        return web.Response(body=openapi_document, content_type="application/json")

    app.router.add_post(RUNS, enqueue)
    app.router.add_get(RUNS, list_runs, allow_head=False)
    app.router.add_get(RUN, show, allow_head=False)
    app.router.add_post(RUN_CANCEL, cancel)
    app.router.add_post(RUN_RETRY, retry)
    from qinglong.service import producer_logs  # it imports this module

    producer_logs.add_route(app)
    app.router.add_get(OPENAPI, openapi, allow_head=False)


def new_state(config: ProducerConfig, audit: Emit) -> ProducerState:
    return ProducerState(
        config=config, gateway=Gateway(config.gateway_config(), IngressMetrics()), audit=audit
    )
