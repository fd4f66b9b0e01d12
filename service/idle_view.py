"""Per-replica idle view: answer idle pulls without a database write or pool call.

A fleet of idle workers polls every ~2-3 s; with one database call per pull,
10,000 workers are ~4,500 calls/s for nothing. This module lets a replica answer
an idle pull from a bounded-staleness belief instead, with the same answer the
database would give, and falls back to the database whenever it cannot prove
that.

Pieces (all per replica, none per worker):

* **Listener** — one psycopg connection (outside the pool) that `LISTEN`s on
  `ql_dispatch`. Database triggers (migration 0005) notify `q` when a run may
  have become dispatchable, `c:<credentialId>` when a credential changed
  (revocation, worker disabled/enabled), `s:<workerId>` when a session's fence
  facts changed (replace, close, drain, expiry moved back; never on a
  heartbeat). Each (re)connect is a new *incarnation*: everything learned under
  an older one is dropped, because notifications sent while no LISTEN was
  active are lost.
* **Barrier** — a pull may use the view only after a read-only query sent on
  the LISTEN connection *after the pull arrived* has returned. PostgreSQL (14+;
  this project runs 15) makes that query a barrier for every notification
  committed before it was sent:
    - the sender signals every listener of its database in
      `AtCommit_Notify` → `SignalBackends` (src/backend/commands/async.c),
      which `CommitTransaction` runs after the commit is recorded and before
      the sender's client sees the commit finish (its ReadyForQuery); so a
      commit the caller saw finish has already set the listener's
      `notifyInterruptPending`;
    - the listening backend, before it sends ReadyForQuery for any query it ran
      outside a transaction block, calls `ProcessNotifyInterrupt`
      (`PostgresMain`, src/backend/tcop/postgres.c), which sends every
      notification of a committed transaction in the queue
      (`asyncQueueReadAllNotifications`);
    - psycopg parses those NotificationResponses before the query returns (they
      wait in the connection's backlog, drained right after).
  `tests/py/test_ingress_idle_view_barrier.py` races committers against barrier
  queries to hold the server to this. A barrier writes nothing: no NOTIFY, no
  transaction id, zero WAL (SPEC §12, "idle pulls write nothing"); it replaced
  a NOTIFY ping that committed (and fsync'd) a transaction every barrier
  interval. With no pings left there is nothing to authenticate on the channel
  for them, so no per-replica ping nonce is needed.
  One barrier serves every pull waiting on the replica (at most one per
  `idle_view_ping_interval_ms`), so idle answers wait about one interval.
* **Belief** — "no dispatchable run and no live unstarted lease anywhere", plus
  the next time-based wake-up (earliest future `not_before` or scheduled
  `due_at`), from `ql.idle_probe()` (read-only, bounded). The probe runs *as* a
  barrier query (on the LISTEN connection) whenever no valid belief exists; its
  snapshot is taken after every waiting pull arrived, so its answer is the
  database's own answer for those pulls. A belief lapses on any `q`
  notification received after its probe was sent, at the wake-up, after
  `idle_view_max_staleness_ms`, and whenever the listener is down.
* **Credential and session caches** — filled only from database answers
  (a successful authentication in any worker call; session open/heartbeat
  projections), each tagged with the incarnation under which the call *started*
  and dropped if a notification about *that* credential (`c:`) or worker
  (`s:`) arrived while the call ran. Only those can change the answer; an
  earlier design dropped every fill in flight on any `c:`/`s:`, so a fleet
  reopening its sessions (each replacement notifies `s:`) kept the caches from
  filling and sent its pulls to the database, which slowed the calls and
  dropped more fills. Keyed
  by credential id (+ the SHA-256 of the secret, compared in constant time) and
  by worker id. Process memory only, no plaintext secret. Every cached
  authentication fact (credential → worker, secret digest, and with them "not
  revoked" and "worker not disabled") is trusted for at most
  `idle_view_credential_max_age_ms` (≤ 5 s, SPEC §5) after the database
  confirmed it; then the next pull goes to the database, which re-checks it.
  Entries past half that period are re-confirmed together in one read-only
  query on the LISTEN connection (`ql.confirm_credentials`, at most once per
  quarter period), which restarts their period or drops them. A
  `c:<credentialId>` drops that credential; an `s:<workerId>` drops the
  worker's session *and* every credential entry of that worker.

Forged notifications. Notifications are hints from anyone who may connect
(after the bootstrap: the project's roles and superusers only — PostgreSQL
cannot restrict NOTIFY by grant, so the console's read-only login can send on
the channel). The view therefore
  * keeps only payloads that are exactly what the database sends
    (`parse_notification`: `q`, `c:` + a 16-character credential id, `s:` + a
    lowercase uuid; at most 38 characters, length checked first); anything else
    is dropped unread and counted (`notifications_total{kind="invalid"}`) — it
    cannot be a real change, since no database path sends it;
  * holds a bounded amount whatever arrives: at most `MAX_CHANGE_MARKS` marks
    per table (a table full of marks younger than the fill horizon is emptied
    and every fill in flight is refused instead), at most `MAX_CACHED`
    credentials and sessions (filled only from database answers; beyond the cap
    a new entry is not kept). A flood of 60,000 8 KB payloads used to grow an
    ingress by ~470 MiB (every `c:`/`s:` id kept 30 s);
  * can only lose beliefs to a forged payload, never gain one: a forged
    `c:`/`s:` drops cache entries (the next pull asks the database), a mark
    overflow refuses fills (those calls' next pulls ask the database), and a
    forged `q` only turns the next barrier into a probe — at most one bounded
    read-only probe per `idle_view_probe_min_interval_ms` on the LISTEN
    connection, shared by every waiting pull, never a pull sent to the pool.
    Every belief that answers a pull comes from a database answer (probe,
    authentication, session projection), and every notification only ends
    beliefs: so a forged one cannot make the view answer idle where the
    database would offer work, nor trust a credential or session the database
    would refuse. Its worst cost is extra database calls.

Clocks. The view reads one clock, the monotonic one (`clock`, injected by
tests), never the wall clock. Session expiry (`expiresAtMs`) is the database's
clock, so it is compared with the database's clock: the last probe's `nowMs`
pinned to the monotonic instant the probe was sent and advanced by the
monotonic clock (`_DbClock`; never behind the database, since the database read
its clock after that instant). A local wall clock that is skewed or steps
(NTP) changes nothing. Wake-ups and trust periods are monotonic intervals.

Why an idle answer from the view equals the database's: either the barrier was
a probe (its snapshot follows the pull's arrival: the database's answer), or the
belief survived a barrier sent after the pull arrived, so every change after
the belief's probe that could create a candidate or a lease — a `q`
notification (enqueue, retry, requeue, release: the triggers catch the row
transitions), the wake-up time, or a claim (which needs a candidate first) —
would have ended it. A lost-response retry (same offer id) always has a live
unstarted lease until it is started or released, so it is never answered idle
here. (Residual, documented difference: a replay of an offer whose lease was
already *started* or *released* gets `idle` here where the database would
replay it or answer 409 — both only clear the worker's pending claim, SPEC
6.3; and a session whose slots are all held by started leases gets
`no_candidates` where the database says `capacity_full` — both idle.)

Revocation bound (SPEC §5, "within 5 s"): a revocation commits at t. A pull that
arrives after t is answered from the cache only after a barrier sent after its
arrival returned on the same listener incarnation under which the cache entry
was confirmed; the revocation's `c:` notification was delivered before that
barrier's ReadyForQuery and removed the entry first, so the pull goes to the
database and gets 401. If the listener dropped at any point, the incarnation
changed and the entry is gone; if a barrier does not return within
`idle_view_ping_timeout_ms` the waiting pulls go to the database (and a barrier
stuck for 10 such timeouts recycles the listener). Session replacement/close is
bounded the same way (409 from the database on the next pull).

Engagement: below `idle_view_engage_rate_per_s` worker requests a second the
view stays dormant (no listener, no barriers, no probes: one database call per
pull, exactly as before); 0 engages it at startup.

Code layout. `IdleView` (here) owns the listener connection, its incarnation,
the waiting pulls and the metrics; the decisions are made by pure, synchronous
parts that are handed the monotonic clock reading and the incarnation, each
tested without PostgreSQL: `Beliefs` (service/idle_beliefs.py: the probe's
belief and the database clock), `FactCache` (service/idle_fact_cache.py: cached
credentials and sessions, the change marks that veto fills, the caps, the
re-confirmation), `BarrierClock` and `EngageMeter` (service/idle_timing.py:
when a barrier, probe or re-confirmation may run; when the view engages).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum, StrEnum
from typing import Any

import psycopg

from qinglong.db import api
from qinglong.db.answers import AnswerError, IdleProbed
from qinglong.service.config import IngressConfig
from qinglong.service.credentials import PresentedCredential
from qinglong.service.gateway import Gateway, connection_kwargs
from qinglong.service.idle_beliefs import Belief, Beliefs, ProbeVerdict
from qinglong.service.idle_fact_cache import (
    CHANGE_MARKS_PRUNE_AT,
    FILL_HORIZON_S,
    MAX_CACHED,
    MAX_CHANGE_MARKS,
    AuthEntry,
    CacheToken,
    FactCache,
    Fill,
    Marks,
    SessionFacts,
)
from qinglong.service.idle_timing import BarrierClock, EngageMeter
from qinglong.service.metrics import IngressMetrics

__all__ = [
    "CHANNEL",
    "IDLE_RESULT",
    "MAX_CACHED",
    "MAX_CHANGE_MARKS",
    "CacheToken",
    "IdleView",
    "Notification",
    "NotificationKind",
    "ViewState",
    "parse_notification",
]

log = logging.getLogger("qinglong.ingress.idle_view")

CHANNEL = "ql_dispatch"
_RECONNECT_MIN_S = 0.1
_RECONNECT_MAX_S = 2.0
# A barrier query still running after this many barrier timeouts means the
# listener is broken (the waiting pulls went to the database long before).
_TIMEOUTS_BEFORE_RESTART = 10
# The backlog drain after a barrier: psycopg hands out what it already parsed.
_DRAIN_S = 0.001
# The cache's bounds (service/idle_fact_cache.py) under the names tests read here.
_FILL_HORIZON_S = FILL_HORIZON_S
_CHANGE_MARKS_PRUNE_AT = CHANGE_MARKS_PRUNE_AT
# Exactly the payloads the database sends on the channel
# (ql_private.idle_view_notify, ql.disable_worker, ql.enable_worker): `q`,
# `c:` + a credential id (CHECK `^[a-z0-9]{16}$`), `s:` + a worker id as
# PostgreSQL prints a uuid. Anything else is dropped unread.
_PAYLOAD_MAX_CHARS = 38
_PAYLOAD = re.compile(
    r"q|c:[a-z0-9]{16}"
    r"|s:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
)

# The database's idle envelope for an empty queue (ql_private.idle_result as
# scan_and_claim returns it for `no_candidates`), without `retryAfterMs`.
IDLE_RESULT: dict[str, Any] = {
    "status": "idle",
    "reason": "no_candidates",
    "stats": {
        "pages": 1,
        "candidates": 0,
        "claimAttempts": 0,
        "races": 0,
        "mismatches": {"executor": 0, "label": 0, "runtime": 0, "capacity": 0},
    },
    "truncated": False,
}


class NotificationKind(StrEnum):
    QUEUE = "q"
    CREDENTIAL = "c"
    SESSION = "s"


@dataclass(frozen=True)
class Notification:
    kind: NotificationKind
    ident: str  # the credential id or worker id; "" for `q`


def parse_notification(payload: str) -> Notification | None:
    """The notification a payload carries, or None unless it is exactly one the
    database sends (length checked before the pattern runs)."""
    if len(payload) > _PAYLOAD_MAX_CHARS or _PAYLOAD.fullmatch(payload) is None:
        return None
    kind, _, ident = payload.partition(":")
    return Notification(NotificationKind(kind), ident)


class ViewState(IntEnum):
    """Exported as a gauge value: what the next pull could rely on."""

    DISABLED = 0
    DORMANT = 1
    LISTENER_DOWN = 2
    UNKNOWN = 3
    BUSY = 4
    IDLE = 5


@dataclass
class IdleView:
    """The listener, the waiting pulls and the metrics; the decisions are the
    parts' (`Beliefs`, `FactCache`, `BarrierClock`, `EngageMeter`), each given
    this view's clock reading and listener incarnation."""

    config: IngressConfig
    gateway: Gateway
    metrics: IngressMetrics
    # The view's only clock (monotonic; injected by tests). It never reads the
    # wall clock: expiry times are the database's and are compared with the
    # database's clock (`DbClock`).
    clock: Callable[[], float] = time.monotonic

    _engaged: bool = False
    _closed: bool = False
    # The listener: up, and its incarnation, bumped by every (re)connect and loss;
    # everything learned under an older incarnation is dropped (`_reset`).
    _up: bool = False
    _incarnation: int = 0
    _beliefs: Beliefs = field(init=False)
    _facts: FactCache = field(init=False)
    _timing: BarrierClock = field(init=False)
    _engage_meter: EngageMeter = field(init=False)
    _waiters: list[asyncio.Future[bool]] = field(default_factory=list)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _conn: psycopg.AsyncConnection[Any] | None = None

    # ------------------------------------------------------------ lifecycle

    def __post_init__(self) -> None:
        c = self.config
        self._beliefs = Beliefs(c.idle_view_max_staleness_ms / 1000)
        self._facts = FactCache(
            c.idle_view_credential_max_age_ms / 1000, c.idle_view_session_margin_ms
        )
        self._timing = BarrierClock(
            c.idle_view_ping_interval_ms / 1000,
            c.idle_view_probe_min_interval_ms / 1000,
            c.idle_view_credential_max_age_ms / 1000,
        )
        self._engage_meter = EngageMeter(c.idle_view_engage_rate_per_s)
        m = self.metrics
        m.add_gauge(
            "qinglong_ingress_idle_view_state",
            "Idle view: 0 disabled, 1 dormant, 2 listener down, 3 unknown, 4 busy, 5 idle.",
            lambda: float(self.view_state()),
        )
        m.add_gauge(
            "qinglong_ingress_idle_view_listener_up",
            "1 while the LISTEN connection is up.",
            lambda: float(self._up),
        )
        m.add_gauge(
            "qinglong_ingress_idle_view_cached_credentials",
            "Credentials confirmed by the database under the current listener.",
            lambda: float(len(self._facts.auth)),
        )
        m.add_gauge(
            "qinglong_ingress_idle_view_cached_sessions",
            "Session fences confirmed by the database under the current listener.",
            lambda: float(len(self._facts.sessions)),
        )

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
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
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
        if self._engage_meter.note(self.clock()):
            self._engage()

    def _engage(self) -> None:
        if self._engaged:
            return
        self._engaged = True
        self._tasks.append(asyncio.create_task(self._listen_loop(), name="idle-view-listen"))
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
                conn = await psycopg.AsyncConnection.connect(
                    self.config.dsn, **self._listener_kwargs()
                )
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
                await self._serve(conn)
            except (psycopg.Error, OSError, TimeoutError):
                pass
            finally:
                self._reset(up=False)
                self._fail_waiters()
                self.metrics.idle_view_listener.inc("lost")
                with contextlib.suppress(Exception):
                    await conn.close()
                self._conn = None
            if not self._closed:
                log.warning(
                    "idle view listener lost; pulls go to the database",
                    extra={"event": "idle_view.listener_lost"},
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, _RECONNECT_MAX_S)

    def _listener_kwargs(self) -> dict[str, Any]:
        kwargs = connection_kwargs(self.config)
        kwargs.pop("options", None)  # no statement_timeout: the connection mostly waits
        kwargs.update(
            autocommit=True,
            prepare_threshold=None,
            application_name="qinglong-ingress-listener",
            keepalives=1,
            keepalives_idle=5,
            keepalives_interval=2,
            keepalives_count=3,
        )
        return kwargs

    async def _serve(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """Receive notifications; run a barrier whenever pulls wait for one."""
        interval = self._timing.ping_interval_s
        while not self._closed:
            pause = self._barrier_due_in() if self._waiters else interval
            if pause <= 0:
                await self._run_barrier(conn)
                continue
            if self._confirm_due():
                await self._reconfirm(conn)
                continue
            # Wait at most `pause` (a new waiter is noticed within one interval).
            async for notify in conn.notifies(timeout=min(pause, interval)):
                self._on_notify(notify.payload)

    def _barrier_due_in(self) -> float:
        now = self.clock()
        return self._timing.barrier_due_in(now, belief_holds=self._current_belief() is not None)

    def _reset(self, *, up: bool) -> None:
        """A new (or lost) incarnation: forget everything learned before it."""
        self._up = up
        self._incarnation += 1
        self._beliefs.drop()
        self._facts.clear()

    def _on_notify(self, payload: str) -> None:
        notification = parse_notification(payload)
        if notification is None:
            # Not sent by the database (forged, or junk): dropped unread.
            self.metrics.idle_view_notifications.inc("invalid")
            return
        kind, ident = notification.kind, notification.ident
        self.metrics.idle_view_notifications.inc(kind.value)
        overflowed = False
        if kind is NotificationKind.CREDENTIAL:
            overflowed = self._facts.credential_changed(ident, self.clock())
        elif kind is NotificationKind.SESSION:
            overflowed = self._facts.worker_changed(ident, self.clock())
        else:  # `q`: the belief no longer holds
            self._beliefs.queue_changed()
        if overflowed:
            self.metrics.idle_view_overflows.inc("marks")

    # ------------------------------------------------------------ re-confirmation

    def _confirm_due(self) -> bool:
        """Cached credentials past half their trust period, and no re-confirmation
        in the last quarter of it."""
        now = self.clock()
        return self._timing.confirm_window_open(now) and self._facts.has_aging(now)

    async def _reconfirm(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """Re-confirm the aging cache entries in one read-only query
        (`ql.confirm_credentials`) on the LISTEN connection, so a worker polling
        every 2-3 s is not sent to the database every 5 s only to re-authenticate.
        A confirmed entry's trust period restarts when the query was sent; one the
        database no longer allows is dropped; an entry whose credential or worker
        was notified meanwhile keeps its old period (the whole answer is discarded
        if the listener was lost)."""
        now = self.clock()
        self._timing.confirm_sent(now)
        aging = self._facts.aging(now)
        incarnation, seq = self._incarnation, self._facts.seq
        confirmed = await api.confirm_credentials(
            credential_ids=[cid for cid, _ in aging],
            secret_digests=[e.secret_digest for _, e in aging],
            worker_ids=[e.worker_id for _, e in aging],
        ).run_async(conn)
        async for notify in conn.notifies(timeout=_DRAIN_S):
            self._on_notify(notify.payload)
        if incarnation != self._incarnation:
            self.metrics.idle_view_barriers.inc("confirm", "discarded")
            return
        self._facts.confirmed(aging, set(confirmed.credential_ids), seq, now)
        self.metrics.idle_view_barriers.inc("confirm", "ok")

    # ------------------------------------------------------------ barrier

    async def _run_barrier(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """One read-only query on the LISTEN connection for every waiting pull.

        Everyone waiting now arrived before the query is sent. No valid belief:
        the query is the probe (its snapshot follows every waiter's arrival, so
        its answer is the database's answer for them). Otherwise `SELECT 1`: the
        notifications committed before it are applied, then the belief decides."""
        waiters, self._waiters = self._waiters, []
        probe = self._current_belief() is None
        incarnation, epoch = self._incarnation, self._beliefs.epoch
        sent = self.clock()
        self._timing.barrier_sent(sent, probe=probe)
        limit = _TIMEOUTS_BEFORE_RESTART * self.config.idle_view_ping_timeout_ms / 1000
        try:
            async with asyncio.timeout(limit):
                if probe:
                    result = await _probe(conn)
                else:
                    await conn.execute("SELECT 1")
                    result = None
                # Everything delivered before ReadyForQuery waits in psycopg's backlog.
                async for notify in conn.notifies(timeout=_DRAIN_S):
                    self._on_notify(notify.payload)
        except BaseException:
            self._waiters[:0] = waiters  # failed by the listen loop's cleanup
            self.metrics.idle_view_barriers.inc("probe" if probe else "sync", "error")
            raise
        kind = "probe" if probe else "sync"
        if incarnation != self._incarnation or not self._up:
            self.metrics.idle_view_barriers.inc(kind, "error")
            _resolve(waiters, False)
            return
        if probe:
            idle = self._install_belief(result, incarnation, epoch, sent)
        else:
            belief = self._current_belief()
            if belief is None:
                # A `q` (or the wake-up) ended the belief: the next barrier probes.
                self.metrics.idle_view_barriers.inc(kind, "retried")
                self._waiters[:0] = waiters
                return
            idle = belief.idle
        self.metrics.idle_view_barriers.inc(kind, "ok")
        _resolve(waiters, idle)

    def _install_belief(
        self, result: IdleProbed | None, incarnation: int, epoch: int, sent: float
    ) -> bool:
        verdict = self._beliefs.install(result, incarnation, epoch, sent)
        self.metrics.idle_view_probes.inc(verdict.value)
        return verdict is ProbeVerdict.IDLE

    def _current_belief(self) -> Belief | None:
        if not self._up:
            return None
        return self._beliefs.current(self._incarnation, self.clock())

    async def _barrier(self) -> bool:
        """True when a barrier sent after this call found the database idle."""
        if not self._up:
            return False
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiters.append(future)
        try:
            return await asyncio.wait_for(
                asyncio.shield(future), self.config.idle_view_ping_timeout_ms / 1000
            )
        except TimeoutError:
            self.metrics.idle_view_barriers.inc("any", "timeout")
            return False

    def _fail_waiters(self) -> None:
        waiters, self._waiters = self._waiters, []
        _resolve(waiters, False)

    # ------------------------------------------------------------ caches

    def cache_token(self) -> CacheToken | None:
        if not self._engaged or not self._up:
            return None
        return self._facts.token(self._incarnation, self.clock())

    def remember_credential(
        self, token: CacheToken | None, credential: PresentedCredential, worker_id: str
    ) -> None:
        """The database just authenticated this credential as this worker."""
        if token is None or not self._up:
            return
        fill = self._facts.remember_credential(
            token, credential, worker_id, incarnation=self._incarnation, now=self.clock()
        )
        if fill is Fill.OVERFLOW:
            self.metrics.idle_view_overflows.inc("credentials")

    def remember_session(self, token: CacheToken | None, session: dict[str, Any]) -> None:
        """A session projection from an `ok` open/heartbeat answer (active session)."""
        if token is None or not self._up:
            return
        fill = self._facts.remember_session(
            token, session, incarnation=self._incarnation, now=self.clock()
        )
        if fill is Fill.OVERFLOW:
            self.metrics.idle_view_overflows.inc("sessions")

    def credential_trusted(self, credential: PresentedCredential, worker_id: str) -> bool:
        """The cache may answer for this credential: confirmed by the database less
        than `idle_view_credential_max_age_ms` ago under this listener, same worker,
        same secret digest (constant-time compare)."""
        return self._facts.credential_trusted(
            credential, worker_id, incarnation=self._incarnation, now=self.clock()
        )

    def _session_ok(self, worker_id: str, session_id: str, generation: int) -> bool:
        return self._facts.session_ok(
            worker_id,
            session_id,
            generation,
            incarnation=self._incarnation,
            db_now_ms=self._beliefs.db_now_ms(self.clock()),
        )

    def _fill_allowed(
        self, token: CacheToken | None, credential_id: str | None, worker_id: str
    ) -> bool:
        """The answer of a call that started at `token` may fill the caches."""
        return (
            token is not None
            and self._up
            and self._facts.fill_allowed(
                token, self._incarnation, self.clock(), credential_id, worker_id
            )
        )

    # What the parts hold, under the names the view's tests read.
    @property
    def _seq(self) -> int:
        return self._facts.seq

    @property
    def _epoch(self) -> int:
        return self._beliefs.epoch

    @property
    def _credential_marks(self) -> Marks:
        return self._facts.credential_marks

    @property
    def _worker_marks(self) -> Marks:
        return self._facts.worker_marks

    @property
    def _auth(self) -> dict[str, AuthEntry]:
        return self._facts.auth

    @property
    def _sessions(self) -> dict[str, SessionFacts]:
        return self._facts.sessions

    # ------------------------------------------------------------ pulls

    def _cached_facts_hold(
        self, credential: PresentedCredential, worker_id: str, session_id: str, generation: int
    ) -> bool:
        return (
            self._engaged
            and self._up
            and self.credential_trusted(credential, worker_id)
            and (
                not self._beliefs.knows_db_clock
                or self._session_ok(worker_id, session_id, generation)
            )
        )

    async def try_idle(
        self, credential: PresentedCredential, worker_id: str, session_id: str, generation: int
    ) -> bool:
        """True when this pull may be answered `idle` without the database."""
        belief = self._current_belief()
        if not self._cached_facts_hold(credential, worker_id, session_id, generation) or (
            belief is not None and not belief.idle
        ):
            # Unknown credential/session, or known work: the database answers.
            self.metrics.idle_view_pulls.inc("database")
            return False
        # After the barrier every notification committed before this pull arrived
        # has been applied: re-check the cached facts under it.
        if (
            not await self._barrier()
            or not self._cached_facts_hold(credential, worker_id, session_id, generation)
            or not self._session_ok(worker_id, session_id, generation)
        ):
            self.metrics.idle_view_pulls.inc("database")
            return False
        self.metrics.idle_view_pulls.inc("view")
        return True


async def _probe(conn: psycopg.AsyncConnection[Any]) -> IdleProbed | None:
    """The probe's answer; None when it has a shape the view may not believe
    (counted as a probe error, nothing believed, the pulls go to the database)."""
    try:
        return await api.idle_probe().run_async(conn)
    except AnswerError:
        return None


def _resolve(waiters: list[asyncio.Future[bool]], value: bool) -> None:
    for future in waiters:
        if not future.done():
            future.set_result(value)
