"""Two ingress replicas (real `qinglong ingress serve`, different ports; the
second runs `--processes 2`, so three event loops and pools in all) serving 16
concurrent workers over mTLS: every run is leased exactly once (SPEC §5:
stateless replicas; SPEC §12: processes; only the database claim decides)."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

import psycopg

from tests.py import ingress_harness
from tests.py.ingress_harness import (
    Agent,
    make_agent,
    open_body,
    post,
    pull_body,
    start_ingress_tree,
)

ingress_dsn = ingress_harness.ingress_dsn
prov = ingress_harness.prov
su_conn = ingress_harness.su_conn
test_pki = ingress_harness.test_pki

WORKERS = 16
RUNS = 400


def _work(
    agent: Agent, port: int, offers: list[dict], errors: list[str], barrier: threading.Barrier
) -> None:
    try:
        opened = post(port, "/v1/sessions", open_body(agent), ctx=agent.ctx, token=agent.token)
        assert opened.status == 201, opened.body
        session = opened.json
        barrier.wait()
        idle = 0
        while idle < 3:
            reply = post(
                port, "/v1/offers/pull", pull_body(agent, session), ctx=agent.ctx, token=agent.token
            )
            if reply.status == 429:
                continue
            assert reply.status == 200, (reply.status, reply.body)
            if reply.json["status"] == "offered":
                offers.append(reply.json)
                idle = 0
                continue
            # A full session (4 slots, no ACKs here) is done; otherwise retry idles.
            idle += 1 if reply.json["reason"] != "capacity_full" else 3
    except Exception as exc:  # surfaced by the main thread
        errors.append(repr(exc))


def test_two_ingress_processes_lease_every_run_exactly_once(
    tmp_path: Path, prov, su_conn, test_pki, ingress_dsn
) -> None:
    run_ids = prov.enqueue(prov.task("replicas"), count=RUNS)
    agents = [make_agent(prov, test_pki, f"replica-worker-{i}") for i in range(WORKERS)]
    trees = []
    try:
        for index in range(2):
            trees.append(
                start_ingress_tree(
                    tmp_path / f"ingress-{index}", test_pki, ingress_dsn, processes=index + 1
                )
            )
        ports = [tree.port for tree in trees]
        assert ports[0] != ports[1]
        offers: list[dict] = []
        errors: list[str] = []
        barrier = threading.Barrier(WORKERS)
        threads = [
            threading.Thread(target=_work, args=(agent, ports[i % 2], offers, errors, barrier))
            for i, agent in enumerate(agents)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=240)
        assert not errors, errors[:3]
    finally:
        for tree in trees:
            assert tree.stop() == 0
    # 16 workers x 4 slots = 64 offers at most without ACKs: every one unique.
    attempts = Counter(o["candidate"]["attemptId"] for o in offers)
    assert len(offers) == min(RUNS, WORKERS * 4)
    assert max(attempts.values()) == 1
    assert {o["candidate"]["runId"] for o in offers} <= set(run_ids)
    with psycopg.connect(su_conn.info.dsn) as conn:
        duplicates = conn.execute(
            "SELECT attempt_id FROM ql_private.run_leases WHERE released_at IS NULL"
            " GROUP BY 1 HAVING count(*) > 1"
        ).fetchall()
        leases, events = conn.execute(
            "SELECT (SELECT count(*) FROM ql_private.run_leases),"
            "       (SELECT count(*) FROM ql_private.events WHERE type = 'run.dispatched')"
        ).fetchone()
    assert duplicates == []
    assert leases == events == len(offers)
    served = Counter(o["target"]["workerId"] for o in offers)
    assert len(served) == WORKERS, "every worker got its share through its replica"
