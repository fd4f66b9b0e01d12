"""Values as an operator reads them: times in UTC, ages, durations, short ids."""

from __future__ import annotations

from datetime import UTC, datetime


def utc(ms: int | None) -> str:
    """Epoch milliseconds -> `2026-01-31 12:34:56Z`; an absent time -> `—`."""
    if ms is None:
        return "—"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def duration(ms: int | float | None) -> str:
    """Milliseconds -> `850 ms`, `12.3 s`, `4 min 05 s`, `2 h 03 min`."""
    if ms is None:
        return "—"
    ms = max(float(ms), 0.0)
    if ms < 1000:
        return f"{ms:.0f} ms"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, sec = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {sec:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def age(now_ms: int, then_ms: int | None) -> str:
    """How long ago `then_ms` was, from `now_ms`."""
    if then_ms is None:
        return "—"
    return f"{duration(now_ms - then_ms)} ago"


def between(start_ms: int | None, end_ms: int | None) -> str:
    if start_ms is None or end_ms is None:
        return "—"
    return duration(end_ms - start_ms)


def short_id(value: str | None) -> str:
    """The first 8 characters of a UUID (the full id goes in a title/link)."""
    return "—" if value is None else value[:8]
