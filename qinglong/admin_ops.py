"""`qinglong admin …` commands for operating it for months (SPEC §9).

Handlers only (the parsers are in `qinglong.admin_cli`): each validates its
arguments (malformed ids, numbers, states, durations → exit 2 before any SQL),
makes one `service.control_plane` call per database function and prints the
function's JSON object. Reads work with a `ql_readonly` DSN; actions need
`ql_runtime`, and the database records the acting role with each action's event.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from qinglong.admin_cli import (
    duration_s,
    guarded,
    integer,
    run_state,
    task_settings,
    uuid_arg,
)

if TYPE_CHECKING:  # the handlers import the control plane (psycopg) when they run
    from qinglong.service.control_plane import Retention

PRUNE_BATCH_MAX = 10000
DRY_RUN_BATCH = 10000


# --------------------------------------------------------------------- tasks


def task_configure(args: argparse.Namespace) -> int:
    """Apply the given settings; with none, print the current ones (a read)."""
    from qinglong.db import api
    from qinglong.service import control_plane

    def action() -> dict[str, Any]:
        task_id = uuid_arg(args.task, "taskId")
        settings = task_settings(args)
        with control_plane.connect(args.dsn) as conn:
            if settings.is_empty():
                return control_plane.run(conn, api.task_settings(task_id=task_id)).doc
            return control_plane.configure_task(conn, task_id, settings).doc

    return guarded(action)


# ---------------------------------------------------------------------- runs


def run_list(args: argparse.Namespace) -> int:
    from qinglong.db import api
    from qinglong.service import control_plane

    def action() -> dict[str, Any]:
        task_id = None if args.task is None else uuid_arg(args.task, "taskId")
        states = None if args.state is None else [run_state(s) for s in dict.fromkeys(args.state)]
        limit = integer(args.limit, "limit")
        with control_plane.connect(args.dsn) as conn:
            return control_plane.run(
                conn, api.list_runs(task_id=task_id, states=states, limit=limit, after=args.after)
            ).doc

    return guarded(action)


def run_show(args: argparse.Namespace) -> int:
    from qinglong.db import api
    from qinglong.service import control_plane

    def action() -> dict[str, Any]:
        run_id = uuid_arg(args.run, "runId")
        with control_plane.connect(args.dsn) as conn:
            return control_plane.run(conn, api.show_run(run_id=run_id)).doc

    return guarded(action)


def run_retry(args: argparse.Namespace) -> int:
    from qinglong.db import api
    from qinglong.service import control_plane

    def action() -> dict[str, Any]:
        run_id = uuid_arg(args.run, "runId")
        with control_plane.connect(args.dsn) as conn:
            return control_plane.run(conn, api.retry_run(run_id=run_id)).doc

    return guarded(action)


# ------------------------------------------------------- workers and sessions


def worker_list(args: argparse.Namespace) -> int:
    from qinglong.db import api
    from qinglong.service import control_plane

    def action() -> dict[str, Any]:
        limit = integer(args.limit, "limit")
        with control_plane.connect(args.dsn) as conn:
            return control_plane.run(conn, api.list_workers(limit=limit, after=args.after)).doc

    return guarded(action)


def worker_disable(args: argparse.Namespace) -> int:
    from qinglong.db import api
    from qinglong.service import control_plane

    def action() -> dict[str, Any]:
        worker_id = uuid_arg(args.worker, "workerId")
        with control_plane.connect(args.dsn) as conn:
            return control_plane.run(
                conn, api.disable_worker(worker_id=worker_id, drain=args.drain)
            ).doc

    return guarded(action)


def worker_enable(args: argparse.Namespace) -> int:
    from qinglong.db import api
    from qinglong.service import control_plane

    def action() -> dict[str, Any]:
        worker_id = uuid_arg(args.worker, "workerId")
        with control_plane.connect(args.dsn) as conn:
            return control_plane.run(conn, api.enable_worker(worker_id=worker_id)).doc

    return guarded(action)


def session_close(args: argparse.Namespace) -> int:
    from qinglong.db import api
    from qinglong.service import control_plane

    def action() -> dict[str, Any]:
        session_id = uuid_arg(args.session, "sessionId")
        with control_plane.connect(args.dsn) as conn:
            return control_plane.run(
                conn, api.end_session(session_id=session_id, drain=args.drain)
            ).doc

    return guarded(action)


# ------------------------------------------------------------------ retention


def retention(args: argparse.Namespace) -> Retention:
    """The prune flags."""
    from qinglong.service.control_plane import PRUNE_BATCH, Retention

    default = DRY_RUN_BATCH if args.dry_run else PRUNE_BATCH
    batch = default if args.batch is None else integer(args.batch, "batch", 1, PRUNE_BATCH_MAX)
    return Retention(
        runs_s=duration_s(args.retain_runs, "retainRuns"),
        audit_s=duration_s(args.retain_audit, "retainAudit"),
        batch=batch,
        dry_run=args.dry_run,
    )


def prune(args: argparse.Namespace) -> int:
    """One pass: batches (a transaction each) until the database reports no more."""
    from qinglong.service import control_plane

    def action() -> dict[str, Any]:
        policy = retention(args)
        with control_plane.connect(args.dsn) as conn:
            return control_plane.prune(conn, policy).as_json()

    return guarded(action)
