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
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum, StrEnum
from typing import Any

import psycopg

from qinglong.db import api
from qinglong.service.config import IngressConfig
from qinglong.service.credentials import PresentedCredential
from qinglong.service.gateway import Gateway, connection_kwargs
from qinglong.service.metrics import IngressMetrics

log = logging.getLogger("qinglong.ingress.idle_view")

CHANNEL = "ql_dispatch"
_RECONNECT_MIN_S = 0.1
_RECONNECT_MAX_S = 2.0
# A barrier query still running after this many barrier timeouts means the
# listener is broken (the waiting pulls went to the database long before).
_TIMEOUTS_BEFORE_RESTART = 10
# The backlog drain after a barrier: psycopg hands out what it already parsed.
_DRAIN_S = 0.001
# A cache fill must come back within this long of its token (a database call's
# own deadline is a few seconds); the per-key change marks older than this are
# forgotten, since no fill they could veto is still accepted.
_FILL_HORIZON_S = 30.0
_CHANGE_MARKS_PRUNE_AT = 4096
# Hard caps on what the view holds (see "Forged notifications" above). Marks
# come from notifications anyone who may connect can send: when one table is
# full of marks younger than the fill horizon, it is emptied and every fill in
# flight is refused instead. The caches fill only from database answers; when
# one is full, new entries are not kept (those workers' pulls go to the
# database).
MAX_CHANGE_MARKS = 16_384
MAX_CACHED = 20_000
# Exactly the payloads the database sends on the channel
# (ql_private.idle_view_notify, ql.disable_worker, ql.enable_worker): `q`,
# `c:` + a credential id (CHECK `^[a-z0-9]{16}$`), `s:` + a worker id as
# PostgreSQL prints a uuid. Anything else is dropped unread.
_PAYLOAD_MAX_CHARS = 38
_PAYLOAD = re.compile(r"q|c:[a-z0-9]{16}"
                      r"|s:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")

# The database's idle envelope for an empty queue (ql_private.idle_result as
# scan_and_claim returns it for `no_candidates`), without `retryAfterMs`.
IDLE_RESULT: dict[str, Any] = {
    "status": "idle", "reason": "no_candidates",
    "stats": {"pages": 1, "candidates": 0, "claimAttempts": 0, "races": 0,
              "mismatches": {"executor": 0, "label": 0, "runtime": 0, "capacity": 0}},
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


@dataclass(frozen=True)
class CacheToken:
    """Taken before a database call whose answer may fill a cache."""

    incarnation: int
    seq: int  # `c:`/`s:` notifications received so far (under this incarnation)
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


@dataclass(frozen=True)
class _DbClock:
    """The database's clock (`nowMs` of a probe) pinned to the monotonic instant
    the probe was *sent*: the database read its clock after that instant, so
    `now_ms` is never behind the database's own clock (a session is judged
    expired no later than the database judges it), whatever the local wall
    clock says or does."""

    db_ms: int
    at: float  # monotonic

    def now_ms(self, monotonic_now: float) -> float:
        return self.db_ms + (monotonic_now - self.at) * 1000


@dataclass
class _Belief:
    idle: bool
    incarnation: int
    epoch: int  # the `q` count when its probe was sent
    formed_at: float  # monotonic, when the probe was sent
    wake_at: float | None  # monotonic


@dataclass
class IdleView:
    config: IngressConfig
    gateway: Gateway
    metrics: IngressMetrics
    # The view's only clock (monotonic; injected by tests). It never reads the
    # wall clock: expiry times are the database's and are compared with the
    # database's clock (`_DbClock`).
    clock: Callable[[], float] = time.monotonic

    _engaged: bool = False
    _closed: bool = False
    _up: bool = False
    _incarnation: int = 0
    _seq: int = 0  # bumped by every `c:`/`s:` notification
    # The `_seq` and time of the last `c:` per credential id / `s:` per worker id.
    _credential_marks: dict[str, tuple[int, float]] = field(default_factory=dict)
    _worker_marks: dict[str, tuple[int, float]] = field(default_factory=dict)
    _belief: _Belief | None = None
    _epoch: int = 0  # bumped by every `q` notification
    # Fills whose token's seq is below this are refused (a mark table overflowed).
    _veto_before: int = 0
    _db_clock: _DbClock | None = None  # from the last probe under this incarnation
    _auth: dict[str, _AuthEntry] = field(default_factory=dict)
    _worker_credentials: dict[str, set[str]] = field(default_factory=dict)
    _sessions: dict[str, _SessionFacts] = field(default_factory=dict)
    _waiters: list[asyncio.Future[bool]] = field(default_factory=list)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _last_barrier: float = float("-inf")
    _last_probe: float = float("-inf")
    _last_confirm: float = float("-inf")
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
                log.warning("idle view listener lost; pulls go to the database",
                            extra={"event": "idle_view.listener_lost"})
                await asyncio.sleep(delay)
                delay = min(delay * 2, _RECONNECT_MAX_S)

    def _listener_kwargs(self) -> dict[str, Any]:
        kwargs = connection_kwargs(self.config)
        kwargs.pop("options", None)  # no statement_timeout: the connection mostly waits
        kwargs.update(autocommit=True, prepare_threshold=None,
                      application_name="qinglong-ingress-listener",
                      keepalives=1, keepalives_idle=5, keepalives_interval=2,
                      keepalives_count=3)
        return kwargs

    async def _serve(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """Receive notifications; run a barrier whenever pulls wait for one."""
        interval = self.config.idle_view_ping_interval_ms / 1000
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
        due = self._last_barrier + self.config.idle_view_ping_interval_ms / 1000
        if self._current_belief() is None:
            due = max(due, self._last_probe + self.config.idle_view_probe_min_interval_ms / 1000)
        return due - now

    # ------------------------------------------------------------ re-confirmation

    def _confirm_due(self) -> bool:
        """Cached credentials past half their trust period, and no re-confirmation
        in the last quarter of it."""
        max_age_s = self.config.idle_view_credential_max_age_ms / 1000
        now = self.clock()
        if max_age_s <= 0 or now - self._last_confirm < max_age_s / 4:
            return False
        return any(now - e.confirmed_at >= max_age_s / 2 for e in self._auth.values())

    async def _reconfirm(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """Re-confirm the aging cache entries in one read-only query
        (`ql.confirm_credentials`) on the LISTEN connection, so a worker polling
        every 2-3 s is not sent to the database every 5 s only to re-authenticate.
        A confirmed entry's trust period restarts when the query was sent; one the
        database no longer allows is dropped; an entry whose credential or worker
        was notified meanwhile keeps its old period (the whole answer is discarded
        if the listener was lost)."""
        now = self.clock()
        self._last_confirm = now
        half = self.config.idle_view_credential_max_age_ms / 2000
        aging = [(cid, e) for cid, e in self._auth.items() if now - e.confirmed_at >= half]
        aging = aging[:1024]
        incarnation, seq = self._incarnation, self._seq
        confirmed = await api.confirm_credentials(
            credential_ids=[cid for cid, _ in aging],
            secret_digests=[e.secret_digest for _, e in aging],
            worker_ids=[e.worker_id for _, e in aging]).run_async(conn)
        async for notify in conn.notifies(timeout=_DRAIN_S):
            self._on_notify(notify.payload)
        if incarnation != self._incarnation:
            self.metrics.idle_view_barriers.inc("confirm", "discarded")
            return
        allowed = set(confirmed or ())
        for credential_id, entry in aging:
            if self._auth.get(credential_id) is not entry:
                continue  # replaced by a newer answer, or dropped by a notification
            if self._changed_since(seq, credential_id, entry.worker_id):
                continue  # notified while the query ran: its answer may be stale
            if credential_id in allowed:
                entry.confirmed_at = now
            else:
                self._forget_credential(credential_id)
        self.metrics.idle_view_barriers.inc("confirm", "ok")

    def _reset(self, *, up: bool) -> None:
        """A new (or lost) incarnation: forget everything learned before it."""
        self._up = up
        self._incarnation += 1
        self._belief = None
        self._db_clock = None
        self._auth.clear()
        self._worker_credentials.clear()
        self._sessions.clear()
        self._credential_marks.clear()
        self._worker_marks.clear()

    def _on_notify(self, payload: str) -> None:
        notification = parse_notification(payload)
        if notification is None:
            # Not sent by the database (forged, or junk): dropped unread.
            self.metrics.idle_view_notifications.inc("invalid")
            return
        kind, ident = notification.kind, notification.ident
        self.metrics.idle_view_notifications.inc(kind.value)
        if kind is NotificationKind.CREDENTIAL:
            self._mark(self._credential_marks, ident)
            self._forget_credential(ident)
        elif kind is NotificationKind.SESSION:
            # The worker's session changed (replaced, closed — also by an operator
            # disabling the worker): forget its session and its credentials.
            self._mark(self._worker_marks, ident)
            self._sessions.pop(ident, None)
            for credential_id in self._worker_credentials.pop(ident, set()):
                self._auth.pop(credential_id, None)
        else:  # `q`: the belief no longer holds
            self._epoch += 1

    # ------------------------------------------------------------ barrier

    async def _run_barrier(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """One read-only query on the LISTEN connection for every waiting pull.

        Everyone waiting now arrived before the query is sent. No valid belief:
        the query is the probe (its snapshot follows every waiter's arrival, so
        its answer is the database's answer for them). Otherwise `SELECT 1`: the
        notifications committed before it are applied, then the belief decides."""
        waiters, self._waiters = self._waiters, []
        probe = self._current_belief() is None
        incarnation, epoch = self._incarnation, self._epoch
        sent = self.clock()
        self._last_barrier = sent
        if probe:
            self._last_probe = sent
        limit = _TIMEOUTS_BEFORE_RESTART * self.config.idle_view_ping_timeout_ms / 1000
        try:
            async with asyncio.timeout(limit):
                if probe:
                    result = await api.idle_probe().run_async(conn)
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

    def _install_belief(self, result: Any, incarnation: int, epoch: int, sent: float) -> bool:
        if not isinstance(result, dict) or not isinstance(result.get("nowMs"), int):
            self.metrics.idle_view_probes.inc("error")
            return False
        self._db_clock = _DbClock(result["nowMs"], sent)
        wake_at = None
        if isinstance(result.get("wakeAtMs"), int):
            wake_at = sent + (result["wakeAtMs"] - result["nowMs"]) / 1000
        idle = result.get("idle") is True
        # A `q` that arrived with this probe's answer may postdate its snapshot:
        # the belief then starts stale (its epoch is the one at sending).
        self._belief = _Belief(idle, incarnation, epoch, sent, wake_at)
        self.metrics.idle_view_probes.inc("idle" if idle else "busy")
        return idle

    def _current_belief(self) -> _Belief | None:
        belief = self._belief
        if (belief is None or belief.incarnation != self._incarnation or not self._up
                or belief.epoch != self._epoch):
            return None
        now = self.clock()
        if now - belief.formed_at >= self.config.idle_view_max_staleness_ms / 1000:
            return None
        if belief.wake_at is not None and now >= belief.wake_at:
            return None
        return belief

    async def _barrier(self) -> bool:
        """True when a barrier sent after this call found the database idle."""
        if not self._up:
            return False
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiters.append(future)
        try:
            return await asyncio.wait_for(asyncio.shield(future),
                                          self.config.idle_view_ping_timeout_ms / 1000)
        except TimeoutError:
            self.metrics.idle_view_barriers.inc("any", "timeout")
            return False

    def _fail_waiters(self) -> None:
        waiters, self._waiters = self._waiters, []
        _resolve(waiters, False)

    # ------------------------------------------------------------ caches

    def _mark(self, marks: dict[str, tuple[int, float]], ident: str) -> None:
        """Note a `c:`/`s:` notification about `ident` (vetoes fills in flight).

        At most `MAX_CHANGE_MARKS` per table: a table full of marks younger than
        the fill horizon (a flood of forged ids) is emptied, and every fill whose
        call started before this notification is refused instead — the marks
        only ever veto fills, so forgetting them is safe once no such fill can
        be accepted."""
        self._seq += 1
        now = self.clock()
        marks.pop(ident, None)  # re-inserted last: the dict stays in time order
        if len(marks) >= _CHANGE_MARKS_PRUNE_AT:
            while marks:
                oldest = next(iter(marks))
                if now - marks[oldest][1] < _FILL_HORIZON_S:
                    break
                del marks[oldest]
        if len(marks) >= MAX_CHANGE_MARKS:
            marks.clear()
            self._veto_before = self._seq
            self.metrics.idle_view_overflows.inc("marks")
        marks[ident] = (self._seq, now)

    def _changed_since(self, seq: int, credential_id: str | None, worker_id: str) -> bool:
        """A `c:` for the credential or an `s:` for the worker came after `seq`
        (or marks were forgotten after `seq`: then anything may have)."""
        if seq < self._veto_before:
            return True
        credential = self._credential_marks.get(credential_id) if credential_id else None
        worker = self._worker_marks.get(worker_id)
        return ((credential is not None and credential[0] > seq)
                or (worker is not None and worker[0] > seq))

    def _fill_allowed(self, token: CacheToken | None, credential_id: str | None,
                      worker_id: str) -> bool:
        """The answer of a call that started at `token` may fill the caches."""
        return (token is not None and token.incarnation == self._incarnation and self._up
                and self.clock() - token.taken_at < _FILL_HORIZON_S
                and not self._changed_since(token.seq, credential_id, worker_id))

    def cache_token(self) -> CacheToken | None:
        if not self._engaged or not self._up:
            return None
        return CacheToken(self._incarnation, self._seq, self.clock())

    def remember_credential(self, token: CacheToken | None, credential: PresentedCredential,
                            worker_id: str) -> None:
        """The database just authenticated this credential as this worker."""
        if token is None or not self._fill_allowed(token, credential.credential_id, worker_id):
            return
        credential_id = credential.credential_id
        self._forget_credential(credential_id)
        if len(self._auth) >= MAX_CACHED:
            self.metrics.idle_view_overflows.inc("credentials")
            return
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
        if token is None:
            return
        try:
            facts = _SessionFacts(str(session["sessionId"]), int(session["generation"]),
                                  int(session["expiresAtMs"]), token.incarnation)
            worker_id = str(session["workerId"])
        except (KeyError, TypeError, ValueError):
            return
        if not self._fill_allowed(token, None, worker_id):
            return
        if worker_id not in self._sessions and len(self._sessions) >= MAX_CACHED:
            self.metrics.idle_view_overflows.inc("sessions")
            return
        self._sessions[worker_id] = facts

    def credential_trusted(self, credential: PresentedCredential, worker_id: str) -> bool:
        """The cache may answer for this credential: confirmed by the database less
        than `idle_view_credential_max_age_ms` ago under this listener, same worker,
        same secret digest (constant-time compare)."""
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
        facts, db_clock = self._sessions.get(worker_id), self._db_clock
        if (facts is None or facts.incarnation != self._incarnation
                or facts.session_id != session_id or facts.generation != generation
                or db_clock is None):
            return False
        # Both sides on the database's clock: never the local wall clock.
        db_now_ms = db_clock.now_ms(self.clock())
        return facts.expires_at_ms - self.config.idle_view_session_margin_ms > db_now_ms

    # ------------------------------------------------------------ pulls

    def _cached_facts_hold(self, credential: PresentedCredential, worker_id: str,
                           session_id: str, generation: int) -> bool:
        return (self._engaged and self._up and self.credential_trusted(credential, worker_id)
                and (self._db_clock is None
                     or self._session_ok(worker_id, session_id, generation)))

    async def try_idle(self, credential: PresentedCredential, worker_id: str,
                       session_id: str, generation: int) -> bool:
        """True when this pull may be answered `idle` without the database."""
        belief = self._current_belief()
        if (not self._cached_facts_hold(credential, worker_id, session_id, generation)
                or (belief is not None and not belief.idle)):
            # Unknown credential/session, or known work: the database answers.
            self.metrics.idle_view_pulls.inc("database")
            return False
        # After the barrier every notification committed before this pull arrived
        # has been applied: re-check the cached facts under it.
        if (not await self._barrier()
                or not self._cached_facts_hold(credential, worker_id, session_id, generation)
                or not self._session_ok(worker_id, session_id, generation)):
            self.metrics.idle_view_pulls.inc("database")
            return False
        self.metrics.idle_view_pulls.inc("view")
        return True


def _resolve(waiters: list[asyncio.Future[bool]], value: bool) -> None:
    for future in waiters:
        if not future.done():
            future.set_result(value)
