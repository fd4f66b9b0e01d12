"""The page frame every console page shares: head, navigation, refresh hook."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from qinglong.service.console.formatting import utc
from qinglong.service.console.markup import Child, Markup, el

NAV = (("/", "Overview"), ("/runs", "Runs"), ("/workers", "Workers"))


def page(
    *, title: str, current: str, now_ms: int, refresh_s: int, body: Child, logout: bool = False
) -> Markup:
    """A whole HTML document. `data-refresh-s` drives console.js (0 = off);
    `logout` adds the log-out button (a same-origin POST) of a remote console."""
    nav = el(
        "nav",
        el("span", "QingLong", class_="brand"),
        [
            el("a", label, href=href, class_="current" if href == current else None)
            for href, label in NAV
        ],
        el(
            "form",
            el("button", "Log out", type="submit", id="logout-submit"),
            method="post",
            action="/logout",
            id="logout",
            class_="logout",
        )
        if logout
        else None,
    )
    head = el(
        "head",
        el("meta", charset="utf-8"),
        el("meta", name="viewport", content="width=device-width, initial-scale=1"),
        el("title", f"{title} · QingLong console"),
        el("link", rel="stylesheet", href="/static/console.css"),
        el("script", src="/static/console.js", defer=True),
    )
    header = el(
        "header",
        nav,
        el(
            "span",
            el("span", "", id="stale", class_="stale", hidden=True),
            el("span", f"read-only · {utc(now_ms)}", id="generated", class_="muted"),
        ),
    )
    main = el("main", el("h1", title), body, id="main")
    return Markup(
        "<!doctype html>\n"
        + el("html", head, el("body", header, main, data_refresh_s=refresh_s), lang="en")
    )


def section(title: str, *children: Child, id_: str | None = None) -> Markup:
    return el("section", el("h2", title), children, id=id_)


def table(
    headers: Sequence[str], rows: Sequence[Sequence[Child]], *, empty: str, id_: str | None = None
) -> Markup:
    """A table, or a muted line saying `empty` when there are no rows."""
    if not rows:
        return el("p", empty, class_="muted empty", id=id_)
    return el(
        "table",
        el("thead", el("tr", [el("th", h) for h in headers])),
        el("tbody", [el("tr", [el("td", cell) for cell in row]) for row in rows]),
        id=id_,
    )


def badge(text: str) -> Markup:
    return el("span", text, class_=f"badge {text}")


def pairs(mapping: Mapping[str, Any] | None) -> str:
    """`{"gpu": "yes"}` -> `gpu=yes` (labels, runtimes): text, escaped by the caller."""
    if not mapping:
        return "—"
    return ", ".join(f"{key}={value}" for key, value in sorted(mapping.items()))


def run_link(run_id: str) -> Markup:
    return el("a", run_id, href=f"/runs/{run_id}", class_="mono")
