"""Session heartbeats batched into one database call (service/heartbeat_batch.py).

Truly concurrent heartbeats through the real TLS ingress, with good items and
bad ones (wrong secret, replaced generation, another worker's session) in the
same batch: every worker gets exactly the answer of the single call, and the
batch is one `ql.heartbeat_sessions` call.
"""

from __future__ import annotations

import re
import threading
from typing import Any

from tests.py import ingress_harness
from tests.py.ingress_harness import ingress_config, make_agent, open_body, post

ingress_dsn = ingress_harness.ingress_dsn
prov = ingress_harness.prov
start_ingress_thread = ingress_harness.start_ingress_thread
su_conn = ingress_harness.su_conn
test_pki = ingress_harness.test_pki


def _count(text: str, name: str, label: str = "") -> int:
    pattern = (
        "^" + re.escape(name) + (r"\{" + re.escape(label) + r"\}" if label else "") + r" (\d+)$"
    )
    match = re.search(pattern, text, re.M)
    return int(match.group(1)) if match else 0


def test_one_call_per_batch_and_per_item_answers(
    start_ingress_thread, test_pki, ingress_dsn, prov, su_conn
):
    server = start_ingress_thread(
        ingress_config(
            test_pki, ingress_dsn, idle_view_engage_rate_per_s=0, heartbeat_batch_window_ms=300
        )
    )
    agents = [make_agent(prov, test_pki, f"w-hb-{i}") for i in range(6)]
    sessions = [
        post(server.port, "/v1/sessions", open_body(a), ctx=a.ctx, token=a.token).json
        for a in agents
    ]
    su_conn.execute(
        "UPDATE ql_private.worker_sessions SET expires_at = clock_timestamp()"
        " + interval '10 seconds' WHERE state = 'active'"
    )

    def beat(
        i: int,
        *,
        generation: int | None = None,
        session_id: str | None = None,
        token: str | None = None,
    ) -> tuple[int, Any]:
        agent, session = agents[i], sessions[i]
        body = {
            "schema": "qinglong/session-heartbeat-request@v1",
            "workerId": agent.worker_id,
            "sessionId": session_id or session["sessionId"],
            "generation": generation or session["generation"],
        }
        reply = post(
            server.port, "/v1/sessions/heartbeat", body, ctx=agent.ctx, token=token or agent.token
        )
        return reply.status, reply.json

    # agent 3's credential id with agent 2's (well-formed) secret
    bad_secret = f"ql3w_{agents[3].worker.credential_id}_{agents[2].worker.secret}"
    cases = [
        lambda: beat(0),
        lambda: beat(1),
        lambda: beat(2),
        lambda: beat(3, token=bad_secret),
        lambda: beat(4, generation=sessions[4]["generation"] + 5),
        lambda: beat(5, session_id=sessions[0]["sessionId"]),  # another worker's session
    ]
    before = server.metrics_text()
    results: list[Any] = [None] * len(cases)
    start = threading.Barrier(len(cases))

    def run(i: int) -> None:
        start.wait()
        results[i] = cases[i]()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(cases))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    after = server.metrics_text()

    for i in range(3):
        status, doc = results[i]
        assert status == 200 and doc["schema"] == "qinglong/session@v1"
        assert doc["sessionId"] == sessions[i]["sessionId"]
        assert doc["expiresAtMs"] > sessions[i]["expiresAtMs"] - 1000
    assert (results[3][0], results[3][1]["reason"]) == (401, "invalid_credential")
    assert (results[4][0], results[4][1]["reason"]) == (409, "session_replaced")
    assert (results[5][0], results[5][1]["reason"]) == (409, "session_not_found")

    items = _count(after, "qinglong_ingress_heartbeat_batch_items_total") - _count(
        before, "qinglong_ingress_heartbeat_batch_items_total"
    )
    batches = _count(after, "qinglong_ingress_heartbeat_batches_total") - _count(
        before, "qinglong_ingress_heartbeat_batches_total"
    )
    assert items == len(cases) and batches < items, (items, batches)
    hb = "qinglong_ingress_db_call_duration_seconds_count"
    assert _count(after, hb, 'function="heartbeat_sessions"') - _count(
        before, hb, 'function="heartbeat_sessions"'
    ) == batches - (
        _count(after, hb, 'function="heartbeat_session"')
        - _count(before, hb, 'function="heartbeat_session"')
    )
    # Only the bad items changed nothing; the good ones were extended in the database.
    rows = su_conn.execute(
        "SELECT session_id::text, expires_at > clock_timestamp() + interval '50 seconds'"
        " FROM ql_private.worker_sessions WHERE state = 'active'"
    ).fetchall()
    extended = {sid for sid, ok in rows if ok}
    assert extended == {s["sessionId"] for s in sessions[:3]}


def test_dormant_replica_heartbeats_one_call_each(
    start_ingress_thread, test_pki, ingress_dsn, prov
):
    server = start_ingress_thread(ingress_config(test_pki, ingress_dsn))
    agent = make_agent(prov, test_pki, "w-hb-dormant")
    session = post(
        server.port, "/v1/sessions", open_body(agent), ctx=agent.ctx, token=agent.token
    ).json
    body = {
        "schema": "qinglong/session-heartbeat-request@v1",
        "workerId": agent.worker_id,
        "sessionId": session["sessionId"],
        "generation": session["generation"],
    }
    for _ in range(2):
        assert (
            post(
                server.port, "/v1/sessions/heartbeat", body, ctx=agent.ctx, token=agent.token
            ).status
            == 200
        )
    text = server.metrics_text()
    hb = "qinglong_ingress_db_call_duration_seconds_count"
    assert _count(text, hb, 'function="heartbeat_session"') == 2
    assert _count(text, hb, 'function="heartbeat_sessions"') == 0
