"""SPEC §5: a revoked credential stops working within 5 s — here immediately.

The ingress keeps no credential cache: every worker call verifies the credential
inside the same database call that acts, so the very next request after
`qinglong admin credential revoke` returns is refused (401 revoked_credential),
and it costs that one call and nothing else.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

from tests.py import ingress_harness
from tests.py.ingress_harness import IngressThread, make_agent, open_body, post, pull_body

ingress = ingress_harness.ingress
ingress_dsn = ingress_harness.ingress_dsn
prov = ingress_harness.prov
start_ingress_thread = ingress_harness.start_ingress_thread
su_conn = ingress_harness.su_conn
test_pki = ingress_harness.test_pki


def _db_call_counts(server: IngressThread) -> dict[str, int]:
    text = server.metrics_text()
    return {
        name: int(count)
        for name, count in re.findall(
            r'^qinglong_ingress_db_call_duration_seconds_count\{function="([a-z_]+)"\} (\d+)$',
            text,
            re.M,
        )
    }


def test_revocation_is_effective_on_the_very_next_pull(ingress, prov, test_pki, su_conn, db_dsn):
    agent = make_agent(prov, test_pki, "worker-a")
    session = post(
        ingress.port, "/v1/sessions", open_body(agent), ctx=agent.ctx, token=agent.token
    ).json
    assert (
        post(
            ingress.port,
            "/v1/offers/pull",
            pull_body(agent, session),
            ctx=agent.ctx,
            token=agent.token,
        ).status
        == 200
    )

    revoke = subprocess.run(
        [
            sys.executable,
            "-m",
            "qinglong",
            "admin",
            "credential",
            "revoke",
            "--dsn",
            db_dsn,
            "--credential-id",
            agent.worker.credential_id,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    revoked_at = time.monotonic()
    assert revoke.returncode == 0, revoke.stderr
    assert json.loads(revoke.stdout)["credentialId"] == agent.worker.credential_id

    before = _db_call_counts(ingress)
    reply = post(
        ingress.port, "/v1/offers/pull", pull_body(agent, session), ctx=agent.ctx, token=agent.token
    )
    elapsed = time.monotonic() - revoked_at
    assert (reply.status, reply.json) == (
        401,
        {"schema": "qinglong/error@v1", "error": "unauthorized", "reason": "revoked_credential"},
    )
    assert elapsed < 5.0
    # Verified in the pull's own database call: one call, no separate lookup.
    after = _db_call_counts(ingress)
    assert {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)} == {
        "pull_offer": 1
    }
    row = su_conn.execute(
        "SELECT action, outcome, reason FROM ql_private.security_audit ORDER BY id DESC LIMIT 1"
    ).fetchone()
    assert tuple(row) == ("offer.pull", "denied", "revoked_credential")

    # Every other endpoint refuses it as well.
    beat = {
        "schema": "qinglong/session-heartbeat-request@v1",
        "workerId": agent.worker_id,
        "sessionId": session["sessionId"],
        "generation": session["generation"],
    }
    for path, body in (("/v1/sessions/heartbeat", beat), ("/v1/sessions", open_body(agent))):
        refused = post(ingress.port, path, body, ctx=agent.ctx, token=agent.token)
        assert (refused.status, refused.json["reason"]) == (401, "revoked_credential"), path
