"""`/workers[?after=<worker id>]`: the workers, a keyset page at a time, each
with its active session (labels, runtimes, slots free/used, last seen) and
whether it is disabled.

Reads: `ql.list_workers` (one page of workers in id order: disabled flag,
credentials by id and state) and then `ql.live_sessions` for the listed
workers only (runtimes and slot use), joined on the worker id. A page is
bounded whatever the fleet size. Never a secret, a digest or a token: neither
read returns one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from qinglong.db import api
from qinglong.service.console.formatting import age, short_id, utc
from qinglong.service.console.layout import badge, pairs, table
from qinglong.service.console.markup import Markup, el, join
from qinglong.service.console.reader import ConsoleError, Reader

if TYPE_CHECKING:
    from multidict import MultiMapping  # aiohttp's request.query

Doc = Mapping[str, Any]
PAGE_SIZE = 100


@dataclass(frozen=True)
class WorkersView:
    workers: Doc
    sessions: Doc


def parse_after(query: MultiMapping[str]) -> str | None:
    """The page cursor of a `/workers` URL; ConsoleError 400 for anything else."""
    unknown = sorted(set(query.keys()) - {"after"})
    if unknown:
        raise ConsoleError(400, f"unknown query parameter {unknown[0]!r} (expected after)")
    return query.get("after") or None


async def load(reader: Reader, after: str | None) -> WorkersView:
    workers = await reader.read(api.list_workers(limit=PAGE_SIZE, after=after))
    ids = [w["workerId"] for w in workers["workers"]]
    sessions = await reader.read(api.live_sessions(limit=PAGE_SIZE, worker_ids=ids))
    return WorkersView(workers, sessions)


def _row(worker: Doc, live: Doc | None, now_ms: int) -> list[Any]:
    session = worker.get("session")
    name = el("span", worker["name"], class_="worker-name")
    creds = ", ".join(f"{c['credentialId']} ({c['state']})" for c in worker["credentials"])
    if session is None:
        return [name, badge("disabled") if worker["disabled"] else "enabled",
                "—", "—", "—", "—", "—", "—", creds or "—"]
    used = live["slotsUsed"] if live else session["liveLeases"]
    free = live["slotsFree"] if live else max(session["slots"] - used, 0)
    seen = session.get("lastSeenAtMs")
    state = badge("expired") if live and live["expired"] else badge(session["state"])
    return [name, badge("disabled") if worker["disabled"] else "enabled",
            el("span", short_id(session["sessionId"]), " ", state, title=session["sessionId"]),
            pairs(session.get("labels")), pairs(live.get("runtimes") if live else None),
            f"{used} / {session['slots']}", free,
            el("span", age(now_ms, seen), title=utc(seen)), creds or "—"]


def render(view: WorkersView, now_ms: int) -> Markup:
    live = {s["workerId"]: s for s in view.sessions["sessions"]}
    rows = [_row(w, live.get(w["workerId"]), now_ms) for w in view.workers["workers"]]
    pager = [el("a", "first page", href="/workers")]
    if view.workers.get("next"):
        cursor = urlencode({"after": view.workers["next"]})
        pager.append(el("a", "next →", href=f"/workers?{cursor}", rel="next", id="next-workers"))
    return join([table(["worker", "status", "session", "labels", "runtimes", "slots used",
                        "free", "last seen", "credentials"], rows, empty="no worker registered",
                       id_="workers"), el("p", pager, class_="pager")])
