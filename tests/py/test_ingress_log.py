"""Live log chunks (SPEC §15.1, §15.2) over real mTLS against real PostgreSQL.

`POST /v1/leases/log` appends at the stored length only: a repeat of stored
bytes is answered 200 unchanged, anything else 409 `log_offset` with the stored
length as `offset`; past the task's logLimitBytes the log is cut on a character
boundary and answered `truncated: true`. Two appenders at the same offset:
exactly one appends, whatever the timing (truly concurrent requests, and two
database transactions held open against each other).
"""

from __future__ import annotations

import json
import threading
from typing import Any

import psycopg
import pytest

from qinglong.db import api
from qinglong.schemas.contract import validate
from qinglong.service.credentials import lease_token_digest
from tests.py import ingress_harness
from tests.py.ingress_harness import (
    Agent,
    IngressThread,
    Reply,
    ingress_config,
    make_agent,
    open_body,
    post,
    pull_body,
    snapshot,
)

ingress = ingress_harness.ingress
ingress_dsn = ingress_harness.ingress_dsn
prov = ingress_harness.prov
start_ingress_thread = ingress_harness.start_ingress_thread
su_conn = ingress_harness.su_conn
test_pki = ingress_harness.test_pki

LOG, ACK, HEARTBEAT, COMPLETE = (
    "/v1/leases/log",
    "/v1/leases/ack",
    "/v1/leases/heartbeat",
    "/v1/leases/complete",
)


class Claim:
    """A worker holding one offered lease through the real ingress; `version` is
    the lease version of the last lease@v1 it received."""

    def __init__(
        self,
        server: IngressThread,
        agent: Agent,
        session: dict[str, Any],
        pull: dict[str, Any],
        offer: dict[str, Any],
    ) -> None:
        self.server, self.agent, self.session, self.pull = server, agent, session, pull
        self.offer = offer
        self.version: int = offer["lease"]["leaseVersion"]
        self.replies: list[Reply] = []

    @property
    def run_id(self) -> str:
        return self.offer["candidate"]["runId"]

    def body(self, kind: str, **extra: Any) -> dict[str, Any]:
        return {
            "schema": f"qinglong/lease-{kind}-request@v1",
            "workerId": self.agent.worker_id,
            "sessionId": self.session["sessionId"],
            "generation": self.session["generation"],
            "offerId": self.pull["offerId"],
            "leaseToken": self.pull["leaseToken"],
            "leaseVersion": self.version,
            **extra,
        }

    def send(self, path: str, body: dict[str, Any] | bytes) -> Reply:
        reply = post(self.server.port, path, body, ctx=self.agent.ctx, token=self.agent.token)
        self.replies.append(reply)
        if reply.status == 200 and path != LOG:
            self.version = reply.json["leaseVersion"]
        return reply

    def log(self, offset: int, chunk: str, **extra: Any) -> Reply:
        return self.send(LOG, self.body("log", offset=offset, chunk=chunk, **extra))


def _claim(server: IngressThread, agent: Agent, prov, task_id: str) -> Claim:
    reply = post(server.port, "/v1/sessions", open_body(agent), ctx=agent.ctx, token=agent.token)
    assert reply.status == 201, reply.body
    session = reply.json
    prov.enqueue(task_id, count=1)
    body = pull_body(agent, session)
    reply = post(server.port, "/v1/offers/pull", body, ctx=agent.ctx, token=agent.token)
    assert reply.status == 200 and reply.json["status"] == "offered", reply.body
    return Claim(server, agent, session, body, reply.json)


@pytest.fixture
def agent(prov, test_pki) -> Agent:
    return make_agent(prov, test_pki, "worker-a")


@pytest.fixture
def started(ingress, agent, prov) -> Claim:
    claim = _claim(ingress, agent, prov, prov.task("t"))
    assert claim.send(ACK, claim.body("ack", phase="starting")).status == 200
    return claim


def _stored(reply: Reply, stored: int, truncated: bool = False) -> None:
    assert reply.status == 200, reply.body
    validate("qinglong/lease-log@v1", reply.json)
    assert reply.json == {
        "schema": "qinglong/lease-log@v1",
        "storedBytes": stored,
        "truncated": truncated,
    }


def _log_offset(reply: Reply, stored: int) -> None:
    assert reply.status == 409, reply.body
    validate("qinglong/error@v1", reply.json)
    assert reply.json == {
        "schema": "qinglong/error@v1",
        "error": "conflict",
        "reason": "log_offset",
        "offset": stored,
        "detail": {"offset": stored},
    }


def _conflict(reply: Reply, reason: str) -> None:
    assert (reply.status, reply.json) == (
        409,
        {"schema": "qinglong/error@v1", "error": "conflict", "reason": reason},
    )


def _text(prov, run_id: str) -> str:
    return prov.call(api.run_log(run_id=run_id)).text


def test_append_replay_and_resume_from_the_answered_offset(started, prov, su_conn, ingress):
    _stored(started.log(0, "héllo\n"), 7)
    _stored(started.log(7, "wörld"), 13)
    before = snapshot(su_conn)
    _stored(started.log(7, "wörld"), 13)  # the answer was lost: sent again
    _stored(started.log(0, "héllo\n"), 13)
    assert snapshot(su_conn) == before, "a replay writes nothing"
    _log_offset(started.log(0, "HELLO\n"), 13)
    _log_offset(started.log(40, "a gap"), 13)
    _log_offset(started.log(7, "wörld, longer"), 13)
    assert snapshot(su_conn) == before, "a refused chunk writes nothing"
    _stored(started.log(13, "!"), 14)  # resumed where the 409 said
    assert _text(prov, started.run_id) == "héllo\nwörld!"
    # The version is a fence, not bumped: a heartbeat at the version the ACK
    # answered still applies, and a chunk at the old version is then refused.
    acked = started.version
    assert started.send(HEARTBEAT, started.body("heartbeat")).status == 200
    assert started.version == acked + 1
    _conflict(started.log(14, "x", leaseVersion=acked), "stale_lease_version")
    _stored(started.log(14, "x"), 15)
    metrics = ingress.metrics_text()
    assert (
        'qinglong_ingress_lease_transitions_total{endpoint="leases.log",'
        'transition="log",outcome="ok"} 4'
    ) in metrics
    actions = {json.loads(line)["action"] for line in ingress.audit_lines}
    assert "lease.log" in actions
    texts = [r.body.decode() for r in started.replies] + ingress.audit_lines
    assert not [t for t in texts if started.pull["leaseToken"] in t]


def test_only_a_started_live_lease_appends(ingress, agent, prov, su_conn):
    claim = _claim(ingress, agent, prov, prov.task("t"))
    before = snapshot(su_conn)
    _conflict(claim.log(0, "too early"), "illegal_transition")
    assert snapshot(su_conn) == before
    assert claim.send(ACK, claim.body("ack", phase="starting")).status == 200
    _stored(claim.log(0, "out"), 3)
    done = claim.send(
        COMPLETE,
        claim.body(
            "complete",
            outcome="succeeded",
            result={"durationMs": 1, "outputTail": "out", "outputBytes": 3, "logBytes": 3},
        ),
    )
    assert done.status == 200, done.body
    _conflict(claim.log(3, "late"), "lease_terminal")
    page = prov.call(api.run_log(run_id=claim.run_id))
    assert (page.text, page.log_bytes, page.complete, page.ended) == ("out", 3, True, True)


def test_the_cap_pinned_at_claim_cuts_on_a_character_boundary(ingress, agent, prov):
    task_id = prov.task("capped")
    prov.call(api.configure_task(task_id=task_id, log_limit_bytes=1024))
    claim = _claim(ingress, agent, prov, task_id)
    prov.call(api.configure_task(task_id=task_id, log_limit_bytes=67108864))  # too late for it
    assert claim.send(ACK, claim.body("ack", phase="starting")).status == 200
    _stored(claim.log(0, "x" * 1000), 1000)
    _stored(claim.log(1000, "a" + "€" * 40), 1022, truncated=True)
    _stored(claim.log(1022, "dropped"), 1022, truncated=True)
    page = prov.call(api.run_log(run_id=claim.run_id))
    assert (page.text, page.truncated) == ("x" * 1000 + "a" + "€" * 7, True)


def test_chunk_bounds(started, su_conn):
    control = "\x01" * 65536  # 64 KiB of output that JSON-escapes to 6 bytes a byte
    assert len(json.dumps(started.body("log", offset=0, chunk=control))) > 384 * 1024
    _stored(started.log(0, control), 65536)
    before = snapshot(su_conn)
    reply = started.log(65536, "€" * 21845 + "ab")  # 65537 bytes in UTF-8
    assert (reply.status, reply.json["reason"]) == (400, "limit_exceeded")
    reply = started.log(65536, "nul\x00")
    assert (reply.status, reply.json["reason"]) == (400, "schema_invalid")
    reply = started.log(-1, "x")
    assert (reply.status, reply.json["reason"]) == (400, "schema_invalid")
    body = json.dumps(started.body("log", offset=65536, chunk="\x01" * 67000)).encode()
    assert len(body) > 388 * 1024
    assert started.send(LOG, body).status == 413
    assert snapshot(su_conn) == before


def test_concurrent_appends_at_one_offset_append_exactly_once(
    start_ingress_thread, test_pki, ingress_dsn, agent, prov
):
    """Eight requests at one offset at once (one connection each: the replica
    lets this worker hold eight), each with other bytes: one appends, every
    other one is told the winner's length."""
    server = start_ingress_thread(
        ingress_config(test_pki, ingress_dsn, max_connections_per_worker=16, pool_min_size=8)
    )
    started = _claim(server, agent, prov, prov.task("t"))
    assert started.send(ACK, started.body("ack", phase="starting")).status == 200
    _stored(started.log(0, "start\n"), 6)
    chunks = [f"writer {n}: {'x' * n}\n" for n in range(8)]
    replies: list[Reply | None] = [None] * len(chunks)
    barrier = threading.Barrier(len(chunks))

    errors: list[BaseException] = []

    def send(n: int) -> None:
        barrier.wait()
        try:
            replies[n] = started.log(6, chunks[n])
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=send, args=(n,)) for n in range(len(chunks))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not errors, errors
    won = [n for n, reply in enumerate(replies) if reply is not None and reply.status == 200]
    assert len(won) == 1, [(r.status, r.body) for r in replies if r is not None]
    stored = 6 + len(chunks[won[0]].encode())
    for n, reply in enumerate(replies):
        if n != won[0]:
            assert reply is not None
            _log_offset(reply, stored)
    assert _text(prov, started.run_id) == "start\n" + chunks[won[0]]


@pytest.mark.parametrize("same_bytes", [True, False])
def test_an_append_waits_for_the_one_in_flight_and_decides_on_its_result(
    started, db_dsn, same_bytes
):
    """Transaction A appends and holds its locks; B at the same offset waits for
    A (the log header), then sees A's length: a replay when it carried the same
    bytes, log_offset otherwise — never a second append. Both for the first
    chunk (the header is created) and for a later one (the header exists)."""
    fence = dict(
        credential_id=started.agent.worker.credential_id,
        secret_digest=started.agent.worker.secret_digest,
        worker_id=started.agent.worker_id,
        session_id=started.session["sessionId"],
        generation=started.session["generation"],
        offer_id=started.pull["offerId"],
        token_digest=lease_token_digest(started.pull["leaseToken"]),
        lease_version=started.version,
    )
    for offset in (0, 5):
        with psycopg.connect(db_dsn) as a, psycopg.connect(db_dsn, autocommit=True) as b:
            first = api.append_log(**fence, offset=offset, chunk="first").run(a).doc
            assert (first["status"], first["storedBytes"]) == ("ok", offset + 5)
            result: dict[str, Any] = {}
            chunk = "first" if same_bytes else "other"
            call = api.append_log(**fence, offset=offset, chunk=chunk)
            worker = threading.Thread(target=_run_into, args=(call, b, result))
            worker.start()
            worker.join(1.0)
            assert worker.is_alive(), "B must wait for A's header lock"
            a.commit()
            worker.join(15)
            assert not worker.is_alive()
        expected = (
            {"status": "idempotent", "storedBytes": offset + 5, "truncated": False}
            if same_bytes
            else {"status": "conflict", "category": "log_offset", "storedBytes": offset + 5}
        )
        assert result == expected


def _run_into(call: api.Call[Any], conn: psycopg.Connection, result: dict[str, Any]) -> None:
    result.update(call.run(conn).doc)


def test_a_chunk_never_lands_after_its_attempt_ended(started, db_dsn):
    """A completion holding the attempt (uncommitted) makes an append wait; once
    it commits the append answers lease_terminal and stores nothing. The other
    way round, a completion waits for an append in flight, which lands first."""
    fence = dict(
        credential_id=started.agent.worker.credential_id,
        secret_digest=started.agent.worker.secret_digest,
        worker_id=started.agent.worker_id,
        session_id=started.session["sessionId"],
        generation=started.session["generation"],
        offer_id=started.pull["offerId"],
        token_digest=lease_token_digest(started.pull["leaseToken"]),
    )
    with psycopg.connect(db_dsn) as a, psycopg.connect(db_dsn, autocommit=True) as b:
        appended = (
            api.append_log(**fence, lease_version=started.version, offset=0, chunk="before the end")
            .run(a)
            .doc
        )
        assert appended["status"] == "ok"
        result: dict[str, Any] = {}
        done = threading.Thread(
            target=lambda: result.update(
                api.complete_lease(**fence, lease_version=started.version, outcome="succeeded")
                .run(b)
                .doc
            )
        )
        done.start()
        done.join(1.0)
        assert done.is_alive(), "the completion waits for the append in flight"
        a.commit()
        done.join(15)
        assert result["status"] == "ok"
    with psycopg.connect(db_dsn) as a, psycopg.connect(db_dsn, autocommit=True) as b:
        # A writer holding the attempt FOR UPDATE (as a completion, a cancel or
        # the sweeper's loss does) keeps an append of its lease waiting.
        a.execute(
            "SELECT 1 FROM ql_private.attempts a JOIN ql_private.run_leases l"
            " ON l.attempt_id = a.id WHERE l.offer_id = %s FOR UPDATE OF a",
            (started.pull["offerId"],),
        )
        late: dict[str, Any] = {}
        append = threading.Thread(
            target=lambda: late.update(
                api.append_log(**fence, lease_version=started.version + 1, offset=14, chunk="after")
                .run(b)
                .doc
            )
        )
        append.start()
        append.join(1.0)
        assert append.is_alive(), "an append waits for a writer holding the attempt"
        a.commit()
        append.join(15)
    assert late == {"status": "conflict", "category": "lease_terminal"}
    page = api.run_log(run_id=started.run_id)
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        assert page.run(conn).text == "before the end"
