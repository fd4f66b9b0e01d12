"""Streaming masking of delivered secret values in a run's output (SPEC §14.5).

The executor's output pump runs every byte the command prints through a
:class:`Masker` before anything is written to ``output.log`` (which the live log
streams from), kept in the output tail or counted: the worker never keeps an
unmasked copy of a run's output.

What is masked: every byte of every occurrence of every value (its UTF-8
bytes), occurrences overlapping or nested included, so one value inside another,
or two that overlap, leave no byte of either behind. Each maximal run of such
bytes becomes one :data:`MASK`. The result depends only on the whole stream,
never on how it was cut into chunks: a position's fate is decided once every
occurrence that could cover it is known — once no later start can still grow
into a value, i.e. the rest of the buffer from there is no proper prefix of
one (or the stream ended). So only a tail that could begin a value is held
back between chunks (at most ``max_len - 1`` bytes; a line ending in a newline
that no value starts with is released at once), and :meth:`Masker.flush`
releases it at the end.

A value that never appears whole is not masked: a command that prints only a
prefix of a value prints that prefix (masking is of delivered values, exactly).
"""

from __future__ import annotations

from collections.abc import Iterable

MASK = b"[MASKED]"

__all__ = ["MASK", "Masker", "mask_all"]


class Masker:
    """One stream's masking state: feed chunks in order, then flush once.

    Holds the values' bytes for the life of the run; its repr says how many,
    never what."""

    __slots__ = ("_buf", "_cover", "_finished", "_in_run", "_values")

    def __init__(self, values: Iterable[str | bytes]) -> None:
        encoded = {v.encode("utf-8") if isinstance(v, str) else bytes(v) for v in values}
        # Longest first: at equal starts the longest occurrence covers the most.
        self._values: tuple[bytes, ...] = tuple(
            sorted((v for v in encoded if v), key=len, reverse=True)
        )
        self._buf = bytearray()  # not yet emitted: exactly the starts not yet scanned
        self._cover = 0  # leading bytes of _buf covered by occurrences already found
        self._in_run = False  # the last emitted position was masked
        self._finished = False

    def __repr__(self) -> str:
        return f"Masker(values={len(self._values)}, held={len(self._buf)})"

    @property
    def active(self) -> bool:
        return bool(self._values)

    @property
    def held(self) -> int:
        """Bytes fed but not yet released (at most the longest value's length - 1)."""
        return len(self._buf)

    def feed(self, chunk: bytes) -> bytes:
        """The masked bytes that ``chunk`` makes final (possibly none)."""
        if self._finished:
            raise ValueError("masker already flushed")
        if not self._values:
            return bytes(chunk)
        self._buf += chunk
        ready = self._settled()
        return self._release(ready) if ready > 0 else b""

    def flush(self) -> bytes:
        """The end of the stream: release what was held back."""
        if self._finished:
            return b""
        self._finished = True
        if not self._values:
            return b""
        return self._release(len(self._buf))

    def _settled(self) -> int:
        """How many leading bytes of the buffer are final: up to the first start
        whose rest of the buffer is a proper prefix of some value (an occurrence
        may still complete there); all of it when there is none. So a line the
        command printed is held back only while its end could begin a value —
        never merely because more output has not come yet (a live log shows it)."""
        buf = self._buf
        size = len(buf)
        settled = size
        with memoryview(buf) as view:
            for value in self._values:
                first = value[:1]
                at = buf.find(first, max(0, size - len(value) + 1), settled)
                while at != -1:
                    if value.startswith(view[at:]):
                        settled = at
                        break
                    at = buf.find(first, at + 1, settled)
        return settled

    def _release(self, count: int) -> bytes:
        """Scan the starts ``[0, count)`` of the buffer for occurrences, emit those
        positions masked, and keep the rest (and how far it is covered)."""
        buf = self._buf
        found: list[tuple[int, int]] = []
        for value in self._values:
            size = len(value)
            end = count - 1 + size  # an occurrence starting before `count` fits here
            at = buf.find(value, 0, end)
            while at != -1:
                found.append((at, at + size))
                at = buf.find(value, at + 1, end)
        found.sort()
        out = bytearray()
        pos, cover = 0, self._cover
        for start, stop in found:
            pos = self._emit(out, pos, start, cover)
            cover = max(cover, stop)
        self._emit(out, pos, count, cover)
        del buf[:count]
        self._cover = max(cover - count, 0)
        return bytes(out)

    def _emit(self, out: bytearray, pos: int, limit: int, cover: int) -> int:
        """Emit positions ``[pos, limit)``: those below ``cover`` masked, the rest as is."""
        if pos < limit and pos < cover:
            if not self._in_run:
                out += MASK
                self._in_run = True
            pos = min(cover, limit)
        if pos < limit:
            out += self._buf[pos:limit]
            self._in_run = False
            pos = limit
        return pos


def mask_all(data: bytes, values: Iterable[str | bytes]) -> bytes:
    """``data`` masked as one whole stream."""
    masker = Masker(values)
    return masker.feed(data) + masker.flush()
