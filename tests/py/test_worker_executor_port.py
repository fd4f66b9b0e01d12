"""The executor interface (worker/executor_port.py): the contract of ``NoExecution``
(a worker without ``--execute``) and that the run loop drives any implementation
through the interface alone (a recording implementation, not a mock of anything
real: the journal, the inbox and the fake ingress of test_worker_run are real)."""

from __future__ import annotations

import io
import random
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from qinglong.worker.config import WorkerConfig, default_capabilities
from qinglong.worker.eventlog import EventLog
from qinglong.worker.executor_port import Executor, NoExecution, Waiter
from qinglong.worker.journal import Journal
from qinglong.worker.runner import RUN_FOREVER, Runner, RunOptions, StopSignal
from qinglong.worker.session import SessionClient
from tests.py.test_worker_executor_lifecycle import (
    Bench,
    FakeLeases,
    command,
    entry_for,
    sandbox_in,
)
from tests.py.test_worker_run import (
    HEARTBEAT_MS,
    WORKER,
    FakeIngress,
    FakeStop,
    FakeTime,
    Harness,
    Session,
    batch_pulls,
)


@pytest.fixture
def h(tmp_path: Path):
    time = FakeTime()
    config = WorkerConfig(
        ingress_url="https://127.0.0.1:1", worker_id=WORKER, cert_file="c", key_file="k",
        ca_file="a", credential_file="x", journal=str(tmp_path / "j"),
    )  # fmt: skip
    harness = Harness(str(tmp_path / "j"), time, FakeIngress(time), FakeStop(time),
                      io.StringIO(), config)  # fmt: skip
    yield harness
    harness.stop.close()
    if harness.journal is not None:
        harness.journal.close()


@dataclass
class RecordingWaiter:
    """A stop signal that records each wait (its arguments) and never sleeps."""

    requested: bool = False
    waits: list[tuple[float, list[int] | None]] = field(default_factory=list)

    def wait(self, seconds: float, fds: list[int] | None = None) -> bool:
        self.waits.append((seconds, fds))
        return self.requested


def _accept_one(h: Harness) -> Journal:
    """One offer accepted into the real inbox by a worker without --execute."""
    h.ingress.queue = 1
    assert h.runner(RunOptions(max_offers=1)).run() == 0
    journal = h.open_journal()
    assert journal.count() == 1
    return journal


# ------------------------------------------------------------ NoExecution


def test_no_execution_runs_nothing_and_answers_as_a_worker_that_only_holds_offers(
    h: Harness,
) -> None:
    journal = h.open_journal()
    executor: Executor = NoExecution(journal)
    freed: list[bool] = []
    executor.on_slot_freed = lambda: freed.append(True)
    assert executor.sync() == 0
    executor.tick()
    assert executor.wants_offers() is True
    assert executor.slots_taken() == 0
    assert executor.tracked() == 0
    assert executor.sessions() == []
    assert executor.next_due_ms() is None and executor.wait_fds() == []
    executor.begin_drain(start_pending=True)
    executor.begin_drain(start_pending=False)
    assert executor.busy() is False
    executor.shutdown()
    executor.abort()
    assert executor.forget_unstarted() == 0
    assert executor.leaves_session_open() is False  # an empty inbox: close the session
    assert freed == []  # nothing ever ends


def test_no_execution_waits_once_on_the_stop_signal_alone(h: Harness) -> None:
    """The idle wait of a worker without --execute: one plain wait, exactly the
    seconds asked, no descriptors, nothing done meanwhile."""
    executor = NoExecution(h.open_journal())
    stop = RecordingWaiter()
    assert executor.wait(stop, 1.2345) is False
    assert stop.waits == [(1.2345, None)]
    stop.requested = True
    assert executor.wait(stop, 0.5) is True
    assert stop.waits[-1] == (0.5, None)


def test_no_execution_counts_the_inbox_as_its_slots_and_keeps_a_leased_inbox_open(
    h: Harness,
) -> None:
    journal = _accept_one(h)
    executor = NoExecution(journal)
    assert executor.slots_taken() == 1  # the inbox's entry holds a slot
    assert executor.tracked() == 0  # yet nothing is driven
    assert executor.sync() == 0 and executor.sessions() == []
    assert executor.leaves_session_open() is True
    assert journal.count() == 1  # nothing was consumed or dropped
    executor.abort()
    assert executor.forget_unstarted() == 0 and journal.count() == 1


def test_no_execution_assumes_an_unreadable_inbox_holds_leases(h: Harness) -> None:
    journal = h.open_journal()
    shutil.rmtree(journal.inbox_dir)  # fault: the inbox cannot be listed
    assert NoExecution(journal).leaves_session_open() is True  # fail closed


# ------------------------------------------------------------ any executor


@dataclass
class RecordingExecutor:
    """An implementation of the interface with set answers that records every
    call; the run loop must need nothing else."""

    stop: FakeStop
    wants: bool = True
    taken: int = 0
    held: int = 0
    busy_turns: int = 0  # how many busy() answers are True at the drain
    keep_open: bool = False
    own_sessions: list[tuple[str, int]] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    on_slot_freed: Callable[[], None] | None = None

    def sync(self) -> int:
        self.calls.append("sync")
        return 0

    def tick(self) -> None:
        self.calls.append("tick")

    def wants_offers(self) -> bool:
        self.calls.append("wants_offers")
        return self.wants

    def slots_taken(self) -> int:
        self.calls.append("slots_taken")
        return self.taken

    def tracked(self) -> int:
        self.calls.append("tracked")
        return self.held

    def sessions(self) -> list[tuple[str, int]]:
        self.calls.append("sessions")
        return self.own_sessions

    def wait(self, stop: Waiter, seconds: float) -> bool:
        self.calls.append(f"wait:{int(seconds * 1000)}")
        return stop.wait(seconds)

    def begin_drain(self, *, start_pending: bool) -> None:
        self.calls.append(f"begin_drain:{start_pending}")

    def busy(self) -> bool:
        self.calls.append("busy")
        if self.busy_turns > 0:
            self.busy_turns -= 1
            return True
        return False

    def next_due_ms(self) -> int | None:
        self.calls.append("next_due_ms")
        return self.stop.time.now  # due now: the drain's nap is zero

    def wait_fds(self) -> list[int]:
        self.calls.append("wait_fds")
        return []

    def shutdown(self) -> None:
        self.calls.append("shutdown")

    def abort(self) -> None:
        self.calls.append("abort")

    def leaves_session_open(self) -> bool:
        self.calls.append("leaves_session_open")
        return self.keep_open

    def forget_unstarted(self) -> int:
        self.calls.append("forget_unstarted")
        return 0

    def after(self, name: str) -> list[str]:
        """The calls after the first ``name``."""
        return self.calls[self.calls.index(name) + 1 :]


def _runner(h: Harness, executor: Executor, options: RunOptions = RUN_FOREVER,
            config: WorkerConfig | None = None,
            pull: Callable[[dict], Any] | None = None) -> Runner:  # fmt: skip
    return Runner(config or h.config, h.open_journal(), SessionClient(h.ingress.post, WORKER),
                  pull or batch_pulls(h.ingress.pull), events=EventLog(h.out), stop=h.stop,
                  options=options, clock=h.time.clock, rng=random.Random(7),
                  executor=executor)  # fmt: skip


def test_the_loop_asks_the_executor_at_each_step_of_a_run(h: Harness) -> None:
    executor = RecordingExecutor(h.stop)
    runner = _runner(h, executor, RunOptions(exit_when_idle=True))
    assert executor.on_slot_freed is not None  # the loop's hook is installed
    assert runner.run() == 0
    assert h.ingress.paths() == ["/v1/sessions", "/v1/offers/pull", "/v1/sessions/close"]
    calls = executor.calls
    assert calls[:2] == ["sync", "sessions"]  # adopt the inbox, then resume its session
    # A turn: tick, may it pull, how many slots are free; the settled claim is synced.
    assert calls[2:6] == ["tick", "wants_offers", "slots_taken", "sync"]
    # The drain of a `done` stop runs what was accepted; closes; drops the unstarted.
    assert calls[6:] == ["begin_drain:True", "busy", "leaves_session_open", "forget_unstarted"]


def test_an_executor_that_wants_no_offers_is_never_pulled_for(h: Harness) -> None:
    executor = RecordingExecutor(h.stop, wants=False)
    assert _runner(h, executor).run() == 0  # the fake stop's time budget ends it
    assert "/v1/offers/pull" not in h.ingress.paths()
    # The loop waits through the executor, until the next session heartbeat.
    waits = [c for c in executor.calls if c.startswith("wait:")]
    assert waits and set(waits) == {f"wait:{HEARTBEAT_MS}"}
    assert h.ingress.paths().count("/v1/sessions/heartbeat") == len(waits) - 1
    # A budget stop is no `done`: what was not started is not started any more.
    assert "begin_drain:False" in executor.calls


@pytest.mark.parametrize(("taken", "asked"), [(0, 4), (1, 3), (3, None), (4, None)])
def test_the_pull_asks_for_the_slots_the_executor_leaves_free(
    h: Harness, taken: int, asked: int | None
) -> None:
    """Four slots: a batch of the free ones; one free (or none: the answer says
    inbox_full) a single pull."""
    sent: list[dict] = []
    adapted = batch_pulls(h.ingress.pull)

    def pull(body: dict) -> Any:
        sent.append(body)
        return adapted(body)

    config = replace(h.config, capabilities=default_capabilities(4))
    executor = RecordingExecutor(h.stop, taken=taken)
    assert _runner(h, executor, RunOptions(exit_when_idle=True), config, pull).run() == 0
    (body,) = sent
    if asked is None:
        assert body["schema"] == "qinglong/offer-pull-request@v1"
    else:
        assert body["schema"] == "qinglong/offer-batch-pull-request@v1"
        assert len(body["offers"]) == asked


def test_the_loop_resumes_the_session_the_executor_names(h: Harness) -> None:
    live = Session("0f8c6bde-65c6-4c39-9b07-1f7e59f5a6a1", 7)
    h.ingress.sessions.append(live)
    executor = RecordingExecutor(h.stop, own_sessions=[(live.session_id, live.generation)])
    assert _runner(h, executor, RunOptions(exit_when_idle=True)).run() == 0
    assert h.ingress.paths()[0] == "/v1/sessions/heartbeat"  # resumed, not opened
    assert "/v1/sessions" not in h.ingress.paths()
    (resumed,) = [e for e in h.events() if e["event"] == "session.resumed"]
    assert (resumed["source"], resumed["sessionId"]) == ("inbox", live.session_id)


def test_a_session_the_executor_leaves_open_is_not_closed(h: Harness) -> None:
    executor = RecordingExecutor(h.stop, keep_open=True)
    assert _runner(h, executor, RunOptions(exit_when_idle=True)).run() == 0
    assert "/v1/sessions/close" not in h.ingress.paths()
    assert "session.left_open" in [e["event"] for e in h.events()]
    assert "forget_unstarted" not in executor.calls


def test_the_drain_drives_a_busy_executor_until_it_is_done(h: Harness) -> None:
    executor = RecordingExecutor(h.stop, busy_turns=5)
    assert _runner(h, executor, RunOptions(exit_when_idle=True)).run() == 0
    drain = executor.after("begin_drain:True")
    # While busy: tick, ask again, and nap until the executor's next due time.
    assert drain[:4] == ["busy", "busy", "tick", "busy"]
    assert drain.count("next_due_ms") == 2 and drain.count("wait_fds") == 2
    assert drain[-3:] == ["busy", "leaves_session_open", "forget_unstarted"]
    assert h.ingress.paths()[-1] == "/v1/sessions/close"  # only once it is done


# ------------------------------------------------------------ Lifecycle's wait


@pytest.fixture
def lifecycle_bench(tmp_path: Path, run_as_user: str | None) -> Iterator[Bench]:
    """test_worker_executor_lifecycle's bench: a real Lifecycle, real commands,
    the fake lease endpoint."""
    journal = Journal.open(str(tmp_path / "journal"), refresher=False)
    reachable = Path(tempfile.mkdtemp(prefix="ql-port-"))
    reachable.chmod(0o711)
    b = Bench(tmp_path, journal, FakeLeases(), io.StringIO(), sandbox_in(tmp_path, run_as_user),
              reachable)  # fmt: skip
    yield b
    if b.lifecycle is not None:
        b.lifecycle.abort()
    journal.close()
    shutil.rmtree(reachable, ignore_errors=True)


def test_the_lifecycle_works_through_its_wait_and_ends_it_when_a_slot_is_freed(
    lifecycle_bench: Bench,
) -> None:
    bench = lifecycle_bench
    bench.admit(entry_for(command("sh", "-c", "exit 0")))
    lifecycle = bench.make()
    freed: list[bool] = []
    lifecycle.on_slot_freed = lambda: freed.append(True)
    assert lifecycle.sync() == 1 and lifecycle.tracked() == lifecycle.slots_taken() == 1
    stop = StopSignal()
    try:
        started = time.monotonic()
        assert lifecycle.wait(stop, 30.0) is False  # the whole offer ran within the wait
        assert time.monotonic() - started < 15  # ended by the freed slot, not the 30 s
        assert freed == [True] and lifecycle.tracked() == 0
        assert bench.leases.kinds() == ["ack_starting", "ack_running", "complete"]
        assert bench.journal.offer_ids() == []
        assert lifecycle.leaves_session_open() is False
        started = time.monotonic()
        assert lifecycle.wait(stop, 0.05) is False  # nothing to do: the time asked
        assert 0.04 <= time.monotonic() - started < 5
        stop.request("sigterm")
        assert lifecycle.wait(stop, 30.0) is True  # a stop ends it at once
    finally:
        stop.close()
