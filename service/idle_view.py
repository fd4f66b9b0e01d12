"""Per-replica idle view: answer idle pulls without a database call.

A fleet of idle workers polls every ~2-3 s; with one database call per pull,
10,000 workers are ~4,500 calls/s for nothing. This module lets a replica answer
an idle pull from a bounded-staleness belief instead, with the same answer the
database would give, and falls back to the database whenever it cannot prove
that.

Pieces (all per replica, none per worker):

* **Listener** — one psycopg connection (outside the pool) that `LISTEN`s on
  `ql_dispatch`. Database triggers (migration 0005) notify `q` when a run may
  have become dispatchable, `c:<credentialId>` when a credential changed
  (revocation), `s:<workerId>` when a session's fence facts changed (replace,
  close, drain, expiry moved back; never on a heartbeat). Each (re)connect is a
  new *incarnation*: everything learned under an older one is dropped, because
  notifications sent while no LISTEN was active are lost.
* **Belief** — from `ql.idle_probe()` (one read-only snapshot): "no dispatchable
  run and no live unstarted lease anywhere", plus the next time-based wake-up
  (earliest future `not_before` or scheduled `due_at`). It is installed only if
  no notification arrived and the incarnation did not change while the probe ran,
  and it lapses on any
  `q` notification, at the wake-up, after `idle_view_max_staleness_ms`, and
  whenever the listener is down.
* **Credential and session caches** — filled only from database answers
  (a successful authentication in any worker call; session open/heartbeat
  projections), each tagged with the incarnation under which the call *started*
  and dropped if a notification of its kind arrived while the call ran. Keyed
  by credential id (+ the SHA-256 of the secret, compared in constant time) and
  by worker id. Process memory only, no plaintext secret. A credential entry is
  trusted for at most `idle_view_credential_max_age_ms` (≤ 5 s, SPEC §5) after
  the database confirmed it; then the next pull goes to the database, which
  re-checks the credential (and refreshes the entry). A `c:<credentialId>`
  drops that credential; an `s:<workerId>` drops the worker's session *and*
  every credential entry of that worker (an operator disabling a worker closes
  its session, so its credentials are re-checked by the database too).
* **Barrier** — a pull may use the view only after a ping it did not precede:
  the replica sends `ql.idle_ping(token)` (a NOTIFY) through its pool after the
  pull arrived and waits for it to come back on the listener. Notifications are
  delivered in commit order, so by then every notification committed before the
  pull arrived (revocation, enqueue, session replacement) has been processed.
  One ping serves every pull waiting on the replica (at most one per
  `idle_view_ping_interval_ms`), so idle answers wait about one ping period.

Why an idle answer from the view equals the database's: the belief holds at the
probe's snapshot, and every change after it that could create a candidate or a
lease is either a `q` notification (enqueue, retry, requeue, release — the
triggers catch the row transitions, present and future paths alike), the
wake-up time, or a claim — and a claim needs a candidate first. So when the
barrier completes with the belief still valid, at the pull's arrival there was
no candidate and no live unstarted lease; a lost-response retry (same offer id)
always has a live unstarted lease until it is started or released, so it is
never answered idle here. (Residual, documented difference: a replay of an offer
whose lease was already *started* or *released* gets `idle` here where the
database would replay it or answer 409 — both only clear the worker's pending
claim, SPEC 6.3; and a session whose slots are all held by started leases gets
`no_candidates` where the database says `capacity_full` — both idle.)

Revocation bound (SPEC §5, "within 5 s"): a revocation commits at t. A pull that
arrives after t is answered from the cache only after a ping sent after its
arrival came back on the same listener incarnation under which the cache entry
was confirmed; the revocation's `c:` notification precedes that ping in the
queue and removes the entry first, so the pull goes to the database and gets
401. If the listener dropped at any point, the incarnation changed and the
entry is gone; if a ping does not come back within `idle_view_ping_timeout_ms`
the pull goes to the database (and after 5 such pings in a row the listener
is recycled). So a revoked
credential stops working for every request that arrives after the revocation
committed (plus, at most, one ping timeout for requests already waiting) — well
inside 5 s. Session replacement/close is bounded the same way (409 from the
database on the next pull).

Engagement: below `idle_view_engage_rate_per_s` worker requests a second the
view stays dormant (no listener, no pings, no probes: one database call per
pull, exactly as before); 0 engages it at startup.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

import psycopg

from qinglong.db import api
from qinglong.service.config import IngressConfig
from qinglong.service.credentials import PresentedCredential
from qinglong.service.gateway import DbRefused, DbUnavailable, Gateway, connection_kwargs
from qinglong.service.metrics import IngressMetrics

log = logging.getLogger("qinglong.ingress.idle_view")

CHANNEL = "ql_dispatch"
_RECONNECT_MIN_S = 0.1
_RECONNECT_MAX_S = 2.0
_PING_TIMEOUTS_BEFORE_RESTART = 5

# The database's idle envelope for an empty queue (ql_private.idle_result as
# scan_and_claim returns it for `no_candidates`), without `retryAfterMs`.
IDLE_RESULT: dict[str, Any] = {
    "status": "idle", "reason": "no_candidates",
    "stats": {"pages": 1, "candidates": 0, "claimAttempts": 0, "races": 0,
              "mismatches": {"executor": 0, "label": 0, "runtime": 0, "capacity": 0}},
    "truncated": False,
}


class ViewState(IntEnum):
    """Exported as a gauge value: what the next pull could rely on."""

    DISABLED = 0
    DORMANT = 1
    LISTENER_DOWN = 2
    UNKNOWN = 3
    BUSY = 4
    IDLE = 5


@dataclass(frozen=True)
class CacheToken:
    """Taken before a database call whose answer may fill a cache."""

    incarnation: int
    credential_seq: int
    session_seq: int
    taken_at: float = 0.0  # monotonic


@dataclass
class _AuthEntry:
    secret_digest: bytes = field(repr=False)
    worker_id: str
    incarnation: int
    confirmed_at: float  # monotonic, when the confirming database call was sent


@dataclass
class _SessionFacts:
    session_id: str
    generation: int
    expires_at_ms: int  # database clock
    incarnation: int


@dataclass
class _Belief:
    idle: bool
    incarnation: int
    formed_at: float  # monotonic, when the probe was sent
    wake_at: float | None  # monotonic


@dataclass
class IdleView:
    config: IngressConfig
    gateway: Gateway
    metrics: IngressMetrics
    clock: Callable[[], float] = time.monotonic
    wall_ms: Callable[[], float] = lambda: time.time() * 1000

    _engaged: bool = False
    _closed: bool = False
    _up: bool = False
    _incarnation: int = 0
    _credential_seq: int = 0
    _session_seq: int = 0
    _belief: _Belief | None = None
    _epoch: int = 0  # bumped by every `q` notification and reconnect
    _db_offset_ms: float | None = None  # database clock - local wall clock
    _auth: dict[str, _AuthEntry] = field(default_factory=dict)
    _worker_credentials: dict[str, set[str]] = field(default_factory=dict)
    _sessions: dict[str, _SessionFacts] = field(default_factory=dict)
    _waiters: list[asyncio.Future[bool]] = field(default_factory=list)
    _pings: dict[str, asyncio.Future[None]] = field(default_factory=dict)
    _ping_seq: int = 0
    _ping_timeouts: int = 0
    _replica: str = field(default_factory=lambda: secrets.token_hex(6))
    _ping_wakeup: asyncio.Event | None = None
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _probe_task: asyncio.Task[None] | None = None
    _last_probe: float = float("-inf")
    _conn: psycopg.AsyncConnection[Any] | None = None
    _rate_second: int = -1
    _rate_count: int = 0

    # ------------------------------------------------------------ lifecycle

    def __post_init__(self) -> None:
        m = self.metrics
        m.add_gauge("qinglong_ingress_idle_view_state",
                    "Idle view: 0 disabled, 1 dormant, 2 listener down, 3 unknown, 4 busy, "
                    "5 idle.", lambda: float(self.view_state()))
        m.add_gauge("qinglong_ingress_idle_view_listener_up",
                    "1 while the LISTEN connection is up.", lambda: float(self._up))
        m.add_gauge("qinglong_ingress_idle_view_cached_credentials",
                    "Credentials confirmed by the database under the current listener.",
                    lambda: float(len(self._auth)))
        m.add_gauge("qinglong_ingress_idle_view_cached_sessions",
                    "Session fences confirmed by the database under the current listener.",
                    lambda: float(len(self._sessions)))

    @property
    def enabled(self) -> bool:
        return self.config.idle_view_enabled

    @property
    def engaged(self) -> bool:
        return self._engaged

    async def start(self) -> None:
        if self.enabled and self.config.idle_view_engage_rate_per_s <= 0:
            self._engage()

    async def close(self) -> None:
        self._closed = True
        tasks = [*self._tasks, *([self._probe_task] if self._probe_task else [])]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._fail_waiters()
        if self._conn is not None:
            with contextlib.suppress(Exception):
                await self._conn.close()

    def note_request(self) -> None:
        """Count a worker request; engage once the rate reaches the threshold."""
        if self._engaged or not self.enabled or self._closed:
            return
        second = int(self.clock())
        if second != self._rate_second:
            self._rate_second, self._rate_count = second, 0
        self._rate_count += 1
        if self._rate_count >= self.config.idle_view_engage_rate_per_s:
            self._engage()

    def _engage(self) -> None:
        if self._engaged:
            return
        self._engaged = True
        self._ping_wakeup = asyncio.Event()
        self._tasks.append(asyncio.create_task(self._listen_loop(), name="idle-view-listen"))
        self._tasks.append(asyncio.create_task(self._ping_loop(), name="idle-view-ping"))
        log.info("idle view engaged", extra={"event": "idle_view.engaged"})

    def view_state(self) -> ViewState:
        if not self.enabled:
            return ViewState.DISABLED
        if not self._engaged:
            return ViewState.DORMANT
        if not self._up:
            return ViewState.LISTENER_DOWN
        belief = self._current_belief()
        if belief is None:
            return ViewState.UNKNOWN
        return ViewState.IDLE if belief.idle else ViewState.BUSY

    # ------------------------------------------------------------ listener

    async def _listen_loop(self) -> None:
        delay = _RECONNECT_MIN_S
        while not self._closed:
            try:
                conn = await psycopg.AsyncConnection.connect(self.config.dsn,
                                                             **self._listener_kwargs())
            except (psycopg.Error, OSError):
                self.metrics.idle_view_listener.inc("connect_failed")
                await asyncio.sleep(delay)
                delay = min(delay * 2, _RECONNECT_MAX_S)
                continue
            self._conn = conn
            try:
                await conn.execute(f"LISTEN {CHANNEL}")
                # LISTEN is committed: every notification committed from now on
                # reaches this connection. A new incarnation starts with nothing.
                self._reset(up=True)
                self.metrics.idle_view_listener.inc("connected")
                delay = _RECONNECT_MIN_S
                async for notify in conn.notifies():
                    self._on_notify(notify.payload)
            except (psycopg.Error, OSError):
                pass
            finally:
                self._reset(up=False)
                self.metrics.idle_view_listener.inc("lost")
                with contextlib.suppress(Exception):
                    await conn.close()
                self._conn = None
            if not self._closed:
                log.warning("idle view listener lost; pulls go to the database",
                            extra={"event": "idle_view.listener_lost"})
                await asyncio.sleep(delay)
                delay = min(delay * 2, _RECONNECT_MAX_S)

    def _listener_kwargs(self) -> dict[str, Any]:
        kwargs = connection_kwargs(self.config)
        kwargs.pop("options", None)  # no statement_timeout: the connection only waits
        kwargs.update(autocommit=True, prepare_threshold=None,
                      application_name="qinglong-ingress-listener",
                      keepalives=1, keepalives_idle=5, keepalives_interval=2,
                      keepalives_count=3)
        return kwargs

    def _reset(self, *, up: bool) -> None:
        """A new (or lost) incarnation: forget everything learned before it."""
        self._up = up
        self._incarnation += 1
        self._epoch += 1
        self._belief = None
        self._auth.clear()
        self._worker_credentials.clear()
        self._sessions.clear()
        for future in self._pings.values():
            if not future.done():
                future.set_exception(ConnectionError("listener lost"))

    def _on_notify(self, payload: str) -> None:
        kind, _, ident = payload.partition(":")
        if kind == "p":
            future = self._pings.get(ident)
            if future is not None and not future.done():
                future.set_result(None)
            return
        self.metrics.idle_view_notifications.inc(kind if kind in ("q", "c", "s") else "other")
        if kind == "c":
            self._credential_seq += 1
            self._forget_credential(ident)
        elif kind == "s":
            # The worker's session changed (replaced, closed — also by an operator
            # disabling the worker): forget its session and its credentials.
            self._session_seq += 1
            self._credential_seq += 1
            self._sessions.pop(ident, None)
            for credential_id in self._worker_credentials.pop(ident, set()):
                self._auth.pop(credential_id, None)
        else:  # 'q' and anything unknown: the belief no longer holds
            self._epoch += 1
            self._belief = None

    def _restart_listener(self) -> None:
        """A ping did not come back: treat the listener as broken."""
        if self._conn is not None and not self._conn.closed:
            self._reset(up=False)
            task = asyncio.create_task(self._conn.close())
            task.add_done_callback(_ignore)

    # ------------------------------------------------------------ belief

    def _current_belief(self) -> _Belief | None:
        belief = self._belief
        if belief is None or belief.incarnation != self._incarnation or not self._up:
            return None
        now = self.clock()
        if now - belief.formed_at >= self.config.idle_view_max_staleness_ms / 1000:
            return None
        if belief.wake_at is not None and now >= belief.wake_at:
            return None
        return belief

    def _kick_probe(self) -> None:
        if (not self._up or self._closed
                or (self._probe_task is not None and not self._probe_task.done())):
            return
        if self.clock() - self._last_probe < self.config.idle_view_probe_min_interval_ms / 1000:
            return
        self._probe_task = asyncio.create_task(self._probe(), name="idle-view-probe")

    async def _probe(self) -> None:
        epoch, incarnation = self._epoch, self._incarnation
        sent, wall_sent = self.clock(), self.wall_ms()
        self._last_probe = sent
        try:
            result = await self.gateway.call(api.idle_probe())
        except (DbUnavailable, DbRefused):
            self.metrics.idle_view_probes.inc("error")
            return
        wall_back = self.wall_ms()
        if not isinstance(result, dict) or not isinstance(result.get("nowMs"), int):
            self.metrics.idle_view_probes.inc("error")
            return
        self._db_offset_ms = result["nowMs"] - (wall_sent + wall_back) / 2
        if epoch != self._epoch or incarnation != self._incarnation or not self._up:
            self.metrics.idle_view_probes.inc("discarded")
            return
        wake_at = None
        if isinstance(result.get("wakeAtMs"), int):
            wake_at = sent + (result["wakeAtMs"] - result["nowMs"]) / 1000
        idle = result.get("idle") is True
        self._belief = _Belief(idle, incarnation, sent, wake_at)
        self.metrics.idle_view_probes.inc("idle" if idle else "busy")

    # ------------------------------------------------------------ caches

    def cache_token(self) -> CacheToken | None:
        if not self._engaged or not self._up:
            return None
        return CacheToken(self._incarnation, self._credential_seq, self._session_seq,
                          self.clock())

    def remember_credential(self, token: CacheToken | None, credential: PresentedCredential,
                            worker_id: str) -> None:
        """The database just authenticated this credential as this worker."""
        if (token is None or token.incarnation != self._incarnation or not self._up
                or token.credential_seq != self._credential_seq):
            return
        credential_id = credential.credential_id
        self._forget_credential(credential_id)
        self._auth[credential_id] = _AuthEntry(credential.secret_digest, worker_id,
                                               token.incarnation, token.taken_at)
        self._worker_credentials.setdefault(worker_id, set()).add(credential_id)

    def _forget_credential(self, credential_id: str) -> None:
        entry = self._auth.pop(credential_id, None)
        if entry is None:
            return
        ids = self._worker_credentials.get(entry.worker_id)
        if ids is not None:
            ids.discard(credential_id)
            if not ids:
                del self._worker_credentials[entry.worker_id]

    def remember_session(self, token: CacheToken | None, session: dict[str, Any]) -> None:
        """A session projection from an `ok` open/heartbeat answer (active session)."""
        if (token is None or token.incarnation != self._incarnation or not self._up
                or token.session_seq != self._session_seq):
            return
        try:
            facts = _SessionFacts(str(session["sessionId"]), int(session["generation"]),
                                  int(session["expiresAtMs"]), token.incarnation)
            worker_id = str(session["workerId"])
        except (KeyError, TypeError, ValueError):
            return
        self._sessions[worker_id] = facts

    def _credential_ok(self, credential: PresentedCredential, worker_id: str) -> bool:
        entry = self._auth.get(credential.credential_id)
        if entry is None:
            return False
        max_age_s = self.config.idle_view_credential_max_age_ms / 1000
        if self.clock() - entry.confirmed_at >= max_age_s:
            # Older than the cache may be trusted (SPEC §5, 5 s): ask the database.
            self._forget_credential(credential.credential_id)
            return False
        return (entry.incarnation == self._incarnation and entry.worker_id == worker_id
                and hmac.compare_digest(entry.secret_digest, credential.secret_digest))

    def _session_ok(self, worker_id: str, session_id: str, generation: int) -> bool:
        facts = self._sessions.get(worker_id)
        if (facts is None or facts.incarnation != self._incarnation
                or facts.session_id != session_id or facts.generation != generation
                or self._db_offset_ms is None):
            return False
        db_now_ms = self.wall_ms() + self._db_offset_ms
        return facts.expires_at_ms - self.config.idle_view_session_margin_ms > db_now_ms

    # ------------------------------------------------------------ pulls

    def _shortcut_possible(self, credential: PresentedCredential, worker_id: str,
                           session_id: str, generation: int) -> bool:
        if not self._engaged or not self._up:
            return False
        if not self._credential_ok(credential, worker_id):
            return False
        belief = self._current_belief()
        if belief is None:
            self._kick_probe()
            return False
        if not belief.idle:
            return False  # refreshed once it lapses; these pulls go to the database anyway
        if self.clock() - belief.formed_at >= self.config.idle_view_max_staleness_ms / 2000:
            self._kick_probe()  # refresh ahead of expiry; this pull still uses it
        return self._session_ok(worker_id, session_id, generation)

    async def try_idle(self, credential: PresentedCredential, worker_id: str,
                       session_id: str, generation: int) -> bool:
        """True when this pull may be answered `idle` without the database."""
        if not self._shortcut_possible(credential, worker_id, session_id, generation):
            self.metrics.idle_view_pulls.inc("database")
            return False
        if not await self._barrier():
            self.metrics.idle_view_pulls.inc("database")
            return False
        # Re-check after the barrier: every notification committed before this
        # pull arrived has now been applied.
        if not self._shortcut_possible(credential, worker_id, session_id, generation):
            self.metrics.idle_view_pulls.inc("database")
            return False
        self.metrics.idle_view_pulls.inc("view")
        return True

    async def _barrier(self) -> bool:
        if self._ping_wakeup is None:
            return False
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiters.append(future)
        self._ping_wakeup.set()
        return await future

    def _fail_waiters(self) -> None:
        waiters, self._waiters = self._waiters, []
        for future in waiters:
            if not future.done():
                future.set_result(False)

    async def _ping_loop(self) -> None:
        assert self._ping_wakeup is not None
        interval = self.config.idle_view_ping_interval_ms / 1000
        timeout = self.config.idle_view_ping_timeout_ms / 1000
        last_sent = float("-inf")
        try:
            while not self._closed:
                await self._ping_wakeup.wait()
                self._ping_wakeup.clear()
                pause = last_sent + interval - self.clock()
                if pause > 0:
                    await asyncio.sleep(pause)
                # Everyone waiting now arrived before this ping is sent.
                waiters, self._waiters = self._waiters, []
                if not waiters:
                    continue
                last_sent = self.clock()
                ok = await self._ping_once(timeout) if self._up else False
                for future in waiters:
                    if not future.done():
                        future.set_result(ok)
                if self._waiters:
                    self._ping_wakeup.set()
        finally:
            self._fail_waiters()

    async def _ping_once(self, timeout: float) -> bool:
        self._ping_seq += 1
        token = f"{self._replica}.{self._ping_seq}"
        incarnation = self._incarnation
        back: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pings[token] = back
        try:
            async with asyncio.timeout(timeout):
                await self.gateway.call(api.idle_ping(token=token))
                await back
        except TimeoutError:
            # The waiting pulls go to the database (always safe). Only a run of
            # undelivered pings recycles the listener: one slow ping under load
            # must not flush every cache and push the whole fleet onto the database.
            self.metrics.idle_view_pings.inc("timeout")
            self._ping_timeouts += 1
            if not back.done() and self._ping_timeouts >= _PING_TIMEOUTS_BEFORE_RESTART:
                self._ping_timeouts = 0
                self._restart_listener()
            return False
        except (DbUnavailable, DbRefused, ConnectionError):
            self.metrics.idle_view_pings.inc("error")
            return False
        finally:
            self._pings.pop(token, None)
            if back.done() and not back.cancelled():
                back.exception()  # retrieved: no "never retrieved" warning
        self._ping_timeouts = 0
        ok = incarnation == self._incarnation and self._up
        self.metrics.idle_view_pings.inc("ok" if ok else "error")
        return ok


def _ignore(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()
