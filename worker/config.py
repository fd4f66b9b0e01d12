"""Worker configuration: a JSON file (``--config``) or a dev-env file (``--dev-env``).

``--config FILE`` — one JSON object, unknown keys refused; relative paths are
resolved against the file's directory::

    {
      "ingressUrl": "https://ingress.example:8443",      # bare https origin
      "workerId": "<uuid>",                              # the certificate's worker
      "certFile": "worker.pem", "keyFile": "worker-key.pem",
      "caFile": "ca.pem",                                # 1-8 trust anchors
      "credentialFile": "credential",                    # ql3w_… (0600)
      "journal": "/var/lib/qinglong/worker",             # journal root (0700)
      "capabilities": {"schema": "qinglong/worker-capabilities@v1",
                       "executors": ["remote-worker"], "labels": {},
                       "runtimes": {}, "slots": 1},      # optional, this default
      "cadence": {"idlePollMs": 1000, "jitterMs": 500},  # optional
      "lockStaleMs": 30000,                              # optional, 5000..300000
      "inboxCapacity": 64,                               # optional, 1..1024
      "requestTimeoutS": 15,                             # optional, (0, 60]
      "execute": false,                                  # optional: run offers (SPEC §7)
      "trust": {"keysFile": "publishers.jwks.json",      # optional (SPEC §16.1,
                "policy": "warn"},                       #   worker/trust.py)
      "executor": {"shutdownGraceS": 30,                 # optional, 0..3600
                   "killGraceS": 5,                      # SIGTERM -> SIGKILL, 0..300
                   "outputLimitBytes": 67108864,         # on disk per offer, 0..1 GiB
                   "workDir": "/var/lib/qinglong/work",  # default <journal>.work
                   "runsDir": "/var/lib/qinglong/runs",  # default <journal>.runs
                   "runAsRange": "70000-70063",          # SPEC §14.4, as --run-as-range
                   "limits": {"maxProcesses": 1024,      # per run (worker/run_limits.py)
                              "maxOpenFiles": 4096,
                              "maxMemoryBytes": 2147483648},
                   "cgroupParent": "/sys/fs/cgroup/ql"}  # a delegated cgroup v2 (optional)
    }

``execute: true`` (or ``--execute``) turns on the executor (worker/lifecycle.py):
accepted offers are run, at most ``capabilities.slots`` at a time. Its work
directory (per-offer output logs and scratch directories) lives beside the
journal root, never inside it, so the journal keeps its SPEC §6.4 layout.
Commands themselves run in ``runsDir/<offerId>`` (SPEC §11, worker/run_as.py):
owned by the run-as user, removed after the run; the runs directory is the
worker's, mode 1733 (the run-as user may create its directory, not list), and
every directory above it must be searchable by that user (checked at start).
With the executor, ``runsDir`` must lie apart from the worker's own files
(refused at load, ``runs_dir_not_apart``): it may not equal, contain or lie
inside the journal root or the work directory, and may not equal or contain
the directory of the configuration (or dev-env) file, the credential file or
the key (mode 1733 on it, or on one above it, would open it to the run-as user).

``--dev-env FILE --journal DIR`` takes ``ingressUrl``, ``caFile`` and
``worker.{workerId, certFile, keyFile, credentialFile}`` from the file written by
``qinglong dev up`` and uses the default capabilities. ``--slots N`` overrides
the capabilities' slots and ``--journal DIR`` the journal in both forms.

Idle cadence: after an ``idle`` answer the worker waits
``max(retryAfterMs, idlePollMs) + uniform(0, jitterMs)``.
"""

from __future__ import annotations

import copy
import os
import re
from dataclasses import dataclass, field, replace
from typing import Any

from qinglong.worker.journal import DEFAULT_CAPACITY, HARD_CAPACITY
from qinglong.worker.owner_lock import STALE_DEFAULT_MS, STALE_MAX_MS, STALE_MIN_MS
from qinglong.worker.run_as import Sandbox
from qinglong.worker.run_limits import (
    MAX_MEMORY_RANGE,
    MAX_OPEN_FILES_RANGE,
    MAX_PROCESSES_RANGE,
    Limits,
)
from qinglong.worker.trust import TrustPolicy, TrustSettings

CONFIG_LIMIT = 64 * 1024
CAPABILITIES_SCHEMA = "qinglong/worker-capabilities@v1"
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_KEYS = frozenset({
    "ingressUrl", "workerId", "certFile", "keyFile", "caFile", "credentialFile", "journal",
    "capabilities", "cadence", "lockStaleMs", "inboxCapacity", "requestTimeoutS",
    "execute", "executor", "trust",
})  # fmt: skip
_EXECUTOR_KEYS = frozenset({
    "shutdownGraceS", "killGraceS", "outputLimitBytes", "workDir", "runsDir", "runAsRange",
    "limits", "cgroupParent",
})  # fmt: skip
_LIMIT_KEYS = frozenset({"maxProcesses", "maxOpenFiles", "maxMemoryBytes"})
OUTPUT_LIMIT_DEFAULT = 64 * 1024 * 1024  # SPEC §11: output capped, 64 MiB on disk
OUTPUT_LIMIT_MAX = 1024 * 1024 * 1024
_REQUIRED = ("ingressUrl", "workerId", "certFile", "keyFile", "caFile", "credentialFile")

__all__ = [
    "Cadence",
    "ConfigError",
    "ExecutorSettings",
    "WorkerConfig",
    "default_capabilities",
    "load_config_file",
    "load_dev_env",
]


class ConfigError(Exception):
    """The configuration is unusable; ``reason`` is a short category."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


def default_capabilities(slots: int = 1) -> dict[str, Any]:
    return {
        "schema": CAPABILITIES_SCHEMA,
        "executors": ["remote-worker"],
        "labels": {},
        "runtimes": {},
        "slots": slots,
    }


@dataclass(frozen=True)
class Cadence:
    idle_poll_ms: int = 1000
    jitter_ms: int = 500

    def __post_init__(self) -> None:
        _int_in("cadence.idlePollMs", self.idle_poll_ms, 0, 3_600_000)
        _int_in("cadence.jitterMs", self.jitter_ms, 0, 600_000)


@dataclass(frozen=True)
class ExecutorSettings:
    shutdown_grace_s: float = 30.0  # SIGTERM: how long running commands may finish
    kill_grace_s: float = 5.0  # SIGTERM -> SIGKILL of a command's process group
    output_limit_bytes: int = OUTPUT_LIMIT_DEFAULT  # head of stdout+stderr kept per offer
    work_dir: str | None = None  # None: "<journal>.work"
    runs_dir: str | None = None  # None: "<journal>.runs"
    run_as_range: str | None = None  # "FIRST-LAST" (SPEC §14.4), checked by the CLI
    limits: Limits = field(default_factory=Limits)  # per run (worker/run_limits.py)
    cgroup_parent: str | None = None  # a delegated cgroup v2 directory for runs
    # Decided at start by the CLI (worker/run_as.py), never read from a file.
    sandbox: Sandbox | None = None

    def __post_init__(self) -> None:
        _number_in("executor.shutdownGraceS", self.shutdown_grace_s, 0, 3600)
        _number_in("executor.killGraceS", self.kill_grace_s, 0, 300)
        _int_in("executor.outputLimitBytes", self.output_limit_bytes, 0, OUTPUT_LIMIT_MAX)


@dataclass(frozen=True)
class WorkerConfig:
    ingress_url: str
    worker_id: str
    cert_file: str
    key_file: str
    ca_file: str
    credential_file: str
    journal: str
    capabilities: dict[str, Any] = field(default_factory=default_capabilities)
    cadence: Cadence = field(default_factory=Cadence)
    lock_stale_ms: int = STALE_DEFAULT_MS
    inbox_capacity: int = DEFAULT_CAPACITY
    request_timeout_s: float = 15.0
    execute: bool = False
    executor: ExecutorSettings = field(default_factory=ExecutorSettings)
    trust: TrustSettings = field(default_factory=TrustSettings)  # SPEC §16.1

    @property
    def work_dir(self) -> str:
        return self.executor.work_dir or os.path.normpath(self.journal) + ".work"

    @property
    def runs_dir(self) -> str:
        return self.executor.runs_dir or os.path.normpath(self.journal) + ".runs"

    def validated(self) -> WorkerConfig:
        """Check every field (imports the transport's origin parser and the schemas)."""
        from qinglong.worker.errors import InvalidOrigin
        from qinglong.worker.transport import MAX_TIMEOUT_S, parse_origin

        try:
            parse_origin(self.ingress_url)
        except InvalidOrigin as exc:
            raise ConfigError("invalid_ingress_url", str(exc)) from None
        if not isinstance(self.worker_id, str) or _UUID.fullmatch(self.worker_id) is None:
            raise ConfigError("invalid_worker_id", "workerId must be a lowercase canonical UUID")
        _int_in("lockStaleMs", self.lock_stale_ms, STALE_MIN_MS, STALE_MAX_MS)
        _int_in("inboxCapacity", self.inbox_capacity, 1, HARD_CAPACITY)
        timeout = self.request_timeout_s
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not (0 < timeout <= MAX_TIMEOUT_S)
        ):
            raise ConfigError("invalid_value", f"requestTimeoutS must be in (0, {MAX_TIMEOUT_S}]")
        if not isinstance(self.execute, bool):
            raise ConfigError("invalid_value", "execute must be true or false")
        validate_capabilities(self.capabilities)
        return self

    def with_slots(self, slots: int | None) -> WorkerConfig:
        if slots is None:
            return self
        capabilities = copy.deepcopy(self.capabilities)
        capabilities["slots"] = slots
        return replace(self, capabilities=capabilities)


def _int_in(name: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigError("invalid_value", f"{name} must be an integer in {low}..{high}")
    return value


def _number_in(name: str, value: object, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise ConfigError("invalid_value", f"{name} must be a number in {low}..{high}")
    return float(value)


def validate_capabilities(doc: object) -> None:
    from qinglong.schemas.contract import ContractError, SchemaId
    from qinglong.schemas.fastpath import validate

    try:
        validate(SchemaId.WORKER_CAPABILITIES, doc)
    except ContractError as exc:
        raise ConfigError("invalid_capabilities", exc.detail) from None


def capabilities_digest(doc: dict[str, Any]) -> str:
    """The digest the ingress stores for ``doc``: executors sorted, then RFC 8785."""
    from qinglong.schemas.canonical import canonical_bytes, sha256_digest

    canonical = dict(doc, executors=sorted(doc["executors"]))
    return sha256_digest(canonical_bytes(canonical))


def _read_json(path: str, what: str) -> dict[str, Any]:
    from qinglong.worker.journal import load_json

    try:
        with open(path, "rb") as handle:
            data = handle.read(CONFIG_LIMIT + 1)
    except OSError as exc:
        raise ConfigError(f"{what}_unreadable", f"{path}: {exc.strerror}") from None
    if len(data) > CONFIG_LIMIT:
        raise ConfigError(f"invalid_{what}", f"{path} exceeds {CONFIG_LIMIT} bytes")
    try:
        doc = load_json(data)
    except (ValueError, UnicodeDecodeError):
        raise ConfigError(f"invalid_{what}", f"{path} is not strict JSON") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"invalid_{what}", f"{path} must hold a JSON object")
    return doc


def _path(base: str, value: object, name: str) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError("invalid_value", f"{name} must be a non-empty path")
    return os.path.normpath(os.path.join(base, os.path.expanduser(value)))


def _cadence(doc: object) -> Cadence:
    if doc is None:
        return Cadence()
    if not isinstance(doc, dict) or not set(doc) <= {"idlePollMs", "jitterMs"}:
        raise ConfigError("invalid_value", "cadence takes only idlePollMs and jitterMs")
    defaults = Cadence()
    return Cadence(doc.get("idlePollMs", defaults.idle_poll_ms),
                   doc.get("jitterMs", defaults.jitter_ms))  # fmt: skip


def _executor(base: str, doc: object) -> ExecutorSettings:
    if doc is None:
        return ExecutorSettings()
    if not isinstance(doc, dict) or not set(doc) <= _EXECUTOR_KEYS:
        known = ", ".join(sorted(_EXECUTOR_KEYS))
        raise ConfigError("invalid_value", f"executor takes only {known}")
    defaults = ExecutorSettings()
    work_dir = doc.get("workDir")
    runs_dir = doc.get("runsDir")
    run_as_range = doc.get("runAsRange")
    if run_as_range is not None and (not isinstance(run_as_range, str) or not run_as_range):
        raise ConfigError("invalid_value", 'executor.runAsRange must be "FIRST-LAST"')
    cgroup = doc.get("cgroupParent")
    return ExecutorSettings(
        shutdown_grace_s=doc.get("shutdownGraceS", defaults.shutdown_grace_s),
        kill_grace_s=doc.get("killGraceS", defaults.kill_grace_s),
        output_limit_bytes=doc.get("outputLimitBytes", defaults.output_limit_bytes),
        work_dir=None if work_dir is None else _path(base, work_dir, "executor.workDir"),
        runs_dir=None if runs_dir is None else _path(base, runs_dir, "executor.runsDir"),
        run_as_range=run_as_range,
        limits=parse_limits(doc.get("limits")),
        cgroup_parent=None if cgroup is None else _path(base, cgroup, "executor.cgroupParent"),
    )


def parse_limits(doc: object, base: Limits | None = None) -> Limits:
    """``executor.limits`` (every key optional; the defaults of run_limits.py)."""
    limits = base or Limits()
    if doc is None:
        return limits
    if not isinstance(doc, dict) or not set(doc) <= _LIMIT_KEYS:
        raise ConfigError("invalid_value", "executor.limits takes only "
                          + ", ".join(sorted(_LIMIT_KEYS)))  # fmt: skip
    return replace(
        limits,
        max_processes=_int_in("executor.limits.maxProcesses",
                              doc.get("maxProcesses", limits.max_processes), *MAX_PROCESSES_RANGE),
        max_open_files=_int_in("executor.limits.maxOpenFiles",
                               doc.get("maxOpenFiles", limits.max_open_files),
                               *MAX_OPEN_FILES_RANGE),
        max_memory_bytes=_int_in("executor.limits.maxMemoryBytes",
                                 doc.get("maxMemoryBytes", limits.max_memory_bytes),
                                 *MAX_MEMORY_RANGE),
    )  # fmt: skip


def parse_trust(base: str, doc: object) -> TrustSettings:
    """``trust: {keysFile?, policy?}`` (worker/trust.py; policy default ``warn``)."""
    if doc is None:
        return TrustSettings()
    if not isinstance(doc, dict) or not set(doc) <= {"keysFile", "policy"}:
        raise ConfigError("invalid_value", "trust takes only keysFile and policy")
    return TrustSettings(
        policy=trust_policy(doc.get("policy", TrustPolicy.WARN.value), "trust.policy"),
        keys_file=None
        if doc.get("keysFile") is None
        else _path(base, doc["keysFile"], "trust.keysFile"),
    )


def trust_policy(value: object, name: str) -> TrustPolicy:
    try:
        if isinstance(value, str):
            return TrustPolicy(value)
    except ValueError:
        pass
    raise ConfigError("invalid_value", f"{name} must be enforce, warn or off")


def load_config_file(
    path: str, *, journal: str | None, slots: int | None, execute: bool = False
) -> WorkerConfig:
    doc = _read_json(path, "config")
    unknown = sorted(set(doc) - _KEYS)
    if unknown:
        raise ConfigError("invalid_config", f"unknown keys: {', '.join(unknown[:5])}")
    missing = [k for k in _REQUIRED if k not in doc]
    if journal is None and "journal" not in doc:
        missing.append("journal")
    if missing:
        raise ConfigError("invalid_config", f"missing keys: {', '.join(missing)}")
    base = os.path.dirname(os.path.abspath(path))
    capabilities = doc.get("capabilities", default_capabilities())
    config = WorkerConfig(
        ingress_url=doc["ingressUrl"],
        worker_id=doc["workerId"],
        cert_file=_path(base, doc["certFile"], "certFile"),
        key_file=_path(base, doc["keyFile"], "keyFile"),
        ca_file=_path(base, doc["caFile"], "caFile"),
        credential_file=_path(base, doc["credentialFile"], "credentialFile"),
        journal=os.path.abspath(journal) if journal else _path(base, doc["journal"], "journal"),
        capabilities=copy.deepcopy(capabilities) if isinstance(capabilities, dict) else {},
        cadence=_cadence(doc.get("cadence")),
        lock_stale_ms=doc.get("lockStaleMs", STALE_DEFAULT_MS),
        inbox_capacity=doc.get("inboxCapacity", DEFAULT_CAPACITY),
        request_timeout_s=doc.get("requestTimeoutS", 15.0),
        execute=True if execute else doc.get("execute", False),
        executor=_executor(base, doc.get("executor")),
        trust=parse_trust(base, doc.get("trust")),
    )
    return check_runs_dir_apart(config.with_slots(slots).validated(), path)


def load_dev_env(
    path: str, *, journal: str, slots: int | None, execute: bool = False
) -> WorkerConfig:
    doc = _read_json(path, "dev_env")
    worker = doc.get("worker")
    if not isinstance(worker, dict):
        raise ConfigError("invalid_dev_env", "dev-env file has no worker object")
    try:
        config = WorkerConfig(
            ingress_url=doc["ingressUrl"],
            worker_id=worker["workerId"],
            cert_file=worker["certFile"],
            key_file=worker["keyFile"],
            ca_file=doc["caFile"],
            credential_file=worker["credentialFile"],
            journal=os.path.abspath(journal),
            execute=execute,
        )
    except KeyError as exc:
        raise ConfigError("invalid_dev_env", f"dev-env file lacks {exc.args[0]}") from None
    for name in ("cert_file", "key_file", "ca_file", "credential_file"):
        if not isinstance(getattr(config, name), str):
            raise ConfigError("invalid_dev_env", f"{name} must be a path")
    return check_runs_dir_apart(config.with_slots(slots).validated(), path)


def _within(path: str, directory: str) -> bool:
    """``path`` is ``directory`` or lies below it (both resolved)."""
    return os.path.commonpath([path, directory]) == directory


def check_runs_dir_apart(config: WorkerConfig, source: str) -> WorkerConfig:
    """With the executor: refuse a ``runsDir`` that is not apart from the worker's
    own files (the module docstring); ``source``: the configuration file."""
    if not config.execute:
        return config
    runs = os.path.realpath(config.runs_dir)
    both_ways = {"journal": config.journal, "work directory": config.work_dir}
    holders = {
        "configuration directory": os.path.dirname(os.path.abspath(source)),
        "credential directory": os.path.dirname(os.path.abspath(config.credential_file)),
        "key directory": os.path.dirname(os.path.abspath(config.key_file)),
    }
    for what, where in {**both_ways, **holders}.items():
        other = os.path.realpath(where)
        if runs == other:
            relation = "is"
        elif _within(other, runs):
            relation = "contains"
        elif what in both_ways and _within(runs, other):
            relation = "lies inside"
        else:
            continue
        raise ConfigError(
            "runs_dir_not_apart",
            f"executor.runsDir {config.runs_dir} {relation} the {what} {where}: "
            "the runs directory must lie apart from the worker's own files",
        )
    return config


def describe(config: WorkerConfig) -> dict[str, Any]:
    """A log-safe summary (paths and ids only; never file contents)."""
    return {
        "ingressUrl": config.ingress_url,
        "workerId": config.worker_id,
        "journal": config.journal,
        "slots": config.capabilities.get("slots"),
        "executors": config.capabilities.get("executors"),
        "execute": config.execute,
        "workDir": config.work_dir if config.execute else None,
        "runsDir": config.runs_dir if config.execute else None,
        "trustPolicy": config.trust.policy.value,
        "trustKeysFile": config.trust.keys_file,
        "runAs": _run_as_name(config),
        **_isolation(config),
    }


def _isolation(config: WorkerConfig) -> dict[str, Any]:
    """SPEC §14.4: the uid range, the limits and whether /tmp is private."""
    sandbox = config.executor.sandbox
    if not config.execute or sandbox is None or sandbox.pool is None:
        return {}
    limits = sandbox.limits
    return {
        "runAsRange": sandbox.pool.uids.text(),
        "limits": None if limits is None else limits.report(None, frozenset()),
        "privatePlaces": list(sandbox.private_places),
    }


def _run_as_name(config: WorkerConfig) -> str | None:
    sandbox = config.executor.sandbox
    if not config.execute or sandbox is None or sandbox.pool is not None:
        return None
    if sandbox.run_as is not None:
        return sandbox.run_as.name
    return "root" if os.geteuid() == 0 else "(the worker's own user)"
