"""A NOTIFY flood on the idle view's channel from a login that may only CONNECT.

PostgreSQL cannot restrict NOTIFY by grant: any login with CONNECT on the
database (the console's read-only login, say) can send on `ql_dispatch`. The
view drops every payload that is not exactly what `ql_private.idle_view_notify`
sends (counted as kind `invalid`) and holds at most a fixed number of
per-key notification marks (service/idle_view.py, "Forged notifications"), so
a flood costs the ingress no memory worth measuring, and pulls keep their
answers: an offer still reaches a worker when there is work.

A real `qinglong ingress serve` process (its RSS is its own), real PostgreSQL,
real TLS. Each flood takes ~5-10 s here.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from qinglong.throwaway_postgres import ThrowawayPostgres
from tests.py import ingress_harness
from tests.py.ingress_harness import Agent, make_agent, open_body, post, pull_body
from tests.py.provision import Provisioner
from tests.py.security_support import IngressProcess, read_status_kib, start_ingress_process

ingress_dsn = ingress_harness.ingress_dsn
prov = ingress_harness.prov
su_conn = ingress_harness.su_conn
test_pki = ingress_harness.test_pki

PULL = "/v1/offers/pull"
PER_TRANSACTION = 2_000
PAYLOAD_BYTES = 7_990  # pg_notify's limit is 8,000 bytes
RSS_GROWTH_LIMIT_KIB = 20 * 1024

# Each flood: distinct payloads (PostgreSQL folds duplicates within a transaction).
# 60,000 of 8 KB grew an ingress from 63 to 532 MiB when the view kept every
# `s:`/`c:` id for 30 s; 150,000 well-shaped forged ids (~40 bytes each) grew
# it by ~40 MiB.
OVERSIZED = (
    "SELECT count(pg_notify('ql_dispatch', 's:' || g || repeat('x', %(pad)s::integer)))"
    " FROM generate_series(%(lo)s::integer, %(hi)s::integer) g"
)
WELL_SHAPED = (
    "SELECT count(pg_notify('ql_dispatch', CASE WHEN g %% 2 = 0"
    " THEN 's:' || gen_random_uuid()::text"
    " ELSE 'c:' || substr(md5(g::text || random()::text), 1, 16) END))"
    " FROM generate_series(%(lo)s::integer, %(hi)s::integer) g"
)


@pytest.fixture
def connect_only(pg_cluster: ThrowawayPostgres, db_name: str) -> str:
    """A login whose only privilege is CONNECT on this database."""
    group = "ql_test_connect_only"
    with psycopg.connect(pg_cluster.dsn(db_name), autocommit=True) as conn:
        conn.execute(
            "DO $$ BEGIN CREATE ROLE ql_test_connect_only NOLOGIN;"
            " EXCEPTION WHEN duplicate_object THEN NULL; END $$"
        )
        conn.execute(
            sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(
                sql.Identifier(db_name), sql.Identifier(group)
            )
        )
    return pg_cluster.ensure_login_role("ql_test_connect_only_login", group, db_name)


@pytest.fixture
def server(tmp_path: Path, test_pki, ingress_dsn: str) -> Iterator[IngressProcess]:
    started = start_ingress_process(tmp_path, test_pki, ingress_dsn, idleViewEngageRatePerS=0)
    yield started
    started.stop()


def _series(server: IngressProcess, name: str, label: str = "") -> float:
    """One series (`label` as exposed, e.g. 'source="view"'), or every series summed."""
    pattern = (
        "^"
        + re.escape(name)
        + (r"\{" + re.escape(label) + r"\}" if label else r"(?:\{[^}]*\})?")
        + r" (\S+)$"
    )
    return sum(float(v) for v in re.findall(pattern, server.metrics_text(), re.M))


def _from_view(server: IngressProcess) -> float:
    return _series(server, "qinglong_ingress_idle_view_pulls_total", 'source="view"')


def _pull(server: IngressProcess, agent: Agent, session: dict[str, Any]) -> Any:
    return post(server.port, PULL, pull_body(agent, session), ctx=agent.ctx, token=agent.token)


def _wait(check: Any, what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _session(server: IngressProcess, agent: Agent) -> dict[str, Any]:
    reply = post(server.port, "/v1/sessions", open_body(agent), ctx=agent.ctx, token=agent.token)
    assert reply.status == 201, reply.body
    return dict(reply.json)


def _until_view_answers(server: IngressProcess, agent: Agent, session: dict[str, Any]) -> None:
    def answered() -> bool:
        before = _from_view(server)
        reply = _pull(server, agent, session)
        assert reply.status == 200 and reply.json["status"] == "idle", reply.body
        return _from_view(server) > before

    _wait(answered, "a pull answered from the view", 15)


@pytest.mark.parametrize(
    ("flood_sql", "flood"),
    [(OVERSIZED, 60_000), (WELL_SHAPED, 150_000)],
    ids=["8kb_junk", "well_shaped"],
)
def test_notify_flood_neither_grows_the_ingress_nor_changes_answers(
    server: IngressProcess,
    connect_only: str,
    prov: Provisioner,
    test_pki,
    flood_sql: str,
    flood: int,
) -> None:
    agent = make_agent(prov, test_pki, "w-flood")
    session = _session(server, agent)
    _until_view_answers(server, agent, session)
    received = "qinglong_ingress_idle_view_notifications_total"
    before_flood = _series(server, received)
    rss_before = read_status_kib(server.pid, "VmRSS")

    started = time.monotonic()
    with psycopg.connect(connect_only, autocommit=True) as flooder:
        for lo in range(1, flood + 1, PER_TRANSACTION):
            flooder.execute(
                flood_sql, {"lo": lo, "hi": lo + PER_TRANSACTION - 1, "pad": PAYLOAD_BYTES - 8}
            )
            # Pulls keep their answers while the flood arrives.
            reply = _pull(server, agent, session)
            assert reply.status == 200 and reply.json["status"] == "idle", reply.body
    _wait(
        lambda: _series(server, received) - before_flood >= flood,
        "the flood delivered to the ingress",
        60,
    )
    elapsed = time.monotonic() - started
    rss_after = read_status_kib(server.pid, "VmRSS")
    report = {
        "rssBeforeKiB": rss_before,
        "rssAfterKiB": rss_after,
        "hwmKiB": read_status_kib(server.pid, "VmHWM"),
        "floodS": round(elapsed, 1),
        "metrics": [
            line
            for line in server.metrics_text().splitlines()
            if line.startswith("qinglong_ingress_idle_view_")
        ],
    }
    assert rss_after - rss_before <= RSS_GROWTH_LIMIT_KIB, report
    if flood_sql is OVERSIZED:
        # Not a shape the database's triggers send: dropped unread.
        assert _series(server, received, 'kind="invalid"') >= flood, report
    else:
        # Forged ids beyond the cap: the marks were forgotten (fills in flight refused).
        assert (
            _series(server, "qinglong_ingress_idle_view_overflows_total", 'table="marks"') >= 1
        ), report

    # Still idle when the queue is empty, from the view again after the flood...
    _until_view_answers(server, agent, session)
    # ... and work still reaches the worker on its next pull.
    (run_id,) = prov.enqueue(prov.task("t"), count=1)
    offered = post(
        server.port,
        PULL,
        pull_body(agent, session, offer_id=str(uuid.uuid4())),
        ctx=agent.ctx,
        token=agent.token,
    )
    assert offered.status == 200 and offered.json["status"] == "offered", offered.body
    assert offered.json["candidate"]["runId"] == run_id
