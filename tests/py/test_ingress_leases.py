"""Lease ACK / heartbeat / completion over real mTLS against real PostgreSQL.

Every refusal (conflict, illegal transition, denial) is checked to change no
table (a denial adds exactly one security_audit row), and no answer ever
carries the lease token.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from qinglong.db import api
from qinglong.schemas.contract import validate
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
from tests.py.provision import new_token

# Shared fixtures (pytest collects them through these module names).
ingress = ingress_harness.ingress
ingress_dsn = ingress_harness.ingress_dsn
prov = ingress_harness.prov
start_ingress_thread = ingress_harness.start_ingress_thread
su_conn = ingress_harness.su_conn
test_pki = ingress_harness.test_pki

LEASE_KEYS = [
    "schema",
    "runId",
    "attemptId",
    "workerId",
    "sessionId",
    "sessionGeneration",
    "leaseGeneration",
    "leaseVersion",
    "offerId",
    "claimedAtMs",
    "expiresAtMs",
    "updatedAtMs",
    "state",
    "startedAtMs",
]
ACK, HEARTBEAT, COMPLETE = "/v1/leases/ack", "/v1/leases/heartbeat", "/v1/leases/complete"


class Claim:
    """A worker holding one offered lease through the real ingress.

    Like the worker, it sends the lease version of the last lease it received
    (`version`, updated from every 200 answer); a test repeats a request whose
    answer was "lost" by passing the version it was sent with (`leaseVersion=`)."""

    def __init__(
        self,
        server: IngressThread,
        agent: Agent,
        session: dict[str, Any],
        pull: dict[str, Any],
        offer: dict[str, Any],
    ) -> None:
        self.server, self.agent, self.session = server, agent, session
        self.pull, self.offer = pull, offer
        self.replies: list[Reply] = []
        self.version: int = offer["lease"]["leaseVersion"]

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

    def send(self, path: str, body: dict[str, Any], agent: Agent | None = None) -> Reply:
        agent = agent or self.agent
        reply = post(self.server.port, path, body, ctx=agent.ctx, token=agent.token)
        self.replies.append(reply)
        if reply.status == 200 and agent is self.agent:
            self.version = max(self.version, reply.json["leaseVersion"])
        return reply

    def ack(self, phase: str, **extra: Any) -> Reply:
        return self.send(ACK, self.body("ack", phase=phase, **extra))

    def heartbeat(self, **extra: Any) -> Reply:
        return self.send(HEARTBEAT, self.body("heartbeat", **extra))

    def complete(self, outcome: str, **extra: Any) -> Reply:
        return self.send(COMPLETE, self.body("complete", outcome=outcome, **extra))


def _open(server: IngressThread, agent: Agent) -> dict[str, Any]:
    reply = post(server.port, "/v1/sessions", open_body(agent), ctx=agent.ctx, token=agent.token)
    assert reply.status == 201, reply.body
    return reply.json


def _claim(server: IngressThread, agent: Agent, prov) -> Claim:
    session = _open(server, agent)
    prov.enqueue(prov.task("t"), count=1)
    body = pull_body(agent, session)
    reply = post(server.port, "/v1/offers/pull", body, ctx=agent.ctx, token=agent.token)
    assert reply.status == 200 and reply.json["status"] == "offered", reply.body
    return Claim(server, agent, session, body, reply.json)


def _lease(reply: Reply, state: str, version: int, *, heartbeat: bool = False) -> dict:
    assert reply.status == 200, reply.body
    doc = reply.json
    validate("qinglong/lease@v1", doc)
    assert list(doc) == LEASE_KEYS + (["cancelRequested"] if heartbeat else [])
    assert (doc["state"], doc["leaseVersion"]) == (state, version)
    return doc


def _conflict(reply: Reply, reason: str) -> None:
    assert (reply.status, reply.json) == (
        409,
        {"schema": "qinglong/error@v1", "error": "conflict", "reason": reason},
    )


def _events(su_conn) -> list[str]:
    rows = su_conn.execute("SELECT type FROM ql_private.events ORDER BY id").fetchall()
    return [row[0] for row in rows]


def _no_token_anywhere(claim: Claim, *extra_tokens: str) -> None:
    tokens = [claim.pull["leaseToken"], claim.agent.worker.secret, *extra_tokens]
    texts = [r.body.decode() for r in claim.replies] + claim.server.audit_lines
    assert not [t for t in tokens if any(t in text for text in texts)]


@pytest.fixture
def agent(prov, test_pki) -> Agent:
    return make_agent(prov, test_pki, "worker-a")


@pytest.fixture
def claim(ingress, agent, prov) -> Claim:
    return _claim(ingress, agent, prov)


def test_start_run_heartbeat_complete_with_idempotent_replays(claim, ingress, su_conn):
    offered = claim.offer["lease"]
    starting = _lease(claim.ack("starting"), "starting", offered["leaseVersion"] + 1)
    assert starting["startedAtMs"] is not None and starting["offerId"] == offered["offerId"]
    before = snapshot(su_conn)
    replay = claim.ack("starting", leaseVersion=offered["leaseVersion"])
    assert replay.body == claim.replies[-2].body and snapshot(su_conn) == before

    running = _lease(claim.ack("running"), "running", starting["leaseVersion"] + 1)
    assert (
        claim.ack("running", leaseVersion=starting["leaseVersion"]).body == claim.replies[-2].body
    )

    beat = _lease(claim.heartbeat(), "running", running["leaseVersion"] + 1, heartbeat=True)
    assert beat["cancelRequested"] is False
    assert beat["expiresAtMs"] >= running["expiresAtMs"]

    done = _lease(claim.complete("succeeded", exitCode=0), "succeeded", beat["leaseVersion"] + 1)
    before = snapshot(su_conn)
    assert (
        claim.complete("succeeded", exitCode=0, leaseVersion=beat["leaseVersion"]).body
        == claim.replies[-2].body
    )
    assert snapshot(su_conn) == before
    assert done["runId"] == claim.offer["candidate"]["runId"]

    run_state = su_conn.execute("SELECT state FROM ql_private.runs").fetchone()[0]
    assert run_state == "succeeded"
    assert _events(su_conn) == [
        "run.queued",
        "run.dispatched",
        "run.starting",
        "run.running",
        "run.succeeded",
    ]
    # After completion the lease takes no more heartbeats.
    _conflict(claim.heartbeat(), "lease_terminal")
    _no_token_anywhere(claim)

    metrics = ingress.metrics_text()
    expected = [
        ("leases.ack", "starting", "ok"),
        ("leases.ack", "starting", "idempotent"),
        ("leases.ack", "running", "ok"),
        ("leases.heartbeat", "heartbeat", "ok"),
        ("leases.heartbeat", "heartbeat", "conflict"),
        ("leases.complete", "succeeded", "ok"),
        ("leases.complete", "succeeded", "idempotent"),
    ]
    for endpoint, transition, outcome in expected:
        line = (
            f'qinglong_ingress_lease_transitions_total{{endpoint="{endpoint}",'
            f'transition="{transition}",outcome="{outcome}"}} 1'
        )
        assert re.search("^" + re.escape(line) + "$", metrics, re.M), line
    actions = [json.loads(line)["action"] for line in ingress.audit_lines]
    assert {"lease.ack", "lease.heartbeat", "lease.complete"} <= set(actions)


def test_wrong_token_is_token_mismatch_and_changes_nothing(claim, su_conn):
    assert claim.ack("starting").status == 200
    before = snapshot(su_conn)
    wrong = new_token()
    requests = [
        (ACK, claim.body("ack", phase="running")),
        (HEARTBEAT, claim.body("heartbeat")),
        (COMPLETE, claim.body("complete", outcome="succeeded")),
    ]
    for path, body in requests:
        _conflict(claim.send(path, dict(body, leaseToken=wrong)), "token_mismatch")
    assert snapshot(su_conn) == before
    _no_token_anywhere(claim, wrong)


def test_another_workers_offer_is_offer_foreign(claim, ingress, prov, test_pki, su_conn):
    """BOLA: worker B, fully authenticated as itself, names A's offer (with A's
    token, even): refused like a foreign offer on the pull, 409 offer_foreign."""
    assert claim.ack("starting").status == 200
    b = make_agent(prov, test_pki, "worker-b")
    b_session = _open(ingress, b)
    before = snapshot(su_conn)
    for path, kind, extra in (
        (ACK, "ack", {"phase": "running"}),
        (HEARTBEAT, "heartbeat", {}),
        (COMPLETE, "complete", {"outcome": "failed"}),
    ):
        for session in (b_session, claim.session):
            body = dict(
                claim.body(kind, **extra),
                workerId=b.worker_id,
                sessionId=session["sessionId"],
                generation=session["generation"],
            )
            _conflict(claim.send(path, body, agent=b), "offer_foreign")
    # An offer id nobody holds answers the same (no existence oracle).
    unknown = dict(claim.body("heartbeat"), offerId=pull_body(b, b_session)["offerId"])
    _conflict(claim.send(HEARTBEAT, unknown), "offer_foreign")
    assert snapshot(su_conn) == before


@pytest.mark.parametrize(
    "case",
    [
        "running_before_starting",
        "heartbeat_before_starting",
        "complete_before_starting",
        "start_failed_after_running",
        "cancelled_without_request",
    ],
)
def test_illegal_transitions_are_409_and_change_nothing(claim, su_conn, case):
    if case in ("start_failed_after_running", "cancelled_without_request"):
        assert claim.ack("starting").status == 200 and claim.ack("running").status == 200
    before = snapshot(su_conn)
    reply = {
        "running_before_starting": lambda: claim.ack("running"),
        "heartbeat_before_starting": claim.heartbeat,
        "complete_before_starting": lambda: claim.complete("succeeded"),
        "start_failed_after_running": lambda: claim.ack("start_failed"),
        "cancelled_without_request": lambda: claim.complete("cancelled"),
    }[case]()
    _conflict(reply, "illegal_transition")
    assert snapshot(su_conn) == before


def test_semantic_input_errors_are_400(claim, su_conn):
    before = snapshot(su_conn)
    reply = claim.ack("starting", reason="nope")  # a reason only goes with start_failed
    assert (reply.status, reply.json["reason"]) == (400, "invalid_input")
    reply = claim.complete("succeeded", exitCode=3)
    assert (reply.status, reply.json["reason"]) == (400, "invalid_input")
    assert snapshot(su_conn) == before


def test_start_failed_releases_the_lease_and_replays(claim, su_conn):
    sent = claim.offer["lease"]["leaseVersion"]
    failed = _lease(claim.ack("start_failed", reason="image_missing"), "failed", sent + 1)
    assert failed["startedAtMs"] is None
    before = snapshot(su_conn)
    assert (
        claim.ack("start_failed", reason="image_missing", leaseVersion=sent).body
        == claim.replies[-2].body
    )
    assert snapshot(su_conn) == before
    _conflict(claim.ack("start_failed", reason="other", leaseVersion=sent), "lease_terminal")
    _conflict(claim.ack("starting"), "lease_terminal")


def test_cancel_is_learned_from_the_heartbeat(claim, prov, su_conn):
    assert claim.ack("starting").status == 200
    prov.call(api.cancel_run(run_id=claim.offer["candidate"]["runId"]))
    beat = _lease(
        claim.heartbeat(), "starting", claim.offer["lease"]["leaseVersion"] + 2, heartbeat=True
    )
    assert beat["cancelRequested"] is True
    _lease(claim.complete("cancelled"), "cancelled", beat["leaseVersion"] + 1)
    assert su_conn.execute("SELECT state FROM ql_private.runs").fetchone()[0] == "cancelled"


# case -> (status, reason told, reason audited): a wrong secret is told
# `invalid_credential` (like an unknown id); security_audit keeps `bad_secret`.
CREDENTIAL_CASES = {
    "wrong_secret": (401, "invalid_credential", "bad_secret"),
    "missing": (401, "missing_credential", "missing_credential"),
    "body_names_b": (403, "identity_mismatch", "identity_mismatch"),
    "credential_of_b": (403, "worker_mismatch", "worker_mismatch"),
}


@pytest.mark.parametrize("case", sorted(CREDENTIAL_CASES))
def test_lease_denials_change_nothing_but_the_audit(claim, prov, test_pki, su_conn, case):
    b = make_agent(prov, test_pki, "worker-b")
    body = claim.body("ack", phase="starting")
    secret = claim.agent.worker.secret
    token: str | None = claim.agent.token
    if case == "wrong_secret":
        token = token[: -len(secret)] + ("B" if secret[0] == "A" else "A") + secret[1:]
    elif case == "missing":
        token = None
    elif case == "body_names_b":
        body["workerId"] = b.worker_id
    else:
        token = b.token
    before = snapshot(su_conn)
    reply = post(claim.server.port, ACK, body, ctx=claim.agent.ctx, token=token)
    status, told, reason = CREDENTIAL_CASES[case]
    assert (reply.status, reply.json["reason"]) == (status, told)
    after = snapshot(su_conn)
    assert after.tables == before.tables and after.audit_rows == before.audit_rows + 1
    row = su_conn.execute(
        "SELECT action, outcome, reason FROM ql_private.security_audit ORDER BY id DESC LIMIT 1"
    ).fetchone()
    assert tuple(row) == ("lease.ack", "denied", reason)
    claim.replies.append(reply)
    _no_token_anywhere(claim, *(t for t in (token,) if t))


def test_corrupted_lease_projection_is_503(
    start_ingress_thread, test_pki, ingress_dsn, agent, prov
):
    def corrupt(route: str, doc: dict) -> dict:
        return dict(doc, leaseVersion=0) if route.startswith("leases.") else doc

    server = start_ingress_thread(ingress_config(test_pki, ingress_dsn), projection_hook=corrupt)
    claim = _claim(server, agent, prov)
    reply = claim.ack("starting")
    assert (reply.status, reply.json["reason"]) == (503, "invalid_projection")
    assert int(reply.headers["Retry-After"]) >= 1
    assert (
        server.metrics.lease_transitions.value("leases.ack", "starting", "invalid_projection") == 1
    )


def _lease_row(su_conn, offer_id: str) -> tuple[Any, ...]:
    return tuple(
        su_conn.execute(
            "SELECT xmin::text, lease_version, expires_at, heartbeat_at FROM ql_private.run_leases"
            " WHERE offer_id = %s",
            (offer_id,),
        ).fetchone()
    )


def test_repeated_heartbeat_after_a_lost_answer_extends_the_lease_once(claim, ingress, su_conn):
    """SPEC §7: a heartbeat sent twice with the same leaseVersion (the first
    answer dropped) answers the same expiresAtMs; the database changed once."""
    assert claim.ack("starting").status == 200
    started = claim.version
    before = _lease_row(su_conn, claim.pull["offerId"])
    first = claim.heartbeat()  # the worker never reads this answer ...
    assert first.status == 200
    after_first = _lease_row(su_conn, claim.pull["offerId"])
    assert after_first[1] == before[1] + 1 and after_first[2] > before[2]
    tables = snapshot(su_conn)
    again = claim.heartbeat(leaseVersion=started)  # ... so it sends the same request again
    beat = _lease(again, "starting", started + 1, heartbeat=True)
    assert beat["expiresAtMs"] == first.json["expiresAtMs"]
    assert again.body == first.body
    assert _lease_row(su_conn, claim.pull["offerId"]) == after_first  # same xmin: no write
    assert snapshot(su_conn) == tables
    assert (
        ingress.metrics.lease_transitions.value("leases.heartbeat", "heartbeat", "idempotent") == 1
    )


def test_ack_with_an_old_lease_version_is_409_stale_and_changes_nothing(claim, ingress, su_conn):
    offered = claim.version
    assert claim.ack("starting").status == 200
    assert claim.heartbeat().status == 200
    before = snapshot(su_conn)
    row = _lease_row(su_conn, claim.pull["offerId"])
    # The running ACK from a worker that missed the heartbeat's answer, one that
    # repeats the starting ACK two versions back, and one from the future.
    _conflict(claim.ack("running", leaseVersion=offered + 1), "stale_lease_version")
    _conflict(claim.ack("starting", leaseVersion=offered), "stale_lease_version")
    _conflict(claim.ack("running", leaseVersion=claim.version + 5), "stale_lease_version")
    _conflict(claim.heartbeat(leaseVersion=offered), "stale_lease_version")
    _conflict(
        claim.complete("succeeded", exitCode=0, leaseVersion=offered + 1), "stale_lease_version"
    )
    assert snapshot(su_conn) == before
    assert _lease_row(su_conn, claim.pull["offerId"]) == row
    assert ingress.metrics.lease_transitions.value("leases.ack", "running", "conflict") == 2
    # The current version still works.
    _lease(claim.ack("running"), "running", row[1] + 1)


@pytest.mark.parametrize(
    "path,kind,extra",
    [
        (ACK, "ack", {"phase": "starting"}),
        (HEARTBEAT, "heartbeat", {}),
        (COMPLETE, "complete", {"outcome": "succeeded"}),
    ],
)
def test_lease_version_is_required_on_the_wire(claim, su_conn, path, kind, extra):
    before = snapshot(su_conn)
    body = claim.body(kind, **extra)
    for bad in (
        {k: v for k, v in body.items() if k != "leaseVersion"},
        dict(body, leaseVersion=0),
        dict(body, leaseVersion="1"),
        dict(body, leaseVersion=None),
    ):
        reply = claim.send(path, bad)
        assert (reply.status, reply.json["reason"]) == (400, "schema_invalid"), bad
    assert snapshot(su_conn) == before
