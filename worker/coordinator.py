"""Claim coordinator: one pull at a time with a stable, durable intent (SPEC §6.1-6.3).

``ClaimCoordinator.step(fence)`` performs at most one pull and returns what
happened plus when the caller may call again; it owns no timer (ADR-0110 §2).

* Before the first byte of a claim, a fresh offer id + 32-byte token (with the
  session fence, capabilities digest, attempt count, next-attempt time) is
  written to ``pending-claim.json``. Every retry reuses exactly that intent, so
  a claim whose response was lost is *recovered* by the server, not duplicated.
* ``idle`` clears the intent. ``offered`` is validated, written to the inbox, and
  only then the intent is cleared. ``409`` moves it aside with the category.
* Network errors, timeouts, protocol violations, invalid JSON and auth failures
  (401/403, TLS client-certificate rejection) keep the intent and back off with
  full jitter; auth failures back off slowly and log loudly.
* After 16 attempts the intent is moved aside; the next step starts a fresh one.
* Cancellation (``BaseException``: KeyboardInterrupt, ``asyncio.CancelledError``)
  propagates untouched — never recorded as a delivery failure; the intent stays.

No network or schema code is imported here: the pull is an injected callable,
and offer validation is imported on first use (R-LAY-1).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import random
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from qinglong.worker.backoff import DEFAULT_POLICY, BackoffPolicy
from qinglong.worker.errors import CredentialError, TlsClientRejected, TransportError
from qinglong.worker.fsio import uuid4_text
from qinglong.worker.journal import MAX_BATCH, InboxEntry, Journal, JournalError, PendingClaim
from qinglong.worker.owner_lock import Clock, wall_clock_ms

LOGGER = "qinglong.worker.claim"
WARNING, ERROR = 30, 40  # stdlib logging's levels, and worker.eventlog.Level's

PULL_SCHEMA = "qinglong/offer-pull-request@v1"
BATCH_PULL_SCHEMA = "qinglong/offer-batch-pull-request@v1"  # SPEC §18.1
AUTH_MIN_DELAY_MS = 30_000  # auth failures need an operator, not a tight loop
_CATEGORY = re.compile(r"^[a-z0-9_]{1,48}$")

__all__ = [
    "ClaimCoordinator",
    "ClaimOutcome",
    "PullResponse",
    "SessionFence",
    "StepResult",
    "new_lease_token",
]


class PullResponse(Protocol):
    """What the coordinator needs from a transport response."""

    @property
    def status(self) -> int: ...
    @property
    def body(self) -> bytes: ...
    @property
    def retry_after_ms(self) -> int | None: ...


PullFn = Callable[[Mapping[str, Any]], PullResponse]
# Receives (level, message) of the coordinator's diagnostics; without one they go to
# stdlib ``logging`` (imported only then: an idle worker never loads it).
LogSink = Callable[[int, str], None]
# Called with a named point of a claim (``before_send``, ``after_pull_response``,
# ``after_offer_response``, ``after_inbox_write``, ``after_clear_pending``); the runner
# uses it for drain checks and fault injection (worker/faults.py).
Checkpoint = Callable[[str], None]


@dataclass(frozen=True)
class SessionFence:
    worker_id: str
    session_id: str
    generation: int
    capabilities_digest: str


class ClaimOutcome(StrEnum):
    NOT_DUE = "not_due"  # the intent's next attempt time has not come
    INBOX_FULL = "inbox_full"  # no pull: the journal cannot admit another offer
    IDLE = "idle"
    ACCEPTED = "accepted"  # offer durably in the inbox, intent cleared
    CONFLICT = "conflict"  # 409: intent moved aside with the category
    REJECTED = "rejected"  # offer failed validation / journal refused it: moved aside
    RETRY = "retry"  # transient failure: intent kept
    AUTH_FAILED = "auth_failed"  # 401/403/TLS client rejection: intent kept, slow retry
    EXHAUSTED = "exhausted"  # 16 attempts: intent moved aside


@dataclass(frozen=True)
class StepResult:
    outcome: ClaimOutcome
    offer_id: str | None
    next_attempt_at_ms: int | None  # when to call step() again (None: any time)
    reason: str | None = None  # low-cardinality detail
    # ACCEPTED: the entry just made durable, so the caller need not read it back.
    # Out of repr: the entry holds the lease token (its own repr hides it too).
    entry: InboxEntry | None = dataclasses.field(default=None, repr=False)
    # ACCEPTED by a batched pull: every entry it made durable (``entry`` is the first).
    entries: tuple[InboxEntry, ...] = dataclasses.field(default=(), repr=False)
    # A batched pull's pairs the ingress refused, (offerId, category): each one's
    # outcome, whatever the step's own (the caller logs one claim.conflict each).
    conflicts: tuple[tuple[str, str], ...] = ()


def new_lease_token() -> str:
    """32 CSPRNG bytes as canonical unpadded base64url (43 chars)."""
    # os.urandom is what secrets.token_bytes returns; importing secrets would
    # pull in hmac and hashlib (~0.6 MiB of RSS on the edge worker, docs/EDGE.md).
    return base64.urlsafe_b64encode(os.urandom(32)).rstrip(b"=").decode("ascii")


def _category(value: object, default: str) -> str:
    return value if isinstance(value, str) and _CATEGORY.fullmatch(value) else default


class ClaimCoordinator:
    def __init__(
        self,
        journal: Journal,
        pull: PullFn,
        *,
        clock: Clock = wall_clock_ms,
        rng: random.Random | None = None,
        policy: BackoffPolicy = DEFAULT_POLICY,
        checkpoint: Checkpoint | None = None,
        log: LogSink | None = None,
    ) -> None:
        self._journal = journal
        self._checkpoint = checkpoint
        self._log_sink = log
        self._pull = pull
        self._clock = clock
        self._rng = rng or random.SystemRandom()
        self._policy = policy

    def _log(self, level: int, fmt: str, *args: object) -> None:
        if self._log_sink is not None:
            self._log_sink(level, fmt % args)
            return
        import logging

        logging.getLogger(LOGGER).log(level, fmt, *args)

    # -- intent ------------------------------------------------------------

    def _intent(self, fence: SessionFence, now: int, want: int = 1) -> PendingClaim | StepResult:
        claim = self._journal.load_pending()
        if claim is not None and not _same_fence(claim, fence):
            # The local session moved on; the old intent can never be answered for it.
            self._journal.move_pending_aside("session_changed")
            claim = None
        if claim is None:
            room = self._journal.capacity - self._journal.count()
            if room <= 0:
                return StepResult(ClaimOutcome.INBOX_FULL, None, None, "inbox_full")
            # A batch (SPEC §18.2): every pair in this one intent, one durable write.
            size = max(1, min(want, room, MAX_BATCH))
            claim = PendingClaim(
                offer_id=uuid4_text(),
                lease_token=new_lease_token(),
                worker_id=fence.worker_id,
                session_id=fence.session_id,
                generation=fence.generation,
                capabilities_digest=fence.capabilities_digest,
                attempts=0,
                next_attempt_at_ms=now,
                created_at_ms=now,
                batch=tuple((uuid4_text(), new_lease_token()) for _ in range(size - 1)),
            )
        if now < claim.next_attempt_at_ms:
            return StepResult(ClaimOutcome.NOT_DUE, claim.offer_id, claim.next_attempt_at_ms)
        # Count the attempt durably before the first byte leaves: a crash loop
        # cannot retry one intent forever, and a fresh intent is on disk first.
        claim = dataclasses.replace(claim, attempts=claim.attempts + 1, last_outcome="sent")
        self._journal.save_pending(claim)
        return claim

    # -- one step ----------------------------------------------------------

    def step(self, fence: SessionFence, want: int = 1) -> StepResult:
        """One pull. ``want``: how many offers a new intent asks for (the free
        slots, SPEC §18.2); above 1 it is a batched pull. A kept intent is
        always retried exactly as it was written, whatever ``want`` is now."""
        now = self._clock()
        intent = self._intent(fence, now, want)
        if isinstance(intent, StepResult):
            return intent
        claim = intent
        if claim.batch:
            return self._send(claim, _batch_request(claim), self._handle_batch_ok)
        request = {
            "schema": PULL_SCHEMA,
            "workerId": claim.worker_id,
            "sessionId": claim.session_id,
            "generation": claim.generation,
            "offerId": claim.offer_id,
            "leaseToken": claim.lease_token,
        }
        return self._send(claim, request, self._handle_ok)

    def _send(
        self,
        claim: PendingClaim,
        request: Mapping[str, Any],
        on_ok: Callable[[PendingClaim, PullResponse], StepResult],
    ) -> StepResult:
        # The intent is durable now; a BaseException raised here (drain) keeps it.
        self._at("before_send")
        try:
            response = self._pull(request)
        except TlsClientRejected:
            return self._auth_failure(claim, "tls_client_rejected")
        except CredentialError:
            return self._auth_failure(claim, "credential_unusable")
        except TransportError as exc:
            return self._retry(claim, _category(getattr(exc, "reason", None), type(exc).__name__))
        self._at("after_pull_response")
        return self._handle(claim, response, on_ok)

    def _at(self, point: str) -> None:
        if self._checkpoint is not None:
            self._checkpoint(point)

    def _handle(
        self,
        claim: PendingClaim,
        response: PullResponse,
        on_ok: Callable[[PendingClaim, PullResponse], StepResult],
    ) -> StepResult:
        status = response.status
        if status == 200:
            return on_ok(claim, response)
        reason = _error_reason(response.body)
        if status == 409:
            category = f"conflict_{reason}" if reason != "unknown" else "conflict"
            self._journal.move_pending_aside(_category(category, "conflict"))
            return StepResult(ClaimOutcome.CONFLICT, claim.offer_id, None, reason)
        if status in (401, 403):
            return self._auth_failure(claim, f"http_{status}_{reason}")
        if status in (400, 413):
            # Our own request was refused as malformed: the same bytes never succeed.
            self._journal.move_pending_aside(f"http_{status}")
            return StepResult(ClaimOutcome.REJECTED, claim.offer_id, None, reason)
        return self._retry(claim, f"http_{status}", floor_ms=response.retry_after_ms)

    def _handle_ok(self, claim: PendingClaim, response: PullResponse) -> StepResult:
        from qinglong.schemas.contract import ContractError
        from qinglong.worker import offer_validation as ov

        try:
            doc = ov.parse_offer_response(response.body)
        except ContractError as exc:
            return self._retry(claim, exc.reason)  # truncated / invalid JSON: same intent
        if doc["status"] == "idle":
            idle = ov.parse_idle(doc)
            self._journal.clear_pending()
            next_at = self._clock() + idle.retry_after_ms
            return StepResult(ClaimOutcome.IDLE, claim.offer_id, next_at, idle.reason)
        try:
            entry = ov.validate_offered(doc, claim, self._clock())
        except ov.OfferInvalid as exc:
            self._log(ERROR, "offer %s refused: %s", claim.offer_id, exc.reason)
            self._journal.move_pending_aside(f"offer_{exc.reason}")
            return StepResult(ClaimOutcome.REJECTED, claim.offer_id, None, exc.reason)
        self._at("after_offer_response")
        try:
            self._journal.accept(entry)
        except (JournalError, ValueError) as exc:
            # Full inbox, conflicting replay, version regression: fail closed.
            self._log(ERROR, "offer %s not admitted: %s", claim.offer_id, type(exc).__name__)
            self._journal.move_pending_aside("inbox_refused")
            return StepResult(ClaimOutcome.REJECTED, claim.offer_id, None, type(exc).__name__)
        self._at("after_inbox_write")
        # Inbox first, then clear: a crash in between replays the same offer.
        self._journal.clear_pending()
        self._at("after_clear_pending")
        return StepResult(ClaimOutcome.ACCEPTED, claim.offer_id, None, entry=entry)

    def _handle_batch_ok(self, claim: PendingClaim, response: PullResponse) -> StepResult:
        """A batched pull's answer (SPEC §18.2): every offer validated against its
        own pair, all of them in the inbox (directory synced once) before the
        intent is cleared; a crash in between replays the same batch."""
        from qinglong.schemas.contract import ContractError
        from qinglong.worker import offer_validation as ov

        try:
            batch = ov.parse_batch_response(response.body)
        except ContractError as exc:
            return self._retry(claim, exc.reason)  # truncated / invalid JSON: same intent
        try:
            entries = ov.validate_batch(batch, claim, self._clock())
        except ov.OfferInvalid as exc:
            self._log(ERROR, "batch %s refused: %s", claim.offer_id, exc.reason)
            self._journal.move_pending_aside(f"offer_{exc.reason}")
            return StepResult(ClaimOutcome.REJECTED, claim.offer_id, None, exc.reason)
        conflicts = tuple(batch.conflicts)
        for conflict in conflicts:
            self._log(WARNING, "offer %s refused by the ingress: %s", conflict[0], conflict[1])
        if entries:
            self._at("after_offer_response")
            try:
                self._journal.accept_batch(entries)
            except (JournalError, ValueError) as exc:
                self._log(ERROR, "batch %s not admitted: %s", claim.offer_id, type(exc).__name__)
                self._journal.move_pending_aside("inbox_refused")
                return StepResult(ClaimOutcome.REJECTED, claim.offer_id, None, type(exc).__name__)
            self._at("after_inbox_write")
        # Inbox first (every entry durable), then clear.
        self._journal.clear_pending()
        if entries:
            self._at("after_clear_pending")
            return StepResult(
                ClaimOutcome.ACCEPTED,
                entries[0].offer_id,
                None,
                entry=entries[0],
                entries=tuple(entries),
                conflicts=conflicts,
            )
        if batch.idle is not None:
            next_at = self._clock() + batch.idle.retry_after_ms
            # The idle answer is of the ids the ingress neither offered nor refused:
            # name one of them, never a refused one (its conflict is reported apart).
            refused = {offer_id for offer_id, _ in conflicts}
            idle_id = next((o for o in claim.offer_ids() if o not in refused), claim.offer_id)
            return StepResult(
                ClaimOutcome.IDLE, idle_id, next_at, batch.idle.reason, conflicts=conflicts
            )
        reason = batch.conflicts[0][1] if batch.conflicts else "empty_batch"
        return StepResult(ClaimOutcome.CONFLICT, claim.offer_id, None, reason, conflicts=conflicts)

    # -- retries -----------------------------------------------------------

    def _next_at(self, claim: PendingClaim, floor_ms: int | None) -> int:
        now = self._clock()
        at = self._policy.next_attempt_at_ms(now, claim.attempts - 1, self._rng)
        return max(at, now + floor_ms) if floor_ms else at

    def _retry(
        self,
        claim: PendingClaim,
        reason: str,
        *,
        floor_ms: int | None = None,
        outcome: ClaimOutcome = ClaimOutcome.RETRY,
    ) -> StepResult:
        if self._policy.exhausted(claim.attempts):
            self._log(WARNING, "claim %s abandoned after %d attempts", claim.offer_id,
                      claim.attempts)  # fmt: skip
            self._journal.move_pending_aside("attempts_exhausted")
            return StepResult(ClaimOutcome.EXHAUSTED, claim.offer_id, None, reason)
        next_at = self._next_at(claim, floor_ms)
        kept = dataclasses.replace(claim, next_attempt_at_ms=next_at, last_outcome=reason)
        self._journal.save_pending(kept)
        return StepResult(outcome, claim.offer_id, next_at, reason)

    def _auth_failure(self, claim: PendingClaim, reason: str) -> StepResult:
        # Loud, but never with the credential or token.
        self._log(ERROR, "ingress refused our credentials (%s); claim %s kept", reason,
                  claim.offer_id)  # fmt: skip
        return self._retry(
            claim, reason, floor_ms=AUTH_MIN_DELAY_MS, outcome=ClaimOutcome.AUTH_FAILED
        )


def _batch_request(claim: PendingClaim) -> dict[str, Any]:
    return {
        "schema": BATCH_PULL_SCHEMA,
        "workerId": claim.worker_id,
        "sessionId": claim.session_id,
        "generation": claim.generation,
        "offers": [{"offerId": o, "leaseToken": t} for o, t in claim.pairs()],
    }


def _same_fence(claim: PendingClaim, fence: SessionFence) -> bool:
    return (
        claim.worker_id,
        claim.session_id,
        claim.generation,
        claim.capabilities_digest,
    ) == (fence.worker_id, fence.session_id, fence.generation, fence.capabilities_digest)


def _error_reason(body: bytes) -> str:
    """The low-cardinality ``reason`` of an error@v1 body, or ``unknown``."""
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return "unknown"
    if not isinstance(doc, dict):
        return "unknown"
    return _category(doc.get("reason"), "unknown")
