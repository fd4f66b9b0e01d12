"""`qinglong run enqueue|show|list|cancel|retry|log` (SPEC §13.5): the producer API
from the command line, through `qinglong.client`. `run log` prints the log's text
as `admin run log` does (SPEC §15.3; `--json` for one object).

One JSON object on stdout per command: the API's answer as received. Expected
failures print one JSON object on stderr, as `qinglong admin` does: for an
argument refused before sending `{"error": "invalid_input", "reason", "field",
"detail"}`; for an API error the body's `{"error", "reason", "status",
"detail"?}`; for no answer `{"error": "unavailable", "reason": "connect_failed" |
"timeout" | "tls_verify_failed", "detail"}`. Exit status: 2 for invalid input
(refused here, a token or CA file that cannot be used, or a 400/413 answer), 1 for
every other failure. The token is read from `--token-file` (0600) and never printed.

Only argparse is imported while building the parser: httpx (the `client` extra)
loads when a `run` command runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qinglong.cli import Subparsers

if TYPE_CHECKING:
    from qinglong.client import Client

LazyFactory = Callable[[str], Callable[[argparse.Namespace], int]]

EXIT_ERROR = 1
EXIT_INVALID = 2
INVALID = "invalid_input"
_HANDLERS = "qinglong.run_cli:"
# API statuses that mean "the request itself is bad" (exit 2, like argparse).
_INVALID_STATUSES = (400, 413)


def register(sub: Subparsers, lazy: LazyFactory) -> None:
    runs = sub.add_parser(
        "run",
        help="enqueue and inspect runs through the producer API (prints JSON)",
        description="Talk to `qinglong api serve` with a project token (qinglong.client).",
    )
    commands = runs.add_subparsers(dest="run_command", required=True)
    enqueue = _command(commands, "enqueue", "enqueue runs of a task (POST /v1/runs)")
    enqueue.add_argument("--task", required=True, help='task id or "project/name"')
    # Numbers are parsed in the handler so a bad one is a JSON error like every other.
    enqueue.add_argument("--count", help="runs to enqueue (default 1)")
    enqueue.add_argument("--priority", help="priority (default 0)")
    when = enqueue.add_mutually_exclusive_group()
    when.add_argument("--delay-ms", help="offer the runs no earlier than N ms from now")
    when.add_argument("--not-before-ms", help="offer the runs no earlier than this epoch ms")
    enqueue.add_argument("--key", help="idempotency key (1..128 printable chars; count 1)")
    enqueue.set_defaults(handler=lazy(_HANDLERS + "enqueue"))
    for name, text in (
        ("show", "a run with its attempts and events (GET /v1/runs/ID)"),
        ("cancel", "cancel a run (POST /v1/runs/ID/cancel)"),
        ("retry", "give a failed or cancelled run a new attempt (POST /v1/runs/ID/retry)"),
    ):
        parser = _command(commands, name, text)
        parser.add_argument("--run", required=True, help="run id")
        parser.set_defaults(handler=lazy(_HANDLERS + name))
    listing = _command(commands, "list", "runs, newest first, in pages (GET /v1/runs)")
    listing.add_argument("--task", help='only this task\'s runs (id or "project/name")')
    listing.add_argument(
        "--state", action="extend", nargs="+", metavar="S", help="only runs in these states"
    )
    listing.add_argument("--limit", help="runs per page, 1..1000 (default 100)")
    listing.add_argument("--after", help="the `next` cursor of the previous page")
    listing.set_defaults(handler=lazy(_HANDLERS + "list_runs"))
    log = _command(
        commands,
        "log",
        "an attempt's live log as stored, then the truncated/"
        "incomplete line if any (GET /v1/runs/ID/log)",
    )
    log.add_argument("--run", required=True, help="run id")
    log.add_argument("--attempt", help="attempt number (default: the run's latest)")
    log.add_argument(
        "--follow",
        action="store_true",
        help="print new text as it is stored until the attempt ends",
    )
    log.add_argument(
        "--json",
        action="store_true",
        help="one JSON object {runId, attemptNumber, text, storedBytes, "
        "logBytes, truncated, complete} instead of the text",
    )
    log.set_defaults(handler=lazy(_HANDLERS + "log"))


def _command(commands: Subparsers, name: str, text: str) -> argparse.ArgumentParser:
    parser = commands.add_parser(name, help=text)
    parser.add_argument("--api", required=True, help="the producer API's base URL (https://…)")
    parser.add_argument(
        "--token-file", required=True, type=Path, help="file holding the project token (mode 0600)"
    )
    parser.add_argument(
        "--ca-file",
        type=Path,
        help="CA certificate(s) to verify the API with (default: system store)",
    )
    parser.add_argument("--timeout-s", default="30", help="per-request timeout (default 30)")
    return parser


# ----------------------------------------------------------------- plumbing


class _Invalid(Exception):
    def __init__(self, field: str, detail: str) -> None:
        super().__init__(detail)
        self.field = field
        self.detail = detail


def _integer(text: str | None, field: str) -> int | None:
    if text is None:
        return None
    try:
        return int(text, 10)
    except ValueError:
        raise _Invalid(field, f"{field} must be an integer") from None


def _timeout(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value <= 3600:
        raise _Invalid("timeoutS", "timeoutS must be a number of seconds in (0, 3600]")
    return value


def _fail(doc: dict[str, Any], code: int) -> int:
    sys.stderr.write(json.dumps(doc) + "\n")
    sys.stderr.flush()
    return code


def _print_json(doc: Any) -> None:
    sys.stdout.write(json.dumps(doc) + "\n")
    sys.stdout.flush()


def guarded(
    args: argparse.Namespace,
    action: Callable[[Client], Any],
    emit: Callable[[Any], None] = _print_json,
) -> int:
    """Open a client from the flags, run `action`, print its document (`emit`) or the
    error."""
    from qinglong import client as api

    try:
        timeout_s = _timeout(args.timeout_s)
        with api.Client(
            args.api, token_file=args.token_file, ca_file=args.ca_file, timeout_s=timeout_s
        ) as producer:
            doc = action(producer)
    except (_Invalid, api.ClientInputError, api.ClientSetupError) as exc:
        return _fail(
            {"error": INVALID, "reason": INVALID, "field": exc.field, "detail": str(exc)},
            EXIT_INVALID,
        )
    except api.ApiError as exc:
        code = EXIT_INVALID if exc.status in _INVALID_STATUSES else EXIT_ERROR
        return _fail(exc.as_json(), code)
    except api.TransportError as exc:
        return _fail({"error": "unavailable", "reason": exc.reason, "detail": str(exc)}, EXIT_ERROR)
    except api.ResponseError as exc:
        return _fail(
            {
                "error": "bad_response",
                "reason": "bad_response",
                "status": exc.status,
                "detail": str(exc),
            },
            EXIT_ERROR,
        )
    emit(doc)
    return 0


# ----------------------------------------------------------------- handlers


def enqueue(args: argparse.Namespace) -> int:
    def action(producer: Client) -> dict[str, Any]:
        result = producer.enqueue(
            args.task,
            count=_integer(args.count, "count"),
            priority=_integer(args.priority, "priority"),
            delay_ms=_integer(args.delay_ms, "delayMs"),
            not_before_ms=_integer(args.not_before_ms, "notBeforeMs"),
            key=args.key,
        )
        return {"runIds": result.run_ids, "existing": result.existing}

    return guarded(args, action)


def show(args: argparse.Namespace) -> int:
    return guarded(args, lambda producer: producer.show(args.run).raw)


def cancel(args: argparse.Namespace) -> int:
    return guarded(args, lambda producer: producer.cancel(args.run).raw)


def retry(args: argparse.Namespace) -> int:
    return guarded(args, lambda producer: producer.retry(args.run).raw)


def list_runs(args: argparse.Namespace) -> int:
    def action(producer: Client) -> dict[str, Any]:
        return producer.list(
            task=args.task, state=args.state, after=args.after, limit=_integer(args.limit, "limit")
        ).raw

    return guarded(args, action)


def log(args: argparse.Namespace) -> int:
    """As `admin run log` (SPEC §15.3), through the API: the text as stored and the
    trailer line; `--json` the whole log as one object; `--follow` streams."""
    from qinglong.log_text import trailer_block, whole

    def action(producer: Client) -> Any:
        attempt = _integer(args.attempt, "attempt")
        if attempt is not None and attempt < 1:
            raise _Invalid("attempt", "attempt must be an integer >= 1")
        pages = (
            producer.follow_log(args.run, attempt=attempt)
            if args.follow
            else producer.log_pages(args.run, attempt=attempt)
        )
        if args.json:
            return whole(list(pages))
        last_char, last = "", None
        for last in pages:
            if last.text:
                sys.stdout.buffer.write(last.text.encode("utf-8"))
                sys.stdout.buffer.flush()
                last_char = last.text[-1]
        line = None if last is None else last.trailer()
        if line is not None:
            sys.stdout.buffer.write(trailer_block(last_char, line).encode("utf-8"))
            sys.stdout.buffer.flush()
        return None

    try:
        return guarded(args, action, _print_json if args.json else _printed)
    except KeyboardInterrupt:
        return 130


def _printed(_doc: Any) -> None:
    """The command printed its output itself."""
