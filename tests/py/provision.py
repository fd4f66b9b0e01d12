"""Test helpers that provision rows through the real SQL API (no table inserts).

Everything goes through `ql.*` functions as the superuser, exactly as the admin
commands and the ingress would call them, so tests exercise the same paths.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import uuid
from dataclasses import dataclass, field
from typing import Any

import psycopg

from qinglong.db import answers, api
from qinglong.schemas.canonical import canonical_bytes
from qinglong.service.compiler import compile_command

DEFAULT_CAPABILITIES: dict[str, Any] = {
    "schema": "qinglong/worker-capabilities@v1",
    "executors": ["remote-worker"],
    "labels": {},
    "runtimes": {},
    "slots": 4,
}


def new_token() -> str:
    return base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode("ascii")


def digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("ascii")).digest()


@dataclass
class Worker:
    worker_id: str
    credential_id: str
    secret: str

    @property
    def secret_digest(self) -> bytes:
        return digest(self.secret)


@dataclass
class Session:
    worker: Worker
    session_id: str
    generation: int

    def fence(self) -> dict[str, Any]:
        """The session-fence keyword arguments of the worker-facing `api` calls."""
        return {
            "credential_id": self.worker.credential_id,
            "secret_digest": self.worker.secret_digest,
            "worker_id": self.worker.worker_id,
            "session_id": self.session_id,
            "generation": self.generation,
        }

    def lease(self, intent: Intent) -> dict[str, Any]:
        """`fence()` plus the offer id and token digest of a lease call."""
        return {**self.fence(), "offer_id": intent.offer_id, "token_digest": intent.token_digest}


@dataclass
class Intent:
    offer_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    token: str = field(default_factory=new_token)

    @property
    def token_digest(self) -> bytes:
        return digest(self.token)


def command(argv: list[str] | None = None, placement: dict[str, Any] | None = None) -> dict:
    doc: dict[str, Any] = {
        "schema": "qinglong/command@v1",
        "argv": argv or ["true"],
        "env": {},
        "timeoutS": 60,
    }
    if placement is not None:
        doc["placement"] = placement
    return doc


class Provisioner:
    """Thin wrappers over the ql.* API, connected as the superuser."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self.conn = conn

    def call(self, call: api.Call[Any]) -> Any:
        result = call.run(self.conn)
        assert result is not None or call.function == "record_auth_denial"
        return result

    def worker(self, name: str = "w", self_labels: bool = True, all_pools: bool = True) -> Worker:
        worker_id = self.call(api.register_worker(name=name)).worker_id
        credential_id = "".join(
            secrets.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(16)
        )
        secret = new_token()
        self.call(
            api.issue_credential(
                worker_id=worker_id, credential_id=credential_id, secret_digest=digest(secret)
            )
        )
        if self_labels:
            # Sessions may declare any labels (SPEC §13.2 self-labels); set
            # directly so no worker.labels_changed event joins every test's events.
            self.conn.execute(
                "UPDATE ql_private.workers SET self_labels = true WHERE id = %s::uuid", (worker_id,)
            )
        if all_pools:
            # Every pool, present and future (SPEC §13.1 `--pool '*'`). Set
            # directly so no worker.pool_granted event joins every test's events.
            self.conn.execute(
                "UPDATE ql_private.workers SET all_pools = true WHERE id = %s::uuid", (worker_id,)
            )
        return Worker(worker_id, credential_id, secret)

    def session(self, worker: Worker, capabilities: dict[str, Any] | None = None) -> Session:
        caps = canonical_bytes(capabilities or DEFAULT_CAPABILITIES)
        result = self.call(
            api.open_session(
                credential_id=worker.credential_id,
                secret_digest=worker.secret_digest,
                worker_id=worker.worker_id,
                capabilities_canonical=caps,
            )
        )
        assert isinstance(result, answers.SessionOk), result
        session = result.session
        return Session(worker, session["sessionId"], session["generation"])

    def task(self, name: str = "t", doc: dict | None = None, project: str = "p") -> str:
        compiled = compile_command(doc or command())
        return self.call(
            api.publish_revision(project=project, task=name, canonical=compiled.canonical)
        ).task_id

    def enqueue(self, task_id: str, count: int = 1, priority: int = 0) -> list[str]:
        return self.call(api.enqueue_runs(task_id=task_id, priority=priority, count=count)).run_ids

    def pull(self, session: Session, intent: Intent, bounds: dict | None = None) -> dict:
        """The pull's envelope as the database built it (its typed answer's `doc`)."""
        return self.call(api.pull_offer(**session.lease(intent), bounds=bounds)).doc


def table_fingerprint(conn: psycopg.Connection, exclude: tuple[str, ...] = ()) -> dict[str, str]:
    """md5 of every ql_private table's full contents, for 'nothing changed' checks."""
    tables = [
        row[0]
        for row in conn.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = 'ql_private' AND c.relkind = 'r' ORDER BY 1"
        ).fetchall()
        if row[0] not in exclude
    ]
    result: dict[str, str] = {}
    for table in tables:
        row = conn.execute(
            f"SELECT md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), ''))"
            f" FROM ql_private.{table} t"
        ).fetchone()
        result[table] = str(row[0]) if row else ""
    return result


def dumps(value: object) -> str:
    return json.dumps(value, sort_keys=True)
