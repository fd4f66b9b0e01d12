"""Project tokens of the producer API (SPEC §13.4): `admin token create|list|revoke`.

`create` generates `qlp_<tokenId>_<secret>` here (Python `secrets`), stores only
the SHA-256 of the whole token string, and prints `{tokenId, token, project,
scopes, expiresAtMs}` once: the token cannot be shown again. `list` never shows
a digest; `revoke` stops the token at its next request.
"""

from __future__ import annotations

import argparse
from typing import Any

from qinglong.admin_cli import guarded, invalid
from qinglong.cli import Subparsers

_SCOPE_HELP = "comma-separated subset of enqueue,read,cancel,retry,log"


def add_parsers(groups: Subparsers, lazy: Any, dsn: Any) -> None:
    tokens = groups.add_parser("token", help="project tokens of the producer API")
    actions = tokens.add_subparsers(dest="admin_token_command", required=True)
    create = actions.add_parser("create", help="make a project token (printed once)")
    dsn(create)
    create.add_argument("--project", required=True)
    create.add_argument("--scope", required=True, help=_SCOPE_HELP)
    create.add_argument("--expires-in", help="N[smhd], e.g. 90d (default: never)")
    create.set_defaults(handler=lazy("qinglong.admin_tokens:token_create"))
    listing = actions.add_parser("list", help="tokens (never their secret or digest)")
    dsn(listing)
    listing.add_argument("--project")
    listing.set_defaults(handler=lazy("qinglong.admin_tokens:token_list"))
    revoke = actions.add_parser("revoke", help="refuse the token from its next request on")
    dsn(revoke)
    revoke.add_argument("--token-id", required=True)
    revoke.set_defaults(handler=lazy("qinglong.admin_tokens:token_revoke"))


def parse_scopes(text: str) -> list[str]:
    from qinglong.service.producer_token import SCOPES

    scopes = [item.strip() for item in text.split(",")]
    if not scopes or any(scope not in SCOPES for scope in scopes):
        raise invalid("scope", f"scope must be a {_SCOPE_HELP}")
    return list(dict.fromkeys(scopes))


def create_token(
    dsn: str, project: str, scopes: list[str], expires_in_s: int | None
) -> dict[str, Any]:
    """Generate, store the digest, return the document printed once (with the token)."""
    from qinglong.db import api
    from qinglong.service import control_plane
    from qinglong.service.producer_token import generate_token

    token = generate_token()
    with control_plane.connect(dsn) as conn:
        stored = control_plane.run(
            conn,
            api.create_project_token(
                project=project,
                token_id=token.token_id,
                token_digest=token.digest,
                scopes=scopes,
                expires_in_s=expires_in_s,
            ),
        )
    return {
        "tokenId": stored.token_id,
        "token": token.token,
        "project": stored.project,
        "scopes": stored.scopes,
        "expiresAtMs": stored.doc["expiresAtMs"],
    }


def token_create(args: argparse.Namespace) -> int:
    from qinglong.admin_cli import duration_s

    def action() -> dict[str, Any]:
        scopes = parse_scopes(args.scope)
        expires = None if args.expires_in is None else duration_s(args.expires_in, "expiresIn")
        return create_token(args.dsn, args.project, scopes, expires)

    return guarded(action)


def token_list(args: argparse.Namespace) -> int:
    from qinglong.db import api
    from qinglong.service import control_plane

    def action() -> dict[str, Any]:
        with control_plane.connect(args.dsn) as conn:
            return control_plane.run(conn, api.list_project_tokens(project=args.project)).doc

    return guarded(action)


def token_revoke(args: argparse.Namespace) -> int:
    from qinglong.db import api
    from qinglong.service import control_plane

    def action() -> dict[str, Any]:
        with control_plane.connect(args.dsn) as conn:
            return control_plane.run(conn, api.revoke_project_token(token_id=args.token_id)).doc

    return guarded(action)
