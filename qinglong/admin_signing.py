"""Signed revisions, the publisher's side (SPEC §16.1).

`admin signing-key create --out DIR` writes `signing-key.pem` (Ed25519, PKCS#8,
0600) and `signing-key.jwk.json` (the public JWK with its kid, the RFC 7638
thumbprint) and prints `{kid, privateKeyFile, publicJwkFile}`; it needs no
database and never overwrites a key. `admin task publish --sign-key FILE` signs
the revision it publishes (qinglong.schemas.signing; the flow is
control_plane.publish_task). The worker side is worker/trust.py.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qinglong.admin_cli import guarded, invalid
from qinglong.cli import Subparsers

if TYPE_CHECKING:
    from qinglong.service.compiler import CompiledRevision

__all__ = ["add_parsers", "add_publish_flag", "revision_signer", "signing_key_create"]


def add_parsers(groups: Subparsers, lazy: Any) -> None:
    keys = groups.add_parser("signing-key", help="Ed25519 keys that sign revisions")
    actions = keys.add_subparsers(dest="admin_signing_key_command", required=True)
    create = actions.add_parser(
        "create", help="write signing-key.pem (0600) and signing-key.jwk.json (needs no database)"
    )
    create.add_argument("--out", required=True, type=Path, help="directory (created 0700)")
    create.set_defaults(handler=lazy("qinglong.admin_signing:signing_key_create"))


def add_publish_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--sign-key",
        metavar="FILE",
        type=Path,
        help=(
            "sign the revision with this Ed25519 key (signing-key.pem of "
            "`admin signing-key create`); enforcing workers run only signed revisions"
        ),
    )


def signing_key_create(args: argparse.Namespace) -> int:
    def action() -> dict[str, Any]:
        from qinglong.schemas.signing import KeyFileError, create_signing_key

        try:
            return create_signing_key(str(args.out))
        except KeyFileError as exc:
            raise invalid("out", exc.detail, exc.reason) from None
        except OSError as exc:
            raise invalid("out", f"{args.out}: {exc.strerror}", "out_unusable") from None

    return guarded(action)


def revision_signer(
    key_file: Path | None, compiled: CompiledRevision
) -> Callable[[str], str] | None:
    """Load `--sign-key` (before any database call) -> task id -> detached JWS."""
    if key_file is None:
        return None
    from qinglong.schemas.signing import KeyFileError, Signer, revision_payload

    try:
        signer = Signer.load(str(key_file))
    except KeyFileError as exc:
        raise invalid("signKey", exc.detail, exc.reason) from None
    placement = compiled.placement

    def sign(task_id: str) -> str:
        return signer.sign(
            revision_payload(task_id, compiled.kind, compiled.executor, compiled.spec, placement)
        )

    return sign
