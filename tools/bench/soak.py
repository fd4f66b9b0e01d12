"""`bench soak`: steady state over a deep queue for ten minutes.

Target: at 32 workers and 1,000,000 queued runs for 10 minutes, the last
minute's completed runs ≥ 0.9 x the first minute's, and dead tuples on the
queue tables (ql_private.runs, attempts, run_leases, events; summed) ≤ 10,000.

Path: the real one, the processes `bench e2e` starts (its `OursLevel`): a
throwaway cluster (fsync on, autovacuum as configured by
db/migrations/0002_queue_autovacuum.sql, nothing disabled or tuned), a fresh
migrated database, a dev CA, two `qinglong ingress serve` processes (HTTPS,
TLS 1.3, mTLS), a real `qinglong runtime sweep` process (production's default
`--every 5s`), and N `qinglong worker run --execute` processes alternating
between the ingresses, each running every accepted offer — `["true"]`, the
benchmarks' command — through pull → starting ACK → running ACK → complete.
Why not 32 SQL clients: measured on this 2-core box, 4 such workers complete
~63 runs/s and 32 complete ~60 runs/s: the box is CPU-bound (top during a
run: each ingress ~12 % of the machine — TLS and aiohttp —, the 32 workers
~40 % together, the 8 ingress database backends ~20 %), so 32 workers hold
the rate steady without adding to it. That is a meaningful rate (~36,000 runs
in 10 minutes, several dead tuples each), and the soak is about whether the
rate holds while the tables churn — so the real path (TLS, the ingress pool,
journal fsyncs, the executor, the sweeper) is what is soaked, not a faster
stand-in. Each worker has 1 slot (the default: one run at a time).

Sequence: fill the queue with `ql.enqueue_runs` in batches of 10,000, VACUUM
ANALYZE (so the ingresses' cached plans are made on the full queue), start the
ingresses, sweeper and workers, wait for every session, warm up, then measure
`duration` in intervals (full: 10 x 60 s; --quick: 4 workers, 10k runs,
4 x 5 s). A feeder enqueues, every 2 s, as many runs as were dispatched since
its last turn, so the queued depth stays at the fill size throughout.

Per interval, from the database: runs completed (`run.succeeded` +
`run.failed` events by their `created_at`) and dispatched; queued depth at the
interval's end. Pull latency p50/p99 per interval: the ingresses' own
`qinglong_ingress_request_duration_seconds{route="/v1/offers/pull"}` histogram
(server-side handling time), the delta of each interval, interpolated inside
its bucket as Prometheus' histogram_quantile does — so a figure is an estimate
within its bucket (bounds 1, 2.5, 5, 10, 25, 50, 100, 250 ms, …). Dead tuples:
`pg_stat_user_tables.n_dead_tup` of the four tables every 10 s (quick: 2 s).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field, replace
from itertools import pairwise
from pathlib import Path
from typing import Any

import psycopg

from qinglong.demo import pki_ca_cert, spawn
from tools.bench.common import Api, Table, fmt_ratio, histogram_quantile, ratio, vacuum
from tools.bench.e2e import INGRESSES, READY_TIMEOUT_S, OursLevel, _wait

QUEUE_TABLES = ("runs", "attempts", "run_leases", "events")
STORED_TABLES = (*QUEUE_TABLES, "security_audit")  # sized each interval (retention)
SWEEP_EVERY_S = 5
TARGET_GROWTH = 1.1
PULL_ROUTE = "/v1/offers/pull"
TARGET_RATIO = 0.9
TARGET_DEAD = 10_000


@dataclass(frozen=True)
class Sizes:
    workers: int
    depth: int
    intervals: int
    interval_s: float
    warmup_s: float
    sample_s: float  # dead-tuple sampling period
    slots: int = 1  # per worker: one run at a time, as a default worker runs
    feed_s: float = 2.0
    retain_runs_s: int = 60  # the sweeper's --retain-runs (SPEC §9.6)
    retain_audit_s: int = 60  # and --retain-audit


FULL = Sizes(workers=32, depth=1_000_000, intervals=10, interval_s=60.0, warmup_s=30.0,
             sample_s=10.0)  # fmt: skip
QUICK = Sizes(workers=4, depth=10_000, intervals=4, interval_s=5.0, warmup_s=3.0,
              sample_s=2.0, retain_runs_s=5, retain_audit_s=5)  # fmt: skip


# ------------------------------------------------------------------ the system


class SoakLevel(OursLevel):
    """bench e2e's real path, plus the sweeper and workers that execute their offers."""

    def __init__(self, cluster: Any, root: Path, sizes: Sizes, runs_root: Path) -> None:
        super().__init__(cluster, root, sizes.workers, sizes.depth)
        self.sizes = sizes
        self.runs_root = runs_root  # 0711, outside root: the run-as user reaches its runs

    def start_sweeper(self) -> None:
        # The DSN goes by environment, never argv (a password would show in `ps`).
        argv = [sys.executable, "-m", "qinglong", "runtime", "sweep",
                "--every", f"{SWEEP_EVERY_S}s", "--retain-runs", f"{self.sizes.retain_runs_s}s",
                "--retain-audit", f"{self.sizes.retain_audit_s}s"]  # fmt: skip
        self.sweeper_log = self.root / "sweeper.log"
        self.children.append(
            spawn("sweeper", argv, self.sweeper_log, env=os.environ | {"QINGLONG_DSN": self.dsn})
        )

    def start_workers(self) -> None:
        for index, ident in enumerate(self.idents):
            journal = self.run_dir / f"journal-{index}"
            self.journals.append(journal)
            config = {
                "ingressUrl": self.ingresses[index % INGRESSES]["ingressUrl"],
                "workerId": ident.worker_id, "certFile": str(ident.cert_file),
                "keyFile": str(ident.key_file), "caFile": str(pki_ca_cert(self.root / "ca")),
                "credentialFile": str(ident.credential_file), "journal": str(journal),
                "capabilities": {"schema": "qinglong/worker-capabilities@v1",
                                 "executors": ["remote-worker"], "labels": {}, "runtimes": {},
                                 "slots": self.sizes.slots},
                "execute": True, "executor": {"shutdownGraceS": 5, "killGraceS": 2,
                                              "runsDir": str(self.runs_root / journal.name)},
            }  # fmt: skip
            path = journal.with_suffix(".json")
            path.write_text(json.dumps(config), encoding="utf-8")
            argv = [sys.executable, "-m", "qinglong", "worker", "run", "--config", str(path)]
            # Executor isolation: as root, commands run as another user; not as
            # root, the bench accepts running them as its own user.
            from qinglong.worker.run_as import local_run_as

            argv += ["--run-as", local_run_as()]
            self.children.append(spawn(f"worker-{index}", argv,
                                       self.root / f"worker-{index}.log"))  # fmt: skip

    def sessions_open(self) -> bool:
        # Not bench e2e's status snapshot: a cheap count while the queue is deep.
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            row = conn.execute("SELECT count(*) FROM ql_private.worker_sessions "
                               "WHERE state = 'active'").fetchone()  # fmt: skip
        return row is not None and int(row[0]) >= self.workers

    def check_alive(self) -> None:
        dead = [c for c in self.children if c.process.poll() is not None]
        if dead:
            # The logs live in a temporary directory: say why before it is removed.
            tail = dead[0].log_path.read_bytes()[-1500:].decode(errors="replace")
            names = ", ".join(c.name for c in dead[:3])
            raise RuntimeError(f"soak: {names} exited during the run; {dead[0].name}:\n{tail}")

    def pull_histogram(self) -> PullStats:
        """The ingresses' pull-route histogram and pull results, summed."""
        stats = PullStats()
        for ingress in self.ingresses:
            with urllib.request.urlopen(f"{ingress['adminUrl']}/metrics", timeout=5) as resp:
                stats.add(resp.read().decode())
        return stats


@dataclass
class PullStats:
    """Cumulative pull figures scraped from /metrics (le -> count, result -> count)."""

    buckets: dict[float, float] = field(default_factory=dict)
    results: dict[str, float] = field(default_factory=dict)

    def add(self, text: str) -> None:
        bucket = f'qinglong_ingress_request_duration_seconds_bucket{{route="{PULL_ROUTE}",le="'
        for line in text.splitlines():
            name, _, value = line.rpartition(" ")
            if name.startswith(bucket):
                le = float(name[len(bucket) :].split('"', 1)[0].replace("+Inf", "inf"))
                self.buckets[le] = self.buckets.get(le, 0.0) + float(value)
            elif name.startswith('qinglong_ingress_pull_results_total{result="'):
                result = name.split('"')[1]
                self.results[result] = self.results.get(result, 0.0) + float(value)

    def minus(self, earlier: PullStats) -> PullStats:
        return PullStats(
            {le: n - earlier.buckets.get(le, 0.0) for le, n in self.buckets.items()},
            {k: n - earlier.results.get(k, 0.0) for k, n in self.results.items()},
        )

    def quantile_ms(self, q: float) -> float:
        return histogram_quantile(q, sorted(self.buckets.items())) * 1000

    @property
    def count(self) -> int:
        return int(self.buckets.get(math.inf, 0.0))


# ------------------------------------------------------------------ measurement


@dataclass
class DeadSample:
    at_s: float  # seconds since the measured window began
    dead: dict[str, int]
    autovacuums: dict[str, int]
    autoanalyzes: dict[str, int]
    vacuuming: list[str]  # tables an (auto)vacuum was working on at that moment
    xmin_age: int  # oldest snapshot of any backend, in transactions (what vacuum may keep)

    @property
    def total(self) -> int:
        return sum(self.dead.values())


@dataclass
class Interval:
    index: int
    completed: int = 0
    failed: int = 0
    dispatched: int = 0
    depth_end: int = 0
    pulls: PullStats = field(default_factory=PullStats)
    dead: list[DeadSample] = field(default_factory=list)
    stored: dict[str, int] = field(default_factory=dict)  # table + index bytes at its end

    def figures(self, interval_s: float) -> dict[str, Any]:
        return {"index": self.index, "completed": self.completed, "failed": self.failed,
                "perS": self.completed / interval_s, "dispatched": self.dispatched,
                "depthEnd": self.depth_end, "pulls": self.pulls.count,
                "pullResults": {k: int(v) for k, v in self.pulls.results.items()},
                "pullP50Ms": self.pulls.quantile_ms(0.50),
                "pullP99Ms": self.pulls.quantile_ms(0.99),
                "deadMax": max((s.total for s in self.dead), default=0),
                "storedBytes": self.stored, "storedTotal": sum(self.stored.values())}  # fmt: skip


@dataclass
class Soak:
    """The measured window: feeds the queue, samples, and cuts intervals."""

    level: SoakLevel
    sizes: Sizes
    conn: psycopg.Connection
    task_id: str
    first_event: int = 0  # events.id before the workers started
    fed: int = 0
    feed_cursor: int = 0  # events.id seen by the feeder
    last_pulls: PullStats = field(default_factory=PullStats)
    samples: list[DeadSample] = field(default_factory=list)
    intervals: list[Interval] = field(default_factory=list)
    started_db: Any = None  # the window's start (database clock); None while warming up
    # interval index -> [succeeded, failed, dispatched], tallied as the events appear:
    # with retention on, the sweeper deletes a finished run's events soon after.
    tally: dict[int, list[int]] = field(default_factory=dict)

    def one(self, query: str, *args: object) -> Any:
        row = self.conn.execute(query, args).fetchone()
        assert row is not None
        return row[0]

    def count_new(self) -> int:
        """Tally the events since the last call into their intervals (by their own
        time); returns how many runs were dispatched since."""
        rows = self.conn.execute(
            """SELECT CASE WHEN %(t0)s::timestamptz IS NULL OR created_at < %(t0)s THEN -1
                           ELSE floor(extract(epoch FROM created_at - %(t0)s) / %(iv)s)::int
                      END,
                      count(*) FILTER (WHERE type = 'run.succeeded'),
                      count(*) FILTER (WHERE type = 'run.failed'),
                      count(*) FILTER (WHERE type = 'run.dispatched'), max(id)
                 FROM ql_private.events WHERE id > %(cursor)s GROUP BY 1""",
            {"t0": self.started_db, "iv": self.sizes.interval_s, "cursor": self.feed_cursor},
        ).fetchall()  # fmt: skip
        dispatched = 0
        for index, succeeded, failed, sent, last in rows:
            self.feed_cursor = max(self.feed_cursor, int(last))
            dispatched += int(sent)
            if index >= 0:
                counts = self.tally.setdefault(int(index), [0, 0, 0])
                for pos, value in enumerate((succeeded, failed, sent)):
                    counts[pos] += int(value)
        return dispatched

    def feed(self) -> None:
        """Enqueue as many runs as were dispatched since the last turn."""
        dispatched = self.count_new()
        if dispatched:
            Api(self.conn).enqueue(self.task_id, dispatched)
            self.fed += dispatched

    def sample(self, at_s: float) -> DeadSample:
        rows = self.conn.execute(
            "SELECT relname, n_dead_tup, autovacuum_count, autoanalyze_count "
            "FROM pg_stat_user_tables WHERE schemaname = 'ql_private' AND relname = ANY(%s)",
            (list(QUEUE_TABLES),),
        ).fetchall()  # fmt: skip
        # Why dead tuples stay: a vacuum still running, or a snapshot holding them.
        vacuuming = [r[0] for r in self.conn.execute(
            "SELECT c.relname FROM pg_stat_progress_vacuum p JOIN pg_class c ON c.oid = p.relid "
            "WHERE p.datname = current_database()").fetchall()]  # fmt: skip
        xmin_age = self.one("SELECT coalesce(max(age(backend_xmin)), 0) FROM pg_stat_activity "
                            "WHERE pid <> pg_backend_pid()")  # fmt: skip
        sample = DeadSample(at_s, {r[0]: int(r[1]) for r in rows},
                            {r[0]: int(r[2]) for r in rows}, {r[0]: int(r[3]) for r in rows},
                            vacuuming, int(xmin_age))  # fmt: skip
        self.samples.append(sample)
        return sample

    def depth(self) -> int:
        return int(self.one("SELECT count(*) FROM ql_private.runs WHERE state = 'queued' "
                            "AND runtime_owned AND NOT cancel_requested"))  # fmt: skip

    def run(self) -> tuple[Any, float]:
        """The measured window; returns its database start time and wall seconds."""
        sizes = self.sizes
        started_db = self.started_db = self.one("SELECT clock_timestamp()")
        started = time.monotonic()
        self.last_pulls = self.level.pull_histogram()
        next_feed = next_sample = 0.0
        current = Interval(0)
        while len(self.intervals) < sizes.intervals:
            now = time.monotonic() - started
            self.level.check_alive()
            if now >= next_feed:
                self.feed()
                next_feed += sizes.feed_s
            if now >= (current.index + 1) * sizes.interval_s:
                current = self.close(current, now)
            elif now >= next_sample:
                current.dead.append(self.sample(now))
                next_sample += sizes.sample_s
            time.sleep(0.2)
        return started_db, time.monotonic() - started

    def close(self, current: Interval, now: float) -> Interval:
        """End `current` (its pull histogram delta, depth, a last sample); start the next.
        The boundary sample belongs to both intervals."""
        boundary = self.sample(now)
        current.dead.append(boundary)
        pulls = self.level.pull_histogram()
        current.pulls, self.last_pulls = pulls.minus(self.last_pulls), pulls
        current.depth_end = self.depth()
        current.stored = self.stored()
        self.intervals.append(current)
        return Interval(current.index + 1, dead=[boundary])

    def stored(self) -> dict[str, int]:
        """Table + index bytes (pg_total_relation_size) of the stored tables."""
        rows = self.conn.execute(
            "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'ql_private' AND c.relname = ANY(%s)",
            (list(STORED_TABLES),)).fetchall()  # fmt: skip
        return {str(name): int(size) for name, size in rows}

    def count_events(self) -> None:
        """Completed / dispatched per interval, from the tally kept during the window."""
        self.count_new()
        for index, (succeeded, failed, dispatched) in self.tally.items():
            if 0 <= index < len(self.intervals):
                interval = self.intervals[index]
                interval.completed = succeeded + failed
                interval.failed = failed
                interval.dispatched = dispatched


# ------------------------------------------------------------------ the run


def _fill(dsn: str, task_id: str, depth: int) -> float:
    started = time.monotonic()
    with psycopg.connect(dsn, autocommit=True) as conn:
        Api(conn).enqueue(task_id, depth)
    vacuum(dsn)  # VACUUM ANALYZE: plans and visibility as after a quiet fill
    return time.monotonic() - started


def _sweeps(path: Path) -> dict[str, int]:
    totals: dict[str, int] = {}
    with contextlib.suppress(OSError):
        for line in path.read_text(encoding="utf-8").splitlines():
            with contextlib.suppress(ValueError):
                doc = json.loads(line)
                if doc.get("event") == "sweep.pass":
                    for key in ("expired", "lost", "retried", "failed", "cancelled"):
                        totals[key] = totals.get(key, 0) + int(doc.get(key, 0))
                    for key, value in (doc.get("pruned") or {}).items():
                        if isinstance(value, int) and not isinstance(value, bool):
                            totals[f"pruned.{key}"] = totals.get(f"pruned.{key}", 0) + value
                    totals["passes"] = totals.get("passes", 0) + 1
    return totals


_AUTOVACUUM = re.compile(
    r'automatic vacuum of table "[^"]*\.ql_private\.(\w+)": '
    r"index scans: (\d+)"
)


@dataclass
class VacuumLog:
    """A table's autovacuums in the window, from the server log."""

    vacuums: int = 0
    index_vacuums: int = 0  # index scans: >= 1 (dead item stubs removed)
    bypassed: int = 0  # "index scan bypassed": stubs left in the heap


def autovacuum_log(path: Path, offset: int) -> dict[str, VacuumLog]:
    found = {name: VacuumLog() for name in QUEUE_TABLES}
    with open(path, encoding="utf-8", errors="replace") as handle:
        handle.seek(offset)
        text = handle.read()
    for entry in re.split(r"\n(?=\S)", text):  # a report's detail lines start with a tab
        match = _AUTOVACUUM.search(entry)
        if match is None or match.group(1) not in found:
            continue
        log = found[match.group(1)]
        log.vacuums += 1
        log.index_vacuums += int(match.group(2)) > 0
        log.bypassed += "index scan bypassed" in entry
    return found


def _soak(level: SoakLevel, sizes: Sizes) -> dict[str, Any]:
    level.setup()
    with psycopg.connect(level.dsn, autocommit=True) as conn:
        task_id = Api(conn).task("soak")
    fill_s = _fill(level.dsn, task_id, sizes.depth)
    level.start_ingresses()
    level.start_sweeper()
    with psycopg.connect(level.dsn, autocommit=True) as conn:
        soak = Soak(level, sizes, conn, task_id)
        soak.first_event = int(soak.one("SELECT coalesce(max(id), 0) FROM ql_private.events"))
        workers_started = time.monotonic()  # runs complete (and age) from about here
        level.start_workers()
        _wait(level.sessions_open, READY_TIMEOUT_S, "worker sessions", level.children)
        soak.feed_cursor = soak.first_event
        warm_end = time.monotonic() + sizes.warmup_s
        while time.monotonic() < warm_end:  # fed too, so the window starts at full depth
            soak.feed()
            time.sleep(min(sizes.feed_s, max(0.0, warm_end - time.monotonic())))
        soak.feed()
        depth_start = soak.depth()
        log_offset = level.cluster.log_file.stat().st_size  # vacuums of the window only
        window_offset_s = time.monotonic() - workers_started
        stored_start = soak.stored()
        _, wall_s = soak.run()
        soak.count_events()
        naptime = str(soak.one("SELECT current_setting('autovacuum_naptime')"))
    return {"fillS": fill_s, "depthStart": depth_start, "wallS": wall_s, "fed": soak.fed,
            "autovacuumNaptime": naptime,
            "intervals": soak.intervals, "samples": soak.samples,
            "sweeps": _sweeps(level.sweeper_log), "windowOffsetS": window_offset_s,
            "storedStart": stored_start,
            "vacuumLog": autovacuum_log(level.cluster.log_file, log_offset)}  # fmt: skip


QUEUE_NAPTIME = "10s"


def sizes_for(
    quick: bool,
    retain_runs_s: int | None = None,
    retain_audit_s: int | None = None,
    intervals: int | None = None,
) -> Sizes:
    """The preset, with the command line's overrides (None keeps the preset's)."""
    sizes = QUICK if quick else FULL
    overrides = {"retain_runs_s": retain_runs_s, "retain_audit_s": retain_audit_s,
                 "intervals": intervals}  # fmt: skip
    return replace(sizes, **{k: v for k, v in overrides.items() if v is not None})


def run_standalone(quick: bool, retain_runs_s: int | None = None,
                   retain_audit_s: int | None = None,
                   intervals: int | None = None) -> list[Table]:  # fmt: skip
    from qinglong.throwaway_postgres import ThrowawayPostgres

    sizes = sizes_for(quick, retain_runs_s, retain_audit_s, intervals)
    # log_autovacuum_min_duration: logging only — each autovacuum's report says
    # whether it vacuumed the indexes, which explains the dead-tuple figures.
    # autovacuum_naptime: the setting docs/OPERATIONS.md tells operators to use for
    # a queue (the server default of 1 min lets ~30k dead rows pile up between
    # visits at this rate: measured, BENCHMARKS-HISTORY.md 2026-11-30 00:28).
    cluster = ThrowawayPostgres(
        settings={"log_autovacuum_min_duration": "0", "autovacuum_naptime": QUEUE_NAPTIME}
    )
    cluster.start()
    try:
        with (
            tempfile.TemporaryDirectory(prefix="qinglong-bench-soak-") as tmp,
            tempfile.TemporaryDirectory(prefix="qinglong-bench-runs-") as runs,
        ):
            Path(runs).chmod(0o711)
            level = SoakLevel(cluster, Path(tmp), sizes, Path(runs))
            try:
                result = _soak(level, sizes)
            finally:
                level.teardown()
    finally:
        cluster.cleanup()
    return report(sizes, result)


# ------------------------------------------------------------------ report


def _dead_summary(samples: list[DeadSample], vacuums: dict[str, VacuumLog]) -> dict[str, Any]:
    first, last = samples[0], samples[-1]
    tables = {
        name: {"max": max(s.dead.get(name, 0) for s in samples), "final": last.dead.get(name, 0),
               "autovacuums": last.autovacuums.get(name, 0) - first.autovacuums.get(name, 0),
               "indexVacuums": vacuums[name].index_vacuums,
               "indexBypassed": vacuums[name].bypassed}
        for name in QUEUE_TABLES
    }  # fmt: skip
    return {"max": max(s.total for s in samples), "final": last.total, "tables": tables,
            "growthPerS": _growth_per_s(samples),
            "samples": [{"atS": round(s.at_s, 1), "total": s.total, "dead": s.dead,
                         "vacuuming": s.vacuuming, "xminAge": s.xmin_age,
                         "autovacuums": s.autovacuums, "autoanalyzes": s.autoanalyzes}
                        for s in samples]}  # fmt: skip


def _growth_per_s(samples: list[DeadSample]) -> float:
    """How fast dead tuples pile up while nothing removes them: the mean slope over
    the sample pairs where the total rose."""
    rises = [(b.total - a.total, b.at_s - a.at_s) for a, b in pairwise(samples)
             if b.total > a.total and b.at_s > a.at_s]  # fmt: skip
    seconds = sum(dt for _, dt in rises)
    return sum(n for n, _ in rises) / seconds if seconds else 0.0


def report(sizes: Sizes, result: dict[str, Any]) -> list[Table]:
    unit = "min" if sizes.interval_s == 60 else f"{sizes.interval_s:g} s"
    intervals = [i.figures(sizes.interval_s) for i in result["intervals"]]
    dead = _dead_summary(result["samples"], result["vacuumLog"])
    first, last = intervals[0], intervals[-1]
    last_ratio = ratio(last["completed"], first["completed"])
    table = Table(
        f"soak: {sizes.workers} `worker run --execute` processes, 2 ingresses (mTLS), "
        f"{sizes.depth:,} queued, {sizes.intervals} x {sizes.interval_s:g} s",
        ["interval", "completed", "runs/s", "failed", "pull p50 ms", "pull p99 ms", "pulls",
         "depth at end", "dead tuples max", "stored MiB at end"],
    )  # fmt: skip
    for fig in intervals:
        table.rows.append([
            f"{unit} {fig['index'] + 1}", f"{fig['completed']:,}", f"{fig['perS']:,.1f}",
            str(fig["failed"]), f"{fig['pullP50Ms']:.1f}", f"{fig['pullP99Ms']:.1f}",
            f"{fig['pulls']:,}", f"{fig['depthEnd']:,}", f"{fig['deadMax']:,}",
            _mib(fig["storedTotal"]),
        ])  # fmt: skip
    table.notes += _notes(sizes, result, dead, last_ratio)
    table.data = {"workers": sizes.workers, "depth": sizes.depth, "slots": sizes.slots,
                  "intervalS": sizes.interval_s, "intervals": intervals,
                  "lastFirstRatio": last_ratio, "ratioMet": last_ratio >= TARGET_RATIO,
                  "dead": dead, "deadMet": dead["max"] <= TARGET_DEAD,
                  "fillS": round(result["fillS"], 1), "depthStart": result["depthStart"],
                  "fed": result["fed"], "wallS": round(result["wallS"], 1),
                  "sweeps": result["sweeps"], "retainRunsS": sizes.retain_runs_s,
                  "retainAuditS": sizes.retain_audit_s}  # fmt: skip
    stored = _stored_table(sizes, result, intervals)
    table.data.update({key: stored.data[key] for key in ("growth", "growthMet", "steadyFrom")})
    table.notes.append(stored.notes[-1])
    return [table, _dead_table(dead), stored]


def _met(ok: bool) -> str:
    return "met" if ok else "MISSED"


def _notes(sizes: Sizes, result: dict[str, Any], dead: dict[str, Any],
           last_ratio: float) -> list[str]:  # fmt: skip
    total = sum(i.completed for i in result["intervals"])
    sweeps = result["sweeps"]
    return [
        f"last ÷ first interval completions = {fmt_ratio(last_ratio)} "
        f"(target ≥ {TARGET_RATIO}: {_met(last_ratio >= TARGET_RATIO)}); "
        f"{total:,} runs completed in {result['wallS']:.0f} s",
        _dead_note(sizes, dead, result["autovacuumNaptime"]),
        f"queue filled with {sizes.depth:,} runs in {result['fillS']:.0f} s (VACUUM ANALYZE "
        f"included); a feeder enqueued {result['fed']:,} more, one for each dispatched run, "
        f"so the queued depth stayed ≈ {sizes.depth:,} (at the window's start: "
        f"{result['depthStart']:,})",
        "pull p50/p99 = server-side handling time of POST /v1/offers/pull from the "
        "ingresses' histogram, interpolated within its bucket (an estimate)",
        f"sweeper (`qinglong runtime sweep --every {SWEEP_EVERY_S}s --retain-runs "
        f"{sizes.retain_runs_s}s --retain-audit {sizes.retain_audit_s}s`): "
        f"{sweeps.get('passes', 0)} passes, expired {sweeps.get('expired', 0)}, lost "
        f"{sweeps.get('lost', 0)}, retried {sweeps.get('retried', 0)}; pruned "
        f"{sweeps.get('pruned.runs', 0):,} runs, {sweeps.get('pruned.attempts', 0):,} attempts, "
        f"{sweeps.get('pruned.leases', 0):,} leases, {sweeps.get('pruned.events', 0):,} events, "
        f"{sweeps.get('pruned.securityAudit', 0):,} audit rows (from warm-up to the end)",
    ]


def _dead_note(sizes: Sizes, dead: dict[str, Any], naptime: str) -> str:
    met = dead["max"] <= TARGET_DEAD
    text = (f"dead tuples on runs + attempts + run_leases + events (summed), sampled every "
            f"{sizes.sample_s:g} s: max {dead['max']:,}, final {dead['final']:,} "
            f"(target ≤ {TARGET_DEAD:,}: {_met(met)})")  # fmt: skip
    if met:
        return text + f" with autovacuum_naptime = {naptime} (docs/OPERATIONS.md)"
    name, worst = max(dead["tables"].items(), key=lambda item: item[1]["max"])
    why = (
        f"; they grew ≈ {dead['growthPerS']:,.0f}/s between vacuums, and autovacuum "
        f"visits the database once per autovacuum_naptime = {naptime} (0002's "
        "per-table thresholds of 1,000 are crossed within seconds)"
    )
    if worst["indexBypassed"]:
        # PostgreSQL >= 14 skips index vacuuming while dead item stubs sit on < 2 % of the
        # heap's pages; the stubs stay, and ANALYZE (0002: every 5,000 changes) counts
        # them as dead tuples, so n_dead_tup keeps climbing on a large table until the
        # stubs cover 2 % of its pages.
        why += (
            f"; worst: ql_private.{name} (max {worst['max']:,}): "
            f"{worst['indexBypassed']} of its autovacuums skipped index vacuuming (dead "
            "item stubs on < 2 % of the heap's pages: PostgreSQL's bypass), and ANALYZE "
            "counts the stubs left behind as dead tuples; on a 1M-row table they pile up "
            "until they cover 2 % of its pages (the table's vacuum_index_cleanup = on "
            "would force index vacuuming; not set by the migrations, not set here)"
        )
    return text + why


def _dead_table(dead: dict[str, Any]) -> Table:
    table = Table("soak: dead tuples by queue table over the measured window",
                  ["table", "max", "final", "autovacuums", "with index vacuum",
                   "index vacuum bypassed"])  # fmt: skip
    for name, fig in dead["tables"].items():
        table.rows.append([f"ql_private.{name}", f"{fig['max']:,}", f"{fig['final']:,}",
                           str(fig["autovacuums"]), str(fig["indexVacuums"]),
                           str(fig["indexBypassed"])])  # fmt: skip
    table.data = {"tables": dead["tables"]}
    return table


def _mib(size: int) -> str:
    return f"{size / 1048576:,.1f}"


def steady_from(sizes: Sizes, window_offset_s: float) -> int | None:
    """The first interval that starts once retention is in steady state: the first runs
    completed when the workers started (window_offset_s before the window), so from
    retain + one sweep period after that on, every pass prunes what aged out."""
    for index in range(sizes.intervals):
        if window_offset_s + index * sizes.interval_s >= sizes.retain_runs_s + SWEEP_EVERY_S:
            return index
    return None


def _stored_table(sizes: Sizes, result: dict[str, Any],
                  intervals: list[dict[str, Any]]) -> Table:  # fmt: skip
    unit = "min" if sizes.interval_s == 60 else f"{sizes.interval_s:g} s"
    table = Table(f"soak: table + index MiB (pg_total_relation_size) at each interval's end, "
                  f"--retain-runs {sizes.retain_runs_s}s",
                  ["interval", *STORED_TABLES, "total"])  # fmt: skip
    start = result["storedStart"]
    table.rows.append(["window start", *(_mib(start.get(t, 0)) for t in STORED_TABLES),
                       _mib(sum(start.values()))])  # fmt: skip
    for fig in intervals:
        table.rows.append([f"{unit} {fig['index'] + 1}",
                           *(_mib(fig["storedBytes"].get(t, 0)) for t in STORED_TABLES),
                           _mib(fig["storedTotal"])])  # fmt: skip
    first = steady_from(sizes, result["windowOffsetS"])
    growth = (ratio(intervals[-1]["storedTotal"], intervals[first]["storedTotal"])
              if first is not None else math.nan)  # fmt: skip
    met = first is not None and growth <= TARGET_GROWTH
    if first is None:
        note = (
            f"stored bytes, last ÷ first interval in retention's steady state: no verdict "
            f"(steady state — {sizes.retain_runs_s} s retention + one {SWEEP_EVERY_S} s "
            "sweep after the first completions — not reached in the window)"
        )
    else:
        note = (
            f"stored bytes (table + index of {', '.join(STORED_TABLES)}) at the end of "
            f"{unit} {len(intervals)} ÷ at the end of {unit} {first + 1}, the first interval "
            f"starting once retention is in steady state (≥ {sizes.retain_runs_s} s retention "
            f"+ one {SWEEP_EVERY_S} s sweep after the first completions, "
            f"{result['windowOffsetS']:.0f} s before the window) = {fmt_ratio(growth)} "
            f"(target ≤ {TARGET_GROWTH}: {_met(met)})"
        )
    table.notes.append(note)
    table.data = {"growth": growth, "growthMet": met, "steadyFrom": first,
                  "storedStart": start,
                  "stored": [fig["storedBytes"] for fig in intervals]}  # fmt: skip
    return table
