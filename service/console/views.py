"""The console's request handlers: read, render, answer. Nothing here writes."""

from __future__ import annotations

import time

from aiohttp import web

from qinglong.service.console import logs, overview, runs, workers
from qinglong.service.console.config import ConsoleConfig
from qinglong.service.console.layout import page
from qinglong.service.console.markup import Markup, el
from qinglong.service.console.reader import ConsoleError, Reader
from qinglong.service.console.static_files import StaticFiles

READER: web.AppKey[Reader] = web.AppKey("qinglong_console_reader", Reader)
CONFIG: web.AppKey[ConsoleConfig] = web.AppKey("qinglong_console_config", ConsoleConfig)
STATIC: web.AppKey[StaticFiles] = web.AppKey("qinglong_console_static", StaticFiles)


def _now_ms() -> int:
    return int(time.time() * 1000)


def html_response(markup: Markup, status: int = 200) -> web.Response:
    return web.Response(text=markup, status=status, content_type="text/html", charset="utf-8")


def _page(
    request: web.Request, *, title: str, current: str, now_ms: int, body: Markup
) -> web.Response:
    config = request.app[CONFIG]
    return html_response(
        page(
            title=title,
            current=current,
            now_ms=now_ms,
            refresh_s=config.refresh_s,
            body=body,
            logout=config.allow_remote,
        )
    )


def error_page(request: web.Request, error: ConsoleError) -> web.Response:
    """The error as a page: status, the message, a way back; never refreshed."""
    body = el("p", error.message, class_="error", id="error")
    markup = page(
        title=f"{error.status} {_REASONS.get(error.status, 'error')}",
        current="",
        now_ms=_now_ms(),
        refresh_s=0,
        body=[body, el("a", "overview", href="/")],
    )
    return html_response(markup, status=error.status)


_REASONS = {
    400: "bad request",
    401: "unauthorized",
    403: "forbidden",
    404: "not found",
    405: "method not allowed",
    413: "too large",
    415: "unsupported media type",
    421: "misdirected request",
    500: "internal error",
    503: "database unavailable",
}


async def overview_page(request: web.Request) -> web.Response:
    view = await overview.load(request.app[READER])
    return _page(
        request, title="Overview", current="/", now_ms=view.now_ms, body=overview.render(view)
    )


async def runs_page(request: web.Request) -> web.Response:
    run_filter = runs.parse_filter(request.query)
    listed = await runs.load_list(request.app[READER], run_filter)
    return _page(
        request,
        title="Runs",
        current="/runs",
        now_ms=_now_ms(),
        body=runs.render_list(listed, run_filter),
    )


async def run_page(request: web.Request) -> web.Response:
    if request.query:
        raise ConsoleError(400, "a run page takes no query parameters")
    doc = await runs.load_run(request.app[READER], request.match_info["run_id"])
    log = logs.render(await logs.load(request.app[READER], doc))
    return _page(
        request,
        title=f"Run {doc['run']['runId']}",
        current="/runs",
        now_ms=_now_ms(),
        body=runs.render_run(doc, log),
    )


async def run_log(request: web.Request) -> web.Response:
    """New text of a run's log from an offset (JSON; console.js appends it)."""
    return await logs.endpoint(request, request.app[READER])


async def workers_page(request: web.Request) -> web.Response:
    after = workers.parse_after(request.query)
    now_ms = _now_ms()
    view = await workers.load(request.app[READER], after)
    return _page(
        request,
        title="Workers",
        current="/workers",
        now_ms=now_ms,
        body=workers.render(view, now_ms),
    )


async def static_file(request: web.Request) -> web.Response:
    asset = request.app[STATIC].get(request.match_info["name"])
    if asset is None:
        raise ConsoleError(404, "no such asset")
    return web.Response(
        body=asset.body, content_type=asset.content_type, headers={"Cache-Control": "max-age=300"}
    )
