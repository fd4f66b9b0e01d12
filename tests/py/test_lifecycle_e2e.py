"""The executor end to end (SPEC §7): real ingress + PostgreSQL (`qinglong dev up`),
`qinglong worker run --execute` processes, `qinglong runtime sweep --every 1s`.

One dev env per module. A pool of three `--dev-env … --execute --slots 4` workers
(each its own identity from `admin worker create`) serves unlabelled tasks
throughout; scenarios that must reach one particular worker publish tasks whose
placement requires a `lane` label that only that worker (a `--config` worker)
carries. Final states are read from the database as the dev-env superuser.

(a) 200 runs of `sh -c 'exit N'`, N ∈ {0,1,3} -> the retry policy's final states;
(b) a sleeper cancelled mid-run -> `cancelled` (learned from the lease heartbeat);
(c) a worker SIGKILLed mid-run -> attempt `lost` after the (short) lease TTL ->
    retried on another worker -> succeeded; and the same crash with an immediate
    restart -> the inbox's session is resumed, the orphan killed, the attempt
    completed `worker_restarted`, the retry succeeds;
(d) argv `/nonexistent` -> `start_failed` on every attempt -> run failed;
(e) SIGTERM with a running command -> stopped after the grace, completed
    `worker_shutdown`, exit 0.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest

from qinglong.db import api
from tests.py.dsn_files import dsn_file
from tests.py.run_as_support import run_as_args, searchable_tmp
from tests.py.test_worker_e2e import QL, Worker, _dev_up, _json_out

# Minutes, not seconds: the full suite runs it; `pytest -m "not slow"` skips it.
pytestmark = pytest.mark.slow

TERMINAL = ("succeeded", "failed", "cancelled")
POOL_SIZE = 3


# ------------------------------------------------------------------ environment


@dataclass
class Env:
    doc: dict[str, Any]
    directory: Path
    runs: list[str] = field(default_factory=list)
    workers: list[Worker] = field(default_factory=list)
    _names: int = 0

    @property
    def dsn(self) -> str:
        return self.doc["dsn"]

    @property
    def dsn_file(self) -> str:  # the DSN holds dev up's password: never in argv
        return dsn_file(self.directory, "admin.dsn", self.dsn)

    def query(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            cursor = conn.execute(sql, params)
            return cursor.fetchall() if cursor.description is not None else []

    def identity(self) -> dict[str, Any]:
        """A new worker identity (certificate + credential), as `admin worker create`."""
        self._names += 1
        name = f"lifecycle-{self._names}"
        out = self.directory / name
        return _json_out([*QL, "admin", "worker", "create", "--dsn-file", self.dsn_file,
                          "--name", name, "--ca-dir", self.doc["caDir"],
                          "--out", str(out), "--pool", "*", "--self-labels"])  # fmt: skip

    def publish(self, name: str, argv: list[str], *, timeout_s: int = 60,
                lane: str | None = None, lease_ttl_s: int | None = None) -> str:  # fmt: skip
        command: dict[str, Any] = {"schema": "qinglong/command@v1", "argv": argv, "env": {},
                                   "timeoutS": timeout_s}  # fmt: skip
        if lane is not None:
            command["placement"] = {"required": {"labels": {"lane": lane}}}
        path = self.directory / f"{name}.json"
        path.write_text(json.dumps(command))
        task = _json_out(
            [
                *QL,
                "admin",
                "task",
                "publish",
                "--dsn-file",
                self.dsn_file,
                "--project",
                "lifecycle-e2e",
                "--name",
                name,
                "--command-file",
                str(path),
            ]
        )
        if lease_ttl_s is not None:
            # No API sets a task's lease TTL; the column allows 5..3600 s.
            self.query("UPDATE ql_private.tasks SET lease_ttl_seconds = %s WHERE id = %s",
                       lease_ttl_s, task["taskId"])  # fmt: skip
        return task["taskId"]

    def enqueue(self, task_id: str, count: int = 1) -> list[str]:
        out = _json_out([*QL, "admin", "run", "enqueue", "--dsn-file", self.dsn_file,
                         "--task", task_id, "--count", str(count)])  # fmt: skip
        self.runs.extend(out["runIds"])
        return out["runIds"]

    def cancel(self, run_id: str) -> dict[str, Any]:
        return _json_out([*QL, "admin", "run", "cancel", "--dsn-file", self.dsn_file,
                          "--run", run_id])  # fmt: skip

    def states(self, run_ids: list[str]) -> dict[str, str]:
        rows = self.query("SELECT id::text, state FROM ql_private.runs WHERE id = ANY(%s::uuid[])",
                          run_ids)  # fmt: skip
        return dict(rows)

    def wait_runs(self, run_ids: list[str], states: tuple[str, ...] = TERMINAL,
                  timeout: float = 45) -> dict[str, str]:  # fmt: skip
        deadline = time.monotonic() + timeout
        while True:
            current = self.states(run_ids)
            if all(current.get(r) in states for r in run_ids):
                return current
            pending = {r: s for r, s in current.items() if s not in states}
            assert time.monotonic() < deadline, f"{len(pending)} runs not {states}: {pending}"
            time.sleep(0.25)

    def attempts(self, run_id: str) -> list[tuple[int, str, int | None, str | None]]:
        return self.query(
            "SELECT attempt_no, state, exit_code, reason FROM ql_private.attempts"
            " WHERE run_id = %s ORDER BY attempt_no", run_id)  # fmt: skip

    def attempt_worker(self, run_id: str, attempt_no: int) -> str:
        rows = self.query(
            "SELECT l.worker_id::text FROM ql_private.run_leases l"
            " JOIN ql_private.attempts a ON a.id = l.attempt_id"
            " WHERE a.run_id = %s AND a.attempt_no = %s AND l.started_at IS NOT NULL",
            run_id, attempt_no)  # fmt: skip
        return rows[0][0]

    def worker(self, identity: dict[str, Any], journal: Path, *extra: str,
               lane: str | None = None, executor: dict | None = None) -> Worker:  # fmt: skip
        """Start `qinglong worker run --execute`; a lane needs the --config form (labels)."""
        if lane is None and executor is None:
            env_file = journal.parent / f"{journal.name}-dev-env.json"
            env_file.write_text(json.dumps(dict(self.doc, worker=identity)))
            env_file.chmod(0o600)  # the worker's configuration: never the run-as user's
            args = ["--dev-env", str(env_file)]
        else:
            config = {
                "ingressUrl": self.doc["ingressUrl"],
                "workerId": identity["workerId"],
                "certFile": identity["certFile"],
                "keyFile": identity["keyFile"],
                "caFile": self.doc["caFile"],
                "credentialFile": identity["credentialFile"],
                "journal": str(journal),
                "execute": True,
                "executor": executor or {},
                "capabilities": {
                    "schema": "qinglong/worker-capabilities@v1",
                    "executors": ["remote-worker"],
                    "runtimes": {},
                    "labels": {"lane": lane} if lane else {},
                    "slots": 1,
                },
            }
            path = journal.parent / f"{journal.name}-config.json"
            path.write_text(json.dumps(config))
            path.chmod(0o600)
            args = ["--config", str(path)]
        worker = Worker([*QL, "worker", "run", *args, "--journal", str(journal), "--execute",
                         *run_as_args(), *extra])  # fmt: skip
        self.workers.append(worker)
        return worker


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    state_dir = tmp_path_factory.mktemp("dev")
    doc = _dev_up(state_dir)
    # Not tmp_path (0700 ancestors): the run-as user must reach the runs dirs.
    helper = Env(doc, searchable_tmp("ql-lifecycle-"))
    sweeper = subprocess.Popen([*QL, "runtime", "sweep", "--dsn-file",
                                dsn_file(state_dir, "runtime.dsn", doc["runtimeDsn"]),
                                "--every", "1s"], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        yield helper
    finally:
        for worker in helper.workers:
            worker.kill()
        with contextlib.suppress(Exception):  # never leave work behind
            live = helper.query("SELECT id::text FROM ql_private.runs WHERE id = ANY(%s::uuid[])"
                                " AND state NOT IN ('succeeded', 'failed', 'cancelled')",
                                helper.runs)  # fmt: skip
            with psycopg.connect(helper.dsn, autocommit=True) as conn:
                for (run_id,) in live:
                    api.cancel_run(run_id=run_id).run(conn)
        sweeper.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            sweeper.wait(timeout=10)
        if sweeper.poll() is None:
            sweeper.kill()
        subprocess.run([*QL, "dev", "down", "--state-dir", str(state_dir)], check=False,
                       capture_output=True, timeout=120)  # fmt: skip
        shutil.rmtree(helper.directory, ignore_errors=True)


@pytest.fixture(scope="module")
def pool(env: Env) -> Iterator[list[tuple[Worker, Path]]]:
    workers = []
    for i in range(POOL_SIZE):
        journal = env.directory / f"pool-{i}"
        workers.append((env.worker(env.identity(), journal, "--slots", "4"), journal))
    for worker, _ in workers:
        worker.wait_for("session.opened")
    yield workers
    # SIGTERM drain: nothing is running any more, so each exits 0 at once.
    for worker, journal in workers:
        assert worker.stop(signal.SIGTERM) == 0
        assert list((journal / "inbox").iterdir()) == []  # terminal entries are removed


def max_attempts(env: Env, task_id: str) -> int:
    return env.query("SELECT max_attempts FROM ql_private.tasks WHERE id = %s", task_id)[0][0]


# ------------------------------------------------------------------ (a) exit codes


def test_a_exit_code_mix_reaches_the_retry_policy_final_states(env: Env, pool: list) -> None:
    counts = {0: 67, 1: 67, 3: 66}
    tasks = {n: env.publish(f"exit-{n}", ["sh", "-c", f"exit {n}"]) for n in counts}
    limit = max_attempts(env, tasks[1])  # the default retry policy: 3 attempts
    runs = {n: env.enqueue(tasks[n], count) for n, count in counts.items()}
    all_runs = [r for ids in runs.values() for r in ids]
    assert len(all_runs) == 200
    final = env.wait_runs(all_runs, timeout=60)
    for n, ids in runs.items():
        expected = "succeeded" if n == 0 else "failed"
        assert {final[r] for r in ids} == {expected}, n
    rows = env.query(
        "SELECT run_id::text, attempt_no, state, exit_code, reason FROM ql_private.attempts"
        " WHERE run_id = ANY(%s::uuid[]) ORDER BY run_id, attempt_no", all_runs)  # fmt: skip
    by_run: dict[str, list[tuple]] = {}
    for run_id, *attempt in rows:
        by_run.setdefault(run_id, []).append(tuple(attempt))
    for run_id in runs[0]:
        assert by_run[run_id] == [(1, "succeeded", 0, None)]
    for n in (1, 3):
        for run_id in runs[n]:
            # Every attempt ran and failed with the command's exit code; no extra attempt.
            assert by_run[run_id] == [(i, "failed", n, "exit_nonzero")
                                      for i in range(1, limit + 1)]  # fmt: skip
    # The work was shared: every pool worker ran something.
    workers = env.query(
        "SELECT count(DISTINCT worker_id) FROM ql_private.run_leases"
        " WHERE run_id = ANY(%s::uuid[]) AND started_at IS NOT NULL", all_runs)  # fmt: skip
    assert workers[0][0] == POOL_SIZE


# ------------------------------------------------------------------ (b) cancel


def test_b_cancel_mid_run_ends_cancelled(env: Env, pool: list) -> None:
    task = env.publish("sleeper-cancel", ["sleep", "120"], lease_ttl_s=6)  # heartbeat ~2 s
    (run_id,) = env.enqueue(task)
    env.wait_runs([run_id], ("running",), timeout=20)
    started = time.monotonic()
    assert env.cancel(run_id)["cancelRequested"] is True
    assert env.wait_runs([run_id], timeout=20)[run_id] == "cancelled"
    assert time.monotonic() - started < 10
    assert env.attempts(run_id) == [(1, "cancelled", None, "cancelled")]


# ------------------------------------------------------------------ (d) start failure


def test_d_start_failure_follows_the_retry_policy(env: Env, pool: list) -> None:
    task = env.publish("nonexistent", ["/nonexistent"])
    limit = max_attempts(env, task)
    (run_id,) = env.enqueue(task)
    assert env.wait_runs([run_id], timeout=30)[run_id] == "failed"
    assert env.attempts(run_id) == [(i, "failed", None, "executable_not_found")
                                    for i in range(1, limit + 1)]  # fmt: skip


# ------------------------------------------------------------------ (c) worker crash


def test_c_sigkilled_worker_attempt_is_lost_then_retried_elsewhere(env: Env) -> None:
    task = env.publish("crash-lost", ["sleep", "4"], lane="c", lease_ttl_s=5)
    victim_id, rescuer_id = env.identity(), env.identity()
    victim = env.worker(victim_id, env.directory / "victim-c", lane="c")
    (run_id,) = env.enqueue(task)
    victim.wait_for("exec.started", timeout=20)
    victim.proc.send_signal(signal.SIGKILL)
    victim.proc.wait(timeout=10)
    rescuer = env.worker(rescuer_id, env.directory / "rescuer-c", lane="c")
    # Lease TTL 5 s -> the sweeper marks the attempt lost -> a new attempt is
    # claimable (backoff <= 1 s) -> the rescuer runs it to success.
    assert env.wait_runs([run_id], timeout=40)[run_id] == "succeeded"
    assert env.attempts(run_id) == [(1, "lost", None, "lease_expired"), (2, "succeeded", 0, None)]
    assert env.attempt_worker(run_id, 1) == victim_id["workerId"]
    assert env.attempt_worker(run_id, 2) == rescuer_id["workerId"]
    assert rescuer.stop(signal.SIGTERM) == 0


def test_c_restarted_worker_resumes_its_session_and_reports_worker_restarted(env: Env) -> None:
    task = env.publish("crash-restart", ["sleep", "4"], lane="c2")  # default lease TTL
    identity = env.identity()
    journal = env.directory / "victim-c2"
    first = env.worker(identity, journal, lane="c2")
    (run_id,) = env.enqueue(task)
    opened = first.wait_for("session.opened")[0]
    first.wait_for("exec.started", timeout=20)
    first.proc.send_signal(signal.SIGKILL)
    first.proc.wait(timeout=10)
    restarted = env.worker(identity, journal, lane="c2")
    assert env.wait_runs([run_id], timeout=40)[run_id] == "succeeded"
    resumed = restarted.named("session.resumed")
    # The inbox's session was reused (no new generation), so its leases stayed usable.
    assert resumed and resumed[0]["source"] == "inbox"
    assert (resumed[0]["sessionId"], resumed[0]["generation"]) == (
        opened["sessionId"], opened["generation"])  # fmt: skip
    assert restarted.named("exec.orphan_killed")  # the dead worker's `sleep` did not survive
    assert env.attempts(run_id) == [(1, "failed", None, "worker_restarted"),
                                    (2, "succeeded", 0, None)]  # fmt: skip
    assert restarted.stop(signal.SIGTERM) == 0


# ------------------------------------------------------------------ (e) SIGTERM


def test_e_sigterm_stops_running_commands_after_the_grace(env: Env) -> None:
    task = env.publish("shutdown", ["sleep", "120"], lane="e")
    worker = env.worker(env.identity(), env.directory / "victim-e", lane="e",
                        executor={"shutdownGraceS": 1, "killGraceS": 1})  # fmt: skip
    (run_id,) = env.enqueue(task)
    worker.wait_for("exec.started", timeout=20)
    started = time.monotonic()
    assert worker.stop(signal.SIGTERM) == 0
    assert time.monotonic() - started < 10
    names = [e["event"] for e in worker.lines]
    assert names.index("exec.completed") < names.index("session.closed")
    assert env.attempts(run_id)[0] == (1, "failed", None, "worker_shutdown")
    # The retry policy rescheduled it at once (no lease expiry to wait for).
    assert env.states([run_id])[run_id] == "queued"
