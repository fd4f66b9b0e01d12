"""Worker client certificates in the control plane (SPEC §16.3): renewal and
revocation by serial.

`renew_worker_cert` issues a new certificate for the same worker identity (the
SAN URI `urn:qinglong:worker:<id>`, from the same CA as `admin worker create`)
and records its serial and notAfter (`ql.record_certificate`); the old one keeps
working until it expires or is revoked. It never overwrites files: a
`worker.pem` or `worker-key.pem` already in the output directory is refused, so
a crash can never leave a new key beside an old certificate that the worker then
fails to load. Install the new pair by pointing the worker's certFile/keyFile at
it (or moving it into place) and restarting the worker.

`admin worker renew-cert --worker ID` needs nothing else (SPEC §16.3): without
`--ca-dir` it uses the CA the database names in its setting
`qinglong.dev_ca_dir` (set by `qinglong dev up`: the dev stack's `caDir`);
without `--out` it writes into a new directory `worker-certs/<workerId>-<UTC
time>` beside the CA directory (0700; `dev down` removes it with the stack).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
from psycopg import sql

from qinglong.db import answers, api
from qinglong.service import pki
from qinglong.service.control_plane import ControlPlaneError, _private_dir, run


@dataclass(frozen=True)
class RenewedCertificate:
    worker_id: str
    serial: str
    not_after_ms: int
    cert_file: Path
    key_file: Path

    def as_json(self) -> dict[str, str | int]:
        return {
            "workerId": self.worker_id,
            "serial": self.serial,
            "notAfterMs": self.not_after_ms,
            "certFile": str(self.cert_file),
            "keyFile": str(self.key_file),
        }


def record_certificate(
    conn: psycopg.Connection, worker_id: str, facts: pki.CertificateFacts
) -> answers.CertificateRecorded:
    return run(
        conn,
        api.record_certificate(
            worker_id=worker_id, serial=facts.serial, not_after_ms=facts.not_after_ms
        ),
    )


def revoke_certificate(conn: psycopg.Connection, serial: str) -> answers.CertificateRevoked:
    return run(conn, api.revoke_certificate(serial=serial))


# The database-level setting that names the dev stack's CA directory.
DEV_CA_SETTING = "qinglong.dev_ca_dir"
RENEWED_DIR = "worker-certs"


def set_dev_ca_dir(conn: psycopg.Connection, database: str, ca_dir: Path) -> None:
    """Name `ca_dir` as the database's default CA for renewals (superuser, dev only)."""
    conn.execute(
        sql.SQL("ALTER DATABASE {} SET {} = {}").format(
            sql.Identifier(database),
            sql.SQL(DEV_CA_SETTING),
            sql.Literal(str(Path(ca_dir).absolute())),
        )
    )


def default_ca_dir(conn: psycopg.Connection) -> Path:
    """The CA directory the database names (`qinglong dev up`), or a clear error."""
    row = conn.execute("SELECT current_setting(%s, true)", (DEV_CA_SETTING,)).fetchone()
    conn.rollback()
    if row is None or not row[0]:
        raise ControlPlaneError(
            "ca_dir_required",
            "--ca-dir DIR: the CA that issued the worker's certificate "
            "(only a `qinglong dev up` database names a default one)",
            http_status=400,
            field="caDir",
        )
    return Path(row[0])


def default_out_dir(ca_dir: Path, worker_id: str) -> Path:
    """A path for a new directory beside the CA: worker-certs/<workerId>-<UTC time>."""
    base = Path(ca_dir).absolute().parent / RENEWED_DIR
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    candidate, n = base / f"{worker_id}-{stamp}", 1
    while candidate.exists():
        n += 1
        candidate = base / f"{worker_id}-{stamp}-{n}"
    return candidate


def _require_new(out_dir: Path) -> None:
    for name in ("worker.pem", "worker-key.pem"):
        if (out_dir / name).exists():
            raise ControlPlaneError(
                "files_exist",
                f"{out_dir / name} exists; renew into a new directory",
                http_status=409,
                field="out",
            )


def renew_worker_cert(
    conn: psycopg.Connection,
    worker_id: str,
    ca_dir: Path | None,
    out_dir: Path | None,
    *,
    days: int = 365,
) -> RenewedCertificate:
    """A new certificate for `worker_id` in OUT/worker.pem + OUT/worker-key.pem
    (`ca_dir` None: the database's dev CA; `out_dir` None: a new directory)."""
    ca_dir = default_ca_dir(conn) if ca_dir is None else Path(ca_dir)
    try:
        pki.load_ca(ca_dir)  # fail before writing anything
    except pki.PkiError as exc:
        raise ControlPlaneError("ca_not_found", str(exc)) from None
    out_dir = default_out_dir(ca_dir, worker_id) if out_dir is None else Path(out_dir)
    _require_new(out_dir)
    created = not out_dir.exists()
    _private_dir(out_dir)
    cert = pki.issue_worker_cert(
        ca_dir, out_dir, worker_id, not_after=datetime.now(UTC) + timedelta(days=days)
    )
    try:
        facts = pki.certificate_facts(cert.cert_file)
        record_certificate(conn, worker_id, facts)
    except BaseException:
        # An unknown worker (QL004) or a lost database: leave no certificate
        # behind that the database does not know.
        cert.cert_file.unlink(missing_ok=True)
        cert.key_file.unlink(missing_ok=True)
        if created:
            out_dir.rmdir()
        raise
    return RenewedCertificate(
        worker_id, facts.serial, facts.not_after_ms, cert.cert_file, cert.key_file
    )
