"""`/runs` (a keyset page of runs, filtered by state and task) and `/runs/<id>`
(one run: attempts with worker, timings, exit code and output tail; events).

Reads: `ql.list_runs` and `ql.show_run` (SPEC §9.4): a run is shown by its
project and task name and its pool (P/N, SPEC §13.1); the ids stay as the
secondary text or title. Query parameters are
checked here first (an unknown one, a state outside the list) so a bad URL gets
a 400 that says what is wrong; the database checks the rest (task and cursor
shape) and its message is shown as is.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from qinglong.db import api
from qinglong.db.answers import RunPage
from qinglong.service.console.formatting import between, short_id, utc
from qinglong.service.console.layout import badge, run_link, section, table
from qinglong.service.console.markup import Markup, el, join
from qinglong.service.console.reader import ConsoleError, Reader

if TYPE_CHECKING:
    from multidict import MultiMapping  # aiohttp's request.query

RUN_STATES = ("queued", "dispatching", "starting", "running", "succeeded", "failed", "cancelled")
PAGE_SIZE = 50
_RUN_PARAMS = frozenset({"state", "task", "after"})
# Event payload fields shown elsewhere on the event's row.
_EVENT_FIELDS_SHOWN = ("type", "atMs", "attemptId")

Doc = Mapping[str, Any]


@dataclass(frozen=True)
class RunFilter:
    states: tuple[str, ...] = ()
    task: str | None = None
    after: str | None = None

    def query(self, *, after: str | None) -> str:
        pairs: list[tuple[str, str]] = [("state", s) for s in self.states]
        if self.task:
            pairs.append(("task", self.task))
        if after:
            pairs.append(("after", after))
        return "/runs" + ("?" + urlencode(pairs) if pairs else "")


def parse_filter(query: MultiMapping[str]) -> RunFilter:
    """The filter of a `/runs` URL; ConsoleError 400 for what cannot be one."""
    unknown = sorted(set(query.keys()) - _RUN_PARAMS)
    if unknown:
        raise ConsoleError(
            400, f"unknown query parameter {unknown[0]!r} (expected state, task, after)"
        )
    states = tuple(dict.fromkeys(s for s in query.getall("state", []) if s))
    bad = [s for s in states if s not in RUN_STATES]
    if bad:
        raise ConsoleError(
            400, f"state {bad[0]!r} is not a run state (one of {', '.join(RUN_STATES)})"
        )
    for name in ("task", "after"):
        if len(query.getall(name, [])) > 1:
            raise ConsoleError(400, f"{name} may be given once")
    task = query.get("task") or None
    after = query.get("after") or None
    return RunFilter(states, task, after)


async def load_list(reader: Reader, run_filter: RunFilter) -> RunPage:
    return await reader.read(
        api.list_runs(
            task_id=run_filter.task,
            states=run_filter.states or None,
            limit=PAGE_SIZE,
            after=run_filter.after,
        )
    )


def _filter_form(run_filter: RunFilter) -> Markup:
    """A GET form: it only changes which runs are listed (nothing acts)."""
    options = [el("option", "any state", value="")] + [
        el("option", s, value=s, selected=s in run_filter.states) for s in RUN_STATES
    ]
    return el(
        "form",
        el("label", "state ", el("select", options, name="state")),
        el(
            "label",
            "task ",
            el("input", name="task", value=run_filter.task or "", placeholder="task id", size="38"),
        ),
        el("button", "filter", type="submit"),
        el("a", "clear", href="/runs"),
        method="get",
        action="/runs",
        class_="filters",
    )


def render_list(page: RunPage, run_filter: RunFilter) -> Markup:
    rows = [
        [
            run_link(r["runId"]),
            el(
                "a",
                f"{r['project']}/{r['taskName']}",
                title=f"task {r['taskId']}",
                class_="task-name",
                href=RunFilter(run_filter.states, r["taskId"]).query(after=None),
            ),
            el("span", r["pool"], class_="pool"),
            badge(r["state"]),
            r["priority"],
            utc(r["queuedAtMs"]),
            utc(r.get("notBeforeMs")),
            r.get("attempts") or 0,
            utc(r["updatedAtMs"]),
        ]
        for r in page.runs
    ]
    pager = [el("a", "newest", href=run_filter.query(after=None))]
    if page.next:
        pager.append(
            el("a", "older →", href=run_filter.query(after=page.next), rel="next", id="older")
        )
    return join(
        [
            _filter_form(run_filter),
            table(
                [
                    "run",
                    "project / task",
                    "pool",
                    "state",
                    "priority",
                    "queued",
                    "not before",
                    "attempt",
                    "updated",
                ],
                rows,
                empty="no run matches",
                id_="runs",
            ),
            el("p", pager, class_="pager"),
        ]
    )


async def load_run(reader: Reader, run_id: str) -> Doc:
    return (await reader.read(api.show_run(run_id=run_id))).doc


def _named(name: str, id_: str, class_: str) -> Markup:
    """A name first, its id as the secondary text (and the title)."""
    return el(
        "span",
        el("span", name, class_=class_),
        " ",
        el("span", id_, class_="secondary mono"),
        title=id_,
    )


def _summary(run: Doc) -> Markup:
    items = [
        ("run", run["runId"]),
        ("project", _named(run["project"], run["projectId"], "project-name")),
        ("task", _named(run["taskName"], run["taskId"], "task-name")),
        ("pool", el("span", run["pool"], class_="pool")),
        ("state", badge(run["state"])),
        ("priority", run["priority"]),
        ("queued", utc(run["queuedAtMs"])),
        ("not before", utc(run.get("notBeforeMs"))),
        ("updated", utc(run["updatedAtMs"])),
        ("finished", utc(run.get("finishedAtMs"))),
        ("cancel requested", "yes" if run.get("cancelRequested") else "no"),
        ("revision", run.get("executionRevisionId")),
        ("key", run.get("key") or "—"),
    ]
    return el("dl", [(el("dt", k), el("dd", v)) for k, v in items], class_="summary", id="run")


def _attempt(a: Doc) -> Markup:
    result = a.get("result") or {}
    exit_code = a.get("exitCode", result.get("exitCode"))
    rows = [
        [
            a["number"],
            badge(a["state"]),
            short_id(a.get("workerId")),
            short_id(a.get("sessionId")),
            utc(a.get("claimedAtMs")),
            utc(a.get("startedAtMs")),
            utc(a.get("finishedAtMs")),
            between(a.get("startedAtMs"), a.get("finishedAtMs")),
            el("span", "—" if exit_code is None else exit_code, class_="exit-code"),
            a.get("reason") or "—",
        ]
    ]
    tail = result.get("outputTail")
    return el(
        "div",
        table(
            [
                "#",
                "state",
                "worker",
                "session",
                "claimed",
                "started",
                "finished",
                "took",
                "exit code",
                "reason",
            ],
            rows,
            empty="",
        ),
        el("pre", tail, class_="tail") if tail else el("p", "no output", class_="muted"),
        class_="attempt",
        data_attempt=a["number"],
    )


def _event_detail(event: Doc) -> str:
    rest = {k: v for k, v in event.items() if k not in _EVENT_FIELDS_SHOWN}
    return json.dumps(rest, sort_keys=True, separators=(", ", ": ")) if rest else ""


def render_run(doc: Doc, log: Markup | None = None) -> Markup:
    """The run page; `log`: the live log's section (service/console/logs.py)."""
    events = [
        [
            utc(e["atMs"]),
            el("span", e["type"], class_="etype"),
            short_id(e.get("attemptId")),
            el("code", _event_detail(e)),
        ]
        for e in doc["events"]
    ]
    return join(
        [
            _summary(doc["run"]),
            section(
                "Attempts",
                [_attempt(a) for a in doc["attempts"]]
                or el("p", "not claimed yet", class_="muted"),
                id_="attempts",
            ),
            log,
            section(
                "Events",
                table(["at", "type", "attempt", "detail"], events, empty="no event", id_="events"),
                id_="events-section",
            ),
        ]
    )
