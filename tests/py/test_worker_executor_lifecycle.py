"""worker/lifecycle.py + worker/lease_client.py: the per-offer state machine against
fake lease calls, with a real journal, real processes and the real clock.

Also the run loop with the executor (resume of the inbox's session, SIGTERM drain)
against the in-process fake ingress of test_worker_run.py.
"""

from __future__ import annotations

import copy
import io
import json
import os
import random
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from qinglong.schemas.canonical import content_digest
from qinglong.schemas.contract import validate
from qinglong.worker.config import ExecutorSettings, WorkerConfig, default_capabilities
from qinglong.worker.coordinator import new_lease_token
from qinglong.worker.errors import NetworkError
from qinglong.worker.eventlog import EventLog
from qinglong.worker.executor import process_start_ticks
from qinglong.worker.journal import EntryState, InboxEntry, Journal, PendingClaim
from qinglong.worker.lease_client import (
    AckPhase,
    LeaseAnswer,
    LeaseClient,
    LeaseConflict,
    LeaseRef,
    LeaseUnavailable,
    Outcome,
)
from qinglong.worker.lifecycle import Lifecycle
from qinglong.worker.run_as import RUNS_MODE_SHARED, Sandbox, resolve_user
from qinglong.worker.runner import Runner, RunOptions, StopSignal
from qinglong.worker.session import SessionClient
from tests.py.run_as_support import run_as_user
from tests.py.test_worker_coordinator import offered
from tests.py.test_worker_run import WORKER, FakeIngress, FakeTime, Resp, batch_pulls, error

SESSION = str(uuid.uuid4())
SETTINGS = ExecutorSettings(shutdown_grace_s=0.5, kill_grace_s=0.3, output_limit_bytes=4096)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def command(*argv: str, timeout_s: int = 30, env: dict | None = None) -> dict[str, Any]:
    return {"schema": "qinglong/command@v1", "argv": list(argv), "env": env or {},
            "timeoutS": timeout_s}  # fmt: skip


def make_offer(spec: dict[str, Any], *, session: str = SESSION, generation: int = 1,
               offer_id: str | None = None) -> dict[str, Any]:  # fmt: skip
    request = {"offerId": offer_id or str(uuid.uuid4()), "workerId": WORKER,
               "sessionId": session, "generation": generation}  # fmt: skip
    doc = offered(request)
    rev = doc["executionRevision"]
    rev["spec"] = spec
    _, digest = content_digest(rev["kind"], rev["executor"], spec, rev["placement"])
    rev["contentDigest"] = doc["contentDigest"] = digest
    now = now_ms()
    doc["lease"].update(claimedAtMs=now, updatedAtMs=now, expiresAtMs=now + 60_000)
    return doc


def entry_for(spec: dict[str, Any], accepted_at: int | None = None, **kw: Any) -> InboxEntry:
    offer = make_offer(spec, **kw)
    token = new_lease_token()
    return InboxEntry(offer, dict(offer["lease"], leaseToken=token), accepted_at or now_ms())


# ------------------------------------------------------------------ fake lease server


@dataclass
class ServerLease:
    version: int = 1
    state: str = "claimed"
    started_at: int | None = None
    cancel: bool = False
    released: str | None = None
    last: tuple[str, dict[str, Any]] | None = None  # the change that made `version`


@dataclass
class FakeLeases:
    """The server side of ack/heartbeat/complete, with the lease version rule of
    SPEC §7 (the current version applies and answers version + 1; the same
    request at version - 1 answers the current lease unchanged; anything else is
    409 stale_lease_version) and scripted failures per call kind: `fail` before
    the server sees the call, `lose` after it applied it (the answer is lost)."""

    ttl_ms: int = 3_000
    leases: dict[str, ServerLease] = field(default_factory=dict)
    calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    versions: list[tuple[str, int]] = field(default_factory=list)  # (kind, version sent)
    fail: dict[str, list[Exception]] = field(default_factory=dict)  # kind -> next failures
    lose: dict[str, list[LeaseUnavailable]] = field(default_factory=dict)  # kind -> lost answers
    on_call: Callable[[str, LeaseRef], None] | None = None
    results: list[tuple[str, dict[str, Any] | None]] = field(default_factory=list)
    applied: list[tuple[str, int]] = field(default_factory=list)  # (kind, new version)

    def _answer(self, ref: LeaseRef, lease: ServerLease) -> LeaseAnswer:
        now = now_ms()
        doc = {"runId": "r", "attemptId": ref.attempt_id, "workerId": ref.worker_id,
               "sessionId": ref.session_id, "sessionGeneration": ref.generation,
               "leaseGeneration": 1, "leaseVersion": lease.version, "offerId": ref.offer_id,
               "claimedAtMs": now, "expiresAtMs": now + self.ttl_ms, "updatedAtMs": now,
               "state": lease.state, "startedAtMs": lease.started_at}  # fmt: skip
        return LeaseAnswer(doc, lease.cancel)

    def _call(self, kind: str, ref: LeaseRef, version: int, detail: dict[str, Any],
              change: Callable[[ServerLease], None]) -> LeaseAnswer:  # fmt: skip
        self.calls.append((kind, ref.offer_id, detail))
        self.versions.append((kind, version))
        if self.on_call is not None:
            self.on_call(kind, ref)
        failures = self.fail.get(kind)
        if failures:
            raise failures.pop(0)
        # A lease first seen here is where the worker's journal says it is.
        lease = self.leases.setdefault(ref.offer_id, ServerLease(version=version))
        if version == lease.version - 1 and lease.last == (kind, detail):
            return self._answer(ref, lease)  # the repeated request: nothing changes
        if lease.released is not None:
            raise LeaseConflict("lease_terminal")
        if version != lease.version:
            raise LeaseConflict("stale_lease_version")
        change(lease)
        lease.version += 1
        lease.last = (kind, detail)
        self.applied.append((kind, lease.version))
        lost = self.lose.get(kind)
        if lost:
            raise lost.pop(0)
        return self._answer(ref, lease)

    def ack(self, ref: LeaseRef, version: int, phase: AckPhase,
            reason: str | None = None) -> LeaseAnswer:  # fmt: skip
        def change(lease: ServerLease) -> None:
            if phase is AckPhase.STARTING:
                lease.state, lease.started_at = "starting", now_ms()
            elif phase is AckPhase.RUNNING:
                lease.state = "running"
            else:
                lease.state, lease.released = "failed", "start_failed"

        return self._call(f"ack_{phase.value}", ref, version, {"reason": reason}, change)

    def heartbeat(self, ref: LeaseRef, version: int) -> LeaseAnswer:
        return self._call("heartbeat", ref, version, {}, lambda lease: None)

    def complete(self, ref: LeaseRef, version: int, outcome: Outcome,
                 exit_code: int | None = None, reason: str | None = None,
                 result: dict[str, Any] | None = None) -> LeaseAnswer:  # fmt: skip
        detail = {"outcome": outcome.value, "exitCode": exit_code, "reason": reason}
        self.results.append((ref.offer_id, result))

        def change(lease: ServerLease) -> None:
            lease.state, lease.released = outcome.value, "completed"

        return self._call("complete", ref, version, detail, change)

    def kinds(self, offer_id: str | None = None) -> list[str]:
        return [k for k, o, _ in self.calls if offer_id is None or o == offer_id]

    def detail(self, kind: str) -> dict[str, Any]:
        return next(d for k, _, d in self.calls if k == kind)


# ------------------------------------------------------------------ harness


@dataclass
class Bench:
    root: Path
    journal: Journal
    leases: FakeLeases
    out: io.StringIO
    sandbox: Sandbox
    reachable: Path  # a directory the run-as user can search (pytest's tmp_path is 0700)
    lifecycle: Lifecycle | None = None

    def make(self, slots: int = 4, settings: ExecutorSettings = SETTINGS) -> Lifecycle:
        settings = replace(settings, sandbox=self.sandbox)
        self.lifecycle = Lifecycle(
            self.journal, self.leases, slots=slots, settings=settings,  # type: ignore[arg-type]
            work_dir=str(self.root / "work"), events=EventLog(self.out), rng=random.Random(3),
        )  # fmt: skip
        return self.lifecycle

    def admit(self, *entries: InboxEntry) -> None:
        for entry in entries:
            self.journal.accept(entry)

    def run(self, timeout: float = 15.0) -> None:
        """Drive tick() like the run loop does until every job is gone."""
        lc = self.lifecycle
        assert lc is not None
        lc.sync()
        deadline = time.monotonic() + timeout
        while lc.jobs:
            assert time.monotonic() < deadline, (self.leases.calls, self.names())
            lc.tick()
            due = lc.next_due_ms()
            wait = 0.05 if due is None else min(max(due - now_ms(), 0) / 1000, 0.05)
            time.sleep(wait)

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.out.getvalue().splitlines()]

    def names(self) -> list[str]:
        return [e["event"] for e in self.events()]

    def result(self, offer_id: str) -> dict[str, Any]:
        return json.loads((self.root / "work" / offer_id / "result.json").read_text())

    def printed_pid(self, entry: InboxEntry) -> int:
        """The pid the command echoed first (it runs as another user: no pid file)."""
        log = self.root / "work" / entry.offer_id / "output.log"
        return int(log.read_text().split()[0])


def sandbox_in(root: Path, run_as_user: str | None) -> Sandbox:
    """SPEC §11: the suite's run-as user (as root), a runs directory of its own."""
    runs = root / "runs"
    runs.mkdir()
    runs.chmod(RUNS_MODE_SHARED)
    return Sandbox(str(runs), resolve_user(run_as_user) if run_as_user else None)


@pytest.fixture
def bench(tmp_path: Path, run_as_user: str | None) -> Iterator[Bench]:
    journal = Journal.open(str(tmp_path / "journal"), refresher=False)
    reachable = Path(tempfile.mkdtemp(prefix="ql-bench-"))
    reachable.chmod(0o711)
    b = Bench(tmp_path, journal, FakeLeases(), io.StringIO(), sandbox_in(tmp_path, run_as_user),
              reachable)  # fmt: skip
    yield b
    if b.lifecycle is not None:
        b.lifecycle.abort()
    journal.close()
    shutil.rmtree(reachable, ignore_errors=True)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"


# ------------------------------------------------------------------ lifecycle


def test_success_acks_starting_then_running_then_completes(bench: Bench) -> None:
    entry = entry_for(command("sh", "-c", "echo out; echo err >&2; exit 0"))
    bench.admit(entry)
    bench.make()
    bench.run()
    assert bench.leases.kinds() == ["ack_starting", "ack_running", "complete"]
    assert bench.leases.detail("complete") == {"outcome": "succeeded", "exitCode": 0,
                                               "reason": None}  # fmt: skip
    assert bench.journal.offer_ids() == []  # terminal: removed, the inbox stays bounded
    work = bench.root / "work" / entry.offer_id
    assert sorted(p.name for p in work.iterdir()) == ["output.log", "result.json"]
    assert sorted((work / "output.log").read_text().split()) == ["err", "out"]
    assert bench.result(entry.offer_id)["outcome"] == "succeeded"
    assert "exec.completed" in bench.names()


@pytest.mark.parametrize("code", [1, 3])
def test_nonzero_exit_completes_failed_with_the_exit_code(bench: Bench, code: int) -> None:
    bench.admit(entry_for(command("sh", "-c", f"exit {code}")))
    bench.make()
    bench.run()
    assert bench.leases.detail("complete") == {"outcome": "failed", "exitCode": code,
                                               "reason": "exit_nonzero"}  # fmt: skip


def test_completion_carries_the_result_and_journals_it(bench: Bench) -> None:
    entry = entry_for(command("sh", "-c", "echo RESULT-MARKER; exit 3"))
    bench.admit(entry)
    exited: list[Any] = []

    def on_call(kind: str, ref: LeaseRef) -> None:
        if kind == "complete":
            stored = bench.journal.get(ref.offer_id)
            assert stored is not None
            exited.append(stored.execution["completion"])

    bench.leases.on_call = on_call
    bench.make()
    bench.run()
    [(offer_id, result)] = bench.leases.results
    assert offer_id == entry.offer_id and result is not None
    assert result["exitCode"] == 3 and result["outputTail"] == "RESULT-MARKER\n"
    assert result["outputBytes"] == len("RESULT-MARKER\n") and result["durationMs"] >= 0
    # Journaled before the call, so a restart replays the same bytes.
    assert exited == [{"outcome": "failed", "exitCode": 3, "reason": "exit_nonzero",
                       "result": result}]  # fmt: skip
    assert bench.result(entry.offer_id)["result"] == result


def test_timeout_completion_still_carries_a_result(bench: Bench) -> None:
    bench.admit(entry_for(command("sh", "-c", "echo slow; sleep 300", timeout_s=1)))
    bench.make()
    bench.run()
    assert bench.leases.detail("complete")["reason"] == "timeout"
    [(_, result)] = bench.leases.results
    assert result is not None and result["outputTail"] == "slow\n"
    assert result["exitCode"] == -signal.SIGTERM and result["durationMs"] >= 1000


def test_restart_replays_the_journaled_result(bench: Bench) -> None:
    entry = entry_for(command("true"))
    bench.admit(entry)
    result = {"exitCode": 3, "durationMs": 12, "outputTail": "x", "outputBytes": 1}
    completion = {"outcome": "failed", "exitCode": 3, "reason": "exit_nonzero",
                  "result": result}  # fmt: skip
    advanced(bench, entry, EntryState.EXITED, pid=1, startTicks=None, completion=completion)
    bench.make()
    bench.run()
    assert bench.leases.results == [(entry.offer_id, result)]


def test_complete_request_with_a_full_result_fits_the_transport_limit() -> None:
    from qinglong.worker.executor import output_tail_text
    from qinglong.worker.transport import COMPLETE_REQUEST_LIMIT, _encode, request_limit

    entry = entry_for(command("true"))
    ref = LeaseRef.from_lease(entry.lease)
    sent: list[dict[str, Any]] = []

    def post(path: str, body: dict, limit: int) -> Reply:
        sent.append(copy.deepcopy(body))
        return Reply(200, json.dumps(lease_doc(ref)).encode())

    worst = output_tail_text(b"\x01" * 8192)  # every character escapes to 6 bytes
    result = {"exitCode": -2147483648, "durationMs": 2**53 - 1, "outputTail": worst,
              "outputBytes": 2**53 - 1}  # fmt: skip
    LeaseClient(post).complete(ref, 2, Outcome.FAILED, -2147483648, "x" * 64, result)
    assert sent[-1]["result"] == result
    assert request_limit("/v1/leases/complete") == COMPLETE_REQUEST_LIMIT
    assert len(_encode(sent[-1])) <= COMPLETE_REQUEST_LIMIT
    assert request_limit("/v1/leases/heartbeat") == 4096


def test_starting_is_journaled_before_the_spawn_and_the_pid_before_running(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    import qinglong.worker.lifecycle as lifecycle_module

    entry = entry_for(command("true"))
    bench.admit(entry)
    seen: list[tuple[str, int, Any]] = []
    real_spawn = lifecycle_module.spawn

    def spying_spawn(*args: Any, **kw: Any) -> Any:
        stored = bench.journal.get(entry.offer_id)
        assert stored is not None
        seen.append((stored.state, stored.lease_version, stored.execution))
        return real_spawn(*args, **kw)

    def on_call(kind: str, ref: LeaseRef) -> None:
        if kind == "ack_running":
            stored = bench.journal.get(ref.offer_id)
            assert stored is not None
            seen.append((stored.state, stored.lease_version, stored.execution))

    monkeypatch.setattr(lifecycle_module, "spawn", spying_spawn)
    bench.leases.on_call = on_call
    bench.make()
    bench.run()
    (spawn_state, spawn_version, spawn_exec), (run_state, run_version, run_exec) = seen
    assert (spawn_state, spawn_version, spawn_exec) == ("starting", 2, None)
    assert (run_state, run_version) == ("starting", 2)
    assert isinstance(run_exec["pid"], int) and "startTicks" in run_exec


def test_timeout_kills_the_group_and_completes_failed_timeout(bench: Bench) -> None:
    script = "trap '' TERM; sleep 300 & echo $!; wait"
    entry = entry_for(command("sh", "-c", script, timeout_s=1))
    bench.admit(entry)
    bench.make()
    started = time.monotonic()
    bench.run()
    assert 1.0 <= time.monotonic() - started < 8
    assert bench.leases.detail("complete") == {"outcome": "failed", "exitCode": None,
                                               "reason": "timeout"}  # fmt: skip
    assert not alive(bench.printed_pid(entry))
    assert "exec.timeout" in bench.names()


def test_cancel_learned_from_the_heartbeat_completes_cancelled(bench: Bench) -> None:
    entry = entry_for(command("sleep", "300"))
    bench.admit(entry)
    bench.leases.ttl_ms = 3_000  # heartbeat every second

    def cancel_after_first_heartbeat(kind: str, ref: LeaseRef) -> None:
        if kind == "heartbeat":
            bench.leases.leases[ref.offer_id].cancel = True

    bench.leases.on_call = cancel_after_first_heartbeat
    bench.make()
    started = time.monotonic()
    bench.run()
    assert time.monotonic() - started < 5
    assert bench.leases.kinds() == ["ack_starting", "ack_running", "heartbeat", "complete"]
    assert bench.leases.detail("complete") == {"outcome": "cancelled", "exitCode": None,
                                               "reason": None}  # fmt: skip
    assert "exec.cancel_requested" in bench.names()


def test_spawn_failure_acks_start_failed_with_a_reason(bench: Bench) -> None:
    bench.admit(entry_for(command("/nonexistent")))
    bench.make()
    bench.run()
    assert bench.leases.kinds() == ["ack_starting", "ack_start_failed"]
    assert bench.leases.detail("ack_start_failed") == {"reason": "executable_not_found"}
    assert bench.journal.offer_ids() == []


def test_conflict_on_starting_abandons_without_running(bench: Bench) -> None:
    marker = bench.root / "ran"
    entry = entry_for(command("touch", str(marker)))
    bench.admit(entry)
    bench.leases.fail["ack_starting"] = [LeaseConflict("lease_expired")]
    bench.make()
    bench.run()
    assert bench.leases.kinds() == ["ack_starting"]
    assert not marker.exists() and bench.journal.offer_ids() == []
    abandoned = [e for e in bench.events() if e["event"] == "exec.abandoned"]
    assert abandoned[0]["category"] == "lease_expired"


def test_conflict_on_heartbeat_kills_the_command_and_never_completes(bench: Bench) -> None:
    entry = entry_for(command("sh", "-c", "echo $$; exec sleep 300"))
    bench.admit(entry)
    bench.leases.fail["heartbeat"] = [LeaseConflict("session_replaced")]
    bench.make()
    bench.run()
    assert bench.leases.kinds() == ["ack_starting", "ack_running", "heartbeat"]
    assert not alive(bench.printed_pid(entry))
    assert bench.journal.offer_ids() == []


def test_transient_failures_retry_the_same_call(bench: Bench) -> None:
    bench.admit(entry_for(command("sh", "-c", "exit 3")))
    unavailable = [LeaseUnavailable("http_503"), LeaseUnavailable("network")]
    bench.leases.fail["complete"] = unavailable
    bench.leases.fail["ack_starting"] = [LeaseUnavailable("timeouterror_")]
    bench.make()
    bench.run()
    assert bench.leases.kinds() == ["ack_starting", "ack_starting", "ack_running",
                                    "complete", "complete", "complete"]  # fmt: skip
    completes = [d for k, _, d in bench.leases.calls if k == "complete"]
    assert all(d == completes[0] for d in completes)
    assert [e["reason"] for e in bench.events() if e["event"] == "exec.lease_retry"] == [
        "timeouterror_", "http_503", "network"]  # fmt: skip


def test_every_call_carries_the_version_last_received_and_it_is_journaled(bench: Bench) -> None:
    entry = entry_for(command("sleep", "1.5"))
    bench.admit(entry)
    bench.leases.ttl_ms = 3_000  # heartbeat every second
    journaled: list[tuple[str, int]] = []

    def on_call(kind: str, ref: LeaseRef) -> None:
        stored = bench.journal.get(ref.offer_id)
        assert stored is not None
        journaled.append((kind, stored.lease_version))

    bench.leases.on_call = on_call
    bench.make()
    bench.run()
    assert bench.leases.kinds() == ["ack_starting", "ack_running", "heartbeat", "complete"]
    # Each call sends the version of the previous answer, journaled before it.
    assert bench.leases.versions == [("ack_starting", 1), ("ack_running", 2), ("heartbeat", 3),
                                     ("complete", 4)]  # fmt: skip
    assert journaled == bench.leases.versions
    assert bench.leases.leases[entry.offer_id].version == 5


def test_a_heartbeat_whose_answer_was_lost_is_repeated_before_the_completion(
    bench: Bench,
) -> None:
    """The command exits while a heartbeat's answer is outstanding: the heartbeat
    is sent again with the same version (the server answers it without
    extending the lease again), and only then the completion, at the version
    that answer carried; without that the completion would be stale."""
    gate = bench.reachable / "exit-now"
    entry = entry_for(command("sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.02; done"))
    bench.admit(entry)
    bench.leases.ttl_ms = 3_000  # heartbeat every second; a retry after max(ttl/6, 200 ms)
    bench.leases.lose["heartbeat"] = [LeaseUnavailable("timeouterror_", retry_after_ms=60_000)]

    def on_call(kind: str, ref: LeaseRef) -> None:
        if kind == "heartbeat":
            gate.touch()  # the command exits while this heartbeat's answer is lost

    bench.leases.on_call = on_call
    bench.make()
    bench.run()
    assert bench.leases.kinds() == ["ack_starting", "ack_running", "heartbeat", "heartbeat",
                                    "complete"]  # fmt: skip
    assert bench.leases.versions[2:] == [("heartbeat", 3), ("heartbeat", 3), ("complete", 4)]
    # The server applied the heartbeat once, then the completion.
    assert bench.leases.applied == [("ack_starting", 2), ("ack_running", 3), ("heartbeat", 4),
                                    ("complete", 5)]  # fmt: skip
    assert bench.result(entry.offer_id)["outcome"] == "succeeded"
    assert "exec.abandoned" not in bench.names()


def test_restart_repeats_the_heartbeat_the_predecessor_never_journaled(bench: Bench) -> None:
    entry = entry_for(command("true"))
    bench.admit(entry)
    advanced(bench, entry, EntryState.RUNNING)  # journaled at version 3 ...
    # ... but the server had applied one more heartbeat (its answer died with us).
    bench.leases.leases[entry.offer_id] = ServerLease(
        version=4, state="running", started_at=1, last=("heartbeat", {})
    )
    bench.make()
    bench.run()
    assert bench.leases.versions == [("heartbeat", 3), ("complete", 4)]
    assert bench.leases.applied == [("complete", 5)]  # the repeated heartbeat changed nothing
    assert bench.leases.detail("complete")["reason"] == "worker_restarted"
    assert bench.result(entry.offer_id)["reason"] == "worker_restarted"


def test_a_lease_unconfirmed_for_a_whole_ttl_is_given_up(bench: Bench) -> None:
    entry = entry_for(command("sh", "-c", "echo $$; exec sleep 300"))
    bench.admit(entry)
    bench.leases.ttl_ms = 1_500
    bench.leases.fail["heartbeat"] = [LeaseUnavailable("http_503") for _ in range(100)]
    bench.make()
    bench.run()
    assert "complete" not in bench.leases.kinds()
    abandoned = [e for e in bench.events() if e["event"] == "exec.abandoned"]
    assert abandoned[0]["category"] == "lease_unconfirmed"
    assert not alive(bench.printed_pid(entry))


def test_at_most_slots_commands_run_at_once(bench: Bench) -> None:
    base = [entry_for(command("sleep", "0.3")) for _ in range(5)]
    entries = [InboxEntry(e.offer, e.lease, 1000 - i) for i, e in enumerate(base)]
    bench.admit(*entries)
    running = {"now": 0, "max": 0}

    def count(kind: str, ref: LeaseRef) -> None:
        if kind == "ack_starting":
            running["now"] += 1
            running["max"] = max(running["max"], running["now"])
        elif kind == "complete":
            running["now"] -= 1

    bench.leases.on_call = count
    lc = bench.make(slots=2)
    assert lc.wants_offers() is True
    lc.sync()
    assert lc.wants_offers() is False  # 5 held >= 2 slots: no pulls
    bench.run()
    assert running["max"] == 2
    # Oldest accepted first.
    starts = [o for k, o, _ in bench.leases.calls if k == "ack_starting"]
    assert starts == [e.offer_id for e in sorted(entries, key=lambda e: e.accepted_at_ms)]


def test_shutdown_stops_commands_and_completes_failed_worker_shutdown(bench: Bench) -> None:
    bench.admit(entry_for(command("sh", "-c", "trap '' TERM; sleep 300"), accepted_at=1),
                entry_for(command("true"), accepted_at=2))  # fmt: skip
    lc = bench.make(slots=1)
    lc.sync()
    deadline = time.monotonic() + 5
    while "ack_running" not in bench.leases.kinds():
        assert time.monotonic() < deadline
        lc.tick()
        time.sleep(0.02)
    lc.begin_drain(start_pending=False)
    assert lc.busy() and not lc.wants_offers()
    lc.shutdown()
    deadline = time.monotonic() + 5
    while lc.busy():
        assert time.monotonic() < deadline
        lc.tick()
        time.sleep(0.02)
    assert bench.leases.detail("complete") == {"outcome": "failed", "exitCode": None,
                                               "reason": "worker_shutdown"}  # fmt: skip
    assert bench.leases.kinds().count("ack_starting") == 1  # the second never started
    assert lc.forget_unstarted() == 1 and bench.journal.offer_ids() == []


# ------------------------------------------------------------------ restart recovery


def advanced(bench: Bench, entry: InboxEntry, state: EntryState, **execution: Any) -> InboxEntry:
    lease = dict(entry.lease, leaseVersion=3 if state is not EntryState.STARTING else 2)
    updated = InboxEntry(entry.offer, lease, entry.accepted_at_ms, state.value,
                         execution or None)  # fmt: skip
    bench.journal.advance(updated)
    return updated


def test_restart_kills_an_orphan_and_completes_worker_restarted(bench: Bench) -> None:
    orphan = subprocess.Popen(["sh", "-c", "sleep 300 & wait"], start_new_session=True)
    try:
        entry = entry_for(command("sleep", "300"))
        bench.admit(entry)
        advanced(bench, entry, EntryState.RUNNING, pid=orphan.pid,
                 startTicks=process_start_ticks(orphan.pid))  # fmt: skip
        bench.make()
        bench.run()
        assert orphan.wait(timeout=5) == -signal.SIGKILL
    finally:
        if orphan.poll() is None:
            orphan.kill()
    # The heartbeat the predecessor may have sent without journaling its answer
    # is repeated first (at the journaled version), then the completion.
    assert bench.leases.kinds() == ["heartbeat", "complete"]
    assert bench.leases.versions == [("heartbeat", 3), ("complete", 4)]
    assert bench.leases.detail("complete") == {"outcome": "failed", "exitCode": None,
                                               "reason": "worker_restarted"}  # fmt: skip
    assert {"exec.recovered", "exec.orphan_killed"} <= set(bench.names())


def test_restart_in_starting_without_a_pid_completes_worker_restarted(bench: Bench) -> None:
    entry = entry_for(command("true"))
    bench.admit(entry)
    advanced(bench, entry, EntryState.STARTING)
    bench.make()
    bench.run()
    assert bench.leases.kinds() == ["complete"]
    assert bench.leases.detail("complete")["reason"] == "worker_restarted"


def test_restart_after_exit_replays_exactly_the_decided_completion(bench: Bench) -> None:
    entry = entry_for(command("true"))
    bench.admit(entry)
    completion = {"outcome": "failed", "exitCode": 3, "reason": "exit_nonzero"}
    advanced(bench, entry, EntryState.EXITED, pid=1, startTicks=None, completion=completion)
    bench.make()
    bench.run()
    assert bench.leases.kinds() == ["complete"]
    assert bench.leases.detail("complete") == completion


def test_restart_with_a_dead_lease_abandons(bench: Bench) -> None:
    entry = entry_for(command("true"))
    bench.admit(entry)
    advanced(bench, entry, EntryState.RUNNING)
    bench.leases.fail["complete"] = [LeaseConflict("lease_expired")]
    bench.make()
    bench.run()
    assert bench.journal.offer_ids() == []
    assert bench.result(entry.offer_id)["reason"] == "lease_expired"


def test_the_pending_claims_entry_waits_for_the_replay(bench: Bench) -> None:
    entry = entry_for(command("true"))
    bench.admit(entry)
    lease = entry.lease
    bench.journal.save_pending(PendingClaim(
        offer_id=entry.offer_id, lease_token=lease["leaseToken"], worker_id=WORKER,
        session_id=SESSION, generation=1, capabilities_digest="sha256:" + "ab" * 32,
        attempts=1, next_attempt_at_ms=0, created_at_ms=0))  # fmt: skip
    lc = bench.make()
    assert lc.sync() == 0 and not lc.jobs
    bench.journal.clear_pending()
    assert lc.sync() == 1


def test_every_entry_of_a_pending_batch_waits_for_the_replay(bench: Bench) -> None:
    """A batch's intent holds several pairs; a crash after the inbox write leaves
    all of them in the inbox: none may start before the coordinator's replay
    settles it (a started entry no longer matches its replayed offer)."""
    first, second = entry_for(command("true")), entry_for(command("true"))
    bench.admit(first)
    bench.admit(second)
    bench.journal.save_pending(PendingClaim(
        offer_id=first.offer_id, lease_token=first.lease["leaseToken"], worker_id=WORKER,
        session_id=SESSION, generation=1, capabilities_digest="sha256:" + "ab" * 32,
        attempts=1, next_attempt_at_ms=0, created_at_ms=0,
        batch=((second.offer_id, second.lease["leaseToken"]),)))  # fmt: skip
    lc = bench.make()
    assert lc.sync() == 0 and not lc.jobs
    bench.journal.clear_pending()
    assert lc.sync() == 2


def test_journal_advance_is_monotonic(bench: Bench) -> None:
    entry = entry_for(command("true"))
    bench.admit(entry)
    running = advanced(bench, entry, EntryState.RUNNING)
    from qinglong.worker.journal import LeaseVersionRegression, OfferConflict

    with pytest.raises(OfferConflict):
        bench.journal.advance(InboxEntry(entry.offer, running.lease, entry.accepted_at_ms,
                                         "starting"))  # fmt: skip
    with pytest.raises(LeaseVersionRegression):
        bench.journal.advance(InboxEntry(entry.offer, entry.lease, entry.accepted_at_ms,
                                         "exited"))  # fmt: skip
    # A delivery replay can never rewind the executor's record either.
    replay = InboxEntry(entry.offer, dict(entry.lease, leaseVersion=4), entry.accepted_at_ms)
    with pytest.raises(OfferConflict):
        bench.journal.accept(replay)
    stored = bench.journal.get(entry.offer_id)
    assert stored is not None and stored.state == "running" and stored.lease_version == 3


# ------------------------------------------------------------------ lease client


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes
    retry_after_ms: int | None = None


def lease_doc(ref: LeaseRef, **over: Any) -> dict[str, Any]:
    now = now_ms()
    doc = {"schema": "qinglong/lease@v1", "runId": str(uuid.uuid4()), "attemptId": ref.attempt_id,
           "workerId": ref.worker_id, "sessionId": ref.session_id,
           "sessionGeneration": ref.generation, "leaseGeneration": 1, "leaseVersion": 2,
           "offerId": ref.offer_id, "claimedAtMs": now, "expiresAtMs": now + 60_000,
           "updatedAtMs": now, "state": "running", "startedAtMs": now}  # fmt: skip
    doc.update(over)
    return doc


def test_lease_client_bodies_and_answers() -> None:
    entry = entry_for(command("true"))
    ref = LeaseRef.from_lease(entry.lease)
    sent: list[tuple[str, dict]] = []
    replies: list[Reply] = []

    def post(path: str, body: dict, limit: int) -> Reply:
        sent.append((path, copy.deepcopy(body)))
        return replies.pop(0)

    client = LeaseClient(post)
    replies.append(Reply(200, json.dumps(lease_doc(ref, cancelRequested=True)).encode()))
    answer = client.heartbeat(ref, 4)
    assert sent[-1][1]["leaseVersion"] == 4
    assert answer.cancel_requested and answer.ttl_ms == 60_000 and "schema" not in answer.lease
    replies.append(Reply(200, json.dumps(lease_doc(ref)).encode()))
    client.complete(ref, 5, Outcome.SUCCEEDED, 0)
    path, body = sent[-1]
    assert path == "/v1/leases/complete"
    assert body == {"schema": "qinglong/lease-complete-request@v1", "workerId": WORKER,
                    "sessionId": SESSION, "generation": 1, "offerId": entry.offer_id,
                    "leaseToken": entry.lease["leaseToken"], "leaseVersion": 5,
                    "outcome": "succeeded", "exitCode": 0}  # fmt: skip
    for body in (b for _, b in sent):
        validate(body["schema"], body)
    assert "leaseToken" not in repr(ref) and entry.lease["leaseToken"] not in repr(ref)

    replies.append(error(409, "session_replaced"))  # type: ignore[arg-type]
    with pytest.raises(LeaseConflict) as conflict:
        client.ack(ref, 1, AckPhase.STARTING)
    assert conflict.value.reason == "session_replaced"
    assert sent[-1][1]["phase"] == "starting" and "reason" not in sent[-1][1]
    assert sent[-1][1]["leaseVersion"] == 1
    replies.append(error(409, "stale_lease_version"))  # type: ignore[arg-type]
    with pytest.raises(LeaseConflict, match="stale_lease_version"):
        client.ack(ref, 2, AckPhase.RUNNING)
    replies.append(error(400, "schema_invalid"))  # type: ignore[arg-type]
    with pytest.raises(LeaseConflict):
        client.ack(ref, 1, AckPhase.START_FAILED, "executable_not_found")
    replies.append(Resp(503, b"{}", 2000))  # type: ignore[arg-type]
    with pytest.raises(LeaseUnavailable) as unavailable:
        client.heartbeat(ref, 3)
    assert unavailable.value.retry_after_ms == 2000 and not unavailable.value.auth
    replies.append(error(401, "bad_secret"))  # type: ignore[arg-type]
    with pytest.raises(LeaseUnavailable) as auth:
        client.heartbeat(ref, 3)
    assert auth.value.auth
    foreign = lease_doc(ref, offerId=str(uuid.uuid4()))
    replies.append(Reply(200, json.dumps(foreign).encode()))
    with pytest.raises(LeaseUnavailable, match="lease_foreign"):
        client.heartbeat(ref, 3)
    replies.append(Reply(200, b'{"schema": "qinglong/lease@v1"}'))
    with pytest.raises(LeaseUnavailable):
        client.heartbeat(ref, 3)

    def broken(path: str, body: dict, limit: int) -> Reply:
        raise NetworkError("connection refused")

    with pytest.raises(LeaseUnavailable):
        LeaseClient(broken).heartbeat(ref, 3)


# ------------------------------------------------------------------ the run loop


def _runner(tmp_path: Path, ingress: FakeIngress, leases: FakeLeases, stop: StopSignal,
            options: RunOptions, out: io.StringIO) -> tuple[Runner, Journal]:  # fmt: skip
    config = WorkerConfig(
        ingress_url="https://127.0.0.1:1", worker_id=WORKER, cert_file="c", key_file="k",
        ca_file="a", credential_file="x", journal=str(tmp_path / "j"),
        capabilities=default_capabilities(2), execute=True, executor=SETTINGS,
    )  # fmt: skip
    journal = Journal.open(config.journal, refresher=False)
    events = EventLog(out)
    settings = replace(SETTINGS, sandbox=sandbox_in(tmp_path, run_as_user()))
    executor = Lifecycle(journal, leases, slots=2, settings=settings,  # type: ignore[arg-type]
                         work_dir=config.work_dir, events=events)  # fmt: skip
    # Two slots: the runner pulls in batches (SPEC §18.2).
    runner = Runner(config, journal, SessionClient(ingress.post, WORKER),
                    batch_pulls(ingress.pull),
                    events=events, stop=stop, options=options, rng=random.Random(1),
                    executor=executor)  # fmt: skip
    # Watchdog: a broken loop fails the test instead of hanging it (2nd request escalates).
    for delay in (30, 31):
        timer = threading.Timer(delay, stop.request, args=("watchdog",))
        timer.daemon = True
        timer.start()
    return runner, journal


def _ingress_offering(spec: dict[str, Any], count: int) -> FakeIngress:
    """The fake ingress of test_worker_run, handing out offers of ``spec``."""
    ingress = FakeIngress(FakeTime(now_ms()))
    ingress.queue = count
    real_pull = ingress.pull

    def pull(body: dict) -> Resp:
        if body["offerId"] not in ingress.leases and ingress.queue > 0:
            doc = make_offer(spec, session=body["sessionId"], generation=body["generation"],
                             offer_id=body["offerId"])  # fmt: skip
            ingress.leases[body["offerId"]] = doc
            ingress.queue -= 1
            ingress.calls.append(("/v1/offers/pull", dict(body)))
            return Resp(200, json.dumps(doc).encode())
        return real_pull(body)

    ingress.pull = pull  # type: ignore[method-assign]
    return ingress


def test_runner_executes_offers_and_stops_when_done(tmp_path: Path) -> None:
    ingress = _ingress_offering(command("sh", "-c", "exit 0"), 3)
    leases, stop, out = FakeLeases(), StopSignal(), io.StringIO()
    runner, journal = _runner(tmp_path, ingress, leases, stop, RunOptions(max_offers=3), out)
    try:
        assert runner.run() == 0
    finally:
        journal.close()
        stop.close()
    assert [d["outcome"] for k, _, d in leases.calls if k == "complete"] == ["succeeded"] * 3
    assert not list((tmp_path / "j" / "inbox").iterdir())
    assert ingress.paths()[-1] == "/v1/sessions/close"  # after the completions


def test_runner_sigterm_drains_commands_then_closes_the_session(tmp_path: Path) -> None:
    ingress = _ingress_offering(command("sh", "-c", "trap '' TERM; sleep 300"), 1)
    leases, stop, out = FakeLeases(), StopSignal(), io.StringIO()
    order: list[str] = []
    leases.on_call = lambda kind, ref: order.append(kind)
    real_post = ingress.post

    def post(path: str, body: dict, limit: int) -> Resp:
        order.append(path)
        return real_post(path, body, limit)

    ingress.post = post  # type: ignore[method-assign]
    runner, journal = _runner(tmp_path, ingress, leases, stop, RunOptions(), out)

    def sigterm_once_running() -> None:
        deadline = time.monotonic() + 10
        while "ack_running" not in order and time.monotonic() < deadline:
            time.sleep(0.02)
        stop.request("sigterm")

    threading.Thread(target=sigterm_once_running, daemon=True).start()
    started = time.monotonic()
    try:
        assert runner.run() == 0
    finally:
        journal.close()
        stop.close()
    # grace 0.5 s, then SIGTERM (ignored) and SIGKILL after 0.3 s.
    assert time.monotonic() - started < 10
    assert leases.detail("complete") == {"outcome": "failed", "exitCode": None,
                                         "reason": "worker_shutdown"}  # fmt: skip
    assert order.index("complete") < order.index("/v1/sessions/close")
    names = [json.loads(line)["event"] for line in out.getvalue().splitlines()]
    assert "worker.stopping_commands" in names


def test_restart_resumes_the_session_of_the_inbox_leases(tmp_path: Path) -> None:
    ingress = _ingress_offering(command("true"), 0)
    ingress._open({})  # the session the dead worker held (still alive at the server)
    old = ingress.sessions[0]
    journal = Journal.open(str(tmp_path / "j"), refresher=False)
    entry = entry_for(command("true"), session=old.session_id, generation=old.generation)
    journal.accept(entry)
    journal.close()
    ingress.calls.clear()
    leases, stop, out = FakeLeases(), StopSignal(), io.StringIO()
    runner, journal = _runner(tmp_path, ingress, leases, stop,
                              RunOptions(exit_when_idle=True), out)  # fmt: skip
    try:
        assert runner.run() == 0
    finally:
        journal.close()
        stop.close()
    paths = ingress.paths()
    assert paths[0] == "/v1/sessions/heartbeat" and "/v1/sessions" not in paths
    assert ingress.calls[0][1]["sessionId"] == old.session_id
    assert all(b["sessionId"] == old.session_id for b in ingress.pulls())
    assert leases.kinds(entry.offer_id)[:1] == ["ack_starting"]


def test_restart_opens_a_new_session_when_the_inbox_session_is_gone(tmp_path: Path) -> None:
    ingress = _ingress_offering(command("true"), 0)
    journal = Journal.open(str(tmp_path / "j"), refresher=False)
    journal.accept(entry_for(command("true"), session=str(uuid.uuid4()), generation=7))
    journal.close()
    leases, stop, out = FakeLeases(), StopSignal(), io.StringIO()
    leases.fail["ack_starting"] = [LeaseConflict("session_replaced")]
    runner, journal = _runner(tmp_path, ingress, leases, stop,
                              RunOptions(exit_when_idle=True), out)  # fmt: skip
    try:
        assert runner.run() == 0
    finally:
        journal.close()
        stop.close()
    assert ingress.paths()[:2] == ["/v1/sessions/heartbeat", "/v1/sessions"]
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    assert any(e["event"] == "session.resume_failed" for e in events)
    assert any(e["event"] == "exec.abandoned" and e["category"] == "session_replaced"
               for e in events)  # fmt: skip
    assert not list((tmp_path / "j" / "inbox").iterdir())


def test_config_file_execute_and_executor_settings(tmp_path: Path) -> None:
    from qinglong.worker.config import ConfigError, load_config_file

    doc = {"ingressUrl": "https://127.0.0.1:8443", "workerId": WORKER, "certFile": "c.pem",
           "keyFile": "k.pem", "caFile": "ca.pem", "credentialFile": "cred", "journal": "j",
           "execute": True, "executor": {"shutdownGraceS": 2, "killGraceS": 0.5,
                                         "outputLimitBytes": 10, "workDir": "w"}}  # fmt: skip
    path = tmp_path / "w.json"
    path.write_text(json.dumps(doc))
    config = load_config_file(str(path), journal=None, slots=None)
    assert config.execute and config.executor.shutdown_grace_s == 2
    assert config.work_dir == str(tmp_path / "w")
    del doc["execute"], doc["executor"]
    path.write_text(json.dumps(doc))
    plain = load_config_file(str(path), journal=None, slots=None)
    assert not plain.execute and plain.work_dir == str(tmp_path / "j") + ".work"
    assert load_config_file(str(path), journal=None, slots=None, execute=True).execute
    for bad in ({"execute": "yes"}, {"executor": {"shutdownGraceS": -1}},
                {"executor": {"bogus": 1}}):  # fmt: skip
        path.write_text(json.dumps(dict(doc, **bad)))
        with pytest.raises(ConfigError):
            load_config_file(str(path), journal=None, slots=None)
