"""`qinglong demo` (SPEC §8): the whole system on one machine, watched live.

Starts an embedded throwaway PostgreSQL (unless --dsn), a dev CA with server
and worker certificates, the ingress (`qinglong ingress serve`), the lease
sweeper (`qinglong runtime sweep --every 1s`, as a deployment runs it) and N workers
(`qinglong worker run --config …`) with different labels and runtimes; publishes
tasks with required and preferred placement and different priorities, enqueues
runs through the producer API (`qinglong api serve`, qinglong.demo_api: a project
token and qinglong.client; the equivalent curl line is printed) and shows progress
until every run sits in a worker's inbox (or is done,
when the worker has an executor), then prints a summary and removes everything.
Every task is signed and the workers enforce the trust policy; with an executor
one run reads a secret and the demo follows its masked live log (qinglong.demo_job).

Every child runs in its own process group, so the terminal's Ctrl-C reaches only
us and cleanup stops the children in order (workers drain and close their
sessions, then the ingress and the sweeper, then PostgreSQL) inside `finally`; SIGTERM is turned
into the same path. Temp dirs go too (unless --keep).

What it shares with `qinglong dev up` (PostgreSQL, login roles, CA, KEK, the
ingress, the sweeper, the producer API, and their ordered teardown) is
`qinglong.local_stack`'s LocalStack; `Demo` is its plan (what is printed, the
console, the workers, the job, the live view).

Sources of the live view: `ql.status_snapshot()` (queue, sessions), each
worker's journal inbox (accepted offers: the worker validated and fsynced them),
the workers' JSON event lines (idle reasons, conflicts) and the ingress's
/metrics (pull results; `idempotent` = an offer recovered by a retried pull).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from qinglong.local_stack import SWEEP_EVERY, LocalStack, LoginRole, Service, popen, stop_services

PROJECT = "demo"
DATABASE = "qinglong_demo"
INGRESS_ROLE = "qinglong_demo_ingress"
SWEEPER_ROLE = "qinglong_demo_sweeper"  # member of ql_sweeper only: sweep, promote, prune
CONSOLE_ROLE = "qinglong_demo_console"  # member of ql_readonly only
CONSOLE_START_S = 20.0
WAVES = 3
WAVE_GAP_S = 1.5
MAX_RUNS = 256  # every worker gets slots = runs (<= 256), so any eligible worker can take all
STOP_TIMEOUT_S = 10.0
# The stack's login roles (purpose -> role), created in this order.
ROLES = {
    "ingress": LoginRole(INGRESS_ROLE, "ql_worker_ingress"),
    "sweeper": LoginRole(SWEEPER_ROLE, "ql_sweeper"),
}
REFRESH_S = 0.5
PLAIN_EVERY_S = 2.0
_METRIC = re.compile(r'^qinglong_ingress_pull_results_total\{result="([a-z_]+)"\} ([0-9.e+]+)$')


class DemoError(Exception):
    """A step of the demo failed; the message says which."""


class Interrupted(BaseException):
    """SIGTERM, turned into the same cleanup path as Ctrl-C."""


# ------------------------------------------------------------------ the cast


@dataclass(frozen=True)
class Profile:
    """One worker's capabilities: placement is visible because they differ."""

    name: str
    labels: dict[str, str]
    runtimes: dict[str, str]


PROFILES = (
    Profile("edge-a", {"zone": "a", "gpu": "no"}, {"python": "3.12.4"}),
    Profile("gpu-b", {"zone": "b", "gpu": "yes"}, {"python": "3.11.9"}),
    Profile("gpu-a", {"zone": "a", "gpu": "yes"}, {"python": "3.12.4"}),
    Profile("old-b", {"zone": "b", "gpu": "no"}, {"python": "3.10.14"}),
)


@dataclass(frozen=True)
class TaskSpec:
    name: str
    priority: int
    share: int  # relative share of the runs
    placement: dict[str, Any] | None
    summary: str

    def command(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "schema": "qinglong/command@v1",
            "argv": ["python3", "-c", f"print('{self.name}')"],
            "env": {},
            "timeoutS": 30,
        }
        if self.placement is not None:
            doc["placement"] = self.placement
        return doc


TASKS = (
    TaskSpec("train-model", 5, 2,
             {"required": {"labels": {"gpu": "yes"}},
              "preferred": [{"weight": 50, "labels": {"zone": "a"}}]},
             "needs gpu=yes; prefers zone=a"),
    TaskSpec("py312-tests", 3, 2,
             {"required": {"runtimes": {"python": "^3.12"}}},
             "needs python ^3.12"),
    TaskSpec("zone-b-etl", 1, 1,
             {"required": {"labels": {"zone": "b"}},
              "preferred": [{"weight": 10, "runtimes": {"python": ">=3.11"}}]},
             "needs zone=b; prefers python >=3.11"),
    TaskSpec("nightly-report", 0, 3, None, "anywhere (remote-worker)"),
)  # fmt: skip


def _satisfies(version: str, requirement: str) -> bool:
    """The demo's own check of its fixed ranges (^X.Y, >=X.Y), to plan the run split."""
    have = tuple(int(p) for p in version.split(".")[:2])
    want = tuple(int(p) for p in requirement.lstrip("^>=").split(".")[:2])
    if requirement.startswith("^"):
        return have[0] == want[0] and have >= want
    return have >= want


def eligible(task: TaskSpec, profile: Profile) -> bool:
    required = (task.placement or {}).get("required", {})
    labels_ok = all(profile.labels.get(k) == v for k, v in required.get("labels", {}).items())
    runtimes_ok = all(
        name in profile.runtimes and _satisfies(profile.runtimes[name], rng)
        for name, rng in required.get("runtimes", {}).items()
    )
    return labels_ok and runtimes_ok


def _split(count: int, parts: int) -> list[int]:
    base, extra = divmod(count, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def plan_runs(profiles: list[Profile], total: int) -> list[tuple[TaskSpec, int]]:
    """Split `total` runs over the tasks some worker can take (by share)."""
    usable = [t for t in TASKS if any(eligible(t, p) for p in profiles)]
    shares = sum(t.share for t in usable)
    counts = [total * t.share // shares for t in usable]
    for i in range(total - sum(counts)):  # hand out the remainder, highest share first
        counts[i % len(counts)] += 1
    return [(t, n) for t, n in zip(usable, counts, strict=True) if n > 0]


@dataclass(frozen=True)
class RunFact:
    task: str
    worker: str | None  # of the latest lease; None before any
    score: int | None
    state: str


# Run states as the progress line groups them.
PHASE = {
    "queued": "waiting",
    "dispatching": "offered",
    "starting": "running",
    "running": "running",
    "succeeded": "done",
    "failed": "done",
    "cancelled": "done",
}


# --------------------------------------------------------------- processes


@dataclass
class Child:
    name: str
    process: subprocess.Popen[bytes]
    log_path: Path


def spawn(
    name: str,
    argv: list[str],
    log_path: Path,
    *,
    pipe: bool = False,
    env: dict[str, str] | None = None,
) -> Child:
    """A child in its own process group: Ctrl-C reaches only us."""
    return Child(name, popen(argv, log_path, env=env, pipe=pipe), log_path)


def stop_children(children: list[Child], timeout_s: float = STOP_TIMEOUT_S) -> None:
    """SIGTERM every group, wait, then SIGKILL what is left."""
    stop_services(
        [Service(c.name, c.process.pid, c.log_path, process=c.process) for c in children], timeout_s
    )


# ------------------------------------------------------------------ workers


@dataclass
class WorkerView:
    """What one worker's event lines told us."""

    name: str
    profile: Profile
    worker_id: str
    journal: Path
    child: Child | None = None
    crash_once: bool = False  # first launch dies right after a pull response
    restarted: bool = False
    idle_reason: str | None = None
    events: Counter[str] = field(default_factory=Counter)
    last_error: str | None = None

    def inbox(self) -> list[Path]:
        with contextlib.suppress(OSError):
            return sorted((self.journal / "inbox").glob("*.json"))
        return []

    def follow(self, stream: IO[bytes], log_path: Path) -> None:
        """Read the worker's stderr: copy to its log, remember what matters."""
        with open(log_path, "ab") as log:
            for raw in stream:
                log.write(raw)
                self._note(raw)
            log.flush()

    def _note(self, raw: bytes) -> None:
        try:
            doc = json.loads(raw)
        except ValueError:
            return
        if not isinstance(doc, dict):
            return
        event = str(doc.get("event", ""))
        self.events[event] += 1
        if event == "claim.idle":
            self.idle_reason = str(doc.get("reason"))
        elif event == "claim.accepted":
            self.idle_reason = None
        elif doc.get("level") == "error":
            self.last_error = f"{event}: {doc.get('reason') or doc.get('detail') or ''}"[:80]


def _capabilities(profile: Profile, slots: int) -> dict[str, Any]:
    return {
        "schema": "qinglong/worker-capabilities@v1",
        "executors": ["remote-worker"],
        "labels": dict(profile.labels),
        "runtimes": dict(profile.runtimes),
        "slots": slots,
    }


# ------------------------------------------------------------------ the demo


@dataclass
class Demo:
    workers: int
    runs: int
    dsn: str | None = field(repr=False)  # DSNs may carry passwords: never in a repr
    timeout_s: float
    keep: Path | None
    root: Path = field(init=False)
    runs_root: Path = field(init=False)  # the commands' run directories (SPEC §11)
    cluster: Any = None
    admin_dsn: str = field(default="", repr=False)
    ingress_dsn: str = field(default="", repr=False)
    sweeper_dsn: str = field(default="", repr=False)
    ingress: Service | None = None
    sweeper: Service | None = None
    api_child: Service | None = None  # `qinglong api serve` (qinglong.demo_api)
    producer: Any = None  # demo_api.DemoApi: the runs are enqueued through it
    job: Any = None  # demo_job.DemoJob: signing key, KEK, the secret task and its log
    ingress_url: str = ""
    console_port: int | None = None  # None: no console (--no-console); 0: any free port
    console: Child | None = None
    console_url: str = ""
    admin_url: str = ""
    views: list[WorkerView] = field(default_factory=list)
    task_names: dict[str, str] = field(default_factory=dict)  # taskId -> name
    planned: list[tuple[TaskSpec, int]] = field(default_factory=list)
    crash: bool = True
    execute: bool = False
    schedule: list[tuple[float, str, int, int]] = field(default_factory=list)
    enqueue_start: float = 0.0
    enqueued: int = 0
    run_ids: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    started_at: float = field(default_factory=time.monotonic)
    database: str = field(default_factory=lambda: f"{DATABASE}_{os.getpid()}")
    out: IO[str] = sys.stdout
    # PostgreSQL, CA, KEK, ingress, sweeper, API: this demo is its StackPlan.
    stack: LocalStack = field(init=False, repr=False)

    def __post_init__(self) -> None:
        base = self.keep
        if base is not None:
            base.mkdir(parents=True, exist_ok=True)
            self.root = Path(tempfile.mkdtemp(prefix="qinglong-demo-", dir=base))
        else:
            self.root = Path(tempfile.mkdtemp(prefix="qinglong-demo-"))
        (self.root / "logs").mkdir()
        # Outside the private root: the run-as user must reach its run's directory.
        self.runs_root = Path(tempfile.mkdtemp(prefix="qinglong-demo-runs-"))
        self.runs_root.chmod(0o711)
        self.stack = LocalStack(self.root, self.database, ROLES)

    # -- steps ---------------------------------------------------------------

    def say(self, text: str) -> None:
        elapsed = time.monotonic() - self.started_at
        print(f"[{elapsed:5.1f}s] {text}", file=self.out, flush=True)

    def start_postgres(self, stack: LocalStack) -> None:
        if self.dsn is not None:
            stack.use_dsn(self.dsn, tuple(ROLES))
            return
        # scram on TCP with generated passwords; they reach the ingress only
        # through its 0600 config file, never a command line.
        self.cluster = stack.start_throwaway()  # honours QL_TEST_DSN: a database there

    def database_ready(self, stack: LocalStack) -> None:
        self.admin_dsn = stack.dsns.admin
        self.ingress_dsn = stack.dsns.login("ingress")
        self.sweeper_dsn = stack.dsns.login("sweeper")
        if self.cluster is None:
            self.say("PostgreSQL: using --dsn (migrated)")
        else:
            where = self.cluster.base_dir or "existing server"
            self.say(f"PostgreSQL 15 on 127.0.0.1:{self.cluster.port} ({where}), migrated")
        self.start_console()

    def announce_console(self) -> None:
        """The console's URL, first thing: its port is chosen now, it serves once
        PostgreSQL is up (SPEC §10)."""
        if self.console_port is None:
            return
        from qinglong.console_cli import pick_port

        self.console_port = pick_port(self.console_port)
        self.console_url = f"http://127.0.0.1:{self.console_port}/"
        self.say(f"console {self.console_url} (read-only; serving once PostgreSQL is up)")

    def start_console(self) -> None:
        """`qinglong console` as a ql_readonly role; its DSN in a 0600 file, not argv."""
        if self.console_port is None:
            return
        from qinglong.console_cli import console_argv, ensure_console_role, wait_listening

        try:
            # With --dsn too: the console reads as a ql_readonly login, never the admin.
            dsn = (
                ensure_console_role(self.admin_dsn, CONSOLE_ROLE)
                if self.cluster is None
                else self.cluster.ensure_login_role(CONSOLE_ROLE, "ql_readonly", self.database)
            )
            dsn_path = self.root / "console.dsn"
            fd = os.open(dsn_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(dsn)
            self.console = spawn(
                "console",
                console_argv(str(dsn_path), self.console_port),
                self.root / "logs" / "console.log",
            )
            wait_listening(self.console.process, self.console_port, CONSOLE_START_S)
        except Exception as exc:  # the console is a view: the demo goes on without it
            self.say(
                f"warning: the console did not start ({type(exc).__name__}: {exc}); "
                "continuing without it"
            )
            if self.console is not None:
                stop_children([self.console])
                self.console = None
            return
        self.say(f"console serving {self.console_url} (log {self.console.log_path.name})")

    def pki_ready(self, stack: LocalStack) -> None:
        from qinglong.demo_job import DemoJob
        from qinglong.service import control_plane

        self.job = DemoJob.create(self.root, stack.kek_file)
        self.out = self.job.record(self.out)  # read back by the leak check
        ca_dir = stack.pki.ca_dir
        profiles = [PROFILES[i % len(PROFILES)] for i in range(self.workers)]
        with control_plane.connect(self.admin_dsn) as conn:
            for index, profile in enumerate(profiles, start=1):
                name = f"{profile.name}-{index}"
                worker = control_plane.provision_worker(
                    conn,
                    name,
                    ca_dir,
                    self.root / "workers" / name,
                    self_labels=True,  # each profile declares its own labels
                    pools=("*",),
                )  # every pool, present and future (SPEC §13.1)
                self.views.append(
                    WorkerView(name, profile, worker.worker_id, self.root / "journals" / name)
                )
                self._write_worker_config(name, profile, worker.as_json())
        self.say(
            f"dev CA, server certificate, {self.workers} worker identities"
            " (certificate + ql3w_ credential each)"
        )

    def _write_worker_config(self, name: str, profile: Profile, ident: dict[str, str]) -> None:
        slots = min(self.runs, 256)
        config = {
            "ingressUrl": "https://127.0.0.1:1",  # replaced once the ingress listens
            "workerId": ident["workerId"],
            "certFile": ident["certFile"],
            "keyFile": ident["keyFile"],
            "caFile": str(pki_ca_cert(self.root / "ca")),
            "credentialFile": ident["credentialFile"],
            "journal": str(self.root / "journals" / name),
            "capabilities": _capabilities(profile, slots),
            "cadence": {"idlePollMs": 250, "jitterMs": 150},
            "inboxCapacity": min(1024, slots + 16),
        }
        path = self.root / "workers" / name / "worker.json"
        path.write_text(json.dumps(config, indent=2), encoding="utf-8")

    def start_ingress(self, stack: LocalStack) -> None:
        ready_file = self.root / "ingress.ready.json"
        config = {
            "dsn": self.ingress_dsn,
            "certFile": str(stack.pki.cert_file),
            "keyFile": str(stack.pki.key_file),
            "clientCaFile": str(stack.pki.ca_file),
            "port": 0,
            "adminPort": 0,
            "poolMaxSize": 4,
            # A demo worker pulls again right after each offer: lift the per-worker
            # limiter, and answer idle pulls with a short retry so progress is brisk.
            "ratePerS": 200,
            "rateBurst": 400,
            "idleRetryAfterMs": 300,
            "idleJitterMs": 200,
            "auditLog": str(self.root / "logs" / "audit.log"),
            "readyFile": str(ready_file),
            "logLevel": "WARNING",
            "kekFile": str(stack.kek_file),  # opens the secrets it delivers (SPEC §14.3)
        }
        config_path = self.root / "ingress.json"
        # Holds the ingress DSN (and its password): 0600 from creation.
        fd = os.open(config_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(config))
        # One process: the demo reads its progress from one admin listener.
        self.ingress = stack.launch_ingress(config_path)
        ready = self._wait_file(ready_file, self.ingress, 30.0)
        self.ingress_url, self.admin_url = ready["ingressUrl"], ready["adminUrl"]
        stack.facts.ingress_url, stack.facts.admin_url = self.ingress_url, self.admin_url
        self.say(f"ingress {self.ingress_url} (mTLS, TLS 1.3), admin {self.admin_url}")

    def start_sweeper(self, stack: LocalStack) -> None:
        """The lease sweeper, as a deployment runs it: expired offers come back,
        lost leases are retried, scheduled runs are promoted, retention prunes.
        Its login is a member of ql_sweeper only (it cannot publish or enqueue,
        SPEC §13.6); its DSN travels in the environment (QINGLONG_DSN), never on
        its command line."""
        self.sweeper = stack.launch_sweeper()
        self.say(f"lease sweeper every {SWEEP_EVERY} (pid {self.sweeper.pid})")

    def start_api(self, stack: LocalStack) -> None:
        """The producer API: the runs are enqueued through it, as an application
        would (SPEC §13.4). Without it (e.g. no httpx) the demo enqueues over SQL."""
        from qinglong import demo_api

        try:
            self.producer = demo_api.start_api(self)
        except Exception as exc:
            self.say(
                f"warning: the producer API did not start ({type(exc).__name__}: "
                f"{exc}); enqueueing over SQL instead"
            )
            stack.stop_service("api")
            self.api_child = None

    def _wait_file(self, path: Path, child: Service, timeout_s: float) -> dict[str, Any]:
        def read() -> dict[str, Any] | None:
            with contextlib.suppress(OSError, ValueError):
                return dict(json.loads(path.read_text(encoding="utf-8")))
            return None

        try:
            ready = self.stack.wait_ready(child, read, timeout_s)
        except TimeoutError:
            raise DemoError(f"{child.name} not ready after {timeout_s:.0f}s") from None
        if ready is None:
            raise DemoError(f"{child.name} exited early:\n{_tail(child.log_path)}")
        return ready

    def detect_executor(self) -> bool:
        """Does `worker run --execute` work in this build? (Then wait for done.)"""
        probe = subprocess.run(
            [sys.executable, "-m", "qinglong", "worker", "run", "--execute",
             "--config", str(self.root / "missing.json")],
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
        return "executor_unavailable" not in probe.stderr

    def start_workers(self) -> None:
        self.execute = self.detect_executor()
        if self.crash:
            self.views[min(1, len(self.views) - 1)].crash_once = True
        for view in self.views:
            path = self.root / "workers" / view.name / "worker.json"
            config = json.loads(path.read_text(encoding="utf-8"))
            config["ingressUrl"] = self.ingress_url
            config.setdefault("executor", {})["runsDir"] = str(self.runs_root / view.name)
            path.write_text(json.dumps(config, indent=2), encoding="utf-8")
            self._launch(view)
        for view in self.views:
            caps = " ".join(f"{k}={v}" for k, v in sorted(view.profile.labels.items()))
            caps += " " + " ".join(f"{k}@{v}" for k, v in view.profile.runtimes.items())
            flaky = "  (flaky: dies once after a pull response)" if view.crash_once else ""
            self.say(f"worker {view.name:<9} {caps}  slots {min(self.runs, 256)}{flaky}")
        self.say(self.job.trust_line())
        if not self.execute:
            self.say(
                "workers run without an executor: accepted offers stay in their inboxes"
                " (so no secret, masking or live log part)"
            )

    def _launch(self, view: WorkerView) -> None:
        from qinglong.worker.faults import CRASH_ENV

        path = self.root / "workers" / view.name / "worker.json"
        argv = [
            sys.executable,
            "-m",
            "qinglong",
            "worker",
            "run",
            "--config",
            str(path),
            *self.job.worker_args(),
        ]
        if self.execute:
            # SPEC §11: as root, tasks never run as root by default; not as
            # root, the demo accepts running them as its own user.
            from qinglong.worker.run_as import local_run_as

            argv += ["--execute", "--run-as", local_run_as()]
        env = dict(os.environ)
        env.pop(CRASH_ENV, None)
        if view.crash_once and not view.restarted:
            # A power cut after the lease committed but before the inbox write:
            # the restarted worker replays the same offer id + token (recovered).
            # Only after an offer: dying after an idle answer would replay an
            # unused offer id, which a loaded machine's first pulls often are.
            env[CRASH_ENV] = "after_offer_response"
        log_path = self.root / "logs" / f"{view.name}.log"
        view.child = spawn(view.name, argv, log_path, pipe=True, env=env)
        assert view.child.process.stderr is not None
        threading.Thread(
            target=view.follow, args=(view.child.process.stderr, log_path), daemon=True
        ).start()

    def restart_crashed(self) -> None:
        for view in self.views:
            child = view.child
            if (
                view.crash_once
                and not view.restarted
                and child is not None
                and child.process.poll() == -signal.SIGKILL
            ):
                view.restarted = True
                self.notes.append(
                    f"{view.name} was killed after a pull response (lease "
                    "committed, inbox not written) and restarted: it replays "
                    "the same offer id + token"
                )
                self._launch(view)

    def publish(self) -> None:
        from qinglong.demo_job import SECRET_TASK
        from qinglong.service import control_plane
        from qinglong.service.compiler import compile_command

        profiles = [v.profile for v in self.views]
        self.job.enabled = self.execute
        with control_plane.connect(self.admin_dsn) as conn:
            if self.job.enabled:  # the secret task's run is one of --runs
                self.say(self.job.store_secret(conn))
                self.planned = [(SECRET_TASK, 1), *plan_runs(profiles, self.runs - 1)]
            else:
                self.planned = plan_runs(profiles, self.runs)
            for task, count in self.planned:
                compiled = compile_command(task.command())
                published = control_plane.publish_task(
                    conn,
                    PROJECT,
                    task.name,
                    compiled.canonical,
                    sign=self.job.trust.sign_for(compiled),
                )
                task_id = published.task_id
                if task is SECRET_TASK:
                    self.job.task_id = task_id
                self.task_names[task_id] = task.name
                self.say(
                    f"task {task.name:<14} priority {task.priority}  {count:>3} runs"
                    f"  ({task.summary})"
                )
                for wave, part in enumerate(_split(count, WAVES)):
                    if part:
                        self.schedule.append((wave * WAVE_GAP_S, task_id, task.priority, part))
        if self.producer is not None and self.planned:
            from qinglong.demo_api import curl_line

            shown = next((t for t, _ in self.planned if t is not SECRET_TASK), self.planned[0][0])
            shown_task = f"{PROJECT}/{shown.name}"
            self.say(
                f"the same enqueue from a shell (the token is read from its file): "
                f"{curl_line(self.producer, shown_task)}"
            )
        how = "through the producer API" if self.producer is not None else "over SQL"
        self.say(f"enqueueing the runs {how} in {WAVES} waves, {WAVE_GAP_S:.1f}s apart")
        self.enqueue_start = time.monotonic()

    def enqueue_due(self) -> None:
        from qinglong.service import control_plane

        now = time.monotonic() - self.enqueue_start
        due = [item for item in self.schedule if item[0] <= now]
        if not due:
            return
        self.schedule = [item for item in self.schedule if item[0] > now]
        if self.producer is not None:
            for _, task_id, priority, count in due:
                queued = self.producer.client.enqueue(task_id, priority=priority, count=count)
                self.run_ids += queued.run_ids
                self.enqueued += count
            return
        with control_plane.connect(self.admin_dsn) as conn:
            for _, task_id, priority, count in due:
                result = control_plane.enqueue_runs(conn, task_id, priority, count)
                self.run_ids += result.run_ids
                self.enqueued += count

    # -- progress ------------------------------------------------------------

    def inbox_counts(self) -> Counter[str]:
        """Offers sitting in each worker's inbox (validated and fsynced by it)."""
        return Counter({view.name: len(view.inbox()) for view in self.views})

    def run_facts(self) -> list[RunFact]:
        """This demo's runs with the worker and score of their latest lease.

        A superuser read of ql_private (the demo's DSN is one): the summary needs
        per-run detail no API function returns, and inboxes empty out once an
        executor completes the runs.
        """
        import psycopg

        if not self.run_ids:
            return []
        with psycopg.connect(self.admin_dsn, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT t.name, w.name, l.placement_score, r.state"
                "  FROM ql_private.runs r JOIN ql_private.tasks t ON t.id = r.task_id"
                "  LEFT JOIN LATERAL (SELECT x.worker_id, x.placement_score"
                "                       FROM ql_private.run_leases x WHERE x.run_id = r.id"
                "                      ORDER BY x.id DESC LIMIT 1) l ON true"
                "  LEFT JOIN ql_private.workers w ON w.id = l.worker_id"
                " WHERE r.id = ANY(%s::uuid[])",
                (self.run_ids,),
            ).fetchall()
        return [RunFact(task, worker, score, state) for task, worker, score, state in rows]

    def pull_metrics(self) -> dict[str, int]:
        try:
            with urllib.request.urlopen(f"{self.admin_url}/metrics", timeout=2) as response:
                text = response.read().decode("utf-8", "replace")
        except OSError:
            return {}
        results: dict[str, int] = {}
        for line in text.splitlines():
            match = _METRIC.match(line)
            if match:
                results[match.group(1)] = int(float(match.group(2)))
        return results

    def snapshot(self) -> dict[str, Any]:
        from qinglong.status_cli import fetch_snapshot

        with contextlib.suppress(Exception):
            return fetch_snapshot(self.admin_dsn)
        return {}

    def progress_lines(self) -> tuple[list[str], bool]:
        facts = self.run_facts()
        phases = Counter(PHASE.get(f.state, f.state) for f in facts)
        per_worker = Counter(f.worker for f in facts if f.worker is not None)
        inbox = self.inbox_counts()
        metrics = self.pull_metrics()
        if self.execute:
            complete = phases["done"] >= self.runs
        else:  # offered = durable in a worker's inbox, not only leased in the database
            complete = sum(inbox.values()) >= self.runs
        elapsed = time.monotonic() - self.started_at
        head = (
            f"[{elapsed:5.1f}s] enqueued {self.enqueued}/{self.runs}"
            f"  waiting {phases['waiting']}  offered {phases['offered']}"
        )
        if self.execute:
            head += f"  running {phases['running']}  done {phases['done']}"
        head += (
            f"  | pulls: offered {metrics.get('offered', 0)}"
            f" idle {metrics.get('idle', 0)}"
            f" recovered {metrics.get('idempotent', 0)}"
            f" conflict {metrics.get('conflict', 0)}"
        )
        lines = [head]
        for view in self.views:
            alive = view.child is not None and view.child.process.poll() is None
            state = (
                "running"
                if alive
                else f"exited {view.child.process.returncode}"
                if view.child
                else "not started"
            )
            idle = f"idle: {view.idle_reason}" if view.idle_reason else ""
            error = f"error: {view.last_error}" if view.last_error else ""
            lines.append(
                f"    {view.name:<9} runs {per_worker[view.name]:>3}"
                f"  inbox {inbox[view.name]:>3}  {state:<9} {idle} {error}".rstrip()
            )
        return lines, complete

    def watch(self) -> bool:
        """Refresh until every run is offered (or done); False on timeout."""
        tty = self.out.isatty()
        deadline = time.monotonic() + self.timeout_s
        shown = 0
        last_plain = 0.0
        while True:
            self.enqueue_due()
            self.restart_crashed()
            self.notes += self.job.poll(self.admin_dsn)  # the secret run's live log
            lines, complete = self.progress_lines()
            complete = complete and (not self.job.enabled or self.job.finished)
            now = time.monotonic()
            for note in self.notes:
                if tty and shown:
                    self.out.write(f"\x1b[{shown}F\x1b[J")  # print the note above the view
                    shown = 0
                self.say(note)
            self.notes.clear()
            if tty:
                if shown:
                    self.out.write(f"\x1b[{shown}F")  # back to the first line of the view
                self.out.write("".join(f"\x1b[2K{line}\n" for line in lines))
                self.out.flush()
                shown = len(lines)
            elif complete or now - last_plain >= PLAIN_EVERY_S:
                print(lines[0], file=self.out, flush=True)
                last_plain = now
            if complete:
                return True
            if now >= deadline:
                return False
            time.sleep(REFRESH_S if tty else 0.25)

    # -- summary -------------------------------------------------------------

    def summary(self, complete: bool) -> str:
        from qinglong.status_cli import table

        facts = self.run_facts()
        names = [v.name for v in self.views]
        by_task: dict[str, Counter[str]] = {t.name: Counter() for t, _ in self.planned}
        scores: dict[str, list[int]] = {t.name: [] for t, _ in self.planned}
        for fact in facts:
            if fact.worker is None:
                continue
            by_task.setdefault(fact.task, Counter())[fact.worker] += 1
            scores.setdefault(fact.task, []).append(int(fact.score or 0))
        rows = []
        for task, count in self.planned:
            got = by_task.get(task.name, Counter())
            avg = sum(scores[task.name]) / len(scores[task.name]) if scores[task.name] else 0.0
            rows.append(
                [
                    task.name,
                    str(task.priority),
                    str(count),
                    *[str(got[n]) if got[n] else "." for n in names],
                    f"{avg:.0f}",
                    task.summary,
                ]
            )
        rows.append(
            [
                "total",
                "",
                str(self.runs),
                *[str(sum(by_task[t][n] for t in by_task)) for n in names],
                "",
                "",
            ]
        )
        metrics = self.pull_metrics()
        elapsed = time.monotonic() - self.started_at
        states = Counter(f.state for f in facts)
        lines = ["", "Summary: runs per task and the worker that took them (latest lease)"]
        lines += table(["task", "prio", "runs", *names, "score", "placement"], rows)
        lines.append("")
        for view in self.views:
            caps = " ".join(f"{k}={v}" for k, v in sorted(view.profile.labels.items()))
            runtimes = " ".join(f"{k}@{v}" for k, v in view.profile.runtimes.items())
            idle = f"; last idle reason {view.idle_reason}" if view.idle_reason else ""
            lines.append(f"  {view.name:<9} {caps} {runtimes}{idle}")
        lines.append("")
        lines.append("  run states: " + ", ".join(f"{k} {v}" for k, v in sorted(states.items())))
        lines.append(
            f"  pulls answered by the ingress: {json.dumps(metrics, sort_keys=True)}"
            " ('idempotent' = an offer recovered by a retried pull, never a 2nd lease)"
        )
        self.job.check(self.admin_dsn, self.runs_root)
        lines += self.job.summary_lines()
        verdict = "every run offered" if not self.execute else "every run done"
        lines.append(
            f"  {verdict if complete else 'INCOMPLETE (timed out)'}"
            f" in {elapsed:.1f}s; 'score' = mean placementScore of the offers"
        )
        return "\n".join(lines)

    # -- cleanup -------------------------------------------------------------

    def cleanup(self) -> None:
        children = [v.child for v in self.views if v.child is not None]
        stop_children(children)  # workers drain and close their sessions first
        if self.producer is not None:
            self.producer.close()
        self.stack.stop_services()  # the ingress, the sweeper, the producer API
        if self.console is not None:
            stop_children([self.console])
        with contextlib.suppress(Exception):
            self.stack.stop_postgres()  # or drop our database on a QL_TEST_DSN server
        shutil.rmtree(self.runs_root, ignore_errors=True)
        if self.keep is None:
            shutil.rmtree(self.root, ignore_errors=True)


def pki_ca_cert(ca_dir: Path) -> Path:
    from qinglong.service.pki import CA_CERT_NAME

    return ca_dir / CA_CERT_NAME


def _tail(path: Path, max_bytes: int = 1500) -> str:
    with contextlib.suppress(OSError):
        return path.read_text(errors="replace")[-max_bytes:]
    return ""


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    def handler(signum: int, _frame: object) -> None:
        raise Interrupted(signum)

    previous = signal.signal(signal.SIGTERM, handler)
    # Ctrl-C cleans up even when started with SIGINT ignored (a shell's background job).
    previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)


@contextlib.contextmanager
def _no_interrupts() -> Iterator[None]:
    """Cleanup must run to the end: a second Ctrl-C would leave processes behind."""
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def run_demo(demo: Demo) -> int:
    complete = False
    try:
        with _sigterm_as_interrupt():
            demo.announce_console()
            keep = "kept" if demo.keep is not None else "removed at the end"
            demo.say(f"working directory {demo.root} ({keep})")
            demo.stack.start(demo)  # PostgreSQL (+ console) … producer API
            demo.start_workers()
            demo.publish()
            complete = demo.watch()
            print(demo.summary(complete), file=demo.out, flush=True)
    except (KeyboardInterrupt, Interrupted):
        print("\ninterrupted: cleaning up", file=demo.out, flush=True)
        with _no_interrupts():
            demo.cleanup()
        return 130
    except Exception as exc:  # one readable line, then the same cleanup
        print(f"demo failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        with _no_interrupts():
            demo.cleanup()
        return 1
    with _no_interrupts():
        demo.cleanup()
    api = ", producer API" if demo.api_child is not None else ""
    stopped = (
        f"workers, ingress, sweeper{api} and PostgreSQL"
        if demo.cluster is not None and demo.cluster.existing_dsn is None
        else f"workers, ingress{api} and sweeper"
    )
    if demo.console is not None:
        stopped += " (and the console)"
    demo.say(
        f"stopped {stopped}; removed "
        + (str(demo.root) if demo.keep is None else "nothing (--keep)")
    )
    return 0 if complete and not demo.job.leaked else 1


def demo_command(args: argparse.Namespace) -> int:
    if not 1 <= args.workers <= 16:
        print("--workers must be 1..16", file=sys.stderr)
        return 2
    if not 1 <= args.runs <= MAX_RUNS:
        print(f"--runs must be 1..{MAX_RUNS}", file=sys.stderr)
        return 2
    if not 0 <= args.console_port <= 65535:
        print("--console-port must be 0..65535", file=sys.stderr)
        return 2
    demo = Demo(
        workers=args.workers,
        runs=args.runs,
        dsn=args.dsn,
        timeout_s=float(args.timeout),
        keep=args.keep,
        crash=not args.no_crash,
        console_port=None if args.no_console else args.console_port,
    )
    return run_demo(demo)
