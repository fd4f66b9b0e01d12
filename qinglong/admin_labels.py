"""Granted labels (SPEC §13.2): `admin worker create --label k=v [--self-labels]`
and `admin worker label --worker ID [--label k=v …] [--remove k …] [--self-labels
true|false]`.

A label is granted only by an operator: a worker's session may declare a label
only when the same key with the same value (byte for byte) is granted to it,
unless the worker has self-labels (its declared labels are accepted as they
are). Each `--label` is checked here with the capabilities' label rules (SPEC
§4.4) before any SQL: a bad one exits 2 naming the field (`labels` or
`remove`) and nothing is written. The database checks the same rules again.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from typing import Any

from qinglong.admin_cli import boolean, guarded, invalid, uuid_arg
from qinglong.cli import Subparsers

LABEL_KEY = re.compile(r"[a-z0-9][a-z0-9._/-]{0,62}")
MAX_LABELS = 32
MAX_VALUE_CHARS = 128
KEY_RULE = "must match ^[a-z0-9][a-z0-9._/-]{0,62}$"


def _key(text: str, field: str) -> str:
    if not LABEL_KEY.fullmatch(text):
        raise invalid(field, f"{field}: key {text[:64]!r} {KEY_RULE}")
    return text


def _value(key: str, value: str) -> str:
    from qinglong.service.capabilities import label_value_ok

    if value == "":
        raise invalid("labels", f"labels[{key!r}] must not be empty")
    if len(value) > MAX_VALUE_CHARS:
        raise invalid(
            "labels",
            f"labels[{key!r}] is longer than {MAX_VALUE_CHARS} characters",
            "limit_exceeded",
        )
    if not label_value_ok(value):
        raise invalid("labels", f"labels[{key!r}] must be printable text")
    return value


def parse_labels(items: Sequence[str] | None) -> dict[str, str]:
    """`k=v` arguments -> {k: v}; a key given twice, a missing `=`, a bad key or
    value, or more than 32 labels is invalid input naming `labels`."""
    labels: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep:
            raise invalid("labels", "labels: each --label is key=value")
        key = _key(key, "labels")
        if key in labels:
            raise invalid("labels", f"labels: key {key!r} given twice")
        labels[key] = _value(key, value)
    if len(labels) > MAX_LABELS:
        raise invalid("labels", f"labels: at most {MAX_LABELS} labels", "limit_exceeded")
    return labels


def parse_removals(items: Sequence[str] | None, labels: dict[str, str]) -> list[str]:
    keys = [_key(item, "remove") for item in dict.fromkeys(items or ())]
    both = [key for key in keys if key in labels]
    if both:
        raise invalid("remove", f"remove: key {both[0]!r} is also given with --label")
    return keys


def add_create_flags(parser: argparse.ArgumentParser) -> None:
    """The label flags of `admin worker create`."""
    parser.add_argument(
        "--label",
        action="append",
        metavar="K=V",
        help=(
            "grant a placement label the operator vouches for (repeatable); a session "
            "may declare only granted labels, same key and value"
        ),
    )
    parser.add_argument(
        "--self-labels",
        action="store_true",
        help=(
            "accept the labels the worker's sessions declare as they are (development, "
            "single-tenant); off by default"
        ),
    )


def add_label_parser(workers: Subparsers, lazy: Any, dsn: Any) -> None:
    """`admin worker label`; `dsn` adds the --dsn option."""
    parser = workers.add_parser(
        "label", help="grant or remove a worker's labels; no flags: print them"
    )
    dsn(parser)
    parser.add_argument("--worker", required=True, help="worker id")
    parser.add_argument(
        "--label",
        action="append",
        metavar="K=V",
        help="grant key=value (replaces the key's value; repeatable)",
    )
    parser.add_argument(
        "--remove", action="append", metavar="K", help="take the key's grant away (repeatable)"
    )
    parser.add_argument(
        "--self-labels",
        metavar="true|false",
        help="accept the declared labels as they are (true) or not (false)",
    )
    parser.set_defaults(handler=lazy("qinglong.admin_labels:worker_label"))


def worker_label(args: argparse.Namespace) -> int:
    """Apply the changes (one transaction); with none, print the grants."""
    from qinglong.db import api
    from qinglong.service import control_plane

    def action() -> dict[str, Any]:
        worker_id = uuid_arg(args.worker, "workerId")
        labels = parse_labels(args.label)
        remove = parse_removals(args.remove, labels)
        self_labels = boolean(args.self_labels, "selfLabels")
        with control_plane.connect(args.dsn) as conn:
            return control_plane.run(
                conn,
                api.label_worker(
                    worker_id=worker_id, labels=labels, remove=remove, self_labels=self_labels
                ),
            ).doc

    return guarded(action)
