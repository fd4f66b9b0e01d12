"""Schemathesis against schemas/openapi.json over real mTLS.

Every operation of the document is fuzzed with positive (schema-valid) and
negative (schema-violating) bodies against the real ingress and a real
database. Checks: no 5xx except a declared 503 (with Retry-After and a declared
reason), every status declared for its operation, every body valid against the
documented schema, negative data refused with 4xx, and no answer ever echoing a
lease token or credential secret.

Random bodies would almost never name the certificate's worker or a live
session, so they would all stop at 403 identity_mismatch. Most positive cases are
therefore *steered* (deterministically, from a hash of the generated body): the
workerId becomes the certificate's, the Authorization the real credential,
session ids/generations the live session, and offer ids + tokens those of offers
already served — so the fuzzer reaches session fences, replays, claims and lease
transitions. Negative cases are sent exactly as generated.

CI short mode: >= 2,000 cases. `QL_FUZZ_LONG=1`: >= 50,000.
"""

from __future__ import annotations

import json
import math
import os
import time
import uuid
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

schemathesis = pytest.importorskip("schemathesis")

from hypothesis import HealthCheck, Phase, settings  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402
from schemathesis.specs.openapi.checks import (  # noqa: E402
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from qinglong.schemas.contract import ContractError, default_contract  # noqa: E402
from qinglong.service import openapi  # noqa: E402
from qinglong.service.secrets_crypto import create_kek_file  # noqa: E402
from qinglong.throwaway_postgres import ThrowawayPostgres  # noqa: E402
from tests.py.ingress_harness import CAPABILITIES, Agent  # noqa: E402
from tests.py.provision import new_token  # noqa: E402
from tests.py.security_support import (  # noqa: E402
    World,
    module_world,
    mtls_session,
    start_ingress_process,
)

# Minutes, not seconds: the full suite runs it; `pytest -m "not slow"` skips it.
pytestmark = pytest.mark.slow

LONG = os.environ.get("QL_FUZZ_LONG") == "1"
TARGET_CASES = 50_000 if LONG else 2_000
OPERATIONS = len(openapi.OPERATIONS)
# Schemathesis's coverage phase adds ~580 deterministic boundary cases (all
# operations together) before the fuzzing phase's max_examples per operation;
# both are counted, and test_fuzz_case_count fails if the total falls short.
COVERAGE_CASES_ESTIMATE = 500
PER_OPERATION = math.ceil((TARGET_CASES - COVERAGE_CASES_ESTIMATE) / OPERATIONS)
CONFLICTS = {op.path: set(op.conflicts) for op in openapi.OPERATIONS}

# Negative (schema-violating) data must be refused: 400 for the body; 401 when
# the generator broke only the bearer header; 413 when it made the body too
# large; 405 for the coverage phase's undeclared methods. Never 2xx, 403 or 409:
# the body is checked before any credential or fence.
NEGATIVE_EXPECTED = [400, 401, 405, 413]
SCHEMA = schemathesis.openapi.from_path(
    str(openapi.DOCUMENT_PATH),
    config=schemathesis.Config.from_dict(
        {"checks": {"negative_data_rejection": {"expected-statuses": NEGATIVE_EXPECTED}}}
    ),
)
DOCUMENT = json.loads(openapi.DOCUMENT_PATH.read_text(encoding="utf-8"))
DECLARED_503_REASONS = {
    "database_unavailable",
    "database_timeout",
    "statement_timeout",
    "database_error",
    "invalid_projection",
}
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
    negative_data_rejection,
]


@dataclass
class FuzzState:
    """The live objects steering draws from, and what the fuzzer saw."""

    world: World
    agent: Agent
    base_url: str
    http: Any  # requests.Session with the worker certificate
    session: dict[str, Any]
    offers: list[dict[str, Any]] = field(default_factory=list)
    statuses: Counter[tuple[str, int, str]] = field(default_factory=Counter)
    calls: int = 0
    steered: int = 0
    modes: Counter[str] = field(default_factory=Counter)
    http_seconds: float = 0.0
    started: float = field(default_factory=time.monotonic)

    def direct(self, path: str, body: dict[str, Any]) -> Any:
        """A set-up request of the steering itself (not a fuzz case, not counted)."""
        reply = self.http.post(self.base_url + path, json=body, timeout=30)
        assert reply.status_code < 500, reply.text
        return reply

    def open_session(self) -> None:
        reply = self.direct(
            "/v1/sessions",
            {
                "schema": "qinglong/session-open-request@v1",
                "workerId": self.agent.worker_id,
                "capabilities": CAPABILITIES,
            },
        )
        assert reply.status_code == 201, reply.text
        self.session = reply.json()

    def live_offer(self, draw: int) -> dict[str, Any]:
        """An offer of the current session (pulled now if there is none)."""
        mine = [o for o in self.offers if o["sessionId"] == self.session["sessionId"]]
        if mine and draw % 4:
            return _pick(draw, mine)
        for _ in range(3):
            body = {
                "schema": "qinglong/offer-pull-request@v1",
                "workerId": self.agent.worker_id,
                "sessionId": self.session["sessionId"],
                "generation": self.session["generation"],
                "offerId": str(uuid.uuid4()),
                "leaseToken": new_token(),
            }
            reply = self.direct("/v1/offers/pull", body)
            if reply.status_code == 200 and reply.json().get("status") == "offered":
                offer = {k: body[k] for k in ("offerId", "leaseToken", "sessionId", "generation")}
                self.offers.append(offer)
                del self.offers[:-64]
                return offer
            if mine:
                return _pick(draw, mine)
            # Replaced/closed by a fuzz case, opened with capabilities nothing
            # matches, or out of work: a plain session and more runs.
            self.open_session()
            self.world.prov.enqueue(self.world.prov.task("fuzz"), count=20)
        return {
            "offerId": str(uuid.uuid4()),
            "leaseToken": new_token(),
            "sessionId": self.session["sessionId"],
            "generation": self.session["generation"],
        }

    def start(self, offer: dict[str, Any]) -> None:
        """ACK an offer starting (and running) directly, so fuzzed heartbeats and
        completions also meet started leases."""
        for phase in ("starting", "running"):
            self.direct(
                "/v1/leases/ack",
                {
                    "schema": "qinglong/lease-ack-request@v1",
                    "workerId": self.agent.worker_id,
                    "sessionId": offer["sessionId"],
                    "generation": offer["generation"],
                    "offerId": offer["offerId"],
                    "leaseToken": offer["leaseToken"],
                    "leaseVersion": offer.get("version", 1),
                    "phase": phase,
                },
            )
            offer["version"] = offer.get("version", 1) + 1
        offer["started"] = True


STATE: dict[str, FuzzState] = {}


@pytest.fixture(scope="module")
def fz(
    pg_cluster: ThrowawayPostgres, migrated_template: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[FuzzState]:
    # The ingress runs as its own process: in-process it would share the GIL with
    # Hypothesis's generation and both would crawl on a 2-core box.
    tmp = tmp_path_factory.mktemp("fuzz")
    with module_world(pg_cluster, migrated_template, tmp, start_ingress=False) as world:
        # A key-encryption key, so /v1/leases/secrets answers as in production
        # (without one it is 503 secrets_unavailable, SPEC §14.3).
        create_kek_file(tmp / "kek.key")
        # The lease limiter lifted as the polling one is (security_support): it
        # answers 429 before the body is read, which would mask negative data.
        server = start_ingress_process(
            tmp,
            world.pki,
            world.ingress_dsn,
            kekFile=str(tmp / "kek.key"),
            leaseRatePerS=100_000,
            leaseRateBurst=100_000,
        )
        try:
            agent = world.agent("fuzz-worker")
            http = mtls_session(world.pki, agent.cert, agent.token)
            world.prov.enqueue(world.prov.task("fuzz"), count=200)
            state = FuzzState(world, agent, f"https://127.0.0.1:{server.port}", http, {})
            state.open_session()
            STATE["fz"] = state
            yield state
            http.close()
        finally:
            server.stop()


def _pick(rng: int, items: list[Any]) -> Any:
    return items[rng % len(items)]


def steer(case: Any, fz: FuzzState) -> bool:
    """Point a positive case at live objects (see the module docstring)."""
    body = case.body
    if case.meta is None or not case.meta.generation.mode.is_positive:
        return False
    if not isinstance(body, dict):
        return False
    draw = zlib.crc32(json.dumps(body, sort_keys=True, default=str).encode())
    # 1 in 10 keeps the generated Authorization (fuzzing the credential parser).
    if draw % 10 != 0:
        case.headers = {**(case.headers or {}), "Authorization": f"Bearer {fz.agent.token}"}
    if (draw >> 4) % 10 != 0:
        body["workerId"] = fz.agent.worker_id
    if "sessionId" in body and (draw >> 8) % 10 < 7:
        body["sessionId"] = fz.session["sessionId"]
        body["generation"] = fz.session["generation"]
    if "offerId" in body:
        lease_op = case.path.startswith("/v1/leases/")
        if (draw >> 12) % 10 < (7 if lease_op else 2):
            offer = (
                fz.live_offer(draw >> 16)
                if lease_op or not fz.offers
                else _pick(draw >> 16, fz.offers)
            )
            if (
                lease_op
                and case.path != "/v1/leases/ack"
                and not offer.get("started")
                and (draw >> 28) % 4
            ):
                fz.start(offer)
            body["offerId"], body["leaseToken"] = offer["offerId"], offer["leaseToken"]
            if lease_op and (draw >> 30) % 4:  # mostly the version the lease is at
                body["leaseVersion"] = offer.get("version", 1)
            if (draw >> 20) % 4:
                body["sessionId"], body["generation"] = offer["sessionId"], offer["generation"]
    if case.path == "/v1/sessions" and (draw >> 24) % 2:
        body["capabilities"] = CAPABILITIES
    return True


def observe(case: Any, response: Any, fz: FuzzState) -> None:
    """Learn live objects from successful answers (sessions, offers)."""
    fz.calls += 1
    reason = ""
    try:
        doc = response.json()
    except ValueError:
        doc = None
    if isinstance(doc, dict):
        reason = str(doc.get("reason") or doc.get("status") or "")
    fz.statuses[(f"{case.method} {case.path}", response.status_code, reason)] += 1
    if response.status_code == 201 and isinstance(doc, dict):
        fz.session = doc
    if (
        case.path == "/v1/sessions/close"
        and response.status_code == 200
        and isinstance(doc, dict)
        and doc.get("sessionId") == fz.session.get("sessionId")
    ):
        fz.open_session()  # keep a live session for the next steered cases
    if (
        case.path == "/v1/offers/pull"
        and response.status_code == 200
        and isinstance(doc, dict)
        and doc.get("status") == "offered"
        and isinstance(case.body, dict)
    ):
        fz.offers.append(
            {
                "offerId": case.body["offerId"],
                "leaseToken": case.body["leaseToken"],
                "sessionId": case.body["sessionId"],
                "generation": case.body["generation"],
            }
        )
        del fz.offers[:-64]
    if (
        case.path.startswith("/v1/leases/")
        and response.status_code == 200
        and isinstance(doc, dict)
        and isinstance(doc.get("leaseVersion"), int)
    ):
        for offer in fz.offers:  # follow the lease version, as a worker does
            if offer["offerId"] == doc.get("offerId"):
                offer["version"] = max(offer.get("version", 1), doc["leaseVersion"])


def header(response: Any, name: str) -> str:
    """schemathesis's Response keeps headers as {lowercase name: [values]}."""
    values = response.headers.get(name.lower()) or [""]
    return str(values[0])


def contract_check(case: Any, response: Any, fz: FuzzState) -> None:
    """Our own checks on top of schemathesis's (stricter, and per our contract)."""
    status = response.status_code
    text = response.text
    assert status < 500 or status == 503, (status, text)
    secrets = [fz.agent.worker.secret]
    if isinstance(case.body, dict) and isinstance(case.body.get("leaseToken"), str):
        secrets.append(case.body["leaseToken"])
    assert not [s for s in secrets if len(s) >= 16 and s in text], "secret echoed"
    assert header(response, "Content-Type").startswith("application/json"), status
    doc = response.json()
    if case.method.upper() != "POST":
        # The coverage phase also tries undeclared methods on every path.
        assert (status, doc["reason"]) == (405, "method_not_allowed"), (case.method, status)
        assert header(response, "Allow") == "POST"
        default_contract().validate("qinglong/error@v1", doc)
        return
    operation = DOCUMENT["paths"][case.path]["post"]
    assert str(status) in operation["responses"], (case.path, status)
    if status >= 400:
        default_contract().validate("qinglong/error@v1", doc)
        if status == 409:  # only the conflict categories documented for this path
            assert doc["reason"] in CONFLICTS[case.path], (case.path, doc)
        if status in (429, 503):
            assert int(header(response, "Retry-After")) >= 1
        if status == 503:
            assert doc["reason"] in DECLARED_503_REASONS, doc
        return
    schema_ref = operation["responses"][str(status)]["content"]["application/json"]["schema"]
    schema_id = doc.get("schema")
    try:
        default_contract().validate(schema_id, doc)
    except (ContractError, KeyError) as exc:
        raise AssertionError(f"{case.path} {status}: {exc}") from None
    assert json.dumps(schema_ref).find(schema_id.replace("/", ".").replace("@", ".")) >= 0


@pytest.mark.timeout(7200 if LONG else 300)
@SCHEMA.parametrize()
@settings(
    max_examples=PER_OPERATION,
    deadline=None,
    database=None,
    derandomize=not LONG,
    suppress_health_check=list(HealthCheck),
    phases=[Phase.explicit, Phase.generate],
)
def test_openapi_fuzz(case: Any, fz: FuzzState) -> None:
    if steer(case, fz):
        fz.steered += 1
    if case.meta is not None:
        fz.modes[f"{case.meta.phase.name.value}/{case.meta.generation.mode.value}"] += 1
    started = time.monotonic()
    # verify/cert explicitly: schemathesis passes its own (verify=True) otherwise.
    response = case.call(
        base_url=fz.base_url, session=fz.http, timeout=30, verify=fz.http.verify, cert=fz.http.cert
    )
    fz.http_seconds += time.monotonic() - started
    observe(case, response, fz)
    contract_check(case, response, fz)
    case.validate_response(response, checks=CHECKS)


def test_fuzz_case_count() -> None:
    """The fuzz budget really ran (>= 2,000 cases; 50,000 with QL_FUZZ_LONG=1)."""
    fz = STATE.get("fz")
    if fz is None:
        pytest.skip("the fuzz tests did not run in this session")
    elapsed = time.monotonic() - fz.started
    summary = {
        "calls": fz.calls,
        "steered": fz.steered,
        "seconds": round(elapsed, 1),
        "httpSeconds": round(fz.http_seconds, 1),
        "modes": dict(fz.modes),
        "statuses": {f"{p} {s} {r}": n for (p, s, r), n in sorted(fz.statuses.items())},
    }
    print(json.dumps(summary, indent=1))
    assert fz.calls >= TARGET_CASES, summary
    assert not [k for k in fz.statuses if k[1] >= 500 and k[1] != 503], summary
    # Steering worked: the fuzzer reached claims, replays and lease transitions.
    reached = {(p, s) for p, s, _ in fz.statuses}
    assert ("POST /v1/offers/pull", 200) in reached and ("POST /v1/sessions", 201) in reached, (
        summary
    )
