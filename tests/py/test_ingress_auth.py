"""401/403 matrix: every refusal changes no table except adding a security_audit row."""

from __future__ import annotations

import json

import pytest

from qinglong.db import api
from tests.py import ingress_harness
from tests.py.ingress_harness import (
    Agent,
    PkiSet,
    client_context,
    make_agent,
    open_body,
    post,
    pull_body,
    snapshot,
)

# Shared fixtures (pytest collects them through these module names).
ingress = ingress_harness.ingress
ingress_dsn = ingress_harness.ingress_dsn
prov = ingress_harness.prov
start_ingress_thread = ingress_harness.start_ingress_thread
su_conn = ingress_harness.su_conn
test_pki = ingress_harness.test_pki


@pytest.fixture
def world(ingress, prov, test_pki: PkiSet, su_conn):
    a = make_agent(prov, test_pki, "worker-a")
    b = make_agent(prov, test_pki, "worker-b")
    reply = post(ingress.port, "/v1/sessions", open_body(a), ctx=a.ctx, token=a.token)
    assert reply.status == 201, reply.body
    task = prov.task("t")
    prov.enqueue(task, count=2)
    return {"a": a, "b": b, "session": reply.json}


def _bad_secret(agent: Agent) -> str:
    secret = agent.worker.secret
    flipped = ("B" if secret[0] == "A" else "A") + secret[1:]
    return f"ql3w_{agent.worker.credential_id}_{flipped}"


# case -> (HTTP status, reason the worker is told, reason the audit keeps). An
# unknown credential id and a wrong secret look the same from outside (no
# existence oracle); security_audit and the audit log keep which one it was.
CASES = {
    "missing": (401, "missing_credential", "missing_credential"),
    "not_bearer": (401, "malformed_credential", "malformed_credential"),
    "malformed": (401, "malformed_credential", "malformed_credential"),
    "unknown": (401, "invalid_credential", "unknown_credential"),
    "wrong_secret": (401, "invalid_credential", "bad_secret"),
    "revoked": (401, "revoked_credential", "revoked_credential"),
    "cert_a_credential_b": (403, "worker_mismatch", "worker_mismatch"),
    "body_b_cert_and_credential_a": (403, "identity_mismatch", "identity_mismatch"),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("path", ["/v1/offers/pull", "/v1/sessions/heartbeat"])
def test_refusals_change_nothing_but_the_audit(world, ingress, su_conn, prov, case, path):
    a, b, session = world["a"], world["b"], world["session"]
    body = pull_body(a, session)
    if path == "/v1/sessions/heartbeat":
        body = {
            "schema": "qinglong/session-heartbeat-request@v1",
            "workerId": a.worker_id,
            "sessionId": session["sessionId"],
            "generation": session["generation"],
        }
    headers: dict[str, str] = {}
    token: str | None = a.token
    if case == "missing":
        token = None
    elif case == "not_bearer":
        token, headers = None, {"Authorization": f"Basic {a.token}"}
    elif case == "malformed":
        token = a.token[:-3]
    elif case == "unknown":
        token = "ql3w_" + "z" * 16 + a.token[21:]
    elif case == "wrong_secret":
        token = _bad_secret(a)
    elif case == "revoked":
        prov.call(api.revoke_credential(credential_id=a.worker.credential_id))
    elif case == "cert_a_credential_b":
        token = b.token
    elif case == "body_b_cert_and_credential_a":
        body["workerId"] = b.worker_id
    before = snapshot(su_conn)
    reply = post(ingress.port, path, body, ctx=a.ctx, token=token, headers=headers)
    status, public_reason, reason = CASES[case]
    assert (reply.status, reply.json) == (
        status,
        {
            "schema": "qinglong/error@v1",
            "error": "unauthorized" if status == 401 else "forbidden",
            "reason": public_reason,
        },
    )
    after = snapshot(su_conn)
    assert after.tables == before.tables
    assert after.audit_rows == before.audit_rows + 1
    row = su_conn.execute(
        "SELECT outcome, reason, credential_id FROM ql_private.security_audit"
        " ORDER BY id DESC LIMIT 1"
    ).fetchone()
    assert row[0] == "denied" and row[1] == reason
    # Nothing secret in the response or the audit stream.
    secrets_ = [
        a.worker.secret,
        b.worker.secret,
        *([body["leaseToken"]] if "leaseToken" in body else []),
    ]
    for text in [reply.body.decode(), *ingress.audit_lines]:
        assert not any(s in text for s in secrets_)
    last = json.loads(ingress.audit_lines[-1])
    assert (last["outcome"], last["reason"]) == ("denied", reason)
    assert set(last) == {
        "timeMs",
        "stream",
        "credentialId",
        "workerId",
        "action",
        "outcome",
        "reason",
    }


def test_unknown_id_and_wrong_secret_get_the_same_answer(world, ingress):
    a, session = world["a"], world["session"]
    unknown = post(
        ingress.port,
        "/v1/offers/pull",
        pull_body(a, session),
        ctx=a.ctx,
        token="ql3w_" + "z" * 16 + a.token[21:],
    )
    wrong = post(
        ingress.port, "/v1/offers/pull", pull_body(a, session), ctx=a.ctx, token=_bad_secret(a)
    )
    assert (unknown.status, unknown.body) == (wrong.status, wrong.body)
    assert unknown.status == 401 and unknown.json["reason"] == "invalid_credential"
    # Each: `allowed` (identity verified) before the database call, the database's
    # denial after it.
    assert [(d["outcome"], d["reason"]) for d in map(json.loads, ingress.audit_lines[-4:])] == [
        ("allowed", "identity_verified"),
        ("denied", "unknown_credential"),
        ("allowed", "identity_verified"),
        ("denied", "bad_secret"),
    ]


def test_certificate_without_worker_identity_is_forbidden(world, ingress, test_pki, su_conn):
    a, session = world["a"], world["session"]
    # A cert from our CA naming a worker id that is not a canonical UUID.
    odd = test_pki.worker_cert("NOT-A-UUID", name="odd")
    before = snapshot(su_conn)
    reply = post(
        ingress.port,
        "/v1/offers/pull",
        pull_body(a, session),
        ctx=client_context(test_pki, odd),
        token=a.token,
    )
    assert (reply.status, reply.json["reason"]) == (403, "identity_mismatch")
    assert snapshot(su_conn).tables == before.tables
