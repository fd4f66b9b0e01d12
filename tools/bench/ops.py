"""`bench ops`: the operator reads at 1,000,000 stored runs, and pruning under load.

Fixture (tools/bench/ops_fill.py): a fresh clone of the template, four tasks, a
fleet of workers with open sessions (full: 300; --quick: 60) and 1,000,000 runs
of history (--quick: 20,000) written set-based as the superuser — 88 % terminal
over the last 7 days, 12 % live (queued, or running on live leases) — then
VACUUM ANALYZE. Bulk SQL is a fixture shortcut only: nothing measured uses it.

Reads (SPEC §9.4: each ≤ 50 ms of server time at 1,000,000 runs): the real
`ql.` functions called through db/api.py on one connection of a login role IN
ROLE ql_readonly, prepared statements, three unmeasured calls per case first;
then `repeats` rounds, each calling every case once (interleaved, so a noisy
moment on the shared machine hits all cases alike). Timed on the client around
`Call.run` — the round trip on 127.0.0.1 and psycopg's JSON decoding included,
so each figure is an upper bound of the server time (no EXPLAIN ANALYZE, whose
instrumentation adds its own cost).

Console pages (SPEC §10: each ≤ 100 ms of server time at 1,000,000 runs): the
same database, `qinglong console` as a subprocess logged in as the ql_readonly
role, every page fetched over HTTP on 127.0.0.1 (three unmeasured rounds, then
`repeats` interleaved rounds). Server time = the console's own `Server-Timing`
(from the request reaching the app to the page rendered: its database reads
included, the socket write not); client time = the whole HTTP exchange.

Console in a busy window (SPEC §10's page target where it is most at risk): a
fresh clone with `busy` runs (full: 110,000; --quick: 5,000) dispatched and
finished in the last 15 minutes (tools/bench/ops_fill.fill_busy_window: ≥
100,000 leases claimed and runs finished in the window at full size), 200 live
sessions with 200 distinct capabilities (a `host` label each), and 20 tasks
with 20 distinct placements (a `zone` label each, which no session has) whose
runs are the oldest waiting: the waiting panel evaluates 20 classes x 200
capabilities. ANALYZE only, no VACUUM: a window that busy is not
all-visible yet, so no index-only scan is flattered. Timed: the reads the
overview makes (as above) and the overview page (as above).

Prune under load (SPEC §9.6: batches that never block claims): the same
database plus `reserve` runs queued through ql.enqueue_runs; `threads`
connections claim (pull + starting ACK, as `bench depth`) for three fixed
windows: without pruning, while a further connection calls
`ql.prune_runs(p_retain_s => 0)` batch after batch (autocommit: one transaction
per batch of 1,000, as `admin prune` and the sweeper do) over every terminal
run, and without pruning again. The ratio is the pruning window's claims/s ÷
the mean of the two others (target ≥ 0.8). Afterwards every run any claimer was
offered is checked: still stored, `starting`, offered once (one
run.dispatched event), and the count of live runs is unchanged.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import sql as pgsql
from psycopg.conninfo import conninfo_to_dict

from qinglong.db import api as db_api
from qinglong.service.control_plane import PRUNE_PACE
from tools.bench import ops_fill
from tools.bench.common import (
    Api,
    BenchContext,
    Claimer,
    Session,
    Table,
    fmt_ratio,
    percentile,
    run_threads,
    vacuum,
    warm_up,
)

FULL = {
    "runs": 1_000_000,
    "chunk": 50_000,
    "fleet": 300,
    "repeats": 200,
    "threads": 4,
    "window_s": 20.0,
    "reserve": 30_000,
    "busy": 110_000,
}
QUICK = {
    "runs": 20_000,
    "chunk": 20_000,
    "fleet": 60,
    "repeats": 30,
    "threads": 4,
    "window_s": 4.0,
    "reserve": 20_000,
    "busy": 5_000,
}
BUSY_SESSIONS = 200
BUSY_PLACEMENTS = 20
BUSY_WAITING_PER_CLASS = 5
READ_TARGET_MS = 50.0
PAGE_TARGET_MS = 100.0
PAGE_WARMUP = 3
_SERVER_TIMING = re.compile(r"app;dur=([0-9.]+)")
PRUNE_TARGET = 0.8
PRUNE_BATCH = 1000
READ_WARMUP = 3
CLAIM_WARMUP = 2
READONLY_ROLE = "ql_bench_ops_ro"
TERMINAL = ("succeeded", "failed", "cancelled")
LIVE = ("queued", "dispatching", "starting", "running")
PHASES = ("without prune", "while pruning", "without prune (again)")


# ------------------------------------------------------------------ fixture


def _prepare(ctx: BenchContext, dsn: str, sizes: dict[str, Any]) -> ops_fill.Fixture:
    started = time.monotonic()
    with psycopg.connect(dsn, autocommit=True) as conn:
        api = Api(conn)
        task_ids = ops_fill.tasks(api, ctx.tasks["plain"])
        fleet = ops_fill.fleet(api, sizes["fleet"])
        by_state = ops_fill.fill(conn, sizes["runs"], sizes["chunk"], task_ids, fleet)
    vacuum(dsn)
    fixture = ops_fill.Fixture(task_ids, fleet, sizes["runs"], by_state)
    fixture.fill_s = time.monotonic() - started
    return fixture


def _readonly_dsn(ctx: BenchContext, dsn: str) -> str:
    with psycopg.connect(ctx.admin_dsn(), autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s",
                              (READONLY_ROLE,)).fetchone()  # fmt: skip
        if exists is None:
            conn.execute(
                pgsql.SQL("CREATE ROLE {} LOGIN IN ROLE ql_readonly").format(
                    pgsql.Identifier(READONLY_ROLE)
                )
            )
    return ctx.cluster.dsn(conninfo_to_dict(dsn)["dbname"], user=READONLY_ROLE)


# ------------------------------------------------------------------ reads


@dataclass
class ReadCase:
    label: str
    call: db_api.Call[Any]
    times: list[float] = field(default_factory=list)
    returned: int = 0


def _one_value(conn: psycopg.Connection, query: str, *args: Any) -> Any:
    row = conn.execute(query, args).fetchone()
    assert row is not None
    return row[0]


def _read_cases(dsn: str, fixture: ops_fill.Fixture) -> list[ReadCase]:
    """The calls to time; cursors and the shown run are looked up as the superuser."""
    task = fixture.tasks[0]
    with psycopg.connect(dsn, autocommit=True) as conn:
        middle = _one_value(conn, "SELECT queue_seq FROM ql_private.runs ORDER BY queue_seq "
                                  "OFFSET %s LIMIT 1", fixture.runs // 2)  # fmt: skip
        shown = _one_value(conn, "SELECT r.id::text FROM ql_private.runs r JOIN "
                                 "ql_private.attempts a ON a.id = r.current_attempt_id "
                                 "WHERE r.state = 'failed' AND a.attempt_no = 3 "
                                 "ORDER BY r.queue_seq LIMIT 1")  # fmt: skip
    deep = str(middle)  # the cursor's documented form: the last row's queue_seq
    return [
        ReadCase("list_runs (no filter)", db_api.list_runs()),
        ReadCase("list_runs --state succeeded", db_api.list_runs(states=["succeeded"])),
        ReadCase("list_runs --task X", db_api.list_runs(task_id=task)),
        ReadCase(
            "list_runs --task X --state queued", db_api.list_runs(task_id=task, states=["queued"])
        ),
        ReadCase("list_runs --after <middle of the keyset>", db_api.list_runs(after=deep)),
        ReadCase(
            "list_runs --task X --state failed --state cancelled --after <middle>",
            db_api.list_runs(task_id=task, states=["failed", "cancelled"], after=deep),
        ),
        ReadCase("show_run (a failed run: 3 attempts, 13 events)", db_api.show_run(run_id=shown)),
        ReadCase("list_workers", db_api.list_workers()),
        ReadCase("task_settings", db_api.task_settings(task_id=task)),
    ]


def _returned(value: Any) -> int:
    """Rows a read returned (runs, workers, attempts + events, or 1)."""
    value = getattr(value, "doc", value)  # a typed answer keeps its document
    if isinstance(value, dict):
        for key in ("runs", "workers"):
            if key in value:
                return len(value[key])
        if "attempts" in value:
            return len(value["attempts"]) + len(value["events"])
    return 1


def _measure_reads(ro_dsn: str, cases: list[ReadCase], repeats: int) -> None:
    with psycopg.connect(ro_dsn, autocommit=True) as conn:
        who = _one_value(
            conn,
            "SELECT pg_has_role(current_user, 'ql_readonly', 'MEMBER') "
            "AND NOT rolsuper FROM pg_roles WHERE rolname = current_user",
        )
        assert who, "the reads must run as a non-superuser member of ql_readonly"
        for case in cases:
            for _ in range(READ_WARMUP):
                case.returned = _returned(case.call.run(conn, prepare=True))
        for _ in range(repeats):
            for case in cases:
                started = time.perf_counter()
                case.call.run(conn, prepare=True)
                case.times.append(time.perf_counter() - started)


def _reads_table(cases: list[ReadCase], fixture: ops_fill.Fixture,
                 repeats: int) -> Table:  # fmt: skip
    table = Table(
        f"ops: operator reads through db/api.py as a ql_readonly role, {fixture.runs:,} runs "
        f"stored, {repeats} calls each",
        ["read", "rows", "p50 ms", "p99 ms", "max ms", f"≤ {READ_TARGET_MS:g} ms p99"],
    )
    rows = []
    for case in cases:
        p50, p99 = percentile(case.times, 50) * 1000, percentile(case.times, 99) * 1000
        met = not math.isnan(p99) and p99 <= READ_TARGET_MS
        verdict = "met" if met else f"MISSED (p99 {p99:.1f} ms)"
        table.rows.append([case.label, str(case.returned), f"{p50:.2f}", f"{p99:.2f}",
                           f"{max(case.times) * 1000:.2f}", verdict])  # fmt: skip
        rows.append(
            {
                "read": case.label,
                "function": case.call.function,
                "returned": case.returned,
                "p50Ms": p50,
                "p99Ms": p99,
                "met": met,
            }
        )
    states = ", ".join(f"{k} {v:,}" for k, v in sorted(fixture.by_state.items()))
    table.notes += [
        f"stored: {states}; 4 tasks (X = the biggest, 50 %), {len(fixture.fleet)} fleet "
        "workers with open sessions (+ the template's 200 without); filled set-based as the "
        f"superuser (a fixture shortcut, tools/bench/ops_fill.py) in {fixture.fill_s:.0f} s "
        "incl. VACUUM ANALYZE",
        "time = client wall time of one `Call.run` on a warm connection (prepared): an upper "
        "bound of the server time (loopback round trip and JSON decoding included)",
        "target: each read ≤ 50 ms p99 (SPEC §9.4): "
        + (
            "met"
            if all(r["met"] for r in rows)
            else "MISSED for " + ", ".join(r["read"] for r in rows if not r["met"])
        ),
    ]
    table.data = {"reads": rows, "stored": fixture.by_state, "runs": fixture.runs,
                  "fillS": round(fixture.fill_s, 1), "repeats": repeats}  # fmt: skip
    return table


# ------------------------------------------------------------------ console pages


@dataclass
class PageCase:
    label: str
    path: str
    server: list[float] = field(default_factory=list)
    client: list[float] = field(default_factory=list)
    size: int = 0


def _page_cases(fixture: ops_fill.Fixture, reads: list[ReadCase]) -> list[PageCase]:
    task = fixture.tasks[0]
    shown = next(c.call.params["run_id"] for c in reads if c.call.function == "show_run")
    deep = next(c.call.params["after"] for c in reads if c.call.params.get("after"))
    return [
        PageCase("/ (overview: 6 reads)", "/"),
        PageCase("/runs", "/runs"),
        PageCase("/runs?state=succeeded", "/runs?state=succeeded"),
        PageCase("/runs?task=X&state=queued", f"/runs?task={task}&state=queued"),
        PageCase("/runs?after=<middle>", f"/runs?after={deep}"),
        PageCase("/runs/<id> (3 attempts, 13 events)", f"/runs/{shown}"),
        PageCase(f"/workers (first 100 of {len(fixture.fleet) + 200} workers)", "/workers"),
    ]


def _fetch_page(base: str, case: PageCase) -> tuple[float, float]:
    """(server ms from Server-Timing, client ms) of one GET."""
    started = time.perf_counter()
    with urllib.request.urlopen(base + case.path, timeout=30) as response:
        body = response.read()
        timing = response.headers.get("Server-Timing", "")
    client = (time.perf_counter() - started) * 1000
    assert response.status == 200, (case.path, response.status)
    found = _SERVER_TIMING.search(timing)
    assert found is not None, f"no Server-Timing on {case.path}"
    case.size = len(body)
    return float(found.group(1)), client


def _measure_pages(ro_dsn: str, cases: list[PageCase], repeats: int) -> None:
    env = dict(os.environ, QINGLONG_DSN=ro_dsn)
    console = subprocess.Popen(
        [sys.executable, "-m", "qinglong", "console", "--port", "0", "--refresh-s", "0"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert console.stdout is not None
        first = console.stdout.readline()
        assert first.startswith("console: http://"), first
        base = first.split(" ", 1)[1].strip().rstrip("/")
        for _ in range(PAGE_WARMUP):
            for case in cases:
                _fetch_page(base, case)
        for _ in range(repeats):
            for case in cases:
                server, client = _fetch_page(base, case)
                case.server.append(server)
                case.client.append(client)
    finally:
        console.terminate()
        console.wait(timeout=10)


def _pages_table(cases: list[PageCase], fixture: ops_fill.Fixture, repeats: int) -> Table:
    table = Table(
        f"ops: console pages (qinglong console as a ql_readonly role), {fixture.runs:,} runs "
        f"stored, {repeats} requests each",
        [
            "page",
            "KiB",
            "server p50 ms",
            "server p99 ms",
            "server max ms",
            "client p99 ms",
            f"≤ {PAGE_TARGET_MS:g} ms p99",
        ],
    )
    rows = []
    for case in cases:
        p50, p99 = percentile(case.server, 50), percentile(case.server, 99)
        met = not math.isnan(p99) and p99 <= PAGE_TARGET_MS
        table.rows.append(
            [
                case.label,
                f"{case.size / 1024:.1f}",
                f"{p50:.1f}",
                f"{p99:.1f}",
                f"{max(case.server):.1f}",
                f"{percentile(case.client, 99):.1f}",
                "met" if met else f"MISSED (p99 {p99:.1f} ms)",
            ]
        )
        rows.append(
            {
                "page": case.label,
                "path": case.path,
                "serverP50Ms": p50,
                "serverP99Ms": p99,
                "clientP99Ms": percentile(case.client, 99),
                "bytes": case.size,
                "met": met,
            }
        )
    table.notes += [
        "server = the console's Server-Timing (request in to page rendered: every database "
        "read of the page included; the overview's six reads run concurrently on the "
        "console's pool); client = the whole HTTP exchange on 127.0.0.1",
        "target: each page ≤ 100 ms p99 of server time (SPEC §10): "
        + (
            "met"
            if all(r["met"] for r in rows)
            else "MISSED for " + ", ".join(r["page"] for r in rows if not r["met"])
        ),
    ]
    table.data = {"pages": rows, "runs": fixture.runs, "repeats": repeats}
    return table


# ------------------------------------------------------------------ busy window


@dataclass
class BusyFixture:
    runs: int
    by_state: dict[str, int]
    leases_in_window: int
    finished_in_window: int
    fill_s: float


def _busy_prepare(ctx: BenchContext, dsn: str, sizes: dict[str, Any]) -> BusyFixture:
    started = time.monotonic()
    with psycopg.connect(dsn, autocommit=True) as conn:
        api = Api(conn)
        task_ids = ops_fill.tasks(api, ctx.tasks["plain"])
        fleet = ops_fill.fleet(api, BUSY_SESSIONS, distinct=True)
        ops_fill.fill_busy_window(conn, sizes["busy"], sizes["chunk"], task_ids, fleet)
        zones = [
            api.task(f"zone-{i}", {"required": {"labels": {"zone": f"z{i}"}}})
            for i in range(BUSY_PLACEMENTS)
        ]
        for _ in range(BUSY_WAITING_PER_CLASS):  # the oldest waiting runs: 20 classes
            for task in zones:
                api.enqueue(task, 1)
        conn.execute("ANALYZE")
        window = "clock_timestamp() - interval '15 minutes'"
        leases = _one_value(
            conn, f"SELECT count(*) FROM ql_private.run_leases WHERE claimed_at >= {window}"
        )
        finished = _one_value(
            conn, f"SELECT count(*) FROM ql_private.runs WHERE finished_at >= {window}"
        )
    return BusyFixture(
        sizes["busy"], _by_state_of(dsn), int(leases), int(finished), time.monotonic() - started
    )


def _by_state_of(dsn: str) -> dict[str, int]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute("SELECT state, count(*) FROM ql_private.runs GROUP BY 1").fetchall()
    return {state: int(n) for state, n in rows}


def _busy_window(ctx: BenchContext, sizes: dict[str, Any]) -> Table:
    with ctx.fresh_db() as dsn:
        fixture = _busy_prepare(ctx, dsn, sizes)
        ro_dsn = _readonly_dsn(ctx, dsn)
        reads = [
            ReadCase("throughput (15 minutes)", db_api.throughput(minutes=15)),
            ReadCase(
                "waiting_runs (20 runs, 20 classes x 200 distinct sessions)",
                db_api.waiting_runs(limit=20),
            ),
            ReadCase("queue_depth", db_api.queue_depth()),
            ReadCase("live_sessions (50)", db_api.live_sessions(limit=50)),
            ReadCase("run_state_counts", db_api.run_state_counts()),
            ReadCase("recent_denials (20)", db_api.recent_denials(limit=20)),
        ]
        _measure_reads(ro_dsn, reads, sizes["repeats"])
        page = PageCase("/ (overview: 6 reads)", "/")
        _measure_pages(ro_dsn, [page], sizes["repeats"])
    return _busy_table(fixture, reads, page, sizes["repeats"])


def _busy_table(fixture: BusyFixture, reads: list[ReadCase], page: PageCase, repeats: int) -> Table:
    table = Table(
        f"ops: the console in a busy window ({fixture.leases_in_window:,} dispatches, "
        f"{fixture.finished_in_window:,} finishes in the last 15 minutes; {BUSY_SESSIONS} "
        f"sessions; {BUSY_PLACEMENTS} placements waiting), {repeats} calls each",
        ["read / page", "p50 ms", "p99 ms", "max ms", f"page ≤ {PAGE_TARGET_MS:g} ms p99"],
    )
    rows = []
    for case in reads:
        p50, p99 = percentile(case.times, 50) * 1000, percentile(case.times, 99) * 1000
        table.rows.append(
            [case.label, f"{p50:.2f}", f"{p99:.2f}", f"{max(case.times) * 1000:.2f}", "-"]
        )
        rows.append({"read": case.label, "p50Ms": p50, "p99Ms": p99})
    p50, p99 = percentile(page.server, 50), percentile(page.server, 99)
    met = not math.isnan(p99) and p99 <= PAGE_TARGET_MS
    table.rows.append(
        [
            page.label + " (server)",
            f"{p50:.1f}",
            f"{p99:.1f}",
            f"{max(page.server):.1f}",
            "met" if met else f"MISSED (p99 {p99:.1f})",
        ]
    )
    states = ", ".join(f"{k} {v:,}" for k, v in sorted(fixture.by_state.items()))
    table.notes += [
        f"stored: {states}; filled set-based in {fixture.fill_s:.0f} s, then ANALYZE (no "
        "VACUUM: the window's rows are not all-visible, as in a live busy window)",
        "reads: client wall time of one `Call.run` as the ql_readonly role (prepared); the "
        "page: the console's Server-Timing, its six reads run concurrently",
        "target: the overview ≤ 100 ms p99 of server time (SPEC §10): "
        + ("met" if met else "MISSED"),
    ]
    table.data = {
        "reads": rows,
        "pageP50Ms": p50,
        "pageP99Ms": p99,
        "met": met,
        "leasesInWindow": fixture.leases_in_window,
        "finishedInWindow": fixture.finished_in_window,
        "runs": fixture.runs,
        "repeats": repeats,
    }
    return table


# ------------------------------------------------------------------ prune under load


class RecordingApi(Api):
    """Api that remembers the run of every offer it was given."""

    def __init__(self, conn: psycopg.Connection) -> None:
        super().__init__(conn)
        self.run_ids: list[str] = []

    def pull(self, session: Session, offer_id: str, token_digest: bytes) -> dict[str, Any]:
        result = super().pull(session, offer_id, token_digest)
        if result.get("status") == "offered":
            self.run_ids.append(str(result["offer"]["candidate"]["runId"]))
        return result


@dataclass
class PhaseFigures:
    claims: int = 0
    pulls: list[float] = field(default_factory=list)
    busy: float = math.nan  # share of the machine's CPU time not idle in the window


def cpu_times() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine since boot (/proc/stat)."""
    with open("/proc/stat", encoding="ascii") as handle:
        fields = [int(x) for x in handle.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (a backend of the local cluster; NaN
    when it is not visible here, e.g. a QL_TEST_DSN server elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except OSError:
        return math.nan
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class PruneFigures:
    batches: list[float] = field(default_factory=list)
    deleted: dict[str, int] = field(default_factory=dict)
    finished: bool = False  # every terminal run pruned before the window ended
    active_s: float = 0.0  # how long the pruner was calling
    backend_cpu_s: float = math.nan  # its database backend's CPU seconds meanwhile


class PruneLoad:
    """Claimer threads over three windows; the last thread prunes in the middle one."""

    def __init__(self, ctx: BenchContext, dsn: str, sizes: dict[str, Any]) -> None:
        self.ctx, self.dsn, self.window = ctx, dsn, sizes["window_s"]
        self.threads = sizes["threads"]
        self.phases = [PhaseFigures() for _ in PHASES]
        self.prune = PruneFigures()
        self.run_ids: list[str] = []
        self.lock = threading.Lock()

    def claim(self, index: int, barrier: threading.Barrier) -> None:
        pool = self.ctx.workers[index :: self.threads]
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            api = RecordingApi(conn)
            claimer = Claimer(api, pool)
            warm_up(claimer, CLAIM_WARMUP)
            barrier.wait()
            started = time.monotonic()
            phases = [PhaseFigures() for _ in PHASES]
            while (now := time.monotonic() - started) < self.window * len(PHASES):
                phase = phases[int(now // self.window)]
                offered, pulls = claimer.outcomes.get("offered", 0), len(claimer.pull_times)
                claimer.step()
                phase.pulls += claimer.pull_times[pulls:]
                phase.claims += claimer.outcomes.get("offered", 0) - offered
            with self.lock:
                self.run_ids += api.run_ids
                for total, mine in zip(self.phases, phases, strict=True):
                    total.claims += mine.claims
                    total.pulls += mine.pulls

    def pruner(self, barrier: threading.Barrier) -> None:
        """Idle in the first window, prune through the second, idle in the third; and
        note the machine's CPU use per window and the pruning backend's CPU time."""
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            pid = int(_one_value(conn, "SELECT pg_backend_pid()"))
            barrier.wait()
            started = time.monotonic()
            marks = [cpu_times()]
            for index, phase in enumerate(self.phases):
                if index == 1:
                    cpu_before = process_cpu_s(pid)
                    self._prune(conn, started + 2 * self.window)
                    self.prune.active_s = time.monotonic() - started - self.window
                    self.prune.backend_cpu_s = process_cpu_s(pid) - cpu_before
                time.sleep(max(0.0, started + self.window * (index + 1) - time.monotonic()))
                marks.append(cpu_times())
                (b0, t0), (b1, t1) = marks[-2], marks[-1]
                phase.busy = (b1 - b0) / (t1 - t0) if t1 > t0 else math.nan

    def _prune(self, conn: psycopg.Connection, until: float) -> None:
        call = db_api.prune_runs(retain_s=0, batch=PRUNE_BATCH)
        while time.monotonic() < until:
            before = time.perf_counter()
            result = call.run(conn, prepare=True)  # autocommit: one transaction each
            took = time.perf_counter() - before
            self.prune.batches.append(took)
            for key, count in (
                ("runs", result.runs),
                ("attempts", result.attempts),
                ("leases", result.leases),
                ("events", result.events),
            ):
                self.prune.deleted[key] = self.prune.deleted.get(key, 0) + count
            if not result.more:
                self.prune.finished = True
                return
            time.sleep(PRUNE_PACE * took)  # the pacing `admin prune` and the sweeper use

    def run(self) -> None:
        def target(index: int, barrier: threading.Barrier) -> None:
            if index == self.threads:
                self.pruner(barrier)
            else:
                self.claim(index, barrier)

        run_threads(self.threads + 1, target)


def _live_count(conn: psycopg.Connection) -> int:
    return int(_one_value(conn, "SELECT count(*) FROM ql_private.runs WHERE state = ANY(%s)",
                          list(LIVE)))  # fmt: skip


def _check_claimed(conn: psycopg.Connection, run_ids: list[str]) -> dict[str, int]:
    """Every offered run still stored, `starting`, dispatched exactly once."""
    row = conn.execute(
        """SELECT count(*), count(*) FILTER (WHERE r.state = 'starting'),
                  (SELECT count(*) FROM ql_private.events e
                    WHERE e.type = 'run.dispatched' AND e.run_id = ANY(%(ids)s::uuid[]))
             FROM ql_private.runs r WHERE r.id = ANY(%(ids)s::uuid[])""",
        {"ids": run_ids},
    ).fetchone()  # fmt: skip
    assert row is not None
    return {"claimed": len(run_ids), "distinct": len(set(run_ids)), "stored": int(row[0]),
            "starting": int(row[1]), "dispatchedEvents": int(row[2])}  # fmt: skip


def _prune_under_load(ctx: BenchContext, dsn: str, sizes: dict[str, Any]) -> dict[str, Any]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        Api(conn).enqueue(ctx.tasks["plain"], sizes["reserve"])
        terminal = int(_one_value(conn, "SELECT count(*) FROM ql_private.runs "
                                        "WHERE state = ANY(%s)", list(TERMINAL)))  # fmt: skip
        live_before = _live_count(conn)
    vacuum(dsn, "ql_private.runs", "ql_private.attempts", "ql_private.events")
    load = PruneLoad(ctx, dsn, sizes)
    load.run()
    with psycopg.connect(dsn, autocommit=True) as conn:
        check = _check_claimed(conn, load.run_ids)
        check["liveBefore"], check["liveAfter"] = live_before, _live_count(conn)
    return {"terminal": terminal, "load": load, "check": check}


def _check_ok(check: dict[str, int]) -> bool:
    n = check["claimed"]
    return (
        check["distinct"] == check["stored"] == check["starting"] == n
        and check["dispatchedEvents"] == n
        and check["liveBefore"] == check["liveAfter"]
    )


def _prune_table(result: dict[str, Any], sizes: dict[str, Any]) -> Table:
    load: PruneLoad = result["load"]
    window = sizes["window_s"]
    rates = [p.claims / window for p in load.phases]
    base = (rates[0] + rates[2]) / 2
    value = rates[1] / base if base else math.nan
    table = Table(
        f"ops: claims/s of {sizes['threads']} connections (pull + starting ACK) without and "
        f"while ql.prune_runs(p_retain_s => 0) deletes {result['terminal']:,} terminal runs, "
        f"{len(PHASES)} x {window:g} s",
        ["window", "claims/s", "pulls without a claim", "pull p50 ms", "pull p99 ms",
         "machine CPU busy",
         "prune batches", "runs pruned", "rows pruned"],
    )  # fmt: skip
    deleted = load.prune.deleted
    for index, (name, phase) in enumerate(zip(PHASES, load.phases, strict=True)):
        pruning = index == 1
        table.rows.append([
            name, f"{rates[index]:,.0f}", f"{len(phase.pulls) - phase.claims:,}",
            f"{percentile(phase.pulls, 50) * 1000:.2f}",
            f"{percentile(phase.pulls, 99) * 1000:.2f}", f"{phase.busy:.0%}",
            str(len(load.prune.batches)) if pruning else "-",
            f"{deleted.get('runs', 0):,}" if pruning else "-",
            f"{sum(deleted.values()):,}" if pruning else "-",
        ])  # fmt: skip
    table.notes += _prune_notes(result, value, rates, base)
    table.data = {"rates": rates, "ratio": value, "met": value >= PRUNE_TARGET,
                  "terminal": result["terminal"], "deleted": deleted,
                  "batches": len(load.prune.batches), "pruneFinished": load.prune.finished,
                  "pruneActiveS": round(load.prune.active_s, 1),
                  "pruneBackendCpuS": round(load.prune.backend_cpu_s, 1),
                  "busy": [p.busy for p in load.phases],
                  "batchP50Ms": percentile(load.prune.batches, 50) * 1000,
                  "batchP99Ms": percentile(load.prune.batches, 99) * 1000,
                  "check": result["check"], "noneLost": _check_ok(result["check"]),
                  "windowS": window, "threads": sizes["threads"]}  # fmt: skip
    return table


def _prune_notes(result: dict[str, Any], value: float, rates: list[float],
                 base: float) -> list[str]:  # fmt: skip
    load: PruneLoad = result["load"]
    check, deleted = result["check"], load.prune.deleted
    verdict = "met" if value >= PRUNE_TARGET else "MISSED"
    batches = load.prune.batches
    return [
        f"ratio = claims/s while pruning ÷ mean of the windows around it ({base:,.0f}/s) = "
        f"{fmt_ratio(value)} (target ≥ {PRUNE_TARGET}: {verdict})",
        f"pruned in the window: {deleted.get('runs', 0):,} runs, "
        f"{deleted.get('attempts', 0):,} attempts, {deleted.get('leases', 0):,} leases, "
        f"{deleted.get('events', 0):,} events in {len(batches)} batches of {PRUNE_BATCH:,} "
        f"(one transaction each; batch p50 {percentile(batches, 50) * 1000:.0f} ms, p99 "
        f"{percentile(batches, 99) * 1000:.0f} ms)"
        + (
            f"; every terminal run was pruned {load.prune.active_s:.1f} s into the window (the "
            "rest of it ran without pruning)"
            if load.prune.finished
            else ""
        ),
        f"the pruning backend used {load.prune.backend_cpu_s:.1f} CPU s in its "
        f"{load.prune.active_s:.1f} s of pruning (one transaction per batch, each followed by "
        f"a pause of {PRUNE_PACE:g} x its duration, as `admin prune` and the sweeper do), on a "
        f"{os.cpu_count()}-CPU machine whose CPU was busy "
        f"{load.phases[0].busy:.0%} / {load.phases[1].busy:.0%} / {load.phases[2].busy:.0%} "
        "in the three windows (/proc/stat: every process, other users' too)",
        f"claimed runs: {check['claimed']:,} offered ({check['distinct']:,} distinct), "
        f"{check['stored']:,} still stored, {check['starting']:,} `starting`, "
        f"{check['dispatchedEvents']:,} run.dispatched events; live runs "
        f"{check['liveBefore']:,} before, {check['liveAfter']:,} after: "
        + ("none lost, each offered once" if _check_ok(check) else "MISMATCH"),
    ]


# ------------------------------------------------------------------ entry


def run(ctx: BenchContext) -> list[Table]:
    sizes = QUICK if ctx.quick else FULL
    with ctx.fresh_db() as dsn:
        fixture = _prepare(ctx, dsn, sizes)
        cases = _read_cases(dsn, fixture)
        ro_dsn = _readonly_dsn(ctx, dsn)
        _measure_reads(ro_dsn, cases, sizes["repeats"])
        reads = _reads_table(cases, fixture, sizes["repeats"])
        page_cases = _page_cases(fixture, cases)
        _measure_pages(ro_dsn, page_cases, sizes["repeats"])
        pages = _pages_table(page_cases, fixture, sizes["repeats"])
        prune = _prune_table(_prune_under_load(ctx, dsn, sizes), sizes)
    return [reads, pages, prune, _busy_window(ctx, sizes)]  # a fresh clone of its own
