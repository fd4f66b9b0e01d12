"""The idle view composed of its parts (service/idle_view.py), without
PostgreSQL: no listener connection is opened; the listener's (re)connects and
losses, its notifications and its probe answers are fed by hand, as the listen
loop feeds them (`_reset`, `_on_notify`, `_install_belief`)."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from typing import Any

from qinglong.db.answers import IdleProbed
from qinglong.service.config import IngressConfig
from qinglong.service.credentials import PresentedCredential
from qinglong.service.gateway import Gateway
from qinglong.service.idle_view import IdleView, ViewState
from qinglong.service.metrics import IngressMetrics

WORKER = str(uuid.UUID(int=7))
CRED = PresentedCredential("k" * 16, b"\x07" * 32)
DB_NOW_MS = 1_000_000


class FakeClock:
    def __init__(self) -> None:
        self.now = 500.0

    def __call__(self) -> float:
        return self.now


def _view(**config: Any) -> tuple[IdleView, FakeClock]:
    base = IngressConfig(
        dsn="",
        cert_file="",
        key_file="",
        client_ca_file="",
        idle_view_engage_rate_per_s=0,
        idle_view_ping_timeout_ms=50,
    )
    cfg = dataclasses.replace(base, **config)
    metrics = IngressMetrics()
    clock = FakeClock()
    view = IdleView(cfg, Gateway(cfg, metrics), metrics, clock=clock)
    view._engaged = True  # as `start` does, without its listen task
    view._reset(up=True)  # the listen loop's LISTEN committed
    return view, clock


def _learn(view: IdleView, *, idle: bool = True) -> None:
    """A probe answer, an authentication and a session projection."""
    view._install_belief(
        IdleProbed.parse({"idle": idle, "nowMs": DB_NOW_MS}),
        view._incarnation,
        view._epoch,
        view.clock(),
    )
    token = view.cache_token()
    view.remember_credential(token, CRED, WORKER)
    view.remember_session(
        token,
        {
            "workerId": WORKER,
            "sessionId": "s-1",
            "generation": 1,
            "expiresAtMs": DB_NOW_MS + 60_000,
        },
    )


def _facts_hold(view: IdleView) -> bool:
    return view._cached_facts_hold(CRED, WORKER, "s-1", 1) and view._session_ok(WORKER, "s-1", 1)


def test_the_view_answers_from_what_it_learned():
    view, _ = _view()
    _learn(view)
    assert view.view_state() is ViewState.IDLE and _facts_hold(view)
    busy, _ = _view()
    _learn(busy, idle=False)
    assert busy.view_state() is ViewState.BUSY


def test_a_lost_listener_drops_every_belief():
    """SPEC 17.2: the belief, the database clock, cached credentials and
    sessions, and every fill in flight are gone with the LISTEN connection."""
    view, _ = _view()
    _learn(view)
    in_flight = view.cache_token()
    view._reset(up=False)  # the listen loop lost its connection
    assert view.view_state() is ViewState.LISTENER_DOWN
    assert view.cache_token() is None
    assert not view.credential_trusted(CRED, WORKER) and view._sessions == {}
    view._reset(up=True)  # reconnected: a new incarnation starts with nothing
    assert view.view_state() is ViewState.UNKNOWN and not _facts_hold(view)
    assert view._beliefs.db_now_ms(view.clock()) is None
    view.remember_credential(in_flight, CRED, WORKER)  # an answer from before the loss
    assert not view.credential_trusted(CRED, WORKER)


def test_a_queue_notification_ends_the_belief_only():
    view, _ = _view()
    _learn(view)
    view._on_notify("q")
    assert view.view_state() is ViewState.UNKNOWN and _facts_hold(view)


def test_credential_and_session_notifications_drop_their_entries_only():
    view, _ = _view()
    _learn(view)
    view._on_notify("c:" + "z" * 16)
    view._on_notify(f"s:{uuid.UUID(int=8)}")
    assert _facts_hold(view) and view.view_state() is ViewState.IDLE
    view._on_notify(f"c:{CRED.credential_id}")
    assert not view.credential_trusted(CRED, WORKER) and WORKER in view._sessions
    _learn(view)
    view._on_notify(f"s:{WORKER}")
    assert not view.credential_trusted(CRED, WORKER) and WORKER not in view._sessions
    assert view.view_state() is ViewState.IDLE
    counted = view.metrics.idle_view_notifications
    assert (counted.value("q"), counted.value("c"), counted.value("s")) == (0, 2, 2)


def test_a_forged_payload_changes_nothing_and_is_counted():
    view, _ = _view()
    _learn(view)
    before = (view._seq, view._epoch, dict(view._worker_marks), dict(view._credential_marks))
    for payload in ("s:" + "x" * 7990, "anything", "Q", f"c:{CRED.credential_id.upper()}"):
        view._on_notify(payload)
    assert (
        view._seq,
        view._epoch,
        dict(view._worker_marks),
        dict(view._credential_marks),
    ) == before
    assert _facts_hold(view) and view.view_state() is ViewState.IDLE
    assert view.metrics.idle_view_notifications.value("invalid") == 4


def test_a_malformed_probe_answer_installs_no_belief():
    view, _ = _view()
    # A malformed answer is an AnswerError where the probe runs; the view then installs None.
    assert view._install_belief(None, view._incarnation, view._epoch, 0.0) is False
    assert view.view_state() is ViewState.UNKNOWN
    assert view.metrics.idle_view_probes.value("error") == 1


def test_pulls_the_cache_cannot_answer_go_to_the_database_without_waiting():
    async def scenario() -> list[bool]:
        unknown, _ = _view()  # nothing learned
        busy, _ = _view()
        _learn(busy, idle=False)  # known work
        down, _ = _view()
        _learn(down)
        down._reset(up=False)
        return [await view.try_idle(CRED, WORKER, "s-1", 1) for view in (unknown, busy, down)]

    assert asyncio.run(scenario()) == [False, False, False]


def test_waiting_pulls_are_failed_when_the_listener_is_lost_or_the_barrier_late():
    async def scenario() -> tuple[list[bool], bool, bool, int, float]:
        view, _ = _view(idle_view_ping_timeout_ms=5_000)
        _learn(view)
        pulls = [asyncio.create_task(view.try_idle(CRED, WORKER, "s-1", 1)) for _ in range(3)]
        await asyncio.sleep(0.01)
        waiting = len(view._waiters)
        view._reset(up=False)  # the listen loop's cleanup after a loss
        view._fail_waiters()
        failed = list(await asyncio.gather(*pulls))
        down = await view._barrier()  # no listener: no wait at all
        late_view, _ = _view(idle_view_ping_timeout_ms=20)
        _learn(late_view)
        late = await late_view._barrier()  # no barrier comes back in time
        timeouts = late_view.metrics.idle_view_barriers.value("any", "timeout")
        return failed, down, late, waiting, timeouts

    failed, down, late, waiting, timeouts = asyncio.run(scenario())
    assert waiting == 3 and failed == [False, False, False]
    assert (down, late, timeouts) == (False, False, 1)
