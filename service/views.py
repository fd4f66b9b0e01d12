"""Request handlers: limits -> strict JSON -> schema -> authenticate -> audit -> act -> audit.

Every handler follows the same pipeline (`_admit`), so no endpoint can skip a
step. The database call both verifies the credential and acts, in one round
trip; its result envelope is mapped to the wire here and every success body is
validated against its response schema before it is sent.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from aiohttp import web

from qinglong.db import answers, api
from qinglong.db.answers import (
    AnswerError,
    Conflict,
    Denied,
    Idle,
    LeaseOk,
    LogAppended,
    Offered,
    PulledBatch,
    SessionOk,
    WrappedSecrets,
)
from qinglong.db.api import Call
from qinglong.schemas import fastpath
from qinglong.schemas.contract import ContractError, SchemaId, default_contract, parse_json_strict
from qinglong.service.audit import AuditRecord, Outcome
from qinglong.service.capabilities import CapabilitiesRejected, canonicalize_capabilities
from qinglong.service.config import IngressConfig
from qinglong.service.credentials import (
    PresentedCredential,
    lease_token_digest,
    parse_authorization,
    public_denial_reason,
)
from qinglong.service.errors import ApiError, error_body
from qinglong.service.gateway import DbRefused, DbUnavailable
from qinglong.service.heartbeat_batch import HeartbeatItem
from qinglong.service.idle_answer import encode, idle_body
from qinglong.service.idle_view import IDLE_RESULT, CacheToken
from qinglong.service.secrets_crypto import SecretsError, open_delivery
from qinglong.service.state import PROJECTION_HOOK, STATE, IngressState

log = logging.getLogger("qinglong.ingress")

MAX_RESPONSE_BYTES = 128 * 1024
IDENTITY_MISMATCH = "identity_mismatch"


@dataclass(frozen=True)
class Endpoint:
    name: str  # metrics label
    action: str  # audit action (security_audit.action)
    request_schema: SchemaId
    response_schema: SchemaId
    success_status: int
    max_response_bytes: int = MAX_RESPONSE_BYTES

    def body_limit(self, config: IngressConfig) -> int:
        """A completion carries the run's result (SPEC §9.3), a log chunk up to 64
        KiB of output (SPEC §15.1): their own, larger limits."""
        if self.request_schema is SchemaId.LEASE_COMPLETE_REQUEST:
            return config.max_complete_body_bytes
        if self.request_schema in (SchemaId.LEASE_LOG_REQUEST, SchemaId.LEASE_BATCH_REQUEST):
            return LOG_BODY_BYTES
        return config.max_body_bytes


SESSION_OPEN = Endpoint(
    "sessions.open", "session.open", SchemaId.SESSION_OPEN_REQUEST, SchemaId.SESSION, 201
)
SESSION_HEARTBEAT = Endpoint(
    "sessions.heartbeat",
    "session.heartbeat",
    SchemaId.SESSION_HEARTBEAT_REQUEST,
    SchemaId.SESSION,
    200,
)
SESSION_CLOSE = Endpoint(
    "sessions.close", "session.close", SchemaId.SESSION_CLOSE_REQUEST, SchemaId.SESSION, 200
)
OFFER_PULL = Endpoint(
    "offers.pull", "offer.pull", SchemaId.OFFER_PULL_REQUEST, SchemaId.REMOTE_EXECUTION_OFFER, 200
)
# A batch of up to 16 offers (SPEC §18.1): the worker's hard limit on any answer.
OFFER_BATCH_RESPONSE_BYTES = 1000 * 1024
OFFER_BATCH_PULL = Endpoint(
    "offers.pull_batch",
    "offer.pull",
    SchemaId.OFFER_BATCH_PULL_REQUEST,
    SchemaId.REMOTE_EXECUTION_OFFER_BATCH,
    200,
    OFFER_BATCH_RESPONSE_BYTES,
)
# Audit actions match the ones the SQL functions record (ql_private.authenticate).
LEASE_ACK = Endpoint("leases.ack", "lease.ack", SchemaId.LEASE_ACK_REQUEST, SchemaId.LEASE, 200)
LEASE_HEARTBEAT = Endpoint(
    "leases.heartbeat", "lease.heartbeat", SchemaId.LEASE_HEARTBEAT_REQUEST, SchemaId.LEASE, 200
)
LEASE_COMPLETE = Endpoint(
    "leases.complete", "lease.complete", SchemaId.LEASE_COMPLETE_REQUEST, SchemaId.LEASE, 200
)
LEASE_LOG = Endpoint("leases.log", "lease.log", SchemaId.LEASE_LOG_REQUEST, SchemaId.LEASE_LOG, 200)
# A log chunk is at most 64 KiB in UTF-8 (SPEC §15.1; the database checks the
# bytes). JSON-escaped, a byte may take 6 (a control character as \u00XX): the
# body may be 6 times that, plus the lease fields.
LOG_CHUNK_BYTES = 65536
LOG_BODY_BYTES = 6 * LOG_CHUNK_BYTES + 4096
# Up to 32 lease calls of one session in one request (SPEC §18.3), each answered
# as its single endpoint would; the body as large as one log request's.
LEASE_BATCH = Endpoint(
    "leases.batch", "lease.batch", SchemaId.LEASE_BATCH_REQUEST, SchemaId.LEASE_BATCH, 200
)
# Up to 16 values of up to 16 KiB each (SPEC §14.1), JSON-escaped: its own bound,
# below the worker's hard limit on any answer (1 MiB).
SECRETS_RESPONSE_BYTES = 1000 * 1024
LEASE_SECRETS = Endpoint(
    "leases.secrets",
    "lease.secrets",
    SchemaId.LEASE_SECRETS_REQUEST,
    SchemaId.LEASE_SECRETS,
    200,
    SECRETS_RESPONSE_BYTES,
)


@dataclass(frozen=True)
class Admitted:
    doc: dict[str, Any]
    worker_id: str
    credential: PresentedCredential


# ------------------------------------------------------------------ pipeline


def _rate_limit(state: IngressState, endpoint: Endpoint, worker_id: str | None) -> None:
    limiter = state.lease_limiter if endpoint.action.startswith("lease.") else state.limiter
    decision = limiter.take(worker_id or "")
    if not decision.allowed:
        state.metrics.rate_limited.inc()
        raise ApiError(429, "too_many_requests", retry_after_s=decision.retry_after_s)


async def read_body(request: web.Request, limit: int, timeout_s: float) -> bytes:
    """Read at most `limit` bytes; 413 as soon as more are announced or arrive."""
    announced = request.content_length
    if announced is not None and announced > limit:
        raise ApiError(413, "body_too_large", close_connection=True)
    if request.content.is_eof():
        # The whole body came with the head (a worker's requests are small): take
        # it without arming a timer — most of an idle pull's body-reading cost.
        whole = request.content.read_nowait(limit + 1)
        if len(whole) > limit:
            raise ApiError(413, "body_too_large", close_connection=True)
        return whole
    data = bytearray()
    try:
        async with asyncio.timeout(timeout_s):
            while True:
                chunk = await request.content.read(limit + 1 - len(data))
                if not chunk:
                    break
                data += chunk
                if len(data) > limit:
                    raise ApiError(413, "body_too_large", close_connection=True)
    except TimeoutError:
        raise ApiError(408, "body_timeout", close_connection=True) from None
    return bytes(data)


def parse_request(data: bytes, schema_id: SchemaId) -> dict[str, Any]:
    try:
        doc = parse_json_strict(data)
        fastpath.validate(schema_id.value, doc)
    except ContractError as exc:
        raise ApiError(400, exc.reason) from None
    assert isinstance(doc, dict)  # every request schema is an object
    return doc


# The first line of a request let through to the database: the certificate's
# worker identity is verified and the body agrees; the database call checks the
# credential and acts (service/audit.py: the second line says how it went).
IDENTITY_VERIFIED = "identity_verified"
# The second line's reason for a completed call: the database's answer status.
DONE_STATUSES = frozenset({"ok", "offered", "idle", "idempotent", "conflict", "batch"})


class Envelope(Protocol):
    """A worker-facing answer (`qinglong.db.answers`): every outcome has a status."""

    @property
    def status(self) -> str: ...


E = TypeVar("E", bound=Envelope)


def _audit_line(
    state: IngressState,
    endpoint: Endpoint,
    outcome: Outcome,
    reason: str,
    credential_id: str | None,
    worker_id: str | None,
) -> None:
    state.audit.record(AuditRecord(endpoint.action, outcome, reason, credential_id, worker_id))


def _audit(
    state: IngressState,
    endpoint: Endpoint,
    outcome: Outcome,
    reason: str,
    credential_id: str | None,
    worker_id: str | None,
) -> None:
    """An authentication decision: its audit line and its count."""
    _audit_line(state, endpoint, outcome, reason, credential_id, worker_id)
    state.metrics.auth_decisions.inc(endpoint.action, outcome.value, reason)


async def _deny(
    state: IngressState,
    endpoint: Endpoint,
    status: int,
    reason: str,
    credential_id: str | None,
    worker_id: str | None,
    detail_key: str | None = None,
) -> ApiError:
    """An ingress-decided denial: audited, then stored in security_audit (best
    effort — the refusal never depends on the database), then raised.
    `worker_id` is the certificate's, never the body's."""
    _audit(state, endpoint, Outcome.DENIED, reason, credential_id, worker_id)
    try:
        await state.gateway.call(
            api.record_auth_denial(
                credential_id=credential_id,
                worker_id=worker_id,
                action=endpoint.action,
                reason=reason,
            )
        )
    except (DbUnavailable, DbRefused) as exc:
        log.warning(
            "denial not stored",
            extra={"event": "audit.store_failed", "reason": getattr(exc, "reason", "")},
        )
    return ApiError(status, reason, detail_key=detail_key)


async def _admit(request: web.Request, endpoint: Endpoint) -> tuple[IngressState, Admitted]:
    state = request.app[STATE]
    cert_worker = state.peers.of(request)
    _rate_limit(state, endpoint, cert_worker)
    state.idle_view.note_request()
    data = await read_body(request, endpoint.body_limit(state.config), state.config.body_timeout_s)
    doc = parse_request(data, endpoint.request_schema)
    body_worker = doc["workerId"]
    presented = parse_authorization(request.headers.get("Authorization"))
    # A denial names the certificate's worker (or none): the body is the
    # requester's claim, and naming its worker would let anyone write denials
    # against another worker's id.
    if presented.problem is not None or presented.credential is None:
        reason = presented.problem.value if presented.problem else "malformed_credential"
        raise await _deny(state, endpoint, 401, reason, presented.credential_id, cert_worker)
    if cert_worker is None or cert_worker != body_worker:
        # The body is never trusted on its own: the certificate names the worker.
        raise await _deny(
            state, endpoint, 403, IDENTITY_MISMATCH, presented.credential_id, cert_worker
        )
    return state, Admitted(doc, cert_worker, presented.credential)


async def _act(state: IngressState, endpoint: Endpoint, admitted: Admitted, call: Call[E]) -> E:
    """Audit, call the database, audit what it did. Denials become errors."""
    return await _act_on(state, endpoint, admitted, lambda: state.gateway.call(call))


async def _act_on(
    state: IngressState,
    endpoint: Endpoint,
    admitted: Admitted,
    call: Callable[[], Awaitable[E]],
    token: CacheToken | None = None,
) -> E:
    """`_act` for any one database call. An allowed answer also tells the idle
    view the credential is good (taken with `token`, before the call started).

    The `allowed` line is written (and flushed) before the call, its outcome
    after it (service/audit.py), so no action can commit unrecorded."""
    credential_id, worker_id = admitted.credential.credential_id, admitted.worker_id
    if token is None:
        token = state.idle_view.cache_token()
    _audit_line(state, endpoint, Outcome.ALLOWED, IDENTITY_VERIFIED, credential_id, worker_id)
    try:
        result = await call()
    except DbUnavailable as exc:
        _audit(state, endpoint, Outcome.UNDECIDED, exc.reason, credential_id, worker_id)
        raise ApiError(
            503, exc.reason, retry_after_s=state.config.unavailable_retry_after_s
        ) from None
    except DbRefused as exc:
        if exc.http_status == 403:
            # An authorization the database refused after the credential passed
            # (QL016 label_not_granted, SPEC §13.2): it rolled back, so the
            # denial is stored like the ingress's own, naming the label key.
            raise await _deny(
                state, endpoint, 403, exc.reason, credential_id, worker_id, exc.detail
            ) from None
        # Fence errors (QL010-QL014) are raised after the credential check passed.
        _audit_line(state, endpoint, Outcome.FAILED, exc.reason, credential_id, worker_id)
        decision = Outcome.ALLOWED if exc.http_status == 409 else Outcome.UNDECIDED
        state.metrics.auth_decisions.inc(endpoint.action, decision.value, exc.reason)
        raise ApiError(exc.http_status, exc.reason) from None
    except asyncio.CancelledError:  # the client went away: the call may have committed
        _audit_line(state, endpoint, Outcome.UNDECIDED, "cancelled", credential_id, worker_id)
        raise
    except AnswerError as exc:
        _audit_line(state, endpoint, Outcome.FAILED, "invalid_projection", credential_id, worker_id)
        raise _invalid_projection(state, endpoint, exc.detail) from None
    if isinstance(result, Denied):
        status = 403 if result.http_status == 403 else 401
        _audit(state, endpoint, Outcome.DENIED, result.reason, credential_id, worker_id)
        raise ApiError(status, public_denial_reason(result.reason))
    done = result.status if result.status in DONE_STATUSES else "other"
    _audit_line(state, endpoint, Outcome.DONE, done, credential_id, worker_id)
    state.metrics.auth_decisions.inc(endpoint.action, Outcome.ALLOWED.value, "authenticated")
    state.idle_view.remember_credential(token, admitted.credential, worker_id)
    return result


# ------------------------------------------------------------------ responses


def _invalid_projection(state: IngressState, endpoint: Endpoint, detail: str) -> ApiError:
    state.metrics.invalid_projections.inc()
    # `detail` is a schema path + keyword (ContractError never echoes values).
    log.error(
        "database projection failed its schema",
        extra={"event": "projection.invalid", "route": endpoint.name, "detail": detail},
    )
    return ApiError(503, "invalid_projection", retry_after_s=state.config.unavailable_retry_after_s)


def respond(
    request: web.Request, state: IngressState, endpoint: Endpoint, doc: dict[str, Any]
) -> web.Response:
    hook = request.app.get(PROJECTION_HOOK)
    if hook is not None:
        doc = hook(endpoint.name, doc)
    try:
        # Proven valid by schemas.fastpath, else jsonschema decides (and says why).
        fastpath.validate(endpoint.response_schema.value, doc)
    except ContractError as exc:
        raise _invalid_projection(state, endpoint, exc.detail) from None
    body = encode(doc)
    if len(body) > endpoint.max_response_bytes:
        raise _invalid_projection(
            state, endpoint, f"response over {endpoint.max_response_bytes} bytes"
        )
    return web.Response(status=endpoint.success_status, body=body, content_type="application/json")


def _with_schema(schema_id: SchemaId, fields: dict[str, Any], **first: Any) -> dict[str, Any]:
    """`schema` first (then any fixed leading fields), then the projection."""
    out: dict[str, Any] = {"schema": schema_id.value, **first}
    out.update({k: v for k, v in fields.items() if k not in out})
    return out


def _session_body(
    state: IngressState, endpoint: Endpoint, result: answers.SessionAnswer
) -> dict[str, Any]:
    if not isinstance(result, SessionOk):
        raise _invalid_projection(state, endpoint, f"unexpected status {result.status!r}")
    return _with_schema(SchemaId.SESSION, result.session)


# ------------------------------------------------------------------ handlers


async def open_session(request: web.Request) -> web.Response:
    state, admitted = await _admit(request, SESSION_OPEN)
    try:
        caps = canonicalize_capabilities(admitted.doc["capabilities"])
    except CapabilitiesRejected as exc:
        raise ApiError(400, exc.reason) from None
    cred = admitted.credential
    token = state.idle_view.cache_token()
    result = await _act(
        state,
        SESSION_OPEN,
        admitted,
        api.open_session(
            credential_id=cred.credential_id,
            secret_digest=cred.secret_digest,
            worker_id=admitted.worker_id,
            capabilities_canonical=caps.canonical,
        ),
    )
    body = _session_body(state, SESSION_OPEN, result)
    response = respond(request, state, SESSION_OPEN, body)
    state.idle_view.remember_session(token, body)
    return response


async def heartbeat_session(request: web.Request) -> web.Response:
    """Batched with other heartbeats of this replica when it is busy
    (service.heartbeat_batch); the answer is the single call's either way."""
    state, admitted = await _admit(request, SESSION_HEARTBEAT)
    cred, doc = admitted.credential, admitted.doc
    item = HeartbeatItem(
        cred.credential_id,
        cred.secret_digest,
        admitted.worker_id,
        doc["sessionId"],
        doc["generation"],
    )
    token = state.idle_view.cache_token()
    result = await _act_on(
        state, SESSION_HEARTBEAT, admitted, lambda: state.heartbeats.heartbeat(item), token
    )
    body = _session_body(state, SESSION_HEARTBEAT, result)
    response = respond(request, state, SESSION_HEARTBEAT, body)
    if not (isinstance(result, SessionOk) and result.draining):
        # A draining session (operator drain) takes no new offer: its pulls must
        # meet the database (409 session_draining), never the view's idle answer.
        state.idle_view.remember_session(token, body)
    return response


async def close_session(request: web.Request) -> web.Response:
    state, admitted = await _admit(request, SESSION_CLOSE)
    cred, doc = admitted.credential, admitted.doc
    result = await _act(
        state,
        SESSION_CLOSE,
        admitted,
        api.close_session(
            credential_id=cred.credential_id,
            secret_digest=cred.secret_digest,
            worker_id=admitted.worker_id,
            session_id=doc["sessionId"],
            generation=doc["generation"],
        ),
    )
    return respond(request, state, SESSION_CLOSE, _session_body(state, SESSION_CLOSE, result))


async def pull_offer(request: web.Request) -> web.Response:
    state, admitted = await _admit(request, OFFER_PULL)
    cred, doc = admitted.credential, admitted.doc
    if await state.idle_view.try_idle(
        cred, admitted.worker_id, doc["sessionId"], doc["generation"]
    ):
        # Answered from the replica's idle view (service/idle_view.py): the
        # credential and session were confirmed by the database and nothing
        # that could change the answer was committed before this pull arrived.
        _audit(
            state,
            OFFER_PULL,
            Outcome.ALLOWED,
            "authenticated",
            cred.credential_id,
            admitted.worker_id,
        )
        return _view_idle_answer(request, state)
    try:
        result = await _act(
            state,
            OFFER_PULL,
            admitted,
            api.pull_offer(
                credential_id=cred.credential_id,
                secret_digest=cred.secret_digest,
                worker_id=admitted.worker_id,
                session_id=doc["sessionId"],
                generation=doc["generation"],
                offer_id=doc["offerId"],
                token_digest=lease_token_digest(doc["leaseToken"]),
            ),
        )
    except ApiError as exc:
        state.metrics.pulls.inc(
            "denied" if exc.status in (401, 403) else "conflict" if exc.status == 409 else "error"
        )
        raise
    return respond(request, state, OFFER_PULL, _pull_body(state, result))


def _view_idle_answer(request: web.Request, state: IngressState) -> web.Response:
    """The idle view's answer: the same bytes `respond` would send for the
    database's empty-queue envelope, checked and encoded once per retry value."""
    if request.app.get(PROJECTION_HOOK) is not None:  # a test seam sees every document
        return respond(
            request, state, OFFER_PULL, _pull_body(state, Idle(copy.deepcopy(IDLE_RESULT)))
        )
    state.metrics.pulls.inc("idle")
    try:
        body = state.idle_answers.body(state.idle_retry_after_ms())
    except ContractError as exc:
        raise _invalid_projection(state, OFFER_PULL, exc.detail) from None
    return web.Response(
        status=OFFER_PULL.success_status, body=body, content_type="application/json"
    )


def _pull_body(state: IngressState, result: answers.PullAnswer) -> dict[str, Any]:
    status = result.status
    state.metrics.pulls.inc(
        status if status in ("offered", "idempotent", "idle", "conflict") else "invalid"
    )
    if isinstance(result, Offered):
        return _with_schema(SchemaId.REMOTE_EXECUTION_OFFER, result.offer, status="offered")
    if isinstance(result, Idle):
        return idle_body(result.doc, state.idle_retry_after_ms())
    if isinstance(result, Conflict):
        raise ApiError(409, result.category)
    raise _invalid_projection(state, OFFER_PULL, f"unexpected status {status!r}")


async def pull_offer_batch(request: web.Request) -> web.Response:
    """A batched pull (SPEC §18.1): one database call claims or recovers each
    (offerId, leaseToken) pair by the single pull's rules (ql.pull_offers)."""
    state, admitted = await _admit(request, OFFER_BATCH_PULL)
    cred, doc = admitted.credential, admitted.doc
    pairs = doc["offers"]
    offer_ids = [pair["offerId"] for pair in pairs]
    if len(set(offer_ids)) != len(offer_ids):
        raise ApiError(400, "duplicate_offer_id")
    try:
        result = await _act(
            state,
            OFFER_BATCH_PULL,
            admitted,
            api.pull_offers(
                credential_id=cred.credential_id,
                secret_digest=cred.secret_digest,
                worker_id=admitted.worker_id,
                session_id=doc["sessionId"],
                generation=doc["generation"],
                offer_ids=offer_ids,
                token_digests=[lease_token_digest(pair["leaseToken"]) for pair in pairs],
            ),
        )
    except ApiError as exc:
        state.metrics.pulls.inc(
            "denied" if exc.status in (401, 403) else "conflict" if exc.status == 409 else "error"
        )
        raise
    return respond(request, state, OFFER_BATCH_PULL, _batch_body(state, result))


def _batch_body(state: IngressState, result: answers.PullBatchAnswer) -> dict[str, Any]:
    if not isinstance(result, PulledBatch):
        raise _invalid_projection(state, OFFER_BATCH_PULL, f"unexpected status {result.status!r}")
    offers, conflicts, idle, recovered = (
        result.offers,
        result.conflicts,
        result.idle,
        result.recovered,
    )
    for index in range(len(offers)):  # a replay is `idempotent`, as for a single pull
        state.metrics.pulls.inc("idempotent" if index < recovered else "offered")
    for _ in conflicts:
        state.metrics.pulls.inc("conflict")
    body: dict[str, Any] = {
        "schema": SchemaId.REMOTE_EXECUTION_OFFER_BATCH.value,
        "offers": [
            _with_schema(SchemaId.REMOTE_EXECUTION_OFFER, offer, status="offered")
            for offer in offers
        ],
        "idle": None,
    }
    if idle is not None:
        state.metrics.pulls.inc("idle")
        body["idle"] = {
            "reason": idle.get("reason"),
            "stats": idle.get("stats"),
            "truncated": idle.get("truncated"),
            "retryAfterMs": state.idle_retry_after_ms(),
        }
    if conflicts:
        body["conflicts"] = conflicts
    return body


# ------------------------------------------------------------------ leases (SPEC §7)

# Only the heartbeat answer carries the cancel flag (SPEC §5): that is the one
# channel through which a started worker learns of a cancellation.
CANCEL_REQUESTED = "cancelRequested"


async def ack_lease(request: web.Request) -> web.Response:
    return await _lease_call(request, LEASE_ACK, _ack_call)


async def heartbeat_lease(request: web.Request) -> web.Response:
    return await _lease_call(request, LEASE_HEARTBEAT, _heartbeat_call)


async def complete_lease(request: web.Request) -> web.Response:
    return await _lease_call(request, LEASE_COMPLETE, _complete_call)


LeaseStep = tuple[str, Call[answers.LeaseAnswer]]  # (transition, its call)


@dataclass(frozen=True)
class LeaseFence:
    """What every lease call proves: credential, worker, session, offer, token, and
    the lease version the worker last saw (SPEC §7)."""

    credential_id: str
    secret_digest: bytes = field(repr=False)  # never in a log line or traceback
    worker_id: str
    session_id: str
    generation: int
    offer_id: str
    token_digest: bytes = field(repr=False)
    lease_version: int

    @classmethod
    def of(cls, admitted: Admitted) -> LeaseFence:
        """The fence an admitted lease request (or batch item) states."""
        cred, doc = admitted.credential, admitted.doc
        return cls(
            cred.credential_id,
            cred.secret_digest,
            admitted.worker_id,
            doc["sessionId"],
            doc["generation"],
            doc["offerId"],
            lease_token_digest(doc["leaseToken"]),
            doc["leaseVersion"],
        )


def _ack_call(fence: LeaseFence, doc: dict[str, Any]) -> LeaseStep:
    return doc["phase"], api.ack_lease(**vars(fence), phase=doc["phase"], reason=doc.get("reason"))


def _heartbeat_call(fence: LeaseFence, doc: dict[str, Any]) -> LeaseStep:
    return "heartbeat", api.heartbeat_lease(**vars(fence))


def _complete_call(fence: LeaseFence, doc: dict[str, Any]) -> LeaseStep:
    return doc["outcome"], api.complete_lease(
        **vars(fence),
        outcome=doc["outcome"],
        exit_code=doc.get("exitCode"),
        reason=doc.get("reason"),
        result=doc.get("result"),
    )


LeaseCall = Callable[[LeaseFence, dict[str, Any]], LeaseStep]


async def _lease_call(request: web.Request, endpoint: Endpoint, build: LeaseCall) -> web.Response:
    state, admitted = await _admit(request, endpoint)
    doc = admitted.doc
    fence = LeaseFence.of(admitted)
    transition, call = build(fence, doc)
    try:
        result = await _act(state, endpoint, admitted, call)
        response = respond(request, state, endpoint, _lease_body(state, endpoint, result))
    except ApiError as exc:
        state.metrics.lease_transitions.inc(endpoint.name, transition, _lease_outcome(exc))
        raise
    state.metrics.lease_transitions.inc(endpoint.name, transition, result.status)
    return response


# ------------------------------------------------------------ batched lease calls (SPEC §18.3)

BATCH_SESSION_MISMATCH = "batch_session_mismatch"


async def lease_batch(request: web.Request) -> web.Response:
    """Up to 32 ACK / heartbeat / complete / log calls of one session: each item is
    its single endpoint's exact body, run through the same database call, audit
    and answer mapping, and answered {status, body} as that endpoint would (an
    item's failure never affects another). The batch itself is admitted once
    (rate limit, strict schema, credential form, certificate identity); the
    secret is checked by the items' database calls, and a refused credential
    (401/403) refuses the whole batch at its first item: one denial, one audit
    row, never one per item (items before it, if the credential was revoked
    meanwhile, were applied and replay idempotently)."""
    state, admitted = await _admit(request, LEASE_BATCH)
    doc = admitted.doc
    fence = (doc["workerId"], doc["sessionId"], doc["generation"])
    if any((i["workerId"], i["sessionId"], i["generation"]) != fence for i in doc["items"]):
        raise ApiError(400, BATCH_SESSION_MISMATCH)
    results = [
        await _lease_item(state, Admitted(item, admitted.worker_id, admitted.credential))
        for item in doc["items"]
    ]
    return respond(
        request, state, LEASE_BATCH, {"schema": SchemaId.LEASE_BATCH.value, "results": results}
    )


async def _lease_item(state: IngressState, item: Admitted) -> dict[str, Any]:
    schema = item.doc["schema"]
    endpoint = next(
        e
        for e in (LEASE_ACK, LEASE_HEARTBEAT, LEASE_COMPLETE, LEASE_LOG)
        if e.request_schema.value == schema
    )
    doc = item.doc
    fence = LeaseFence.of(item)
    try:
        if endpoint is LEASE_LOG:
            transition = "log"
            logged = await _act(
                state,
                endpoint,
                item,
                api.append_log(**vars(fence), offset=doc["offset"], chunk=doc["chunk"]),
            )
            status, body = logged.status, _log_body(state, logged)
        else:
            build = {
                LEASE_ACK: _ack_call,
                LEASE_HEARTBEAT: _heartbeat_call,
                LEASE_COMPLETE: _complete_call,
            }[endpoint]
            transition, call = build(fence, doc)
            result = await _act(state, endpoint, item, call)
            status, body = result.status, _lease_body(state, endpoint, result)
        try:
            fastpath.validate(endpoint.response_schema.value, body)
        except ContractError as exc:
            raise _invalid_projection(state, endpoint, exc.detail) from None
    except ApiError as exc:
        state.metrics.lease_transitions.inc(endpoint.name, transition, _lease_outcome(exc))
        if exc.status in (401, 403):
            raise  # the credential: the whole batch is refused (lease_batch)
        return {
            "status": exc.status,
            "body": json.loads(error_body(exc.status, exc.reason, exc.detail_key, exc.offset)),
        }
    state.metrics.lease_transitions.inc(endpoint.name, transition, status)
    return {"status": endpoint.success_status, "body": body}


def _lease_outcome(exc: ApiError) -> str:
    if exc.status in (401, 403):
        return "denied"
    if exc.status == 409:
        return "illegal_transition" if exc.reason == "illegal_transition" else "conflict"
    if exc.reason == "invalid_projection":
        return "invalid_projection"
    return "unavailable" if exc.status >= 500 else "rejected"


def _lease_body(
    state: IngressState, endpoint: Endpoint, result: answers.LeaseAnswer
) -> dict[str, Any]:
    if isinstance(result, Conflict):
        raise ApiError(409, result.category)
    if not isinstance(result, LeaseOk):
        raise _invalid_projection(state, endpoint, f"unexpected status {result.status!r}")
    lease = result.lease
    if endpoint is LEASE_HEARTBEAT:
        if not isinstance(lease.get(CANCEL_REQUESTED), bool):
            raise _invalid_projection(state, endpoint, "$.cancelRequested: required")
    else:
        lease = {k: v for k, v in lease.items() if k != CANCEL_REQUESTED}
    return _with_schema(SchemaId.LEASE, _in_schema_order(SchemaId.LEASE, lease))


def _in_schema_order(schema_id: SchemaId, doc: dict[str, Any]) -> dict[str, Any]:
    """jsonb hands keys back sorted by length; answer in the schema's documented
    order instead (unknown keys stay, last, so validation still refuses them)."""
    order = list(default_contract().schema(schema_id)["properties"])
    known = {k: doc[k] for k in order if k in doc}
    return known | {k: v for k, v in doc.items() if k not in known}


# ------------------------------------------------------------------ secrets (SPEC §14.3)

SECRETS_UNAVAILABLE = "secrets_unavailable"


async def lease_secrets(request: web.Request) -> web.Response:
    """The secret values of a started lease: the database answers the wrapped data
    key and ciphertexts (fenced like a heartbeat, audited by name); they are
    decrypted here, in memory, with the replica's KEK (`kekFile`). No value is
    logged, audited or put in an error. A replica without a KEK, or whose KEK
    does not open what the database holds, answers 503 `secrets_unavailable`."""
    state, admitted = await _admit(request, LEASE_SECRETS)
    cred = admitted.credential
    if state.kek is None:
        # The caller is authenticated first (a denial stays a 401/403), then told.
        await _act(
            state,
            LEASE_SECRETS,
            admitted,
            api.authenticate_worker(
                credential_id=cred.credential_id,
                secret_digest=cred.secret_digest,
                worker_id=admitted.worker_id,
                action=LEASE_SECRETS.action,
            ),
        )
        _audit_line(
            state,
            LEASE_SECRETS,
            Outcome.FAILED,
            SECRETS_UNAVAILABLE,
            cred.credential_id,
            admitted.worker_id,
        )
        raise _secrets_unavailable(state, "kek_not_configured", "no kekFile configured")
    fence = LeaseFence.of(admitted)
    result = await _act(state, LEASE_SECRETS, admitted, api.lease_secrets(**vars(fence)))
    if isinstance(result, Conflict):
        raise ApiError(409, result.category)
    if not isinstance(result, WrappedSecrets):
        raise _invalid_projection(state, LEASE_SECRETS, f"unexpected status {result.status!r}")
    try:
        delivered = open_delivery(state.kek, result.doc)
    except (SecretsError, KeyError, TypeError, ValueError) as exc:
        reason = exc.reason.value if isinstance(exc, SecretsError) else "secret_integrity"
        detail = exc.detail if isinstance(exc, SecretsError) else type(exc).__name__
        raise _secrets_unavailable(state, reason, detail) from None
    return respond(
        request,
        state,
        LEASE_SECRETS,
        {"schema": SchemaId.LEASE_SECRETS.value, "values": delivered.values},
    )


def _secrets_unavailable(state: IngressState, reason: str, detail: str) -> ApiError:
    # `detail` names KEK ids, key ids and secret names at most: never a value.
    log.error(
        "secrets not delivered",
        extra={"event": "secrets.unavailable", "reason": reason, "detail": detail},
    )
    return ApiError(503, SECRETS_UNAVAILABLE, retry_after_s=state.config.unavailable_retry_after_s)


# ------------------------------------------------------------------ live logs (SPEC §15.1)

LOG_OFFSET = "log_offset"


async def lease_log(request: web.Request) -> web.Response:
    """Append a chunk of a started lease's output to its attempt's live log: the
    database appends only at its stored length (ql.append_log). 200 {storedBytes,
    truncated} when appended, replayed or dropped past the cap; 409 log_offset
    with the stored length as `offset` (the worker resumes there); 409 with the
    lease's category when the lease no longer holds. The lease version is a
    fence, never bumped."""
    state, admitted = await _admit(request, LEASE_LOG)
    doc = admitted.doc
    fence = LeaseFence.of(admitted)
    call = api.append_log(**vars(fence), offset=doc["offset"], chunk=doc["chunk"])
    try:
        result = await _act(state, LEASE_LOG, admitted, call)
        response = respond(request, state, LEASE_LOG, _log_body(state, result))
    except ApiError as exc:
        state.metrics.lease_transitions.inc(LEASE_LOG.name, "log", _lease_outcome(exc))
        raise
    state.metrics.lease_transitions.inc(LEASE_LOG.name, "log", result.status)
    return response


def _log_body(state: IngressState, result: answers.LogAnswer) -> dict[str, Any]:
    if isinstance(result, Conflict):
        stored = result.stored_bytes
        if result.category == LOG_OFFSET and stored is not None:
            raise ApiError(409, LOG_OFFSET, offset=stored)
        raise ApiError(409, result.category)
    if not isinstance(result, LogAppended):
        raise _invalid_projection(state, LEASE_LOG, f"unexpected status {result.status!r}")
    return {
        "schema": SchemaId.LEASE_LOG.value,
        "storedBytes": result.stored_bytes,
        "truncated": result.truncated,
    }
