"""The throughput chart's drawing (service/console/chart.py) with known minutes:
the polyline points of each series and the y axis' top tick."""

from __future__ import annotations

import re

from qinglong.service.console import chart

T0 = 1_764_600_000_000  # 2025-12-01 14:40 UTC, a minute start


def _doc(values: list[tuple[int, int, int]]) -> dict[str, object]:
    return {
        "minutes": [
            {"minuteMs": T0 + i * 60_000, "dispatched": d, "succeeded": s, "failed": f}
            for i, (d, s, f) in enumerate(values)
        ]
    }


def _points(svg: str, series: str) -> list[tuple[float, float]]:
    group = re.search(rf'<g class="series {series}"[^>]*><polyline points="([^"]*)"', svg)
    assert group is not None, series
    return [(float(x), float(y)) for x, y in (p.split(",") for p in group.group(1).split())]


def _top_tick(svg: str) -> str:
    ticks = re.findall(r'<text x="(\d+)" y="(\d+)" class="tick"[^>]*>([^<]*)</text>', svg)
    return next(text for _, y, text in ticks if int(y) == chart.PAD_TOP + 4)


def test_points_and_top_tick_of_known_minutes() -> None:
    svg = chart.throughput_svg(_doc([(0, 0, 0), (7, 2, 1), (3, 3, 0)]))
    # Peak 7 -> the y axis goes to 10 (1, 2, 5, 10, ...). x: 44 .. 628 over 3 points;
    # y: 154 (zero) .. 12 (top), 142 px for 10 runs.
    assert _top_tick(svg) == "10"
    # (each y = 154 - value x 14.2, as drawn to one decimal)
    assert _points(svg, "dispatched") == [(44.0, 154.0), (336.0, 54.6), (628.0, 111.4)]
    assert _points(svg, "succeeded") == [(44.0, 154.0), (336.0, 125.6), (628.0, 111.4)]
    assert _points(svg, "failed") == [(44.0, 154.0), (336.0, 139.8), (628.0, 154.0)]
    assert 'data-values="0,7,3"' in svg
    assert "14:40" in svg and "14:42 UTC" in svg  # the first and last minute labels


def test_top_tick_steps_and_an_empty_window() -> None:
    assert [chart._nice_top(p) for p in (0, 1, 2, 3, 5, 6, 11, 20, 21, 50, 51, 99_999)] == [
        1,
        1,
        2,
        5,
        5,
        10,
        20,
        20,
        50,
        50,
        100,
        100_000,
    ]
    flat = chart.throughput_svg(_doc([(0, 0, 0)] * 15))
    assert _top_tick(flat) == "1"
    assert all(y == 154.0 for _, y in _points(flat, "dispatched"))
    assert len(_points(flat, "failed")) == 15


def _overview(throughput: dict[str, object], waiting: dict[str, object]) -> str:
    from qinglong.service.console import overview

    view = overview.Overview(
        states={}, depth={}, throughput=throughput, waiting=waiting, sessions={}, denials={}
    )
    return overview._throughput(view) + overview._waiting(view)


def test_estimates_and_caps_are_said_on_the_page() -> None:
    busy = {
        **_doc([(5000, 4000, 10)]),
        "capped": {"dispatched": True, "finished": False},
        "cap": 1000,
    }
    waiting = {
        "runs": [],
        "liveSessions": 300,
        "sessionsCapped": True,
        "scanned": 7,
        "prioritiesCapped": False,
        "capabilitiesCapped": True,
    }
    page = _overview(busy, waiting)
    assert "dispatched ≈ 5000 · succeeded ≈ 4000 · failed ≈ 10" in page
    assert 'id="throughput-estimated"' in page and "first 1000" in page
    assert "live sessions 300 (first 200 evaluated) · 7 queue entries read" in page
    assert "distinct capability sets evaluated" in page
    quiet = _overview(
        {**_doc([(3, 2, 1)]), "capped": {"dispatched": False, "finished": False}, "cap": 1000},
        {**waiting, "sessionsCapped": False, "capabilitiesCapped": False},
    )
    assert "≈" not in quiet and "throughput-estimated" not in quiet
    assert "capability sets" not in quiet and "first 200" not in quiet


def test_a_capped_task_scan_is_said_on_the_page() -> None:
    from qinglong.service.console import overview

    states = {
        "states": [{"state": s, "runs": 0, "capped": False} for s in ("queued", "dispatching")]
    }
    depth = {
        "byPriority": [],
        "byTask": [],
        "tasksWithRuns": 0,
        "cap": 1000,
        "tasksExamined": 1000,
        "tasksCapped": True,
        "scheduled": {"runs": 0, "capped": False, "nextDueAtMs": None, "byPriority": []},
    }
    view = overview.Overview(
        states=states, depth=depth, throughput={}, waiting={}, sessions={}, denials={}
    )
    assert "only the first 1000 tasks examined" in overview._queue(view)
    calm = overview.Overview(
        states=states,
        depth={**depth, "tasksCapped": False},
        throughput={},
        waiting={},
        sessions={},
        denials={},
    )
    assert "tasks examined" not in overview._queue(calm)
