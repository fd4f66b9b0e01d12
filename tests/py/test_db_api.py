"""`qinglong.db.api` is the whole Python -> SQL boundary and matches `pg_proc` exactly.

Adding, renaming or reordering a `ql.` function or one of its parameters without
the API module following fails here: every `ql.` function has exactly one
statement and one typed Python function of the same name, whose SQL names every
parameter in order with its declared type, and whose keyword-only arguments are
those parameters without `p_`, in the same order, optional exactly where the SQL
has a default. A scan of the sources proves no other Python code calls a `ql.`
function with hand-built SQL.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
import secrets as secrets_module
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from qinglong.db import answers, api
from qinglong.service.compiler import compile_command
from tests.py.provision import Intent, Provisioner, command

ROOT = Path(__file__).resolve().parents[2]
CALL = re.compile(r"^SELECT ql\.(?P<function>[a-z_]+)\((?P<args>.*)\)$")
ARG = re.compile(r"^p_(?P<name>[a-z_]+) => %\((?P<key>[a-z_]+)\)s::(?P<type>[a-z ]+(?:\[\])?)$")


@dataclass(frozen=True)
class SqlSignature:
    names: tuple[str, ...]
    types: tuple[str, ...]
    defaults: int


def _catalog(dsn: str) -> dict[str, SqlSignature]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT p.proname, coalesce(p.proargnames, '{}'::text[]),"
            "       array(SELECT format_type(t, NULL) FROM unnest(p.proargtypes::oid[]) t),"
            "       p.pronargdefaults, coalesce(p.proargmodes, '{}'::\"char\"[])::text[]"
            "  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
            " WHERE n.nspname = 'ql' ORDER BY 1"
        ).fetchall()
    names = [row[0] for row in rows]
    assert len(names) == len(set(names)), f"overloaded ql. functions: {names}"
    for name, _, _, _, modes in rows:
        assert set(modes) <= {"i"}, f"ql.{name} has OUT/INOUT/VARIADIC parameters: {modes}"
    return {
        name: SqlSignature(tuple(argnames), tuple(types), defaults)
        for name, argnames, types, defaults, _ in rows
    }


def _parsed(statement: api.Statement[Any]) -> tuple[str, list[re.Match[str]]]:
    match = CALL.match(statement.sql)
    assert match is not None, statement.sql
    args = match["args"]
    parsed = [ARG.match(part) for part in args.split(", ")] if args else []
    assert all(parsed), f"{statement.function}: every argument is p_x => %(x)s::type"
    return match["function"], parsed  # type: ignore[return-value]


@pytest.fixture(scope="module")
def catalog(pg_cluster: Any, migrated_template: str) -> dict[str, SqlSignature]:
    return _catalog(pg_cluster.dsn(migrated_template))


def test_every_ql_function_has_exactly_one_statement(catalog: dict[str, SqlSignature]) -> None:
    statements = api.statements()
    assert sorted(statements) == sorted(catalog), (
        f"only in SQL: {sorted(set(catalog) - set(statements))}; "
        f"only in the API module: {sorted(set(statements) - set(catalog))}"
    )


def test_statements_name_every_parameter_in_order_with_its_type(
    catalog: dict[str, SqlSignature],
) -> None:
    for name, statement in api.statements().items():
        function, args = _parsed(statement)
        assert function == name
        sql = catalog[name]
        assert tuple(f"p_{a['name']}" for a in args) == sql.names, name
        assert tuple(a["type"] for a in args) == sql.types, name
        assert all(a["key"] == a["name"] for a in args), name


def test_python_functions_take_the_parameters_keyword_only(
    catalog: dict[str, SqlSignature],
) -> None:
    for name, statement in api.statements().items():
        function = getattr(api, name)
        params = list(inspect.signature(function).parameters.values())
        assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params), name
        sql = catalog[name]
        assert tuple(f"p_{p.name}" for p in params) == sql.names, name
        optional = [p.name for p in params if p.default is not inspect.Parameter.empty]
        assert optional == [p.name for p in params[len(params) - sql.defaults :]], name
        # Built with placeholder values, the call binds exactly the statement's keys.
        call = function(**{p.name: _sample(t) for p, t in zip(params, sql.types, strict=True)})
        assert call.statement is statement
        assert list(call.params) == [a["key"] for a in _parsed(statement)[1]], name


def _sample(sql_type: str) -> Any:
    return {
        "text": "x",
        "bytea": b"x",
        "bigint": 1,
        "integer": 1,
        "jsonb": {},
        "uuid": "x",
        "boolean": True,
        "text[]": ["x"],
        "bytea[]": [b"x"],
    }[sql_type]


def test_the_check_catches_a_renamed_parameter(catalog: dict[str, SqlSignature]) -> None:
    """The comparison is not vacuous: a catalog where one parameter moved fails it."""
    sql = catalog["pull_offer"]
    swapped = (sql.names[1], sql.names[0], *sql.names[2:])
    broken = {**catalog, "pull_offer": SqlSignature(swapped, sql.types, sql.defaults)}
    with pytest.raises(AssertionError):
        test_statements_name_every_parameter_in_order_with_its_type(broken)
    with pytest.raises(AssertionError):
        test_every_ql_function_has_exactly_one_statement({**catalog, "new_fn": sql})


# A `ql.` function call written as SQL text anywhere else in Python.
HAND_BUILT = re.compile(r"\bSELECT\b[^;]*?\bql\.[a-z_]+\(", re.IGNORECASE | re.DOTALL)


def _python_sources() -> list[Path]:
    folders = ("db", "service", "worker", "schemas", "qinglong", "tools", "tests")
    return sorted(
        p
        for folder in folders
        for p in (ROOT / folder).rglob("*.py")
        if "__pycache__" not in p.parts
    )


def test_no_python_outside_the_api_module_calls_ql_functions_in_sql() -> None:
    offenders = []
    for path in _python_sources():
        if path == ROOT / "db" / "api.py":
            continue
        tree = ast.parse(path.read_text(), str(path))
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docstrings
                and HAND_BUILT.search(node.value)
            ):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == [], "use qinglong.db.api: " + ", ".join(offenders)


def test_a_call_never_shows_its_parameters() -> None:
    """Calls carry secret and token digests: their repr (logs, tracebacks) must not."""
    secret, token = bytes(range(32)), bytes(range(32, 64))
    call = api.pull_offer(
        credential_id="c" * 16,
        secret_digest=secret,
        worker_id="w",
        session_id="s",
        generation=1,
        offer_id="o",
        token_digest=token,
    )
    shown = repr(call) + str(call)
    assert call.params["secret_digest"] == secret
    for value in (secret, token):
        assert repr(value) not in shown and value.hex() not in shown


# ------------------------------------------------------------ typed answers

# Functions whose answer is not a class of `qinglong.db.answers`: none now. The
# list only shrinks: a function added untyped must be named here, on purpose.
UNTYPED: frozenset[str] = frozenset()
NO_ANSWER = frozenset({"record_auth_denial"})  # returns void


def _answer_type(name: str) -> Any:
    hints = typing.get_type_hints(getattr(api, name), vars(api))
    call = hints["return"]
    assert typing.get_origin(call) is api.Call, name
    (answer,) = typing.get_args(call)
    return answer


def _is_typed(answer: Any) -> bool:
    """A dataclass of `qinglong.db.answers` (defined or re-exported there), a union
    of them, or a list of one."""
    if typing.get_origin(answer) is list:
        return all(_is_typed(arg) for arg in typing.get_args(answer))
    if typing.get_origin(answer) in (typing.Union, types.UnionType):
        return all(_is_typed(arg) for arg in typing.get_args(answer))
    return (
        isinstance(answer, type)
        and dataclasses.is_dataclass(answer)
        and getattr(answers, answer.__name__, None) is answer
    )


def test_every_function_but_the_listed_ones_answers_a_typed_result() -> None:
    statements = api.statements()
    assert UNTYPED | NO_ANSWER <= set(statements), sorted(UNTYPED - set(statements))
    for name, statement in statements.items():
        answer = _answer_type(name)
        if name in NO_ANSWER:
            assert answer is type(None) and statement.parse is None, name
        elif name in UNTYPED:
            assert not _is_typed(answer) and statement.parse is None, (
                f"{name} is typed now: take it off UNTYPED"
            )
        else:
            assert _is_typed(answer), f"{name} answers {answer}: not a typed result"
            assert statement.parse is not None, f"{name} has no parser"


def test_the_typed_check_is_not_vacuous() -> None:
    assert not _is_typed(dict[str, Any]) and not _is_typed(Any)
    assert _is_typed(answers.PullAnswer) and _is_typed(list[answers.HeartbeatItemAnswer])


@pytest.fixture
def worker_conn(pg_cluster: Any, db_name: str) -> Any:
    with psycopg.connect(pg_cluster.dsn(db_name), autocommit=True) as conn:
        yield conn


def test_the_worker_calls_answer_their_typed_outcomes(worker_conn: psycopg.Connection) -> None:
    """Each typed answer parses what its function really returns (main outcomes)."""
    prov = Provisioner(worker_conn)
    worker = prov.worker()
    session = prov.session(worker)
    fence = session.fence()

    auth = api.authenticate_worker(
        credential_id=worker.credential_id,
        secret_digest=worker.secret_digest,
        worker_id=worker.worker_id,
        action="session.open",
    ).run(worker_conn)
    assert isinstance(auth, answers.Authenticated) and auth.doc == {"status": "ok"}
    beat = api.heartbeat_session(**fence).run(worker_conn)
    assert (
        isinstance(beat, answers.SessionOk)
        and beat.session["sessionId"] == session.session_id
        and beat.draining is False
    )
    (item,) = api.heartbeat_sessions(
        items=[
            {
                "credentialId": worker.credential_id,
                "secretDigest": worker.secret_digest.hex(),
                "workerId": worker.worker_id,
                "sessionId": session.session_id,
                "generation": session.generation,
            }
        ]
    ).run(worker_conn)
    assert isinstance(item, answers.SessionOk)

    idle = api.pull_offer(**session.lease(Intent())).run(worker_conn)
    assert isinstance(idle, answers.Idle) and idle.status == "idle"
    prov.enqueue(prov.task("t"), count=3)
    intent = Intent()
    offered = api.pull_offer(**session.lease(intent)).run(worker_conn)
    assert isinstance(offered, answers.Offered) and not offered.replayed
    assert offered.offer == offered.doc["offer"] and offered.offer["offerId"] == intent.offer_id
    replay = api.pull_offer(**session.lease(intent)).run(worker_conn)
    assert isinstance(replay, answers.Offered) and replay.replayed
    batch = api.pull_offers(
        **fence, offer_ids=[Intent().offer_id], token_digests=[Intent().token_digest]
    ).run(worker_conn)
    assert isinstance(batch, answers.PulledBatch) and len(batch.offers) == 1

    lease = session.lease(intent)
    secrets = api.lease_secrets(**lease, lease_version=1).run(worker_conn)
    assert isinstance(secrets, answers.Conflict) and secrets.category == "not_started"
    acked = api.ack_lease(**lease, lease_version=1, phase="starting").run(worker_conn)
    assert isinstance(acked, answers.LeaseOk) and acked.lease["leaseVersion"] == 2
    stale = api.ack_lease(**lease, lease_version=1, phase="running").run(worker_conn)
    assert isinstance(stale, answers.Conflict)
    beat_lease = api.heartbeat_lease(**lease, lease_version=2).run(worker_conn)
    assert isinstance(beat_lease, answers.LeaseOk)
    version = beat_lease.lease["leaseVersion"]
    logged = api.append_log(**lease, lease_version=version, offset=0, chunk="hello").run(
        worker_conn
    )
    assert isinstance(logged, answers.LogAppended) and logged.stored_bytes == 5
    behind = api.append_log(**lease, lease_version=version, offset=9, chunk="x").run(worker_conn)
    assert isinstance(behind, answers.Conflict) and behind.stored_bytes == 5
    done = api.complete_lease(**lease, lease_version=version, outcome="succeeded", exit_code=0).run(
        worker_conn
    )
    assert isinstance(done, answers.LeaseOk) and done.status == "ok"
    run_id = offered.offer["candidate"]["runId"]
    page = api.run_log(run_id=run_id).run(worker_conn)
    assert isinstance(page, answers.LogPage) and (page.text, page.ended) == ("hello", True)
    from qinglong.service.producer_token import generate_token

    token = generate_token()
    api.create_project_token(
        project="p", token_id=token.token_id, token_digest=token.digest, scopes=["log"]
    ).run(worker_conn)
    produced = api.producer_run_log(
        token_id=token.token_id, token_digest=token.digest, run_id=run_id, offset=2
    ).run(worker_conn)
    assert isinstance(produced, answers.LogPage) and produced.text == "llo"

    closed = api.close_session(**fence).run(worker_conn)
    assert isinstance(closed, answers.SessionOk)
    new_id = "".join(secrets_module.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(16))
    rotated = api.rotate_credential(
        credential_id=worker.credential_id,
        secret_digest=worker.secret_digest,
        worker_id=worker.worker_id,
        new_credential_id=new_id,
        new_secret_digest=bytes(32),
    ).run(worker_conn)
    assert isinstance(rotated, answers.Rotated) and rotated.credential["credentialId"] == new_id
    denied = api.heartbeat_session(**{**fence, "secret_digest": bytes(32)}).run(worker_conn)
    assert isinstance(denied, answers.Denied) and denied.http_status in (401, 403)


def test_an_answer_of_another_shape_is_refused_by_name() -> None:
    for raw in (
        None,
        [],
        {"status": 1},
        {"status": "surprise"},
        {"status": "offered"},
        {"status": "offered", "offer": []},
    ):
        with pytest.raises(answers.AnswerError) as caught:
            answers.parse_pull(raw)
        assert caught.value.function == "pull_offer"
    with pytest.raises(answers.AnswerError):
        answers.parse_append_log({"status": "ok", "storedBytes": True, "truncated": False})
    with pytest.raises(answers.AnswerError) as caught:
        answers.parse_run_log({"runId": "r"})
    assert caught.value.function == "run_log"


def test_the_operator_calls_answer_their_typed_documents(worker_conn: psycopg.Connection) -> None:
    """register, issue, prepare, publish, enqueue (and the producer's), sweep, prune."""
    from qinglong.service.producer_token import generate_token

    prov = Provisioner(worker_conn)
    registered = api.register_worker(name="typed").run(worker_conn)
    assert isinstance(registered, answers.WorkerRegistered)
    assert registered.doc == {"workerId": registered.worker_id}
    issued = api.issue_credential(
        worker_id=registered.worker_id, credential_id="c" * 16, secret_digest=bytes(32), ttl_s=60
    ).run(worker_conn)
    assert isinstance(issued, answers.CredentialIssued)
    assert (issued.credential_id, issued.worker_id) == ("c" * 16, registered.worker_id)
    assert issued.expires_at_ms == issued.doc["expiresAtMs"] and issued.expires_at_ms > 0
    prepared = api.prepare_task(project="p", task="typed").run(worker_conn)
    assert isinstance(prepared, answers.TaskPrepared) and prepared.created
    canonical = compile_command(command()).canonical
    published = api.publish_revision(project="p", task="typed", canonical=canonical).run(
        worker_conn
    )
    assert isinstance(published, answers.RevisionPublished) and published.created
    assert published.task_id == prepared.task_id
    assert published.content_digest == published.doc["contentDigest"]
    again = api.publish_revision(project="p", task="typed", canonical=canonical).run(worker_conn)
    assert isinstance(again, answers.RevisionPublished) and not again.created
    enqueued = api.enqueue_runs(task_id=published.task_id, priority=0, count=2, key=None).run(
        worker_conn
    )
    assert isinstance(enqueued, answers.RunsEnqueued) and len(enqueued.run_ids) == 2
    assert not enqueued.existing
    token = generate_token()
    api.create_project_token(
        project="p", token_id=token.token_id, token_digest=token.digest, scopes=["enqueue"]
    ).run(worker_conn)
    produced = api.producer_enqueue(
        token_id=token.token_id, token_digest=token.digest, task="p/typed", key="once"
    ).run(worker_conn)
    assert isinstance(produced, answers.RunsEnqueued) and len(produced.run_ids) == 1
    replayed = api.producer_enqueue(
        token_id=token.token_id, token_digest=token.digest, task="p/typed", key="once"
    ).run(worker_conn)
    assert replayed.existing and replayed.run_ids == produced.run_ids

    swept = api.sweep_leases(batch=10).run(worker_conn)
    assert isinstance(swept, answers.Swept) and set(swept.counts) == set(answers.SWEPT)
    assert swept.more is False and swept.counts == {k: swept.doc[k] for k in answers.SWEPT}
    runs = api.prune_runs(retain_s=0, dry_run=True).run(worker_conn)
    assert isinstance(runs, answers.RunsPruned) and runs.runs == 0 and not runs.more
    audit = api.prune_audit(retain_s=0, dry_run=True).run(worker_conn)
    assert isinstance(audit, answers.AuditPruned)
    assert audit.security_audit == audit.doc["securityAudit"]
    fleet = api.prune_fleet(retain_s=0, dry_run=True).run(worker_conn)
    assert isinstance(fleet, answers.FleetPruned)
    assert fleet.placement_classes == fleet.doc["placementClasses"]
    assert prov.enqueue(published.task_id) != []  # the provisioning helper reads them too


def test_the_secret_and_certificate_calls_answer_their_typed_documents(
    worker_conn: psycopg.Connection,
) -> None:
    """Wrapped keys and ciphertexts only (placeholders here: the database never
    opens them); revoked serials and expiring counts as the ingress reads them."""
    data_key_id = "0" * 32
    key = api.project_data_key(
        project="p", key_id=data_key_id, kek_id="kek", nonce=bytes(12), wrapped_key=bytes(48)
    ).run(worker_conn)
    assert isinstance(key, answers.DataKeyStored) and key.created
    assert key.project_id == key.doc["projectId"] and key.doc["keyId"] == data_key_id
    stored = api.set_secret(
        project="p", name="db", version=1, key_id=data_key_id, nonce=bytes(12), ciphertext=bytes(40)
    ).run(worker_conn)
    assert isinstance(stored, answers.SecretVersion) and (stored.name, stored.version) == ("db", 1)
    listed = api.list_secrets(project="p").run(worker_conn)
    assert isinstance(listed, answers.SecretList)
    assert listed.secrets == [answers.SecretListed("db", 1)] and listed.version_of("db") == 1
    assert listed.version_of("other") == 0
    keys = api.list_data_keys().run(worker_conn)
    assert isinstance(keys, answers.DataKeys) and [k["keyId"] for k in keys.keys] == [data_key_id]
    rewrapped = api.rewrap_data_keys(
        old_kek_id="kek",
        new_kek_id="kek2",
        keys=[{"keyId": data_key_id, "nonce": bytes(12).hex(), "wrappedKey": bytes(48).hex()}],
    ).run(worker_conn)
    assert isinstance(rewrapped, answers.KeysRewrapped) and rewrapped.rewrapped == 1
    deleted = api.delete_secret(project="p", name="db").run(worker_conn)
    assert isinstance(deleted, answers.SecretVersion) and deleted.doc["deleted"] is True

    counts = api.expiring_counts(within_s=86400).run(worker_conn)
    assert isinstance(counts, answers.ExpiringCounts)
    assert (counts.credentials, counts.certificates) == (0, 0)
    worker = api.register_worker(name="revoked").run(worker_conn)
    api.record_certificate(
        worker_id=worker.worker_id, serial="1a2b", not_after_ms=4102444800000
    ).run(worker_conn)
    api.revoke_certificate(serial="1A:2B").run(worker_conn)
    page = api.revoked_certificates(after_seq=0, limit=10).run(worker_conn)
    assert isinstance(page, answers.RevokedSerials) and page.serials == ["1a2b"]
    assert page.last_seq == page.doc["lastSeq"] and page.last_seq > 0


def test_the_worker_and_pool_calls_answer_their_typed_documents(
    worker_conn: psycopg.Connection,
) -> None:
    prov = Provisioner(worker_conn)
    worker = prov.worker(all_pools=False)
    session = prov.session(worker)
    created = api.create_pool(project="acme", name="a").run(worker_conn)
    assert isinstance(created, answers.PoolCreated) and created.created
    assert (created.project, created.name, created.pool_id) == ("acme", "a", created.doc["poolId"])
    granted = api.grant_pool(worker_id=worker.worker_id, pool="acme/a").run(worker_conn)
    assert isinstance(granted, answers.PoolGranted) and granted.granted
    revoked = api.revoke_pool(worker_id=worker.worker_id, pool="acme/a").run(worker_conn)
    assert isinstance(revoked, answers.PoolRevoked) and revoked.revoked
    assert revoked.leases_released == 0
    labelled = api.label_worker(worker_id=worker.worker_id, labels={"zone": "z1"}).run(worker_conn)
    assert isinstance(labelled, answers.WorkerLabelled) and labelled.labels == {"zone": "z1"}
    ended = api.end_session(session_id=session.session_id, drain=True).run(worker_conn)
    assert isinstance(ended, answers.SessionEnded) and ended.session_id == session.session_id
    assert ended.state in ("closed", "draining") and ended.doc["drain"] is True
    disabled = api.disable_worker(worker_id=worker.worker_id).run(worker_conn)
    assert isinstance(disabled, answers.WorkerDisabled) and disabled.doc["disabled"] is True
    assert (disabled.worker_id, disabled.drain) == (worker.worker_id, False)
    enabled = api.enable_worker(worker_id=worker.worker_id).run(worker_conn)
    assert isinstance(enabled, answers.WorkerEnabled) and enabled.doc["disabled"] is False


def test_the_task_run_and_identity_calls_answer_their_typed_documents(
    worker_conn: psycopg.Connection,
) -> None:
    from qinglong.service.producer_token import generate_token

    prov = Provisioner(worker_conn)
    task_id = prov.task("typed")
    policy = api.configure_task(task_id=task_id, max_attempts=3).run(worker_conn)
    assert isinstance(policy, answers.TaskPolicy) and policy.max_attempts == 3
    read = api.task_settings(task_id=task_id).run(worker_conn)
    assert read == policy and read.lease_ttl_s == read.doc["leaseTtlS"]
    first = prov.enqueue(task_id, count=3)[0]
    cancelled = api.cancel_run(run_id=first).run(worker_conn)
    assert isinstance(cancelled, answers.RunCancel) and cancelled.state == "cancelled"
    assert (cancelled.run_id, cancelled.cancel_requested) == (
        first,
        cancelled.doc["cancelRequested"],
    )
    retried = api.retry_run(run_id=first).run(worker_conn)
    assert isinstance(retried, answers.RunRetried) and (retried.state, retried.attempt_no) == (
        "queued",
        2,
    )
    bulk = api.cancel_runs(task_id=task_id, state="queued").run(worker_conn)
    assert isinstance(bulk, answers.RunsCancelled) and bulk.cancelled == 3
    assert bulk.not_cancelled == [] and bulk.doc["cancelled"] == 3

    worker = prov.worker()
    revoked = api.revoke_credential(credential_id=worker.credential_id).run(worker_conn)
    assert isinstance(revoked, answers.CredentialRevoked) and revoked.revoked_at_ms > 0
    recorded = api.record_certificate(
        worker_id=worker.worker_id, serial="2b3c", not_after_ms=4102444800000
    ).run(worker_conn)
    assert isinstance(recorded, answers.CertificateRecorded) and recorded.serial == "2b3c"
    cert = api.revoke_certificate(serial="2B:3C").run(worker_conn)
    assert isinstance(cert, answers.CertificateRevoked) and cert.revoked
    assert cert.worker_id == worker.worker_id
    token = generate_token()
    made = api.create_project_token(
        project="p", token_id=token.token_id, token_digest=token.digest, scopes=["read", "log"]
    ).run(worker_conn)
    assert isinstance(made, answers.ProjectTokenCreated) and made.token_id == token.token_id
    assert sorted(made.scopes) == ["log", "read"] and made.project == "p"
    gone = api.revoke_project_token(token_id=token.token_id).run(worker_conn)
    assert isinstance(gone, answers.ProjectTokenRevoked) and gone.revoked


def test_the_run_reads_answer_their_typed_documents(worker_conn: psycopg.Connection) -> None:
    from qinglong.service.producer_token import generate_token

    prov = Provisioner(worker_conn)
    task_id = prov.task("typed")
    run_ids = prov.enqueue(task_id, count=3)
    page = api.list_runs(task_id=task_id, limit=2).run(worker_conn)
    assert isinstance(page, answers.RunPage) and len(page.runs) == 2 and page.next
    rest = api.list_runs(task_id=task_id, limit=2, after=page.next).run(worker_conn)
    assert len(rest.runs) == 1 and rest.next is None
    assert sorted(r["runId"] for r in page.runs + rest.runs) == sorted(run_ids)
    shown = api.show_run(run_id=run_ids[0]).run(worker_conn)
    assert isinstance(shown, answers.RunShown) and shown.run["runId"] == run_ids[0]
    assert shown.attempts == shown.doc["attempts"] and shown.events == shown.doc["events"]
    token = generate_token()
    api.create_project_token(
        project="p",
        token_id=token.token_id,
        token_digest=token.digest,
        scopes=["read", "cancel", "retry"],
    ).run(worker_conn)
    proof = {"token_id": token.token_id, "token_digest": token.digest}
    listed = api.producer_list_runs(**proof, task="p/typed").run(worker_conn)
    assert isinstance(listed, answers.RunPage) and len(listed.runs) == 3
    seen = api.producer_show_run(**proof, run_id=run_ids[1]).run(worker_conn)
    assert isinstance(seen, answers.RunShown) and seen.run["runId"] == run_ids[1]
    cancelled = api.producer_cancel_run(**proof, run_id=run_ids[1]).run(worker_conn)
    assert isinstance(cancelled, answers.RunShown) and cancelled.run["state"] == "cancelled"
    retried = api.producer_retry_run(**proof, run_id=run_ids[1]).run(worker_conn)
    assert isinstance(retried, answers.RunShown) and retried.run["state"] == "queued"


def test_the_fleet_and_queue_reads_answer_their_typed_documents(
    worker_conn: psycopg.Connection,
) -> None:
    from qinglong.service.producer_token import generate_token

    prov = Provisioner(worker_conn)
    worker = prov.worker()
    prov.session(worker)
    prov.enqueue(prov.task("typed"), count=2)
    token = generate_token()
    api.create_project_token(
        project="p", token_id=token.token_id, token_digest=token.digest, scopes=["read"]
    ).run(worker_conn)
    workers = api.list_workers().run(worker_conn)
    assert isinstance(workers, answers.WorkerList) and workers.next is None
    assert [w["workerId"] for w in workers.workers] == [worker.worker_id]
    tokens = api.list_project_tokens(project="p").run(worker_conn)
    assert isinstance(tokens, answers.ProjectTokens)
    assert [t["tokenId"] for t in tokens.tokens] == [token.token_id]
    expiring = api.expiring_identities().run(worker_conn)
    assert isinstance(expiring, answers.ExpiringIdentities) and not expiring.truncated
    snapshot = api.status_snapshot().run(worker_conn)
    assert isinstance(snapshot, answers.StatusSnapshot) and snapshot.generated_at_ms > 0
    states = api.run_state_counts().run(worker_conn)
    assert isinstance(states, answers.RunStateCounts)
    assert {s["state"]: s["runs"] for s in states.states}.get("queued") == 2
    depth = api.queue_depth().run(worker_conn)
    assert isinstance(depth, answers.QueueDepth) and depth.tasks_with_runs == 1
    assert depth.by_task == depth.doc["byTask"] and depth.cap == depth.doc["cap"]
    minutes = api.throughput().run(worker_conn)
    assert isinstance(minutes, answers.Throughput) and minutes.minutes == minutes.doc["minutes"]
    waiting = api.waiting_runs().run(worker_conn)
    assert isinstance(waiting, answers.WaitingRuns) and waiting.live_sessions == 1
    sessions = api.live_sessions().run(worker_conn)
    assert isinstance(sessions, answers.LiveSessions) and len(sessions.sessions) == 1
    denials = api.recent_denials().run(worker_conn)
    assert isinstance(denials, answers.RecentDenials) and denials.denials == []
    # The idle view's two reads.
    probe = api.idle_probe().run(worker_conn)
    assert isinstance(probe, answers.IdleProbed) and probe.idle is False  # two runs wait
    assert probe.now_ms == probe.doc["nowMs"] > 0 and probe.wake_at_ms is None
    confirmed = api.confirm_credentials(
        credential_ids=[worker.credential_id, "0" * 16],
        secret_digests=[worker.secret_digest, worker.secret_digest],
        worker_ids=[worker.worker_id, worker.worker_id],
    ).run(worker_conn)
    assert confirmed == answers.ConfirmedCredentials(frozenset({worker.credential_id}))
