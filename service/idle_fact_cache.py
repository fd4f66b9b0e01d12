"""The idle view's credential and session cache, and the change marks that veto its fills.

Part of the replica idle view (service/idle_view.py; its docstring is the full
argument, "Credential and session caches" and "Forged notifications"). Pure and
synchronous: the caller passes the monotonic `now` and the listener incarnation;
nothing here reads a clock, does I/O or counts a metric (answers say what to count).

Invalidation rules (entries come only from database answers; notifications only
end them):

* a fill is kept only if its call's token (`token`, taken before the call) is of
  the current incarnation, younger than `FILL_HORIZON_S`, and no `c:` for its
  credential nor `s:` for its worker arrived after the token (`changed_since`);
* `c:<credentialId>` drops that credential; `s:<workerId>` drops the worker's
  session and every credential of that worker;
* a cached credential is trusted for less than `credential_max_age_s` after the
  database confirmed it; then it is dropped on its next use;
* `clear` (listener lost or reconnected) forgets every entry and mark;
* at most `MAX_CHANGE_MARKS` marks per table: a table full of marks younger than
  the fill horizon is emptied and every fill whose call started before is
  refused instead; at most `MAX_CACHED` credentials and sessions (beyond, a new
  entry is not kept).
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from qinglong.service.credentials import PresentedCredential

# A cache fill must come back within this long of its token (a database call's
# own deadline is a few seconds); the per-key change marks older than this are
# forgotten, since no fill they could veto is still accepted.
FILL_HORIZON_S = 30.0
CHANGE_MARKS_PRUNE_AT = 4096
# Hard caps on what the view holds. Marks come from notifications anyone who may
# connect can send: when one table is full of marks younger than the fill horizon,
# it is emptied and every fill in flight is refused instead. The caches fill only
# from database answers; when one is full, new entries are not kept (those
# workers' pulls go to the database).
MAX_CHANGE_MARKS = 16_384
MAX_CACHED = 20_000
# At most this many aging credentials are re-confirmed in one query.
CONFIRM_BATCH = 1024


@dataclass(frozen=True)
class CacheToken:
    """Taken before a database call whose answer may fill a cache."""

    incarnation: int
    seq: int  # `c:`/`s:` notifications received so far (under this incarnation)
    taken_at: float = 0.0  # monotonic


@dataclass
class AuthEntry:
    secret_digest: bytes = field(repr=False)
    worker_id: str
    incarnation: int
    confirmed_at: float  # monotonic, when the confirming database call was sent


@dataclass(frozen=True)
class SessionFacts:
    session_id: str
    generation: int
    expires_at_ms: int  # database clock
    incarnation: int


class Fill(StrEnum):
    """What became of a database answer offered to the cache."""

    KEPT = "kept"
    REFUSED = "refused"  # vetoed (token too old, other incarnation, notified) or malformed
    OVERFLOW = "overflow"  # the cache is full: not kept


Marks = dict[str, tuple[int, float]]


@dataclass
class FactCache:
    credential_max_age_s: float
    session_margin_ms: int
    seq: int = 0  # bumped by every `c:`/`s:` notification
    # Fills whose token's seq is below this are refused (a mark table overflowed).
    veto_before: int = 0
    # The `seq` and time of the last `c:` per credential id / `s:` per worker id.
    credential_marks: Marks = field(default_factory=dict)
    worker_marks: Marks = field(default_factory=dict)
    auth: dict[str, AuthEntry] = field(default_factory=dict)
    worker_credentials: dict[str, set[str]] = field(default_factory=dict)
    sessions: dict[str, SessionFacts] = field(default_factory=dict)

    # ------------------------------------------------------------ notifications

    def clear(self) -> None:
        """A new (or lost) listener incarnation: forget every entry and mark
        (`seq` and `veto_before` go on counting)."""
        self.auth.clear()
        self.worker_credentials.clear()
        self.sessions.clear()
        self.credential_marks.clear()
        self.worker_marks.clear()

    def credential_changed(self, credential_id: str, now: float) -> bool:
        """`c:<credentialId>`: drop it and veto its fills in flight. True when a
        mark table overflowed."""
        overflowed = self._mark(self.credential_marks, credential_id, now)
        self.forget_credential(credential_id)
        return overflowed

    def worker_changed(self, worker_id: str, now: float) -> bool:
        """`s:<workerId>` (its session replaced or closed — also by an operator
        disabling the worker): drop its session and every credential of it, and
        veto its fills in flight. True when a mark table overflowed."""
        overflowed = self._mark(self.worker_marks, worker_id, now)
        self.sessions.pop(worker_id, None)
        for credential_id in self.worker_credentials.pop(worker_id, set()):
            self.auth.pop(credential_id, None)
        return overflowed

    def _mark(self, marks: Marks, ident: str, now: float) -> bool:
        """Note a `c:`/`s:` notification about `ident` (vetoes fills in flight).

        At most `MAX_CHANGE_MARKS` per table: a table full of marks younger than
        the fill horizon (a flood of forged ids) is emptied, and every fill whose
        call started before this notification is refused instead — the marks
        only ever veto fills, so forgetting them is safe once no such fill can
        be accepted."""
        self.seq += 1
        marks.pop(ident, None)  # re-inserted last: the dict stays in time order
        if len(marks) >= CHANGE_MARKS_PRUNE_AT:
            while marks:
                oldest = next(iter(marks))
                if now - marks[oldest][1] < FILL_HORIZON_S:
                    break
                del marks[oldest]
        overflowed = len(marks) >= MAX_CHANGE_MARKS
        if overflowed:
            marks.clear()
            self.veto_before = self.seq
        marks[ident] = (self.seq, now)
        return overflowed

    # ------------------------------------------------------------ fills

    def token(self, incarnation: int, now: float) -> CacheToken:
        return CacheToken(incarnation, self.seq, now)

    def changed_since(self, seq: int, credential_id: str | None, worker_id: str) -> bool:
        """A `c:` for the credential or an `s:` for the worker came after `seq`
        (or marks were forgotten after `seq`: then anything may have)."""
        if seq < self.veto_before:
            return True
        credential = self.credential_marks.get(credential_id) if credential_id else None
        worker = self.worker_marks.get(worker_id)
        return (credential is not None and credential[0] > seq) or (
            worker is not None and worker[0] > seq
        )

    def fill_allowed(
        self,
        token: CacheToken,
        incarnation: int,
        now: float,
        credential_id: str | None,
        worker_id: str,
    ) -> bool:
        """The answer of a call that started at `token` may fill the caches."""
        return (
            token.incarnation == incarnation
            and now - token.taken_at < FILL_HORIZON_S
            and not self.changed_since(token.seq, credential_id, worker_id)
        )

    def remember_credential(
        self,
        token: CacheToken,
        credential: PresentedCredential,
        worker_id: str,
        *,
        incarnation: int,
        now: float,
    ) -> Fill:
        """The database just authenticated this credential as this worker, in a
        call that started at `token`."""
        credential_id = credential.credential_id
        if not self.fill_allowed(token, incarnation, now, credential_id, worker_id):
            return Fill.REFUSED
        self.forget_credential(credential_id)
        if len(self.auth) >= MAX_CACHED:
            return Fill.OVERFLOW
        self.auth[credential_id] = AuthEntry(
            credential.secret_digest, worker_id, token.incarnation, token.taken_at
        )
        self.worker_credentials.setdefault(worker_id, set()).add(credential_id)
        return Fill.KEPT

    def forget_credential(self, credential_id: str) -> None:
        entry = self.auth.pop(credential_id, None)
        if entry is None:
            return
        ids = self.worker_credentials.get(entry.worker_id)
        if ids is not None:
            ids.discard(credential_id)
            if not ids:
                del self.worker_credentials[entry.worker_id]

    def remember_session(
        self, token: CacheToken, session: Mapping[str, Any], *, incarnation: int, now: float
    ) -> Fill:
        """A session projection from an `ok` open/heartbeat answer (active
        session), in a call that started at `token`."""
        try:
            facts = SessionFacts(
                str(session["sessionId"]),
                int(session["generation"]),
                int(session["expiresAtMs"]),
                token.incarnation,
            )
            worker_id = str(session["workerId"])
        except (KeyError, TypeError, ValueError):
            return Fill.REFUSED
        if not self.fill_allowed(token, incarnation, now, None, worker_id):
            return Fill.REFUSED
        if worker_id not in self.sessions and len(self.sessions) >= MAX_CACHED:
            return Fill.OVERFLOW
        self.sessions[worker_id] = facts
        return Fill.KEPT

    # ------------------------------------------------------------ answers

    def credential_trusted(
        self, credential: PresentedCredential, worker_id: str, *, incarnation: int, now: float
    ) -> bool:
        """The cache may answer for this credential: confirmed by the database less
        than `credential_max_age_s` ago under this incarnation, same worker, same
        secret digest (constant-time compare). An entry past its period is dropped."""
        entry = self.auth.get(credential.credential_id)
        if entry is None:
            return False
        if now - entry.confirmed_at >= self.credential_max_age_s:
            # Older than the cache may be trusted (SPEC §5, 5 s): ask the database.
            self.forget_credential(credential.credential_id)
            return False
        return (
            entry.incarnation == incarnation
            and entry.worker_id == worker_id
            and hmac.compare_digest(entry.secret_digest, credential.secret_digest)
        )

    def session_ok(
        self,
        worker_id: str,
        session_id: str,
        generation: int,
        *,
        incarnation: int,
        db_now_ms: float | None,
    ) -> bool:
        """The cached session is this fence and still live `session_margin_ms`
        ahead of the database's clock (`db_now_ms`; None: not known yet)."""
        facts = self.sessions.get(worker_id)
        if (
            facts is None
            or facts.incarnation != incarnation
            or facts.session_id != session_id
            or facts.generation != generation
            or db_now_ms is None
        ):
            return False
        # Both sides on the database's clock: never the local wall clock.
        return facts.expires_at_ms - self.session_margin_ms > db_now_ms

    # ------------------------------------------------------------ re-confirmation

    def _aging(self, entry: AuthEntry, now: float) -> bool:
        return now - entry.confirmed_at >= self.credential_max_age_s / 2

    def has_aging(self, now: float) -> bool:
        """Some entry is past half its trust period."""
        return any(self._aging(e, now) for e in self.auth.values())

    def aging(self, now: float) -> list[tuple[str, AuthEntry]]:
        """The entries past half their trust period (at most `CONFIRM_BATCH`)."""
        aging = [(cid, e) for cid, e in self.auth.items() if self._aging(e, now)]
        return aging[:CONFIRM_BATCH]

    def confirmed(
        self, aging: list[tuple[str, AuthEntry]], allowed: set[str], seq: int, sent: float
    ) -> None:
        """Apply a re-confirmation of `aging`, sent at `sent` with the token
        `seq`: an allowed entry's trust period restarts at `sent`, one the
        database no longer allows is dropped; an entry replaced or dropped
        meanwhile, or whose credential or worker was notified after `seq`, is
        left alone (the answer may be stale for it)."""
        for credential_id, entry in aging:
            if self.auth.get(credential_id) is not entry:
                continue  # replaced by a newer answer, or dropped by a notification
            if self.changed_since(seq, credential_id, entry.worker_id):
                continue  # notified while the query ran: its answer may be stale
            if credential_id in allowed:
                entry.confirmed_at = sent
            else:
                self.forget_credential(credential_id)
