"""The overview page `/` (SPEC §10): runs by state, queue depth (ready runs
apart from scheduled ones, by priority and by task with its pool), throughput,
the waiting panel, sessions, what expires soon and recent authentication denials.

Seven bounded reads, run concurrently: `ql.run_state_counts`, `ql.queue_depth`,
`ql.throughput`, `ql.waiting_runs`, `ql.live_sessions`, `ql.recent_denials`,
`ql.expiring_identities` (credentials and certificates expiring within 14 days).
(Not `ql.status_snapshot`: its counts go to 100,000 and cost hundreds of
milliseconds on a deep queue; the page's counts stop at 1,000.)
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from qinglong.db import api
from qinglong.service.console.chart import SERIES, legend, minutes_of, throughput_svg
from qinglong.service.console.formatting import age, duration, short_id, utc
from qinglong.service.console.layout import badge, pairs, run_link, section, table
from qinglong.service.console.markup import Markup, el, join
from qinglong.service.console.reader import Reader

Doc = Mapping[str, Any]


SESSION_LIMIT = 50
EXPIRING_LIMIT = 20


@dataclass(frozen=True)
class Overview:
    states: Doc
    depth: Doc
    throughput: Doc
    waiting: Doc
    sessions: Doc
    denials: Doc
    expiring: Doc = field(default_factory=dict)
    now_ms: int = field(default_factory=lambda: int(time.time() * 1000))


async def load(reader: Reader) -> Overview:
    read = await reader.read_all(
        [
            api.run_state_counts(),
            api.queue_depth(),
            api.throughput(minutes=15),
            api.waiting_runs(limit=20),
            api.live_sessions(limit=SESSION_LIMIT),
            api.recent_denials(limit=20),
            api.expiring_identities(limit=EXPIRING_LIMIT),
        ]
    )
    # The page renders the documents as the database built them.
    return Overview(*(answer.doc for answer in read))


def _count(entry: Doc) -> str:
    if entry.get("capped"):
        estimate = entry.get("estimate")
        return f"≥ {entry['runs']}" + (f" (≈ {estimate})" if estimate else "")
    return str(entry["runs"])


def _states(view: Overview) -> Markup:
    rows = [
        [
            el("a", s["state"], href="/runs?" + urlencode({"state": s["state"]})),
            el("span", _count(s), data_state=s["state"], class_="count"),
        ]
        for s in view.states["states"]
    ]
    return section(
        "Runs by state",
        table(["state", "runs"], rows, empty="no runs", id_="runs-by-state"),
        id_="states",
    )


def _scheduled(view: Overview) -> tuple[str, Markup]:
    """Runs scheduled for later (SPEC §9.2), apart from the ready ones: the
    summary's words and the by-priority table (counted among the soonest due)."""
    scheduled = view.depth["scheduled"]
    next_due = scheduled.get("nextDueAtMs")
    words = f"scheduled {_count(scheduled)}" + (
        f" (next due in {duration(next_due - view.now_ms)})" if next_due is not None else ""
    )
    rows = [
        [
            p["priority"],
            el(
                "span",
                _count({"runs": p["runs"], "capped": scheduled["capped"]}),
                class_="badge scheduled",
            ),
        ]
        for p in scheduled["byPriority"]
    ]
    return words, table(
        ["priority", "scheduled runs"], rows, empty="no scheduled run", id_="scheduled-by-priority"
    )


def _task_depth(task: Doc, cap: int) -> list[Markup | str]:
    dispatching = {
        "runs": task["dispatching"],
        "capped": task["dispatching"] >= cap and task["capped"],
    }
    return [
        el(
            "a",
            f"{task['project']}/{task['task']}",
            title=f"task {task['taskId']}",
            href="/runs?" + urlencode({"task": task["taskId"], "state": "queued"}),
        ),
        el("span", task["pool"], class_="pool"),
        _count({"runs": task["ready"], "capped": task["readyCapped"]}),
        _count({"runs": task["scheduled"], "capped": task["scheduledCapped"]}),
        _count(dispatching),
    ]


def _queue(view: Overview) -> Markup:
    depth, counts = view.depth, {e["state"]: e for e in view.states["states"]}
    oldest = max((p["oldestWaitingAgeMs"] for p in depth["byPriority"]), default=None)
    scheduled_words, scheduled = _scheduled(view)
    summary = el(
        "p",
        f"queued {_count(counts['queued'])} · dispatching "
        f"{_count(counts['dispatching'])} · oldest ready run waiting "
        f"{duration(oldest)} · {scheduled_words}",
        id="queue-summary",
    )
    priorities = table(
        ["priority", "ready runs", "oldest waiting"],
        [
            [p["priority"], _count(p), duration(p["oldestWaitingAgeMs"])]
            for p in depth["byPriority"]
        ],
        empty="no ready run",
        id_="by-priority",
    )
    tasks = table(
        ["project / task", "pool", "ready", "scheduled", "dispatching"],
        [_task_depth(t, depth["cap"]) for t in depth["byTask"]],
        empty="no task has runs waiting",
        id_="by-task",
    )
    more = depth["tasksWithRuns"] - len(depth["byTask"])
    note = el("p", f"and {more} more tasks", class_="muted") if more > 0 else None
    examined = (
        el(
            "p",
            f"only the first {depth['tasksExamined']} tasks examined",
            class_="warn",
            id="tasks-capped",
        )
        if depth.get("tasksCapped")
        else None
    )
    return section(
        "Queue",
        summary,
        el(
            "div", el("div", priorities, scheduled), el("div", tasks, note, examined), class_="cols"
        ),
        id_="queue",
    )


def _throughput(view: Overview) -> Markup:
    minutes = minutes_of(view.throughput)
    capped = view.throughput.get("capped", {})
    about = "≈ " if any(capped.values()) else ""
    totals = " · ".join(f"{name} {about}{sum(m.value(name) for m in minutes)}" for name in SERIES)
    note = (
        el(
            "p",
            f"≈ estimated: a minute with more than {view.throughput['cap']} rows in a "
            "series is extrapolated from the rate of its first "
            f"{view.throughput['cap']}",
            class_="warn",
            id="throughput-estimated",
        )
        if any(capped.values())
        else None
    )
    return section(
        "Throughput, last 15 minutes (runs per minute)",
        legend(),
        throughput_svg(view.throughput),
        el("p", totals, id="throughput-totals"),
        note,
        id_="throughput",
    )


def _mismatches(entry: Doc) -> str:
    parts = [f"{name} {n}" for name, n in entry["mismatches"].items() if n]
    return ", ".join(parts) if parts else "—"


def _waiting(view: Overview) -> Markup:
    rows = [
        [
            run_link(r["runId"]),
            f"{r['project']}/{r['task']}",
            r["priority"],
            duration(r["waitingMs"]),
            badge(r["verdict"]),
            f"{r['sessionsMatching']} / {r['sessionsWithFreeSlots']}",
            _mismatches(r),
        ]
        for r in view.waiting["runs"]
    ]
    waiting = view.waiting
    head = el(
        "p",
        f"live sessions {waiting['liveSessions']}"
        + (" (first 200 evaluated)" if waiting["sessionsCapped"] else "")
        + f" · {waiting['scanned']} queue entries read"
        + (" (first 64 priorities only)" if waiting.get("prioritiesCapped") else "")
        + (
            " · the 50 most recently seen distinct capability sets evaluated "
            "(counts are lower bounds)"
            if waiting.get("capabilitiesCapped")
            else ""
        ),
        class_="muted",
        id="waiting-scope",
    )
    return section(
        "Waiting: can a live session take the oldest runs?",
        head,
        table(
            [
                "run",
                "task",
                "priority",
                "waiting",
                "verdict",
                "matching / with free slots",
                "sessions failing on",
            ],
            rows,
            empty="no run is waiting",
            id_="waiting-runs",
        ),
        id_="waiting",
    )


def _sessions(view: Overview) -> Markup:
    listed = view.sessions["sessions"]
    rows = [
        [
            el("a", s["worker"], href="/workers"),
            [short_id(s["sessionId"]), " ", badge("draining") if s.get("draining") else None],
            f"{s['slotsUsed']} / {s['slots']}",
            s["slotsFree"],
            pairs(s.get("labels")),
            pairs(s.get("runtimes")),
            age(view.now_ms, s["lastSeenAtMs"]),
            badge("expired") if s["expired"] else duration(s["expiresAtMs"] - view.now_ms),
        ]
        for s in listed
    ]
    used, slots = sum(s["slotsUsed"] for s in listed), sum(s["slots"] for s in listed)
    draining = sum(1 for s in listed if s.get("draining"))
    head = el(
        "p",
        f"open {len(listed)}"
        + (f" ({draining} draining)" if draining else "")
        + (f" (first {SESSION_LIMIT})" if view.sessions["truncated"] else "")
        + f" · slots {used} / {slots} used",
        class_="muted",
    )
    return section(
        "Workers and sessions",
        head,
        table(
            [
                "worker",
                "session",
                "slots used",
                "free",
                "labels",
                "runtimes",
                "last seen",
                "expires in",
            ],
            rows,
            empty="no open session",
            id_="sessions",
        ),
        id_="workers",
    )


def _denials(view: Overview) -> Markup:
    rows = [
        [
            utc(d["atMs"]),
            age(view.now_ms, d["atMs"]),
            d["action"],
            d["reason"],
            short_id(d.get("workerId")),
            d.get("credentialId") or "—",
        ]
        for d in view.denials["denials"]
    ]
    return section(
        "Authentication denials (latest, last 24 hours)",
        table(
            ["at", "age", "action", "reason", "worker", "credential"],
            rows,
            empty="no denial in the last 24 hours",
            id_="denials",
        ),
        id_="denials-section",
    )


def _expiring(view: Overview) -> Markup:
    """SPEC §16.3: credentials and certificates that expire within 14 days."""
    found = view.expiring
    rows = [
        [
            "credential",
            c["credentialId"],
            c["worker"],
            utc(c["expiresAtMs"]),
            duration(c["expiresAtMs"] - view.now_ms),
        ]
        for c in found.get("credentials", [])
    ]
    rows += [
        [
            "certificate",
            c["serial"],
            c["worker"],
            utc(c["notAfterMs"]),
            duration(c["notAfterMs"] - view.now_ms),
        ]
        for c in found.get("certificates", [])
    ]
    rows.sort(key=lambda row: row[3])
    head = el(
        "p",
        f"credentials {found.get('credentialsTotal', 0)} · certificates "
        f"{found.get('certificatesTotal', 0)}"
        + (f" (first {EXPIRING_LIMIT} of each)" if found.get("truncated") else ""),
        class_="muted",
    )
    return section(
        "Expiring within 14 days",
        head,
        table(
            ["kind", "id", "worker", "expires", "in"],
            rows,
            empty="nothing expires within 14 days",
            id_="expiring",
        ),
        id_="expiring-section",
    )


def render(view: Overview) -> Markup:
    return join(
        [
            el("div", _states(view), _queue(view), class_="cols"),
            _throughput(view),
            _waiting(view),
            _sessions(view),
            _expiring(view),
            _denials(view),
        ]
    )
