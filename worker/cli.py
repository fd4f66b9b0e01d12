"""``qinglong worker run`` (SPEC §8): the handler behind the lazy CLI registry.

Importing this module loads only the standard library and the light worker
modules (R-LAY-1); configuration, TLS, the schemas and the run loop are
imported when the command runs.

Exit codes: 0 drained or done, 1 run-time failure (journal locked/unsafe/
corrupt, lock compromised), 2 configuration or usage error, or an executor the
isolation rules refuse (SPEC §11, worker/run_as.py: ``isolation_refused``).
Every diagnostic is one JSON line on stderr.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace
from typing import TYPE_CHECKING

from qinglong.worker.eventlog import EventLog

if TYPE_CHECKING:
    from qinglong.worker.config import WorkerConfig

__all__ = ["add_run_arguments", "run_command"]

EXIT_CONFIG = 2


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--config", metavar="FILE", help="worker JSON config (worker/config.py)")
    source.add_argument(
        "--dev-env", metavar="FILE", help="dev-env.json of `qinglong dev up` (needs --journal)"
    )
    parser.add_argument(
        "--journal", metavar="DIR", help="journal root (overrides the config's `journal`)"
    )
    parser.add_argument("--slots", metavar="N", help="override the capabilities' slots (1..256)")
    parser.add_argument(
        "--execute",
        action="store_true",
        help="run accepted offers and drive their leases (SPEC §7; config: execute)",
    )
    parser.add_argument(
        "--run-as",
        metavar="USER",
        help="run commands as USER, by name or uid (SPEC §11; required by --execute; needs "
        "root or CAP_SETUID+CAP_SETGID; `root`, or the worker's own user, accepts running "
        "tasks unisolated)",
    )
    parser.add_argument(
        "--once", action="store_true", help="exit after the first claim settles (idle/accepted/…)"
    )
    parser.add_argument("--max-offers", metavar="N", help="exit after N accepted offers")
    parser.add_argument(
        "--exit-when-idle", action="store_true", help="exit at the first idle answer or full inbox"
    )


class UsageError(Exception):
    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


def _positive(name: str, text: str | None, high: int) -> int | None:
    if text is None:
        return None
    try:
        value = int(text, 10)
    except ValueError:
        raise UsageError("invalid_argument", f"--{name} must be an integer") from None
    if not 1 <= value <= high:
        raise UsageError("invalid_argument", f"--{name} must be 1..{high}")
    return value


def _fail(events: EventLog, error: str, reason: str, detail: str) -> int:
    events.error("worker.failed", error=error, reason=reason, detail=detail)
    return EXIT_CONFIG


def run_command(args: argparse.Namespace) -> int:
    events = EventLog(sys.stderr)
    try:
        slots = _positive("slots", args.slots, 256)
        max_offers = _positive("max-offers", args.max_offers, 1_000_000)
        if args.dev_env is not None and args.journal is None:
            raise UsageError("missing_argument", "--dev-env needs --journal DIR")
    except UsageError as exc:
        return _fail(events, "usage_error", exc.reason, exc.detail)

    from qinglong.worker.config import ConfigError, load_config_file, load_dev_env
    from qinglong.worker.faults import FaultPlan

    try:
        faults = FaultPlan.from_env(os.environ)
        if args.dev_env is not None:
            config = load_dev_env(
                args.dev_env, journal=args.journal, slots=slots, execute=args.execute
            )
        else:
            config = load_config_file(
                args.config, journal=args.journal, slots=slots, execute=args.execute
            )
    except ConfigError as exc:
        return _fail(events, "config_error", exc.reason, exc.detail)
    except ValueError as exc:
        return _fail(events, "config_error", "invalid_fault_plan", str(exc))

    if args.run_as is not None and not config.execute:
        return _fail(events, "usage_error", "missing_argument", "--run-as needs --execute")
    if config.execute:
        from qinglong.worker.run_as import RunAsError

        try:
            config = _with_sandbox(config, args, events)
        except RunAsError as exc:
            return _fail(events, "isolation_refused", exc.reason, exc.detail)

    from qinglong.worker.runner import RunOptions, run_worker

    options = RunOptions(once=args.once, max_offers=max_offers, exit_when_idle=args.exit_when_idle)
    return int(run_worker(config, options, events=events, faults=faults))


def _with_sandbox(config: WorkerConfig, args: argparse.Namespace, events: EventLog) -> WorkerConfig:
    """SPEC §11: decide whom commands run as, check the worker's secrets are out
    of that user's reach, prepare the runs directory (raises RunAsError)."""
    from qinglong.worker.run_as import (
        Sandbox,
        check_runs_dir_reachable,
        check_unreadable,
        decide,
        effective_capabilities,
        prepare_private_dir,
        prepare_runs_dir,
    )

    euid = os.geteuid()
    run_as = decide(args.run_as, euid=euid, capabilities=effective_capabilities())
    # Every mode change first: the probes below must judge the final permissions.
    prepare_private_dir(config.work_dir)
    prepare_runs_dir(config.runs_dir, shared=run_as is not None)
    if run_as is not None:
        source = args.config if args.config is not None else args.dev_env
        check_unreadable(run_as, [
            ("journal", config.journal), ("work directory", config.work_dir),
            ("credential file", config.credential_file), ("key file", config.key_file),
            ("configuration", os.path.abspath(source)),
        ])  # fmt: skip
    elif euid == 0:
        events.warning("worker.run_as_root", detail="--run-as root: tasks run as root")
    else:
        events.warning("worker.unisolated", detail="--run-as is the worker's own user: commands "
                       "can read its journal, credential and key (development only)")  # fmt: skip
    if run_as is not None:
        check_runs_dir_reachable(run_as, config.runs_dir)
    sandbox = Sandbox(config.runs_dir, run_as)
    return replace(config, executor=replace(config.executor, sandbox=sandbox))
