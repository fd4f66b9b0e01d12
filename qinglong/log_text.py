"""One page of an attempt's live log (SPEC §15.3), as every reader shows it.

`ql.run_log` (and `ql.producer_run_log`, `GET /v1/runs/{id}/log`) answer
`{runId, attemptNumber, offset, text, storedBytes, logBytes, truncated,
complete, ended}`: `text` is the stored log from byte `offset` on (at most one
page), `storedBytes` what is stored in all, `logBytes` what the executor
reported with the completion (null until then), `ended` whether the attempt is
over. `admin run log`, `qinglong run log`, the client and the console all mark
a log that is not whole with the same last line (`trailer`), so a reader never
takes a truncated or incomplete log for a complete one.

No dependencies beyond the standard library: the console and the client import
it too.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

# The database's page size (ql.run_log's p_max_bytes default).
PAGE_BYTES = 1048576
# How often a follower asks for new text: a running job's lines appear within
# this plus one round trip.
FOLLOW_POLL_S = 0.5


class LogShapeError(ValueError):
    """A log document without one of its fields, or with a mistyped one."""


def trailer(stored_bytes: int, log_bytes: int | None, truncated: bool) -> str | None:
    """The last line that marks a log that is not the whole output (None: it is)."""
    if truncated:
        return f"[qinglong: log truncated at {stored_bytes} bytes]"
    if log_bytes is not None and stored_bytes < log_bytes:
        return f"[qinglong: log incomplete: {stored_bytes} of {log_bytes} bytes stored]"
    return None


def _field(doc: Mapping[str, Any], name: str, kind: type, optional: bool = False) -> Any:
    value = doc.get(name)
    if value is None and optional:
        return None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise LogShapeError(f"{name} is missing or mistyped")
    return value


@dataclass(frozen=True)
class LogPage:
    run_id: str
    attempt_number: int
    offset: int
    text: str
    stored_bytes: int
    log_bytes: int | None
    truncated: bool
    complete: bool
    ended: bool

    @classmethod
    def from_json(cls, doc: Any) -> LogPage:
        if not isinstance(doc, Mapping):
            raise LogShapeError("the log document is not a JSON object")
        return cls(
            run_id=_field(doc, "runId", str),
            attempt_number=_field(doc, "attemptNumber", int),
            offset=_field(doc, "offset", int),
            text=_field(doc, "text", str),
            stored_bytes=_field(doc, "storedBytes", int),
            log_bytes=_field(doc, "logBytes", int, optional=True),
            truncated=_field(doc, "truncated", bool),
            complete=_field(doc, "complete", bool),
            ended=_field(doc, "ended", bool),
        )

    @property
    def next_offset(self) -> int:
        """Where the next page starts: this page's offset plus its text's UTF-8 bytes."""
        return self.offset + len(self.text.encode("utf-8"))

    @property
    def caught_up(self) -> bool:
        """Nothing stored beyond this page (yet)."""
        return self.next_offset >= self.stored_bytes

    @property
    def finished(self) -> bool:
        """The attempt is over and everything stored has been read: nothing more comes."""
        return self.ended and self.caught_up

    def trailer(self) -> str | None:
        return trailer(self.stored_bytes, self.log_bytes, self.truncated)

    def as_json(self) -> dict[str, Any]:
        """The wire document (camelCase), with nextOffset."""
        return {
            "runId": self.run_id,
            "attemptNumber": self.attempt_number,
            "offset": self.offset,
            "nextOffset": self.next_offset,
            "text": self.text,
            "storedBytes": self.stored_bytes,
            "logBytes": self.log_bytes,
            "truncated": self.truncated,
            "complete": self.complete,
            "ended": self.ended,
        }


def whole(pages: list[LogPage]) -> dict[str, Any]:
    """`--json` of `admin run log` / `run log`: the pages read from offset 0 on, joined:
    {runId, attemptNumber, text, storedBytes, logBytes, truncated, complete}."""
    last = pages[-1]
    return {
        "runId": last.run_id,
        "attemptNumber": last.attempt_number,
        "text": "".join(p.text for p in pages),
        "storedBytes": last.stored_bytes,
        "logBytes": last.log_bytes,
        "truncated": last.truncated,
        "complete": last.complete,
    }


def trailer_block(last_char: str, line: str) -> str:
    """The trailer as its own last line: a newline first when the text written so far
    (`last_char`: its last character, "" for none) did not end one."""
    return ("\n" if last_char not in ("", "\n") else "") + line + "\n"


def read_pages(
    fetch: Callable[[int | None, int], LogPage],
    attempt: int | None,
    *,
    follow: bool,
    poll_s: float = FOLLOW_POLL_S,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[LogPage]:
    """Every page of one attempt's log from offset 0: `fetch(attempt, offset)` reads
    one. Without `follow` it stops once it caught up with what is stored; with it,
    it asks again every `poll_s` until the attempt ended and all was read. The
    attempt is fixed by the first page (None: the run's latest at that moment)."""
    offset = 0
    while True:
        page = fetch(attempt, offset)
        if page.offset != offset or (not page.text and not page.caught_up):
            raise LogShapeError(f"the page at offset {offset} does not advance the log")
        attempt, offset = page.attempt_number, page.next_offset
        yield page
        if page.caught_up:
            if not follow or page.ended:
                return
            sleep(poll_s)
