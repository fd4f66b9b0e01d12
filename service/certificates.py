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
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg

from qinglong.db import api
from qinglong.service import pki
from qinglong.service.control_plane import ControlPlaneError, _call, _private_dir


@dataclass(frozen=True)
class RenewedCertificate:
    worker_id: str
    serial: str
    not_after_ms: int
    cert_file: Path
    key_file: Path

    def as_json(self) -> dict[str, str | int]:
        return {"workerId": self.worker_id, "serial": self.serial,
                "notAfterMs": self.not_after_ms, "certFile": str(self.cert_file),
                "keyFile": str(self.key_file)}


def record_certificate(conn: psycopg.Connection, worker_id: str,
                       facts: pki.CertificateFacts) -> dict:
    return _call(conn, api.record_certificate(worker_id=worker_id, serial=facts.serial,
                                              not_after_ms=facts.not_after_ms))


def revoke_certificate(conn: psycopg.Connection, serial: str) -> dict:
    return _call(conn, api.revoke_certificate(serial=serial))


def _require_new(out_dir: Path) -> None:
    for name in ("worker.pem", "worker-key.pem"):
        if (out_dir / name).exists():
            raise ControlPlaneError(
                "files_exist", f"{out_dir / name} exists; renew into a new directory",
                http_status=409, field="out")


def renew_worker_cert(conn: psycopg.Connection, worker_id: str, ca_dir: Path,
                      out_dir: Path, *, days: int = 365) -> RenewedCertificate:
    """A new certificate for `worker_id` in OUT/worker.pem + OUT/worker-key.pem."""
    try:
        pki.load_ca(ca_dir)  # fail before writing anything
    except pki.PkiError as exc:
        raise ControlPlaneError("ca_not_found", str(exc)) from None
    out_dir = Path(out_dir)
    _require_new(out_dir)
    _private_dir(out_dir)
    cert = pki.issue_worker_cert(ca_dir, out_dir, worker_id,
                                 not_after=datetime.now(UTC) + timedelta(days=days))
    try:
        facts = pki.certificate_facts(cert.cert_file)
        record_certificate(conn, worker_id, facts)
    except BaseException:
        # An unknown worker (QL004) or a lost database: leave no certificate
        # behind that the database does not know.
        cert.cert_file.unlink(missing_ok=True)
        cert.key_file.unlink(missing_ok=True)
        raise
    return RenewedCertificate(worker_id, facts.serial, facts.not_after_ms,
                              cert.cert_file, cert.key_file)
