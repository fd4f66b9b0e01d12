"""The live log on the run page (SPEC §10, §15.3), and `/runs/<id>/log`, the JSON
endpoint the page's script polls for new text.

The page shows the run's latest attempt's log as stored (the first PAGE_BYTES
of it; the script reads on), always as text: it is the command's untrusted
output, escaped like every other value (service/console/markup.py), and the
script appends what it fetches as text nodes, never as markup. A log that is
truncated, or shorter than the attempt's reported `logBytes`, ends with the
same line `admin run log` prints (qinglong.log_text.trailer).

While the attempt runs (`data-follow="true"` on `#log`), console.js asks
`/runs/<id>/log?attempt=N&offset=K` about once a second and appends the text
it answers. The endpoint is a page of this app like any other: the same Host
check, token or session of a remote console, GET only (app.py's middleware),
and one `ql.run_log` read (ql_readonly).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from aiohttp import web

from qinglong.db import api
from qinglong.log_text import LogPage
from qinglong.service.console.layout import section
from qinglong.service.console.markup import Markup, el
from qinglong.service.console.reader import ConsoleError, Reader

if TYPE_CHECKING:
    from multidict import MultiMapping

# What the run page renders at once, and what one poll of the endpoint answers.
PAGE_BYTES = 1048576
POLL_BYTES = 262144
_OFFSET = re.compile(r"[0-9]{1,16}")
_ATTEMPT = re.compile(r"[1-9][0-9]{0,8}")
_PARAMS = frozenset({"attempt", "offset"})
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")

Doc = Mapping[str, Any]


async def load(reader: Reader, run: Doc) -> LogPage | None:
    """The first page of the latest attempt's log (None: the run has no attempt)."""
    attempts = run.get("attempts") or []
    if not attempts:
        return None
    latest = max(a["number"] for a in attempts)
    return await reader.read(
        api.run_log(run_id=run["run"]["runId"], attempt_no=latest, offset=0, max_bytes=PAGE_BYTES)
    )


def render(page: LogPage | None) -> Markup:
    if page is None:
        return section("Log", el("p", "no attempt yet", class_="muted"), id_="log-section")
    follow = not page.finished
    state = (
        "running: new output appears here as it is stored"
        if not page.ended
        else "the attempt ended"
    )
    body: list[Markup] = []
    if page.stored_bytes == 0 and not follow:
        body.append(el("p", "no log stored", class_="muted", id="log-empty"))
    else:
        body.append(
            el(
                "pre",
                page.text,
                class_="log",
                id="log",
                data_run=page.run_id,
                data_attempt=page.attempt_number,
                data_next_offset=page.next_offset,
                data_follow="true" if follow else "false",
            )
        )
    line = page.trailer()
    body.append(
        el("p", line or "", class_="warn log-trailer", id="log-trailer", hidden=line is None)
    )
    body.append(
        el("p", f"{page.stored_bytes} bytes stored · {state}", class_="muted", id="log-state")
    )
    return section(f"Log · attempt {page.attempt_number}", body, id_="log-section")


def _query(query: MultiMapping[str]) -> tuple[int, int]:
    unknown = sorted(set(query.keys()) - _PARAMS)
    if unknown:
        raise ConsoleError(
            400, f"unknown query parameter {unknown[0]!r} (expected attempt, offset)"
        )
    attempt, offset = query.getall("attempt", []), query.getall("offset", [])
    if len(attempt) != 1 or not _ATTEMPT.fullmatch(attempt[0]):
        raise ConsoleError(400, "attempt must be given once, an integer >= 1")
    if len(offset) != 1 or not _OFFSET.fullmatch(offset[0]):
        raise ConsoleError(400, "offset must be given once, an integer >= 0")
    return int(attempt[0]), int(offset[0])


async def endpoint(request: web.Request, reader: Reader) -> web.Response:
    """JSON: the page at `offset` (at most POLL_BYTES) with nextOffset and the trailer."""
    attempt, offset = _query(request.query)
    if not _UUID.fullmatch(request.match_info["run_id"]):
        raise ConsoleError(400, "runId must be a lowercase canonical UUID")
    page = await reader.read(
        api.run_log(
            run_id=request.match_info["run_id"],
            attempt_no=attempt,
            offset=offset,
            max_bytes=POLL_BYTES,
        )
    )
    return web.json_response({**page.as_json(), "trailer": page.trailer()})
