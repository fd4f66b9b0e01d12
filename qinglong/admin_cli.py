"""`qinglong admin …` (SPEC §8, §9): one JSON object on stdout per command.

Expected failures print `{"error", "reason", "detail"}` on stderr (plus
`field`, the wire name of the argument at fault, for invalid input). `error` is
the category (invalid_input, not_found, conflict, database_unavailable, …),
`reason` the specific code (e.g. out_of_bounds, illegal_transition). Exit
status: 2 for invalid input (refused before or by the database; nothing is
changed), like argparse's usage errors; 1 for every other failure. Nothing
printed ever contains a credential secret.

The §9 operations commands (task configure, run list/show/retry, worker
list/disable/enable, session close, prune) live in `qinglong.admin_ops`.

Heavy imports (psycopg, cryptography, the compiler) happen inside the handlers
so `qinglong --help` and the worker's commands never load them.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qinglong.cli import Subparsers
from qinglong.dsn_option import add_dsn_argument

if TYPE_CHECKING:  # the handlers import the control plane (psycopg) when they run
    from qinglong.service.control_plane import Schedule, TaskSettings

LazyFactory = Callable[[str], Callable[[argparse.Namespace], int]]

EXIT_ERROR = 1
EXIT_INVALID = 2
INVALID = "invalid_input"
_HTTP_CATEGORY = {400: INVALID, 404: "not_found", 409: "conflict", 503: "unavailable"}
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MAX = 2**63 - 1
RUN_STATES = ("queued", "dispatching", "starting", "running", "succeeded", "failed", "cancelled")
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_OPS = "qinglong.admin_ops:"


class AdminError(Exception):
    def __init__(self, error: str, reason: str, detail: str = "", field: str | None = None) -> None:
        super().__init__(detail or reason)
        self.error = error
        self.reason = reason
        self.detail = detail
        self.field = field


def invalid(field: str, detail: str, reason: str = INVALID) -> AdminError:
    """An invalid-input refusal naming the argument by its wire name."""
    return AdminError(INVALID, reason, detail, field)


# ------------------------------------------------------------------ parsers


def register(sub: Subparsers, lazy: LazyFactory) -> None:
    admin = sub.add_parser("admin", help="control-plane administration (prints JSON)")
    groups = admin.add_subparsers(dest="admin_command", required=True)
    _ca_parsers(groups, lazy)
    _worker_parsers(groups, lazy)
    _credential_parsers(groups, lazy)
    _task_parsers(groups, lazy)
    _run_parsers(groups, lazy)
    _session_parsers(groups, lazy)
    _prune_parser(groups, lazy)
    from qinglong import admin_tokens

    admin_tokens.add_parsers(groups, lazy, _dsn)
    from qinglong import admin_secrets

    admin_secrets.add_parsers(groups, lazy, _dsn)
    from qinglong import admin_certs

    admin_certs.add_parsers(groups, lazy, _dsn)


def _group(groups: Subparsers, name: str, help_text: str) -> Any:
    parser = groups.add_parser(name, help=help_text)
    return parser.add_subparsers(dest=f"admin_{name}_command", required=True)


def _dsn(parser: argparse.ArgumentParser, read: bool = False) -> None:
    role = "a ql_readonly or ql_runtime" if read else "a ql_runtime-capable"
    add_dsn_argument(parser, help=f"PostgreSQL DSN of {role} role")


def _page(parser: argparse.ArgumentParser, default_limit: int, most: int) -> None:
    parser.add_argument(
        "--limit",
        default=str(default_limit),
        help=f"rows per page, 1..{most} (default {default_limit})",
    )
    parser.add_argument("--after", help="the `next` cursor of the previous page")


def _ca_parsers(groups: Subparsers, lazy: LazyFactory) -> None:
    init = _group(groups, "ca", "development certificate authority").add_parser(
        "init", help="create a dev CA (refuses to overwrite)"
    )
    init.add_argument("--dir", required=True, type=Path)
    init.set_defaults(handler=lazy("qinglong.admin_cli:ca_init"))


def _worker_parsers(groups: Subparsers, lazy: LazyFactory) -> None:
    workers = _group(groups, "worker", "worker identities")
    create = workers.add_parser(
        "create", help="register a worker; issue its certificate and credential"
    )
    _dsn(create)
    create.add_argument("--name", required=True)
    create.add_argument("--ca-dir", required=True, type=Path)
    create.add_argument("--out", required=True, type=Path)
    create.add_argument(
        "--credential-ttl",
        default="90d",
        help="the credential's lifetime, N[smhd] (10s..3650d, default 90d); "
        "the worker rotates it itself at 75 %%",
    )
    from qinglong import admin_labels

    admin_labels.add_create_flags(create)
    from qinglong import admin_pools

    admin_pools.add_create_flags(create)
    create.set_defaults(handler=lazy("qinglong.admin_cli:worker_create"))
    admin_labels.add_label_parser(workers, lazy, _dsn)
    admin_pools.add_parsers(groups, workers, lazy, _dsn)
    from qinglong import admin_certs

    admin_certs.add_worker_parser(workers, lazy, _dsn)
    listing = workers.add_parser("list", help="workers, credentials and active sessions")
    _dsn(listing, read=True)
    _page(listing, 1000, 1000)
    listing.set_defaults(handler=lazy(_OPS + "worker_list"))
    for action, text in (
        ("disable", "refuse every credential, close the session"),
        ("enable", "accept the worker's credentials again"),
    ):
        parser = workers.add_parser(action, help=text)
        _dsn(parser)
        parser.add_argument("--worker", required=True, help="worker id")
        if action == "disable":
            parser.add_argument(
                "--drain",
                action="store_true",
                help=(
                    "let started runs finish: no new work, unstarted leases released, "
                    "the session closes when its last started lease ends"
                ),
            )
        parser.set_defaults(handler=lazy(_OPS + f"worker_{action}"))


def _credential_parsers(groups: Subparsers, lazy: LazyFactory) -> None:
    revoke = _group(groups, "credential", "worker credentials").add_parser(
        "revoke", help="revoke a worker credential"
    )
    _dsn(revoke)
    revoke.add_argument("--credential-id", required=True)
    revoke.set_defaults(handler=lazy("qinglong.admin_cli:credential_revoke"))


def _task_parsers(groups: Subparsers, lazy: LazyFactory) -> None:
    tasks = _group(groups, "task", "tasks and revisions")
    publish = tasks.add_parser(
        "publish", help="publish a qinglong/command@v1 document as the task's revision"
    )
    _dsn(publish)
    publish.add_argument("--project", required=True)
    publish.add_argument("--name", required=True)
    publish.add_argument("--command-file", required=True, type=Path)
    _setting_flags(publish)
    from qinglong import admin_pools

    admin_pools.add_publish_flag(publish)
    from qinglong import admin_signing

    admin_signing.add_publish_flag(publish)
    admin_signing.add_parsers(groups, lazy)
    publish.set_defaults(handler=lazy("qinglong.admin_cli:task_publish"))
    configure = tasks.add_parser("configure", help="change a task's run policy; no flags: print it")
    _dsn(configure)
    configure.add_argument("--task", required=True, help="task id")
    _setting_flags(configure)
    configure.set_defaults(handler=lazy(_OPS + "task_configure"))


# (flag, wire field, help); parsed in the handlers so a bad value is a JSON error.
SETTING_FLAGS = (
    ("--lease-ttl-s", "leaseTtlS", "lease TTL of attempts claimed from now on, 5..86400"),
    ("--max-attempts", "maxAttempts", "attempts per run, 1..100"),
    ("--retry-base-ms", "retryBaseMs", "first retry backoff, 100..3600000"),
    ("--retry-cap-ms", "retryCapMs", "largest retry backoff, retry base..86400000"),
    ("--enabled", "enabled", "true|false: a disabled task refuses new enqueues"),
    (
        "--log-limit-bytes",
        "logLimitBytes",
        "live log cap of attempts claimed from now on, 1024..67108864 (default 4 MiB)",
    ),
)


def _setting_flags(parser: argparse.ArgumentParser) -> None:
    for flag, _field, text in SETTING_FLAGS:
        parser.add_argument(flag, help=text)


def _run_parsers(groups: Subparsers, lazy: LazyFactory) -> None:
    runs = _group(groups, "run", "runs")
    enqueue = runs.add_parser("enqueue", help="enqueue runs of a task's current revision")
    _dsn(enqueue)
    enqueue.add_argument("--task", required=True)
    # Parsed in the handler so a bad number is a JSON error like every other one.
    enqueue.add_argument("--priority", default="0")
    enqueue.add_argument("--count", default="1")
    when = enqueue.add_mutually_exclusive_group()
    when.add_argument("--delay-s", help="offer the runs no earlier than N seconds from now")
    when.add_argument("--not-before-ms", help="offer the runs no earlier than this epoch ms")
    enqueue.add_argument("--key", help="idempotency key (1..128 printable chars; count 1)")
    enqueue.set_defaults(handler=lazy("qinglong.admin_cli:run_enqueue"))
    cancel = runs.add_parser(
        "cancel", help="cancel one run (--run) or a task's runs in a state (--task --state)"
    )
    _dsn(cancel)
    cancel.add_argument("--run", help="run id")
    cancel.add_argument("--task", help="task id (bulk, with --state)")
    cancel.add_argument("--state", help="bulk: the state to cancel (queued)")
    cancel.add_argument(
        "--wait-ms",
        help="bulk: how long, in all, to wait for runs another "
        "transaction holds, 0..60000 (default 5000); what is still held "
        "then is listed in notCancelled and the exit status is 1",
    )
    cancel.set_defaults(handler=lazy("qinglong.admin_cli:run_cancel"))
    _run_inspection_parsers(runs, lazy)


def _run_inspection_parsers(runs: Subparsers, lazy: LazyFactory) -> None:
    listing = runs.add_parser("list", help="runs, newest first, in keyset pages")
    _dsn(listing, read=True)
    listing.add_argument("--task", help="only this task's runs")
    listing.add_argument(
        "--state",
        action="extend",
        nargs="+",
        metavar="S",
        help=f"only these states: {', '.join(RUN_STATES)}",
    )
    _page(listing, 100, 1000)
    listing.set_defaults(handler=lazy(_OPS + "run_list"))
    show = runs.add_parser("show", help="a run with its attempts and latest events")
    _dsn(show, read=True)
    show.add_argument("--run", required=True, help="run id")
    show.set_defaults(handler=lazy(_OPS + "run_show"))
    from qinglong import admin_logs

    admin_logs.add_parser(runs, lazy, _dsn)
    retry = runs.add_parser("retry", help="give a failed or cancelled run a new attempt")
    _dsn(retry)
    retry.add_argument("--run", required=True, help="run id")
    retry.set_defaults(handler=lazy(_OPS + "run_retry"))


def _session_parsers(groups: Subparsers, lazy: LazyFactory) -> None:
    close = _group(groups, "session", "worker sessions").add_parser(
        "close", help="close a worker session; its unstarted leases are released"
    )
    _dsn(close)
    close.add_argument("--session", required=True, help="session id")
    close.add_argument(
        "--drain",
        action="store_true",
        help=(
            "no new offers, unstarted leases released; started runs may finish and the "
            "session closes when its last started lease ends"
        ),
    )
    close.set_defaults(handler=lazy(_OPS + "session_close"))


def _prune_parser(groups: Subparsers, lazy: LazyFactory) -> None:
    prune = groups.add_parser(
        "prune",
        help="delete terminal runs, audit rows, ended sessions and worker/session "
        "events past retention and unused placement classes (one pass)",
    )
    _dsn(prune)
    prune.add_argument(
        "--retain-runs",
        default="14d",
        help="keep terminal runs finished within N[smhd], and sessions "
        "and worker/session events that ended within it (default 14d)",
    )
    prune.add_argument(
        "--retain-audit",
        default="30d",
        help="keep security_audit rows within N[smhd] (default 30d)",
    )
    prune.add_argument(
        "--batch",
        help="rows per transaction, 1..10000 (default 1000; "
        "a dry run counts one batch, default 10000)",
    )
    prune.add_argument(
        "--dry-run",
        action="store_true",
        help="count what the first batch would delete; delete nothing",
    )
    prune.set_defaults(handler=lazy(_OPS + "prune"))


# ----------------------------------------------------------------- plumbing


def _emit(doc: dict[str, Any]) -> int:
    sys.stdout.write(json.dumps(doc) + "\n")
    sys.stdout.flush()
    return 0


def _fail(error: str, reason: str, detail: str = "", field: str | None = None) -> int:
    doc: dict[str, Any] = {"error": error, "reason": reason}
    if error == INVALID:
        doc["field"] = field
    if detail:
        doc["detail"] = detail
    sys.stderr.write(json.dumps(doc) + "\n")
    return EXIT_INVALID if error == INVALID else EXIT_ERROR


def guarded(
    action: Callable[[], dict[str, Any]], emit: Callable[[dict[str, Any]], int] = _emit
) -> int:
    """Run `action`, turning every expected failure into a JSON error line; `emit`
    prints its document (a command that printed its own output passes a no-op)."""
    from qinglong.service.control_plane import ControlPlaneError

    try:
        return emit(action())
    except AdminError as exc:
        return _fail(exc.error, exc.reason, exc.detail, exc.field)
    except ControlPlaneError as exc:
        category = _HTTP_CATEGORY.get(exc.http_status or 0, exc.reason)
        return _fail(category, exc.reason, exc.detail, exc.field)
    except OSError as exc:
        return _fail("io_error", type(exc).__name__, f"{exc.strerror or exc}: {exc.filename}")


def _abs(path: Path) -> str:
    return str(Path(path).absolute())


# ------------------------------------------------------------ argument values
# Each refuses a malformed value before any SQL with the argument's wire name;
# the bounds of settings and pages are the database's (QL006 names the field).


def integer(text: str, field: str, low: int = INT32_MIN, high: int = INT32_MAX) -> int:
    try:
        value = int(text, 10)
    except ValueError:
        raise invalid(field, f"{field} must be an integer") from None
    if not low <= value <= high:
        raise invalid(field, f"{field} must be between {low} and {high}", "out_of_bounds")
    return value


def optional_integer(
    text: str | None, field: str, low: int = INT32_MIN, high: int = INT32_MAX
) -> int | None:
    return None if text is None else integer(text, field, low, high)


def uuid_arg(text: str, field: str) -> str:
    if not _UUID.match(text):
        raise invalid(field, f"{field} must be a lowercase canonical UUID")
    return text


def boolean(text: str | None, field: str) -> bool | None:
    if text is None:
        return None
    if text not in ("true", "false"):
        raise invalid(field, f"{field} must be true or false")
    return text == "true"


def run_state(text: str, field: str = "state") -> str:
    if text not in RUN_STATES:
        raise invalid(field, f"{field} must be one of {', '.join(RUN_STATES)}")
    return text


def duration_s(text: str, field: str) -> int:
    from qinglong.durations import parse_duration_s

    try:
        return parse_duration_s(text)
    except ValueError as exc:
        raise invalid(field, f"{field}: {exc}") from None


def task_settings(args: argparse.Namespace) -> TaskSettings:
    """The setting flags (None: not given)."""
    from qinglong.service.control_plane import TaskSettings

    return TaskSettings(
        lease_ttl_s=optional_integer(args.lease_ttl_s, "leaseTtlS"),
        max_attempts=optional_integer(args.max_attempts, "maxAttempts"),
        retry_base_ms=optional_integer(args.retry_base_ms, "retryBaseMs"),
        retry_cap_ms=optional_integer(args.retry_cap_ms, "retryCapMs"),
        enabled=boolean(args.enabled, "enabled"),
        log_limit_bytes=optional_integer(args.log_limit_bytes, "logLimitBytes"),
    )


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

    return guarded(action)


def worker_create(args: argparse.Namespace) -> int:
    from qinglong.admin_labels import parse_labels
    from qinglong.admin_pools import parse_pools
    from qinglong.service import control_plane

    def action() -> dict[str, Any]:
        labels = parse_labels(args.label)
        pools = parse_pools(args.pool)
        ttl_s = duration_s(args.credential_ttl, "credentialTtlS")
        with control_plane.connect(args.dsn) as conn:
            worker = control_plane.provision_worker(
                conn,
                args.name,
                args.ca_dir,
                Path(args.out).absolute(),
                labels=labels,
                self_labels=args.self_labels,
                pools=pools,
                credential_ttl_s=ttl_s,
            )
        return worker.as_json()

    return guarded(action)


def credential_revoke(args: argparse.Namespace) -> int:
    from qinglong.db import api
    from qinglong.service import control_plane

    def action() -> dict[str, Any]:
        with control_plane.connect(args.dsn) as conn:
            result = control_plane.run(
                conn, api.revoke_credential(credential_id=args.credential_id)
            )
        return {
            "credentialId": result.credential_id,
            "revokedAtMs": result.revoked_at_ms,
        }

    return guarded(action)


def _compile(command_file: Path) -> Any:
    from qinglong.service.compiler import CommandRejected, compile_command

    data = Path(command_file).read_bytes()
    try:
        return compile_command(data)
    except CommandRejected as exc:
        raise AdminError(INVALID, exc.reason, exc.detail, "commandFile") from None


def task_publish(args: argparse.Namespace) -> int:
    from qinglong.service import control_plane

    def action() -> dict[str, Any]:
        from qinglong.admin_pools import pool_ref
        from qinglong.admin_signing import revision_signer

        settings = task_settings(args)
        pool = None if args.pool is None else pool_ref(args.pool, wildcard=False)
        compiled = _compile(args.command_file)
        sign = revision_signer(args.sign_key, compiled)
        with control_plane.connect(args.dsn) as conn:
            result = control_plane.publish_task(
                conn, args.project, args.name, compiled.canonical, settings, pool, sign
            )
        # The database hashes the bytes itself; disagreeing with our own digest
        # would mean the two sides canonicalise differently, which must be loud.
        if result.content_digest != compiled.content_digest:
            raise AdminError("database_error", "digest_mismatch", "database digest differs")
        return {
            key: result.doc.get(key)
            for key in ("taskId", "revisionId", "revision", "pool", "signatureKid")
        } | {"contentDigest": compiled.content_digest}

    return guarded(action)


def _schedule(args: argparse.Namespace) -> Schedule:
    from qinglong.service.control_plane import Schedule

    # Only what fits a bigint is checked here; the bounds are the database's (QL006).
    delay_s = optional_integer(args.delay_s, "delayMs", -(INT64_MAX // 1000), INT64_MAX // 1000)
    return Schedule(
        not_before_ms=optional_integer(args.not_before_ms, "notBeforeMs", -INT64_MAX, INT64_MAX),
        delay_ms=None if delay_s is None else delay_s * 1000,
        key=args.key,
    )


def run_enqueue(args: argparse.Namespace) -> int:
    from qinglong.service import control_plane

    def action() -> dict[str, Any]:
        task_id = uuid_arg(args.task, "taskId")
        priority = integer(
            args.priority, "priority", control_plane.SMALLINT_MIN, control_plane.SMALLINT_MAX
        )
        # The upper bound of count is the database's (QL002).
        count = integer(args.count, "count", 1)
        schedule = _schedule(args)
        with control_plane.connect(args.dsn) as conn:
            result = control_plane.enqueue_runs(conn, task_id, priority, count, schedule)
        return {"runIds": list(result.run_ids), "existing": result.existing}

    return guarded(action)


def run_cancel(args: argparse.Namespace) -> int:
    """`--run ID` cancels one run; `--task ID --state queued` every such run of the task
    (exit 1 when some could not be cancelled: they are listed in notCancelled)."""
    result: dict[str, Any] = {}

    def action() -> dict[str, Any]:
        result.update(_cancel(args))
        return result

    code = guarded(action)
    return EXIT_ERROR if code == 0 and result.get("notCancelled") else code


def _cancel(args: argparse.Namespace) -> dict[str, Any]:
    if args.run is None and args.task is None:
        raise invalid("runId", "give --run, or --task with --state")
    if args.run is not None and (
        args.task is not None or args.state is not None or args.wait_ms is not None
    ):
        raise invalid("runId", "--run cannot be combined with --task/--state/--wait-ms")
    return _cancel_one(args.dsn, args.run) if args.task is None else _cancel_bulk(args)


def _cancel_one(dsn: str, run: str) -> dict[str, Any]:
    from qinglong.db import api
    from qinglong.service import control_plane

    run_id = uuid_arg(run, "runId")
    with control_plane.connect(dsn) as conn:
        result = control_plane.run(conn, api.cancel_run(run_id=run_id))
    return {
        "runId": result.run_id,
        "state": result.state,
        "cancelRequested": result.cancel_requested,
    }


def _cancel_bulk(args: argparse.Namespace) -> dict[str, Any]:
    from qinglong.db import api
    from qinglong.service import control_plane

    task_id = uuid_arg(args.task, "taskId")
    if args.state is None:
        raise invalid("state", "--task needs --state (queued)")
    state = run_state(args.state)
    wait_ms = 5000 if args.wait_ms is None else integer(args.wait_ms, "waitMs", 0, 60000)
    with control_plane.connect(args.dsn) as conn:
        return control_plane.run(
            conn, api.cancel_runs(task_id=task_id, state=state, wait_ms=wait_ms)
        ).doc
