"""Worker certificates (SPEC §16.3): `admin worker renew-cert`, `admin cert revoke`.

`renew-cert --worker ID [--ca-dir DIR] [--out DIR]` issues a new client
certificate for the same worker identity into OUT (worker.pem, worker-key.pem;
refused when either exists) and records its serial and notAfter; the old
certificate keeps working until it expires or is revoked. `--worker ID` is all
it needs on a `qinglong dev up` database: the CA defaults to the one that
database names (the dev stack's caDir), OUT to a new directory
`worker-certs/<workerId>-<UTC time>` beside the CA (service/certificates.py).
`cert revoke --serial S` (hex as `openssl x509 -serial` prints it, any case, colons optional) makes
every ingress process refuse that certificate within 5 s (401
certificate_revoked, service/cert_revocation.py).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from qinglong.admin_cli import guarded, integer, invalid, uuid_arg
from qinglong.cli import Subparsers

# What ql_private.certificate_serial accepts, checked first for a JSON error
# naming the field before any connection is made.
_SERIAL = re.compile(r"(?i)(serial=)?[0-9a-f:]{1,128}")


def add_worker_parser(workers: Subparsers, lazy: Any, dsn: Any) -> None:
    renew = workers.add_parser(
        "renew-cert", help="issue a new certificate for the same worker identity"
    )
    dsn(renew)
    renew.add_argument("--worker", required=True, help="worker id")
    renew.add_argument(
        "--ca-dir",
        type=Path,
        default=None,
        help="the CA that issued the worker's certificate (default: the "
        "dev stack's caDir, which a `qinglong dev up` database names)",
    )
    renew.add_argument(
        "--out",
        type=Path,
        default=None,
        help="directory for worker.pem and worker-key.pem (must not hold "
        "them; default: a new worker-certs/<workerId>-<UTC time> beside the CA)",
    )
    renew.add_argument("--days", default="365", help="validity in days, 1..3650 (default 365)")
    renew.set_defaults(handler=lazy("qinglong.admin_certs:worker_renew_cert"))


def add_parsers(groups: Subparsers, lazy: Any, dsn: Any) -> None:
    certs = groups.add_parser("cert", help="worker client certificates")
    actions = certs.add_subparsers(dest="admin_cert_command", required=True)
    revoke = actions.add_parser("revoke", help="refuse a certificate at every ingress")
    dsn(revoke)
    revoke.add_argument(
        "--serial",
        required=True,
        help="hex, as `openssl x509 -serial` prints it (any case, colons ok)",
    )
    revoke.set_defaults(handler=lazy("qinglong.admin_certs:cert_revoke"))


def worker_renew_cert(args: argparse.Namespace) -> int:
    from qinglong.service import certificates, control_plane

    def action() -> dict[str, Any]:
        worker_id = uuid_arg(args.worker, "workerId")
        days = integer(args.days, "days", 1, 3650)
        with control_plane.connect(args.dsn) as conn:
            renewed = certificates.renew_worker_cert(
                conn,
                worker_id,
                args.ca_dir,
                None if args.out is None else Path(args.out).absolute(),
                days=days,
            )
        return renewed.as_json()

    return guarded(action)


def cert_revoke(args: argparse.Namespace) -> int:
    from qinglong.service import certificates, control_plane

    def action() -> dict[str, Any]:
        if not _SERIAL.fullmatch(args.serial.strip()) or not any(
            c not in ":" for c in args.serial.strip().lower().removeprefix("serial=")
        ):
            raise invalid("serial", "serial must be hex (as openssl x509 -serial prints it)")
        with control_plane.connect(args.dsn) as conn:
            result = certificates.revoke_certificate(conn, args.serial.strip())
        return {
            key: result.doc.get(key) for key in ("serial", "workerId", "revokedAtMs", "revoked")
        }

    return guarded(action)
