"""Idle pulls answered from the replica's idle view (service/idle_view.py).

Real PostgreSQL, real TLS (tests/py/ingress_harness.py), the view engaged from
startup (`idle_view_engage_rate_per_s=0`). Each test first drives the view to
"idle" (a confirmed credential + session and an idle probe), then checks one
safety property against the database's own answer.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
import uuid
from typing import Any

import psycopg
import pytest

from qinglong.db import api
from qinglong.service.idle_view import ViewState
from tests.py import ingress_harness
from tests.py.ingress_harness import (
    Agent,
    IngressThread,
    ingress_config,
    make_agent,
    open_body,
    post,
    pull_body,
)
from tests.py.provision import new_token

ingress_dsn = ingress_harness.ingress_dsn
prov = ingress_harness.prov
start_ingress_thread = ingress_harness.start_ingress_thread
su_conn = ingress_harness.su_conn
test_pki = ingress_harness.test_pki

PULL = "/v1/offers/pull"


@pytest.fixture
def viewed(start_ingress_thread, test_pki, ingress_dsn) -> IngressThread:
    server = start_ingress_thread(
        ingress_config(test_pki, ingress_dsn, idle_view_engage_rate_per_s=0)
    )
    _wait(lambda: _view(server).view_state() >= ViewState.UNKNOWN, "listener up")
    return server


def _view(server: IngressThread) -> Any:
    assert server.running is not None
    return server.running.state.idle_view


def _wait(check: Any, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def _counter(server: IngressThread, name: str, label: str = "") -> int:
    text = server.metrics_text()
    pattern = (
        "^" + re.escape(name) + (r"\{" + re.escape(label) + r"\}" if label else "") + r" (\d+)$"
    )
    match = re.search(pattern, text, re.M)
    return int(match.group(1)) if match else 0


def _db_calls(server: IngressThread, function: str) -> int:
    return _counter(
        server, "qinglong_ingress_db_call_duration_seconds_count", f'function="{function}"'
    )


def _from_view(server: IngressThread) -> int:
    return _counter(server, "qinglong_ingress_idle_view_pulls_total", 'source="view"')


def _open(server: IngressThread, agent: Agent) -> dict[str, Any]:
    reply = post(server.port, "/v1/sessions", open_body(agent), ctx=agent.ctx, token=agent.token)
    assert reply.status == 201, reply.body
    return dict(reply.json)


def _pull(server: IngressThread, agent: Agent, session: dict[str, Any], **kw: Any) -> Any:
    return post(
        server.port, PULL, pull_body(agent, session, **kw), ctx=agent.ctx, token=agent.token
    )


def _until_view_answers(server: IngressThread, agent: Agent, session: dict[str, Any]) -> None:
    """Pull (idle) until one is answered from the view."""

    def answered() -> bool:
        before = _from_view(server)
        reply = _pull(server, agent, session)
        assert reply.status == 200 and reply.json["status"] == "idle", reply.body
        return _from_view(server) > before

    _wait(answered, "a pull answered from the view")


def test_idle_pulls_come_from_the_view_without_db_calls(viewed, prov, test_pki):
    agent = make_agent(prov, test_pki, "w-idle")
    session = _open(viewed, agent)
    db_idle = _pull(viewed, agent, session)  # first pull: the database answers
    assert db_idle.status == 200 and db_idle.json["status"] == "idle"
    _until_view_answers(viewed, agent, session)

    calls = _db_calls(viewed, "pull_offer")
    for _ in range(5):
        reply = _pull(viewed, agent, session)
        assert reply.status == 200
        # Indistinguishable from the database's idle answer (retry guidance aside).
        assert {k: v for k, v in reply.json.items() if k != "retryAfterMs"} == {
            k: v for k, v in db_idle.json.items() if k != "retryAfterMs"
        }
        assert 2000 <= reply.json["retryAfterMs"] <= 3000
    assert _db_calls(viewed, "pull_offer") == calls
    assert _view(viewed).view_state() == ViewState.IDLE
    text = viewed.metrics_text()
    assert "qinglong_ingress_idle_view_listener_up 1" in text
    assert re.search(
        r"^qinglong_ingress_idle_view_barriers_total"
        r'\{kind="sync",outcome="ok"\} [1-9]',
        text,
        re.M,
    )


def test_enqueued_run_is_offered_on_the_very_next_pull(viewed, prov, test_pki, su_conn):
    agents = [make_agent(prov, test_pki, f"w-barrier-{i}") for i in range(6)]
    sessions = [_open(viewed, a) for a in agents]
    task = prov.task("t")
    for round_no in range(3):
        for agent, session in zip(agents, sessions, strict=True):
            _pull(viewed, agent, session)
        _until_view_answers(viewed, agents[0], sessions[0])
        prov.enqueue(task, count=len(agents))  # committed when this returns
        # Truly concurrent pulls, all arriving after the enqueue committed.
        replies: list[Any] = [None] * len(agents)
        start = threading.Barrier(len(agents))

        def pull(i: int, start: threading.Barrier = start, replies: list[Any] = replies) -> None:
            start.wait()
            replies[i] = _pull(viewed, agents[i], sessions[i])

        threads = [threading.Thread(target=pull, args=(i,)) for i in range(len(agents))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        statuses = [(r.status, r.json["status"]) for r in replies]
        assert statuses == [(200, "offered")] * len(agents), (round_no, statuses)
        runs = {r.json["candidate"]["runId"] for r in replies}
        assert len(runs) == len(agents)
        su_conn.execute(
            "UPDATE ql_private.run_leases SET released_at = clock_timestamp(),"
            " release_reason = 'completed' WHERE released_at IS NULL"
        )
        su_conn.execute(
            "UPDATE ql_private.runs SET state = 'succeeded' WHERE state = 'dispatching'"
        )


def test_revoked_credential_is_refused_on_the_next_pull(viewed, prov, test_pki, su_conn):
    agent = make_agent(prov, test_pki, "w-revoke")
    session = _open(viewed, agent)
    _pull(viewed, agent, session)
    _until_view_answers(viewed, agent, session)
    api.revoke_credential(credential_id=agent.worker.credential_id).run(su_conn)
    reply = _pull(viewed, agent, session)
    assert (reply.status, reply.json["reason"]) == (401, "revoked_credential")
    # And it stays refused (the cache entry is gone, not just skipped once).
    for _ in range(3):
        assert _pull(viewed, agent, session).status == 401


def test_session_replaced_elsewhere_is_409(
    viewed, start_ingress_thread, prov, test_pki, ingress_dsn
):
    other = start_ingress_thread(
        ingress_config(test_pki, ingress_dsn, idle_view_engage_rate_per_s=0)
    )
    agent = make_agent(prov, test_pki, "w-replace")
    session = _open(viewed, agent)
    _pull(viewed, agent, session)
    _until_view_answers(viewed, agent, session)
    newer = _open(other, agent)  # replaced through another replica
    assert newer["generation"] == session["generation"] + 1
    reply = _pull(viewed, agent, session)
    assert (reply.status, reply.json["reason"]) == (409, "session_replaced")
    assert _pull(viewed, agent, newer).status == 200


def test_lost_response_retry_gets_the_same_offer_never_idle(viewed, prov, test_pki):
    agent = make_agent(prov, test_pki, "w-retry")
    bystander = make_agent(prov, test_pki, "w-bystander")
    session, other = _open(viewed, agent), _open(viewed, bystander)
    _pull(viewed, bystander, other)
    _until_view_answers(viewed, bystander, other)
    task = prov.task("t")
    prov.enqueue(task, count=1)
    offer_id, token = str(uuid.uuid4()), new_token()
    first = _pull(viewed, agent, session, offer_id=offer_id, token=token)
    assert first.json["status"] == "offered"  # ... and the worker never saw it
    # The queue is empty now; idle pulls keep coming; the view re-probes.
    for _ in range(10):
        assert _pull(viewed, bystander, other).json["status"] == "idle"
        time.sleep(0.1)
    assert _view(viewed).view_state() != ViewState.IDLE  # a live unstarted lease exists
    for _ in range(3):
        retry = _pull(viewed, agent, session, offer_id=offer_id, token=token)
        assert retry.status == 200 and retry.json == first.json


def test_listener_killed_falls_back_to_db_and_reconnects(viewed, prov, test_pki, su_conn):
    agent = make_agent(prov, test_pki, "w-listener")
    session = _open(viewed, agent)
    _pull(viewed, agent, session)
    _until_view_answers(viewed, agent, session)
    killed = su_conn.execute(
        "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
        " WHERE application_name = 'qinglong-ingress-listener'"
        " AND datname = current_database()) t"
    ).fetchone()
    assert killed is not None and killed[0] == 1
    _wait(
        lambda: (
            _counter(viewed, "qinglong_ingress_idle_view_listener_events_total", 'event="lost"')
            >= 1
        ),
        "listener loss noticed",
    )
    # SPEC 17.2: every belief is dropped with the listener (notifications sent
    # meanwhile are gone); none is formed again until a pull makes it probe.
    assert _view(viewed).view_state() in (ViewState.LISTENER_DOWN, ViewState.UNKNOWN)
    probes = _counter(
        viewed, "qinglong_ingress_idle_view_barriers_total", 'kind="probe",outcome="ok"'
    )
    # Everything learned under the lost listener is gone: pulls go to the database.
    calls = _db_calls(viewed, "pull_offer")
    assert _pull(viewed, agent, session).json["status"] == "idle"
    assert _db_calls(viewed, "pull_offer") == calls + 1
    _wait(
        lambda: (
            _counter(
                viewed, "qinglong_ingress_idle_view_listener_events_total", 'event="connected"'
            )
            >= 2
        ),
        "listener reconnected",
    )
    # A heartbeat re-confirms the session under the new listener; then the view serves again.
    beat = {
        "schema": "qinglong/session-heartbeat-request@v1",
        "workerId": agent.worker_id,
        "sessionId": session["sessionId"],
        "generation": session["generation"],
    }
    assert (
        post(viewed.port, "/v1/sessions/heartbeat", beat, ctx=agent.ctx, token=agent.token).status
        == 200
    )
    _until_view_answers(viewed, agent, session)
    # ... and it answered only after probing again under the new listener.
    assert (
        _counter(viewed, "qinglong_ingress_idle_view_barriers_total", 'kind="probe",outcome="ok"')
        > probes
    )


def test_dormant_below_the_engage_rate(start_ingress_thread, test_pki, ingress_dsn, prov):
    server = start_ingress_thread(ingress_config(test_pki, ingress_dsn))
    agent = make_agent(prov, test_pki, "w-dormant")
    session = _open(server, agent)
    calls = _db_calls(server, "pull_offer")
    for _ in range(3):
        assert _pull(server, agent, session).json["status"] == "idle"
    assert _db_calls(server, "pull_offer") == calls + 3
    assert _view(server).view_state() == ViewState.DORMANT
    assert _db_calls(server, "idle_probe") == 0
    assert "qinglong_ingress_idle_view_barriers_total{" not in server.metrics_text()


def test_a_delayed_run_is_idle_before_its_time_and_offered_after(viewed, prov, test_pki, su_conn):
    """The view's idle belief ends at the earliest scheduled run's due time
    (`ql.idle_probe` wakeAtMs): before it, pulls are idle (from the view too);
    from it on, the very next pull is offered — no sweeper runs here."""
    agent = make_agent(prov, test_pki, "w-delayed")
    session = _open(viewed, agent)
    task = prov.task("t")
    (run_id,) = (
        api.enqueue_runs(task_id=task, priority=0, count=1, delay_ms=3000)
        .run(su_conn)
        .doc["runIds"]
    )
    due = time.monotonic() + 3.0
    _until_view_answers(viewed, agent, session)
    while time.monotonic() < due - 0.5:
        early = _pull(viewed, agent, session)
        assert early.status == 200 and early.json["status"] == "idle", early.body
        time.sleep(0.2)
    time.sleep(max(0.0, due - time.monotonic()) + 0.05)
    offered = _pull(viewed, agent, session, offer_id=str(uuid.uuid4()))
    assert offered.status == 200 and offered.json["status"] == "offered", offered.body
    assert offered.json["candidate"]["runId"] == run_id


class FakeClock:
    """The view's monotonic clock, moved by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def _view_with_listener(config: Any, **kwargs: Any) -> Any:
    """An engaged IdleView on its own gateway, once its real LISTEN connection is up."""
    from qinglong.service.gateway import Gateway
    from qinglong.service.idle_view import IdleView
    from qinglong.service.metrics import IngressMetrics

    metrics = IngressMetrics()
    view = IdleView(config, Gateway(config, metrics), metrics, **kwargs)
    await view.start()
    deadline = time.monotonic() + 10
    while view.view_state() < ViewState.UNKNOWN:
        assert time.monotonic() < deadline, "listener up"
        await asyncio.sleep(0.02)
    return view


def test_cached_credential_is_trusted_for_at_most_5_s(test_pki, ingress_dsn, prov):
    """SPEC §5: a cached authentication fact (credential -> worker, secret digest,
    not revoked, worker not disabled) is trusted for < 5 s after the database
    confirmed it, whatever the notifications say; then the database is asked."""
    from qinglong.service.credentials import PresentedCredential
    from tests.py.provision import digest

    config = ingress_config(test_pki, ingress_dsn, idle_view_engage_rate_per_s=0)
    assert config.idle_view_credential_max_age_ms == 5000
    worker = prov.worker("w-age")
    credential = PresentedCredential(worker.credential_id, digest(worker.secret))
    other_secret = PresentedCredential(worker.credential_id, digest(worker.secret + "x"))
    clock = FakeClock()

    async def scenario() -> list[bool]:
        view = await _view_with_listener(config, clock=clock)
        try:
            token = view.cache_token()  # taken when the confirming call is sent
            clock.now += 0.2  # the database's answer comes back
            view.remember_credential(token, credential, worker.worker_id)
            seen = [
                view.credential_trusted(credential, worker.worker_id),
                view.credential_trusted(other_secret, worker.worker_id),
                view.credential_trusted(credential, str(uuid.uuid4())),
            ]
            clock.now = token.taken_at + 4.999
            seen.append(view.credential_trusted(credential, worker.worker_id))
            clock.now = token.taken_at + 5.0
            seen.append(view.credential_trusted(credential, worker.worker_id))
            clock.now = token.taken_at + 0.1  # gone for good, not merely skipped
            seen.append(view.credential_trusted(credential, worker.worker_id))
            return seen
        finally:
            await view.close()

    assert asyncio.run(scenario()) == [True, False, False, True, False, False]


def test_session_expiry_is_judged_on_the_database_clock_not_the_wall_clock(
    test_pki, ingress_dsn, prov, su_conn, monkeypatch
):
    """A session's expiresAtMs is the database's clock; the view compares it
    with the database's clock too — a probe's `nowMs`, advanced by the
    monotonic clock from when the probe was sent — and never with the local
    wall clock. Fault injected: this process's wall clock steps hours away
    (as a bad NTP step would) after the view learned the session. A session
    live by the database is still answered from the view; one whose expiry has
    passed by the database's clock is not answered idle from belief (the
    database refuses it)."""
    from qinglong.service.credentials import PresentedCredential
    from tests.py.provision import DEFAULT_CAPABILITIES, canonical_bytes, digest

    # One probe for the whole test (no `q` comes, the belief lasts a minute), so
    # a wall-clock reading taken with it could not be refreshed either.
    config = ingress_config(
        test_pki,
        ingress_dsn,
        idle_view_engage_rate_per_s=0,
        idle_view_max_staleness_ms=60_000,
        idle_view_session_margin_ms=0,
    )
    worker = prov.worker("w-skew")
    credential = PresentedCredential(worker.credential_id, digest(worker.secret))
    skew_s = [0.0]
    real_time = time.time
    monkeypatch.setattr(time, "time", lambda: real_time() + skew_s[0])

    def session_row() -> dict[str, Any]:
        row = su_conn.execute(
            "SELECT ql_private.session_projection(ws)"
            " FROM ql_private.worker_sessions ws WHERE ws.worker_id = %s",
            (worker.worker_id,),
        ).fetchone()
        assert row is not None
        return dict(row[0])

    async def scenario() -> tuple[list[bool], list[int]]:
        view = await _view_with_listener(config)
        try:
            token = view.cache_token()
            opened = prov.call(
                api.open_session(
                    credential_id=worker.credential_id,
                    secret_digest=worker.secret_digest,
                    worker_id=worker.worker_id,
                    capabilities_canonical=canonical_bytes(DEFAULT_CAPABILITIES),
                )
            ).doc["session"]
            view.remember_credential(token, credential, worker.worker_id)
            view.remember_session(token, opened)
            pulls = view.metrics.idle_view_pulls

            async def ask() -> bool:
                return await view.try_idle(
                    credential, worker.worker_id, opened["sessionId"], opened["generation"]
                )

            seen = [await ask()]  # the probe: the database's clock read here
            skew_s[0] = 3 * 3600.0  # the wall clock jumps 3 h ahead
            seen.append(await ask())  # live by the database: still from the view
            # The session ages in the database without a notification (as time
            # passing does): 300 ms left, learned by the view, then 600 ms pass.
            su_conn.execute("SET session_replication_role = replica")
            su_conn.execute(
                "UPDATE ql_private.worker_sessions SET expires_at ="
                " clock_timestamp() + interval '300 ms' WHERE worker_id = %s",
                (worker.worker_id,),
            )
            su_conn.execute("RESET session_replication_role")
            token = view.cache_token()
            view.remember_session(token, session_row())
            await asyncio.sleep(0.6)
            skew_s[0] = -3 * 3600.0  # and 3 h behind
            seen.append(await ask())  # expired by the database: not from the view
            return seen, [int(pulls.value("view")), int(pulls.value("database"))]
        finally:
            await view.close()

    seen, (from_view, to_database) = asyncio.run(scenario())
    assert seen == [True, True, False]
    assert (from_view, to_database) == (2, 1)
    # The database agrees: the session is expired (QL012), not idle.
    with pytest.raises(psycopg.Error) as refused:
        api.heartbeat_session(
            credential_id=worker.credential_id,
            secret_digest=worker.secret_digest,
            worker_id=worker.worker_id,
            session_id=session_row()["sessionId"],
            generation=session_row()["generation"],
        ).run(su_conn)
    assert refused.value.sqlstate == "QL012"


def test_a_notification_vetoes_only_the_fills_it_is_about(test_pki, ingress_dsn, prov, su_conn):
    """A `c:`/`s:` notification that arrives while a database call runs drops
    that call's answer for *its* credential or worker only. (Dropping every fill
    in flight on any notification kept a fleet that reopens its sessions — each
    replacement notifies `s:` — from ever filling the caches.)"""
    from qinglong.service.credentials import PresentedCredential
    from qinglong.service.idle_view import IdleView
    from tests.py.provision import digest

    config = ingress_config(test_pki, ingress_dsn, idle_view_engage_rate_per_s=0)
    worker = prov.worker("w-veto")
    credential = PresentedCredential(worker.credential_id, digest(worker.secret))
    other_worker, other_credential = str(uuid.uuid4()), "zzzzzzzzzzzzzzzz"

    async def notify(view: IdleView, *payloads: str) -> None:
        counter = view.metrics.idle_view_notifications
        before = {k: counter.value(k) for k in ("c", "s")}
        for payload in payloads:
            su_conn.execute("SELECT pg_notify('ql_dispatch', %s)", (payload,))
        expected = {k: before[k] + sum(p.startswith(k + ":") for p in payloads) for k in before}
        deadline = time.monotonic() + 10
        while {k: counter.value(k) for k in before} != expected:
            assert time.monotonic() < deadline, "notifications delivered"
            await asyncio.sleep(0.01)

    async def fill_after(view: IdleView, *payloads: str) -> tuple[bool, bool]:
        """A call's token, the notifications while it runs, then its answer's
        fills: (credential trusted, this answer's session cached)."""
        token = view.cache_token()
        await notify(view, *payloads)
        view.remember_credential(token, credential, worker.worker_id)
        session_id = str(uuid.uuid4())
        view.remember_session(
            token,
            {
                "workerId": worker.worker_id,
                "sessionId": session_id,
                "generation": 1,
                "expiresAtMs": int(time.time() * 1000) + 60_000,
            },
        )
        cached = view._sessions.get(worker.worker_id)
        return (
            view.credential_trusted(credential, worker.worker_id),
            cached is not None and cached.session_id == session_id,
        )

    async def scenario() -> list[tuple[bool, bool]]:
        view = await _view_with_listener(config)
        try:
            return [
                # Notified about others while the call ran: both fills are kept.
                await fill_after(view, f"s:{other_worker}", f"c:{other_credential}"),
                # Its own credential revoked meanwhile: only that fill is dropped.
                await fill_after(view, f"c:{worker.credential_id}"),
                # Its worker's session replaced meanwhile: both are dropped.
                await fill_after(view, f"s:{worker.worker_id}"),
                # A call that started after the notifications fills again.
                await fill_after(view),
            ]
        finally:
            await view.close()

    assert asyncio.run(scenario()) == [(True, True), (False, True), (False, False), (True, True)]


def _offline_view(test_pki: Any, ingress_dsn: str, clock: FakeClock) -> Any:
    """An IdleView fed notifications by hand (no listener needed)."""
    from qinglong.service import idle_view as iv
    from qinglong.service.gateway import Gateway
    from qinglong.service.metrics import IngressMetrics

    config = ingress_config(test_pki, ingress_dsn, idle_view_engage_rate_per_s=0)
    metrics = IngressMetrics()
    view = iv.IdleView(config, Gateway(config, metrics), metrics, clock=clock)
    view._up = True
    return view


def test_change_marks_stay_bounded_and_old_fills_are_refused(test_pki, ingress_dsn):
    """The per-key notification marks are forgotten once older than the fill
    horizon — safe, because a fill whose call started that long ago is refused
    anyway — while a recent mark still vetoes."""
    from qinglong.service import idle_view as iv

    clock = FakeClock()
    view = _offline_view(test_pki, ingress_dsn, clock)
    workers = [str(uuid.uuid4()) for _ in range(iv._CHANGE_MARKS_PRUNE_AT)]
    recent = str(uuid.uuid4())
    old_token = iv.CacheToken(view._incarnation, view._seq, clock())
    for worker_id in workers:
        view._on_notify(f"s:{worker_id}")
    clock.now += iv._FILL_HORIZON_S
    view._on_notify(f"s:{recent}")  # the first mark past the horizon prunes the old ones
    assert set(view._worker_marks) == {recent}
    # The marks that vetoed the old call are gone, and its fill is refused by age.
    assert not view._fill_allowed(old_token, None, workers[0])
    fresh = iv.CacheToken(view._incarnation, view._seq - 1, clock())  # before "recent"
    assert not view._fill_allowed(fresh, None, recent)
    assert view._fill_allowed(fresh, None, workers[0])


def test_a_flood_of_forged_ids_is_capped_and_only_refuses_fills(test_pki, ingress_dsn):
    """Forged `s:`/`c:` ids, all younger than the fill horizon: each mark table
    holds at most MAX_CHANGE_MARKS; when one is full it is emptied and every
    fill whose call started before that is refused (the cost of a flood is
    database calls, never a fill a real notification should have vetoed)."""
    from qinglong.service import idle_view as iv

    clock = FakeClock()
    view = _offline_view(test_pki, ingress_dsn, clock)
    real_worker = str(uuid.uuid4())
    in_flight = iv.CacheToken(view._incarnation, view._seq, clock())
    view._on_notify(f"s:{real_worker}")  # a real change while the call runs
    for n in range(3 * iv.MAX_CHANGE_MARKS):
        view._on_notify(f"s:{uuid.UUID(int=n)}")
        view._on_notify(f"c:{n:016x}")
        clock.now += 0.0001  # all within the horizon
    assert len(view._worker_marks) <= iv.MAX_CHANGE_MARKS
    assert len(view._credential_marks) <= iv.MAX_CHANGE_MARKS
    assert view.metrics.idle_view_overflows.value("marks") >= 4
    # The real change's mark is long gone, yet its veto stands.
    assert real_worker not in view._worker_marks
    assert not view._fill_allowed(in_flight, None, real_worker)
    # A call that starts after the flood fills again.
    after = iv.CacheToken(view._incarnation, view._seq, clock())
    assert view._fill_allowed(after, None, real_worker)
    # Junk is dropped unread: no mark, no state, counted.
    marks_before = (dict(view._worker_marks), view._seq, view._epoch)
    view._on_notify("s:" + "x" * 7990)
    view._on_notify("anything")
    assert (dict(view._worker_marks), view._seq, view._epoch) == marks_before
    assert view.metrics.idle_view_notifications.value("invalid") == 2
