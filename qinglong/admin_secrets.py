"""Secrets (SPEC §14.1): `admin secret set|list|delete|rotate-kek`.

`set` reads the value from `--from-file F` or stdin (exactly the bytes given: a
trailing newline is part of the value), refuses a value outside 8 B - 16 KiB or
that is not NUL-free UTF-8 text before anything is sent, encrypts it here with
the project's data key (AES-256-GCM; service/secrets_crypto.py) and stores only
the ciphertext. The key-encryption key file comes from `--kek-file F` or
`$QINGLONG_KEK_FILE` and must be mode 0600. `list` prints names, versions and
timestamps; no command ever prints a value or a key.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qinglong.admin_cli import AdminError, guarded, invalid
from qinglong.cli import Subparsers

if TYPE_CHECKING:
    from qinglong.service.secrets_crypto import Kek, SecretsError

_KEK_HELP = "key-encryption key file, mode 0600 (default: $QINGLONG_KEK_FILE)"


def add_parsers(groups: Subparsers, lazy: Any, dsn: Any) -> None:
    secrets = groups.add_parser("secret", help="project secrets (values never printed)")
    actions = secrets.add_subparsers(dest="admin_secret_command", required=True)
    set_ = actions.add_parser("set", help="store a new version of a secret (encrypted)")
    dsn(set_)
    set_.add_argument("--project", required=True)
    set_.add_argument("--name", required=True, help="^[a-z][a-z0-9_.-]{0,63}$")
    set_.add_argument(
        "--from-file",
        type=Path,
        help="read the value from this file (default: stdin), 8 B - 16 KiB",
    )
    set_.add_argument("--kek-file", type=Path, help=_KEK_HELP)
    set_.set_defaults(handler=lazy("qinglong.admin_secrets:secret_set"))
    listing = actions.add_parser("list", help="names, versions and timestamps (never values)")
    dsn(listing)
    listing.add_argument("--project", required=True)
    listing.set_defaults(handler=lazy("qinglong.admin_secrets:secret_list"))
    delete = actions.add_parser("delete", help="remove a secret")
    dsn(delete)
    delete.add_argument("--project", required=True)
    delete.add_argument("--name", required=True)
    delete.set_defaults(handler=lazy("qinglong.admin_secrets:secret_delete"))
    rotate = actions.add_parser(
        "rotate-kek", help="re-wrap every project's data key with a new KEK file"
    )
    dsn(rotate)
    rotate.add_argument("--kek-file", type=Path, help="the current KEK file; " + _KEK_HELP)
    rotate.add_argument(
        "--new-kek-file",
        type=Path,
        required=True,
        help="the new KEK file (created, 0600, when it does not exist)",
    )
    rotate.set_defaults(handler=lazy("qinglong.admin_secrets:secret_rotate_kek"))


# ------------------------------------------------------------------ arguments


def _refused(exc: SecretsError, field: str) -> AdminError:
    from qinglong.service.secrets_crypto import SecretsReason

    reason = exc.reason
    if reason in (SecretsReason.KEK_MISMATCH, SecretsReason.SECRET_INTEGRITY):
        return AdminError("conflict", reason.value, exc.detail)
    return invalid(field, exc.detail, reason.value)


def kek_path(given: Path | None) -> Path:
    from qinglong.service.secrets_crypto import KEK_ENV

    if given is not None:
        return given
    from_env = os.environ.get(KEK_ENV)
    if not from_env:
        raise invalid("kekFile", f"give --kek-file or set ${KEK_ENV}")
    return Path(from_env)


def load_kek_arg(path: Path, field: str = "kekFile") -> Kek:
    from qinglong.service.secrets_crypto import SecretsError, load_kek

    try:
        return load_kek(path)
    except SecretsError as exc:
        raise _refused(exc, field) from None


def read_value(path: Path | None) -> bytes:
    """The value, read to at most one byte past the limit (a longer one is refused)."""
    from qinglong.service.secrets_crypto import MAX_VALUE_BYTES, SecretsError, check_value

    if path is None:
        value = sys.stdin.buffer.read(MAX_VALUE_BYTES + 1)
    else:
        with open(path, "rb") as f:
            value = f.read(MAX_VALUE_BYTES + 1)
    try:
        check_value(value)
    except SecretsError as exc:
        raise _refused(exc, "value") from None
    return value


# ------------------------------------------------------------------ handlers


def secret_set(args: argparse.Namespace) -> int:
    from qinglong.service import control_plane, secret_store
    from qinglong.service.secrets_crypto import SecretsError

    def action() -> dict[str, Any]:
        kek = load_kek_arg(kek_path(args.kek_file))
        value = read_value(args.from_file)
        with control_plane.connect(args.dsn) as conn:
            try:
                return secret_store.set_secret(conn, kek, args.project, args.name, value).doc
            except SecretsError as exc:
                raise _refused(exc, "value") from None

    return guarded(action)


def secret_list(args: argparse.Namespace) -> int:
    from qinglong.service import control_plane, secret_store

    def action() -> dict[str, Any]:
        with control_plane.connect(args.dsn) as conn:
            return secret_store.list_secrets(conn, args.project).doc

    return guarded(action)


def secret_delete(args: argparse.Namespace) -> int:
    from qinglong.service import control_plane, secret_store

    def action() -> dict[str, Any]:
        with control_plane.connect(args.dsn) as conn:
            return secret_store.delete_secret(conn, args.project, args.name).doc

    return guarded(action)


def _discard_created(path: Path, created: bool) -> None:
    """Nothing is written by a refusal: remove the NEW KEK file this run made."""
    if created:
        path.unlink(missing_ok=True)


def secret_rotate_kek(args: argparse.Namespace) -> int:
    from qinglong.service import control_plane, secret_store
    from qinglong.service.control_plane import ControlPlaneError
    from qinglong.service.secrets_crypto import SecretsError, create_kek_file

    def action() -> dict[str, Any]:
        old = load_kek_arg(kek_path(args.kek_file))
        # A dangling symlink is not a file to create (O_EXCL would refuse it as an
        # I/O error): it is read, and refused as kek_unreadable.
        created = not os.path.lexists(args.new_kek_file)
        try:
            new = (
                create_kek_file(args.new_kek_file)
                if created
                else load_kek_arg(args.new_kek_file, "newKekFile")
            )
            with control_plane.connect(args.dsn) as conn:
                result = secret_store.rotate_kek(conn, old, new)
        except SecretsError as exc:
            _discard_created(args.new_kek_file, created)
            raise _refused(exc, "newKekFile") from None
        except ControlPlaneError as exc:
            # A refusal rolled back: the file it made goes too. An outage may
            # hide a committed rotation: the new key is kept then.
            if exc.http_status != 503:
                _discard_created(args.new_kek_file, created)
            raise
        return {
            **result.doc,
            "newKekFile": str(args.new_kek_file.absolute()),
            "newKekFileCreated": created,
        }

    return guarded(action)
