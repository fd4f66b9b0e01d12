"""POST /v1/leases/batch (SPEC §18.3) over real TLS against real PostgreSQL: each
item answered {status, body} exactly as its single endpoint answers the same
body; one item's refusal never affects another; bad batches change nothing."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from qinglong.schemas.contract import validate
from tests.py import ingress_harness
from tests.py.ingress_harness import Agent, make_agent, open_body, post, pull_body, snapshot

ingress = ingress_harness.ingress
ingress_dsn = ingress_harness.ingress_dsn
prov = ingress_harness.prov
start_ingress_thread = ingress_harness.start_ingress_thread
su_conn = ingress_harness.su_conn
test_pki = ingress_harness.test_pki

PATH = "/v1/leases/batch"


@pytest.fixture
def agent(prov, test_pki) -> Agent:
    return make_agent(prov, test_pki, "worker-a")


def _session(ingress, agent: Agent) -> dict:
    reply = post(ingress.port, "/v1/sessions", open_body(agent), ctx=agent.ctx, token=agent.token)
    assert reply.status == 201, reply.body
    return reply.json


def _offers(ingress, agent: Agent, session: dict, prov, count: int) -> list[tuple[dict, dict]]:
    prov.enqueue(prov.task("t"), count=count)
    out = []
    for _ in range(count):
        body = pull_body(agent, session)
        reply = post(ingress.port, "/v1/offers/pull", body, ctx=agent.ctx, token=agent.token)
        assert reply.status == 200 and reply.json["status"] == "offered", reply.body
        out.append((body, reply.json))
    return out


def _item(
    kind: str, agent: Agent, session: dict, pull: dict, version: int, **extra: Any
) -> dict[str, Any]:
    return {
        "schema": f"qinglong/lease-{kind}-request@v1",
        "workerId": agent.worker_id,
        "sessionId": session["sessionId"],
        "generation": session["generation"],
        "offerId": pull["offerId"],
        "leaseToken": pull["leaseToken"],
        "leaseVersion": version,
        **extra,
    }


def _batch(agent: Agent, session: dict, items: list[dict]) -> dict[str, Any]:
    return {
        "schema": "qinglong/lease-batch-request@v1",
        "workerId": agent.worker_id,
        "sessionId": session["sessionId"],
        "generation": session["generation"],
        "items": items,
    }


def test_each_item_is_answered_as_its_single_endpoint_would(ingress, agent, prov):
    session = _session(ingress, agent)
    (p1, o1), (p2, o2) = _offers(ingress, agent, session, prov, 2)
    v1, v2 = o1["lease"]["leaseVersion"], o2["lease"]["leaseVersion"]
    items = [
        _item("ack", agent, session, p1, v1, phase="starting"),
        _item("ack", agent, session, p2, v2, phase="starting"),
        _item("heartbeat", agent, session, p2, v2 + 5),
    ]  # a stale version: refused alone
    reply = post(
        ingress.port, PATH, _batch(agent, session, items), ctx=agent.ctx, token=agent.token
    )
    assert reply.status == 200, reply.body
    validate("qinglong/lease-batch@v1", reply.json)
    results = reply.json["results"]
    assert [r["status"] for r in results] == [200, 200, 409]
    assert [r["body"]["state"] for r in results[:2]] == ["starting", "starting"]
    assert results[2]["body"]["schema"] == "qinglong/error@v1"

    # The same bodies sent one by one answer the same: replays of the ACKs are
    # idempotent, and the stale heartbeat is refused with the same reason.
    for item, result in zip(items, results, strict=True):
        kind = item["schema"].split("lease-")[1].split("-request")[0]
        single = post(ingress.port, f"/v1/leases/{kind}", item, ctx=agent.ctx, token=agent.token)
        assert (single.status, single.json) == (result["status"], result["body"])

    started = results[0]["body"]["leaseVersion"]
    running = _item("ack", agent, session, p1, started, phase="running")
    log = _item("log", agent, session, p1, started + 1, offset=0, chunk="hello\n")
    done = _item("complete", agent, session, p1, started + 1, outcome="succeeded", exitCode=0)
    reply = post(
        ingress.port,
        PATH,
        _batch(agent, session, [running, log, done]),
        ctx=agent.ctx,
        token=agent.token,
    )
    assert reply.status == 200, reply.body
    results = reply.json["results"]
    assert [r["status"] for r in results] == [200, 200, 200], results
    assert results[1]["body"] == {
        "schema": "qinglong/lease-log@v1",
        "storedBytes": 6,
        "truncated": False,
    }
    assert results[2]["body"]["state"] == "succeeded"
    text = reply.body.decode()
    assert p1["leaseToken"] not in text and p2["leaseToken"] not in text


def test_bad_batches_are_refused_and_change_nothing(ingress, agent, prov, su_conn, test_pki):
    session = _session(ingress, agent)
    ((pull, offer),) = _offers(ingress, agent, session, prov, 1)
    item = _item("ack", agent, session, pull, offer["lease"]["leaseVersion"], phase="starting")
    before = snapshot(su_conn)
    other_session = dict(item, sessionId=str(uuid.uuid4()))
    cases = [
        (_batch(agent, session, []), "schema_invalid"),
        (_batch(agent, session, [item] * 33), "schema_invalid"),
        (_batch(agent, session, [dict(item, phase="sleeping")]), "schema_invalid"),
        (_batch(agent, session, [item, other_session]), "batch_session_mismatch"),
    ]
    for body, reason in cases:
        reply = post(ingress.port, PATH, body, ctx=agent.ctx, token=agent.token)
        assert (reply.status, reply.json["reason"]) == (400, reason), reply.body
    assert snapshot(su_conn).tables == before.tables
    other = make_agent(prov, test_pki, "worker-b")
    before = snapshot(su_conn)
    reply = post(
        ingress.port, PATH, _batch(agent, session, [item]), ctx=other.ctx, token=other.token
    )
    assert reply.status == 403 and reply.json["reason"] == "identity_mismatch"
    assert snapshot(su_conn).tables == before.tables
