"""Pools and worker grants (SPEC §13.1): `admin pool create --project P --name N`,
`admin worker create … --pool P/N [--pool …]` ('*' = every pool, present and
future), `admin worker grant|revoke --worker ID --pool P/N`, and `admin task
publish … --pool P/N`.

A worker takes only the runs of the pools it holds a grant for; a worker created
without `--pool` holds none and only ever gets idle. Revoking releases the
worker's unstarted leases of the pool at once; started ones may finish. A pool
reference is checked here before any SQL (invalid input naming `pool`, exit 2);
the database checks it again and refuses a missing pool (not found naming
`pool`, exit 2).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from typing import Any

from qinglong.admin_cli import guarded, invalid, uuid_arg
from qinglong.cli import Subparsers

ALL_POOLS = "*"
POOL_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,62}")
POOL_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}/[a-z0-9][a-z0-9._-]{0,62}")
REF_RULE = "must be PROJECT/NAME (name ^[a-z0-9][a-z0-9._-]{0,62}$) or '*'"


def pool_ref(text: str, *, wildcard: bool = True) -> str:
    """A `P/N` pool reference (or '*' where allowed), else invalid input naming `pool`."""
    if (wildcard and text == ALL_POOLS) or POOL_REF.fullmatch(text):
        return text
    rule = REF_RULE if wildcard else "must be PROJECT/NAME (name ^[a-z0-9][a-z0-9._-]{0,62}$)"
    raise invalid("pool", f"pool {text[:140]!r} {rule}")


def parse_pools(items: Sequence[str] | None) -> list[str]:
    """The repeatable `--pool` of `admin worker create`, de-duplicated in order."""
    return [pool_ref(item) for item in dict.fromkeys(items or ())]


def add_create_flags(parser: argparse.ArgumentParser) -> None:
    """The pool flag of `admin worker create`."""
    parser.add_argument(
        "--pool",
        action="append",
        metavar="P/N",
        help=(
            "grant the worker pool P/N (repeatable); '*' = every pool of every project, "
            "present and future. Without it the worker takes nothing"
        ),
    )


def add_publish_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--pool",
        metavar="P/N",
        help=(
            "the pool of the task's project it publishes into (default: the task's pool; "
            "a new task's is P/default)"
        ),
    )


def add_parsers(groups: Subparsers, workers: Subparsers, lazy: Any, dsn: Any) -> None:
    """`admin pool create` and `admin worker grant|revoke`; `dsn` adds --dsn."""
    pools = groups.add_parser("pool", help="pools of a project (tenancy)")
    pool_actions = pools.add_subparsers(dest="action", required=True)
    create = pool_actions.add_parser("create", help="create pool P/N (and project P if needed)")
    dsn(create)
    create.add_argument("--project", required=True)
    create.add_argument("--name", required=True)
    create.set_defaults(handler=lazy("qinglong.admin_pools:pool_create"))
    for action, text in (
        ("grant", "let the worker take the runs of a pool"),
        (
            "revoke",
            "stop offering the pool's runs to the worker; its "
            "unstarted leases of the pool are released",
        ),
    ):
        parser = workers.add_parser(action, help=text)
        dsn(parser)
        parser.add_argument("--worker", required=True, help="worker id")
        parser.add_argument("--pool", required=True, metavar="P/N", help="P/N, or '*'")
        parser.set_defaults(handler=lazy(f"qinglong.admin_pools:worker_{action}"))


def pool_create(args: argparse.Namespace) -> int:
    from qinglong.db import api
    from qinglong.service import control_plane

    def action() -> dict[str, Any]:
        if not POOL_NAME.fullmatch(args.name):
            raise invalid("name", "name must match ^[a-z0-9][a-z0-9._-]{0,62}$")
        with control_plane.connect(args.dsn) as conn:
            result = control_plane.run(conn, api.create_pool(project=args.project, name=args.name))
        return {"poolId": result.pool_id, "project": result.project, "name": result.name}

    return guarded(action)


def worker_grant(args: argparse.Namespace) -> int:
    from qinglong.db import api
    from qinglong.service import control_plane

    def action() -> dict[str, Any]:
        worker_id = uuid_arg(args.worker, "workerId")
        pool = pool_ref(args.pool)
        with control_plane.connect(args.dsn) as conn:
            return control_plane.run(conn, api.grant_pool(worker_id=worker_id, pool=pool)).doc

    return guarded(action)


def worker_revoke(args: argparse.Namespace) -> int:
    from qinglong.db import api
    from qinglong.service import control_plane

    def action() -> dict[str, Any]:
        worker_id = uuid_arg(args.worker, "workerId")
        pool = pool_ref(args.pool)
        with control_plane.connect(args.dsn) as conn:
            return control_plane.run(conn, api.revoke_pool(worker_id=worker_id, pool=pool)).doc

    return guarded(action)
