"""Shared pieces of the benchmarks: tables, percentiles, the machine, a database.

Each sub-benchmark gets a `BenchContext`: one throwaway PostgreSQL cluster for
the whole `python -m tools.bench` invocation (the same settings as the tests: fsync on,
synchronous_commit on, plus pg_stat_statements to count round trips), a
migrated template database, and `fresh_db()` to clone it, so every measurement
starts from an equal, empty queue. Rows are provisioned through the SQL API
(`ql.register_worker`, `ql.open_session`, `ql.publish_revision`,
`ql.enqueue_runs`), as the admin commands do.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import math
import os
import platform
import secrets
import string
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg

from qinglong.db import api
from qinglong.db.migrator import bootstrap
from qinglong.throwaway_postgres import ThrowawayPostgres

ENQUEUE_BATCH = 10_000  # ql.enqueue_runs' cap per call
SLOTS = 256  # the protocol's maximum per session
SESSION_EXPIRED = "QL012"  # ql_private.session_fence: the session's expires_at has passed
PG_SETTINGS = {
    "shared_preload_libraries": "'pg_stat_statements'",
    "pg_stat_statements.track": "top",
    "max_connections": "200",
}
KEY_SETTINGS = (
    "server_version", "shared_buffers", "fsync", "synchronous_commit", "wal_level",
    "max_connections", "work_mem", "max_wal_size", "checkpoint_timeout",
    "autovacuum_naptime", "jit",
)  # fmt: skip


# ------------------------------------------------------------------ results


@dataclass
class Table:
    """One printed table; `data` keeps the raw figures for JSON and tests."""

    title: str
    headers: list[str]
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)

    def text(self) -> str:
        from qinglong.status_cli import table

        lines = [self.title, *table(self.headers, self.rows)]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def markdown(self) -> str:
        head = "| " + " | ".join(self.headers) + " |"
        rule = "|" + "|".join("---" for _ in self.headers) + "|"
        body = ["| " + " | ".join(row) + " |" for row in self.rows]
        notes = [f"- {n}" for n in self.notes]
        return "\n".join([f"**{self.title}**", "", head, rule, *body, "", *notes]).rstrip() + "\n"


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100); NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def histogram_quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float:
    """Quantile (q in 0..1) of a cumulative histogram [(upper bound, count), …] sorted
    by bound, the last +Inf: linear inside the bucket, as Prometheus'
    histogram_quantile; NaN for no observations."""
    total = buckets[-1][1] if buckets else 0.0
    if total <= 0:
        return math.nan
    rank = q * total
    lower, below = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if math.isinf(bound):
                return lower  # past the last finite bound: all we know is "above it"
            span = count - below
            return bound if span <= 0 else lower + (bound - lower) * (rank - below) / span
        lower, below = bound, count
    return lower


def ms(seconds: float) -> str:
    return "n/a" if math.isnan(seconds) else f"{seconds * 1000:.2f}"


def ratio(ours: float, base: float) -> float:
    return ours / base if base else math.nan


def fmt_ratio(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.2f}"


@dataclass
class Timings:
    """Latencies of one measured phase, and its wall time."""

    latencies: list[float] = field(default_factory=list)
    wall_s: float = 0.0
    count: int = 0

    @property
    def rate(self) -> float:
        return self.count / self.wall_s if self.wall_s > 0 else 0.0

    def pct(self, q: float) -> float:
        return percentile(self.latencies, q)

    @property
    def mean(self) -> float:
        return sum(self.latencies) / len(self.latencies) if self.latencies else math.nan

    def summary(self) -> dict[str, float]:
        return {"count": self.count, "wallS": self.wall_s, "perS": self.rate,
                "p50Ms": self.pct(50) * 1000, "p95Ms": self.pct(95) * 1000,
                "p99Ms": self.pct(99) * 1000, "meanMs": self.mean * 1000}  # fmt: skip


# ------------------------------------------------------------------ machine


def machine_info() -> dict[str, Any]:
    info: dict[str, Any] = {
        "nproc": len(os.sched_getaffinity(0)),
        "arch": platform.machine(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "loadavg": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }
    with contextlib.suppress(OSError):
        for line in open("/proc/meminfo", encoding="ascii"):
            if line.startswith("MemTotal:"):
                info["ramGiB"] = round(int(line.split()[1]) / 1024 / 1024, 1)
    with contextlib.suppress(OSError):
        for line in open("/proc/cpuinfo", encoding="utf-8", errors="replace"):
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    return info


def pg_settings(dsn: str) -> dict[str, str]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT name, current_setting(name) FROM pg_settings WHERE name = ANY(%s)",
            (list(KEY_SETTINGS),),
        ).fetchall()
    return {name: value for name, value in rows}


# ------------------------------------------------------------------ database


def token() -> str:
    return base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode("ascii")


def sha256(text: str) -> bytes:
    return hashlib.sha256(text.encode("ascii")).digest()


@dataclass(frozen=True)
class WorkerIdent:
    worker_id: str
    credential_id: str
    secret_digest: bytes


@dataclass
class Session:
    worker: WorkerIdent
    session_id: str
    generation: int


def capabilities(labels: dict[str, str] | None = None, slots: int = SLOTS) -> dict[str, Any]:
    return {"schema": "qinglong/worker-capabilities@v1", "executors": ["remote-worker"],
            "labels": labels or {}, "runtimes": {}, "slots": slots}  # fmt: skip


def command(placement: dict[str, Any] | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = {"schema": "qinglong/command@v1", "argv": ["true"], "env": {},
                           "timeoutS": 60}  # fmt: skip
    if placement is not None:
        doc["placement"] = placement
    return doc


class Api:
    """The SQL API calls the benchmarks need, on one autocommit connection."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self.conn = conn

    def one(self, call: api.Call[Any]) -> Any:
        result = call.run(self.conn, prepare=True)
        assert result is not None
        return result

    def worker(self, name: str, pools: Sequence[str] = ("*",)) -> WorkerIdent:
        """A worker granted `pools` ('P/N'; '*' = every pool, SPEC §13.1)."""
        worker_id = self.one(api.register_worker(name=name)).doc["workerId"]
        for pool in pools:
            self.one(api.grant_pool(worker_id=worker_id, pool=pool))
        alphabet = string.ascii_lowercase + string.digits
        credential_id = "".join(secrets.choice(alphabet) for _ in range(16))
        digest = sha256(token())
        self.one(
            api.issue_credential(
                worker_id=worker_id, credential_id=credential_id, secret_digest=digest
            )
        )
        # Bench sessions declare the labels a scenario needs (SPEC §13.2 self-labels).
        self.one(api.label_worker(worker_id=worker_id, self_labels=True))
        return WorkerIdent(worker_id, credential_id, digest)

    def session(self, worker: WorkerIdent, caps: dict[str, Any] | None = None) -> Session:
        from qinglong.schemas.canonical import canonical_bytes

        body = canonical_bytes(caps or capabilities())
        result = self.one(
            api.open_session(
                credential_id=worker.credential_id,
                secret_digest=worker.secret_digest,
                worker_id=worker.worker_id,
                capabilities_canonical=body,
            )
        ).doc
        if result.get("status") != "ok":
            raise RuntimeError(f"open_session: {result}")
        return Session(worker, result["session"]["sessionId"], result["session"]["generation"])

    def task(self, name: str, placement: dict[str, Any] | None = None) -> str:
        from qinglong.service.compiler import compile_command

        compiled = compile_command(command(placement))
        result = self.one(
            api.publish_revision(project="bench", task=name, canonical=compiled.canonical)
        ).doc
        return str(result["taskId"])

    def enqueue(self, task_id: str, count: int, priority: int = 0) -> None:
        left = count
        while left > 0:
            batch = min(left, ENQUEUE_BATCH)
            self.one(api.enqueue_runs(task_id=task_id, priority=priority, count=batch))
            left -= batch

    def pull(self, session: Session, offer_id: str, token_digest: bytes) -> dict[str, Any]:
        w = session.worker
        return self.one(
            api.pull_offer(
                credential_id=w.credential_id,
                secret_digest=w.secret_digest,
                worker_id=w.worker_id,
                session_id=session.session_id,
                generation=session.generation,
                offer_id=offer_id,
                token_digest=token_digest,
            )
        ).doc

    def ack_starting(self, session: Session, offer_id: str, token_digest: bytes) -> str:
        w = session.worker
        result = self.one(
            api.ack_lease(
                credential_id=w.credential_id,
                secret_digest=w.secret_digest,
                worker_id=w.worker_id,
                session_id=session.session_id,
                generation=session.generation,
                offer_id=offer_id,
                token_digest=token_digest,
                lease_version=1,
                phase="starting",
            )
        ).doc
        return str(result.get("status"))


@dataclass
class Claimer:
    """One client thread's claims: pull (timed) then the starting ACK.

    The ACK is what takes a run out of the candidate index (state `starting`);
    without it every offered run stays `dispatching` at the head of the queue
    and each later scan walks past it. A session holds at most 256 live leases,
    so the claimer opens a session of its next worker when one is full (lazily:
    a session lives 60 s without a heartbeat).
    """

    api: Api
    workers: list[WorkerIdent]
    caps: dict[str, Any] | None = None
    used: int = 0
    current: int = -1
    active: Session | None = None
    pull_times: list[float] = field(default_factory=list)
    claim_times: list[float] = field(default_factory=list)  # pulls that claimed
    ack_times: list[float] = field(default_factory=list)
    outcomes: dict[str, int] = field(default_factory=dict)

    def session(self) -> Session | None:
        if self.active is None or self.used >= SLOTS:
            self.current += 1
            if self.current >= len(self.workers):
                return None
            self.active = self.api.session(self.workers[self.current], self.caps)
            self.used = 0
        return self.active

    def step(self, ack: bool = True) -> str:
        """One pull; returns its status (`offered`, `idle:<reason>`, …)."""
        session = self.session()
        if session is None:
            return "idle:out_of_sessions"
        offer_id, secret = str(uuid.uuid4()), token()
        digest = sha256(secret)
        started = time.perf_counter()
        try:
            result = self.api.pull(session, offer_id, digest)
        except psycopg.errors.DatabaseError as exc:
            if exc.sqlstate != SESSION_EXPIRED:
                raise
            # The claimer sends no heartbeats: a session outlives its 60 s only while
            # pulls are fast. Counted as an outcome; the next step opens a fresh one.
            self.active = None
            self.outcomes["error:session_expired"] = (
                self.outcomes.get("error:session_expired", 0) + 1
            )
            return "error:session_expired"
        elapsed = time.perf_counter() - started
        self.pull_times.append(elapsed)
        status = str(result.get("status"))
        if status == "idle":
            status = f"idle:{result.get('reason')}"
        self.outcomes[status] = self.outcomes.get(status, 0) + 1
        if status == "offered":
            self.used += 1
            self.claim_times.append(elapsed)
            if ack:
                started = time.perf_counter()
                self.api.ack_starting(session, offer_id, digest)
                self.ack_times.append(time.perf_counter() - started)
        elif status == "idle:capacity_full":
            self.used = SLOTS  # next step moves on to a fresh session
        return status


def warm_up(claimer: Claimer, claims: int) -> None:
    """Make `claims` unmeasured claims (a contended pull may claim nothing), then
    forget them: the queue was sized for them, the measurement must not count them."""
    for _ in range(claims * 10):
        if claimer.outcomes.get("offered", 0) >= claims:
            break
        claimer.step()
    claimer.pull_times.clear()
    claimer.claim_times.clear()
    claimer.ack_times.clear()
    claimer.outcomes.clear()


def run_threads(count: int, target: Any) -> float:
    """Run target(index, barrier) in `count` threads; wall seconds from the
    barrier's release to the last thread's end. Re-raises the first error."""
    import threading

    barrier = threading.Barrier(count + 1)
    errors: list[BaseException] = []

    def wrapped(index: int) -> None:
        try:
            target(index, barrier)
        except BaseException as exc:  # surfaced below
            errors.append(exc)
            with contextlib.suppress(threading.BrokenBarrierError):
                barrier.abort()

    threads = [threading.Thread(target=wrapped, args=(i,), daemon=True) for i in range(count)]
    for thread in threads:
        thread.start()
    try:
        barrier.wait(timeout=120)
    except threading.BrokenBarrierError:
        pass
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    if errors:
        raise errors[0]
    return wall


@dataclass
class BenchContext:
    quick: bool
    cluster: ThrowawayPostgres
    template: str
    workers: list[WorkerIdent]
    tasks: dict[str, str]  # name -> task id
    _next_db: int = 0

    @contextlib.contextmanager
    def fresh_db(self) -> Iterator[str]:
        """A clone of the template (workers + tasks, empty queue), dropped after."""
        self._next_db += 1
        name = f"ql_bench_{os.getpid()}_{self._next_db}"
        dsn = self.cluster.create_database(name, template=self.template)
        # The copy's database ACL is PUBLIC's default: give it the real one.
        bootstrap(dsn)
        try:
            yield dsn
        finally:
            self.cluster.drop_database(name)

    def admin_dsn(self) -> str:
        return self.cluster.dsn("postgres")


BLOCKED_PLACEMENT = {"required": {"labels": {"gpu": "yes"}}}
TEMPLATE_WORKERS = 200


def prepare_context(quick: bool, workers: int = TEMPLATE_WORKERS) -> BenchContext:
    """Start the cluster and build the template database (caller cleans up)."""
    from qinglong.db.migrator import migrate
    from tools.bench import raw, schema_floor

    cluster = ThrowawayPostgres(settings=dict(PG_SETTINGS))
    cluster.start()
    try:
        template = f"ql_bench_tpl_{os.getpid()}"
        cluster.drop_database(template)
        dsn = cluster.create_database(template)
        migrate(dsn)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            raw.install(conn)
            schema_floor.install(conn)
            api = Api(conn)
            idents = [api.worker(f"bench-{i}") for i in range(workers)]
            tasks = {"plain": api.task("plain"), "blocked": api.task("blocked", BLOCKED_PLACEMENT)}
            conn.execute("VACUUM ANALYZE")
    except BaseException:
        cluster.cleanup()
        raise
    return BenchContext(quick, cluster, template, idents, tasks)


def open_sessions(api: Api, workers: Sequence[WorkerIdent]) -> list[Session]:
    return [api.session(w) for w in workers]


def vacuum(dsn: str, *tables: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        if tables:
            for table in tables:
                conn.execute(f"VACUUM (ANALYZE) {table}")  # names are ours, not input
        else:
            conn.execute("VACUUM (ANALYZE)")
