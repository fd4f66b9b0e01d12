"""Python calls of the control-plane SQL API (docs/DESIGN.md "Control-plane API").

Each call is one `SELECT ql.<fn>(…)` in its own transaction on a psycopg 3 sync
connection and returns the function's jsonb as a dict. The database is the only
authority: nothing here decides state, it only translates arguments in and
SQLSTATEs out (through `service.sqlstates`, the single mapping table).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from qinglong.db import api
from qinglong.db.api import Call
from qinglong.service import pki
from qinglong.service.sqlstates import lookup

SMALLINT_MIN, SMALLINT_MAX = -32768, 32767
CREDENTIAL_FILE_NAME = "credential"

# Non-QingLong SQLSTATEs an operator will meet: say what is wrong, not a traceback.
_PG_REASONS: dict[str, str] = {
    "42883": "database_not_migrated",  # undefined_function
    "3F000": "database_not_migrated",  # invalid_schema_name
    "42501": "permission_denied",  # insufficient_privilege
    "57014": "statement_timeout",  # query_canceled
}


class ControlPlaneError(Exception):
    """A control-plane call failed with a known reason code."""

    def __init__(
        self,
        reason: str,
        detail: str = "",
        *,
        http_status: int | None = None,
        sqlstate: str | None = None,
    ) -> None:
        super().__init__(detail or reason)
        self.reason = reason
        self.detail = detail
        self.http_status = http_status
        self.sqlstate = sqlstate


def translate(exc: psycopg.Error) -> ControlPlaneError:
    """Map a psycopg error to a ControlPlaneError via the SQLSTATE table."""
    sqlstate = exc.sqlstate
    detail = exc.diag.message_primary or ""
    known = lookup(sqlstate)
    if known is not None:
        return ControlPlaneError(
            known.reason, detail, http_status=known.http_status, sqlstate=sqlstate
        )
    if isinstance(exc, psycopg.OperationalError) and sqlstate is None:
        return ControlPlaneError("database_unavailable", str(exc).strip(), http_status=503)
    reason = _PG_REASONS.get(sqlstate or "", "database_error")
    return ControlPlaneError(reason, detail, http_status=500, sqlstate=sqlstate)


@contextmanager
def connect(dsn: str) -> Iterator[psycopg.Connection]:
    """A sync connection; connection failures surface as ControlPlaneError."""
    try:
        conn = psycopg.connect(dsn, connect_timeout=10)
    except psycopg.Error as exc:
        raise translate(exc) from None
    try:
        yield conn
    finally:
        conn.close()


def _call(conn: psycopg.Connection, call: Call[Any]) -> dict:
    """One `qinglong.db.api` call in a transaction; returns its jsonb object."""
    try:
        with conn.transaction():
            result = call.run(conn)
    except psycopg.Error as exc:
        raise translate(exc) from None
    if not isinstance(result, dict):
        raise ControlPlaneError("database_error", f"ql.{call.function} returned no object")
    return result


def register_worker(conn: psycopg.Connection, name: str) -> dict:
    return _call(conn, api.register_worker(name=name))


def issue_credential(
    conn: psycopg.Connection, worker_id: str, credential_id: str, secret_digest: bytes
) -> dict:
    return _call(conn, api.issue_credential(worker_id=worker_id, credential_id=credential_id,
                                            secret_digest=secret_digest))


def revoke_credential(conn: psycopg.Connection, credential_id: str) -> dict:
    return _call(conn, api.revoke_credential(credential_id=credential_id))


def publish_revision(conn: psycopg.Connection, project: str, task: str, canonical: bytes) -> dict:
    return _call(conn, api.publish_revision(project=project, task=task, canonical=canonical))


def enqueue_runs(conn: psycopg.Connection, task_id: str, priority: int, count: int) -> dict:
    # Checked here too so an out-of-range priority is invalid_input, not an
    # integer-overflow error from the cast.
    if not SMALLINT_MIN <= priority <= SMALLINT_MAX:
        raise ControlPlaneError("invalid_input", "priority must be a smallint", http_status=400)
    return _call(conn, api.enqueue_runs(task_id=task_id, priority=priority, count=count))


def cancel_run(conn: psycopg.Connection, run_id: str) -> dict:
    return _call(conn, api.cancel_run(run_id=run_id))


def sweep_leases(conn: psycopg.Connection, batch: int) -> dict:
    return _call(conn, api.sweep_leases(batch=batch))


def status_snapshot(conn: psycopg.Connection) -> dict:
    return _call(conn, api.status_snapshot())


# ------------------------------------------------------------ worker identity


@dataclass(frozen=True)
class ProvisionedWorker:
    worker_id: str
    credential_id: str
    cert_file: Path
    key_file: Path
    credential_file: Path

    def as_json(self) -> dict[str, str]:
        return {
            "workerId": self.worker_id,
            "certFile": str(self.cert_file),
            "keyFile": str(self.key_file),
            "credentialFile": str(self.credential_file),
        }


def _private_dir(out_dir: Path) -> Path:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    out_dir.chmod(0o700)  # mkdir's mode is masked by umask and ignored if it existed
    return out_dir


def provision_worker(
    conn: psycopg.Connection, name: str, ca_dir: Path, out_dir: Path
) -> ProvisionedWorker:
    """Register a worker, issue its client cert and its credential.

    The credential secret only ever exists in the 0600 file; the database gets
    its SHA-256 digest.
    """
    ca_dir = Path(ca_dir)
    try:
        pki.load_ca(ca_dir)  # fail before registering anything
    except pki.PkiError as exc:
        raise ControlPlaneError("ca_not_found", str(exc)) from None
    out_dir = _private_dir(out_dir)
    credential = pki.generate_credential()
    credential_file = out_dir / CREDENTIAL_FILE_NAME
    written: list[Path] = []
    try:
        # One transaction (the calls' own become savepoints): never a registered
        # worker without its credential, nor a credential whose files we lost.
        with conn.transaction():
            worker_id = _required(register_worker(conn, name), "workerId", "register_worker")
            cert = pki.issue_worker_cert(ca_dir, out_dir, worker_id)
            written += [cert.cert_file, cert.key_file]
            pki.write_private_file(credential_file, credential.token.encode("ascii"))
            written.append(credential_file)
            issue_credential(conn, worker_id, credential.credential_id, credential.secret_digest)
    except BaseException:
        for path in written:
            path.unlink(missing_ok=True)
        raise
    return ProvisionedWorker(
        worker_id=worker_id,
        credential_id=credential.credential_id,
        cert_file=cert.cert_file,
        key_file=cert.key_file,
        credential_file=credential_file,
    )


def _required(result: dict, key: str, function: str) -> str:
    value = result.get(key)
    if not isinstance(value, str) or not value:
        raise ControlPlaneError("database_error", f"ql.{function} result has no {key}")
    return value


__all__ = [
    "ControlPlaneError",
    "ProvisionedWorker",
    "cancel_run",
    "connect",
    "enqueue_runs",
    "issue_credential",
    "provision_worker",
    "publish_revision",
    "register_worker",
    "revoke_credential",
    "status_snapshot",
    "sweep_leases",
    "translate",
]
