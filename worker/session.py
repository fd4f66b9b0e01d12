"""Session calls to the ingress: open, heartbeat, close (SPEC §5).

A thin client over an injected ``post(path, body)`` (the HTTPS transport in
production). Every failure is mapped to one of four classes the runner acts on:

* :class:`SessionLost` (409) — the session is gone (replaced, expired, closed,
  unknown): open a new one;
* :class:`AuthRefused` (401/403, TLS client-certificate rejection, unusable local
  credential) — keep state, retry slowly, log loudly;
* :class:`RequestRefused` (400/413) — the ingress refuses our request as
  malformed (e.g. capabilities): a configuration error, retrying cannot help;
* :class:`IngressUnavailable` — network, timeout, 429/5xx, a response outside
  the contract: transient, back off.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from qinglong.worker.coordinator import SessionFence
from qinglong.worker.errors import CredentialError, TlsClientRejected, TransportError

OPEN_PATH = "/v1/sessions"
HEARTBEAT_PATH = "/v1/sessions/heartbeat"
CLOSE_PATH = "/v1/sessions/close"
SESSION_RESPONSE_LIMIT = 16 * 1024

__all__ = [
    "AuthRefused",
    "IngressUnavailable",
    "RequestRefused",
    "SessionClient",
    "SessionError",
    "SessionInfo",
    "SessionLost",
]


class HttpResponse(Protocol):
    @property
    def status(self) -> int: ...
    @property
    def body(self) -> bytes: ...
    @property
    def retry_after_ms(self) -> int | None: ...


PostFn = Callable[[str, Mapping[str, Any], int], HttpResponse]


class SessionError(Exception):
    def __init__(self, reason: str, retry_after_ms: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason  # low-cardinality, safe to log
        self.retry_after_ms = retry_after_ms


class SessionLost(SessionError):
    """409: this session can no longer be used."""


class AuthRefused(SessionError):
    """The ingress refused our identity or credential."""


class RequestRefused(SessionError):
    """400/413: the request itself is refused (configuration problem)."""


class IngressUnavailable(SessionError):
    """Transient: network, timeout, overload, or a response outside the contract."""


@dataclass(frozen=True)
class SessionInfo:
    worker_id: str
    session_id: str
    generation: int
    expires_at_ms: int
    capabilities_digest: str
    heartbeat_interval_ms: int

    def fence(self) -> SessionFence:
        return SessionFence(
            self.worker_id, self.session_id, self.generation, self.capabilities_digest
        )

    def log_fields(self) -> dict[str, Any]:
        return {"sessionId": self.session_id, "generation": self.generation}


def error_reason(body: bytes) -> str:
    """``reason`` of an error@v1 body (already low-cardinality by contract)."""
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return "unknown"
    reason = doc.get("reason") if isinstance(doc, dict) else None
    if isinstance(reason, str) and reason.isascii() and 0 < len(reason) <= 64:
        return reason
    return "unknown"


class SessionClient:
    def __init__(self, post: PostFn, worker_id: str) -> None:
        self._post = post
        self._worker_id = worker_id

    def open(self, capabilities: Mapping[str, Any]) -> SessionInfo:
        body = {
            "schema": "qinglong/session-open-request@v1",
            "workerId": self._worker_id,
            "capabilities": dict(capabilities),
        }
        info = self._call(OPEN_PATH, body, 201)
        if info.worker_id != self._worker_id:
            raise IngressUnavailable("session_foreign")
        return info

    def heartbeat(self, session_id: str, generation: int) -> SessionInfo:
        return self._fenced(HEARTBEAT_PATH, "qinglong/session-heartbeat-request@v1",
                            session_id, generation)  # fmt: skip

    def close(self, session_id: str, generation: int) -> SessionInfo:
        return self._fenced(CLOSE_PATH, "qinglong/session-close-request@v1",
                            session_id, generation)  # fmt: skip

    def _fenced(self, path: str, schema: str, session_id: str, generation: int) -> SessionInfo:
        body = {
            "schema": schema,
            "workerId": self._worker_id,
            "sessionId": session_id,
            "generation": generation,
        }
        info = self._call(path, body, 200)
        if (info.worker_id, info.session_id, info.generation) != (
            self._worker_id, session_id, generation,
        ):  # fmt: skip
            raise IngressUnavailable("session_foreign")
        return info

    def _call(self, path: str, body: Mapping[str, Any], success: int) -> SessionInfo:
        try:
            response = self._post(path, body, SESSION_RESPONSE_LIMIT)
        except (TlsClientRejected, CredentialError) as exc:
            raise AuthRefused(type(exc).__name__.lower()) from None
        except TransportError as exc:
            raise IngressUnavailable(getattr(exc, "reason", type(exc).__name__)) from None
        if response.status == success:
            return _parse_session(response.body)
        reason = error_reason(response.body)
        if response.status == 409:
            raise SessionLost(reason)
        if response.status in (401, 403):
            raise AuthRefused(f"http_{response.status}_{reason}")
        if response.status in (400, 413):
            raise RequestRefused(f"http_{response.status}_{reason}")
        raise IngressUnavailable(f"http_{response.status}", response.retry_after_ms)


def _parse_session(body: bytes) -> SessionInfo:
    from qinglong.schemas.contract import ContractError, SchemaId
    from qinglong.schemas.fastpath import load

    try:
        doc = load(SchemaId.SESSION, body)
    except ContractError as exc:
        raise IngressUnavailable(f"session_{exc.reason}") from None
    return SessionInfo(
        worker_id=doc["workerId"],
        session_id=doc["sessionId"],
        generation=doc["generation"],
        expires_at_ms=doc["expiresAtMs"],
        capabilities_digest=doc["capabilitiesDigest"],
        heartbeat_interval_ms=doc["heartbeatIntervalMs"],
    )
