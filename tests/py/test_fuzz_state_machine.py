"""A Hypothesis state machine over the worker protocol, against the real ingress
(its own process, mTLS) and the real database.

Rules: session open / heartbeat / close (also of replaced sessions), pull on the
current and on old sessions, replay of a pull (same offer id + token), ACK
starting / running / start_failed, lease heartbeat, completion, each at the
current lease version, the previous one (a repeat after a lost answer: the same
lease byte for byte, nothing changed; otherwise stale) or another one
(stale_lease_version). The model predicts the exact status and conflict reason of every call
from what it did so far; where the database decides something the model cannot
know (offered vs. idle), the answer is checked against the database instead.

After every step, against the database:
  * at most one live lease per attempt (R-LEASE-1);
  * every offer's lease is live exactly when the model says it is;
  * no unstarted live lease on a closed session (close/replace released them);
  * exactly one `run.dispatched` event per lease (replays never claim again);
and for every response: no 5xx, status declared in the OpenAPI document for its
path, body valid against its JSON Schema, 409 reasons among the documented ones.
A pull replay whose lease nothing touched returns a byte-identical body; any
refused pull leaves no lease with its offer id.
"""

from __future__ import annotations

import json
import os
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import psycopg
import pytest
import requests
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from qinglong.schemas.contract import default_contract
from qinglong.service import openapi
from qinglong.throwaway_postgres import ThrowawayPostgres
from tests.py.ingress_harness import CAPABILITIES, Agent
from tests.py.provision import new_token
from tests.py.security_support import (
    World,
    module_world,
    mtls_session,
    start_ingress_process,
)

# Minutes, not seconds: the full suite runs it; `pytest -m "not slow"` skips it.
pytestmark = pytest.mark.slow

LONG = os.environ.get("QL_FUZZ_LONG") == "1"
DOCUMENT = json.loads(openapi.DOCUMENT_PATH.read_text(encoding="utf-8"))
CONFLICTS = {op.path: set(op.conflicts) for op in openapi.OPERATIONS}
SUCCESS_SCHEMA = {op.path: op.endpoint.response_schema.value for op in openapi.OPERATIONS}


@dataclass
class Ctx:
    world: World
    agent: Agent
    http: requests.Session
    base_url: str
    task_id: str
    steps: int = 0
    seen: Counter[str] = field(default_factory=Counter)  # "path status reason"


@dataclass
class SessionModel:
    session_id: str
    generation: int
    state: str = "active"  # active | closed | replaced


@dataclass
class OfferModel:
    offer_id: str
    token: str
    session: SessionModel
    pull_body: bytes
    phase: str = "offered"  # offered | starting | running | completed | start_failed
    touched: bool = False  # the lease changed since the pull answer
    version: int = 1  # the lease version (SPEC §7): every applied change adds one
    made_by: str | None = None  # the request that made `version` (None: the claim)
    answer: bytes = b""  # ... and its 200 body: what a repeat of it answers
    beats: int = 0  # successful lease heartbeats

    @property
    def started(self) -> bool:
        return self.phase in ("starting", "running")

    @property
    def released(self) -> bool:
        return self.phase in ("completed", "start_failed")


class Reply:
    def __init__(self, path: str, response: requests.Response) -> None:
        self.path = path
        self.status = response.status_code
        self.body = response.content
        self.doc: dict[str, Any] = response.json()

    @property
    def reason(self) -> str | None:
        return self.doc.get("reason") if self.status >= 400 else None


class ProtocolMachine(RuleBasedStateMachine):
    ctx: ClassVar[Ctx]

    def __init__(self) -> None:
        super().__init__()
        self.sessions: list[SessionModel] = []
        self.current: SessionModel | None = None
        self.offers: list[OfferModel] = []
        self.steps_since_open = 0

    # ------------------------------------------------------------ wire

    def send(self, path: str, body: dict[str, Any]) -> Reply:
        ctx = self.ctx
        ctx.steps += 1
        self.steps_since_open += 1
        reply = Reply(path, ctx.http.post(ctx.base_url + path, json=body, timeout=30))
        ctx.seen[f"{path} {reply.status} {reply.reason or reply.doc.get('status', '')}"] += 1
        assert reply.status < 500, (path, reply.status, reply.body)
        assert str(reply.status) in DOCUMENT["paths"][path]["post"]["responses"], (
            path,
            reply.status,
            reply.body,
        )
        if reply.status >= 400:
            default_contract().validate("qinglong/error@v1", reply.doc)
            if reply.status == 409:
                assert reply.reason in CONFLICTS[path], (path, reply.doc)
        else:
            default_contract().validate(SUCCESS_SCHEMA[path], reply.doc)
        for secret in (ctx.agent.worker.secret, *(o.token for o in self.offers)):
            assert secret not in reply.body.decode(), "secret echoed"
        return reply

    def expect(self, reply: Reply, status: int, reason: str | None = None) -> None:
        assert (reply.status, reply.reason) == (status, reason), (
            reply.path,
            reply.status,
            reply.doc,
        )

    def session_doc(self, kind: str, s: SessionModel) -> dict[str, Any]:
        return {
            "schema": f"qinglong/session-{kind}-request@v1",
            "workerId": self.ctx.agent.worker_id,
            "sessionId": s.session_id,
            "generation": s.generation,
        }

    def lease_doc(self, kind: str, o: OfferModel, version: int,
                  **extra: Any) -> dict[str, Any]:  # fmt: skip
        return {
            "schema": f"qinglong/lease-{kind}-request@v1",
            "workerId": self.ctx.agent.worker_id,
            "sessionId": o.session.session_id,
            "generation": o.session.generation,
            "offerId": o.offer_id,
            "leaseToken": o.token,
            "leaseVersion": version,
            **extra,
        }

    def pull_doc(self, s: SessionModel, offer_id: str, token: str) -> dict[str, Any]:
        return {
            "schema": "qinglong/offer-pull-request@v1",
            "workerId": self.ctx.agent.worker_id,
            "sessionId": s.session_id,
            "generation": s.generation,
            "offerId": offer_id,
            "leaseToken": token,
        }

    def db(self) -> psycopg.Connection:
        return self.ctx.world.su_conn

    def leases_with_offer(self, offer_id: str) -> int:
        row = (
            self.db()
            .execute("SELECT count(*) FROM ql_private.run_leases WHERE offer_id = %s", (offer_id,))
            .fetchone()
        )
        assert row is not None
        return int(row[0])

    def draw_version(self, data: st.DataObject, o: OfferModel) -> int:
        """The lease version a request carries: mostly the current one, else the
        previous one (a repeat after a lost answer, or stale) or another one."""
        age = data.draw(st.sampled_from(["current", "current", "previous", "other"]))
        if age == "previous" and o.version > 1:
            return o.version - 1
        if age == "other":
            return data.draw(
                st.sampled_from(
                    [v for v in (o.version - 2, o.version + 1, o.version + 3) if v >= 1]
                )
            )
        return o.version

    def versioned(self, o: OfferModel, key: str, version: int, reply: Reply) -> bool:
        """The answers the lease version decides (SPEC §7), after the session gate:
        the request that made the current version, repeated at the version it
        consumed, answers that same lease byte for byte and changes nothing; a
        released lease refuses anything else as lease_terminal; a live one refuses
        any version but the current as stale_lease_version. True when decided."""
        if version == o.version - 1 and o.made_by == key:
            self.expect(reply, 200)
            assert reply.body == o.answer
            self.ctx.seen["identical lease replay"] += 1
            return True
        if o.released:
            self.expect(reply, 409, "lease_terminal")
            return True
        if version != o.version:
            self.expect(reply, 409, "stale_lease_version")
            return True
        return False

    def applied(self, o: OfferModel, key: str, reply: Reply) -> None:
        o.version += 1
        o.made_by, o.answer, o.touched = key, reply.body, True
        assert reply.doc["leaseVersion"] == o.version, (reply.doc, o.version)

    # ------------------------------------------------------------ sessions

    def pick_offer(self, data: st.DataObject) -> OfferModel:
        """Mostly an offer whose lease can still move (the interesting ones), but
        dead offers too: their refusals are part of the protocol."""
        live = [o for o in self.offers if o.session.state == "active" and not o.released]
        if live and data.draw(st.integers(0, 3)) > 0:
            return data.draw(st.sampled_from(live))
        return data.draw(st.sampled_from(self.offers))

    @initialize()
    def open_first(self) -> None:
        # Two fresh runs per example, so claims are possible from the first pull on.
        self.ctx.world.prov.enqueue(self.ctx.task_id, count=2)
        self._open()

    @precondition(lambda self: self.current is None or self.current.state != "active")
    @rule()
    def reopen_session(self) -> None:
        self._open()

    # Replacing an active session is rarer (it invalidates everything): only once
    # the current one has had a few steps to get leases going.
    @precondition(
        lambda self: (
            self.current is not None
            and self.current.state == "active"
            and self.steps_since_open >= 8
        )
    )
    @rule()
    def replace_session(self) -> None:
        self._open()

    def _open(self) -> None:
        self.steps_since_open = 0
        reply = self.send(
            "/v1/sessions",
            {
                "schema": "qinglong/session-open-request@v1",
                "workerId": self.ctx.agent.worker_id,
                "capabilities": CAPABILITIES,
            },
        )
        self.expect(reply, 201)
        # Every open session of the worker (ours, or a previous example's) is replaced.
        for s in self.sessions:
            s.state = "replaced"
        new = SessionModel(reply.doc["sessionId"], reply.doc["generation"])
        if self.current is not None:
            assert new.generation > self.current.generation
        self.sessions.append(new)
        self.current = new

    def _session_outcome(self, s: SessionModel, closing: bool) -> tuple[int, str | None]:
        if s.state == "replaced":
            return 409, "session_replaced"
        if s.state == "closed":
            return (200, None) if closing else (409, "session_closed")
        return 200, None

    @precondition(lambda self: self.sessions)
    @rule(data=st.data())
    def heartbeat_session(self, data: st.DataObject) -> None:
        s = data.draw(st.sampled_from(self.sessions))
        reply = self.send("/v1/sessions/heartbeat", self.session_doc("heartbeat", s))
        self.expect(reply, *self._session_outcome(s, closing=False))
        if reply.status == 200:
            assert (reply.doc["sessionId"], reply.doc["generation"]) == (s.session_id, s.generation)

    @precondition(lambda self: len(self.sessions) > 1)
    @rule(data=st.data())
    def close_old_session(self, data: st.DataObject) -> None:
        self._close(data.draw(st.sampled_from(self.sessions[:-1])))

    # Closing the current session ends its leases' progress: gated like replace.
    @precondition(lambda self: self.current is not None and self.steps_since_open >= 6)
    @rule()
    def close_current_session(self) -> None:
        assert self.current is not None
        self._close(self.current)

    def _close(self, s: SessionModel) -> None:
        reply = self.send("/v1/sessions/close", self.session_doc("close", s))
        self.expect(reply, *self._session_outcome(s, closing=True))
        if reply.status == 200:
            s.state = "closed"

    # ------------------------------------------------------------ pulls

    @precondition(lambda self: self.current is not None)
    @rule()
    def pull(self) -> None:
        s = self.current
        assert s is not None
        offer_id, token = str(uuid.uuid4()), new_token()
        reply = self.send("/v1/offers/pull", self.pull_doc(s, offer_id, token))
        if s.state != "active":
            self.expect(reply, 409, "session_closed")
            assert self.leases_with_offer(offer_id) == 0  # no lease for a closed session
            return
        self.expect(reply, 200)
        if reply.doc["status"] == "offered":
            assert reply.doc["offerId"] == offer_id
            assert reply.doc["target"]["sessionId"] == s.session_id
            assert self.leases_with_offer(offer_id) == 1
            self.offers.append(OfferModel(offer_id, token, s, reply.body))
        else:
            assert self.leases_with_offer(offer_id) == 0
            live = sum(1 for o in self.offers if o.session is s and not o.released)
            assert reply.doc["reason"] in ("no_candidates", "capacity_full", "contention"), (
                reply.doc,
                live,
            )

    @precondition(lambda self: any(s.state != "active" for s in self.sessions))
    @rule(data=st.data())
    def pull_on_old_session(self, data: st.DataObject) -> None:
        s = data.draw(st.sampled_from([s for s in self.sessions if s.state != "active"]))
        offer_id = str(uuid.uuid4())
        reply = self.send("/v1/offers/pull", self.pull_doc(s, offer_id, new_token()))
        self.expect(reply, 409, "session_replaced" if s.state == "replaced" else "session_closed")
        assert self.leases_with_offer(offer_id) == 0

    @precondition(lambda self: self.offers)
    @rule(data=st.data(), wrong_token=st.booleans())
    def replay_pull(self, data: st.DataObject, wrong_token: bool) -> None:
        o = self.pick_offer(data)
        before = self.leases_with_offer(o.offer_id)
        token = new_token() if wrong_token else o.token
        reply = self.send("/v1/offers/pull", self.pull_doc(o.session, o.offer_id, token))
        assert self.leases_with_offer(o.offer_id) == before == 1
        if wrong_token:
            self.expect(reply, 409, "token_mismatch")
        elif o.session.state != "active":
            self.expect(reply, 409, "session_replaced")
        elif o.released:
            self.expect(reply, 409, "lease_terminal")
        else:
            self.expect(reply, 200)
            if o.touched:
                assert reply.doc["offerId"] == o.offer_id
                assert reply.doc["candidate"] == json.loads(o.pull_body)["candidate"]
            else:
                assert reply.body == o.pull_body  # the very same offer, byte for byte
                self.ctx.seen["identical replay"] += 1

    # ------------------------------------------------------------ leases

    def _lease_gate(self, o: OfferModel) -> tuple[int, str] | None:
        """Fence answers that do not depend on the operation."""
        if o.session.state != "active":
            return 409, "session_replaced"
        return None

    @precondition(lambda self: self.offers)
    @rule(data=st.data(), phase=st.sampled_from(["starting", "running", "start_failed"]))
    def ack(self, data: st.DataObject, phase: str) -> None:
        o = self.pick_offer(data)
        self._ack(o, phase, self.draw_version(data, o))

    def _ack(self, o: OfferModel, phase: str, version: int) -> None:
        reply = self.send("/v1/leases/ack", self.lease_doc("ack", o, version, phase=phase))
        gate = self._lease_gate(o)
        if gate is not None:
            self.expect(reply, *gate)
            return
        key = f"ack.{phase}"
        if self.versioned(o, key, version, reply):
            return
        # The current version of a live lease: the transition decides.
        legal = {
            "starting": ("offered",),
            "running": ("starting",),
            "start_failed": ("offered", "starting"),
        }[phase]
        if o.phase not in legal:
            self.expect(reply, 409, "illegal_transition")
            return
        self.expect(reply, 200)
        assert reply.doc["offerId"] == o.offer_id
        o.phase = phase
        self.applied(o, key, reply)

    @precondition(lambda self: self.offers)
    @rule(data=st.data())
    def heartbeat_lease(self, data: st.DataObject) -> None:
        o = self.pick_offer(data)
        self._heartbeat_lease(o, self.draw_version(data, o))

    def _heartbeat_lease(self, o: OfferModel, version: int) -> None:
        reply = self.send("/v1/leases/heartbeat", self.lease_doc("heartbeat", o, version))
        gate = self._lease_gate(o)
        if gate is not None:
            self.expect(reply, *gate)
        elif self.versioned(o, "heartbeat", version, reply):
            return
        elif o.started:
            self.expect(reply, 200)
            assert reply.doc["cancelRequested"] is False
            assert reply.doc["state"] == o.phase
            o.beats += 1
            self.applied(o, "heartbeat", reply)
        else:
            self.expect(reply, 409, "illegal_transition")

    @precondition(lambda self: self.offers)
    @rule(data=st.data(), outcome=st.sampled_from(["succeeded", "failed"]))
    def complete(self, data: st.DataObject, outcome: str) -> None:
        o = self.pick_offer(data)
        self._complete(o, outcome, self.draw_version(data, o))

    def _complete(self, o: OfferModel, outcome: str, version: int) -> None:
        exit_code = 0 if outcome == "succeeded" else 3
        reply = self.send(
            "/v1/leases/complete",
            self.lease_doc("complete", o, version, outcome=outcome, exitCode=exit_code),
        )
        key = f"complete.{outcome}.{exit_code}"
        gate = self._lease_gate(o)
        if gate is not None:
            self.expect(reply, *gate)
        elif self.versioned(o, key, version, reply):
            return
        elif o.started:
            self.expect(reply, 200)
            assert reply.doc["state"] == outcome
            o.phase = "completed"
            self.applied(o, key, reply)
        else:
            self.expect(reply, 409, "illegal_transition")

    @precondition(lambda self: any(o.made_by is not None for o in self.offers))
    @rule(data=st.data())
    def repeat_after_lost_answer(self, data: st.DataObject) -> None:
        """The worker lost the answer of the lease's last change and sends the very
        same request again, at the version that request consumed."""
        o = data.draw(st.sampled_from([o for o in self.offers if o.made_by is not None]))
        assert o.made_by is not None
        kind, _, rest = o.made_by.partition(".")
        if kind == "ack":
            self._ack(o, rest, o.version - 1)
        elif kind == "heartbeat":
            self._heartbeat_lease(o, o.version - 1)
        else:
            self._complete(o, rest.split(".")[0], o.version - 1)

    @precondition(
        lambda self: any(o.session.state == "active" and not o.released for o in self.offers)
    )
    @rule(data=st.data(), finish=st.booleans())
    def advance(self, data: st.DataObject, finish: bool) -> None:
        """What a healthy worker does next with a live lease (the other lease rules
        are the out-of-order and replayed versions of these)."""
        o = data.draw(
            st.sampled_from(
                [o for o in self.offers if o.session.state == "active" and not o.released]
            )
        )
        if o.phase == "offered":
            self._ack(o, "starting", o.version)
        elif o.phase == "starting":
            self._ack(o, "running", o.version)
        elif finish and (o.beats > 0 or o.phase == "running"):
            self._complete(o, data.draw(st.sampled_from(["succeeded", "failed"])), o.version)
        else:
            self._heartbeat_lease(o, o.version)

    # ------------------------------------------------------------ invariants

    @invariant()
    def at_most_one_live_lease_per_attempt(self) -> None:
        rows = (
            self.db()
            .execute(
                "SELECT attempt_id FROM ql_private.run_leases WHERE released_at IS NULL"
                " GROUP BY attempt_id HAVING count(*) > 1"
            )
            .fetchall()
        )
        assert rows == []

    @invariant()
    def closed_sessions_hold_no_unstarted_lease(self) -> None:
        row = (
            self.db()
            .execute(
                "SELECT count(*) FROM ql_private.run_leases l JOIN ql_private.worker_sessions s"
                " USING (session_id) WHERE l.released_at IS NULL AND l.started_at IS NULL"
                " AND s.state <> 'active'"
            )
            .fetchone()
        )
        assert row == (0,)

    @invariant()
    def model_matches_database(self) -> None:
        """Each offer's lease is live exactly when the model says so: completion and
        start_failed release it; close/replace release it unless it was started."""
        if not self.offers:
            return
        rows = dict(
            self.db()
            .execute(
                "SELECT offer_id::text, released_at IS NULL FROM ql_private.run_leases"
                " WHERE offer_id = ANY(%s::uuid[])",
                ([o.offer_id for o in self.offers],),
            )
            .fetchall()
        )
        for o in self.offers:
            expected = not o.released and (o.session.state == "active" or o.started)
            assert rows[o.offer_id] is expected, (o.offer_id, o.phase, o.session.state)

    @invariant()
    def one_dispatch_event_per_lease(self) -> None:
        row = (
            self.db()
            .execute(
                "SELECT (SELECT count(*) FROM ql_private.events WHERE type = 'run.dispatched'),"
                " (SELECT count(*) FROM ql_private.run_leases)"
            )
            .fetchone()
        )
        assert row is not None and row[0] == row[1]


@pytest.fixture(scope="module")
def ctx(
    pg_cluster: ThrowawayPostgres, migrated_template: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Ctx]:
    tmp = tmp_path_factory.mktemp("state-machine")
    with module_world(pg_cluster, migrated_template, tmp, start_ingress=False) as world:
        # Its own process: in-process it would share the GIL with Hypothesis.
        server = start_ingress_process(tmp, world.pki, world.ingress_dsn)
        try:
            agent = world.agent("machine-worker")
            http = mtls_session(world.pki, agent.cert, agent.token)
            yield Ctx(
                world, agent, http, f"https://127.0.0.1:{server.port}", world.prov.task("machine")
            )
            http.close()
        finally:
            server.stop()


@pytest.mark.timeout(7200 if LONG else 300)
def test_protocol_state_machine(ctx: Ctx) -> None:
    ProtocolMachine.ctx = ctx
    run_state_machine_as_test(
        ProtocolMachine,
        settings=settings(
            max_examples=600 if LONG else 50,
            stateful_step_count=50 if LONG else 30,
            deadline=None,
            database=None,
            derandomize=not LONG,
            suppress_health_check=list(HealthCheck),
        ),
    )
    print(json.dumps({"steps": ctx.steps, "seen": dict(sorted(ctx.seen.items()))}, indent=1))
    assert ctx.steps >= (5_000 if LONG else 300), ctx.steps
    # The walk really reached the interesting places (not just refusals).
    for needle in (
        "identical replay",
        "identical lease replay",
        "/v1/leases/ack 200",
        "/v1/leases/complete 200",
        "/v1/leases/ack 409 stale_lease_version",
        "/v1/leases/heartbeat 200",
        "/v1/offers/pull 409 session_closed",
        "/v1/sessions/close 200",
        "/v1/offers/pull 409 token_mismatch",
    ):
        assert any(k.startswith(needle) for k in ctx.seen), (needle, ctx.seen)
