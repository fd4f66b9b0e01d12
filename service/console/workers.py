"""`/workers[?after=<worker id>]`: the workers, a keyset page at a time, each
with its full id (selectable in one click, for `admin worker disable|grant|label
--worker ID`), whether it is disabled, what it is trusted with (SPEC §13: its
granted pools, "every pool" for the `*` grant; its granted labels and whether
it may declare its own), and its active session (labels, runtimes, slots
free/used, last seen).

Reads: `ql.list_workers` (one page of workers in id order: disabled flag, pool
and label grants, credentials by id and state) and then `ql.live_sessions` for the listed
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
    ids = [w["workerId"] for w in workers.workers]
    sessions = await reader.read(api.live_sessions(limit=PAGE_SIZE, worker_ids=ids))
    return WorkersView(workers.doc, sessions.doc)


def _identity(worker: Doc) -> Markup:
    """The name, then the full worker id (one click selects all of it)."""
    return el(
        "span",
        el("span", worker["name"], class_="worker-name"),
        el("br"),
        el(
            "code",
            worker["workerId"],
            class_="worker-id",
            title="worker id (admin worker … --worker ID)",
        ),
    )


def _pools(worker: Doc) -> Markup:
    """`every pool` for the `*` grant, then the explicit grants (P/N)."""
    pools: list[str] = list(worker.get("pools") or [])
    parts: list[Any] = []
    if worker.get("allPools"):
        parts.append(el("span", "every pool", class_="badge every-pool"))
    if pools:
        parts.append(" " if parts else None)
        parts.append(", ".join(pools) + (" … (first 100)" if worker.get("poolsCapped") else ""))
    if not parts:
        parts.append(el("span", "none (offered nothing)", class_="muted"))
    return el("span", parts, class_="worker-pools")


def _granted_labels(worker: Doc) -> Markup:
    """The labels an operator granted, and whether it may declare its own."""
    self_labels = "self-labels on" if worker.get("selfLabels") else "self-labels off"
    return el(
        "span",
        pairs(worker.get("grantedLabels")),
        el("br"),
        el("span", self_labels, class_="muted self-labels"),
        class_="granted-labels",
    )


def _row(worker: Doc, live: Doc | None, now_ms: int) -> list[Any]:
    session = worker.get("session")
    creds = ", ".join(f"{c['credentialId']} ({c['state']})" for c in worker["credentials"])
    trusted = [
        _identity(worker),
        badge("disabled") if worker["disabled"] else "enabled",
        _pools(worker),
        _granted_labels(worker),
    ]
    if session is None:
        return [*trusted, "—", "—", "—", "—", "—", "—", creds or "—"]
    used = live["slotsUsed"] if live else session["liveLeases"]
    free = live["slotsFree"] if live else max(session["slots"] - used, 0)
    seen = session.get("lastSeenAtMs")
    state = badge("expired") if live and live["expired"] else badge(session["state"])
    return [
        *trusted,
        el("span", short_id(session["sessionId"]), " ", state, title=session["sessionId"]),
        pairs(session.get("labels")),
        pairs(live.get("runtimes") if live else None),
        f"{used} / {session['slots']}",
        free,
        el("span", age(now_ms, seen), title=utc(seen)),
        creds or "—",
    ]


def render(view: WorkersView, now_ms: int) -> Markup:
    live = {s["workerId"]: s for s in view.sessions["sessions"]}
    rows = [_row(w, live.get(w["workerId"]), now_ms) for w in view.workers["workers"]]
    pager = [el("a", "first page", href="/workers")]
    if view.workers.get("next"):
        cursor = urlencode({"after": view.workers["next"]})
        pager.append(el("a", "next →", href=f"/workers?{cursor}", rel="next", id="next-workers"))
    return join(
        [
            table(
                [
                    "worker",
                    "status",
                    "pools",
                    "granted labels",
                    "session",
                    "declared labels",
                    "runtimes",
                    "slots used",
                    "free",
                    "last seen",
                    "credentials",
                ],
                rows,
                empty="no worker registered",
                id_="workers",
            ),
            el("p", pager, class_="pager"),
        ]
    )
