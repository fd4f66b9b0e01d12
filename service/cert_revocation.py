"""Revoked worker certificates, refused at every ingress process (SPEC §16.3).

The TLS handshake verifies a client certificate's chain and validity but knows
nothing of `admin cert revoke --serial S`. Each ingress process therefore holds
the set of revoked serials (canonical lowercase hex, the form
`ql_private.certificate_serial` stores) and refuses every request made over a
connection whose certificate is in it, before anything else is done with the
request (`revoked_certificate_middleware`):

* 401 `certificate_revoked`, and the connection is closed, so every further
  attempt costs the client a full handshake;
* one audit line per refused connection (the stream, outcome `denied`), and at
  most one `security_audit` row per serial per `store_every_s` in a process —
  a client retrying a revoked certificate in a loop cannot flood the table;
  every refusal is counted (`qinglong_ingress_auth_decisions_total`, reason
  `certificate_revoked`).

How a process learns a revocation (`RevocationListener`): one psycopg
connection of its own LISTENs on `ql_certificates` (ql.revoke_certificate
notifies at commit) and fetches the serials revoked after the last one it holds
(`ql.revoked_certificates`, a sequence number: revocations are never deleted)
on every notification and every `refresh_s` (2 s) anyway, so a notification
lost while the connection was down delays a refusal by at most that period. A
revocation is never undone, so the set only grows, and it is kept while the
database is unreachable. Until a process has read the set once after it
started (normally within milliseconds, before any worker gets through the
database's own credential check), it refuses nothing.

The same connection reads, once a minute, how many worker credentials and
issued certificates expire within 14 days (`ql.expiring_counts`): the gauges
`qinglong_worker_credentials_expiring` and `qinglong_worker_certificates_expiring`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg
from aiohttp import web
from aiohttp.typedefs import Handler
from cryptography import x509

from qinglong.db import api
from qinglong.service.audit import AuditRecord, Outcome
from qinglong.service.config import IngressConfig
from qinglong.service.credentials import parse_authorization
from qinglong.service.errors import ApiError
from qinglong.service.gateway import DbRefused, DbUnavailable, connection_kwargs
from qinglong.service.identity import peer_certificate
from qinglong.service.state import STATE, IngressState

log = logging.getLogger("qinglong.ingress.certificates")

CHANNEL = "ql_certificates"
REASON = "certificate_revoked"
# The audit action of a refusal: it happens before the request is routed to an
# endpoint's action.
ACTION = "certificate.admit"
PAGE = 10000
# /metrics (SPEC §16.3): what expires within 14 days, re-read once a minute.
EXPIRING_WINDOW_S = 14 * 86400
EXPIRING_EVERY_S = 60.0
_RECONNECT_MIN_S = 0.5
_RECONNECT_MAX_S = 5.0


def serial_hex(serial: int) -> str:
    """The canonical text of a serial number: lowercase hex, no leading zeros."""
    return format(serial, "x")


def serial_of_der(der: bytes) -> str | None:
    """The canonical serial of a DER certificate (None if it does not parse)."""
    try:
        return serial_hex(x509.load_der_x509_certificate(der).serial_number)
    except ValueError:
        return None


@dataclass
class RevokedCertificates:
    """The revoked serials a process knows, and the serials of the certificates
    it has seen (by the SHA-256 of their DER bytes, bounded like
    service.identity.PeerIdentities)."""

    store_every_s: float = 60.0
    max_peers: int = 16384
    clock: Callable[[], float] = time.monotonic
    loaded: bool = False
    last_seq: int = 0
    _serials: set[str] = field(default_factory=set)
    _peer_serials: OrderedDict[bytes, str | None] = field(default_factory=OrderedDict)
    _stored_at: dict[str, float] = field(default_factory=dict)
    # Worker credentials / issued certificates expiring within 14 days (/metrics).
    expiring_credentials: float = float("nan")
    expiring_certificates: float = float("nan")

    def add(self, serials: list[str], last_seq: int) -> None:
        self._serials.update(serials)
        self.last_seq = max(self.last_seq, last_seq)
        self.loaded = True

    def __len__(self) -> int:
        return len(self._serials)

    def revoked_serial(self, der: bytes) -> str | None:
        """The certificate's serial if it is revoked, else None."""
        if not self._serials:
            return None
        key = hashlib.sha256(der).digest()
        if key in self._peer_serials:
            serial = self._peer_serials[key]
        else:
            serial = serial_of_der(der)
            if len(self._peer_serials) >= self.max_peers:
                self._peer_serials.popitem(last=False)
            self._peer_serials[key] = serial
        return serial if serial in self._serials else None

    def should_store(self, serial: str) -> bool:
        """True at most once per `store_every_s` per serial: whether this refusal
        also gets a security_audit row."""
        now = self.clock()
        last = self._stored_at.get(serial)
        if last is not None and now - last < self.store_every_s:
            return False
        if len(self._stored_at) >= self.max_peers:
            self._stored_at.clear()
        self._stored_at[serial] = now
        return True


@dataclass
class RevocationListener:
    """Keeps a process's RevokedCertificates current (LISTEN + periodic fetch)."""

    config: IngressConfig
    revoked: RevokedCertificates
    refresh_s: float = 2.0
    expiring_every_s: float = EXPIRING_EVERY_S
    _task: asyncio.Task[None] | None = None
    _expiring_at: float = 0.0

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="qinglong-cert-revocations")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def _kwargs(self) -> dict[str, Any]:
        kwargs = connection_kwargs(self.config)
        kwargs.update(
            autocommit=True,
            prepare_threshold=None,
            application_name="qinglong-ingress-certificates",
        )
        return kwargs

    async def _run(self) -> None:
        delay = _RECONNECT_MIN_S
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                    self.config.dsn, **self._kwargs()
                ) as conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    delay = _RECONNECT_MIN_S
                    await self._serve(conn)
            except (psycopg.Error, OSError, TimeoutError) as exc:
                log.warning(
                    "certificate revocation listener lost; retrying",
                    extra={"event": "certificates.listener_lost", "error": type(exc).__name__},
                )
            await asyncio.sleep(delay)
            delay = min(delay * 2, _RECONNECT_MAX_S)

    async def _serve(self, conn: psycopg.AsyncConnection[Any]) -> None:
        while True:
            await self._fetch(conn)
            if time.monotonic() >= self._expiring_at:
                await self._count_expiring(conn)
            # Any notification means "something new": fetch at once; otherwise
            # fetch when the period ends.
            async for _notify in conn.notifies(timeout=self.refresh_s, stop_after=1):
                pass

    async def _count_expiring(self, conn: psycopg.AsyncConnection[Any]) -> None:
        counts = await api.expiring_counts(within_s=EXPIRING_WINDOW_S).run_async(conn)
        self.revoked.expiring_credentials = float(counts.credentials)
        self.revoked.expiring_certificates = float(counts.certificates)
        self._expiring_at = time.monotonic() + self.expiring_every_s

    async def _fetch(self, conn: psycopg.AsyncConnection[Any]) -> None:
        while True:
            page = await api.revoked_certificates(
                after_seq=self.revoked.last_seq, limit=PAGE
            ).run_async(conn)
            serials = page.serials
            before = len(self.revoked)
            self.revoked.add(serials, page.last_seq)
            if len(self.revoked) > before:
                log.info(
                    "revoked certificates loaded",
                    extra={"event": "certificates.revoked_loaded", "count": len(self.revoked)},
                )
            if len(serials) < PAGE:
                return


REVOKED: web.AppKey[RevokedCertificates] = web.AppKey(
    "qinglong_revoked_certificates", RevokedCertificates
)


async def revocation_context(app: web.Application) -> Any:
    """cleanup_ctx: the process's listener runs while the app does."""
    listener = RevocationListener(app[STATE].config, app[REVOKED])
    listener.start()
    yield
    await listener.close()


def install(app: web.Application) -> None:
    """Give an ingress app its revoked-certificate set and listener, and the
    expiry gauges of /metrics (NaN until first read)."""
    revoked = app[REVOKED] = RevokedCertificates()
    app.cleanup_ctx.append(revocation_context)
    metrics = app[STATE].metrics
    metrics.add_gauge(
        "qinglong_worker_credentials_expiring",
        "Worker credentials that expire within 14 days (not revoked, not rotated yet).",
        lambda: revoked.expiring_credentials,
    )
    metrics.add_gauge(
        "qinglong_worker_certificates_expiring",
        "Worker certificates issued here that expire within 14 days (not "
        "revoked, not renewed yet).",
        lambda: revoked.expiring_certificates,
    )


@web.middleware
async def revoked_certificate_middleware(
    request: web.Request, handler: Handler
) -> web.StreamResponse:
    revoked = request.app.get(REVOKED)
    der = peer_certificate(request) if revoked is not None and len(revoked) else None
    serial = None if der is None or revoked is None else revoked.revoked_serial(der)
    if serial is None or revoked is None:
        return await handler(request)
    raise await _refusal(request.app[STATE], revoked, serial, request)


async def _refusal(
    state: IngressState, revoked: RevokedCertificates, serial: str, request: web.Request
) -> ApiError:
    """Audit the refusal (line always, row rate-limited); the error to raise."""
    worker_id = state.peers.of(request)
    credential_id = parse_authorization(request.headers.get("Authorization")).credential_id
    state.audit.record(AuditRecord(ACTION, Outcome.DENIED, REASON, credential_id, worker_id))
    state.metrics.auth_decisions.inc(ACTION, Outcome.DENIED.value, REASON)
    if revoked.should_store(serial):
        try:
            await state.gateway.call(
                api.record_auth_denial(
                    credential_id=credential_id, worker_id=worker_id, action=ACTION, reason=REASON
                )
            )
        except (DbUnavailable, DbRefused) as exc:
            log.warning(
                "denial not stored",
                extra={"event": "audit.store_failed", "reason": getattr(exc, "reason", "")},
            )
    return ApiError(401, REASON, close_connection=True)
