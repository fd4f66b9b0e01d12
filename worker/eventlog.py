"""Structured JSON log lines for the worker (one object per line, on stderr).

Every line is ``{"ts": <ms>, "level": ..., "event": ..., ...fields}``. Fields are
chosen by the caller from ids, counts and low-cardinality reasons; as a second
line of defence, any field whose name looks like it could hold a secret is
dropped, so a token or credential can never reach the log by accident.
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from enum import IntEnum
from typing import Any, TextIO

# Field names that must never be logged, whatever their value.
_SECRET_FIELD = re.compile(r"token|secret|credential|authorization|password|key", re.IGNORECASE)

__all__ = ["EventLog", "Level"]


class Level(IntEnum):
    DEBUG = 10
    INFO = 20
    WARNING = 30
    ERROR = 40


class EventLog:
    """Writes JSON lines to a stream; thread-safe (the lock refresher may log)."""

    def __init__(self, stream: TextIO | None = None, *, min_level: Level = Level.INFO) -> None:
        self._stream = stream if stream is not None else sys.stderr
        self._min_level = min_level
        self._mutex = threading.Lock()

    def emit(self, level: Level, event: str, **fields: Any) -> None:
        if level < self._min_level:
            return
        doc: dict[str, Any] = {
            "ts": time.time_ns() // 1_000_000,
            "level": level.name.lower(),
            "event": event,
        }
        for name, value in fields.items():
            if value is not None and not _SECRET_FIELD.search(name):
                doc[name] = value
        line = json.dumps(doc, separators=(",", ":"), ensure_ascii=True, default=str)
        with self._mutex:
            try:
                self._stream.write(line + "\n")
                self._stream.flush()
            except (OSError, ValueError):
                pass  # a closed stderr must not take the worker down

    def info(self, event: str, **fields: Any) -> None:
        self.emit(Level.INFO, event, **fields)

    def warning(self, event: str, **fields: Any) -> None:
        self.emit(Level.WARNING, event, **fields)

    def error(self, event: str, **fields: Any) -> None:
        self.emit(Level.ERROR, event, **fields)
