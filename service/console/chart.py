"""The throughput chart: an inline SVG drawn on the server from `ql.throughput`.

Three polylines (dispatched, succeeded, failed per minute) over a fixed
15-minute axis. Each point carries a native SVG `<title>` (the browser shows it
on hover, no script needed); each series carries its values in `data-values`
so tests and the page script can read them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from qinglong.service.console.formatting import utc
from qinglong.service.console.markup import Markup, el

SERIES = ("dispatched", "succeeded", "failed")
WIDTH, HEIGHT = 640, 180
PAD_LEFT, PAD_RIGHT, PAD_TOP, PAD_BOTTOM = 44, 12, 12, 26


@dataclass(frozen=True)
class Minute:
    at_ms: int
    dispatched: int
    succeeded: int
    failed: int

    def value(self, series: str) -> int:
        return int(getattr(self, series))


def minutes_of(doc: Mapping[str, Any]) -> list[Minute]:
    return [
        Minute(int(m["minuteMs"]), int(m["dispatched"]), int(m["succeeded"]), int(m["failed"]))
        for m in doc.get("minutes", [])
    ]


def _x(index: int, count: int) -> float:
    span = WIDTH - PAD_LEFT - PAD_RIGHT
    return PAD_LEFT + (span * index / max(count - 1, 1))


def _y(value: int, top: int) -> float:
    span = HEIGHT - PAD_TOP - PAD_BOTTOM
    return HEIGHT - PAD_BOTTOM - span * value / top


def _nice_top(peak: int) -> int:
    """The y axis' top: the first of 1, 2, 5, 10, 20, 50, ... at least the peak."""
    top = 1
    while top < peak:
        top = top * 5 // 2 if str(top)[0] == "2" else top * 2
    return top


def _series(name: str, minutes: Sequence[Minute], top: int) -> Markup:
    points = " ".join(
        f"{_x(i, len(minutes)):.1f},{_y(m.value(name), top):.1f}" for i, m in enumerate(minutes)
    )
    dots = [
        el(
            "circle",
            el("title", f"{utc(m.at_ms)} {name} {m.value(name)}"),
            cx=f"{_x(i, len(minutes)):.1f}",
            cy=f"{_y(m.value(name), top):.1f}",
            r="2.5",
        )
        for i, m in enumerate(minutes)
    ]
    return el(
        "g",
        el("polyline", points=points),
        dots,
        class_=f"series {name}",
        data_series=name,
        data_values=",".join(str(m.value(name)) for m in minutes),
    )


def _axes(minutes: Sequence[Minute], top: int) -> list[Markup]:
    base = HEIGHT - PAD_BOTTOM
    parts = [
        el("line", x1=PAD_LEFT, y1=base, x2=WIDTH - PAD_RIGHT, y2=base, class_="axis"),
        el("line", x1=PAD_LEFT, y1=PAD_TOP, x2=PAD_LEFT, y2=base, class_="axis"),
        el("text", top, x=PAD_LEFT - 6, y=PAD_TOP + 4, class_="tick", text_anchor="end"),
        el("text", 0, x=PAD_LEFT - 6, y=base + 4, class_="tick", text_anchor="end"),
    ]
    if minutes:
        first, last = minutes[0], minutes[-1]
        parts.append(
            el(
                "text",
                utc(first.at_ms)[11:16],
                x=_x(0, len(minutes)),
                y=HEIGHT - 8,
                class_="tick",
                text_anchor="start",
            )
        )
        parts.append(
            el(
                "text",
                utc(last.at_ms)[11:16] + " UTC",
                x=_x(len(minutes) - 1, len(minutes)),
                y=HEIGHT - 8,
                class_="tick",
                text_anchor="end",
            )
        )
    return parts


def throughput_svg(doc: Mapping[str, Any]) -> Markup:
    """The chart of one `ql.throughput` answer."""
    minutes = minutes_of(doc)
    peak = max((m.value(s) for m in minutes for s in SERIES), default=0)
    top = _nice_top(peak)
    return el(
        "svg",
        el("title", "Runs per minute, last 15 minutes"),
        _axes(minutes, top),
        [_series(name, minutes, top) for name in SERIES],
        xmlns="http://www.w3.org/2000/svg",
        viewBox=f"0 0 {WIDTH} {HEIGHT}",
        class_="chart",
        role="img",
        id="throughput-chart",
    )


def legend() -> Markup:
    return el(
        "ul",
        [el("li", el("span", class_=f"swatch {name}"), name) for name in SERIES],
        class_="legend",
    )
