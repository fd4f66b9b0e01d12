"""Python calls of the control-plane SQL API (docs/DESIGN.md "Control-plane API").

Each call is one `qinglong.db.api` call run by `run` in its own transaction on
a psycopg 3 sync connection; the commands call `run(conn, api.<fn>(...))`
directly, and this module keeps only what adds to a call (argument checks,
multi-call transactions, provisioning, pruning). The database is the only
authority: nothing here decides state, it only translates arguments in and
SQLSTATEs out (through `service.sqlstates`, the single mapping table).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TypeVar

import psycopg

from qinglong.db import answers, api, errors
from qinglong.db.api import Call
from qinglong.service import pki
from qinglong.worker.credential_rotation import LIFETIME_SUFFIX

T = TypeVar("T")
SMALLINT_MIN, SMALLINT_MAX = -32768, 32767
CREDENTIAL_FILE_NAME = "credential"
# SPEC §16.2: `--credential-ttl` default.
DEFAULT_CREDENTIAL_TTL_S = 90 * 86400


class ControlPlaneError(Exception):
    """A control-plane call failed with a known reason code."""

    def __init__(
        self,
        reason: str,
        detail: str = "",
        *,
        http_status: int | None = None,
        sqlstate: str | None = None,
        field: str | None = None,
    ) -> None:
        super().__init__(detail or reason)
        self.reason = reason
        self.detail = detail
        self.http_status = http_status
        self.sqlstate = sqlstate
        self.field = field  # the wire name of the argument at fault, when known

    @classmethod
    def of(cls, error: errors.DbError) -> ControlPlaneError:
        """A database error as the control-plane commands report it: a QingLong
        state with its reason, HTTP status and field; a server never reached 503
        `database_unavailable` with the driver's reason; the states an operator
        will meet by name (not migrated, no grant, timeout); anything else 500
        `database_error`."""
        if isinstance(error, errors.Refused):
            return cls(
                error.reason,
                error.message,
                http_status=error.http_status,
                sqlstate=error.sqlstate,
                field=error.column,
            )
        if isinstance(error, errors.ConnectionFailed) and error.sqlstate is None:
            return cls(error.reason, error.message, http_status=503)
        named = isinstance(
            error, errors.NotMigrated | errors.PermissionDenied | errors.StatementTimeout
        )
        return cls(
            error.reason if named else "database_error",
            error.message,
            http_status=500,
            sqlstate=error.sqlstate,
        )


def translate(exc: psycopg.Error) -> ControlPlaneError:
    """A psycopg error, translated once (`qinglong.db.errors`), as an operator sees it."""
    return ControlPlaneError.of(errors.translate(exc))


@contextmanager
def connect(dsn: str) -> Iterator[psycopg.Connection]:
    """A sync connection; connection failures surface as ControlPlaneError."""
    try:
        conn = psycopg.connect(dsn, connect_timeout=10)
    except psycopg.Error as exc:
        raise translate(exc) from None
    try:
        yield conn
    finally:
        conn.close()


def run(conn: psycopg.Connection, call: Call[T]) -> T:
    """One `qinglong.db.api` call in its own transaction (a savepoint inside the
    caller's), its errors translated: the control-plane commands' one way in."""
    try:
        with conn.transaction():
            result = call.run(conn)
    except psycopg.Error as exc:
        raise translate(exc) from None
    except answers.AnswerError as exc:
        raise ControlPlaneError("database_error", str(exc)) from None
    if result is None:
        raise ControlPlaneError("database_error", f"ql.{call.function} returned no value")
    return result


@dataclass(frozen=True)
class Schedule:
    """When and how idempotently runs are enqueued (SPEC §9.2); all None = now, no key."""

    not_before_ms: int | None = None
    delay_ms: int | None = None
    key: str | None = None


def enqueue_runs(
    conn: psycopg.Connection,
    task_id: str,
    priority: int,
    count: int,
    schedule: Schedule | None = None,
) -> answers.RunsEnqueued:
    # Checked here too so an out-of-range priority is invalid_input, not an
    # integer-overflow error from the cast.
    if not SMALLINT_MIN <= priority <= SMALLINT_MAX:
        raise ControlPlaneError(
            "invalid_input", "priority must be a smallint", http_status=400, field="priority"
        )
    return run(
        conn,
        api.enqueue_runs(
            task_id=task_id, priority=priority, count=count, **asdict(schedule or Schedule())
        ),
    )


# ------------------------------------------------------------ task settings


@dataclass(frozen=True)
class TaskSettings:
    """A change of a task's run policy (SPEC §9.1); None leaves a setting as it is."""

    lease_ttl_s: int | None = None
    max_attempts: int | None = None
    retry_base_ms: int | None = None
    retry_cap_ms: int | None = None
    enabled: bool | None = None
    log_limit_bytes: int | None = None  # the live-log cap (SPEC §15.2)

    def is_empty(self) -> bool:
        return all(value is None for value in asdict(self).values())


def configure_task(
    conn: psycopg.Connection, task_id: str, settings: TaskSettings
) -> answers.TaskPolicy:
    """Apply `settings` (the database checks the bounds) -> the task's settings."""
    return run(conn, api.configure_task(task_id=task_id, **asdict(settings)))


def publish_task(
    conn: psycopg.Connection,
    project: str,
    task: str,
    canonical: bytes,
    settings: TaskSettings | None = None,
    pool: str | None = None,
    sign: Callable[[str], str] | None = None,
) -> answers.RevisionPublished:
    """Publish (into `pool` 'P/N' when given), then apply `settings`, in one
    transaction: a refused setting leaves no new revision behind. `sign` (SPEC
    §16.1) maps the task id to the revision's signature: the task is prepared
    (ql.prepare_task) in the same transaction, so its id is known before
    signing and a failed publish leaves no task behind. -> publish_revision's
    answer."""
    if sign is None and (settings is None or settings.is_empty()):
        return run(
            conn, api.publish_revision(project=project, task=task, canonical=canonical, pool=pool)
        )
    try:
        with conn.transaction():  # the calls' own transactions become savepoints
            signature = None
            if sign is not None:
                prepared = run(conn, api.prepare_task(project=project, task=task))
                signature = sign(prepared.task_id)
            published = run(
                conn,
                api.publish_revision(
                    project=project, task=task, canonical=canonical, pool=pool, signature=signature
                ),
            )
            if settings is not None and not settings.is_empty():
                configure_task(conn, published.task_id, settings)
    except psycopg.Error as exc:  # the commit itself
        raise translate(exc) from None
    return published


# ------------------------------------------------------------ retention

PRUNE_BATCH = 1000
# After each prune batch, pause this many times the batch's own duration: the
# pruner then takes at most 1 / (1 + PRUNE_PACE) of one backend's time, so a
# backlog is worked off steadily instead of taking a CPU from the claims for as
# long as it lasts (measured on 2 busy cores while 1M terminal runs were
# pruned, claims/s: 0.59 x back to back, 0.76 x at pace 1; docs/BENCHMARKS.md).
# At pace 2 a backlog still goes at ~4,500 runs/s (2 busy cores).
PRUNE_PACE = 2.0


@dataclass
class PruneTotals:
    """What one prune pass removed (or, dry, would remove in its first batch)."""

    runs: int = 0
    attempts: int = 0
    leases: int = 0
    events: int = 0
    security_audit: int = 0
    sessions: int = 0
    placement_classes: int = 0
    fleet_events: int = 0
    dry_run: bool = False
    calls: int = 0
    more: bool = False  # stopped at max_calls with work left (next pass continues)

    def add(self, batch: answers.RunsPruned | answers.AuditPruned | answers.FleetPruned) -> bool:
        """Count one batch; -> whether the database has more of its kind."""
        if isinstance(batch, answers.RunsPruned):
            self.runs += batch.runs
            self.attempts += batch.attempts
            self.leases += batch.leases
            self.events += batch.events
        elif isinstance(batch, answers.AuditPruned):
            self.security_audit += batch.security_audit
        else:
            self.sessions += batch.sessions
            self.placement_classes += batch.placement_classes
            self.fleet_events += batch.fleet_events
        self.calls += 1
        return batch.more

    def as_json(self) -> dict[str, int | bool]:
        return {
            "runs": self.runs,
            "attempts": self.attempts,
            "leases": self.leases,
            "events": self.events,
            "securityAudit": self.security_audit,
            "sessions": self.sessions,
            "placementClasses": self.placement_classes,
            "fleetEvents": self.fleet_events,
            "dryRun": self.dry_run,
        }


@dataclass(frozen=True)
class Retention:
    """How long terminal runs and audit rows are kept, in seconds (SPEC §9.6)."""

    runs_s: int
    audit_s: int
    batch: int = PRUNE_BATCH
    dry_run: bool = False
    pace: float = PRUNE_PACE  # pause after a batch, as a multiple of its duration


def prune(
    conn: psycopg.Connection,
    retention: Retention,
    max_calls: int | None = None,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> PruneTotals:
    """One pass: batches of ql.prune_runs, then of ql.prune_audit, then of
    ql.prune_fleet (ended sessions and worker/session events past the run
    retention, unused placement classes), each in its own
    transaction (never one long one) and followed by a pause of `pace` times its
    duration, until the database reports no more. A dry
    run makes one call each: it deletes nothing, so a next batch would count the
    same rows. `max_calls` bounds each loop (the rest is left for the next pass).
    `clock` and `sleep` are injectable so a test can see the pacing."""
    totals = PruneTotals(dry_run=retention.dry_run)
    Batch = answers.RunsPruned | answers.AuditPruned | answers.FleetPruned
    kinds: tuple[tuple[Callable[..., Call[Batch]], int], ...] = (
        (api.prune_runs, retention.runs_s),
        (api.prune_audit, retention.audit_s),
        (api.prune_fleet, retention.runs_s),
    )
    for make, retain_s in kinds:
        calls = 0
        while True:
            started = clock()
            more = totals.add(
                run(conn, make(retain_s=retain_s, batch=retention.batch, dry_run=retention.dry_run))
            )
            calls += 1
            if not more or retention.dry_run:
                break
            if max_calls is not None and calls >= max_calls:
                totals.more = True
                break
            sleep(retention.pace * (clock() - started))
    return totals


# ------------------------------------------------------------ worker identity


@dataclass(frozen=True)
class ProvisionedWorker:
    worker_id: str
    credential_id: str
    cert_file: Path
    key_file: Path
    credential_file: Path

    def as_json(self) -> dict[str, str]:
        return {
            "workerId": self.worker_id,
            "certFile": str(self.cert_file),
            "keyFile": str(self.key_file),
            "credentialFile": str(self.credential_file),
        }


def _private_dir(out_dir: Path) -> Path:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    out_dir.chmod(0o700)  # mkdir's mode is masked by umask and ignored if it existed
    return out_dir


def provision_worker(
    conn: psycopg.Connection,
    name: str,
    ca_dir: Path,
    out_dir: Path,
    *,
    labels: Mapping[str, str] | None = None,
    self_labels: bool = False,
    pools: Sequence[str] = ("*",),
    credential_ttl_s: int | None = DEFAULT_CREDENTIAL_TTL_S,
) -> ProvisionedWorker:
    """Register a worker, issue its client cert and its credential.

    The credential secret only ever exists in the 0600 file; the database gets
    its SHA-256 digest. `labels` are granted to it (SPEC §13.2); with
    `self_labels` its sessions' declared labels are accepted as they are.
    `pools` are granted to it (SPEC §13.1; '*' = every pool, the default for the
    development, demo and bench fleets; `admin worker create` passes exactly
    its `--pool` flags, none = no grant). The credential expires after
    `credential_ttl_s` (SPEC §16.2; None: never); its lifetime is written
    beside it (`credential.lifetime.json`) so the worker rotates it at 75 %.
    """
    ca_dir = Path(ca_dir)
    try:
        pki.load_ca(ca_dir)  # fail before registering anything
    except pki.PkiError as exc:
        raise ControlPlaneError("ca_not_found", str(exc)) from None
    out_dir = _private_dir(out_dir)
    credential = pki.generate_credential()
    credential_file = out_dir / CREDENTIAL_FILE_NAME
    written: list[Path] = []
    try:
        # One transaction (the calls' own become savepoints): never a registered
        # worker without its credential, nor a credential whose files we lost.
        with conn.transaction():
            worker_id = run(conn, api.register_worker(name=name)).worker_id
            cert = pki.issue_worker_cert(ca_dir, out_dir, worker_id)
            written += [cert.cert_file, cert.key_file]
            # Its serial and notAfter (SPEC §16.3: expiry shown, revocation by serial).
            facts = pki.certificate_facts(cert.cert_file)
            run(
                conn,
                api.record_certificate(
                    worker_id=worker_id, serial=facts.serial, not_after_ms=facts.not_after_ms
                ),
            )
            pki.write_private_file(credential_file, credential.token.encode("ascii"))
            written.append(credential_file)
            issued = run(
                conn,
                api.issue_credential(
                    worker_id=worker_id,
                    credential_id=credential.credential_id,
                    secret_digest=credential.secret_digest,
                    ttl_s=credential_ttl_s,
                ),
            )
            if credential_ttl_s is not None:
                lifetime = Path(str(credential_file) + LIFETIME_SUFFIX)
                expires_ms = issued.expires_at_ms
                if expires_ms is None:
                    raise ControlPlaneError("database_error", "ql.issue_credential set no expiry")
                pki.write_private_file(
                    lifetime,
                    json.dumps(
                        {
                            "credentialId": credential.credential_id,
                            "issuedAtMs": expires_ms - credential_ttl_s * 1000,
                            "expiresAtMs": expires_ms,
                        }
                    ).encode("ascii"),
                )
                written.append(lifetime)
            for pool in pools:
                run(conn, api.grant_pool(worker_id=worker_id, pool=pool))
            if labels or self_labels:
                run(
                    conn,
                    api.label_worker(
                        worker_id=worker_id, labels=labels, self_labels=self_labels or None
                    ),
                )
    except BaseException:
        for path in written:
            path.unlink(missing_ok=True)
        raise
    return ProvisionedWorker(
        worker_id=worker_id,
        credential_id=credential.credential_id,
        cert_file=cert.cert_file,
        key_file=cert.key_file,
        credential_file=credential_file,
    )


__all__ = [
    "ControlPlaneError",
    "ProvisionedWorker",
    "PruneTotals",
    "Retention",
    "Schedule",
    "TaskSettings",
    "configure_task",
    "connect",
    "enqueue_runs",
    "provision_worker",
    "prune",
    "publish_task",
    "run",
    "translate",
]
