"""Security matrix: every way in that must be refused, is refused,
and changes nothing in the database.

One database + one real mTLS ingress per module. Every case fingerprints all
ql_private tables before and after; a refusal must leave every table identical
and add exactly the security_audit rows listed for it (none for TLS refusals,
fence conflicts and role escapes; one, with the exact action / reason /
credential id / worker id, for an authentication denial). The table in
docs/SECURITY.md maps each case to its expected refusal and test name.
"""

from __future__ import annotations

import http.client
import json
import ssl
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql

from qinglong.db import api
from qinglong.schemas.canonical import canonical_bytes
from qinglong.service import pki
from tests.py import security_support
from tests.py.ingress_harness import (
    CAPABILITIES,
    INGRESS_ROLE,
    Agent,
    client_context,
    open_body,
    post,
)
from tests.py.provision import digest, new_token
from tests.py.security_support import (
    AuditRow,
    World,
    assert_only_audit,
    audit_rows_since,
    changed_tables,
    custom_worker_cert,
    db_state,
    error_doc,
    lease_body,
    pull_request,
    session_body,
)

world = security_support.world

HANDSHAKE_REFUSED = (ssl.SSLError, ConnectionError, http.client.RemoteDisconnected, OSError)
WORKER_URI = pki.WORKER_URI_PREFIX


@dataclass
class Matrix:
    """Worker A (the attacker), worker B (the victim) and their live state."""

    world: World
    a: Agent
    b: Agent
    c: Agent  # only for the pg_temp open_session case
    sa: dict[str, Any]  # A's session
    sb: dict[str, Any]  # B's session
    a_offer: dict[str, Any]  # A's own unstarted offer: {offerId, leaseToken}
    b_unstarted: dict[str, Any]  # B's offer, claimed, not started
    b_running: dict[str, Any]  # B's offer, ACKed starting + running
    a_pull_body: bytes  # the HTTP answer to A's pull (for the replay proof)
    revoked_id: str
    revoked_secret: str

    @property
    def port(self) -> int:
        return self.world.port


def _send(m: Matrix, agent: Agent, path: str, body: dict[str, Any], **kwargs: Any) -> Any:
    return post(m.port, path, body, ctx=agent.ctx, **({"token": agent.token} | kwargs))


def _pull(m: Matrix, agent: Agent, session: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    body = pull_request(agent.worker_id, session)
    reply = _send(m, agent, "/v1/offers/pull", body)
    assert reply.status == 200 and reply.json["status"] == "offered", reply.body
    return {"offerId": body["offerId"], "leaseToken": body["leaseToken"]}, reply


@pytest.fixture(scope="module")
def m(world: World) -> Matrix:
    a, b, c = world.agent("worker-a"), world.agent("worker-b"), world.agent("worker-c")
    prov = world.prov
    revoked_id, revoked_secret = "revoked000000001", new_token()
    prov.call(
        api.issue_credential(
            worker_id=a.worker_id, credential_id=revoked_id, secret_digest=digest(revoked_secret)
        )
    )
    prov.call(api.revoke_credential(credential_id=revoked_id))
    sessions = {}
    for agent in (a, b):
        reply = post(world.port, "/v1/sessions", open_body(agent), ctx=agent.ctx, token=agent.token)
        assert reply.status == 201, reply.body
        sessions[agent.worker_id] = reply.json
    sa, sb = sessions[a.worker_id], sessions[b.worker_id]
    # Four runs: B claims two, A one, and one stays queued so that a refusal that
    # wrongly went through to a claim would visibly change the tables.
    prov.enqueue(prov.task("t"), count=4)
    stub = Matrix(world, a, b, c, sa, sb, {}, {}, {}, b"", revoked_id, revoked_secret)
    b_unstarted, _ = _pull(stub, b, sb)
    b_running, _ = _pull(stub, b, sb)
    for version, phase in enumerate(("starting", "running"), start=1):
        ack = lease_body(
            "ack",
            b.worker_id,
            sb,
            b_running["offerId"],
            b_running["leaseToken"],
            version,
            phase=phase,
        )
        assert _send(stub, b, "/v1/leases/ack", ack).status == 200
    a_offer, a_reply = _pull(stub, a, sa)
    return Matrix(
        world,
        a,
        b,
        c,
        sa,
        sb,
        a_offer,
        b_unstarted,
        b_running,
        a_reply.body,
        revoked_id,
        revoked_secret,
    )


@pytest.fixture
def su(m: Matrix) -> psycopg.Connection:
    return m.world.su_conn


# ------------------------------------------------------------------ endpoints

ENDPOINTS: dict[str, str] = {
    # path -> audit action (security_audit.action, as ql_private.authenticate records it)
    "/v1/sessions": "session.open",
    "/v1/sessions/heartbeat": "session.heartbeat",
    "/v1/sessions/close": "session.close",
    "/v1/offers/pull": "offer.pull",
    "/v1/leases/ack": "lease.ack",
    "/v1/leases/heartbeat": "lease.heartbeat",
    "/v1/leases/complete": "lease.complete",
    "/v1/leases/secrets": "lease.secrets",
    "/v1/leases/log": "lease.log",
    "/v1/offers/pull-batch": "offer.pull",  # the batch is audited as a pull
    "/v1/leases/batch": "lease.batch",
    "/v1/credentials/rotate": "credential.rotate",
}


def valid_body(m: Matrix, path: str, worker_id: str | None = None) -> dict[str, Any]:
    """A's own, otherwise valid request for `path` (workerId overridable)."""
    wid = worker_id or m.a.worker_id
    offer, token = m.a_offer["offerId"], m.a_offer["leaseToken"]
    bodies: dict[str, Callable[[], dict[str, Any]]] = {
        "/v1/sessions": lambda: {
            "schema": "qinglong/session-open-request@v1",
            "workerId": wid,
            "capabilities": CAPABILITIES,
        },
        "/v1/sessions/heartbeat": lambda: session_body("heartbeat", wid, m.sa),
        "/v1/sessions/close": lambda: session_body("close", wid, m.sa),
        "/v1/offers/pull": lambda: pull_request(wid, m.sa),
        "/v1/leases/ack": lambda: lease_body("ack", wid, m.sa, offer, token, phase="starting"),
        "/v1/leases/heartbeat": lambda: lease_body("heartbeat", wid, m.sa, offer, token),
        "/v1/leases/complete": lambda: lease_body(
            "complete", wid, m.sa, offer, token, outcome="succeeded", exitCode=0
        ),
        "/v1/leases/secrets": lambda: lease_body("secrets", wid, m.sa, offer, token),
        "/v1/leases/log": lambda: lease_body("log", wid, m.sa, offer, token, offset=0, chunk="x"),
        "/v1/offers/pull-batch": lambda: {
            "schema": "qinglong/offer-batch-pull-request@v1",
            "workerId": wid,
            "sessionId": m.sa["sessionId"],
            "generation": m.sa["generation"],
            "offers": [{"offerId": str(uuid.uuid4()), "leaseToken": new_token()}],
        },
        "/v1/leases/batch": lambda: {
            "schema": "qinglong/lease-batch-request@v1",
            "workerId": wid,
            "sessionId": m.sa["sessionId"],
            "generation": m.sa["generation"],
            # Three items: a refused credential is one denial, not one per item.
            "items": [lease_body("heartbeat", wid, m.sa, offer, token)] * 3,
        },
        "/v1/credentials/rotate": lambda: {
            "schema": "qinglong/credential-rotate-request@v1",
            "workerId": wid,
        },
    }
    return bodies[path]()


def _last_audit_line(m: Matrix) -> dict[str, Any]:
    assert m.world.ingress is not None
    return json.loads(m.world.ingress.audit_lines[-1])


# ------------------------------------------------------------------ TLS


def _not_yet_valid(m: Matrix) -> pki.CertFiles:
    now = datetime.now(UTC)
    return pki.issue_worker_cert(
        m.world.pki.ca_dir,
        m.world.pki.root / "future",
        m.a.worker_id,
        not_before=now + timedelta(days=1),
        not_after=now + timedelta(days=30),
    )


def _wrong_eku(m: Matrix) -> pki.CertFiles:
    return pki.issue_worker_cert(
        m.world.pki.ca_dir,
        m.world.pki.root / "server-eku",
        m.a.worker_id,
        key_usage_client_auth=False,
    )


TLS_CASES: dict[str, Callable[[Matrix], ssl.SSLContext | None]] = {
    "plaintext": lambda m: None,
    "tls12_only_client": lambda m: client_context(m.world.pki, m.a.cert, tls12=True),
    "no_client_cert": lambda m: client_context(m.world.pki, None),
    "foreign_ca_cert": lambda m: client_context(
        m.world.pki, m.world.pki.worker_cert(m.a.worker_id, foreign=True, name="foreign")
    ),
    "expired_cert": lambda m: client_context(
        m.world.pki, m.world.pki.worker_cert(m.a.worker_id, expired=True, name="expired")
    ),
    "not_yet_valid_cert": lambda m: client_context(m.world.pki, _not_yet_valid(m)),
    "wrong_key_usage_cert": lambda m: client_context(m.world.pki, _wrong_eku(m)),
}


@pytest.mark.parametrize("case", list(TLS_CASES))
def test_tls_refused_at_handshake(m: Matrix, su: psycopg.Connection, case: str) -> None:
    """Refused before HTTP: no status code at all, no audit row, nothing written."""
    server = m.world.ingress
    assert server is not None
    ctx = TLS_CASES[case](m)
    refused_before = server.metrics.connections_refused.value()
    before = db_state(su)
    body = json.dumps(valid_body(m, "/v1/offers/pull")).encode()
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {m.a.token}"}
    conn: http.client.HTTPConnection
    if ctx is None:
        conn = http.client.HTTPConnection("127.0.0.1", m.port, timeout=10)
    else:
        conn = http.client.HTTPSConnection("127.0.0.1", m.port, context=ctx, timeout=10)
    try:
        with pytest.raises(HANDSHAKE_REFUSED):
            conn.request("POST", "/v1/offers/pull", body=body, headers=headers)
            conn.getresponse().read()
    finally:
        conn.close()
    _wait_for(lambda: server.metrics.connections_refused.value() == refused_before + 1)
    assert_only_audit(su, before, [])


def _wait_for(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.02)


# Certificates from the trusted CA that pass the handshake but name no single
# canonical worker: the application refuses them (403 identity_mismatch).
IDENTITY_CERTS: dict[str, Callable[[str, str], dict[str, Any]]] = {
    "cert_without_san": lambda a, b: {"uris": None},
    "cert_san_without_uri": lambda a, b: {"uris": None, "dns_names": ["worker-a.example"]},
    "cert_two_worker_uris": lambda a, b: {"uris": [WORKER_URI + a, WORKER_URI + b]},
    "cert_same_uri_twice": lambda a, b: {"uris": [WORKER_URI + a, WORKER_URI + a]},
    "cert_uppercase_uuid": lambda a, b: {"uris": [WORKER_URI + a.upper()]},
    "cert_other_uri_prefix": lambda a, b: {"uris": ["urn:qinglong:runner:" + a]},
}


@pytest.mark.parametrize("case", list(IDENTITY_CERTS))
def test_certificate_naming_no_single_worker_is_forbidden(
    m: Matrix, su: psycopg.Connection, case: str
) -> None:
    spec = IDENTITY_CERTS[case](m.a.worker_id, m.b.worker_id)
    cert = custom_worker_cert(m.world.pki.ca_dir, m.world.pki.root / case, **spec)
    before = db_state(su)
    reply = post(
        m.port,
        "/v1/offers/pull",
        valid_body(m, "/v1/offers/pull"),
        ctx=client_context(m.world.pki, cert),
        token=m.a.token,
    )
    assert (reply.status, reply.json) == (403, error_doc(403, "identity_mismatch"))
    # The certificate names nobody, so the audit names no worker (never the body's).
    assert_only_audit(
        su, before, [("offer.pull", "denied", "identity_mismatch", m.a.worker.credential_id, None)]
    )
    assert _last_audit_line(m)["workerId"] is None


@pytest.mark.parametrize("cert_names", ["nobody", "a"])
@pytest.mark.parametrize("token", ["none", "a"])
def test_a_denial_never_names_the_bodys_worker(
    m: Matrix, su: psycopg.Connection, cert_names: str, token: str
) -> None:
    """A forged body naming B: the denial (line and row) names the certificate's
    worker, or none — never B, whom the requester could otherwise blame."""
    ctx = (
        client_context(
            m.world.pki,
            custom_worker_cert(m.world.pki.ca_dir, m.world.pki.root / "forger", uris=None),
        )
        if cert_names == "nobody"
        else m.a.ctx
    )
    before = db_state(su)
    lines_before = len(m.world.ingress.audit_lines)
    reply = post(
        m.port,
        "/v1/offers/pull",
        valid_body(m, "/v1/offers/pull", worker_id=m.b.worker_id),
        ctx=ctx,
        token=m.a.token if token == "a" else None,
    )
    expected_worker = None if cert_names == "nobody" else m.a.worker_id
    reason = "identity_mismatch" if token == "a" else "missing_credential"
    assert reply.status == (403 if token == "a" else 401)
    assert_only_audit(
        su,
        before,
        [
            (
                "offer.pull",
                "denied",
                reason,
                m.a.worker.credential_id if token == "a" else None,
                expected_worker,
            )
        ],
    )
    line = _last_audit_line(m)
    assert (line["outcome"], line["reason"], line["workerId"]) == (
        "denied",
        reason,
        expected_worker,
    )
    assert len(m.world.ingress.audit_lines) == lines_before + 1
    assert m.b.worker_id not in m.world.ingress.audit_lines[-1]


# ------------------------------------------------------------------ credentials + identity

CREDENTIAL_CASES = [
    "missing_header",
    "not_bearer",
    "malformed_ql3w",
    "wrong_secret",
    "unknown_credential_id",
    "revoked_credential",
    "other_workers_credential",
    "body_worker_not_cert",
]
# The cases the database refuses (ql_private.authenticate), not the ingress's parser.
DATABASE_CASES = {
    "wrong_secret",
    "unknown_credential_id",
    "revoked_credential",
    "other_workers_credential",
}


def _credential_case(
    m: Matrix, case: str, path: str
) -> tuple[dict[str, Any], dict[str, Any], int, AuditRow]:
    """(post kwargs, body, expected status, expected audit row) for one case."""
    a = m.a
    action = ENDPOINTS[path]
    body = valid_body(m, path)
    cred = a.worker.credential_id
    secret = a.worker.secret
    kwargs: dict[str, Any]
    if case == "missing_header":
        kwargs = {"token": None}
        return kwargs, body, 401, (action, "denied", "missing_credential", None, a.worker_id)
    if case == "not_bearer":
        kwargs = {"token": None, "headers": {"Authorization": f"Basic {a.token}"}}
        return kwargs, body, 401, (action, "denied", "malformed_credential", None, a.worker_id)
    if case == "malformed_ql3w":
        # The public id is still readable, so the denial is attributed to it.
        kwargs = {"token": a.token[:-3]}
        return kwargs, body, 401, (action, "denied", "malformed_credential", cred, a.worker_id)
    if case == "wrong_secret":
        flipped = ("B" if secret[0] == "A" else "A") + secret[1:]
        kwargs = {"token": f"ql3w_{cred}_{flipped}"}
        return kwargs, body, 401, (action, "denied", "bad_secret", cred, a.worker_id)
    if case == "unknown_credential_id":
        kwargs = {"token": f"ql3w_{'z' * 16}_{secret}"}
        return kwargs, body, 401, (action, "denied", "unknown_credential", "z" * 16, a.worker_id)
    if case == "revoked_credential":
        kwargs = {"token": f"ql3w_{m.revoked_id}_{m.revoked_secret}"}
        return (
            kwargs,
            body,
            401,
            (action, "denied", "revoked_credential", m.revoked_id, a.worker_id),
        )
    if case == "other_workers_credential":
        # B's valid credential presented with A's certificate and A's body.
        kwargs = {"token": m.b.token}
        return (
            kwargs,
            body,
            403,
            (action, "denied", "worker_mismatch", m.b.worker.credential_id, a.worker_id),
        )
    if case == "body_worker_not_cert":
        kwargs = {}
        return (
            kwargs,
            valid_body(m, path, worker_id=m.b.worker_id),
            403,
            (action, "denied", "identity_mismatch", cred, a.worker_id),
        )
    raise AssertionError(case)


@pytest.mark.parametrize("path", list(ENDPOINTS))
@pytest.mark.parametrize("case", CREDENTIAL_CASES)
def test_credential_and_identity_denials(
    m: Matrix, su: psycopg.Connection, case: str, path: str
) -> None:
    kwargs, body, status, audit = _credential_case(m, case, path)
    before = db_state(su)
    reply = _send(m, m.a, path, body, **kwargs)
    # Unknown id and wrong secret answer alike; the audit keeps the precise reason.
    told = "invalid_credential" if audit[2] in ("unknown_credential", "bad_secret") else audit[2]
    if path == "/v1/leases/batch" and case in DATABASE_CASES:
        # The batch's admission checks the credential's form and the certificate;
        # the secret is checked by the first item's database call (audited as its
        # single endpoint), and its refusal refuses the whole batch (CONTRACT §18.3).
        audit = (ENDPOINTS["/v1/leases/heartbeat"], *audit[1:])
    assert (reply.status, reply.json) == (status, error_doc(status, told))
    assert_only_audit(su, before, [audit])
    line = _last_audit_line(m)
    assert (line["action"], line["outcome"], line["reason"]) == audit[:3]
    for secret in (m.a.worker.secret, m.b.worker.secret, m.revoked_secret):
        assert secret not in reply.body.decode()


# ------------------------------------------------------------------ BOLA


def _bola(m: Matrix, case: str) -> tuple[str, dict[str, Any], str]:
    """(path, body sent by A with A's cert + credential, expected 409 reason)."""
    a, sa, sb = m.a.worker_id, m.sa, m.sb
    unstarted, running = m.b_unstarted, m.b_running
    cases: dict[str, tuple[str, dict[str, Any], str]] = {
        # Replaying B's offer id from A's session: with a fresh token, and with B's
        # token (as if A had stolen it). The owner check comes first.
        "replay_b_offer_own_token": (
            "/v1/offers/pull",
            pull_request(a, sa, unstarted["offerId"]),
            "offer_foreign",
        ),
        "replay_b_offer_b_token": (
            "/v1/offers/pull",
            pull_request(a, sa, unstarted["offerId"], unstarted["leaseToken"]),
            "offer_foreign",
        ),
        "replay_b_offer_b_session": (
            "/v1/offers/pull",
            pull_request(a, sb, unstarted["offerId"], unstarted["leaseToken"]),
            "offer_foreign",
        ),
        "pull_on_b_session": ("/v1/offers/pull", pull_request(a, sb), "session_not_found"),
        "ack_b_unstarted_offer": (
            "/v1/leases/ack",
            lease_body(
                "ack", a, sa, unstarted["offerId"], unstarted["leaseToken"], phase="starting"
            ),
            "offer_foreign",
        ),
        "ack_b_offer_with_b_session": (
            "/v1/leases/ack",
            lease_body(
                "ack", a, sb, unstarted["offerId"], unstarted["leaseToken"], phase="starting"
            ),
            "offer_foreign",
        ),
        "start_failed_b_offer": (
            "/v1/leases/ack",
            lease_body(
                "ack", a, sa, unstarted["offerId"], unstarted["leaseToken"], phase="start_failed"
            ),
            "offer_foreign",
        ),
        "ack_running_b_lease": (
            "/v1/leases/ack",
            lease_body("ack", a, sa, running["offerId"], running["leaseToken"], phase="running"),
            "offer_foreign",
        ),
        "heartbeat_b_lease": (
            "/v1/leases/heartbeat",
            lease_body("heartbeat", a, sa, running["offerId"], running["leaseToken"]),
            "offer_foreign",
        ),
        "complete_b_lease": (
            "/v1/leases/complete",
            lease_body(
                "complete",
                a,
                sa,
                running["offerId"],
                running["leaseToken"],
                outcome="succeeded",
                exitCode=0,
            ),
            "offer_foreign",
        ),
        "complete_b_unstarted_offer": (
            "/v1/leases/complete",
            lease_body(
                "complete",
                a,
                sb,
                unstarted["offerId"],
                unstarted["leaseToken"],
                outcome="failed",
                exitCode=1,
            ),
            "offer_foreign",
        ),
        "heartbeat_b_session": (
            "/v1/sessions/heartbeat",
            session_body("heartbeat", a, sb),
            "session_not_found",
        ),
        "close_b_session": (
            "/v1/sessions/close",
            session_body("close", a, sb),
            "session_not_found",
        ),
    }
    return cases[case]


BOLA_CASES = [
    "replay_b_offer_own_token",
    "replay_b_offer_b_token",
    "replay_b_offer_b_session",
    "pull_on_b_session",
    "ack_b_unstarted_offer",
    "ack_b_offer_with_b_session",
    "start_failed_b_offer",
    "ack_running_b_lease",
    "heartbeat_b_lease",
    "complete_b_lease",
    "complete_b_unstarted_offer",
    "heartbeat_b_session",
    "close_b_session",
]


@pytest.mark.parametrize("case", BOLA_CASES)
def test_bola_other_workers_objects(m: Matrix, su: psycopg.Connection, case: str) -> None:
    """A is authenticated (so: no audit row); the fence refuses B's objects with 409
    and B's session, leases, attempts, runs and events stay byte-identical."""
    path, body, reason = _bola(m, case)
    before = db_state(su)
    reply = _send(m, m.a, path, body)
    assert (reply.status, reply.json) == (409, error_doc(409, reason))
    assert_only_audit(su, before, [])
    assert m.b.worker.secret not in reply.body.decode()
    assert m.b_unstarted["leaseToken"] not in reply.body.decode()


def test_b_still_owns_its_objects_after_the_attacks(m: Matrix, su: psycopg.Connection) -> None:
    """Positive control for the BOLA cases: B's own session and lease still work."""
    b, sb = m.b, m.sb
    beat = _send(m, b, "/v1/sessions/heartbeat", session_body("heartbeat", b.worker_id, sb))
    assert beat.status == 200, beat.body
    lease = _send(
        m,
        b,
        "/v1/leases/heartbeat",
        lease_body(
            "heartbeat", b.worker_id, sb, m.b_running["offerId"], m.b_running["leaseToken"], 3
        ),
    )
    assert lease.status == 200 and lease.json["state"] == "running", lease.body


# ------------------------------------------------------------------ role escape

PRIVATE_TABLES = [
    "attempts",
    "events",
    "execution_revisions",
    "placement_classes",
    "projects",
    "run_leases",
    "runs",
    "schema_migrations",
    "security_audit",
    "tasks",
    "worker_credentials",
    "worker_sessions",
    "workers",
    "worker_labels",  # granted labels (SPEC §13.2)
    "project_tokens",  # the producer API's tokens (SPEC §13.4)
    "project_data_keys",
    "secrets",  # secrets, encrypted (SPEC §14.1)
    "pools",
    "worker_pool_grants",  # pools and worker grants (SPEC §13.1)
    # Issued and revoked worker certificates (SPEC §16.3).
    "worker_certificates",
    "certificate_revocations",
    "attempt_logs",
    "attempt_log_chunks",
]  # live logs (SPEC §15.1)
PRIVATE_SEQUENCES = [
    "events_id_seq",
    "placement_classes_id_seq",
    "run_leases_id_seq",
    "run_queue_seq",
    "security_audit_id_seq",
    "certificate_revocations_seq_seq",
]  # SPEC §16.3
CONTROL_PLANE = [
    "register_worker",
    "issue_credential",
    "revoke_credential",
    "publish_revision",
    "enqueue_runs",
    "cancel_run",
    "sweep_leases",
    "status_snapshot",
    "configure_task",
    "task_settings",
    "list_runs",
    "show_run",
    "list_workers",
    "retry_run",
    "cancel_runs",
    "disable_worker",
    "enable_worker",
    "end_session",
    "prune_runs",
    "prune_audit",
    "prune_fleet",
    "label_worker",  # granted labels (SPEC §13.2)
    "create_pool",
    "grant_pool",
    "revoke_pool",  # pools (SPEC §13.1)
    # Project tokens of the producer API (SPEC §13.4).
    "create_project_token",
    "revoke_project_token",
    "list_project_tokens",
    # Secrets (SPEC §14.1): only ciphertexts and wrapped keys cross.
    "project_data_key",
    "set_secret",
    "list_secrets",
    "delete_secret",
    "list_data_keys",
    "rewrap_data_keys",
    # The console's reads (ql_readonly and ql_runtime).
    "run_state_counts",
    "queue_depth",
    "throughput",
    "waiting_runs",
    "live_sessions",
    "recent_denials",
    # Worker certificates and what expires soon (SPEC §16.3).
    "record_certificate",
    "revoke_certificate",
    "expiring_identities",
    "run_log",  # a page of an attempt's live log (SPEC §15.2)
    "prepare_task",
]  # a signed publish's task id first (SPEC §16.1)
TABLE_OPS = ["SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "COPY"]


@pytest.fixture
def role_conn(m: Matrix) -> Iterator[psycopg.Connection]:
    """A fresh session as a login role IN ROLE ql_worker_ingress (the ingress's
    own privileges). Fresh per case, so temp objects never leak between cases."""
    with psycopg.connect(m.world.ingress_dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT current_user, pg_has_role(current_user, 'ql_worker_ingress', 'MEMBER')"
        ).fetchone()
        assert row == (INGRESS_ROLE, True)
        yield conn


def _refused(
    conn: psycopg.Connection, statement: str | sql.Composable, sqlstate: str = "42501"
) -> str:
    with pytest.raises(psycopg.Error) as caught:
        conn.execute(statement)
    assert caught.value.sqlstate == sqlstate, (caught.value.sqlstate, str(caught.value))
    return str(caught.value)


def test_matrix_lists_every_private_object(su: psycopg.Connection) -> None:
    """The parametrized lists below are the catalog: a new table, sequence or
    control-plane function must be added to this matrix."""
    rels = {
        (r[0], r[1])
        for r in su.execute(
            "SELECT c.relname::text, c.relkind::text FROM pg_class c"
            " WHERE c.relnamespace = 'ql_private'::regnamespace AND c.relkind IN ('r', 'S')"
        )
    }
    assert {n for n, k in rels if k == "r"} == set(PRIVATE_TABLES)
    assert {n for n, k in rels if k == "S"} == set(PRIVATE_SEQUENCES)
    granted = {
        r[0]
        for r in su.execute(
            "SELECT p.proname::text FROM pg_proc p WHERE p.pronamespace = 'ql'::regnamespace"
            " AND has_function_privilege('ql_runtime', p.oid, 'EXECUTE')"
        )
    }
    assert granted == set(CONTROL_PLANE)


@pytest.mark.parametrize("op", TABLE_OPS)
@pytest.mark.parametrize("table", PRIVATE_TABLES)
def test_role_cannot_touch_private_tables(
    m: Matrix, su: psycopg.Connection, role_conn: psycopg.Connection, table: str, op: str
) -> None:
    first_column = su.execute(
        "SELECT attname::text FROM pg_attribute WHERE attrelid = %s::regclass AND attnum = 1",
        (f"ql_private.{table}",),
    ).fetchone()[0]
    ident = sql.Identifier("ql_private", table)
    statements = {
        "SELECT": sql.SQL("SELECT * FROM {} LIMIT 1").format(ident),
        "INSERT": sql.SQL("INSERT INTO {} DEFAULT VALUES").format(ident),
        "UPDATE": sql.SQL("UPDATE {} SET {} = {}").format(
            ident, sql.Identifier(first_column), sql.Identifier(first_column)
        ),
        "DELETE": sql.SQL("DELETE FROM {}").format(ident),
        "TRUNCATE": sql.SQL("TRUNCATE {}").format(ident),
        "COPY": sql.SQL("COPY {} TO STDOUT").format(ident),
    }
    before = db_state(su)
    message = _refused(role_conn, statements[op])
    assert "permission denied for schema ql_private" in message
    assert_only_audit(su, before, [])


@pytest.mark.parametrize("sequence", PRIVATE_SEQUENCES)
def test_role_cannot_move_private_sequences(
    m: Matrix, su: psycopg.Connection, role_conn: psycopg.Connection, sequence: str
) -> None:
    before = db_state(su)
    name = f"ql_private.{sequence}"
    for statement in ("SELECT nextval(%s)", "SELECT setval(%s, 1)", "SELECT currval(%s)"):
        with pytest.raises(psycopg.Error) as caught:
            role_conn.execute(statement, (name,))
        assert caught.value.sqlstate == "42501", str(caught.value)
    assert_only_audit(su, before, [])


def _null_call(su: psycopg.Connection, schema: str, name: str) -> list[str]:
    """`SELECT schema.name(NULL::t1, …)` for every overload of the function."""
    rows = su.execute(
        "SELECT oidvectortypes(p.proargtypes) FROM pg_proc p"
        " WHERE p.pronamespace = %s::regnamespace AND p.proname = %s",
        (schema, name),
    ).fetchall()
    assert rows, f"{schema}.{name} does not exist"
    calls = []
    for (types,) in rows:
        args = ", ".join(f"NULL::{t}" for t in types.split(", ") if t)
        calls.append(f"SELECT {schema}.{name}({args})")
    return calls


@pytest.mark.parametrize("function", CONTROL_PLANE)
def test_role_cannot_execute_control_plane(
    m: Matrix, su: psycopg.Connection, role_conn: psycopg.Connection, function: str
) -> None:
    before = db_state(su)
    for call in _null_call(su, "ql", function):
        assert "permission denied for function" in _refused(role_conn, call)
    assert_only_audit(su, before, [])


def test_role_cannot_call_any_private_helper(
    m: Matrix, su: psycopg.Connection, role_conn: psycopg.Connection
) -> None:
    names = [
        r[0]
        for r in su.execute(
            "SELECT DISTINCT proname::text FROM pg_proc"
            " WHERE pronamespace = 'ql_private'::regnamespace ORDER BY 1"
        )
    ]
    assert len(names) > 20  # authenticate, claim_candidate, session_fence, …
    before = db_state(su)
    for name in names:
        for call in _null_call(su, "ql_private", name):
            assert "permission denied for schema ql_private" in _refused(role_conn, call), call
    assert_only_audit(su, before, [])


ESCAPES: dict[str, tuple[str, str]] = {
    # statement -> expected SQLSTATE
    "set_role_owner": ("SET ROLE ql_owner", "42501"),
    "set_role_runtime": ("SET ROLE ql_runtime", "42501"),
    "set_role_sweeper": ("SET ROLE ql_sweeper", "42501"),
    "set_session_authorization": ("SET SESSION AUTHORIZATION postgres", "42501"),
    "grant_self_owner": (f"GRANT ql_owner TO {INGRESS_ROLE}", "42501"),
    "create_schema": ("CREATE SCHEMA evil", "42501"),
    "create_in_public": ("CREATE TABLE public.evil (x int)", "42501"),
    "create_table_in_ql": ("CREATE TABLE ql.evil (x int)", "42501"),
    "create_table_in_private": ("CREATE TABLE ql_private.evil (x int)", "42501"),
    "replace_worker_function": (
        "CREATE OR REPLACE FUNCTION ql.pull_offer(text, bytea, text, text, bigint, text, bytea,"
        " jsonb) RETURNS jsonb LANGUAGE sql AS $$SELECT '{}'::jsonb$$",
        "42501",
    ),
    "alter_function_search_path": (
        "ALTER FUNCTION ql.pull_offer(text, bytea, text, text, bigint, text, bytea, jsonb)"
        " SET search_path = pg_temp, pg_catalog",
        "42501",
    ),
    # With ql_private on the path an unqualified name still does not resolve: a
    # schema without USAGE is skipped by name lookup (so: undefined_table).
    "search_path_private_unqualified": (
        "SET search_path = ql_private, ql; SELECT * FROM worker_credentials",
        "42P01",
    ),
}


@pytest.mark.parametrize("case", list(ESCAPES))
def test_role_escalation_and_ddl_refused(
    m: Matrix, su: psycopg.Connection, role_conn: psycopg.Connection, case: str
) -> None:
    statement, sqlstate = ESCAPES[case]
    *setup, attempt = statement.split("; ")
    for step in setup:
        role_conn.execute(step)
    before = db_state(su)
    _refused(role_conn, attempt, sqlstate)
    assert_only_audit(su, before, [])
    row = su.execute("SELECT count(*) FROM pg_namespace WHERE nspname = 'evil'").fetchone()
    assert row == (0,)


# ------------------------------------------------------------------ pg_temp shadowing

SHADOW_TABLES = {
    # Same names as the private tables, with just enough columns to hold a forgery.
    "worker_credentials": "credential_id text, worker_id uuid, secret_digest bytea,"
    " revoked_at timestamptz",
    "security_audit": "id bigint, action text, outcome text, reason text",
    "worker_sessions": "session_id uuid, worker_id uuid, generation bigint, state text,"
    " expires_at timestamptz",
    "run_leases": "offer_id uuid, worker_id uuid, session_id uuid, token_digest bytea, run_id uuid",
    "runs": "id uuid, state text",
    "attempts": "id uuid, run_id uuid, state text",
    "workers": "id uuid, name text",
}


def test_ingress_login_gets_no_temp_objects(m: Matrix, role_conn: psycopg.Connection) -> None:
    """The bootstrap leaves PUBLIC without TEMPORARY on the database: the ingress
    login cannot create a pg_temp shadow at all. The shadow tests below grant
    TEMPORARY to the test login on purpose, to test the second line of defence."""
    _refused(role_conn, "CREATE TEMP TABLE worker_credentials (credential_id text)")
    _refused(
        role_conn,
        "CREATE FUNCTION pg_temp.digest_equal(bytea, bytea) RETURNS boolean"
        " LANGUAGE sql AS 'SELECT true'",
    )


@pytest.fixture
def temp_conn(m: Matrix, su: psycopg.Connection) -> Iterator[psycopg.Connection]:
    """Like role_conn, but the test login holds TEMPORARY on the database (as if
    an operator granted it): a login that can shadow with pg_temp objects."""
    grant = sql.SQL("{} TEMPORARY ON DATABASE {} {} {}")
    db, login = sql.Identifier(m.world.db_name), sql.Identifier(INGRESS_ROLE)
    su.execute(grant.format(sql.SQL("GRANT"), db, sql.SQL("TO"), login))
    try:
        with psycopg.connect(m.world.ingress_dsn, autocommit=True) as conn:
            yield conn
    finally:
        su.execute(grant.format(sql.SQL("REVOKE"), db, sql.SQL("FROM"), login))


def _shadow(conn: psycopg.Connection, m: Matrix, forged_secret: str) -> None:
    """pg_temp tables named like the private ones, each holding a forgery that
    would change the answer if a function ever read it; pg_temp first on the path."""
    for name, columns in SHADOW_TABLES.items():
        conn.execute(f"CREATE TEMP TABLE {name} ({columns})")
    a = m.a.worker_id
    conn.execute(
        "INSERT INTO worker_credentials VALUES ('forged0000000001', %s, %s, NULL),"
        " (%s, %s, %s, NULL)",
        (a, digest(forged_secret), m.a.worker.credential_id, a, digest(forged_secret)),
    )
    conn.execute(
        "INSERT INTO worker_sessions VALUES (%s, %s, 41, 'active', now() + interval '1 day')",
        (m.sa["sessionId"], m.c.worker_id),
    )
    conn.execute(
        "INSERT INTO run_leases VALUES (%s, %s, %s, %s, %s)",
        (
            m.a_offer["offerId"],
            m.b.worker_id,
            m.sb["sessionId"],
            digest(new_token()),
            str(uuid.uuid4()),
        ),
    )
    conn.execute("SET search_path = pg_temp, ql, public")


def _pull_sql(
    conn: psycopg.Connection, credential_id: str, secret: str, m: Matrix, offer_id: str, token: str
) -> dict[str, Any]:
    return (
        api.pull_offer(
            credential_id=credential_id,
            secret_digest=digest(secret),
            worker_id=m.a.worker_id,
            session_id=m.sa["sessionId"],
            generation=m.sa["generation"],
            offer_id=offer_id,
            token_digest=digest(token),
        )
        .run(conn)
        .doc
    )


def test_shadow_credentials_in_pg_temp_are_ignored(
    m: Matrix, su: psycopg.Connection, temp_conn: psycopg.Connection
) -> None:
    forged = new_token()
    _shadow(temp_conn, m, forged)
    before = db_state(su)
    # A credential that exists only in pg_temp.worker_credentials is unknown…
    result = _pull_sql(temp_conn, "forged0000000001", forged, m, str(uuid.uuid4()), new_token())
    assert result == {"status": "denied", "httpStatus": 401, "reason": "unknown_credential"}
    # …and A's real credential id with the secret forged in pg_temp is a bad secret.
    result = _pull_sql(
        temp_conn, m.a.worker.credential_id, forged, m, str(uuid.uuid4()), new_token()
    )
    assert result == {"status": "denied", "httpStatus": 401, "reason": "bad_secret"}
    # The denials went to the real security_audit, not to pg_temp.security_audit.
    assert_only_audit(
        su,
        before,
        [
            ("offer.pull", "denied", "unknown_credential", "forged0000000001", m.a.worker_id),
            ("offer.pull", "denied", "bad_secret", m.a.worker.credential_id, m.a.worker_id),
        ],
    )
    assert temp_conn.execute("SELECT count(*) FROM pg_temp.security_audit").fetchone() == (0,)


def test_shadow_functions_in_pg_temp_are_ignored(
    m: Matrix, su: psycopg.Connection, temp_conn: psycopg.Connection
) -> None:
    # pg_temp functions that would wave every secret through if they were called.
    temp_conn.execute(
        "CREATE FUNCTION pg_temp.digest_equal(bytea, bytea) RETURNS boolean"
        " LANGUAGE sql AS 'SELECT true'"
    )
    temp_conn.execute(
        "CREATE FUNCTION pg_temp.authenticate(text, bytea, uuid, text)"
        " RETURNS jsonb LANGUAGE sql AS 'SELECT NULL::jsonb'"
    )
    temp_conn.execute("SET search_path = pg_temp, ql, public")
    before = db_state(su)
    result = _pull_sql(
        temp_conn, m.a.worker.credential_id, new_token(), m, str(uuid.uuid4()), new_token()
    )
    assert result == {"status": "denied", "httpStatus": 401, "reason": "bad_secret"}
    assert_only_audit(
        su,
        before,
        [("offer.pull", "denied", "bad_secret", m.a.worker.credential_id, m.a.worker_id)],
    )


def test_shadow_leases_do_not_change_a_replay(
    m: Matrix, su: psycopg.Connection, temp_conn: psycopg.Connection
) -> None:
    """pg_temp.run_leases claims A's offer id belongs to B; ql.pull_offer still
    replays A's real lease: the very offer the ingress served, and no write."""
    _shadow(temp_conn, m, new_token())
    before = db_state(su)
    result = _pull_sql(
        temp_conn,
        m.a.worker.credential_id,
        m.a.worker.secret,
        m,
        m.a_offer["offerId"],
        m.a_offer["leaseToken"],
    )
    assert result["status"] == "idempotent", result
    served = json.loads(m.a_pull_body)
    assert result["offer"]["offerId"] == served["offerId"] == m.a_offer["offerId"]
    assert result["offer"]["lease"] == served["lease"]
    assert result["offer"]["candidate"] == served["candidate"]
    assert_only_audit(su, before, [])


def test_shadow_sessions_do_not_change_open_session(
    m: Matrix, su: psycopg.Connection, temp_conn: psycopg.Connection
) -> None:
    """pg_temp.worker_sessions holds an active generation-41 session for worker C;
    the real open_session still sees C has none and opens generation 1."""
    _shadow(temp_conn, m, new_token())
    c = m.c.worker
    before = db_state(su)
    opened = (
        api.open_session(
            credential_id=c.credential_id,
            secret_digest=c.secret_digest,
            worker_id=c.worker_id,
            capabilities_canonical=canonical_bytes(CAPABILITIES),
        )
        .run(temp_conn)
        .doc
    )
    assert opened["status"] == "ok", opened
    session = opened["session"]
    assert (session["workerId"], session["generation"]) == (c.worker_id, 1)
    after = db_state(su)
    assert changed_tables(before, after) == ["worker_sessions"]
    assert audit_rows_since(su, before.audit_max_id) == []
    real = su.execute(
        "SELECT worker_id::text, generation, state FROM ql_private.worker_sessions"
        " WHERE session_id = %s",
        (session["sessionId"],),
    ).fetchall()
    assert real == [(c.worker_id, 1, "active")]
    assert temp_conn.execute("SELECT generation FROM pg_temp.worker_sessions").fetchall() == [(41,)]


def test_search_path_on_the_session_does_not_reach_functions(
    m: Matrix, su: psycopg.Connection, role_conn: psycopg.Connection
) -> None:
    """Every worker-facing function pins its own search_path, whatever the caller set."""
    role_conn.execute("SET search_path = pg_temp, ql_private, ql, public")
    pinned = role_conn.execute(
        "SELECT p.proname::text, p.proconfig FROM pg_proc p"
        " WHERE p.pronamespace = 'ql'::regnamespace"
        " AND has_function_privilege(current_user, p.oid, 'EXECUTE') ORDER BY 1"
    ).fetchall()
    assert [name for name, _ in pinned] == sorted(
        [
            "ack_lease",
            "authenticate_worker",
            "close_session",
            "complete_lease",
            "confirm_credentials",
            "heartbeat_lease",
            "heartbeat_session",
            "heartbeat_sessions",
            "idle_probe",
            "lease_secrets",
            "open_session",
            "pull_offer",
            "record_auth_denial",
            # Credential rotation, revoked certificates, expiry counts (SPEC §16.2, §16.3).
            "rotate_credential",
            "revoked_certificates",
            "expiring_counts",
            "append_log",
            "pull_offers",
        ]
    )  # live logs, batched pulls (SPEC §15.1, §18.1)
    # search_path pinned first; the per-run calls add planner settings (plan once
    # per connection, index paths only, no JIT — db/functions/pull_offer.sql).
    assert all(config[0] == "search_path=pg_catalog, pg_temp" for _, config in pinned)
    extra = {name: config[1:] for name, config in pinned if config[1:]}
    planning = ["plan_cache_mode=force_generic_plan", "enable_seqscan=off", "jit=off"]
    assert extra == {
        name: planning
        for name in (
            "ack_lease",
            "complete_lease",
            "heartbeat_lease",
            "heartbeat_sessions",
            "lease_secrets",
            "pull_offer",
            "append_log",
            "pull_offers",
        )
    }
    before = db_state(su)
    result = _pull_sql(
        role_conn,
        m.a.worker.credential_id,
        m.a.worker.secret,
        m,
        m.a_offer["offerId"],
        m.a_offer["leaseToken"],
    )
    assert result["status"] == "idempotent"
    assert_only_audit(su, before, [])
