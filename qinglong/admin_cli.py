"""`qinglong admin …` (SPEC §8): one JSON object on stdout per command.

Expected failures print `{"error", "reason", "detail"}` on stderr and exit 1
(argparse usage errors keep argparse's exit 2). `error` is the category
(invalid_input, not_found, conflict, database_unavailable, …), `reason` the
specific code. Nothing printed ever contains a credential secret.

Heavy imports (psycopg, cryptography, the compiler) happen inside the handlers
so `qinglong --help` and the worker's commands never load them.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

LazyFactory = Callable[[str], Callable[[argparse.Namespace], int]]

EXIT_ERROR = 1
_HTTP_CATEGORY = {400: "invalid_input", 404: "not_found", 409: "conflict", 503: "unavailable"}


class AdminError(Exception):
    def __init__(self, error: str, reason: str, detail: str = "") -> None:
        super().__init__(detail or reason)
        self.error = error
        self.reason = reason
        self.detail = detail


# ------------------------------------------------------------------ parsers


def register(sub: argparse._SubParsersAction, lazy: LazyFactory) -> None:
    admin = sub.add_parser("admin", help="control-plane administration (prints JSON)")
    groups = admin.add_subparsers(dest="admin_command", required=True)
    _ca_parsers(groups, lazy)
    _worker_parsers(groups, lazy)
    _credential_parsers(groups, lazy)
    _task_parsers(groups, lazy)
    _run_parsers(groups, lazy)


def _group(groups: argparse._SubParsersAction, name: str, help_text: str) -> Any:
    parser = groups.add_parser(name, help=help_text)
    return parser.add_subparsers(dest=f"admin_{name}_command", required=True)


def _dsn(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dsn", required=True, help="PostgreSQL DSN of a ql_runtime-capable role")


def _ca_parsers(groups: argparse._SubParsersAction, lazy: LazyFactory) -> None:
    init = _group(groups, "ca", "development certificate authority").add_parser(
        "init", help="create a dev CA (refuses to overwrite)"
    )
    init.add_argument("--dir", required=True, type=Path)
    init.set_defaults(handler=lazy("qinglong.admin_cli:ca_init"))


def _worker_parsers(groups: argparse._SubParsersAction, lazy: LazyFactory) -> None:
    create = _group(groups, "worker", "worker identities").add_parser(
        "create", help="register a worker; issue its certificate and credential"
    )
    _dsn(create)
    create.add_argument("--name", required=True)
    create.add_argument("--ca-dir", required=True, type=Path)
    create.add_argument("--out", required=True, type=Path)
    create.set_defaults(handler=lazy("qinglong.admin_cli:worker_create"))


def _credential_parsers(groups: argparse._SubParsersAction, lazy: LazyFactory) -> None:
    revoke = _group(groups, "credential", "worker credentials").add_parser(
        "revoke", help="revoke a worker credential"
    )
    _dsn(revoke)
    revoke.add_argument("--credential-id", required=True)
    revoke.set_defaults(handler=lazy("qinglong.admin_cli:credential_revoke"))


def _task_parsers(groups: argparse._SubParsersAction, lazy: LazyFactory) -> None:
    publish = _group(groups, "task", "tasks and revisions").add_parser(
        "publish", help="publish a qinglong/command@v1 document as the task's revision"
    )
    _dsn(publish)
    publish.add_argument("--project", required=True)
    publish.add_argument("--name", required=True)
    publish.add_argument("--command-file", required=True, type=Path)
    publish.set_defaults(handler=lazy("qinglong.admin_cli:task_publish"))


def _run_parsers(groups: argparse._SubParsersAction, lazy: LazyFactory) -> None:
    runs = _group(groups, "run", "runs")
    enqueue = runs.add_parser("enqueue", help="enqueue runs of a task's current revision")
    _dsn(enqueue)
    enqueue.add_argument("--task", required=True)
    # Parsed in the handler so a bad number is a JSON error like every other one.
    enqueue.add_argument("--priority", default="0")
    enqueue.add_argument("--count", default="1")
    enqueue.set_defaults(handler=lazy("qinglong.admin_cli:run_enqueue"))
    cancel = runs.add_parser("cancel", help="request cancellation of a run")
    _dsn(cancel)
    cancel.add_argument("--run", required=True)
    cancel.set_defaults(handler=lazy("qinglong.admin_cli:run_cancel"))


# ----------------------------------------------------------------- plumbing


def _emit(doc: dict[str, Any]) -> int:
    sys.stdout.write(json.dumps(doc) + "\n")
    sys.stdout.flush()
    return 0


def _fail(error: str, reason: str, detail: str = "") -> int:
    doc = {"error": error, "reason": reason}
    if detail:
        doc["detail"] = detail
    sys.stderr.write(json.dumps(doc) + "\n")
    return EXIT_ERROR


def _guarded(action: Callable[[], dict[str, Any]]) -> int:
    """Run `action`, turning every expected failure into a JSON error line."""
    from qinglong.service.control_plane import ControlPlaneError

    try:
        return _emit(action())
    except AdminError as exc:
        return _fail(exc.error, exc.reason, exc.detail)
    except ControlPlaneError as exc:
        category = _HTTP_CATEGORY.get(exc.http_status or 0, exc.reason)
        return _fail(category, exc.reason, exc.detail)
    except OSError as exc:
        return _fail("io_error", type(exc).__name__, f"{exc.strerror or exc}: {exc.filename}")


def _abs(path: Path) -> str:
    return str(Path(path).absolute())


# ----------------------------------------------------------------- handlers


def ca_init(args: argparse.Namespace) -> int:
    from qinglong.service import pki

    def action() -> dict[str, Any]:
        try:
            files = pki.init_ca(args.dir)
        except pki.CaExistsError as exc:
            raise AdminError("conflict", "ca_exists", str(exc)) from None
        return {
            "caDir": _abs(args.dir),
            "certFile": _abs(files.cert_file),
            "keyFile": _abs(files.key_file),
        }

    return _guarded(action)


def worker_create(args: argparse.Namespace) -> int:
    from qinglong.service import control_plane

    def action() -> dict[str, Any]:
        with control_plane.connect(args.dsn) as conn:
            worker = control_plane.provision_worker(
                conn, args.name, args.ca_dir, Path(args.out).absolute()
            )
        return worker.as_json()

    return _guarded(action)


def credential_revoke(args: argparse.Namespace) -> int:
    from qinglong.service import control_plane

    def action() -> dict[str, Any]:
        with control_plane.connect(args.dsn) as conn:
            result = control_plane.revoke_credential(conn, args.credential_id)
        return {
            "credentialId": result.get("credentialId", args.credential_id),
            "revokedAtMs": result.get("revokedAtMs"),
        }

    return _guarded(action)


def _compile(command_file: Path) -> Any:
    from qinglong.service.compiler import CommandRejected, compile_command

    data = Path(command_file).read_bytes()
    try:
        return compile_command(data)
    except CommandRejected as exc:
        raise AdminError("invalid_input", exc.reason, exc.detail) from None


def task_publish(args: argparse.Namespace) -> int:
    from qinglong.service import control_plane

    def action() -> dict[str, Any]:
        compiled = _compile(args.command_file)
        with control_plane.connect(args.dsn) as conn:
            result = control_plane.publish_revision(
                conn, args.project, args.name, compiled.canonical
            )
        # The database hashes the bytes itself; disagreeing with our own digest
        # would mean the two sides canonicalise differently, which must be loud.
        if result.get("contentDigest") != compiled.content_digest:
            raise AdminError("database_error", "digest_mismatch", "database digest differs")
        return {key: result.get(key) for key in ("taskId", "revisionId", "revision")} | {
            "contentDigest": compiled.content_digest
        }

    return _guarded(action)


def _int_arg(name: str, text: str, low: int, high: int | None = None) -> int:
    try:
        value = int(text, 10)
    except ValueError:
        raise AdminError("invalid_input", "invalid_input", f"--{name} must be an integer") from None
    if value < low or (high is not None and value > high):
        bound = f"{low}..{high}" if high is not None else f">= {low}"
        raise AdminError("invalid_input", "invalid_input", f"--{name} must be {bound}")
    return value


def run_enqueue(args: argparse.Namespace) -> int:
    from qinglong.service import control_plane

    def action() -> dict[str, Any]:
        priority = _int_arg(
            "priority", args.priority, control_plane.SMALLINT_MIN, control_plane.SMALLINT_MAX
        )
        # The upper bound of count is the database's (QL002); 2^31-1 keeps the cast sane.
        count = _int_arg("count", args.count, 1, 2**31 - 1)
        with control_plane.connect(args.dsn) as conn:
            result = control_plane.enqueue_runs(conn, args.task, priority, count)
        return {"runIds": list(result.get("runIds") or [])}

    return _guarded(action)


def run_cancel(args: argparse.Namespace) -> int:
    from qinglong.service import control_plane

    def action() -> dict[str, Any]:
        with control_plane.connect(args.dsn) as conn:
            result = control_plane.cancel_run(conn, args.run)
        return {
            "runId": result.get("runId", args.run),
            "state": result.get("state"),
            "cancelRequested": result.get("cancelRequested"),
        }

    return _guarded(action)
