"""The producer API (SPEC §13.4) end to end: a real `qinglong api serve` process
over real TLS, a login that is a member of ql_producer only, tokens made by
`qinglong admin token create`, against real PostgreSQL."""

from __future__ import annotations

import hashlib
import json
import socket
import ssl
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from qinglong.schemas.contract import default_contract
from qinglong.throwaway_postgres import ThrowawayPostgres
from tests.py.producer_harness import ApiProcess, admin, api_login, make_token, running_api
from tests.py.provision import Provisioner, table_fingerprint


@pytest.fixture
def conn(db_dsn: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(db_dsn, autocommit=True) as connection:
        yield connection


@pytest.fixture
def api(
    tmp_path: Path, pg_cluster: ThrowawayPostgres, db_name: str, conn: psycopg.Connection
) -> Iterator[ApiProcess]:
    role = api_login(conn)
    try:
        with running_api(tmp_path, pg_cluster.dsn(db_name, user=role)) as process:
            yield process
    finally:
        conn.execute(f"DROP OWNED BY {role}")
        conn.execute(f"DROP ROLE {role}")


def _valid(schema_id: str, doc: Any) -> Any:
    default_contract().validate(schema_id, doc)
    return doc


def _error(reply: Any, status: int, reason: str, field: str | None = None) -> None:
    assert reply.status_code == status, (reply.status_code, reply.text)
    doc = _valid("qinglong/error@v1", reply.json())
    assert doc["reason"] == reason, doc
    if field is not None:
        assert doc["detail"] == {"field": field}, doc


def _fail_run(conn: psycopg.Connection, run_id: str) -> None:
    conn.execute(
        "UPDATE ql_private.attempts a SET state = 'failed', finished_at = now()"
        " FROM ql_private.runs r WHERE r.id = %s::uuid"
        " AND a.id = r.current_attempt_id",
        (run_id,),
    )
    conn.execute(
        "UPDATE ql_private.runs SET state = 'failed', finished_at = now() WHERE id = %s::uuid",
        (run_id,),
    )


def test_enqueue_show_list_cancel_retry_over_https(
    api: ApiProcess, db_dsn: str, conn: psycopg.Connection
) -> None:
    task_id = Provisioner(conn).task("build", project="acme")
    token = make_token(db_dsn, "acme")["token"]

    reply = api.request(
        "POST",
        "/v1/runs",
        token,
        body={
            "schema": "qinglong/run-enqueue-request@v1",
            "task": "acme/build",
            "count": 2,
            "priority": 7,
        },
    )
    assert reply.status_code == 201, reply.text
    created = _valid("qinglong/run-enqueued@v1", reply.json())
    assert created["existing"] is False and len(created["runIds"]) == 2
    first, second = created["runIds"]

    keyed = {
        "schema": "qinglong/run-enqueue-request@v1",
        "task": task_id,
        "key": "nightly",
        "delayMs": 60_000,
    }
    once = api.request("POST", "/v1/runs", token, body=keyed).json()
    again = api.request("POST", "/v1/runs", token, body=keyed).json()
    assert again == {**once, "existing": True}

    shown = _valid("qinglong/run@v1", api.request("GET", f"/v1/runs/{first}", token).json())
    assert shown["run"]["runId"] == first and shown["run"]["priority"] == 7
    assert shown["run"]["state"] == "queued" and shown["events"][0]["type"] == "run.queued"
    scheduled = api.request("GET", f"/v1/runs/{once['runIds'][0]}", token).json()
    assert scheduled["run"]["notBeforeMs"] > time.time() * 1000 + 50_000

    page = _valid(
        "qinglong/run-page@v1",
        api.request(
            "GET", "/v1/runs", token, params={"task": "acme/build", "state": "queued", "limit": "2"}
        ).json(),
    )
    assert [r["runId"] for r in page["runs"]] == [once["runIds"][0], second]
    assert page["next"] is not None
    rest = api.request(
        "GET", "/v1/runs", token, params={"task": task_id, "after": page["next"]}
    ).json()
    assert [r["runId"] for r in rest["runs"]] == [first] and rest["next"] is None

    cancelled = api.request("POST", f"/v1/runs/{first}/cancel", token)
    assert cancelled.status_code == 200, cancelled.text
    doc = _valid("qinglong/run@v1", cancelled.json())
    assert doc["run"]["state"] == "cancelled"
    assert doc["events"][-1]["type"] == "run.cancelled"
    retried = _valid(
        "qinglong/run@v1", api.request("POST", f"/v1/runs/{first}/retry", token, body={}).json()
    )
    assert (retried["run"]["state"], retried["run"]["attempts"]) == ("queued", 2)
    _error(api.request("POST", f"/v1/runs/{second}/retry", token), 409, "illegal_transition")

    _fail_run(conn, second)
    assert api.request("POST", f"/v1/runs/{second}/retry", token).json()["run"]["state"] == "queued"


def test_openapi_document_validates_and_matches_the_router(api: ApiProcess) -> None:
    validator = pytest.importorskip("openapi_spec_validator")
    reply = api.request("GET", "/v1/openapi.json")
    assert reply.status_code == 200
    document = reply.json()
    validator.validate(document)
    assert document["openapi"].startswith("3.1.")
    from aiohttp import web

    from qinglong.service import producer_views

    app = web.Application()
    producer_views.add_routes(app, b"{}")
    routes = {
        (r.method, r.resource.canonical) for r in app.router.routes() if r.resource is not None
    }
    documented = {(m.upper(), p) for p, item in document["paths"].items() for m in item}
    assert documented == routes


def test_tls_is_1_2_or_newer_and_asks_no_client_certificate(api: ApiProcess) -> None:
    host, port = api.url.removeprefix("https://").rsplit(":", 1)
    old = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    old.load_verify_locations(str(api.ca_file))
    with pytest.warns(DeprecationWarning):
        old.minimum_version = ssl.TLSVersion.TLSv1
        old.maximum_version = ssl.TLSVersion.TLSv1_1
    old.set_ciphers("ALL:@SECLEVEL=0")
    with socket.create_connection((host, int(port)), timeout=5) as raw:
        with pytest.raises(ssl.SSLError):
            old.wrap_socket(raw, server_hostname=host)
    tls12 = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    tls12.load_verify_locations(str(api.ca_file))
    tls12.maximum_version = ssl.TLSVersion.TLSv1_2
    with socket.create_connection((host, int(port)), timeout=5) as raw:
        with tls12.wrap_socket(raw, server_hostname=host) as tls:
            assert tls.version() == "TLSv1.2"
    with socket.create_connection((host, int(port)), timeout=5) as raw:
        raw.sendall(b"GET /v1/openapi.json HTTP/1.0\r\n\r\n")
        try:
            plain = raw.recv(64)
        except ConnectionResetError:
            plain = b""
        assert not plain.startswith(b"HTTP/")  # plaintext HTTP is never served


def test_another_projects_runs_and_tasks_are_not_found(
    api: ApiProcess, db_dsn: str, conn: psycopg.Connection
) -> None:
    provision = Provisioner(conn)
    provision.task("build", project="acme")
    b_task = provision.task("build", project="beta")
    b_runs = provision.enqueue(b_task, 2)
    _fail_run(conn, b_runs[1])
    token = make_token(db_dsn, "acme")["token"]
    before = table_fingerprint(conn)
    unknown = str(uuid.uuid4())
    for run_id in (*b_runs, unknown):
        _error(api.request("GET", f"/v1/runs/{run_id}", token), 404, "not_found", "runId")
        _error(api.request("POST", f"/v1/runs/{run_id}/cancel", token), 404, "not_found", "runId")
        _error(api.request("POST", f"/v1/runs/{run_id}/retry", token), 404, "not_found", "runId")
    for task in (b_task, "beta/build", str(uuid.uuid4()), "acme/missing"):
        _error(
            api.request(
                "POST",
                "/v1/runs",
                token,
                body={"schema": "qinglong/run-enqueue-request@v1", "task": task},
            ),
            404,
            "not_found",
            "task",
        )
        _error(
            api.request("GET", "/v1/runs", token, params={"task": task}), 404, "not_found", "task"
        )
    assert table_fingerprint(conn) == before
    own = provision.enqueue(provision.task("deploy", project="acme"), 2)
    listed = api.request("GET", "/v1/runs", token, params={"limit": "1000"}).json()
    assert [r["runId"] for r in listed["runs"]] == own[::-1]  # never beta's runs
    assert {r["project"] for r in listed["runs"]} == {"acme"} and listed["next"] is None


def test_revoked_and_expired_tokens_are_refused_at_once(
    api: ApiProcess, db_dsn: str, conn: psycopg.Connection
) -> None:
    run_id = Provisioner(conn).enqueue(Provisioner(conn).task("build", project="acme"))[0]
    made = make_token(db_dsn, "acme")
    assert api.request("GET", f"/v1/runs/{run_id}", made["token"]).status_code == 200
    revoked = admin("token", "revoke", "--dsn", db_dsn, "--token-id", made["tokenId"])
    assert revoked["revoked"] is True
    reply = api.request("GET", f"/v1/runs/{run_id}", made["token"])
    _error(reply, 401, "token_invalid")
    assert reply.headers["WWW-Authenticate"].startswith("Bearer")

    short = make_token(db_dsn, "acme", "read", expires_in="2s")
    assert short["expiresAtMs"] is not None
    assert api.request("GET", f"/v1/runs/{run_id}", short["token"]).status_code == 200
    time.sleep(max(0.0, short["expiresAtMs"] / 1000 - time.time()) + 0.2)
    _error(api.request("GET", f"/v1/runs/{run_id}", short["token"]), 401, "token_invalid")

    _error(api.request("GET", f"/v1/runs/{run_id}"), 401, "token_missing")
    good = make_token(db_dsn, "acme")["token"]
    wrong_secret = good[:-4] + ("AAAA" if not good.endswith("AAAA") else "BBBA")
    for bad in (wrong_secret, "qlp_short", good + "x", "ql3w_" + good[4:]):
        _error(api.request("GET", f"/v1/runs/{run_id}", bad), 401, "token_invalid")
    listed = admin("token", "list", "--dsn", db_dsn, "--project", "acme")["tokens"]
    states = {t["tokenId"]: t["state"] for t in listed}
    assert states[made["tokenId"]] == "revoked" and states[short["tokenId"]] == "expired"


def test_a_missing_scope_is_403_and_writes_nothing(
    api: ApiProcess, db_dsn: str, conn: psycopg.Connection
) -> None:
    task_id = Provisioner(conn).task("build", project="acme")
    run_id = Provisioner(conn).enqueue(task_id)[0]
    reader = make_token(db_dsn, "acme", "read")["token"]
    enqueuer = make_token(db_dsn, "acme", "enqueue")["token"]
    before = table_fingerprint(conn)
    enqueue = {"schema": "qinglong/run-enqueue-request@v1", "task": "acme/build"}
    _error(api.request("POST", "/v1/runs", reader, body=enqueue), 403, "scope_missing")
    _error(api.request("POST", f"/v1/runs/{run_id}/cancel", reader), 403, "scope_missing")
    _error(api.request("POST", f"/v1/runs/{run_id}/retry", reader), 403, "scope_missing")
    _error(api.request("GET", f"/v1/runs/{run_id}", enqueuer), 403, "scope_missing")
    _error(api.request("GET", "/v1/runs", enqueuer, params={"task": task_id}), 403, "scope_missing")
    assert table_fingerprint(conn) == before
    assert api.request("GET", f"/v1/runs/{run_id}", reader).status_code == 200


ENQUEUE = {"schema": "qinglong/run-enqueue-request@v1", "task": "acme/build"}
BAD_BODIES: list[tuple[Any, str, str | None]] = [
    ({**ENQUEUE, "count": 0}, "invalid_input", "count"),
    ({**ENQUEUE, "count": 10001}, "invalid_input", "count"),
    ({**ENQUEUE, "count": "2"}, "invalid_input", "count"),
    ({**ENQUEUE, "priority": 40000}, "invalid_input", "priority"),
    ({**ENQUEUE, "delayMs": -1}, "invalid_input", "delayMs"),
    ({**ENQUEUE, "delayMs": 5, "notBeforeMs": 5}, "invalid_input", "delayMs"),
    ({**ENQUEUE, "notBeforeMs": 9_000_000_000_000_000}, "out_of_bounds", "notBeforeMs"),
    ({**ENQUEUE, "key": "k", "count": 2}, "invalid_input", "key"),
    ({**ENQUEUE, "key": ""}, "invalid_input", "key"),
    ({**ENQUEUE, "task": "not a task"}, "invalid_input", "task"),
    ({"schema": "qinglong/run-enqueue-request@v1"}, "invalid_input", "task"),
    ({**ENQUEUE, "countt": 1}, "invalid_input", "countt"),
    ({**ENQUEUE, "schema": "qinglong/run-enqueue-request@v2"}, "invalid_input", "schema"),
    ([ENQUEUE], "invalid_input", None),
]


def test_bad_bodies_are_400_naming_the_field_and_write_nothing(
    api: ApiProcess, db_dsn: str, conn: psycopg.Connection
) -> None:
    task_id = Provisioner(conn).task("build", project="acme")
    run_id = Provisioner(conn).enqueue(task_id)[0]
    token = make_token(db_dsn, "acme")["token"]
    before = table_fingerprint(conn)
    for body, reason, field in BAD_BODIES:
        reply = api.request("POST", "/v1/runs", token, body=body)
        _error(reply, 400, reason, field)
        if field is None:
            assert "detail" not in reply.json()
    raw = [
        (
            b'{"schema":"qinglong/run-enqueue-request@v1","task":"acme/build","task":"x"}',
            "duplicate_key",
        ),
        (b"{not json", "invalid_json"),
        (b"", "invalid_json"),
    ]
    for data, reason in raw:
        _error(api.request("POST", "/v1/runs", token, data=data), 400, reason)
    _error(
        api.request("POST", "/v1/runs", token, data=b"{" + b" " * 9000 + b"}"),
        413,
        "body_too_large",
    )
    _error(
        api.request("POST", f"/v1/runs/{run_id}/cancel", token, body={"force": True}),
        400,
        "invalid_input",
        "force",
    )
    _error(api.request("POST", f"/v1/runs/{run_id}/retry", token, data=b"[]"), 400, "invalid_input")
    _error(api.request("GET", "/v1/runs/not-a-uuid", token), 400, "invalid_input", "runId")
    for params, field in (
        ({"task": task_id, "limit": "abc"}, "limit"),
        ({"task": task_id, "limit": "0"}, "limit"),
        ({"task": task_id, "state": "bogus"}, "state"),
        ({"task": task_id, "after": "x"}, "after"),
        ({"task": task_id, "sort": "asc"}, "sort"),
        ({"state": "bogus"}, "state"),
    ):
        _error(
            api.request("GET", "/v1/runs", token, params=params),
            400,
            "out_of_bounds" if params.get("limit") == "0" else "invalid_input",
            field,
        )
    assert table_fingerprint(conn) == before
    _error(api.request("GET", "/v1/nothing", token), 404, "unknown_route")
    _error(api.request("DELETE", "/v1/runs", token), 405, "method_not_allowed")


def test_tokens_are_stored_as_digests_only_and_never_logged_or_echoed(
    api: ApiProcess, db_dsn: str, conn: psycopg.Connection
) -> None:
    run_id = Provisioner(conn).enqueue(Provisioner(conn).task("build", project="acme"))[0]
    made = make_token(db_dsn, "acme")
    token = made["token"]
    assert set(made) == {"tokenId", "token", "project", "scopes", "expiresAtMs"}
    assert token.startswith(f"qlp_{made['tokenId']}_") and len(token) == 4 + 16 + 1 + 43
    stored = conn.execute(
        "SELECT token_digest FROM ql_private.project_tokens WHERE id = %s", (made["tokenId"],)
    ).fetchone()
    assert stored == (hashlib.sha256(token.encode()).digest(),)
    revoked = make_token(db_dsn, "acme")
    admin("token", "revoke", "--dsn", db_dsn, "--token-id", revoked["tokenId"])
    bodies = [
        api.request("GET", f"/v1/runs/{run_id}", token).text,
        api.request("POST", f"/v1/runs/{run_id}/cancel", token).text,
        api.request("GET", f"/v1/runs/{run_id}", revoked["token"]).text,
        api.request("GET", f"/v1/runs/{run_id}", token[:-1] + "A").text,
        api.request("POST", "/v1/runs", token, body={**ENQUEUE, "count": 0}).text,
        json.dumps(admin("token", "list", "--dsn", db_dsn)),
    ]
    dump = "\n".join(
        str(row)
        for table in table_fingerprint(conn)
        for row in conn.execute(f"SELECT t::text FROM ql_private.{table} t").fetchall()
    )
    logs = api.logs()
    assert '"stream":"audit"' in logs and made["tokenId"] in logs
    for secret in (token, revoked["token"], token[:-1] + "A"):
        tail = secret.rsplit("_", 1)[1]
        digest = hashlib.sha256(secret.encode()).hexdigest()
        assert tail not in dump  # the digest is what the table holds
        for place in (logs, *bodies):
            assert tail not in place and digest not in place


def test_database_down_is_503_with_retry_after(tmp_path: Path) -> None:
    from qinglong.service.producer_token import generate_token
    from qinglong.throwaway_postgres import free_loopback_port

    dead = f"host=127.0.0.1 port={free_loopback_port()} dbname=none user=none connect_timeout=1"
    with running_api(tmp_path, dead, acquireTimeoutMs=500) as api:
        token = generate_token().token
        reply = api.request("GET", f"/v1/runs/{uuid.uuid4()}", token)
        _error(reply, 503, "database_unavailable")
        assert int(reply.headers["Retry-After"]) >= 1
        _error(api.request("POST", "/v1/runs", token, body=ENQUEUE), 503, "database_unavailable")


def test_admin_token_create_refuses_bad_input_naming_the_field(
    db_dsn: str, conn: psycopg.Connection
) -> None:
    import subprocess
    import sys

    for args, field in (
        (["--scope", "read,admin"], "scope"),
        (["--scope", ""], "scope"),
        (["--scope", "read", "--expires-in", "soon"], "expiresIn"),
        (["--scope", "read", "--project", "a/b"], "project"),
    ):
        argv = ["token", "create", "--dsn", db_dsn, "--project", "acme", *args]
        done = subprocess.run(
            [sys.executable, "-m", "qinglong", "admin", *argv],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2, (args, done.stderr)
        assert json.loads(done.stderr.strip().splitlines()[-1])["field"] == field
    assert conn.execute("SELECT count(*) FROM ql_private.project_tokens").fetchone() == (0,)


def test_several_processes_share_the_port(
    tmp_path: Path,
    pg_cluster: ThrowawayPostgres,
    db_name: str,
    db_dsn: str,
    conn: psycopg.Connection,
) -> None:
    run_id = Provisioner(conn).enqueue(Provisioner(conn).task("build", project="acme"))[0]
    token = make_token(db_dsn, "acme", "read")["token"]
    role = api_login(conn)
    try:
        with running_api(tmp_path, pg_cluster.dsn(db_name, user=role), processes=2) as api:
            ready = json.loads((tmp_path / "api-ready.json").read_text())
            assert ready["processes"] == 2 and len(set(ready["childPids"])) == 2
            assert len(ready["adminUrls"]) == 2
            for _ in range(6):
                assert api.request("GET", f"/v1/runs/{run_id}", token).status_code == 200
    finally:
        conn.execute(f"DROP OWNED BY {role}")
        conn.execute(f"DROP ROLE {role}")


def test_a_run_a_worker_ran_shows_its_attempt_result_and_events(
    api: ApiProcess, db_dsn: str, conn: psycopg.Connection
) -> None:
    """The show document of a run that went through claim, ACKs and a failed
    completion with a result: every field the worker path writes fits run@v1."""
    from qinglong.db import api as db
    from tests.py.provision import Intent

    provision = Provisioner(conn)
    run_id = provision.enqueue(provision.task("build", project="acme"))[0]
    session = provision.session(provision.worker("w1"))
    intent = Intent()
    offer = provision.pull(session, intent)
    assert offer["status"] == "offered", offer
    version = offer["offer"]["lease"]["leaseVersion"]
    for phase in ("starting", "running"):
        version = provision.call(
            db.ack_lease(**session.lease(intent), lease_version=version, phase=phase)
        ).lease["leaseVersion"]
    result = {"exitCode": 3, "durationMs": 12, "outputTail": "boom\n", "outputBytes": 5}
    provision.call(
        db.complete_lease(
            **session.lease(intent),
            lease_version=version,
            outcome="failed",
            exit_code=3,
            reason="nonzero_exit",
            result=result,
        )
    )
    token = make_token(db_dsn, "acme", "read")["token"]
    shown = _valid("qinglong/run@v1", api.request("GET", f"/v1/runs/{run_id}", token).json())
    first = shown["attempts"][0]
    assert (first["state"], first["exitCode"], first["result"]) == ("failed", 3, result)
    assert first["workerId"] == session.worker.worker_id and first["startedAtMs"] is not None
    types = [event["type"] for event in shown["events"]]
    assert "run.queued" in types and len(types) >= 3, types
    assert shown == {"schema": "qinglong/run@v1", **db.show_run(run_id=run_id).run(conn).doc}
