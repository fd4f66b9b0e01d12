"""POST /v1/offers/pull-batch (SPEC §18.1) over real TLS against real PostgreSQL:
claims up to the free slots, exact replay of a partly-claimed batch, per-id
conflicts, idle, bad input and identity checks."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest

from qinglong.schemas.contract import validate
from tests.py import ingress_harness
from tests.py.ingress_harness import Agent, make_agent, open_body, post, snapshot
from tests.py.provision import new_token

ingress = ingress_harness.ingress
ingress_dsn = ingress_harness.ingress_dsn
prov = ingress_harness.prov
start_ingress_thread = ingress_harness.start_ingress_thread
su_conn = ingress_harness.su_conn
test_pki = ingress_harness.test_pki

PATH = "/v1/offers/pull-batch"
BATCH = "qinglong/remote-execution-offer-batch@v1"


@pytest.fixture
def agent(prov, test_pki) -> Agent:
    return make_agent(prov, test_pki, "worker-a")


def _open(ingress, agent: Agent) -> dict:
    reply = post(ingress.port, "/v1/sessions", open_body(agent), ctx=agent.ctx, token=agent.token)
    assert reply.status == 201, reply.body
    return reply.json


def _batch_body(agent: Agent, session: dict, pairs: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "schema": "qinglong/offer-batch-pull-request@v1",
        "workerId": agent.worker_id,
        "sessionId": session["sessionId"],
        "generation": session["generation"],
        "offers": pairs,
    }


def _pulls(ingress, result: str) -> int:
    pattern = "^" + re.escape(f'qinglong_ingress_pull_results_total{{result="{result}"}}')
    match = re.search(pattern + r" (\d+)$", ingress.metrics_text(), re.M)
    return int(match.group(1)) if match else 0


def _pairs(count: int) -> list[dict[str, str]]:
    return [{"offerId": str(uuid.uuid4()), "leaseToken": new_token()} for _ in range(count)]


def test_batch_claims_up_to_free_slots_and_replays_exactly(ingress, agent, prov, su_conn):
    session = _open(ingress, agent)  # 4 slots (ingress_harness.CAPABILITIES)
    run_ids = prov.enqueue(prov.task("t"), count=6)
    pairs = _pairs(6)
    body = _batch_body(agent, session, pairs)
    first = post(ingress.port, PATH, body, ctx=agent.ctx, token=agent.token)
    assert first.status == 200, first.body
    doc = first.json
    validate(BATCH, doc)
    assert list(doc) == ["schema", "offers", "idle"]
    assert [o["offerId"] for o in doc["offers"]] == [p["offerId"] for p in pairs[:4]]
    assert [o["candidate"]["runId"] for o in doc["offers"]] == run_ids[:4]
    assert all(
        o["schema"] == "qinglong/remote-execution-offer@v1" and o["status"] == "offered"
        for o in doc["offers"]
    )
    assert doc["idle"]["reason"] == "capacity_full"
    cfg = ingress.running.state.config
    assert (
        cfg.idle_retry_after_ms
        <= doc["idle"]["retryAfterMs"]
        <= (cfg.idle_retry_after_ms + cfg.idle_jitter_ms)
    )
    text = first.body.decode()
    assert not any(p["leaseToken"] in text for p in pairs)

    assert (_pulls(ingress, "offered"), _pulls(ingress, "idempotent")) == (4, 0)
    before = snapshot(su_conn)
    replay = post(ingress.port, PATH, body, ctx=agent.ctx, token=agent.token)
    assert replay.status == 200
    assert replay.json["offers"] == doc["offers"]
    # Replays are counted as recovered (`idempotent`), as a single pull's are.
    assert (_pulls(ingress, "offered"), _pulls(ingress, "idempotent")) == (4, 4)
    assert snapshot(su_conn).tables == before.tables  # a replayed batch writes nothing

    # Each id replays through the single endpoint as the very same offer.
    single = post(
        ingress.port,
        "/v1/offers/pull",
        {
            "schema": "qinglong/offer-pull-request@v1",
            "workerId": agent.worker_id,
            "sessionId": session["sessionId"],
            "generation": session["generation"],
            **pairs[1],
        },
        ctx=agent.ctx,
        token=agent.token,
    )
    assert single.status == 200 and single.json == doc["offers"][1]


def test_batch_reports_conflicts_per_id(ingress, agent, prov):
    session = _open(ingress, agent)
    prov.enqueue(prov.task("t"), count=2)
    pairs = _pairs(2)
    assert (
        post(
            ingress.port, PATH, _batch_body(agent, session, pairs), ctx=agent.ctx, token=agent.token
        ).status
        == 200
    )
    wrong = [pairs[0], {"offerId": pairs[1]["offerId"], "leaseToken": new_token()}]
    reply = post(
        ingress.port, PATH, _batch_body(agent, session, wrong), ctx=agent.ctx, token=agent.token
    )
    assert reply.status == 200, reply.body
    validate(BATCH, reply.json)
    assert [o["offerId"] for o in reply.json["offers"]] == [pairs[0]["offerId"]]
    assert reply.json["conflicts"] == [
        {"offerId": pairs[1]["offerId"], "category": "token_mismatch"}
    ]
    assert reply.json["idle"] is None


def test_idle_batch_and_session_fence(ingress, agent):
    session = _open(ingress, agent)
    idle = post(
        ingress.port, PATH, _batch_body(agent, session, _pairs(3)), ctx=agent.ctx, token=agent.token
    )
    assert idle.status == 200
    assert idle.json["offers"] == [] and idle.json["idle"]["reason"] == "no_candidates"
    stale = dict(_batch_body(agent, session, _pairs(1)), generation=session["generation"] + 1)
    reply = post(ingress.port, PATH, stale, ctx=agent.ctx, token=agent.token)
    assert reply.status == 409 and reply.json["reason"] == "session_replaced"


@pytest.mark.parametrize("offers", [[], "too_many", "duplicate"])
def test_bad_batches_are_refused_and_change_nothing(ingress, agent, su_conn, offers):
    session = _open(ingress, agent)
    pairs = (
        {"too_many": _pairs(17), "duplicate": _pairs(1) * 2}.get(offers, [])
        if isinstance(offers, str)
        else offers
    )
    before = snapshot(su_conn)
    reply = post(
        ingress.port, PATH, _batch_body(agent, session, pairs), ctx=agent.ctx, token=agent.token
    )
    assert reply.status == 400, reply.body
    # A specific reason: the schema's bounds (1-16 pairs), or the repeated offer id.
    assert reply.json["reason"] == (
        "duplicate_offer_id" if offers == "duplicate" else "schema_invalid"
    ), reply.body
    assert snapshot(su_conn).tables == before.tables


def test_batch_is_refused_for_another_workers_identity(ingress, agent, prov, test_pki):
    other = make_agent(prov, test_pki, "worker-b")
    session = _open(ingress, agent)
    body = _batch_body(agent, session, _pairs(1))
    reply = post(ingress.port, PATH, body, ctx=other.ctx, token=other.token)
    assert reply.status == 403 and reply.json["reason"] == "identity_mismatch"
