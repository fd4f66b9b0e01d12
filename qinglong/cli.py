"""The `qinglong` console script.

Only argparse is imported up front: each sub-command's module is imported when
that sub-command runs, so `qinglong worker run` never loads the ingress, psycopg
or database code (R-LAY-1) and `--help` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from typing import TypeAlias

from qinglong.dsn_option import add_dsn_argument, resolve_dsn

# (command path) -> "module:function" taking the parsed namespace, returning an exit code.
Handler = Callable[[argparse.Namespace], int]
# What `add_subparsers()` returns, for the `register(sub, lazy)` functions.
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def _lazy(target: str) -> Handler:
    module_name, func_name = target.split(":")

    def run(args: argparse.Namespace) -> int:
        module = importlib.import_module(module_name)
        return int(getattr(module, func_name)(args))

    return run


def _add_dsn(parser: argparse.ArgumentParser, required: bool = True) -> None:
    add_dsn_argument(parser, required=required)


def _db_commands(sub: Subparsers) -> None:
    db = sub.add_parser("db", help="database schema management").add_subparsers(
        dest="db_command", required=True
    )
    migrate = db.add_parser("migrate", help="apply pending migrations and functions")
    _add_dsn(migrate)
    migrate.add_argument("--dry-run", action="store_true", help="apply and roll back")
    migrate.set_defaults(handler=_lazy("qinglong.db_commands:migrate_command"))
    status = db.add_parser("status", help="list migrations and their state")
    _add_dsn(status)
    status.set_defaults(handler=_lazy("qinglong.db_commands:status_command"))


EXTENSIONS = (
    "qinglong.admin_cli",
    "qinglong.serve_cli",
    "qinglong.dev_cli",
    "qinglong.worker_cli",
    "qinglong.status_cli",
    "qinglong.runtime_cli",
    "qinglong.ops_cli",
    "qinglong.console_cli",
    "qinglong.run_cli",
    "qinglong.api_cli",
)


def _extension_commands(sub: Subparsers, modules: Sequence[str] = EXTENSIONS) -> None:
    """Sub-commands whose parsers live with their implementation."""
    for module_name in modules:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue
        module.register(sub, _lazy)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="qinglong", description="QingLong Dispatch")
    sub = parser.add_subparsers(dest="command", required=True)
    words = list(sys.argv[1:] if argv is None else argv)
    if words[:1] == ["worker"]:
        # The edge path: a router running `qinglong worker run` should not import
        # (and keep in memory) every other command's module just to parse argv.
        _extension_commands(sub, ("qinglong.worker_cli",))
        return parser
    _db_commands(sub)
    _extension_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    resolve_dsn(args, parser)
    try:
        handler: Handler = args.handler
        return handler(args)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
