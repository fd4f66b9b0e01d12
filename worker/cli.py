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
        "--run-as-range",
        metavar="UID_FIRST-UID_LAST",
        help="every concurrent run gets a uid (and gid) of its own from this range, which "
        "must have no passwd/group entries and hold at least --slots uids (SPEC §14.4; "
        "config: executor.runAsRange; excludes --run-as)",
    )
    parser.add_argument(
        "--max-processes",
        metavar="N",
        help="per run: processes and threads (config: executor.limits)",
    )
    parser.add_argument(
        "--max-open-files",
        metavar="N",
        help="per run: open files of each process (config: executor.limits)",
    )
    parser.add_argument("--max-memory", metavar="BYTES",
                        help="per run: memory (config: executor.limits)")  # fmt: skip
    parser.add_argument(
        "--once", action="store_true", help="exit after the first claim settles (idle/accepted/…)"
    )
    parser.add_argument("--max-offers", metavar="N", help="exit after N accepted offers")
    parser.add_argument(
        "--exit-when-idle", action="store_true", help="exit at the first idle answer or full inbox"
    )
    parser.add_argument(
        "--trust-keys",
        metavar="FILE",
        help=(
            "JWKS of the publishers' Ed25519 keys that sign revisions (SPEC §16.1; config: "
            "trust.keysFile)"
        ),
    )
    parser.add_argument(
        "--trust-policy",
        choices=("enforce", "warn", "off"),
        help=(
            "unsigned or untrusted revisions: enforce = never started (start_failed "
            "signature_invalid), warn = logged and run (default), off = not checked "
            "(config: trust.policy)"
        ),
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

    try:
        config = _with_trust(config, args)
    except ConfigError as exc:
        return _fail(events, "config_error", exc.reason, exc.detail)
    if args.run_as is not None and not config.execute:
        return _fail(events, "usage_error", "missing_argument", "--run-as needs --execute")
    if args.run_as_range is not None and not config.execute:
        return _fail(events, "usage_error", "missing_argument", "--run-as-range needs --execute")
    try:
        config = _with_limit_flags(config, args)
    except ConfigError as exc:
        return _fail(events, "usage_error", exc.reason, exc.detail)
    if config.execute:
        from qinglong.worker.run_as import RunAsError

        try:
            config = _with_sandbox(config, args, events)
        except RunAsError as exc:
            return _fail(events, "isolation_refused", exc.reason, exc.detail)

    from qinglong.worker.runner import RunOptions, run_worker

    options = RunOptions(once=args.once, max_offers=max_offers, exit_when_idle=args.exit_when_idle)
    return int(run_worker(config, options, events=events, faults=faults))


def _with_limit_flags(config: WorkerConfig, args: argparse.Namespace) -> WorkerConfig:
    """--max-processes/--max-open-files/--max-memory over executor.limits."""
    from qinglong.worker.config import parse_limits

    flags = {"maxProcesses": args.max_processes, "maxOpenFiles": args.max_open_files,
             "maxMemoryBytes": args.max_memory}  # fmt: skip
    doc: dict[str, object] = {}
    for key, text in flags.items():
        if text is not None:
            doc[key] = int(text, 10) if text.isdigit() else text
    if not doc:
        return config
    limits = parse_limits(doc, config.executor.limits)
    return replace(config, executor=replace(config.executor, limits=limits))


def _with_sandbox(config: WorkerConfig, args: argparse.Namespace, events: EventLog) -> WorkerConfig:
    """SPEC §11: decide whom commands run as, check the worker's secrets are out
    of that user's reach, prepare the runs directory (raises RunAsError)."""
    from qinglong.worker.run_as import (
        RunAsError,
        Sandbox,
        check_runs_dir_reachable,
        check_unreadable,
        decide,
        effective_capabilities,
        prepare_private_dir,
        prepare_runs_dir,
    )
    from qinglong.worker.run_limits import Mechanism, choose

    euid = os.geteuid()
    uid_range = args.run_as_range or config.executor.run_as_range
    if uid_range is not None:
        if args.run_as is not None:
            raise RunAsError("run_as_conflict", "--run-as and --run-as-range (executor.runAsRange) "
                             "exclude each other: one user for every run, or a uid of its own "
                             "for each")  # fmt: skip
        return _with_range_sandbox(config, args, events, uid_range)
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
    limits = None
    if run_as is not None:  # one user shared by every run: processes not limited by rlimit
        limits = choose(config.executor.limits, config.executor.cgroup_parent)
        if limits.mechanism is Mechanism.RLIMIT:
            limits = replace(limits, max_processes=None)
    sandbox = Sandbox(config.runs_dir, run_as, limits=limits)
    return replace(config, executor=replace(config.executor, sandbox=sandbox))


def _with_range_sandbox(
    config: WorkerConfig, args: argparse.Namespace, events: EventLog, text: str
) -> WorkerConfig:
    """SPEC §14.4: a uid of its own for every run (worker/uid_pool.py). The
    start-time probes run as the range's first uid: no uid of the range has a
    passwd or group entry, supplementary groups or (checked here) a file of the
    worker's, so the kernel decides the same for each of them."""
    from qinglong.worker.process_tree import private_mounts_permitted
    from qinglong.worker.run_as import (
        RunAs,
        RunAsError,
        Sandbox,
        check_runs_dir_reachable,
        check_unreadable,
        effective_capabilities,
        may_switch,
        prepare_private_dir,
        prepare_runs_dir,
    )
    from qinglong.worker.run_limits import choose
    from qinglong.worker.uid_pool import (
        PRIVATE_PLACES,
        UidPool,
        check_owners,
        check_range,
        parse_range,
    )

    euid = os.geteuid()
    uids = parse_range(text)
    slots = int(config.capabilities.get("slots", 1))
    if not may_switch(euid, effective_capabilities()):
        raise RunAsError("no_privilege_to_switch",
                         f"--run-as-range {uids.text()} needs root or CAP_SETUID+CAP_SETGID "
                         "(systemd: AmbientCapabilities=CAP_SETUID CAP_SETGID)")  # fmt: skip
    check_range(uids, slots=slots, euid=euid)
    prepare_private_dir(config.work_dir)
    prepare_runs_dir(config.runs_dir, shared=True)
    source = args.config if args.config is not None else args.dev_env
    named = [("journal", config.journal), ("work directory", config.work_dir),
             ("credential file", config.credential_file), ("key file", config.key_file),
             ("configuration", os.path.abspath(source))]  # fmt: skip
    check_owners(uids, named)
    probe = RunAs(f"uid {uids.first}", uids.first, uids.first)
    check_unreadable(probe, named)
    check_runs_dir_reachable(probe, config.runs_dir)
    pool = UidPool.open(uids, config.runs_dir, slots=slots)
    limits = choose(config.executor.limits, config.executor.cgroup_parent)
    places = PRIVATE_PLACES if private_mounts_permitted() else ()
    events.info("worker.isolation", runAsRange=uids.text(), limits=limits.mechanism.value,
                privatePlaces=list(places))  # fmt: skip
    sandbox = Sandbox(config.runs_dir, pool=pool, limits=limits, private_places=places)
    return replace(config, executor=replace(config.executor, sandbox=sandbox))


def _with_trust(config: WorkerConfig, args: argparse.Namespace) -> WorkerConfig:
    """SPEC §16.1: --trust-keys/--trust-policy over the config's `trust`; with the
    executor, the keys file is read now (an unusable one: exit 2 before anything)."""
    from qinglong.worker.config import ConfigError, trust_policy
    from qinglong.worker.trust import RevisionTrust, TrustError

    trust = config.trust
    if args.trust_keys is not None:
        trust = replace(trust, keys_file=os.path.abspath(args.trust_keys))
    if args.trust_policy is not None:
        trust = replace(trust, policy=trust_policy(args.trust_policy, "--trust-policy"))
    if config.execute:
        try:
            trust = replace(trust, verifier=RevisionTrust.load(trust))
        except TrustError as exc:
            raise ConfigError(exc.reason, exc.detail) from None
    return replace(config, trust=trust)
