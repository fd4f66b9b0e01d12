"""Sessions, pulls, replays and the request-validation paths against real PostgreSQL."""

from __future__ import annotations

import json
import re
import socket
import time
import uuid

import pytest

from qinglong.schemas.contract import validate
from tests.py import ingress_harness
from tests.py.ingress_harness import (
    Agent,
    client_context,
    ingress_config,
    make_agent,
    open_body,
    post,
    pull_body,
    snapshot,
    tls_socket,
)

# Shared fixtures (pytest collects them through these module names).
ingress = ingress_harness.ingress
ingress_dsn = ingress_harness.ingress_dsn
prov = ingress_harness.prov
start_ingress_thread = ingress_harness.start_ingress_thread
su_conn = ingress_harness.su_conn
test_pki = ingress_harness.test_pki

SESSION_KEYS = [
    "schema",
    "workerId",
    "sessionId",
    "generation",
    "expiresAtMs",
    "capabilitiesDigest",
    "heartbeatIntervalMs",
]


@pytest.fixture
def agent(prov, test_pki) -> Agent:
    return make_agent(prov, test_pki, "worker-a")


def _open(ingress, agent: Agent) -> dict:
    reply = post(ingress.port, "/v1/sessions", open_body(agent), ctx=agent.ctx, token=agent.token)
    assert reply.status == 201, reply.body
    assert reply.headers["Content-Type"].startswith("application/json")
    return reply.json


def _fence_body(kind: str, agent: Agent, session: dict) -> dict:
    return {
        "schema": f"qinglong/session-{kind}-request@v1",
        "workerId": agent.worker_id,
        "sessionId": session["sessionId"],
        "generation": session["generation"],
    }


def test_session_open_heartbeat_close_and_replacement(ingress, agent):
    first = _open(ingress, agent)
    assert list(first) == SESSION_KEYS
    assert first["schema"] == "qinglong/session@v1" and first["generation"] == 1
    validate("qinglong/session@v1", first)

    beat = post(
        ingress.port,
        "/v1/sessions/heartbeat",
        _fence_body("heartbeat", agent, first),
        ctx=agent.ctx,
        token=agent.token,
    )
    assert beat.status == 200 and beat.json["sessionId"] == first["sessionId"]
    assert beat.json["expiresAtMs"] >= first["expiresAtMs"]

    second = _open(ingress, agent)
    assert second["generation"] == 2 and second["sessionId"] != first["sessionId"]
    stale = post(
        ingress.port,
        "/v1/sessions/heartbeat",
        _fence_body("heartbeat", agent, first),
        ctx=agent.ctx,
        token=agent.token,
    )
    assert stale.status == 409
    assert stale.json["error"] == "conflict"
    assert stale.json["reason"] in ("session_replaced", "session_closed")

    closed = post(
        ingress.port,
        "/v1/sessions/close",
        _fence_body("close", agent, second),
        ctx=agent.ctx,
        token=agent.token,
    )
    assert closed.status == 200 and closed.json["sessionId"] == second["sessionId"]
    again = post(
        ingress.port,
        "/v1/sessions/heartbeat",
        _fence_body("heartbeat", agent, second),
        ctx=agent.ctx,
        token=agent.token,
    )
    assert (again.status, again.json["reason"]) == (409, "session_closed")


def test_pull_offer_and_exact_replay(ingress, agent, prov, su_conn):
    session = _open(ingress, agent)
    prov.enqueue(prov.task("t"), count=1)
    body = pull_body(agent, session)
    first = post(ingress.port, "/v1/offers/pull", body, ctx=agent.ctx, token=agent.token)
    assert first.status == 200, first.body
    offer = first.json
    assert list(offer)[:2] == ["schema", "status"]
    assert offer["status"] == "offered" and offer["offerId"] == body["offerId"]
    validate("qinglong/remote-execution-offer@v1", offer)
    assert body["leaseToken"] not in first.body.decode()

    replay = post(ingress.port, "/v1/offers/pull", body, ctx=agent.ctx, token=agent.token)
    assert replay.status == 200 and replay.body == first.body

    other_token = dict(body, leaseToken=pull_body(agent, session)["leaseToken"])
    conflict = post(ingress.port, "/v1/offers/pull", other_token, ctx=agent.ctx, token=agent.token)
    assert conflict.status == 409
    assert conflict.json == {
        "schema": "qinglong/error@v1",
        "error": "conflict",
        "reason": "token_mismatch",
    }

    idle = post(
        ingress.port, "/v1/offers/pull", pull_body(agent, session), ctx=agent.ctx, token=agent.token
    )
    assert idle.status == 200
    assert idle.json["status"] == "idle" and idle.json["reason"] == "no_candidates"
    cfg = ingress.running.state.config
    assert (
        cfg.idle_retry_after_ms
        <= idle.json["retryAfterMs"]
        <= (cfg.idle_retry_after_ms + cfg.idle_jitter_ms)
    )


def test_response_lost_then_replay_gives_the_same_offer(ingress, agent, prov, su_conn):
    session = _open(ingress, agent)
    prov.enqueue(prov.task("t"), count=1)
    body = pull_body(agent, session)
    data = json.dumps(body).encode()
    with tls_socket(ingress.port, agent.ctx) as sock:
        sock.sendall(
            b"POST /v1/offers/pull HTTP/1.1\r\nHost: x\r\n"
            b"Content-Type: application/json\r\n"
            + f"Authorization: Bearer {agent.token}\r\n".encode()
            + f"Content-Length: {len(data)}\r\n\r\n".encode()
            + data
        )
        sock.shutdown(socket.SHUT_WR)
    # Closed before reading: the claim may or may not have committed yet.
    deadline = time.monotonic() + 10
    while su_conn.execute("SELECT count(*) FROM ql_private.run_leases").fetchone()[0] == 0:
        assert time.monotonic() < deadline, "claim never committed"
        time.sleep(0.05)
    replay = post(ingress.port, "/v1/offers/pull", body, ctx=agent.ctx, token=agent.token)
    assert replay.status == 200 and replay.json["offerId"] == body["offerId"]
    again = post(ingress.port, "/v1/offers/pull", body, ctx=agent.ctx, token=agent.token)
    assert again.body == replay.body
    leases = su_conn.execute("SELECT count(*) FROM ql_private.run_leases").fetchone()[0]
    events = su_conn.execute(
        "SELECT count(*) FROM ql_private.events WHERE type = 'run.dispatched'"
    ).fetchone()[0]
    assert (leases, events) == (1, 1)


@pytest.mark.parametrize(
    "case",
    [
        "oversize",
        "oversize_announced",
        "oversize_chunked",
        "bad_json",
        "duplicate_key",
        "unknown_field",
        "wrong_schema",
        "empty",
    ],
)
def test_bad_bodies_are_refused_and_change_nothing(ingress, agent, prov, su_conn, case):
    session = _open(ingress, agent)
    prov.enqueue(prov.task("t"), count=1)
    body = pull_body(agent, session)
    headers: dict[str, str] = {}
    expected = (400, "schema_invalid")
    data: bytes
    if case == "oversize":
        data = json.dumps(dict(body, pad="x" * 5000)).encode()
        expected = (413, "body_too_large")
    elif case == "oversize_announced":
        data = b"{}"
        headers = {"Content-Length": "1000000"}
        expected = (413, "body_too_large")
    elif case == "oversize_chunked":
        # Nothing announced, the whole body and its end in one write: the ingress
        # has it all at once and must still count it.
        whole = json.dumps(dict(body, pad="x" * 5000)).encode()
        data = f"{len(whole):x}\r\n".encode() + whole + b"\r\n0\r\n\r\n"
        expected = (413, "body_too_large")
    elif case == "bad_json":
        data, expected = b'{"schema": ', (400, "invalid_json")
    elif case == "duplicate_key":
        text = json.dumps(body)
        data = (text[:-1] + f', "workerId": "{agent.worker_id}"}}').encode()
        expected = (400, "duplicate_key")
    elif case == "unknown_field":
        data = json.dumps(dict(body, extra=1)).encode()
    elif case == "wrong_schema":
        data = json.dumps(dict(body, schema="qinglong/offer-pull-request@v2")).encode()
    else:
        data, expected = b"", (400, "invalid_json")
    before = snapshot(su_conn)
    if case == "oversize_announced":
        length = headers["Content-Length"]
        reply = _raw_request(ingress.port, agent, data, f"Content-Length: {length}")
    elif case == "oversize_chunked":
        reply = _raw_request(ingress.port, agent, data, "Transfer-Encoding: chunked")
    else:
        reply = post(ingress.port, "/v1/offers/pull", data, ctx=agent.ctx, token=agent.token)
    assert (reply.status, reply.json["reason"]) == expected
    assert reply.json["schema"] == "qinglong/error@v1"
    after = snapshot(su_conn)
    assert after == before


def _raw_request(port: int, agent: Agent, data: bytes, framing: str):
    from tests.py.ingress_harness import Reply

    with tls_socket(port, agent.ctx) as sock:
        sock.sendall(
            b"POST /v1/offers/pull HTTP/1.1\r\nHost: x\r\n"
            + f"Authorization: Bearer {agent.token}\r\n".encode()
            + f"{framing}\r\n\r\n".encode()
            + data
        )
        raw = b""
        while chunk := sock.recv(65536):
            raw += chunk
    head, _, body = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ")[1])
    import email

    headers = email.message_from_bytes(head.split(b"\r\n", 1)[1])
    return Reply(status, headers, body)  # type: ignore[arg-type]


def test_unknown_routes_methods_and_lease_endpoints_use_the_envelope(ingress, agent):
    cases = [
        ("POST", "/v1/nope", 404, "unknown_route"),
        ("GET", "/v1/offers/pull", 405, "method_not_allowed"),
        ("GET", "/v1/leases/ack", 405, "method_not_allowed"),
        ("POST", "/v1/leases/ack", 400, "schema_invalid"),
        ("POST", "/v1/leases/heartbeat", 400, "schema_invalid"),
        ("POST", "/v1/leases/complete", 400, "schema_invalid"),
    ]
    for method, path, status, reason in cases:
        reply = post(ingress.port, path, {}, ctx=agent.ctx, token=agent.token, method=method)
        assert reply.status == status, path
        assert reply.headers["Content-Type"].startswith("application/json")
        assert reply.json["schema"] == "qinglong/error@v1" and reply.json["reason"] == reason


def test_rate_limit_answers_429_with_retry_after(
    start_ingress_thread, test_pki, ingress_dsn, agent
):
    server = start_ingress_thread(
        ingress_config(test_pki, ingress_dsn, rate_per_s=0.5, rate_burst=2)
    )
    session = _open(server, agent)
    statuses = []
    for _ in range(3):
        reply = post(
            server.port,
            "/v1/offers/pull",
            pull_body(agent, session),
            ctx=agent.ctx,
            token=agent.token,
        )
        statuses.append(reply.status)
    assert statuses == [200, 429, 429]  # burst 2: the open took one token
    assert int(reply.headers["Retry-After"]) >= 1
    assert reply.json == {
        "schema": "qinglong/error@v1",
        "error": "rate_limited",
        "reason": "too_many_requests",
    }
    assert server.metrics.rate_limited.value() == 2


def test_lease_calls_have_their_own_budget(
    start_ingress_thread, test_pki, ingress_dsn, agent, prov
):
    """A worker that spent its polling budget can still ACK and complete the run it
    holds (lease calls use a separate bucket), and lease calls are limited too."""
    server = start_ingress_thread(
        ingress_config(
            test_pki,
            ingress_dsn,
            rate_per_s=0.5,
            rate_burst=2,
            lease_rate_per_s=0.5,
            lease_rate_burst=2,
        )
    )
    session = _open(server, agent)
    prov.enqueue(prov.task("t"), count=2)
    pull = pull_body(agent, session)
    offered = post(server.port, "/v1/offers/pull", pull, ctx=agent.ctx, token=agent.token)
    assert offered.status == 200 and offered.json["status"] == "offered", offered.body
    again = post(
        server.port, "/v1/offers/pull", pull_body(agent, session), ctx=agent.ctx, token=agent.token
    )
    assert again.status == 429  # the polling bucket is empty ...

    def lease(kind: str, version: int, **extra: object) -> int:
        body = {
            "schema": f"qinglong/lease-{kind}-request@v1",
            "workerId": agent.worker_id,
            "sessionId": session["sessionId"],
            "generation": session["generation"],
            "offerId": pull["offerId"],
            "leaseToken": pull["leaseToken"],
            "leaseVersion": version,
            **extra,
        }
        return post(
            server.port, f"/v1/leases/{kind}", body, ctx=agent.ctx, token=agent.token
        ).status

    assert lease("ack", 1, phase="starting") == 200  # ... the lease bucket is not
    assert lease("ack", 2, phase="running") == 200
    assert lease("complete", 3, outcome="succeeded", exitCode=0) == 429  # lease burst 2 spent
    assert server.metrics.rate_limited.value() == 2


def test_corrupted_projection_is_503_not_400(
    start_ingress_thread, test_pki, ingress_dsn, agent, prov, su_conn
):
    def corrupt(route: str, doc: dict) -> dict:
        if route == "offers.pull" and doc.get("status") == "offered":
            return dict(doc, placementScore=-1)
        return doc

    server = start_ingress_thread(ingress_config(test_pki, ingress_dsn), projection_hook=corrupt)
    session = _open(server, agent)
    prov.enqueue(prov.task("t"), count=1)
    reply = post(
        server.port, "/v1/offers/pull", pull_body(agent, session), ctx=agent.ctx, token=agent.token
    )
    assert reply.status == 503
    assert reply.json == {
        "schema": "qinglong/error@v1",
        "error": "unavailable",
        "reason": "invalid_projection",
    }
    assert int(reply.headers["Retry-After"]) >= 1
    assert server.metrics.invalid_projections.value() == 1


def test_metrics_count_requests_and_audit_has_no_secrets(ingress, agent, prov):
    session = _open(ingress, agent)
    prov.enqueue(prov.task("t"), count=1)
    intent = pull_body(agent, session)
    assert (
        post(ingress.port, "/v1/offers/pull", intent, ctx=agent.ctx, token=agent.token).status
        == 200
    )
    post(ingress.port, "/v1/offers/pull", intent, ctx=agent.ctx, token=agent.token)
    post(
        ingress.port, "/v1/offers/pull", pull_body(agent, session), ctx=agent.ctx, token=agent.token
    )
    post(ingress.port, "/v1/offers/pull", pull_body(agent, session), ctx=agent.ctx, token=None)
    text = ingress.metrics_text()

    def sample(pattern: str) -> float:
        match = re.search("^" + re.escape(pattern) + r" (\S+)$", text, re.M)
        assert match, pattern
        return float(match.group(1))

    assert sample('qinglong_ingress_requests_total{route="/v1/offers/pull",status="200"}') == 3
    assert sample('qinglong_ingress_requests_total{route="/v1/offers/pull",status="401"}') == 1
    assert sample('qinglong_ingress_requests_total{route="/v1/sessions",status="201"}') == 1
    assert sample('qinglong_ingress_pull_results_total{result="offered"}') == 1
    assert sample('qinglong_ingress_pull_results_total{result="idempotent"}') == 1
    assert sample('qinglong_ingress_pull_results_total{result="idle"}') == 1
    assert (
        sample(
            'qinglong_ingress_auth_decisions_total{action="offer.pull",outcome="denied",'
            'reason="missing_credential"}'
        )
        == 1
    )
    assert sample('qinglong_ingress_request_duration_seconds_count{route="/v1/offers/pull"}') == 4
    assert "qinglong_ingress_open_connections " in text

    decisions = [json.loads(line) for line in ingress.audit_lines]
    # Each database call: `allowed` before it, what it did after it (the idle view
    # is dormant here: the idle pull is a database call too).
    assert [(d["action"], d["outcome"], d["reason"]) for d in decisions] == [
        ("session.open", "allowed", "identity_verified"),
        ("session.open", "done", "ok"),
        ("offer.pull", "allowed", "identity_verified"),
        ("offer.pull", "done", "offered"),
        ("offer.pull", "allowed", "identity_verified"),
        ("offer.pull", "done", "idempotent"),
        ("offer.pull", "allowed", "identity_verified"),
        ("offer.pull", "done", "idle"),
        ("offer.pull", "denied", "missing_credential"),
    ]
    everything = "\n".join(ingress.audit_lines) + text
    for secret in (agent.worker.secret, agent.token, intent["leaseToken"]):
        assert secret not in everything


def test_admin_health_and_readiness(ingress):
    import http.client

    for path, status in (("/healthz", 200), ("/readyz", 200)):
        conn = http.client.HTTPConnection("127.0.0.1", ingress.admin_port, timeout=10)
        conn.request("GET", path)
        assert conn.getresponse().status == status
        conn.close()


def test_offer_ids_from_another_session_conflict(ingress, agent, prov):
    first = _open(ingress, agent)
    prov.enqueue(prov.task("t"), count=1)
    body = pull_body(agent, first)
    assert (
        post(ingress.port, "/v1/offers/pull", body, ctx=agent.ctx, token=agent.token).json["status"]
        == "offered"
    )
    second = _open(ingress, agent)  # replaces the session: the pending offer is void
    reply = post(ingress.port, "/v1/offers/pull", body, ctx=agent.ctx, token=agent.token)
    assert reply.status == 409 and reply.json["reason"] == "session_replaced"
    assert second["generation"] == first["generation"] + 1
    _ = uuid, client_context


def test_statement_timeout_is_503_with_retry_after(
    start_ingress_thread, test_pki, ingress_dsn, agent, db_dsn
):
    import psycopg

    server = start_ingress_thread(ingress_config(test_pki, ingress_dsn, statement_timeout_ms=500))
    with psycopg.connect(db_dsn) as blocker:  # holds the worker row: open_session waits
        blocker.execute(
            "SELECT 1 FROM ql_private.workers WHERE id = %s FOR UPDATE", (agent.worker_id,)
        )
        started = time.monotonic()
        reply = post(
            server.port, "/v1/sessions", open_body(agent), ctx=agent.ctx, token=agent.token
        )
        elapsed = time.monotonic() - started
        blocker.rollback()
    assert reply.status == 503
    assert reply.json == {
        "schema": "qinglong/error@v1",
        "error": "unavailable",
        "reason": "statement_timeout",
    }
    assert reply.headers["Retry-After"] == "2"
    assert elapsed < 2.0
    assert server.metrics.db_errors.value("statement_timeout") == 1
    # The same pooled connection keeps working afterwards.
    assert (
        post(server.port, "/v1/sessions", open_body(agent), ctx=agent.ctx, token=agent.token).status
        == 201
    )
