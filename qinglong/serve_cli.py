"""`qinglong ingress serve --config FILE` (the implementation lives in service.serve)."""

from __future__ import annotations

import argparse
from collections.abc import Callable

Handler = Callable[[argparse.Namespace], int]


def register(sub: argparse._SubParsersAction, lazy: Callable[[str], Handler]) -> None:
    ingress = sub.add_parser("ingress", help="the worker-facing HTTPS ingress")
    commands = ingress.add_subparsers(dest="ingress_command", required=True)
    serve = commands.add_parser("serve", help="run the ingress until SIGTERM")
    serve.add_argument("--config", required=True,
                       help="JSON config file (see service/config.py); QL_INGRESS_* overrides")
    serve.set_defaults(handler=lazy("qinglong.service.serve:serve_command"))
