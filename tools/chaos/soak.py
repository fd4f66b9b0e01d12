"""The chaos soak (docs/RELIABILITY.md): real processes on loopback, faults, a check.

Phases:

1. setup — a private PostgreSQL (migrated, login roles), dev CA + server cert,
   N worker identities, one task whose lease TTL is short; 3 ingress processes,
   the chaos proxy in front of them, `qinglong runtime sweep --every 1s`, the
   initial runs, then the workers (`qinglong worker run --config`, slots 2);
   the first `executing` of them with `--execute --run-as USER` (SPEC §7/§11):
   they start, heartbeat and complete their leases; the tasks of env.TASKS
   (some only they may run: placement) sleep a little, one always fails.
2. faults — until the plan's duration has passed *and* enough pulls happened
   (bounded by a hard cap): SIGKILL a random ingress / worker on their periods
   and restart it, `pg_ctl restart -m immediate` spread evenly, response drops
   at the proxy throughout, 2 s latency spikes; restarted workers armed with a
   crash window of the claim protocol (every window until each was hit;
   `aside_replace` after closing the session of the restarted worker's intent,
   as an operator would, so that the restart moves that intent aside);
   meanwhile runs are enqueued and a few cancelled (mostly long-running ones,
   so the cancel reaches a running command through its heartbeat), as a client
   would; now and then a second process is started on a live worker's journal
   (an operator's mistake): the owner lock must turn it away (`double_start`).
3. heal — faults off, everything restarted, workers + sweeper run for the lease
   TTL + 5 s.
4. heal cut — all workers frozen (SIGSTOP), a database snapshot, then every
   journal's inbox/pending offer ids (a frozen worker cannot change its journal,
   so every lease in the snapshot is either in its worker's inbox, its intent in
   flight, or abandoned), then SIGCONT.
5. stop — workers drained with SIGTERM, the final database snapshot, then
   everything else stopped; history built from the worker logs and our records;
   the checker runs.

Pulls are counted from each ingress's `qinglong_ingress_pull_results_total`
(admin /metrics), scraped every second with counter resets (restarts) handled;
what a killed ingress counted after its last scrape is lost, so the figure is a
lower bound.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import signal
import sys
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from qinglong.worker.faults import CRASH_ENV, TRACE_IDLE_ENV, FaultPoint
from tools.chaos import env as soak_env
from tools.chaos.byzantine import PROCESS as BYZ
from tools.chaos.byzantine import RECORD_FILE as BYZ_RECORD
from tools.chaos.checker import HEAL_FILE, MANIFEST_FILE, RESULT_FILE, Report, check_dir
from tools.chaos.history import (
    CLIENT,
    FAIL,
    INFO,
    INVOKE,
    NEMESIS,
    OK,
    HistoryWriter,
    Op,
    build_history,
)
from tools.chaos.procs import Child, Supervisor
from tools.chaos.proxy import ChaosProxy
from tools.chaos.snapshot import SNAPSHOT_FILE, read_journal, take_db_snapshot, write_json

QL = [sys.executable, "-m", "qinglong"]
# Credential self-rotation's windows (worker/credential_rotation.py): a rotation
# is due only at 75 % of a credential's 90-day lifetime, which no soak reaches; a
# SIGKILL in each of them is proven by tests/py/test_credential_rotation.py
# (test_a_crash_at_every_step_of_a_rotation_leaves_the_worker_able_to_authenticate).
ROTATION_POINTS = frozenset({FaultPoint.BEFORE_ROTATE, FaultPoint.AFTER_ROTATE_RESPONSE,
                             FaultPoint.AFTER_ROTATE_WRITE,
                             FaultPoint.AFTER_ROTATE_FIRST_USE})  # fmt: skip
# Every crash window of the claim protocol (worker/faults.py): each one is armed in
# every soak until a worker has died in it (Soak.crash_hits, soak.json crashWindows).
CRASH_POINTS = tuple(point.value for point in FaultPoint if point not in ROTATION_POINTS)
# Met only when an intent is moved aside (a conflict, a lost session): armed on a
# non-executing worker restarted with an intent on disk, after the nemesis closed
# that intent's session as an operator would (`admin session close`): the restart
# must then find the session gone and move the intent aside (worker/runner.py).
# Never armed by chance before it was hit (a worker armed with it that never moves
# an intent aside would hold it for nothing).
ASIDE_POINT = FaultPoint.ASIDE_REPLACE.value
# Windows every pull meets (an idle answer too) that leave the intent on disk: a
# non-executing worker restarted without an intent while `aside_replace` is still
# missing is armed with one of them, so that its next restart has an intent.
INTENT_KEEPING = (FaultPoint.BEFORE_SEND.value, FaultPoint.AFTER_PULL_RESPONSE.value,
                  FaultPoint.PENDING_UNLINK.value)  # fmt: skip
RECORDS = ("nemesis.jsonl", "observed.jsonl", BYZ_RECORD)
CHECK_FILE = "check.json"
_PULLS = re.compile(r'^qinglong_ingress_pull_results_total\{result="([a-z_]+)"\} ([0-9.e+]+)$')
READY_TIMEOUT_S = 90.0
# A second process on a held journal: how long it may take to be turned away, and
# the events it may log before it opens the journal (anything else: it ran).
DOUBLE_WAIT_S = 15.0
LONG_TASK = "exec-long"  # env.TASKS: the cancellation target
DOUBLE_START_EVENTS = frozenset({"worker.starting", "worker.unisolated", "worker.failed"})
OWNER_LOG_TAIL = 1 << 20  # bytes of a worker log read to find its current start
TICK_S = 0.2

__all__ = ["LONG", "PLANS", "SHORT", "Soak", "SoakPlan"]


@dataclass(frozen=True)
class SoakPlan:
    name: str
    min_pulls: int
    duration_s: float  # fault phase lasts at least this long ...
    max_duration_s: float  # ... and at most this long, even if pulls fall short
    workers: int = 12
    ingresses: int = 3
    slots: int = 2
    lease_ttl_s: int = 5
    ingress_kill_every_s: float = 20.0
    ingress_down_s: float = 1.0
    worker_kill_every_s: float = 10.0
    # Down time of a killed worker, uniform in this range: past the lease TTL, its
    # replayed intent meets an expired lease (a conflict) instead of a replay.
    worker_down_s: tuple[float, float] = (0.2, 8.0)
    # A restarted worker is armed with a crash point (worker/faults.py): it SIGKILLs
    # itself when its claim next reaches that point, inside a crash window. Every
    # restart is armed (with a window not hit yet, chosen by the seed) until every
    # window was hit; after that every Nth restart, with any window.
    crash_point_every: int = 3
    pg_restarts: int = 3
    drop_probability: float = 0.05
    spike_every_s: float = 25.0
    spike_length_s: float = 4.0
    spike_latency_s: float = 2.0
    initial_runs: int = 40
    executing: int = 4  # workers with --execute (the rest only hold their offers)
    double_start_every_s: float = 30.0
    # The hostile worker (tools/chaos/byzantine.py): requests per second, 0 = none.
    byzantine_rate_per_s: float = 4.0
    enqueue_every_s: float = 10.0
    enqueue_batch: int = 6
    cancel_every_s: float = 10.0
    seed: int | None = None


# The hostile pool (env.HOSTILE_POOL): runs at the start, and more with each enqueue,
# so its honest pulls keep getting offers (priority fixed: the seed's draws unchanged).
HOSTILE_RUNS, HOSTILE_TOPUP = 20, 3
STALE_ARM_S = 30.0  # an armed worker that has not reached its window by then: arm another
SHORT = SoakPlan("short", min_pulls=2000, duration_s=140.0, max_duration_s=220.0)
LONG = SoakPlan("long", min_pulls=20000, duration_s=900.0, max_duration_s=2400.0)
PLANS = {"short": SHORT, "long": LONG}


class SoakError(Exception):
    """The soak could not run (setup failed, PostgreSQL would not restart, ...)."""


def now_ms() -> int:
    return time.time_ns() // 1_000_000


# ------------------------------------------------------------------ observers


class PullCounter:
    """Sums pull results over every ingress incarnation, from /metrics scrapes."""

    def __init__(self, admin_ports: dict[str, int], every_s: float = 1.0) -> None:
        self._ports = admin_ports
        self._every_s = every_s
        self._last: dict[str, dict[str, float]] = {name: {} for name in admin_ports}
        self.by_result: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="pull-counter", daemon=True)

    def start(self) -> PullCounter:
        self._thread.start()
        return self

    @property
    def total(self) -> int:
        with self._lock:
            return int(sum(self.by_result.values()))

    def scrape(self, name: str) -> None:
        try:
            url = f"http://127.0.0.1:{self._ports[name]}/metrics"
            with urllib.request.urlopen(url, timeout=1.0) as response:
                text = response.read().decode("utf-8", "replace")
        except (OSError, ValueError):
            return  # down or restarting
        current = {m.group(1): float(m.group(2))
                   for m in map(_PULLS.match, text.splitlines()) if m}  # fmt: skip
        with self._lock:
            last = self._last[name]
            for result, value in current.items():
                before = last.get(result, 0.0)
                # A smaller value: the ingress restarted and its counter began again.
                self.by_result[result] += int(value - before if value >= before else value)
            self._last[name] = current

    def forget(self, name: str) -> None:
        """The ingress was killed: its next incarnation counts from zero."""
        with self._lock:
            self._last[name] = {}

    def _loop(self) -> None:
        while not self._stop.wait(self._every_s):
            for name in self._ports:
                self.scrape(name)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        for name in self._ports:
            self.scrape(name)


class JournalObserver:
    """Records what the logs cannot show: intents on disk, intents moved aside.

    Read-only and tolerant of races with the live worker (files come and go).
    """

    def __init__(self, roots: dict[str, Path], writer: HistoryWriter,
                 every_s: float = 1.0) -> None:  # fmt: skip
        self._roots = roots
        self._writer = writer
        self._every_s = every_s
        self._seen: set[tuple[str, str, str]] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="journal-observer", daemon=True)

    def start(self) -> JournalObserver:
        self._thread.start()
        return self

    def observe(self) -> None:
        for name, root in self._roots.items():
            self._pending(name, root)
            self._failed(name, root)

    def _note(self, name: str, kind: str, offer_id: str, op: Op) -> None:
        if (name, kind, offer_id) not in self._seen:
            self._seen.add((name, kind, offer_id))
            self._writer.write(op)

    def _pending(self, name: str, root: Path) -> None:
        with contextlib.suppress(OSError, ValueError):
            doc = json.loads((root / "pending-claim.json").read_bytes())
            offer_id = doc.get("offerId") if isinstance(doc, dict) else None
            if isinstance(offer_id, str):
                self._note(
                    name,
                    "pending",
                    offer_id,
                    Op(now_ms(), name, INVOKE, "claim", offer_id=offer_id, src="journal"),
                )

    def _failed(self, name: str, root: Path) -> None:
        try:
            names = [p for p in os.listdir(root / "failed-claims") if p.endswith(".json")]
        except OSError:
            return
        for file_name in names:
            offer_id = file_name.removesuffix(".json")
            if (name, "failed", offer_id) in self._seen:
                continue
            with contextlib.suppress(OSError, ValueError):
                doc = json.loads((root / "failed-claims" / file_name).read_bytes())
                reason = str(doc.get("reason")) if isinstance(doc, dict) else None
                claim = (doc.get("claim") if isinstance(doc, dict) else None) or {}
                attempts = claim.get("attempts") if isinstance(claim, dict) else None
                self._note(
                    name,
                    "failed",
                    offer_id,
                    Op(
                        now_ms(),
                        name,
                        FAIL,
                        "claim",
                        offer_id=offer_id,
                        value="moved_aside",
                        reason=reason,
                        src="journal",
                        extra={"attempts": attempts} if isinstance(attempts, int) else {},
                    ),
                )

    def _loop(self) -> None:
        while not self._stop.wait(self._every_s):
            self.observe()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self.observe()


# ------------------------------------------------------------------ the soak


@dataclass
class Schedule:
    """When each periodic action is next due (monotonic seconds)."""

    ingress_kill: float
    worker_kill: float
    spike: float
    enqueue: float
    cancel: float
    pg_restarts: list[float]
    double_start: float = 0.0
    spike_ends: float | None = None
    restarts: list[tuple[float, str]] = field(default_factory=list)


@dataclass
class Soak:
    plan: SoakPlan
    out: Path
    say: Callable[[str], None] = print
    strict: bool = False  # count known bugs (checker.KNOWN_ISSUES) as anomalies
    rng: random.Random = field(init=False)
    sup: Supervisor = field(default_factory=Supervisor)
    env: soak_env.SoakEnv | None = None
    proxy: ChaosProxy | None = None
    pulls: PullCounter | None = None
    observer: JournalObserver | None = None
    recorder: HistoryWriter | None = None
    admin_ports: dict[str, int] = field(default_factory=dict)
    workers: list[str] = field(default_factory=list)
    ingresses: list[str] = field(default_factory=list)
    known_runs: list[str] = field(default_factory=list)
    unexpected: list[dict[str, Any]] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    armed: dict[str, str | None] = field(default_factory=dict)  # worker -> crash point
    armed_at: dict[str, float] = field(default_factory=dict)  # worker -> monotonic time
    worker_env: dict[str, str] = field(default_factory=dict)
    worker_restarts: int = 0
    crash_hits: Counter[str] = field(default_factory=Counter)
    seed: int = 0
    started: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        self.seed = self.plan.seed if self.plan.seed is not None else random.randrange(2**32)
        self.rng = random.Random(self.seed)
        self.out.mkdir(parents=True, exist_ok=True)
        # Private: --run-as refuses to start while its user could read a journal/key.
        self.out.chmod(0o700)
        self.workers = [f"w{i:02d}" for i in range(1, self.plan.workers + 1)]
        self.ingresses = [f"ingress-{i}" for i in range(1, self.plan.ingresses + 1)]
        self.worker_env = {k: v for k, v in os.environ.items() if not k.startswith("QL_WORKER_")}
        self.worker_env[TRACE_IDLE_ENV] = "1"  # every idle answer in the log, for the checker
        self.executing = set(self.workers[: self.plan.executing])
        self.run_tasks: dict[str, str] = {}  # run id -> task name
        self.doubles: list[threading.Thread] = []
        self.doubling: set[str] = set()  # workers with a second process running

    # -- records ---------------------------------------------------------------

    def log(self, text: str) -> None:
        self.say(f"[{time.monotonic() - self.started:6.1f}s] {text}")

    def record(self, process: str, kind: str, f: str, **fields: Any) -> None:
        assert self.recorder is not None
        extra = fields.pop("extra", {})
        self.recorder.write(Op(now_ms(), process, kind, f, extra=extra, **fields))

    def fault(self, f: str, value: str | None = None, **extra: Any) -> None:
        self.record(NEMESIS, INFO, f, value=value, extra=extra)

    # -- setup -----------------------------------------------------------------

    def setup(self) -> None:
        from qinglong.throwaway_postgres import free_loopback_port

        self.recorder = HistoryWriter(self.out / RECORDS[0])
        identities = [*self.workers, *([BYZ] if self.plan.byzantine_rate_per_s > 0 else [])]
        self.env = soak_env.create_env(
            self.out, identities, self.plan.lease_ttl_s, hostile=BYZ if BYZ in identities else None
        )
        self.log(
            f"PostgreSQL on 127.0.0.1:{self.env.cluster.port}, migrated; CA, "
            f"{len(self.workers)} worker identities; lease TTL {self.plan.lease_ttl_s}s"
        )
        ports: list[int] = []
        free = _distinct_ports(free_loopback_port, 2 * len(self.ingresses))
        for name in self.ingresses:
            port, admin = free.pop(), free.pop()
            config = soak_env.ingress_config(self.env, name, port, admin)
            self.admin_ports[name] = admin
            ports.append(port)
            argv = [*QL, "ingress", "serve", "--processes", "1", "--config", str(config)]
            self.sup.add(Child(name, argv, self.out / "logs" / f"{name}.log")).start()
        self._wait_ready(self.ingresses)
        self.proxy = ChaosProxy(
            ports,
            rng=random.Random(self.rng.random()),
            on_drop=lambda conn: self.fault("drop_response", str(conn)),
        )
        self.proxy.start()
        sweep = [*QL, "runtime", "sweep", "--every", "1s"]  # DSN by environment, not argv
        self.sup.add(
            Child(
                "sweeper",
                sweep,
                self.out / "logs" / "sweeper.log",
                env=os.environ | {"QINGLONG_DSN": self.env.sweeper_dsn},
            )
        ).start()
        for spec in soak_env.TASKS:  # every task from the start, by its weight
            share = self.plan.initial_runs * spec.weight // sum(t.weight for t in soak_env.TASKS)
            self.enqueue(max(share, 1), spec.name)
        if BYZ in identities:  # the hostile pool's runs: only the hostile may take them
            self.enqueue(HOSTILE_RUNS, soak_env.HOSTILE_TASK.name, hostile=True)
        self._start_workers(self.proxy.port)
        self._start_byzantine(self.proxy.port)
        self._write_manifest()
        self.pulls = PullCounter(self.admin_ports).start()
        roots = {name: self.out / "journals" / name for name in self.workers}
        observed = HistoryWriter(self.out / RECORDS[1])
        self.observer = JournalObserver(roots, observed).start()
        self.log(
            f"{len(self.ingresses)} ingresses behind proxy :{self.proxy.port}, sweeper, "
            f"{len(self.workers)} workers (slots {self.plan.slots})"
        )

    def _start_workers(self, proxy_port: int) -> None:
        from qinglong.worker.run_as import ensure_unprivileged_user

        assert self.env is not None
        run_as = ensure_unprivileged_user() if self.executing else None
        for name in self.workers:
            execute = name in self.executing
            config = soak_env.worker_config(self.env, name, proxy_port, self.plan.slots,
                                            execute=execute)  # fmt: skip
            argv = [*QL, "worker", "run", "--config", str(config)]
            if execute:
                argv += ["--execute", "--run-as", str(run_as)]
            log = self.out / "logs" / f"{name}.log"
            self.sup.add(Child(name, argv, log, env=dict(self.worker_env))).start()

    def _start_byzantine(self, proxy_port: int) -> None:
        """The hostile worker: its own identity, the real ingress (through the proxy)."""
        if self.plan.byzantine_rate_per_s <= 0:
            return
        assert self.env is not None
        ident = self.env.workers[BYZ]
        victims = [{"name": n, "workerId": self.env.workers[n].worker_id,
                    "journal": str(self.out / "journals" / n),
                    "credentialFile": self.env.workers[n].credential_file}
                   for n in self.workers]  # fmt: skip
        config = soak_env.write_config(
            self.out / "config" / f"{BYZ}.json",
            {
                "ingressUrl": f"https://127.0.0.1:{proxy_port}",
                "workerId": ident.worker_id,
                "certFile": ident.cert_file,
                "keyFile": ident.key_file,
                "caFile": str(self.env.ca_file),
                "credentialFile": ident.credential_file,
                "record": str(self.out / BYZ_RECORD),
                "victims": victims,
                "labels": soak_env.HOSTILE_LABELS,
                "foreignLabels": soak_env.EXEC_LABEL,
                "ratePerS": self.plan.byzantine_rate_per_s,
                "leaseTtlS": self.plan.lease_ttl_s,
                "seed": self.rng.randrange(2**32),
            },
        )
        argv = [sys.executable, "-m", "tools.chaos.byzantine", str(config)]
        self.sup.add(Child(BYZ, argv, self.out / "logs" / f"{BYZ}.log")).start()

    def _wait_ready(self, names: list[str]) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        waiting = set(names)
        while waiting:
            for name in sorted(waiting):
                child = self.sup.children[name]
                if not child.alive:
                    raise SoakError(f"{name} exited at start: {_tail(child.log_path)}")
                if _ready(self.admin_ports[name]):
                    waiting.discard(name)
            if waiting and time.monotonic() > deadline:
                raise SoakError(f"not ready after {READY_TIMEOUT_S:.0f}s: {sorted(waiting)}")
            time.sleep(0.2)

    def _write_manifest(self) -> None:
        assert self.env is not None
        workers = {name: {"workerId": self.env.workers[name].worker_id,
                          "journal": f"journals/{name}", "execute": name in self.executing,
                          "labels": dict(soak_env.EXEC_LABEL) if name in self.executing
                          else {}, "slots": self.plan.slots}
                   for name in self.workers}  # fmt: skip
        tasks = {spec.name: spec.manifest(self.env.tasks[spec.name], self.plan.lease_ttl_s)
                 for spec in soak_env.TASKS}  # fmt: skip
        write_json(
            self.out / MANIFEST_FILE,
            {
                "plan": asdict(self.plan),
                "seed": self.seed,
                "workers": workers,
                "ingresses": self.ingresses,
                "taskId": self.env.task_id,
                "tasks": tasks,
                "byzantine": (
                    {
                        "name": BYZ,
                        "workerId": self.env.workers[BYZ].worker_id,
                        "pool": soak_env.HOSTILE_POOL,
                        "labels": soak_env.HOSTILE_LABELS,
                        "taskId": self.env.tasks[soak_env.HOSTILE_TASK.name],
                    }
                    if BYZ in self.env.workers
                    else None
                ),
                "startedAtMs": now_ms(),
            },
        )

    # -- client operations -----------------------------------------------------

    def enqueue(self, count: int, task: str | None = None, hostile: bool = False) -> None:
        """`hostile`: runs of the hostile pool (never cancelled, no draw of the seed)."""
        from qinglong.service import control_plane

        assert self.env is not None
        priority = 0 if hostile else self.rng.randint(0, 3)
        specs = soak_env.TASKS
        if task is None:
            task = self.rng.choices([t.name for t in specs], [t.weight for t in specs])[0]
        self.record(CLIENT, INVOKE, "enqueue",
                    extra={"count": count, "priority": priority, "task": task})  # fmt: skip
        try:
            with control_plane.connect(self.env.dsn) as conn:
                result = control_plane.enqueue_runs(conn, self.env.tasks[task], priority, count)
        except Exception as exc:  # the database may be restarting: an indeterminate op
            self.record(CLIENT, FAIL, "enqueue", reason=type(exc).__name__)
            return
        run_ids = list(result.run_ids)
        if not hostile:
            self.known_runs.extend(run_ids)
        self.run_tasks.update(dict.fromkeys(run_ids, task))
        self.record(CLIENT, OK, "enqueue", extra={"runIds": run_ids, "task": task})

    def cancel_one(self) -> None:
        from qinglong.db import api
        from qinglong.service import control_plane

        assert self.env is not None
        if not self.known_runs:
            return
        # Mostly a running long command: its cancel must reach it by heartbeat.
        running = self._running(LONG_TASK) if self.rng.random() < 0.75 else []
        run_id = self.rng.choice(running or self.known_runs)
        self.record(CLIENT, INVOKE, "cancel", run_id=run_id)
        try:
            with control_plane.connect(self.env.dsn) as conn:
                result = control_plane.run(conn, api.cancel_run(run_id=run_id)).doc
        except Exception as exc:
            self.record(CLIENT, FAIL, "cancel", run_id=run_id, reason=type(exc).__name__)
            return
        self.record(CLIENT, OK, "cancel", run_id=run_id, value=str(result.get("state")))

    def _running(self, task: str) -> list[str]:
        from qinglong.db import api
        from qinglong.service import control_plane

        assert self.env is not None
        with contextlib.suppress(Exception):
            with control_plane.connect(self.env.dsn) as conn:
                found = control_plane.run(
                    conn, api.list_runs(task_id=self.env.tasks[task], states=["running"], limit=100)
                ).doc
            return [str(r["runId"]) for r in found.get("runs", [])]
        return []

    # -- faults ----------------------------------------------------------------

    def _alive(self, names: list[str]) -> list[str]:
        return [n for n in names if self.sup.children[n].alive]

    def kill_random(self, names: list[str], kind: str, down_s: float,
                    schedule: Schedule) -> None:  # fmt: skip
        pending = {name for _, name in schedule.restarts}
        candidates = [n for n in self._alive(names) if n not in pending and n not in self.doubling]
        if not candidates:
            return
        name = self.rng.choice(candidates)
        child = self.sup.children[name]
        self.fault(kind, name, pid=child.pid)
        child.kill()
        if name in self.admin_ports and self.pulls is not None:
            self.pulls.forget(name)
        schedule.restarts.append((time.monotonic() + down_s, name))

    def _kill_targets(self) -> list[str]:
        """Every other kill hits an executing worker, mostly mid-command: its started
        lease is then lost to the sweeper (down past the TTL) or completed
        `worker_restarted` by its restart. Until `aside_replace` is hit or armed,
        every other kill only non-executing workers: the window needs one restarted
        (_crash_point) — but not all of them, or a run where it is hit late (batched
        pulls move fewer intents aside) never kills an executing worker mid-command."""
        if ASIDE_POINT in self._missing_unarmed() and self.rng.random() < 0.5:
            return [n for n in self.workers if n not in self.executing]
        return sorted(self.executing) if self.rng.random() < 0.5 else self.workers

    def _worker_down_s(self) -> float:
        return self.rng.uniform(*self.plan.worker_down_s)

    def _restart(self, name: str, arm: bool) -> None:
        """Start `name` again; a worker may come back armed with a crash point."""
        child = self.sup.children[name]
        if name in self.workers:
            self.worker_restarts += 1
            point = self._crash_point(name) if arm else None
            child.env = dict(self.worker_env, **({CRASH_ENV: point} if point else {}))
            self.armed[name] = point
            self.armed_at[name] = time.monotonic()
        child.start()
        kind = "ingress" if name in self.ingresses else "worker"
        self.record(
            NEMESIS,
            INFO,
            f"restart_{kind}",
            value=name,
            extra={"crashAt": self.armed.get(name)} if kind == "worker" else {},
        )

    def _crash_point(self, name: str) -> str | None:
        """A window no worker has died in yet (and none is armed with), else every Nth.

        `aside_replace` only where its path is certain: a non-executing worker with
        an intent on disk whose session the nemesis just closed (close_session);
        while it is missing, a non-executing worker without an intent is armed to
        die with one (INTENT_KEEPING), and its restart is then armed with it."""
        missing = self._missing_unarmed()
        if ASIDE_POINT in missing:
            if self.close_session(name):
                return ASIDE_POINT
            if name not in self.executing:
                keeping = [p for p in missing if p in INTENT_KEEPING]
                return self.rng.choice(keeping or list(INTENT_KEEPING))
            missing.remove(ASIDE_POINT)
        if missing:
            return self.rng.choice(missing)
        if self.worker_restarts % self.plan.crash_point_every == 0:
            return self.rng.choice([p for p in CRASH_POINTS
                                    if p != ASIDE_POINT or self.crash_hits[p]])  # fmt: skip
        return None

    def _missing_unarmed(self) -> list[str]:
        """Windows no worker died in yet and no worker is waiting at. An arm older
        than STALE_ARM_S no longer counts: a worker that gets no offer (its slots
        held, the executing workers taking the queue) never reaches an offer's
        windows, so the next restart is armed with the same window too."""
        now = time.monotonic()
        armed = {p for n, p in self.armed.items()
                 if p and now - self.armed_at.get(n, now) < STALE_ARM_S}  # fmt: skip
        return [p for p in CRASH_POINTS if not self.crash_hits[p] and p not in armed]

    def close_session(self, name: str) -> bool:
        """Close the session of the (stopped) worker's pending intent, as an operator
        would (SPEC §9.5 `admin session close`, ql.end_session); whether it was closed.

        Its restart heartbeats that session to resume the intent, hears 409
        `session_closed` and moves the intent aside (`session_lost`, worker/runner.py
        _resume): the `aside_replace` window, every time. Not on an executing worker:
        its started leases would stay bound to a session it can no longer use. The
        checker judges the refusals by the database (the session's closed_at, its
        leases released `session_closed`), so the close needs no excuse of its own."""
        from qinglong.db import api
        from qinglong.service import control_plane

        assert self.env is not None
        session_id = None if name in self.executing else self._pending_session(name)
        if session_id is None:
            return False
        try:
            with control_plane.connect(self.env.runtime_dsn) as conn:
                result = control_plane.run(conn, api.end_session(session_id=session_id)).doc
        except Exception as exc:  # the database may be restarting: arm another window
            self.fault("close_session", name, sessionId=session_id, error=type(exc).__name__)
            return False
        self.fault("close_session", name, sessionId=session_id,
                   leasesReleased=result.get("leasesReleased"))  # fmt: skip
        return True

    def _pending_session(self, name: str) -> str | None:
        """The session id of the worker's intent on disk (worker/journal.py PendingClaim)."""
        with contextlib.suppress(OSError, ValueError):
            doc = json.loads((self.out / "journals" / name / "pending-claim.json").read_bytes())
            session_id = doc.get("sessionId") if isinstance(doc, dict) else None
            return session_id if isinstance(session_id, str) else None
        return None

    def missed_windows(self) -> list[str]:
        return [p for p in CRASH_POINTS if not self.crash_hits[p]]

    def restart_postgres(self) -> None:
        assert self.env is not None
        self.fault("pg_restart", "immediate")
        began = time.monotonic()
        try:
            self.env.restart_postgres()
        except Exception as exc:
            raise SoakError(f"pg_ctl restart -m immediate failed: {exc}") from None
        self.record(NEMESIS, INFO, "pg_restarted", extra={"seconds": time.monotonic() - began})

    def _due_restarts(self, schedule: Schedule, everything: bool = False) -> None:
        now = time.monotonic()
        due = [(at, n) for at, n in schedule.restarts if everything or at <= now]
        schedule.restarts = [(at, n) for at, n in schedule.restarts if (at, n) not in due]
        for _, name in due:
            self._restart(name, arm=not everything)

    def revive(self, schedule: Schedule) -> None:
        """Restart anything that died without us killing it (and say so)."""
        pending = {name for _, name in schedule.restarts}
        for name, child in self.sup.children.items():
            if child.alive or child.expected_exit or name in pending:
                continue
            code = child.process.returncode if child.process is not None else None
            if self.armed.get(name) and code == -signal.SIGKILL:
                # It killed itself at its crash point, as asked: a fault, not a surprise.
                self.fault("crash_point", name, point=self.armed[name])
                self.crash_hits[str(self.armed[name])] += 1
                self.armed[name] = None
                child.expected_exit = True
                schedule.restarts.append((time.monotonic() + self._worker_down_s(), name))
                continue
            self.unexpected.append({"process": name, "exitCode": code, "atMs": now_ms()})
            self.record(NEMESIS, INFO, "unexpected_exit", value=name, extra={"exitCode": code})
            self.log(f"{name} exited on its own (code {code}); restarting")
            child.start()

    def _spikes(self, schedule: Schedule, now: float) -> None:
        assert self.proxy is not None
        if schedule.spike_ends is not None and now >= schedule.spike_ends:
            self.proxy.latency_s = 0.0
            schedule.spike_ends = None
        if now >= schedule.spike:
            self.proxy.latency_s = self.plan.spike_latency_s
            self.fault("latency_spike", f"{self.plan.spike_latency_s}s",
                       lengthS=self.plan.spike_length_s)  # fmt: skip
            schedule.spike_ends = now + self.plan.spike_length_s
            schedule.spike = now + self.plan.spike_every_s

    def _tick(self, schedule: Schedule, now: float) -> None:
        plan = self.plan
        self._due_restarts(schedule)
        self.revive(schedule)
        if now >= schedule.ingress_kill:
            self.kill_random(self.ingresses, "kill_ingress", plan.ingress_down_s, schedule)
            schedule.ingress_kill = now + plan.ingress_kill_every_s
        if now >= schedule.worker_kill:
            self.kill_random(self._kill_targets(), "kill_worker", self._worker_down_s(),
                             schedule)  # fmt: skip
            schedule.worker_kill = now + plan.worker_kill_every_s
        if schedule.pg_restarts and now >= schedule.pg_restarts[0]:
            schedule.pg_restarts.pop(0)
            self.restart_postgres()
        self._spikes(schedule, now)
        if now >= schedule.enqueue:
            self.enqueue(plan.enqueue_batch)
            if BYZ in self.sup.children:
                self.enqueue(HOSTILE_TOPUP, soak_env.HOSTILE_TASK.name, hostile=True)
            schedule.enqueue = now + plan.enqueue_every_s
        if now >= schedule.cancel:
            self.cancel_one()
            schedule.cancel = now + plan.cancel_every_s
        if now >= schedule.double_start:
            self.double_start()
            schedule.double_start = now + plan.double_start_every_s

    def fault_phase(self) -> Schedule:
        assert self.proxy is not None and self.pulls is not None
        plan, t0 = self.plan, time.monotonic()
        gaps = plan.duration_s / (plan.pg_restarts + 1)
        schedule = Schedule(
            ingress_kill=t0 + plan.ingress_kill_every_s, worker_kill=t0 + plan.worker_kill_every_s,
            spike=t0 + plan.spike_every_s / 2, enqueue=t0 + plan.enqueue_every_s,
            cancel=t0 + plan.cancel_every_s, double_start=t0 + plan.double_start_every_s / 2,
            pg_restarts=[t0 + gaps * (k + 1) for k in range(plan.pg_restarts)],
        )  # fmt: skip
        self.proxy.drop_probability = plan.drop_probability
        self.log(
            f"faults on (plan {plan.name}: >= {plan.duration_s:.0f}s and >= "
            f"{plan.min_pulls} pulls, at most {plan.max_duration_s:.0f}s)"
        )
        last_report = t0
        while True:
            now = time.monotonic()
            elapsed = now - t0
            # A crash window still unhit keeps the faults on (up to max_duration_s).
            done = (elapsed >= plan.duration_s and not schedule.pg_restarts
                    and not self.missed_windows())  # fmt: skip
            if (done and self.pulls.total >= plan.min_pulls) or elapsed >= plan.max_duration_s:
                break
            self._tick(schedule, now)
            if now - last_report >= 15:
                last_report = now
                self.log(f"pulls {self.pulls.total}, faults {dict(self._fault_counts())}")
            time.sleep(TICK_S)
        self.timings["faultPhaseS"] = time.monotonic() - t0
        return schedule

    def double_start(self) -> None:
        """Start a second process on a live worker's journal; it must be turned away.

        Only against an established owner (its current process got past its
        journal: a session or claim line after its last start), which is not
        killed meanwhile; if it dies anyway, the second process may rightly take
        the journal over, and the outcome is not judged (`owner_gone`)."""
        candidates = [n for n in self._alive(self.workers)
                      if not self.armed.get(n) and n not in self.doubling
                      and _owns_journal(self.out / "logs" / f"{n}.log",
                                        self.sup.children[n].pid)]  # fmt: skip
        if not candidates:
            return
        name = self.rng.choice(candidates)
        child = self.sup.children[name]
        self.doubling.add(name)  # kill_random leaves it alone meanwhile
        log = self.out / "logs" / f"{name}.double.log"
        thread = threading.Thread(target=self._double_start,
                                  args=(name, child.argv, log, child.pid),
                                  name=f"double-{name}", daemon=True)  # fmt: skip
        self.doubles.append(thread)
        thread.start()

    def _double_start(self, name: str, argv: list[str], log: Path, owner: int | None) -> None:
        try:
            self._run_double(name, argv, log, owner)
        finally:
            self.doubling.discard(name)

    def _run_double(self, name: str, argv: list[str], log: Path, owner: int | None) -> None:
        import subprocess

        offset = log.stat().st_size if log.exists() else 0
        with open(log, "ab") as out:
            process = subprocess.Popen(
                argv,
                env=dict(self.worker_env),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                start_new_session=True,
            )
        try:
            code: int | None = process.wait(DOUBLE_WAIT_S)
        except subprocess.TimeoutExpired:
            code = None
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        events = _log_events(log, offset)
        child = self.sup.children[name]
        if "journal_locked" in events:
            outcome = "refused"
        elif not child.alive or child.pid != owner:
            outcome = "owner_gone"  # the journal was free to take: not judged
        elif code is None and events - DOUBLE_START_EVENTS:
            outcome = "ran"  # it got past the journal: two owners of one journal
        else:
            outcome = "undecided"  # too slow to tell under load: not judged
        self.record(NEMESIS, OK, "double_start", value=name,
                    extra={"outcome": outcome, "exitCode": code,
                           "events": sorted(events)[:20]})  # fmt: skip

    def _fault_counts(self) -> Counter[str]:
        from tools.chaos.history import FAULT_KINDS, read_ops

        assert self.recorder is not None
        ops = read_ops(self.recorder.path)
        return Counter(op.f for op in ops if op.process == NEMESIS and op.f in FAULT_KINDS)

    # -- heal, cut, stop -------------------------------------------------------

    def heal(self, schedule: Schedule) -> None:
        assert self.proxy is not None
        if BYZ in self.sup.children:  # the hostile stops with the faults
            self.sup.stop([BYZ], timeout_s=10)
        self.proxy.drop_probability = 0.0
        self.proxy.latency_s = 0.0
        self._due_restarts(schedule, everything=True)
        for name, point in list(self.armed.items()):
            if point is not None and self.sup.children[name].alive:
                # Still armed: take the crash point out before the heal (not a fault).
                self.sup.children[name].kill()
                self.record(NEMESIS, INFO, "disarm_worker", value=name)
                self._restart(name, arm=False)
        self.record(NEMESIS, INFO, "heal")
        wait_s = self.plan.lease_ttl_s + 5
        self.log(f"faults off; healing for {wait_s}s (lease TTL + 5 s)")
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            self.revive(schedule)
            time.sleep(TICK_S)

    def heal_cut(self) -> None:
        """Freeze the workers, snapshot the database, then read their journals."""
        assert self.env is not None
        frozen = [self.sup.children[n] for n in self.workers]
        for child in frozen:
            child.signal_group(signal.SIGSTOP)
        try:
            snapshot = _retry(lambda: take_db_snapshot(self.env.dsn))  # type: ignore[union-attr]
            journals = {n: read_journal(self.out / "journals" / n).ids() for n in self.workers}
            write_json(self.out / HEAL_FILE, {"snapshot": snapshot, "journals": journals})
        finally:
            for child in frozen:
                child.signal_group(signal.SIGCONT)
        self.log(f"heal cut: {len(snapshot['runs'])} runs, {len(snapshot['leases'])} leases")

    def stop_workers(self) -> None:
        assert self.observer is not None
        for thread in self.doubles:
            thread.join(timeout=DOUBLE_WAIT_S + 5)
        killed = self.sup.stop(self.workers, timeout_s=30)
        for name in killed:
            self.unexpected.append({"process": name, "exitCode": "did_not_drain"})
        self.observer.stop()
        self.log("workers drained" + (f" (killed: {killed})" if killed else ""))

    def final_snapshot(self) -> None:
        assert self.env is not None
        time.sleep(1.5)  # one more sweeper pass
        write_json(self.out / SNAPSHOT_FILE, _retry(lambda: take_db_snapshot(self.env.dsn)))  # type: ignore[union-attr]

    def teardown(self) -> None:
        """Stop everything we started, whatever state we are in."""
        for closer in (
            self._stop_pulls,
            self._stop_observer,
            self.sup.stop_all,
            self._close_proxy,
            self._cleanup_env,
            self._close_recorder,
        ):
            with contextlib.suppress(Exception):
                closer()

    def _stop_pulls(self) -> None:
        if self.pulls is not None:
            self.pulls.stop()

    def _stop_observer(self) -> None:
        if self.observer is not None:
            self.observer.stop()

    def _close_proxy(self) -> None:
        if self.proxy is not None:
            self.proxy.close()

    def _cleanup_env(self) -> None:
        if self.env is not None:
            self.env.cleanup()

    def _close_recorder(self) -> None:
        if self.recorder is not None:
            self.recorder.close()

    # -- the whole run -----------------------------------------------------------

    def run(self) -> Report:
        try:
            self.setup()
            schedule = self.fault_phase()
            self.heal(schedule)
            self.heal_cut()
            self.stop_workers()
            self.final_snapshot()
        finally:
            self.teardown()
        logs = {name: self.out / "logs" / f"{name}.log" for name in self.workers}
        ops = build_history(self.out, logs, [self.out / name for name in RECORDS])
        report = check_dir(self.out, strict=self.strict)
        self._write_result(report, ops)
        return report

    def _write_result(self, report: Report, ops: int) -> None:
        pulls = self.pulls.total if self.pulls else 0
        by_result = dict(self.pulls.by_result) if self.pulls else {}
        proxy = asdict(self.proxy.stats) if self.proxy else {}
        result = {
            "plan": self.plan.name, "seed": self.seed, "pulls": pulls,
            "pullResults": by_result, "minPulls": self.plan.min_pulls,
            "historyOps": ops, "faults": report.faults, "proxy": proxy,
            "unexpectedExits": self.unexpected, "timings": self.timings,
            "crashWindows": {p: self.crash_hits[p] for p in CRASH_POINTS},
            "crashWindowsMissed": self.missed_windows(),
            "wallS": time.monotonic() - self.started,
        }  # fmt: skip
        write_json(self.out / RESULT_FILE, result)
        report.pulls = pulls
        write_json(self.out / CHECK_FILE, report.to_doc())


def _distinct_ports(probe: Callable[[], int], count: int) -> list[int]:
    """Fixed ports (a restarted ingress binds the same ones), all different."""
    ports: set[int] = set()
    while len(ports) < count:
        ports.add(probe())
    return sorted(ports)


def _ready(admin_port: int) -> bool:
    try:
        url = f"http://127.0.0.1:{admin_port}/readyz"
        with urllib.request.urlopen(url, timeout=1.0) as response:
            return response.status == 200
    except (OSError, ValueError):
        return False


def _retry(action: Callable[[], Any], attempts: int = 10) -> Any:
    for attempt in range(attempts):
        try:
            return action()
        except Exception:
            if attempt == attempts - 1:
                raise
            time.sleep(1.0)
    raise AssertionError("unreachable")


def _owns_journal(path: Path, pid: int | None) -> bool:
    """Whether process `pid`, the last one started with this log, got past its
    journal (logged a session or claim line after its `worker.starting`)."""
    started, past = False, False  # its start line seen; a line after it seen
    with contextlib.suppress(OSError), open(path, "rb") as handle:
        handle.seek(max(0, os.fstat(handle.fileno()).st_size - OWNER_LOG_TAIL))
        for line in handle.read().decode("utf-8", "replace").splitlines():
            with contextlib.suppress(ValueError):
                doc = json.loads(line)
                event = doc.get("event") if isinstance(doc, dict) else None
                if event == "worker.starting":
                    started, past = doc.get("pid") == pid, False
                elif (
                    started
                    and isinstance(event, str)
                    and event.startswith(("session.", "claim.", "exec."))
                ):
                    past = True
    return started and past


def _log_events(path: Path, offset: int) -> set[str]:
    """Event names (and failure reasons) a JSON-lines log got after `offset`."""
    found: set[str] = set()
    with contextlib.suppress(OSError), open(path, "rb") as handle:
        handle.seek(offset)
        for line in handle.read().decode("utf-8", "replace").splitlines():
            with contextlib.suppress(ValueError):
                doc = json.loads(line)
                if isinstance(doc, dict) and isinstance(doc.get("event"), str):
                    found.add(doc["event"])
                    if doc.get("error") == "journal_locked":
                        found.add("journal_locked")
    return found


def _tail(path: Path, max_bytes: int = 1500) -> str:
    with contextlib.suppress(OSError):
        return path.read_text(errors="replace")[-max_bytes:]
    return ""
