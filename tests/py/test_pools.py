"""Pools and worker grants (SPEC §13.1) through the real ingress and the admin CLI:
a worker granted pool A never receives pool B's run (pulls and replays with B's
offer ids), a worker granted pool A reaches the runs it can take behind a head
of A's runs it cannot, a revoked grant stops new offers and releases the
unstarted lease within 5 s, and the CLI refuses another project's or a missing pool (exit 2,
field `pool`)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg
import pytest

from qinglong.db import api
from qinglong.service.compiler import compile_command
from tests.py import ingress_harness
from tests.py.ingress_harness import Agent, make_agent, open_body, post, pull_body
from tests.py.provision import DEFAULT_CAPABILITIES, Intent, Provisioner, command

ingress = ingress_harness.ingress
ingress_dsn = ingress_harness.ingress_dsn
prov = ingress_harness.prov
start_ingress_thread = ingress_harness.start_ingress_thread
su_conn = ingress_harness.su_conn
test_pki = ingress_harness.test_pki


def _task(prov: Provisioner, name: str, pool: str) -> str:
    canonical = compile_command(command()).canonical
    return str(
        prov.call(
            api.publish_revision(project="acme", task=name, canonical=canonical, pool=pool)
        ).doc["taskId"]
    )


def _agent(prov: Provisioner, test_pki, name: str, pools: list[str]) -> Agent:
    agent = make_agent(prov, test_pki, name)
    prov.call(api.revoke_pool(worker_id=agent.worker_id, pool="*"))
    for pool in pools:
        prov.call(api.grant_pool(worker_id=agent.worker_id, pool=pool))
    return agent


def _session(ingress, agent: Agent) -> dict:
    reply = post(ingress.port, "/v1/sessions", open_body(agent), ctx=agent.ctx, token=agent.token)
    assert reply.status == 201, reply.body
    return reply.json


def _pull(
    ingress, agent: Agent, session: dict, offer_id: str | None = None, token: str | None = None
):
    return post(
        ingress.port,
        "/v1/offers/pull",
        pull_body(agent, session, offer_id, token),
        ctx=agent.ctx,
        token=agent.token,
    )


def _two_pools(prov: Provisioner) -> tuple[str, str]:
    for name in ("a", "b"):
        prov.call(api.create_pool(project="acme", name=name))
    return _task(prov, "ta", "acme/a"), _task(prov, "tb", "acme/b")


def test_worker_granted_a_never_receives_b_runs(ingress, prov, test_pki):
    task_a, task_b = _two_pools(prov)
    b_runs = prov.enqueue(task_b, count=3, priority=9)  # ahead of A's in the queue
    a_run = prov.enqueue(task_a)[0]
    agent_a = _agent(prov, test_pki, "edge-a", ["acme/a"])
    agent_b = _agent(prov, test_pki, "edge-b", ["acme/b"])
    session_a, session_b = _session(ingress, agent_a), _session(ingress, agent_b)

    first = _pull(ingress, agent_a, session_a)
    assert first.status == 200 and first.json["lease"]["runId"] == a_run, first.body
    for _ in range(3):
        idle = _pull(ingress, agent_a, session_a)
        assert idle.status == 204 or idle.json.get("status") == "idle", idle.body

    b_body = pull_body(agent_b, session_b)
    b_offer = post(ingress.port, "/v1/offers/pull", b_body, ctx=agent_b.ctx, token=agent_b.token)
    assert b_offer.status == 200 and b_offer.json["lease"]["runId"] in b_runs, b_offer.body
    # A replays with B's offer id (its own token, then B's): never B's run.
    for token in (None, b_body["leaseToken"]):
        replay = _pull(ingress, agent_a, session_a, b_body["offerId"], token)
        assert replay.status == 409, replay.body
        text = replay.body.decode()
        assert all(run not in text for run in b_runs), text
    leases = prov.conn.execute(
        "SELECT r.pool_id = (SELECT id FROM ql_private.pools WHERE name = 'a') FROM"
        " ql_private.run_leases l JOIN ql_private.runs r ON r.id = l.run_id"
        " WHERE l.worker_id = %s::uuid",
        (agent_a.worker_id,),
    ).fetchall()
    assert leases == [(True,)]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "qinglong", "admin", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_revoke_stops_offers_and_releases_the_unstarted_lease(ingress, prov, test_pki, db_dsn):
    task_a, _ = _two_pools(prov)
    runs = prov.enqueue(task_a, count=2)
    agent = _agent(prov, test_pki, "edge-r", ["acme/a"])
    session = _session(ingress, agent)
    body = pull_body(agent, session)
    offered = post(ingress.port, "/v1/offers/pull", body, ctx=agent.ctx, token=agent.token)
    assert offered.status == 200 and offered.json["lease"]["runId"] == runs[0], offered.body

    started = time.monotonic()
    revoked = _cli(
        "worker", "revoke", "--dsn", db_dsn, "--worker", agent.worker_id, "--pool", "acme/a"
    )
    assert revoked.returncode == 0, revoked.stderr
    assert json.loads(revoked.stdout)["leasesReleased"] == 1
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        while True:
            row = conn.execute(
                "SELECT l.release_reason, r.state FROM ql_private.run_leases l"
                " JOIN ql_private.runs r ON r.id = l.run_id"
                " WHERE l.offer_id = %s::uuid",
                (body["offerId"],),
            ).fetchone()
            if row == ("grant_revoked", "queued") or time.monotonic() - started > 5:
                break
            time.sleep(0.1)
    assert row == ("grant_revoked", "queued")
    assert time.monotonic() - started <= 5
    after = _pull(ingress, agent, session)
    assert after.status == 204 or after.json.get("status") == "idle", after.body
    replay = post(ingress.port, "/v1/offers/pull", body, ctx=agent.ctx, token=agent.token)
    assert replay.status == 409 and b"lease_terminal" in replay.body, replay.body


def test_cli_pools(db_dsn: str, tmp_path: Path):
    created = _cli("pool", "create", "--dsn", db_dsn, "--project", "acme", "--name", "gpu")
    assert created.returncode == 0, created.stderr
    doc = json.loads(created.stdout)
    assert set(doc) == {"poolId", "project", "name"} and doc["name"] == "gpu"
    other = _cli("pool", "create", "--dsn", db_dsn, "--project", "other", "--name", "x")
    assert other.returncode == 0, other.stderr
    command_file = tmp_path / "cmd.json"
    command_file.write_text(json.dumps(command()))
    base = [
        "task",
        "publish",
        "--dsn",
        db_dsn,
        "--project",
        "acme",
        "--name",
        "t",
        "--command-file",
        str(command_file),
    ]
    ok = _cli(*base, "--pool", "acme/gpu")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["pool"] == "acme/gpu"
    for pool in ("other/x", "acme/missing", "acme"):
        refused = _cli(*base, "--pool", pool)
        assert refused.returncode == 2, (pool, refused.stdout, refused.stderr)
        assert "pool" in refused.stdout + refused.stderr
    with psycopg.connect(db_dsn) as conn:
        pools = conn.execute(
            "SELECT pl.name FROM ql_private.tasks t JOIN ql_private.pools pl"
            " ON pl.id = t.pool_id WHERE t.name = 't'"
        ).fetchall()
    assert pools == [("gpu",)], "a refused publish changed nothing"


def _revoke_in_thread(db_dsn: str, worker_id: str, pool: str) -> tuple[threading.Thread, list]:
    out: list = []

    def revoke() -> None:
        with psycopg.connect(db_dsn, autocommit=True) as conn:
            out.append(api.revoke_pool(worker_id=worker_id, pool=pool).run(conn).doc)

    thread = threading.Thread(target=revoke, daemon=True)
    thread.start()
    return thread, out


def _blocked(db_dsn: str, query_like: str) -> bool:
    """Whether a backend running a statement like `query_like` waits on a lock."""
    deadline = time.monotonic() + 10
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE wait_event_type = 'Lock' AND query LIKE %s",
                (query_like,),
            ).fetchone()
            if row and row[0]:
                return True
            time.sleep(0.05)
    return False


def test_revoke_racing_a_claim_never_leaves_the_claimed_lease_live(db_dsn: str):
    """Truly concurrent connections, both orders. A claim in flight (its
    transaction open, holding the session row) when the revoke starts: the
    revoke waits for it and then releases its lease. A revoke in flight when a
    pull starts: the pull waits for the session row and then finds no grant."""
    from tests.py.provision import Intent

    with psycopg.connect(db_dsn, autocommit=True) as setup:
        prov = Provisioner(setup)
        task_a, _ = _two_pools(prov)
        prov.enqueue(task_a, count=3)
        worker = prov.worker("racer", all_pools=False)
        prov.call(api.grant_pool(worker_id=worker.worker_id, pool="acme/a"))
        session = prov.session(worker)

    # 1. The claim first.
    with psycopg.connect(db_dsn) as claimer:
        intent = Intent()
        offered = api.pull_offer(**session.lease(intent), bounds=None).run(claimer).doc
        assert offered["status"] == "offered"
        thread, out = _revoke_in_thread(db_dsn, worker.worker_id, "acme/a")
        assert _blocked(db_dsn, "%revoke_pool%"), "the revoke waits for the claim's session row"
        claimer.commit()
    thread.join(10)
    assert out and out[0]["leasesReleased"] == 1, out
    with psycopg.connect(db_dsn) as conn:
        reason = conn.execute(
            "SELECT release_reason FROM ql_private.run_leases WHERE offer_id = %s::uuid",
            (intent.offer_id,),
        ).fetchone()
    assert reason == ("grant_revoked",)

    # 2. The revoke first (granted again, then revoked in an open transaction).
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        api.grant_pool(worker_id=worker.worker_id, pool="acme/a").run(conn)
    with psycopg.connect(db_dsn) as revoker:
        assert api.revoke_pool(worker_id=worker.worker_id, pool="acme/a").run(revoker).revoked
        pulled: list = []

        def pull() -> None:
            with psycopg.connect(db_dsn, autocommit=True) as conn:
                pulled.append(api.pull_offer(**session.lease(Intent()), bounds=None).run(conn).doc)

        puller = threading.Thread(target=pull, daemon=True)
        puller.start()
        assert _blocked(db_dsn, "%pull_offer%"), "the pull waits for the revoke's session lock"
        revoker.commit()
    puller.join(10)
    assert pulled and pulled[0]["status"] == "idle", pulled


def test_cli_worker_create_grant_revoke(db_dsn: str, tmp_path: Path):
    """`admin worker create --pool` (repeatable, '*'), `worker grant|revoke`: the
    grants land; a malformed pool exits 2 naming `pool` and creates no worker;
    without `--pool` the worker holds nothing."""
    assert _cli("ca", "init", "--dir", str(tmp_path / "ca")).returncode == 0
    for name in ("a", "b"):
        assert (
            _cli("pool", "create", "--dsn", db_dsn, "--project", "acme", "--name", name).returncode
            == 0
        )

    def create(name: str, *pools: str) -> subprocess.CompletedProcess[str]:
        flags = [arg for pool in pools for arg in ("--pool", pool)]
        return _cli(
            "worker",
            "create",
            "--dsn",
            db_dsn,
            "--name",
            name,
            "--ca-dir",
            str(tmp_path / "ca"),
            "--out",
            str(tmp_path / name),
            *flags,
        )

    def grants(worker_id: str) -> tuple[bool, list[str]]:
        with psycopg.connect(db_dsn) as conn:
            row = conn.execute(
                "SELECT w.all_pools, coalesce(array_agg(pl.name ORDER BY pl.name)"
                " FILTER (WHERE pl.name IS NOT NULL), '{}') FROM ql_private.workers w"
                " LEFT JOIN ql_private.worker_pool_grants g ON g.worker_id = w.id"
                " LEFT JOIN ql_private.pools pl ON pl.id = g.pool_id"
                " WHERE w.id = %s::uuid GROUP BY w.all_pools",
                (worker_id,),
            ).fetchone()
        assert row is not None
        return row[0], list(row[1])

    two = create("two", "acme/a", "acme/b")
    assert two.returncode == 0, two.stderr
    two_id = json.loads(two.stdout)["workerId"]
    assert grants(two_id) == (False, ["a", "b"])
    none = create("none")
    assert none.returncode == 0, none.stderr
    none_id = json.loads(none.stdout)["workerId"]
    assert grants(none_id) == (False, [])
    with psycopg.connect(db_dsn) as conn:
        workers = conn.execute("SELECT count(*) FROM ql_private.workers").fetchone()
    bad = create("bad", "acme/a", "acme")
    assert bad.returncode == 2 and '"field": "pool"' in bad.stderr, bad.stderr
    with psycopg.connect(db_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM ql_private.workers").fetchone() == workers

    granted = _cli("worker", "grant", "--dsn", db_dsn, "--worker", none_id, "--pool", "*")
    assert granted.returncode == 0, granted.stderr
    assert json.loads(granted.stdout) == {"workerId": none_id, "pool": "*", "granted": True}
    assert grants(none_id) == (True, [])
    revoked = _cli("worker", "revoke", "--dsn", db_dsn, "--worker", two_id, "--pool", "acme/b")
    assert json.loads(revoked.stdout)["revoked"] is True
    assert grants(two_id) == (False, ["a"])
    missing = _cli("worker", "grant", "--dsn", db_dsn, "--worker", two_id, "--pool", "acme/zzz")
    assert missing.returncode == 1 and "not_found" in missing.stderr, missing.stderr
    malformed = _cli("worker", "grant", "--dsn", db_dsn, "--worker", two_id, "--pool", "a b")
    assert malformed.returncode == 2 and '"field": "pool"' in malformed.stderr


def _placed_task(prov: Provisioner, name: str, pool: str, gpu: bool) -> str:
    placement = {"required": {"labels": {"gpu": "yes"}}} if gpu else None
    canonical = compile_command(command(placement=placement)).canonical
    return str(
        prov.call(
            api.publish_revision(project="acme", task=name, canonical=canonical, pool=pool)
        ).doc["taskId"]
    )


def _enqueue(
    prov: Provisioner, task_id: str, count: int, priority: int, due_ago_s: int | None
) -> list[str]:
    """`count` ready runs, or (due_ago_s set) scheduled runs aged so they came due
    `due_ago_s` seconds ago and were never promoted by a sweeper."""
    if due_ago_s is None:
        return prov.enqueue(task_id, count=count, priority=priority)
    result = prov.call(
        api.enqueue_runs(task_id=task_id, priority=priority, count=count, delay_ms=3_600_000)
    ).doc
    run_ids = [str(run_id) for run_id in result["runIds"]]
    prov.conn.execute(
        "UPDATE ql_private.runs SET due_at = clock_timestamp() - make_interval(secs => %s)"
        " WHERE id = ANY(%s::uuid[])",
        (due_ago_s, run_ids),
    )
    prov.conn.execute(
        "UPDATE ql_private.attempts a SET not_before = r.due_at FROM ql_private.runs r"
        " WHERE a.id = r.current_attempt_id AND r.id = ANY(%s::uuid[])",
        (run_ids,),
    )
    return run_ids


@pytest.mark.parametrize("due", [False, True])
def test_runs_behind_a_blocked_head_in_a_granted_pool_are_offered(prov, due: bool):
    """A worker granted pool A only: 40 runs of A it cannot take (label gpu=yes)
    ahead of 5 it can — ready runs at a higher priority, or due runs that came due
    earlier and were never promoted — and runs of pool B it could take but holds
    no grant for. The default-bounded pulls offer the 5, one per pull, through the
    class pages within its pools (SPEC §3.1, §13.3), then answer idle
    placement_mismatch; B's runs are never offered."""
    for name in ("a", "b"):
        prov.call(api.create_pool(project="acme", name=name))
    gpu_a = _placed_task(prov, "gpu-a", "acme/a", gpu=True)
    plain_a = _placed_task(prov, "plain-a", "acme/a", gpu=False)
    b_runs = prov.enqueue(_placed_task(prov, "plain-b", "acme/b", gpu=False), count=5, priority=9)
    _enqueue(prov, gpu_a, 40, 5, 120 if due else None)
    takeable = _enqueue(prov, plain_a, 5, 0, 60 if due else None)
    worker = prov.worker("edge-a", all_pools=False)
    prov.call(api.grant_pool(worker_id=worker.worker_id, pool="acme/a"))
    session = prov.session(worker, {**DEFAULT_CAPABILITIES, "slots": 8})
    offered = []
    for _ in takeable:
        result = prov.pull(session, Intent())
        assert result["status"] == "offered", result
        offered.append(result["offer"]["candidate"]["runId"])
    assert sorted(offered) == sorted(takeable)
    result = prov.pull(session, Intent())
    assert result["status"] == "idle" and result["reason"] == "placement_mismatch", result
    leased = prov.conn.execute(
        "SELECT count(*) FROM ql_private.run_leases WHERE run_id = ANY(%s::uuid[])", (b_runs,)
    ).fetchone()[0]
    assert leased == 0
