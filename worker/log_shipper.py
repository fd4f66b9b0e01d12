"""Live log shipping: a running command's output.log to the ingress (SPEC §15.1, §15.2).

The log of a run is the text of ``WORK/<offerId>/output.log`` (what the output
pump wrote there: the combined output, masked) read as UTF-8 with invalid bytes
and NUL replaced by U+FFFD (:class:`LogReader`). Every offset here — the
request's ``offset``, the answer's ``storedBytes``, the completion's
``logBytes`` — counts bytes of that text, so a file that is valid UTF-8
without NUL ships byte for byte.

Per job one :class:`LogShipper` decides what to send and when; the lifecycle
makes the call (at most one lease call per offer per tick: a due lease call
goes first, a log call only in a tick without one, and never while a lease
call's answer is outstanding, because the lease version it carries is a fence):

* **Cadence.** While the command runs: one chunk (whole characters, at most
  :data:`CHUNK_BYTES` bytes and as much JSON-escaped) every
  :data:`SEND_INTERVAL_MS` while output flows; a backlog of a full chunk or
  more goes at once, chunk after chunk. After the exit, the rest is sent before
  the completion (:meth:`LogShipper.flushed`), for at most
  :data:`FLUSH_LIMIT_MS`: a dead log endpoint never blocks a completion for
  long; ``logBytes`` then tells how much the log had.
* **Offsets.** A 200 answers the server's length (``storedBytes``): an append,
  or an exact replay of stored bytes; the shipper continues from there. 409
  ``log_offset`` names the server's length: the shipper resumes from it (seeks
  the file), which is also how a restarted worker learns where its predecessor
  stopped — its first chunk goes at offset 0 and the server answers where to
  continue, so the stored log has no gap and no duplicate.
* **Truncation.** ``truncated: true``: the server keeps no more; nothing more
  is sent, the command runs on.
* **Failures.** Transient (network, 5xx, 429, 401/403): retried with capped
  backoff; the log simply lags. A request the server refuses as malformed
  (400/413) or an ingress without the endpoint (404): shipping stops for this
  run (the stored log then shows as incomplete). Any other 409 is the lease's
  category: the lease is lost (:class:`LeaseConflict`, the lifecycle stops the
  offer as for any lease call).
"""

from __future__ import annotations

import codecs
import json
import os
import random
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TypeGuard

from qinglong.worker.backoff import DEFAULT_POLICY, BackoffPolicy
from qinglong.worker.errors import (
    CredentialError,
    RequestTooLarge,
    TlsClientRejected,
    TransportError,
)
from qinglong.worker.lease_client import LeaseConflict, LeaseRef, LeaseUnavailable
from qinglong.worker.session import PostFn, error_reason

LOG_PATH = "/v1/leases/log"
LOG_OFFSET = "log_offset"
CHUNK_BYTES = 64 * 1024  # SPEC §15.1: a chunk is a string of at most 64 KiB
# The chunk JSON-escaped is held to the same size, so a request stays within
# the transport's LOG_REQUEST_LIMIT whatever the text (control characters
# escape to 6 bytes each).
CHUNK_JSON_BUDGET = CHUNK_BYTES
LOG_RESPONSE_LIMIT = 4 * 1024
SEND_INTERVAL_MS = 2_000
FLUSH_LIMIT_MS = 10_000
RETRY_CAP_MS = 5_000
# 409 log_offset answers in a row that moved nothing: the two sides disagree.
MAX_OFFSET_CONFLICTS = 4
_READ_BYTES = 64 * 1024
_REPLACEMENT = "\ufffd"

__all__ = [
    "CHUNK_BYTES",
    "LOG_PATH",
    "LogAnswer",
    "LogClient",
    "LogOffset",
    "LogReader",
    "LogRefused",
    "LogShipper",
    "ShipState",
    "log_size",
]


# ------------------------------------------------------------------ the wire


@dataclass(frozen=True)
class LogAnswer:
    stored_bytes: int
    truncated: bool


class LogOffset(Exception):
    """409 ``log_offset``: the server holds ``offset`` bytes; continue from there."""

    def __init__(self, offset: int) -> None:
        super().__init__(LOG_OFFSET)
        self.offset = offset


class LogRefused(Exception):
    """The server refuses this log for good (malformed request, no endpoint)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class LogClient:
    """``POST /v1/leases/log`` over the worker's one transport (SPEC §15.1)."""

    def __init__(self, post: PostFn) -> None:
        self._post = post

    def send(self, ref: LeaseRef, version: int, offset: int, chunk: str) -> LogAnswer:
        body = dict(ref.body("log", version), offset=offset, chunk=chunk)
        try:
            response = self._post(LOG_PATH, body, LOG_RESPONSE_LIMIT)
        except (TlsClientRejected, CredentialError) as exc:
            raise LeaseUnavailable(type(exc).__name__.lower(), auth=True) from None
        except RequestTooLarge:
            raise LogRefused("request_too_large") from None
        except TransportError as exc:
            raise LeaseUnavailable(getattr(exc, "reason", type(exc).__name__.lower())) from None
        if response.status == 200:
            return _parse_answer(response.body)
        reason = error_reason(response.body)
        if response.status == 409:
            if reason == LOG_OFFSET:
                raise LogOffset(_conflict_offset(response.body))
            raise LeaseConflict(reason)
        if response.status in (400, 404, 413):
            raise LogRefused(f"http_{response.status}_{reason}")
        if response.status in (401, 403):
            raise LeaseUnavailable(f"http_{response.status}_{reason}", auth=True)
        raise LeaseUnavailable(f"http_{response.status}", response.retry_after_ms)


def _parse_answer(body: bytes) -> LogAnswer:
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise LeaseUnavailable("log_answer_invalid") from None
    stored = doc.get("storedBytes") if isinstance(doc, dict) else None
    truncated = doc.get("truncated") if isinstance(doc, dict) else None
    if not _is_count(stored) or not isinstance(truncated, bool):
        raise LeaseUnavailable("log_answer_invalid")
    return LogAnswer(stored, truncated)


def _conflict_offset(body: bytes) -> int:
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        doc = None
    detail = doc.get("detail") if isinstance(doc, dict) else None
    offset = detail.get("offset") if isinstance(detail, dict) else None
    if not _is_count(offset):
        raise LeaseUnavailable("log_offset_invalid")
    return offset


def _is_count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


# ------------------------------------------------------------------ the file


def _sanitize(text: str) -> bytes:
    return text.replace("\x00", _REPLACEMENT).encode("utf-8")


class LogReader:
    """The log's text from ``output.log``, read incrementally as sanitized UTF-8.

    ``offset`` is where the unsent text (``pending``) starts, in bytes of the
    log. Until :meth:`finish`, an incomplete character at the end of the file
    is held back (the pump may be writing it); after it, it is replaced."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._final = False
        self._start()

    def _start(self) -> None:
        self.offset = 0
        self._pending = bytearray()
        self._raw_pos = 0
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._flushed = False  # the decoder's final flush was taken

    @property
    def pending(self) -> int:
        return len(self._pending)

    def finish(self) -> None:
        """The file is complete (the command and the pump are done)."""
        self._final = True

    def fill(self, want: int = CHUNK_BYTES) -> None:
        """Read until ``want`` bytes are pending or the file has no more."""
        while len(self._pending) < want:
            data = self._read(_READ_BYTES)
            if data:
                self._raw_pos += len(data)
                self._pending += _sanitize(self._decoder.decode(data, False))
                continue
            if self._final and not self._flushed:
                self._flushed = True
                self._pending += _sanitize(self._decoder.decode(b"", True))
            return

    def _read(self, size: int) -> bytes:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except FileNotFoundError:
            return b""
        try:
            return os.pread(fd, size, self._raw_pos)
        finally:
            os.close(fd)

    def at_end(self) -> bool:
        """Nothing pending and nothing more will come (after :meth:`finish`)."""
        self.fill(1)
        return self._final and self._flushed and not self._pending

    def chunk(self) -> str:
        """The next chunk from ``offset``: whole characters, within both budgets."""
        self.fill(CHUNK_BYTES + 4)
        size = min(len(self._pending), CHUNK_BYTES)
        while True:
            size = _char_boundary(self._pending, size)
            text = self._pending[:size].decode("utf-8")
            escaped = len(json.dumps(text, ensure_ascii=False).encode("utf-8")) - 2
            if escaped <= CHUNK_JSON_BUDGET:
                return text
            size = size * CHUNK_JSON_BUDGET // escaped  # mostly control characters

    def seek(self, offset: int) -> bool:
        """Move to ``offset`` (bytes of the log); False if it is not a character
        boundary of this log or lies beyond its end (after :meth:`finish`)."""
        if offset < self.offset:
            self._start()  # behind us: read the file again from its start
        while self.offset < offset:
            self.fill(min(offset - self.offset, CHUNK_BYTES))
            if not self._pending:
                return False  # not there yet (or never: the caller decides)
            step = min(offset - self.offset, len(self._pending))
            if _char_boundary(self._pending, step) != step:
                if step == offset - self.offset:
                    return False  # inside a character: not an offset we ever sent
                step = _char_boundary(self._pending, step)
            del self._pending[:step]
            self.offset += step
        return True

    @property
    def size(self) -> int:
        """Bytes of the log read so far (sent or pending)."""
        return self.offset + len(self._pending)

    def skip_rest(self) -> int:
        """Read to the end without keeping anything; the log's size (after finish())."""
        while True:
            self.fill(CHUNK_BYTES)
            if not self._pending:
                return self.offset
            self.offset += len(self._pending)
            self._pending.clear()


def _char_boundary(data: bytes | bytearray, size: int) -> int:
    """The largest boundary <= ``size`` that does not split a UTF-8 character."""
    while 0 < size < len(data) and data[size] & 0xC0 == 0x80:
        size -= 1
    return size


def log_size(path: str) -> int:
    """Bytes of the whole log of a finished ``output.log`` (its ``logBytes``)."""
    reader = LogReader(path)
    reader.finish()
    return reader.skip_rest()


# ------------------------------------------------------------------ decisions


class ShipState(StrEnum):
    SHIPPING = "shipping"
    TRUNCATED = "truncated"  # the server keeps no more (SPEC §15.2)
    SHIPPED = "shipped"  # everything up to the end of a finished log is stored
    STOPPED = "stopped"  # given up (refused, offsets disagree, flush overran)


@dataclass
class LogShipper:
    """One job's log: what to send next and when (the lifecycle makes the call).

    ``known``: whether the server's length is known to equal ``reader.offset``
    (a fresh lease's log is empty; after a restart it is learnt from the server)."""

    reader: LogReader
    known: bool = True
    state: ShipState = ShipState.SHIPPING
    next_at_ms: int = 0
    last_sent_ms: int | None = None
    failures: int = 0
    conflicts: int = 0
    flush_until_ms: int | None = None
    reason: str | None = None
    policy: BackoffPolicy = field(default=DEFAULT_POLICY, repr=False)
    rng: random.Random = field(default_factory=random.SystemRandom, repr=False)

    @classmethod
    def for_file(
        cls, path: str, *, known: bool, final: bool = False, rng: random.Random | None = None
    ) -> LogShipper:
        reader = LogReader(path)
        if final:
            reader.finish()
        return cls(reader, known=known, rng=rng or random.SystemRandom())

    @property
    def active(self) -> bool:
        return self.state is ShipState.SHIPPING

    def finish(self, now_ms: int, until_ms: int | None = None) -> None:
        """The command ended: ship the rest now, until ``until_ms`` at the
        latest (default: FLUSH_LIMIT_MS from now)."""
        self.reader.finish()
        self.flush_until_ms = now_ms + FLUSH_LIMIT_MS if until_ms is None else until_ms
        if self.failures == 0:
            self.next_at_ms = now_ms

    def flushed(self, now_ms: int) -> bool:
        """Whether the completion may go: shipped, truncated, given up, or out of time."""
        if not self.active:
            return True
        if self.reader.at_end() and (self.known or self.reader.offset == 0 == self.reader.size):
            # (An empty finished log needs no request: the server cannot hold more.)
            self.state = ShipState.SHIPPED
            return True
        if self.flush_until_ms is not None and now_ms >= self.flush_until_ms:
            self._stop("flush_timeout")
            return True
        return False

    def due_ms(self) -> int | None:
        """When :meth:`should_send` may next say yes (None: never again)."""
        return self.next_at_ms if self.active else None

    def should_send(self, now_ms: int) -> bool:
        """Whether a chunk is due now (reads the file: there may be new output)."""
        if not self.active or now_ms < self.next_at_ms:
            return False
        if self.flush_until_ms is not None or not self.known:
            return not self.flushed(now_ms)
        self.reader.fill(CHUNK_BYTES)
        pending = self.reader.pending
        if pending >= CHUNK_BYTES:
            return True  # a backlog: no waiting
        if pending:
            ready_at = now_ms if self.last_sent_ms is None else self.last_sent_ms + SEND_INTERVAL_MS
            if now_ms >= ready_at:
                return True
            self.next_at_ms = ready_at
            return False
        self.next_at_ms = now_ms + SEND_INTERVAL_MS  # no output: look again then
        return False

    def next_request(self) -> tuple[int, str]:
        """(offset, chunk) to send now."""
        return self.reader.offset, self.reader.chunk()

    # -- answers -----------------------------------------------------------

    def sent(self, now_ms: int, offset: int, chunk: str, answer: LogAnswer) -> None:
        self.failures = 0
        self.last_sent_ms = now_ms
        progressed = answer.stored_bytes > offset or (not chunk and answer.stored_bytes == offset)
        if answer.truncated:
            self.state = ShipState.TRUNCATED
            self.reason = "truncated"
            return
        self._move_to(answer.stored_bytes, now_ms)
        self.conflicts = 0 if progressed else self.conflicts

    def offset_conflict(self, now_ms: int, server_offset: int) -> None:
        self.conflicts += 1
        if self.conflicts > MAX_OFFSET_CONFLICTS:
            self._stop("log_offset_loop")
            return
        self._move_to(server_offset, now_ms)

    def unavailable(self, now_ms: int, exc: LeaseUnavailable) -> int:
        """A transient failure: back off (the returned delay)."""
        self.failures += 1
        delay = min(self.policy.delay_ms(min(self.failures - 1, 8), self.rng), RETRY_CAP_MS)
        delay = max(delay, min(exc.retry_after_ms or 0, RETRY_CAP_MS))
        self.next_at_ms = now_ms + delay
        return delay

    def refused(self, reason: str) -> None:
        self._stop(reason)

    def _move_to(self, offset: int, now_ms: int) -> None:
        if not self.reader.seek(offset):
            self._stop("log_offset_mismatch")  # the server's log is not this file's
            return
        self.known = True
        # Due again at once; should_send holds back a small remainder until the
        # interval is over (unless the command has ended).
        self.next_at_ms = now_ms

    def _stop(self, reason: str) -> None:
        self.state = ShipState.STOPPED
        self.reason = reason
