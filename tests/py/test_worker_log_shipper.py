"""worker/log_shipper.py: the live log (SPEC §15.1, §15.2, worker side).

The shipper's decisions against real files; the lifecycle shipping real
commands' output through the real LogClient into an injected transport that
keeps the server's rule (append at the stored length, an exact replay answers
unchanged, anything else 409 ``log_offset``, a cap past which it truncates).
The same against the real ingress over TLS: tests/py/test_live_log_e2e.py.
"""

from __future__ import annotations

import io
import json
import os
import random
import select
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from qinglong.worker.errors import NetworkError
from qinglong.worker.journal import EntryState, InboxEntry, Journal
from qinglong.worker.lease_client import LeaseRef, LeaseUnavailable
from qinglong.worker.lifecycle import Lifecycle
from qinglong.worker.log_shipper import (
    CHUNK_BYTES,
    LOG_PATH,
    SEND_INTERVAL_MS,
    LogAnswer,
    LogClient,
    LogReader,
    LogShipper,
    ShipState,
    log_size,
)
from qinglong.worker.runner import RunOptions, StopSignal
from qinglong.worker.transport import Response
from tests.py.test_worker_executor_lifecycle import (
    SETTINGS,
    Bench,
    FakeLeases,
    _ingress_offering,
    _runner,
    command,
    entry_for,
    now_ms,
    sandbox_in,
)


@pytest.fixture
def bench(tmp_path: Path, run_as_user: str | None) -> Iterator[Bench]:
    """test_worker_executor_lifecycle's bench: a real journal, real processes."""
    journal = Journal.open(str(tmp_path / "journal"), refresher=False)
    b = Bench(tmp_path, journal, FakeLeases(), io.StringIO(), sandbox_in(tmp_path, run_as_user),
              tmp_path)  # fmt: skip
    yield b
    if b.lifecycle is not None:
        b.lifecycle.abort()
    journal.close()


FAST = SETTINGS.__class__(shutdown_grace_s=0.5, kill_grace_s=0.3)  # the 64 MiB output cap


def sanitized(data: bytes) -> bytes:
    """The log of raw output (SPEC §15.1: invalid UTF-8 replaced; NUL too)."""
    return data.decode("utf-8", "replace").replace("\x00", "\ufffd").encode()


# ------------------------------------------------------------------ the reader


def write(path: Path, data: bytes) -> None:
    with path.open("ab") as handle:
        handle.write(data)


def drain(reader: LogReader) -> list[bytes]:
    chunks = []
    while True:
        text = reader.chunk()
        if not text:
            return chunks
        chunks.append(text.encode())
        assert reader.seek(reader.offset + len(chunks[-1]))


def test_reader_chunks_are_whole_characters_and_add_up_to_the_sanitized_log(
    tmp_path: Path,
) -> None:
    path = tmp_path / "output.log"
    raw = ("é" * 40_000).encode() + b"\xff\xfe bad \x00 nul " + ("漢" * 30_000).encode()
    write(path, raw)
    reader = LogReader(str(path))
    reader.finish()
    chunks = drain(reader)
    assert len(chunks) >= 3
    assert all(len(c) <= CHUNK_BYTES for c in chunks)
    for chunk in chunks:
        chunk.decode("utf-8")  # each one whole characters
    assert b"".join(chunks) == sanitized(raw)
    assert log_size(str(path)) == len(sanitized(raw)) == reader.offset


def test_reader_holds_back_a_split_character_until_the_file_is_finished(tmp_path: Path) -> None:
    path = tmp_path / "output.log"
    write(path, b"ab\xe6\xbc")  # the first two bytes of 漢
    reader = LogReader(str(path))
    assert reader.chunk() == "ab"
    assert reader.seek(2)
    assert reader.chunk() == ""
    write(path, b"\xa2!")
    assert reader.chunk() == "漢!"
    assert reader.seek(2 + 4)
    write(path, b"\xe6")  # a character the command never finished
    assert reader.chunk() == "" and not reader.at_end()
    reader.finish()
    assert reader.chunk() == "\ufffd"


def test_a_chunk_of_control_characters_stays_within_the_json_budget(tmp_path: Path) -> None:
    path = tmp_path / "output.log"
    write(path, b"\x01" * 100_000)
    reader = LogReader(str(path))
    reader.finish()
    chunks = drain(reader)
    assert all(len(json.dumps(c.decode(), ensure_ascii=False)) - 2 <= CHUNK_BYTES
               for c in chunks)  # fmt: skip
    assert sum(map(len, chunks)) == 100_000


def test_seek_back_and_forth_and_refuses_the_middle_of_a_character(tmp_path: Path) -> None:
    path = tmp_path / "output.log"
    write(path, "x漢y".encode())
    reader = LogReader(str(path))
    reader.finish()
    assert reader.seek(4) and reader.chunk() == "y"
    assert reader.seek(1) and reader.chunk() == "漢y"
    assert not reader.seek(2)  # inside 漢: not an offset this log ever had
    assert not LogReader(str(path)).seek(99)


# ------------------------------------------------------------------ decisions


def shipper(tmp_path: Path, data: bytes, name: str = "output.log", **kw: Any) -> LogShipper:
    path = tmp_path / name
    write(path, data)
    return LogShipper.for_file(str(path), rng=random.Random(1), **kw)  # type: ignore[arg-type]


def test_cadence_a_small_remainder_waits_for_the_interval_a_backlog_goes_at_once(
    tmp_path: Path,
) -> None:
    log = shipper(tmp_path, b"first\n", known=True)
    assert log.should_send(1_000)
    offset, chunk = log.next_request()
    log.sent(1_000, offset, chunk, LogAnswer(6, False))
    write(tmp_path / "output.log", b"second\n")
    assert not log.should_send(1_500)  # within the interval: held
    assert log.due_ms() == 1_000 + SEND_INTERVAL_MS
    assert log.should_send(1_000 + SEND_INTERVAL_MS)
    log.sent(3_000, *log.next_request(), LogAnswer(13, False))
    write(tmp_path / "output.log", b"z" * (CHUNK_BYTES + 10))
    assert log.should_send(3_001)  # a full chunk waiting: no interval
    # Nothing new: look again an interval later, without a request.
    idle = shipper(tmp_path, b"", "idle", known=True)
    assert not idle.should_send(5_000) and idle.due_ms() == 5_000 + SEND_INTERVAL_MS


def test_answers_move_the_offset_and_stop_when_they_must(tmp_path: Path) -> None:
    log = shipper(tmp_path, b"0123456789", known=False, final=True)
    assert log.should_send(0)  # a restart: the first request asks where to go on
    log.offset_conflict(0, 4)
    assert log.known and log.next_request() == (4, "456789")
    log.sent(0, 4, "456789", LogAnswer(10, False))
    assert log.flushed(0) and log.state is ShipState.SHIPPED

    cut = shipper(tmp_path, b"abc", "b", known=True)  # fmt: skip
    cut.sent(0, 0, "abc", LogAnswer(2, True))
    assert cut.state is ShipState.TRUNCATED and cut.flushed(0) and cut.due_ms() is None

    loop = shipper(tmp_path, b"abc", "c", known=True)  # fmt: skip
    for _ in range(5):
        loop.offset_conflict(0, 0)  # the server keeps naming where we already are
    assert loop.state is ShipState.STOPPED and loop.reason == "log_offset_loop"

    beyond = shipper(tmp_path, b"abc", "d", known=False, final=True)  # fmt: skip
    beyond.offset_conflict(0, 50)  # the server holds a log that is not this file's
    assert beyond.state is ShipState.STOPPED and beyond.reason == "log_offset_mismatch"


def test_transient_failures_back_off_and_the_flush_is_bounded(tmp_path: Path) -> None:
    log = shipper(tmp_path, b"abc", known=True)
    delays = [log.unavailable(0, LeaseUnavailable("network")) for _ in range(10)]
    assert all(0 <= d <= 5_000 for d in delays) and log.next_at_ms == delays[-1]
    log.finish(100, 2_000)
    assert not log.flushed(1_999)
    assert log.flushed(2_000) and log.reason == "flush_timeout"


# ------------------------------------------------------------------ the transport


@dataclass
class LogServer:
    """POST /v1/leases/log with the server's rule (SPEC §15.1, §15.2), as the
    injected transport of a real LogClient; `down` answers 503, `drop` loses the
    answer of an applied call (network error after the server committed)."""

    limit: int = 64 * 1024 * 1024
    logs: dict[str, bytearray] = field(default_factory=dict)
    truncated: set[str] = field(default_factory=set)
    requests: list[tuple[str, int, int]] = field(default_factory=list)  # offer, offset, bytes
    down: int = 0
    drop: int = 0
    versions: dict[str, int] = field(default_factory=dict)  # the fence, from FakeLeases

    def post(self, path: str, body: dict[str, Any], limit: int) -> Response:
        assert path == LOG_PATH and body["schema"] == "qinglong/lease-log-request@v1"
        offer, offset, chunk = body["offerId"], body["offset"], body["chunk"].encode()
        self.requests.append((offer, offset, len(chunk)))
        if self.down:
            self.down -= 1
            return respond(503, {"schema": "qinglong/error@v1", "error": "unavailable",
                                 "reason": "database_unavailable"})  # fmt: skip
        current = self.versions.get(offer)
        if current is not None and body["leaseVersion"] != current:
            return conflict("stale_lease_version")
        log = self.logs.setdefault(offer, bytearray())
        if offer in self.truncated:
            answer = respond(200, {"storedBytes": len(log), "truncated": True})
        elif offset == len(log):
            room = self.limit - len(log)
            log += chunk[:room]
            if len(chunk) > room:
                self.truncated.add(offer)
            answer = respond(200, {"storedBytes": len(log), "truncated": offer in self.truncated})
        elif offset + len(chunk) <= len(log) and log[offset : offset + len(chunk)] == chunk:
            answer = respond(200, {"storedBytes": len(log), "truncated": False})
        else:
            return conflict("log_offset", {"offset": len(log)})
        if self.drop:
            self.drop -= 1
            raise NetworkError("connection_reset")
        return answer


def respond(status: int, doc: dict[str, Any]) -> Response:
    return Response(status, json.dumps(doc).encode(), {"content-type": "application/json"}, None)


def conflict(reason: str, detail: dict[str, Any] | None = None) -> Response:
    doc: dict[str, Any] = {"schema": "qinglong/error@v1", "error": "conflict", "reason": reason}
    if detail is not None:
        doc["detail"] = detail
    return respond(409, doc)


def make(bench: Bench, server: LogServer, **kw: Any) -> Lifecycle:
    lifecycle = bench.make(**kw)
    lifecycle._logs = LogClient(server.post)  # what runner._executor passes in production
    original = bench.leases._call

    def fenced(kind: str, ref: LeaseRef, version: int, detail: dict[str, Any],
               change: Any) -> Any:  # fmt: skip
        try:
            return original(kind, ref, version, detail, change)
        finally:
            lease = bench.leases.leases.get(ref.offer_id)
            if lease is not None:
                server.versions[ref.offer_id] = lease.version

    bench.leases._call = fenced  # type: ignore[method-assign]
    return lifecycle


def output_of(bench: Bench, entry: InboxEntry) -> bytes:
    return (bench.root / "work" / entry.offer_id / "output.log").read_bytes()


def result_of(bench: Bench, entry: InboxEntry) -> dict[str, Any]:
    [result] = [r for o, r in bench.leases.results if o == entry.offer_id]
    assert result is not None
    return result


# Prints ~200 KiB over ~2.5 s in many writes: multibyte characters (one split
# across two writes), invalid bytes and a NUL, so chunks cut through all of it.
CHATTY = ("import sys,time\n"
          "w=sys.stdout.buffer\n"
          "for i in range(50):\n"
          "    w.write(('line %d ' % i).encode() + 'é漢'.encode() * 1300 + b'\\xe6\\xbc')\n"
          "    w.flush(); time.sleep(0.05)\n"
          "    w.write(b'\\xa2 \\xff\\x00\\n'); w.flush()\n")  # fmt: skip


def test_a_multi_chunk_output_is_stored_byte_for_byte(bench: Bench) -> None:
    server = LogServer()
    entry = entry_for(command("/usr/bin/python3", "-c", CHATTY))
    bench.admit(entry)
    make(bench, server, settings=FAST)
    bench.run(timeout=30)
    log = sanitized(output_of(bench, entry))
    assert len(log) > 3 * CHUNK_BYTES
    assert bytes(server.logs[entry.offer_id]) == log
    assert result_of(bench, entry)["logBytes"] == len(log)
    sizes = [n for _, _, n in server.requests]
    assert len(sizes) >= 4 and max(sizes) <= CHUNK_BYTES
    # Shipped while it ran (not all at the end), then completed.
    kinds = bench.leases.kinds()
    assert kinds[-1] == "complete"


def test_the_run_loop_ships_while_the_command_runs_not_at_the_heartbeat(bench: Bench) -> None:
    """Driven as the worker's run loop drives it (sleep until next_due_ms or a
    pidfd, no extra ticks): with a 60 s TTL (heartbeat every 20 s) output printed
    by a running command is stored within the send interval, before it exits."""
    exited_at_first_request: list[bool] = []
    server = LogServer()

    def post(path: str, body: dict[str, Any], limit: int) -> Response:
        exited_at_first_request.append("exec.exited" in bench.names())
        return server.post(path, body, limit)

    entry = entry_for(command("sh", "-c", "echo hello; sleep 6; echo bye"))
    bench.admit(entry)
    bench.leases.ttl_ms = 60_000
    lifecycle = make(bench, server)
    lifecycle._logs = LogClient(post)
    lifecycle.sync()
    deadline = time.monotonic() + 30
    while lifecycle.jobs:
        assert time.monotonic() < deadline, bench.names()
        lifecycle.tick()
        due = lifecycle.next_due_ms()
        wait = 5.0 if due is None else max(due - now_ms(), 0) / 1000
        select.select(lifecycle.wait_fds(), [], [], min(wait, 30.0))
    assert exited_at_first_request and exited_at_first_request[0] is False, bench.names()
    assert bytes(server.logs[entry.offer_id]) == b"hello\nbye\n"
    assert result_of(bench, entry)["logBytes"] == len(b"hello\nbye\n")


def test_a_draining_worker_ships_while_its_last_command_runs(tmp_path: Path) -> None:
    """`worker run --max-offers 1`: the run loop drains after the last offer and
    sleeps until the executor's next due time; a shipper due at once is not
    mistaken for "nothing due" (which slept to the 20 s session heartbeat)."""
    server = LogServer()
    out = io.StringIO()
    exited_at_first_request: list[bool] = []

    def post(path: str, body: dict[str, Any], limit: int) -> Response:
        exited_at_first_request.append("exec.exited" in out.getvalue())
        return server.post(path, body, limit)

    ingress = _ingress_offering(command("sh", "-c", "echo hello; sleep 6; echo bye"), 1)
    leases, stop = FakeLeases(), StopSignal()
    leases.ttl_ms = 60_000
    runner, journal = _runner(tmp_path, ingress, leases, stop, RunOptions(max_offers=1), out)
    runner._executor._logs = LogClient(post)  # type: ignore[union-attr]
    try:
        assert runner.run() == 0
    finally:
        journal.close()
        stop.close()
    assert exited_at_first_request and exited_at_first_request[0] is False, out.getvalue()
    assert [bytes(v) for v in server.logs.values()] == [b"hello\nbye\n"]


def test_lost_answers_and_an_outage_leave_no_gap_and_no_duplicate(bench: Bench) -> None:
    server = LogServer(down=3, drop=2)
    entry = entry_for(command("/usr/bin/python3", "-c", CHATTY))
    bench.admit(entry)
    # Five failures in a row back off up to 0.25+0.5+1+2+4 s (full jitter); the
    # flush after the exit must not outlive the lease (with a 3 s TTL it has
    # 1-2 s), so a short lease would make this a test of the jitter: given up,
    # exec.log_incomplete, a correct but short prefix stored.
    bench.leases.ttl_ms = 60_000
    make(bench, server, settings=FAST)
    bench.run(timeout=40)
    log = sanitized(output_of(bench, entry))
    assert "exec.log_incomplete" not in bench.names()
    assert bytes(server.logs[entry.offer_id]) == log
    assert result_of(bench, entry)["logBytes"] == len(log)
    assert bench.names().count("exec.log_retry") == 5  # the outage and both lost answers


def test_past_the_cap_shipping_stops_and_the_command_completes(bench: Bench) -> None:
    server = LogServer(limit=1024)
    entry = entry_for(command("/usr/bin/python3", "-c", CHATTY))
    bench.admit(entry)
    make(bench, server, settings=FAST)
    bench.run(timeout=30)
    log = sanitized(output_of(bench, entry))
    assert bytes(server.logs[entry.offer_id]) == log[:1024]
    assert bench.leases.detail("complete") == {"outcome": "succeeded", "exitCode": 0,
                                               "reason": None}  # fmt: skip
    assert result_of(bench, entry)["logBytes"] == len(log) > 1024
    # Once told `truncated`, nothing more was sent.
    after = [r for r in server.requests if r[1] >= 1024]
    assert len(after) <= 1
    assert "exec.log_truncated" in bench.names()


def test_a_dead_log_endpoint_delays_the_completion_only_boundedly(bench: Bench) -> None:
    server = LogServer(down=10**6)
    entry = entry_for(command("sh", "-c", "echo hello"))
    bench.admit(entry)
    bench.leases.ttl_ms = 60_000
    lifecycle = make(bench, server)
    started = time.monotonic()
    bench.run(timeout=30)
    assert time.monotonic() - started < 15
    assert result_of(bench, entry)["logBytes"] == 6
    assert entry.offer_id not in server.logs or not server.logs[entry.offer_id]
    assert "exec.log_incomplete" in bench.names()
    assert not lifecycle.jobs


@pytest.mark.parametrize("lines", [1000, 3001])
def test_a_restart_ships_the_rest_from_the_servers_offset(bench: Bench, lines: int) -> None:
    """The predecessor died after shipping part of the log: the restarted worker
    sends from offset 0 and is told the stored length (1000 lines: 409
    log_offset; 3001 lines, more than a chunk: its first chunk is an exact
    replay, answered 200 with the stored length), then sends only the rest
    before completing worker_restarted."""
    server = LogServer()
    entry = entry_for(command("sleep", "300"))
    bench.admit(entry)
    work = bench.root / "work" / entry.offer_id
    work.mkdir(parents=True, mode=0o700)
    raw = ("before the crash 漢\n" * 5000).encode() + b"\xe6"  # it died mid-character
    (work / "output.log").write_bytes(raw)
    log = sanitized(raw)
    shipped = len(("before the crash 漢\n" * lines).encode())
    server.logs[entry.offer_id] = bytearray(log[:shipped])
    lease = dict(entry.lease, leaseVersion=3, startedAtMs=entry.lease["claimedAtMs"])
    bench.journal.advance(
        InboxEntry(
            entry.offer,
            lease,
            entry.accepted_at_ms,
            EntryState.RUNNING.value,
            {"pid": 1, "startTicks": None},
        )
    )
    make(bench, server)
    bench.run(timeout=30)
    assert bytes(server.logs[entry.offer_id]) == log
    assert bench.leases.detail("complete")["reason"] == "worker_restarted"
    result = result_of(bench, entry)
    assert result["logBytes"] == len(log) and result["outputBytes"] == len(raw)
    assert result["outputTail"].endswith("before the crash 漢\n\ufffd")
    # One request to learn where to go on, then only what the server lacked.
    first, *rest = server.requests
    assert first[1] == 0 and rest[0][1] == shipped
    assert sum(n for _, _, n in rest) == len(log) - shipped
    assert bench.leases.kinds() == ["heartbeat", "complete"]


def test_log_calls_carry_the_journaled_lease_version(bench: Bench) -> None:
    """The version is a fence: a log call after a heartbeat answer was lost
    would be stale; the heartbeat is repeated first, then the log goes on."""
    server = LogServer()
    entry = entry_for(command("/usr/bin/python3", "-c", CHATTY))
    bench.admit(entry)
    bench.leases.ttl_ms = 3_000  # heartbeats every second
    bench.leases.lose["heartbeat"] = [LeaseUnavailable("network")]
    make(bench, server, settings=FAST)
    bench.run(timeout=30)
    assert bytes(server.logs[entry.offer_id]) == sanitized(output_of(bench, entry))
    assert bench.leases.detail("complete")["outcome"] == "succeeded"


def test_without_a_log_client_nothing_changes(bench: Bench) -> None:
    entry = entry_for(command("sh", "-c", "echo hi"))
    bench.admit(entry)
    bench.make()
    bench.run()
    assert "logBytes" not in result_of(bench, entry)
    assert os.path.exists(bench.root / "work" / entry.offer_id / "output.log")


@pytest.mark.parametrize("status", [400, 404, 413])
def test_a_refused_log_stops_shipping_but_not_the_command(bench: Bench, status: int) -> None:
    def refuse(path: str, body: dict[str, Any], limit: int) -> Response:
        return respond(status, {"schema": "qinglong/error@v1", "error": "bad_request",
                                "reason": "invalid_request"})  # fmt: skip

    entry = entry_for(command("sh", "-c", "echo hi; sleep 0.3; echo there"))
    bench.admit(entry)
    lifecycle = bench.make()
    lifecycle._logs = LogClient(refuse)
    bench.run()
    assert bench.leases.detail("complete")["outcome"] == "succeeded"
    assert result_of(bench, entry)["logBytes"] == len("hi\nthere\n")
    assert "exec.log_refused" in bench.names()


def test_a_restart_with_an_empty_log_sends_no_log_request(bench: Bench) -> None:
    """Spawned (output.log created) but nothing printed: the server cannot hold
    more than the file, so no request; the completion says logBytes 0."""
    server = LogServer()
    entry = entry_for(command("sleep", "300"))
    bench.admit(entry)
    work = bench.root / "work" / entry.offer_id
    work.mkdir(parents=True, mode=0o700)
    (work / "output.log").write_bytes(b"")
    lease = dict(entry.lease, leaseVersion=2, startedAtMs=entry.lease["claimedAtMs"])
    bench.journal.advance(InboxEntry(entry.offer, lease, entry.accepted_at_ms,
                                     EntryState.STARTING.value, None))  # fmt: skip
    make(bench, server)
    bench.run(timeout=30)
    assert server.requests == []
    assert bench.leases.detail("complete")["reason"] == "worker_restarted"
    assert result_of(bench, entry)["logBytes"] == 0
