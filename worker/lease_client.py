"""Lease lifecycle calls to the ingress: ACK, heartbeat, complete (SPEC §5, §7),
and the delivery of a started lease's secret values (SPEC §14.3).

A thin client over the same injected ``post(path, body, limit)`` the session
client uses (the one HTTPS transport in production), so lease calls share the
worker's single connection. Every answer is mapped to one of three outcomes the
lifecycle acts on:

* a :class:`LeaseAnswer` (200, schema-valid ``qinglong/lease@v1`` naming *our*
  offer and attempt);
* :class:`LeaseConflict` (409, or 400/413 — the same bytes can never succeed):
  this lease is no longer ours to drive; stop the offer, never re-run it;
* :class:`LeaseUnavailable` (network, timeout, 401/403, 429/5xx, a response
  outside the contract): transient, back off and retry the same call.

The fence of every call is the lease itself (its session, generation, offer id
and token as recorded in the inbox entry), never the runner's current session:
a lease stays bound to the session it was claimed on (docs/LIFECYCLE.md). Every
call also carries ``leaseVersion``, the version of the last lease the worker
received (SPEC §7): the caller passes it, and repeats a call whose answer was
lost with the same version (the server then answers the current lease and
changes nothing). 409 ``stale_lease_version`` is a :class:`LeaseConflict` like
any other.

``secrets`` (``POST /v1/leases/secrets``) carries the same lease fields; it does
not change the lease version, so its answer is :class:`SecretValues`, not a
lease. The values are held in memory only: :class:`SecretValues` never shows
them in its repr, and nothing here logs a response body.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from qinglong.worker.errors import (
    CredentialError,
    RequestTooLarge,
    TlsClientRejected,
    TransportError,
)
from qinglong.worker.session import PostFn, error_reason

ACK_PATH = "/v1/leases/ack"
HEARTBEAT_PATH = "/v1/leases/heartbeat"
COMPLETE_PATH = "/v1/leases/complete"
SECRETS_PATH = "/v1/leases/secrets"
LEASE_RESPONSE_LIMIT = 16 * 1024
# Values are 8 B - 16 KiB each (SPEC §14.1); a command names at most 64 of them.
SECRETS_RESPONSE_LIMIT = 1024 * 1024

__all__ = [
    "AckPhase",
    "LeaseAnswer",
    "LeaseClient",
    "LeaseConflict",
    "LeaseError",
    "LeaseRef",
    "LeaseUnavailable",
    "Outcome",
    "SecretValues",
]


class AckPhase(StrEnum):
    STARTING = "starting"
    RUNNING = "running"
    START_FAILED = "start_failed"


class Outcome(StrEnum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


class LeaseError(Exception):
    def __init__(self, reason: str, retry_after_ms: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason  # low-cardinality, safe to log
        self.retry_after_ms = retry_after_ms


class LeaseConflict(LeaseError):
    """The server refuses this lease for good (409 category, or a malformed request)."""


class LeaseUnavailable(LeaseError):
    """Transient: retry the same call later."""

    def __init__(
        self, reason: str, retry_after_ms: int | None = None, *, auth: bool = False
    ) -> None:
        super().__init__(reason, retry_after_ms)
        self.auth = auth  # needs an operator: log loudly


@dataclass(frozen=True)
class LeaseRef:
    """What fences a lease call; built from an inbox entry's rebuilt lease."""

    worker_id: str
    session_id: str
    generation: int
    offer_id: str
    attempt_id: str
    lease_token: str  # never logged (repr below)

    def __repr__(self) -> str:
        return f"LeaseRef(offer_id={self.offer_id!r}, generation={self.generation})"

    @classmethod
    def from_lease(cls, lease: Mapping[str, Any]) -> LeaseRef:
        return cls(
            worker_id=lease["workerId"],
            session_id=lease["sessionId"],
            generation=lease["sessionGeneration"],
            offer_id=lease["offerId"],
            attempt_id=lease["attemptId"],
            lease_token=lease["leaseToken"],
        )

    def body(self, kind: str, version: int, **extra: Any) -> dict[str, Any]:
        doc = {
            "schema": f"qinglong/lease-{kind}-request@v1",
            "workerId": self.worker_id,
            "sessionId": self.session_id,
            "generation": self.generation,
            "offerId": self.offer_id,
            "leaseToken": self.lease_token,
            "leaseVersion": version,
        }
        doc.update({k: v for k, v in extra.items() if v is not None})
        return doc


@dataclass(frozen=True)
class LeaseAnswer:
    lease: dict[str, Any]  # lease@v1 without `schema` and `cancelRequested`
    cancel_requested: bool

    @property
    def version(self) -> int:
        return int(self.lease["leaseVersion"])

    @property
    def state(self) -> str:
        return str(self.lease["state"])

    @property
    def ttl_ms(self) -> int:
        """The task's lease TTL as the server applied it on the last extension."""
        return int(self.lease["expiresAtMs"]) - int(self.lease["updatedAtMs"])


class SecretValues(Mapping[str, str]):
    """A started lease's secret values, ENV_NAME -> value (SPEC §14.3).

    In memory only; its repr names the variables, never a value."""

    __slots__ = ("_values",)

    def __init__(self, values: Mapping[str, str]) -> None:
        self._values = dict(values)

    def __getitem__(self, name: str) -> str:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"SecretValues(names={sorted(self._values)!r})"

    __str__ = __repr__


class LeaseClient:
    def __init__(self, post: PostFn) -> None:
        self._post = post

    def ack(
        self, ref: LeaseRef, version: int, phase: AckPhase, reason: str | None = None
    ) -> LeaseAnswer:
        body = ref.body("ack", version, phase=phase.value, reason=reason)
        return self._call(ACK_PATH, ref, body)

    def heartbeat(self, ref: LeaseRef, version: int) -> LeaseAnswer:
        return self._call(HEARTBEAT_PATH, ref, ref.body("heartbeat", version))

    def complete(
        self,
        ref: LeaseRef,
        version: int,
        outcome: Outcome,
        exit_code: int | None = None,
        reason: str | None = None,
        result: Mapping[str, Any] | None = None,
    ) -> LeaseAnswer:
        """``version``: the lease version last seen (every call). ``result``: SPEC §9.3
        ``{exitCode?, durationMs, outputTail, outputBytes}`` (the transport allows
        a complete request up to 16 KiB)."""
        body = ref.body("complete", version, outcome=outcome.value, exitCode=exit_code,
                        reason=reason,
                        result=None if result is None else dict(result))  # fmt: skip
        return self._call(COMPLETE_PATH, ref, body)

    def secrets(self, ref: LeaseRef, version: int, names: Collection[str]) -> SecretValues:
        """The values of the started lease's secrets (``names``: the ENV_NAMEs its
        revision pins). Does not change the lease version; an answer that does
        not carry exactly ``names`` is outside the contract (transient)."""
        body = ref.body("secrets", version)
        return _parse_secrets(self._exchange(SECRETS_PATH, body, SECRETS_RESPONSE_LIMIT), names)

    def _call(self, path: str, ref: LeaseRef, body: Mapping[str, Any]) -> LeaseAnswer:
        return _parse_lease(self._exchange(path, body, LEASE_RESPONSE_LIMIT), ref)

    def _exchange(self, path: str, body: Mapping[str, Any], limit: int) -> bytes:
        """The body of a 200 answer; every other outcome raised as a LeaseError."""
        try:
            response = self._post(path, body, limit)
        except (TlsClientRejected, CredentialError) as exc:
            raise LeaseUnavailable(type(exc).__name__.lower(), auth=True) from None
        except RequestTooLarge:
            # Our own request can never be sent: the same bytes never succeed.
            raise LeaseConflict("request_too_large") from None
        except TransportError as exc:
            raise LeaseUnavailable(getattr(exc, "reason", type(exc).__name__.lower())) from None
        if response.status == 200:
            return response.body
        reason = error_reason(response.body)
        if response.status == 409:
            raise LeaseConflict(reason)
        if response.status in (400, 413):
            # Our own request is refused as malformed: the same bytes never succeed.
            raise LeaseConflict(f"http_{response.status}_{reason}")
        if response.status in (401, 403):
            raise LeaseUnavailable(f"http_{response.status}_{reason}", auth=True)
        raise LeaseUnavailable(f"http_{response.status}", response.retry_after_ms)


def _parse_lease(body: bytes, ref: LeaseRef) -> LeaseAnswer:
    from qinglong.schemas.contract import ContractError, SchemaId, load

    try:
        doc = load(SchemaId.LEASE, body)
    except ContractError as exc:
        raise LeaseUnavailable(f"lease_{exc.reason}") from None
    if (doc["offerId"], doc["attemptId"], doc["workerId"]) != (
        ref.offer_id, ref.attempt_id, ref.worker_id,
    ):  # fmt: skip
        # An answer about another lease is a server bug; never act on it.
        raise LeaseUnavailable("lease_foreign")
    cancel = doc.pop("cancelRequested", False)
    doc.pop("schema", None)
    return LeaseAnswer(lease=doc, cancel_requested=bool(cancel))


def _parse_secrets(body: bytes, names: Collection[str]) -> SecretValues:
    """A schema-valid ``qinglong/lease-secrets@v1`` naming exactly ``names``; the
    reasons raised never quote the body."""
    from qinglong.schemas.contract import ContractError, SchemaId, load

    try:
        values = load(SchemaId.LEASE_SECRETS, body)["values"]
    except ContractError as exc:
        raise LeaseUnavailable(f"secrets_{exc.reason}") from None
    if set(values) != set(names):
        raise LeaseUnavailable("secrets_incomplete")
    return SecretValues(values)
