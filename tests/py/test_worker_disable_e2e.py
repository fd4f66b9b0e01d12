"""Disabled workers (SPEC §9.5): after `ql.disable_worker` every credential of the
worker is refused with 403 `worker_disabled` within 5 s at every ingress
replica — including the replica's idle view and its credential cache — its
session is closed and its unstarted leases are released; `ql.enable_worker`
restores it.

* In-process ingress (real PostgreSQL, real mTLS), the idle view engaged from
  the start (`idle_view_engage_rate_per_s=0`) or dormant.
* The credential cache's age limit (≤ 5 s) holds even when the notifications
  that normally drop an entry at once are lost.
* End to end (slow): `qinglong dev up` (its ingress with the view engaged) + a
  real `qinglong worker run --dev-env …` pulling; `qinglong admin worker
  disable|enable`.
* Drain (`--drain`, SPEC §9.5): through the in-process ingress, a draining
  session's pulls are refused (409 session_draining, or 403 for a disabled
  worker) — never answered idle from the view — while its started lease ACKs,
  heartbeats and completes; and end to end, a real `worker run --execute`
  whose long command keeps running and completes `succeeded` after `admin
  session close --drain` / `admin worker disable --drain`, with no new offer
  to that session meanwhile.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import ssl
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from qinglong.db import api
from qinglong.service.idle_view import ViewState
from tests.py import ingress_harness
from tests.py.dsn_files import dsn_file
from tests.py.ingress_harness import (
    IngressThread,
    ingress_config,
    make_agent,
    open_body,
    post,
    pull_body,
)
from tests.py.provision import new_token
from tests.py.run_as_support import run_as_args, searchable_tmp
from tests.py.test_ingress_idle_view import _from_view, _open, _pull, _until_view_answers
from tests.py.test_ingress_leases import Claim
from tests.py.test_worker_e2e import QL, Worker, _dev_up, _json_out, aside, dev_args, inbox

ingress_dsn = ingress_harness.ingress_dsn
prov = ingress_harness.prov
start_ingress_thread = ingress_harness.start_ingress_thread
su_conn = ingress_harness.su_conn
test_pki = ingress_harness.test_pki

DISABLED = (403, "worker_disabled")
CACHE_BOUND_S = 5.0


def _refusal(reply: Any) -> tuple[int, str]:
    return reply.status, reply.json.get("reason")


def _view(server: IngressThread) -> Any:
    assert server.running is not None
    return server.running.state.idle_view


def _wait_view_up(server: IngressThread) -> None:
    deadline = time.monotonic() + 10
    while _view(server).view_state() < ViewState.UNKNOWN:
        assert time.monotonic() < deadline, "idle view listener never came up"
        time.sleep(0.02)


@pytest.fixture
def viewed(start_ingress_thread, test_pki, ingress_dsn) -> IngressThread:
    server = start_ingress_thread(
        ingress_config(test_pki, ingress_dsn, idle_view_engage_rate_per_s=0)
    )
    _wait_view_up(server)
    return server


def _heartbeat(server: IngressThread, agent: Any, session: dict[str, Any]) -> Any:
    body = {
        "schema": "qinglong/session-heartbeat-request@v1",
        "workerId": agent.worker_id,
        "sessionId": session["sessionId"],
        "generation": session["generation"],
    }
    return post(server.port, "/v1/sessions/heartbeat", body, ctx=agent.ctx, token=agent.token)


def test_disabled_worker_is_refused_on_the_next_pull_from_the_view(viewed, prov, test_pki):
    agent = make_agent(prov, test_pki, "w-disabled")
    other = make_agent(prov, test_pki, "w-other")
    session, other_session = _open(viewed, agent), _open(viewed, other)
    _until_view_answers(viewed, agent, session)
    _until_view_answers(viewed, other, other_session)

    out = prov.call(api.disable_worker(worker_id=agent.worker_id)).doc
    assert out["workerId"] == agent.worker_id and out["disabled"] is True
    assert out["sessionsClosed"] == 1
    # The very next pull (the view dropped the worker on its notification).
    assert _refusal(_pull(viewed, agent, session)) == DISABLED
    for _ in range(3):
        assert _refusal(_pull(viewed, agent, session)) == DISABLED
    assert _refusal(_heartbeat(viewed, agent, session)) == DISABLED
    opened = post(viewed.port, "/v1/sessions", open_body(agent), ctx=agent.ctx,
                  token=agent.token)  # fmt: skip
    assert _refusal(opened) == DISABLED
    # Another worker is untouched (and still served from the view).
    before = _from_view(viewed)
    reply = _pull(viewed, other, other_session)
    assert reply.status == 200 and reply.json["status"] == "idle"
    assert _from_view(viewed) > before
    # Idempotent; then enable restores the worker (its old session stays closed).
    assert prov.call(api.disable_worker(worker_id=agent.worker_id)).doc["disabled"] is True
    assert prov.call(api.enable_worker(worker_id=agent.worker_id)).doc == {
        "workerId": agent.worker_id,
        "disabled": False,
    }
    assert _refusal(_pull(viewed, agent, session)) == (409, "session_closed")
    fresh = _open(viewed, agent)
    reply = _pull(viewed, agent, fresh)
    assert reply.status == 200 and reply.json["status"] == "idle"


def test_a_session_notification_drops_the_workers_credentials(viewed, prov, test_pki):
    """`s:<workerId>` (its session closed or replaced) drops the worker's session
    and every cached credential of it; other workers keep theirs."""
    agent = make_agent(prov, test_pki, "w-notified")
    other = make_agent(prov, test_pki, "w-bystander")
    session, other_session = _open(viewed, agent), _open(viewed, other)
    _until_view_answers(viewed, agent, session)
    _until_view_answers(viewed, other, other_session)
    view = _view(viewed)

    async def notify() -> tuple[set[str], set[str]]:
        view._on_notify(f"s:{agent.worker_id}")
        return set(view._auth), set(view._sessions)

    credentials, sessions = viewed.run(notify())
    assert agent.worker.credential_id not in credentials and agent.worker_id not in sessions
    assert other.worker.credential_id in credentials and other.worker_id in sessions
    # The next pull goes to the database (and refills the cache).
    before = _from_view(viewed)
    reply = _pull(viewed, agent, session)
    assert reply.status == 200 and _from_view(viewed) == before


@pytest.mark.parametrize("action", ["disable", "revoke"])
def test_credential_cache_is_bounded_even_without_notifications(viewed, prov, test_pki, action):
    """The view's credential entries expire after 5 s even if the `c:`/`s:`
    notifications that normally drop them at once never arrive."""
    view = _view(viewed)
    real = view._on_notify

    def lossy(payload: str) -> None:
        if not payload.startswith(("c:", "s:")):
            real(payload)

    view._on_notify = lossy
    agent = make_agent(prov, test_pki, f"w-lossy-{action}")
    session = _open(viewed, agent)
    _until_view_answers(viewed, agent, session)
    if action == "disable":
        prov.call(api.disable_worker(worker_id=agent.worker_id))
        expected = DISABLED
    else:
        prov.call(api.revoke_credential(credential_id=agent.worker.credential_id))
        expected = (401, "revoked_credential")
    committed = time.monotonic()
    while True:
        reply = _pull(viewed, agent, session)
        elapsed = time.monotonic() - committed
        if reply.status != 200:
            break
        assert elapsed < CACHE_BOUND_S + 1, "still served from the cache after 5 s"
        time.sleep(0.2)
    assert _refusal(reply) == expected
    assert elapsed <= CACHE_BOUND_S + 0.5
    # Refused for good from then on.
    assert _refusal(_pull(viewed, agent, session)) == expected


def test_disable_closes_the_session_and_releases_unstarted_leases(
    start_ingress_thread, test_pki, ingress_dsn, prov, su_conn
):
    server = start_ingress_thread(ingress_config(test_pki, ingress_dsn))  # view dormant
    agent = make_agent(prov, test_pki, "w-leased")
    other = make_agent(prov, test_pki, "w-takeover")
    session = _open(server, agent)
    (run_id,) = prov.enqueue(prov.task("t"), count=1)
    offered = _pull(server, agent, session)
    assert offered.status == 200 and offered.json["status"] == "offered", offered.body
    offer_id = offered.json["offerId"]

    out = prov.call(api.disable_worker(worker_id=agent.worker_id)).doc
    assert (out["sessionsClosed"], out["leasesReleased"]) == (1, 1)
    lease = su_conn.execute(
        "SELECT released_at IS NOT NULL, release_reason FROM ql_private.run_leases"
        " WHERE offer_id = %s",
        (offer_id,),
    ).fetchone()
    assert lease == (True, "session_closed")
    state = su_conn.execute("SELECT state FROM ql_private.worker_sessions WHERE session_id = %s",
                            (session["sessionId"],)).fetchone()  # fmt: skip
    assert state == ("closed",)
    assert _refusal(_pull(server, agent, session, offer_id=offer_id)) == DISABLED
    # The released run goes to another worker.
    taken = _pull(server, other, _open(server, other))
    assert taken.status == 200 and taken.json["candidate"]["runId"] == run_id
    # The denials are audited like any other.
    rows = su_conn.execute("SELECT count(*) FROM ql_private.security_audit"
                           " WHERE worker_id = %s AND reason = 'worker_disabled'",
                           (agent.worker_id,)).fetchone()  # fmt: skip
    assert rows[0] >= 1


# ------------------------------------------------------------------ drain (in process)

DRAINING = (409, "session_draining")


def _started_claim(server: IngressThread, agent: Any, session: dict[str, Any], prov: Any) -> Claim:
    prov.enqueue(prov.task("drain"), count=1)
    body = pull_body(agent, session)
    reply = post(server.port, "/v1/offers/pull", body, ctx=agent.ctx, token=agent.token)
    assert reply.status == 200 and reply.json["status"] == "offered", reply.body
    claim = Claim(server, agent, session, body, reply.json)
    assert claim.ack("starting").status == 200
    return claim


def _until_session_dropped(server: IngressThread, worker_id: str) -> None:
    async def cached() -> bool:
        return worker_id in _view(server)._sessions

    deadline = time.monotonic() + 10
    while server.run(cached()):
        assert time.monotonic() < deadline, "the view never dropped the session"
        time.sleep(0.02)


def _session_state(su_conn: Any, session: dict[str, Any]) -> str:
    row = su_conn.execute("SELECT state FROM ql_private.worker_sessions WHERE session_id = %s",
                          (session["sessionId"],)).fetchone()  # fmt: skip
    return row[0]


def test_a_draining_session_takes_no_offer_and_its_started_lease_completes(
    viewed, prov, test_pki, su_conn
):
    """`admin session close --drain`: pulls answer 409 session_draining — also after
    the session heartbeat (which keeps it alive) would have refilled the view's
    caches — while the started lease heartbeats and completes; then the session is
    closed and its heartbeat answers session_closed."""
    agent = make_agent(prov, test_pki, "w-drain")
    session = _open(viewed, agent)
    _until_view_answers(viewed, agent, session)
    claim = _started_claim(viewed, agent, session, prov)

    out = prov.call(api.end_session(session_id=session["sessionId"], drain=True)).doc
    assert (out["state"], out["drain"], out["leasesRunning"]) == ("draining", True, 1)
    _until_session_dropped(viewed, agent.worker_id)  # the drain's `s:` notification
    # The heartbeat (a database answer after that notification) keeps the session
    # alive; it must not put the draining session back into the view.
    beat = _heartbeat(viewed, agent, session)
    assert beat.status == 200 and beat.json["sessionId"] == session["sessionId"], beat.body
    # Any belief formed while the run was queued lapses: the next pull's barrier
    # probes afresh, and the database is idle now (one started lease, no queue).
    su_conn.execute("NOTIFY ql_dispatch, 'q'")
    before = _from_view(viewed)
    for _ in range(3):
        assert _refusal(_pull(viewed, agent, session)) == DRAINING
    assert _from_view(viewed) == before  # never the view's idle answer
    assert claim.ack("running").status == 200
    assert claim.heartbeat().status == 200
    done = claim.complete("succeeded", exitCode=0)
    assert done.status == 200 and done.json["state"] == "succeeded", done.body
    assert _session_state(su_conn, session) == "closed"
    assert _refusal(_heartbeat(viewed, agent, session)) == (409, "session_closed")
    # The worker opens a new session and is served again.
    fresh = _open(viewed, agent)
    reply = _pull(viewed, agent, fresh)
    assert reply.status == 200 and reply.json["status"] == "idle", reply.body


def test_a_worker_disabled_with_drain_finishes_its_started_lease_and_nothing_else(
    viewed, prov, test_pki, su_conn
):
    """`admin worker disable --drain`: 403 worker_disabled for pulls and new
    sessions at once, while the draining session's heartbeat and the started
    lease's ACK, heartbeat and completion still work; once it ended, every call
    is refused."""
    agent = make_agent(prov, test_pki, "w-drain-disabled")
    session = _open(viewed, agent)
    _until_view_answers(viewed, agent, session)
    claim = _started_claim(viewed, agent, session, prov)
    (queued,) = prov.enqueue(prov.task("drain-more"), count=1)

    out = prov.call(api.disable_worker(worker_id=agent.worker_id, drain=True)).doc
    assert out == {
        "workerId": agent.worker_id,
        "disabled": True,
        "drain": True,
        "sessionsClosed": 0,
        "sessionsDraining": 1,
        "leasesReleased": 0,
    }
    assert _refusal(_pull(viewed, agent, session)) == DISABLED
    opened = post(viewed.port, "/v1/sessions", open_body(agent), ctx=agent.ctx,
                  token=agent.token)  # fmt: skip
    assert _refusal(opened) == DISABLED
    assert _heartbeat(viewed, agent, session).status == 200
    assert _refusal(_pull(viewed, agent, session)) == DISABLED  # also after the heartbeat
    assert claim.ack("running").status == 200
    assert claim.heartbeat().status == 200
    done = claim.complete("succeeded", exitCode=0)
    assert done.status == 200 and done.json["state"] == "succeeded", done.body
    assert _session_state(su_conn, session) == "closed"
    assert _refusal(_heartbeat(viewed, agent, session)) == DISABLED
    leases = su_conn.execute("SELECT count(*) FROM ql_private.run_leases WHERE run_id = %s",
                             (queued,)).fetchone()  # fmt: skip
    assert leases == (0,)


# ------------------------------------------------------------------ end to end (slow)


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    state_dir = tmp_path_factory.mktemp("dev")
    # The ingress `dev up` starts inherits these: its idle view is engaged from the
    # start, and its idle belief outlives one worker's 2-3 s pull cadence (it still
    # lapses on every enqueue), so the view really answers this worker's pulls.
    env = os.environ | {
        "QL_INGRESS_IDLE_VIEW_ENGAGE_RATE_PER_S": "0",
        "QL_INGRESS_IDLE_VIEW_MAX_STALENESS_MS": "60000",
    }
    doc = _dev_up(state_dir, env)
    path = state_dir / "dev-env-copy.json"
    path.write_text(json.dumps(doc))
    try:
        # dev up's DSNs hold passwords: admin commands get them by file, not argv.
        yield dict(doc, _file=str(path), _dsnFile=dsn_file(state_dir, "admin.dsn", doc["dsn"]))
    finally:
        subprocess.run([*QL, "dev", "down", "--state-dir", str(state_dir)], check=False,
                       capture_output=True, timeout=120)  # fmt: skip


def _direct_pull(dev: dict[str, Any], session_id: str | None = None) -> tuple[int, Any]:
    """One pull with the dev worker's own certificate and credential."""
    worker = dev["worker"]
    ctx = ssl.create_default_context(cafile=dev["caFile"])
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.load_cert_chain(worker["certFile"], worker["keyFile"])
    token = Path(worker["credentialFile"]).read_text().strip()
    body = {
        "schema": "qinglong/offer-pull-request@v1",
        "workerId": worker["workerId"],
        "sessionId": session_id or str(uuid.uuid4()),
        "generation": 1,
        "offerId": str(uuid.uuid4()),
        "leaseToken": new_token(),
    }
    url = urlsplit(dev["ingressUrl"])
    conn = http.client.HTTPSConnection(url.hostname, url.port, context=ctx, timeout=15)
    try:
        conn.request(
            "POST",
            "/v1/offers/pull",
            body=json.dumps(body),
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
        )
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def _view_pulls(dev: dict[str, Any]) -> int:
    url = urlsplit(dev["adminUrl"])
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    try:
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
    finally:
        conn.close()
    for line in text.splitlines():
        if line.startswith('qinglong_ingress_idle_view_pulls_total{source="view"}'):
            return int(float(line.split()[-1]))
    return 0


def _wait(check: Any, what: str, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.25)


def _query(dev: dict[str, Any], sql: str, *params: Any) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(dev["dsn"], autocommit=True) as conn:
        return conn.execute(sql, params).fetchall()


@pytest.mark.slow
def test_real_worker_is_disabled_within_5_s_and_enabled_again(
    dev: dict[str, Any], tmp_path: Path
) -> None:
    worker_id = dev["worker"]["workerId"]
    journal = tmp_path / "journal"
    command = tmp_path / "command.json"
    command.write_text(json.dumps({"schema": "qinglong/command@v1", "argv": ["true"],
                                   "env": {}, "timeoutS": 60}))  # fmt: skip
    task = _json_out(
        [
            *QL,
            "admin",
            "task",
            "publish",
            "--dsn-file",
            dev["_dsnFile"],
            "--project",
            "disable-e2e",
            "--name",
            "noop",
            "--command-file",
            str(command),
        ]
    )
    proc = Worker(dev_args(dev, journal))  # no --execute: offers stay leased, unstarted
    try:
        proc.wait_for("session.opened")
        # Idle pulls answered from the view: the credential is in the replica's cache.
        _wait(lambda: _view_pulls(dev) > 0, "a pull answered from the idle view", 30)
        (run_id,) = _json_out(
            [
                *QL,
                "admin",
                "run",
                "enqueue",
                "--dsn-file",
                dev["_dsnFile"],
                "--task",
                task["taskId"],
            ]
        )["runIds"]
        (first_offer,) = _wait(lambda: inbox(journal), "the offer in the inbox", 30)

        out = _json_out([*QL, "admin", "worker", "disable", "--dsn-file", dev["_dsnFile"],
                         "--worker", worker_id])  # fmt: skip
        disabled_at = time.monotonic()
        assert out["disabled"] is True and out["sessionsClosed"] == 1
        assert out["leasesReleased"] == 1
        released = _query(dev, "SELECT release_reason FROM ql_private.run_leases"
                               " WHERE run_id = %s", run_id)  # fmt: skip
        assert released == [("session_closed",)]
        assert _query(dev, "SELECT state FROM ql_private.runs WHERE id = %s", run_id) == [
            ("queued",)
        ]
        # Every pull with the worker's credential is refused within 5 s.
        time.sleep(max(0.0, disabled_at + CACHE_BOUND_S - time.monotonic()))
        status, body = _direct_pull(dev)
        assert (status, body["reason"]) == DISABLED
        # The worker itself sees it as an authentication failure: loud, claim kept.
        retries = _wait(lambda: [e for e in proc.named("claim.retry")
                                 if e.get("reason") == "http_403_worker_disabled"],
                        "the worker's auth failure", 30)  # fmt: skip
        assert retries[0]["level"] == "error" and retries[0]["retryInMs"] >= 29_000  # slow: >= 30 s
        assert (journal / "pending-claim.json").exists()  # the claim is kept
        assert proc.proc.poll() is None  # it keeps running, waiting for an operator

        out = _json_out([*QL, "admin", "worker", "enable", "--dsn-file", dev["_dsnFile"],
                         "--worker", worker_id])  # fmt: skip
        assert out == {"workerId": worker_id, "disabled": False}
        # Pulls work again: the worker opens a new session and gets the run back;
        # the closed session's entry moves aside (SPEC §6.4: one usable entry per run).
        _wait(lambda: inbox(journal) not in ([], [first_offer]), "the run offered again", 120)
        assert aside(journal) == [first_offer]
        live = _query(
            dev,
            "SELECT offer_id::text FROM ql_private.run_leases"
            " WHERE run_id = %s AND released_at IS NULL",
            run_id,
        )
        assert live == [(offer,) for offer in inbox(journal)]
    finally:
        proc.kill()
        for (run,) in _query(dev, "SELECT id::text FROM ql_private.runs WHERE task_id = %s"
                                  " AND state NOT IN ('succeeded', 'failed', 'cancelled')",
                             task["taskId"]):  # fmt: skip
            subprocess.run([*QL, "admin", "run", "cancel", "--dsn-file", dev["_dsnFile"],
                            "--run", run], capture_output=True, timeout=60,
                           check=False)  # fmt: skip


# ------------------------------------------------------------------ drain end to end (slow)

SLEEP_S = 8  # the long command: several lease heartbeats at a 5 s lease TTL


@pytest.fixture
def drain_root() -> Iterator[Path]:
    # Not tmp_path (0700 ancestors): the run-as user must reach the runs dirs.
    root = searchable_tmp("ql-drain-")
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _executing_worker(dev: dict[str, Any], root: Path, name: str) -> tuple[Worker, str]:
    """A new worker identity running `worker run --execute --slots 2` (a free slot
    while one command runs: it would pull)."""
    identity = _json_out(
        [
            *QL,
            "admin",
            "worker",
            "create",
            "--dsn-file",
            dev["_dsnFile"],
            "--name",
            name,
            "--ca-dir",
            dev["caDir"],
            "--out",
            str(root / name),
            "--pool",
            "*",
        ]
    )
    env_file = root / f"{name}-dev-env.json"
    doc = {k: v for k, v in dev.items() if not k.startswith("_")}
    env_file.write_text(json.dumps(dict(doc, worker=identity)))
    env_file.chmod(0o600)
    proc = Worker(
        [
            *QL,
            "worker",
            "run",
            "--dev-env",
            str(env_file),
            "--journal",
            str(root / f"{name}-journal"),
            "--execute",
            *run_as_args(),
            "--slots",
            "2",
        ]
    )
    return proc, identity["workerId"]


def _publish(dev: dict[str, Any], root: Path, name: str, argv: list[str]) -> str:
    path = root / f"{name}.json"
    path.write_text(json.dumps({"schema": "qinglong/command@v1", "argv": argv, "env": {},
                                "timeoutS": 120}))  # fmt: skip
    return _json_out(
        [
            *QL,
            "admin",
            "task",
            "publish",
            "--dsn-file",
            dev["_dsnFile"],
            "--project",
            "drain-e2e",
            "--name",
            name,
            "--command-file",
            str(path),
            "--lease-ttl-s",
            "5",
        ]
    )["taskId"]


def _enqueue(dev: dict[str, Any], task_id: str) -> str:
    (run_id,) = _json_out(
        [*QL, "admin", "run", "enqueue", "--dsn-file", dev["_dsnFile"], "--task", task_id]
    )["runIds"]
    return run_id


def _run_state(dev: dict[str, Any], run_id: str) -> str:
    return _query(dev, "SELECT state FROM ql_private.runs WHERE id = %s", run_id)[0][0]


def _running_lease(dev: dict[str, Any], run_id: str) -> tuple[str, int]:
    """(session id, lease version) of the run's live started lease."""
    rows = _query(dev, "SELECT session_id::text, lease_version FROM ql_private.run_leases"
                       " WHERE run_id = %s AND released_at IS NULL AND started_at IS NOT NULL",
                  run_id)  # fmt: skip
    assert len(rows) == 1, rows
    return rows[0]


def _started_long_run(
    dev: dict[str, Any], root: Path, proc: Worker, name: str
) -> tuple[str, str, int, str]:
    """(run id, session id, lease version, quick task id): the long command is running."""
    proc.wait_for("session.opened", timeout=60)
    long_task = _publish(dev, root, f"{name}-sleep", ["sh", "-c", f"sleep {SLEEP_S}"])
    quick_task = _publish(dev, root, f"{name}-quick", ["true"])
    run_id = _enqueue(dev, long_task)
    _wait(lambda: _run_state(dev, run_id) == "running", "the long command running", 60)
    session_id, version = _running_lease(dev, run_id)
    return run_id, session_id, version, quick_task


def _drained_run_succeeded(
    dev: dict[str, Any], proc: Worker, run_id: str, session_id: str, version: int, later: str
) -> None:
    """The long command completes succeeded on the draining session, after lease
    heartbeats; the session then closes; the run enqueued during the drain never
    got a lease on it; the worker stopped pulling at the first session_draining."""
    _wait(
        lambda: _run_state(dev, run_id) in ("succeeded", "failed", "cancelled"),
        "the long run to end",
        SLEEP_S + 40,
    )
    assert _run_state(dev, run_id) == "succeeded"
    attempts = _query(dev, "SELECT state, exit_code FROM ql_private.attempts WHERE run_id = %s",
                      run_id)  # fmt: skip
    assert attempts == [("succeeded", 0)]
    lease = _query(dev, "SELECT session_id::text, lease_version, release_reason"
                        " FROM ql_private.run_leases WHERE run_id = %s", run_id)  # fmt: skip
    ((lease_session, final_version, reason),) = lease
    assert (lease_session, reason) == (session_id, "completed")
    assert final_version >= version + 2  # heartbeat(s) after the drain, then the completion
    _wait(lambda: _query(dev, "SELECT state FROM ql_private.worker_sessions"
                              " WHERE session_id = %s", session_id) == [("closed",)],
          "the drained session closed", 10)  # fmt: skip
    assert _query(dev, "SELECT count(*) FROM ql_private.run_leases WHERE run_id = %s"
                       " AND session_id = %s", later, session_id) == [(0,)]  # fmt: skip
    drains = [e for e in proc.named("claim.conflict") if e.get("reason") == "session_draining"]
    assert len(drains) <= 1, drains  # it stopped pulling: no spin on the 409
    assert len(proc.named("session.draining")) == len(drains)


@pytest.mark.slow
def test_real_worker_keeps_running_through_session_close_drain(
    dev: dict[str, Any], drain_root: Path
) -> None:
    proc, worker_id = _executing_worker(dev, drain_root, "drain-close")
    try:
        run_id, session_id, version, quick = _started_long_run(dev, drain_root, proc, "drain-close")
        out = _json_out(
            [
                *QL,
                "admin",
                "session",
                "close",
                "--dsn-file",
                dev["_dsnFile"],
                "--session",
                session_id,
                "--drain",
            ]
        )
        assert out == {
            "sessionId": session_id,
            "workerId": worker_id,
            "state": "draining",
            "drain": True,
            "leasesReleased": 0,
            "leasesRunning": 1,
        }
        later = _enqueue(dev, quick)
        # The worker's free slot asks for work: it learns the drain and stops pulling.
        proc.wait_for("session.draining", timeout=30)
        _drained_run_succeeded(dev, proc, run_id, session_id, version, later)
        # Then it opens a new session, which takes the run enqueued meanwhile.
        _wait(lambda: _run_state(dev, later) == "succeeded", "the later run on a new session",
              60)  # fmt: skip
        events = _query(dev, "SELECT type, payload ->> 'actor' FROM ql_private.events"
                             " WHERE worker_id = %s AND type LIKE 'session.%%' ORDER BY id",
                        worker_id)  # fmt: skip
        assert [kind for kind, _ in events] == ["session.draining", "session.drained"]
        assert events[0][1]  # the acting role
        assert proc.stop() == 0
    finally:
        proc.kill()


@pytest.mark.slow
def test_real_worker_keeps_running_through_worker_disable_drain(
    dev: dict[str, Any], drain_root: Path
) -> None:
    proc, worker_id = _executing_worker(dev, drain_root, "drain-disable")
    later = None
    try:
        run_id, session_id, version, quick = _started_long_run(
            dev, drain_root, proc, "drain-disable"
        )
        out = _json_out(
            [
                *QL,
                "admin",
                "worker",
                "disable",
                "--dsn-file",
                dev["_dsnFile"],
                "--worker",
                worker_id,
                "--drain",
            ]
        )
        assert out == {
            "workerId": worker_id,
            "disabled": True,
            "drain": True,
            "sessionsClosed": 0,
            "sessionsDraining": 1,
            "leasesReleased": 0,
        }
        later = _enqueue(dev, quick)
        _drained_run_succeeded(dev, proc, run_id, session_id, version, later)
        # Its session ended: the worker's next call is refused (403, logged loudly:
        # it needs an operator) and the run enqueued meanwhile is never offered to it.
        refused = _wait(lambda: [e for e in proc.lines if e.get("event") in (
                            "session.heartbeat_failed", "session.open_failed", "claim.retry")
                                 and e.get("reason") == "http_403_worker_disabled"],
                        "the worker's refused call", 30)  # fmt: skip
        assert refused[0]["level"] == "error", refused
        assert _run_state(dev, later) == "queued"
        assert _query(dev, "SELECT count(*) FROM ql_private.run_leases WHERE worker_id = %s"
                           " AND run_id = %s", worker_id, later) == [(0,)]  # fmt: skip
        assert proc.proc.poll() is None  # it keeps running, waiting for an operator
    finally:
        proc.kill()
        if later is not None:
            subprocess.run(
                [*QL, "admin", "run", "cancel", "--dsn-file", dev["_dsnFile"], "--run", later],
                capture_output=True,
                timeout=60,
                check=False,
            )
