"""The operator console (SPEC §10) over a real database, through `qinglong
console` as a subprocess logged in with a ql_readonly-only role: page contents,
escaping, no secrets, read-only, loopback by default, clear 4xx answers."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urlencode

import psycopg
import pytest

from qinglong.db import api
from qinglong.service.compiler import compile_command
from qinglong.service.console.config import ConsoleConfig, RemoteBindRefused, is_loopback
from qinglong.service.console.markup import Markup, el
from tests.py.console_scenario import (
    XSS_LABEL,
    XSS_TAIL,
    Scenario,
    build_scenario,
    console_process,
    drop_role,
    fetch,
    readonly_dsn,
)
from tests.py.provision import Provisioner, command, table_fingerprint


@dataclass(eq=False)
class Element:
    tag: str
    attrs: dict[str, str | None]
    text: list[str] = field(default_factory=list)
    within: list[Element] = field(default_factory=list)  # its open ancestors


class Dom(HTMLParser):
    """Every element with its attributes and the text inside it (nested text included)."""

    def __init__(self, body: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[Element] = []
        self._open: list[Element] = []
        self.feed(body)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, dict(attrs), within=list(self._open))
        self.elements.append(element)
        if tag not in {"meta", "link", "input", "br", "hr", "img"}:
            self._open.append(element)

    def handle_endtag(self, tag: str) -> None:
        while self._open:
            if self._open.pop().tag == tag:
                break

    def handle_data(self, data: str) -> None:
        for element in self._open:
            element.text.append(data)

    def by_id(self, id_: str) -> str:
        found = [e for e in self.elements if e.attrs.get("id") == id_]
        assert found, f"no element #{id_}"
        return "".join(found[0].text)

    def tags(self, tag: str) -> list[Element]:
        return [e for e in self.elements if e.tag == tag]

    def rows(self, id_: str) -> list[list[str]]:
        """The text of each body cell of table #id_, row by row."""
        (table,) = [e for e in self.elements if e.attrs.get("id") == id_]
        rows = [
            ["".join(td.text) for td in self.tags("td") if tr in td.within]
            for tr in self.tags("tr")
            if table in tr.within
        ]
        return [row for row in rows if row]  # not the header row


@pytest.fixture
def conn(db_dsn: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(db_dsn, autocommit=True) as connection:
        yield connection


@pytest.fixture
def scenario(conn: psycopg.Connection) -> Scenario:
    return build_scenario(conn)


@pytest.fixture
def console(
    conn: psycopg.Connection, pg_cluster, db_name: str, scenario: Scenario
) -> Iterator[str]:
    try:
        with console_process(readonly_dsn(conn, pg_cluster, db_name), "--refresh-s", "2") as url:
            yield url
    finally:
        drop_role(conn, db_name)


def _page(url: str) -> Dom:
    answer = fetch(url)
    assert answer.status == 200, answer.body
    return Dom(answer.body)


def _classed(dom: Dom, class_: str) -> list[str]:
    """The text of every element of this class, in document order."""
    return ["".join(e.text) for e in dom.elements if e.attrs.get("class") == class_]


def test_overview_shows_states_queue_waiting_sessions_and_denials(
    console: str, scenario: Scenario
) -> None:
    dom = _page(console)
    counts = {
        e.attrs["data-state"]: "".join(e.text) for e in dom.elements if e.attrs.get("data-state")
    }
    assert counts == {
        "queued": "3",
        "dispatching": "0",
        "starting": "1",
        "running": "0",
        "succeeded": "1",
        "failed": "1",
        "cancelled": "0",
    }
    waiting = dom.by_id("waiting-runs")
    # The oldest waiting build runs can go to edge-1 (free slots); the train run
    # needs label gpu=yes, which no live session has.
    for run_id in scenario.queued_runs:
        assert run_id in waiting
    assert waiting.count("ready") == 2 and waiting.count("no_match") == 1
    assert scenario.train_run in waiting and "label 2" in waiting
    sessions = dom.by_id("sessions")
    assert "edge-1" in sessions and "gpu-box" in sessions and "retired" not in sessions
    assert "1 / 4" in sessions  # edge-1: the started run holds one slot
    assert "worker_disabled" in dom.by_id("denials") and "session.open" in dom.by_id("denials")
    by_task = dom.by_id("by-task")
    assert "web/build" in by_task and "ml/train" in by_task
    # One priority (0) with the three ready runs (two builds, one train).
    assert dom.by_id("by-priority").startswith("priorityready runsoldest waiting03")


def test_overview_chart_counts_the_last_minutes(console: str) -> None:
    dom = _page(console)
    series = {
        e.attrs["data-series"]: [int(v) for v in str(e.attrs["data-values"]).split(",")]
        for e in dom.tags("g")
        if e.attrs.get("data-series")
    }
    assert set(series) == {"dispatched", "succeeded", "failed"}
    assert all(len(values) == 15 for values in series.values())
    assert (sum(series["dispatched"]), sum(series["succeeded"]), sum(series["failed"])) == (3, 1, 1)
    assert dom.by_id("throughput-totals") == "dispatched 3 · succeeded 1 · failed 1"
    assert len([e for e in dom.tags("svg") if e.attrs.get("id") == "throughput-chart"]) == 1


def test_run_detail_shows_attempts_output_and_events_as_text(
    conn: psycopg.Connection, console: str, scenario: Scenario
) -> None:
    answer = fetch(f"{console}runs/{scenario.succeeded_run}")
    assert answer.status == 200
    assert "<script>alert(1)</script>" not in answer.body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in answer.body
    dom = Dom(answer.body)
    assert ["".join(e.text) for e in dom.tags("pre")] == [XSS_TAIL]
    # Only the console's own script, by URL: no inline script at all.
    assert [e.attrs.get("src") for e in dom.tags("script")] == ["/static/console.js"]
    assert all("".join(e.text) == "" for e in dom.tags("script"))
    run_text = dom.by_id("run")
    assert "succeeded" in run_text and scenario.build_task in run_text
    doc = api.show_run(run_id=scenario.succeeded_run).run(conn).doc
    (attempt,) = doc["attempts"]
    attempts = dom.by_id("attempts")
    assert attempt["workerId"][:8] in attempts and attempt["sessionId"][:8] in attempts
    assert "succeeded" in attempts and "—" not in attempts.split("succeeded", 1)[1][:60]
    shown = _classed(dom, "etype")
    assert shown == [e["type"] for e in doc["events"]] and len(shown) >= 3
    assert _classed(dom, "exit-code") == ["0"]
    failed = _page(f"{console}runs/{scenario.failed_run}")
    assert "error: boom" in failed.by_id("attempts") and "failed" in failed.by_id("attempts")
    assert _classed(failed, "exit-code") == ["3"]


def test_workers_page_escapes_labels_and_shows_slots_and_disabled(console: str) -> None:
    answer = fetch(f"{console}workers")
    assert answer.status == 200
    assert XSS_LABEL not in answer.body and "&lt;img src=x onerror=" in answer.body
    dom = Dom(answer.body)
    assert not [e for e in dom.tags("img")], "a label value became an element"
    rows = dom.by_id("workers")
    assert "edge-1" in rows and "python=3.11.4" in rows and "region=eu-1" in rows
    assert "1 / 4" in rows and "gpu-box" in rows and "0 / 2" in rows
    assert "retired" in rows and "disabled" in rows


def test_workers_page_shows_full_ids_pools_and_granted_labels(
    conn: psycopg.Connection, console: str
) -> None:
    prov = Provisioner(conn)
    prov.call(api.create_pool(project="web", name="fast"))
    tenant = prov.worker("tenant-a", self_labels=False, all_pools=False)
    for pool in ("web/fast", "ml/default"):
        prov.call(api.grant_pool(worker_id=tenant.worker_id, pool=pool))
    prov.call(api.label_worker(worker_id=tenant.worker_id, labels={"site": "plant-3"}))
    bare = prov.worker("no-grant", self_labels=False, all_pools=False)
    dom = _page(f"{console}workers")
    every = [str(r[0]) for r in conn.execute("SELECT id FROM ql_private.workers ORDER BY id")]
    # The full id of every worker, in a selectable element of its own.
    assert _classed(dom, "worker-id") == every
    rows = {row[0]: row for row in dom.rows("workers")}
    name_of = {tenant.worker_id: "tenant-a", bare.worker_id: "no-grant"}
    tenant_row, bare_row = (rows[name_of[w] + w] for w in (tenant.worker_id, bare.worker_id))
    assert tenant_row[2:4] == ["ml/default, web/fast", "site=plant-3self-labels off"]
    assert bare_row[2:4] == ["none (offered nothing)", "—self-labels off"]
    (edge,) = [row for name, row in rows.items() if name.startswith("edge-1")]
    assert edge[2:4] == ["every pool", "—self-labels on"]
    assert "region=eu-1" in edge[5]  # its session's declared labels


def test_run_pages_name_the_project_task_and_pool(
    conn: psycopg.Connection, console: str, scenario: Scenario
) -> None:
    prov = Provisioner(conn)
    prov.call(api.create_pool(project="web", name="fast"))
    task = prov.call(
        api.publish_revision(
            project="web",
            task="deploy",
            canonical=compile_command(command()).canonical,
            pool="web/fast",
        )
    ).doc["taskId"]
    (run_id,) = prov.enqueue(task)
    dom = _page(f"{console}runs/{run_id}")
    assert (_classed(dom, "project-name"), _classed(dom, "task-name"), _classed(dom, "pool")) == (
        ["web"],
        ["deploy"],
        ["web/fast"],
    )
    assert task in dom.by_id("run"), "the task id stays, as secondary text"
    rows = {row[0]: row for row in _page(f"{console}runs").rows("runs")}
    assert rows[run_id][1:3] == ["web/deploy", "web/fast"]
    assert rows[scenario.train_run][1:3] == ["ml/train", "ml/default"]
    assert rows[scenario.succeeded_run][1:3] == ["web/build", "web/default"]


def test_overview_shows_scheduled_runs_apart_from_ready_ones(
    conn: psycopg.Connection, console: str, scenario: Scenario
) -> None:
    api.enqueue_runs(task_id=scenario.build_task, priority=7, count=2, delay_ms=3_600_000).run(conn)
    dom = _page(console)
    assert [row[:2] for row in dom.rows("by-priority")] == [["0", "3"]], "7 is not ready"
    assert dom.rows("scheduled-by-priority") == [["7", "2"]]
    tasks = {row[0]: row[1:] for row in dom.rows("by-task")}
    # pool, ready, scheduled, dispatching
    assert tasks == {
        "web/build": ["web/default", "2", "2", "0"],
        "ml/train": ["ml/default", "1", "0", "0"],
    }
    assert re.search(r"· scheduled 2 \(next due in 59 min \d\d s\)$", dom.by_id("queue-summary")), (
        dom.by_id("queue-summary")
    )


def test_runs_filters_by_state_and_task(console: str, scenario: Scenario) -> None:
    queued = _page(f"{console}runs?state=queued").by_id("runs")
    assert all(r in queued for r in scenario.queued_runs) and scenario.train_run in queued
    assert scenario.succeeded_run not in queued
    train = _page(f"{console}runs?" + urlencode({"task": scenario.train_task})).by_id("runs")
    assert scenario.train_run in train and scenario.queued_runs[0] not in train
    both = _page(f"{console}runs?" + urlencode([("state", "succeeded"), ("state", "failed")]))
    text = both.by_id("runs")
    assert scenario.succeeded_run in text and scenario.failed_run in text
    assert scenario.started_run not in text
    forms = both.tags("form")
    assert forms and all(f.attrs.get("method") == "get" for f in forms), "a form that acts"


def test_runs_keyset_pages(conn: psycopg.Connection, console: str, scenario: Scenario) -> None:
    Provisioner(conn).enqueue(scenario.build_task, 60)
    queued = [
        str(r[0])
        for r in conn.execute(
            "SELECT id FROM ql_private.runs WHERE state = 'queued' ORDER BY queue_seq DESC"
        )
    ]
    first = _page(f"{console}runs?state=queued")
    older = [e for e in first.tags("a") if e.attrs.get("id") == "older"]
    assert len(older) == 1
    second_url = console.rstrip("/") + str(older[0].attrs["href"])
    second = _page(second_url)
    assert not [e for e in second.tags("a") if e.attrs.get("id") == "older"], "the last page"
    pages = [
        re.findall(r'href="/runs/([0-9a-f-]{36})"', fetch(u).body)
        for u in (f"{console}runs?state=queued", second_url)
    ]
    assert len(pages[0]) == 50 and pages[0] + pages[1] == queued, "newest first, no overlap"


def test_workers_keyset_pages(conn: psycopg.Connection, console: str) -> None:
    for index in range(110):
        api.register_worker(name=f"fleet-{index:03d}").run(conn)
    every = sorted(str(r[0]) for r in conn.execute("SELECT name FROM ql_private.workers"))
    first = _page(f"{console}workers")
    more = [e for e in first.tags("a") if e.attrs.get("id") == "next-workers"]
    assert len(more) == 1
    second = _page(console.rstrip("/") + str(more[0].attrs["href"]))
    assert not [e for e in second.tags("a") if e.attrs.get("id") == "next-workers"]
    names = [_classed(page, "worker-name") for page in (first, second)]
    assert len(names[0]) == 100 and sorted(names[0] + names[1]) == every
    # The session columns follow the workers onto their page.
    assert "python=3.11.4" in (first.by_id("workers") + second.by_id("workers"))


BAD_REQUESTS = [
    ("runs/00000000-0000-4000-8000-000000000000", 404, "run not found"),
    ("runs/not-a-uuid", 400, "runId must be a lowercase canonical UUID"),
    ("runs?state=sleeping", 400, "state 'sleeping' is not a run state (one of queued,"),
    ("runs?colour=red", 400, "unknown query parameter 'colour'"),
    ("runs?task=xyz", 400, "taskId must be a lowercase canonical UUID"),
    ("runs?after=-1", 400, "after must be the cursor (next) of a previous page"),
    ("workers?x=1", 400, "unknown query parameter 'x' (expected after)"),
    ("workers?after=zz", 400, "after must be"),
    ("nowhere", 404, "no such page"),
    ("static/../../etc/passwd", 404, "no such page"),
    ("static/missing.js", 404, "no such asset"),
    ("runs/00000000-0000-4000-8000-000000000000/log?attempt=1&offset=0", 404, "run not found"),
    ("runs/not-a-uuid/log?attempt=1&offset=0", 400, "runId must be a lowercase canonical"),
    ("runs/00000000-0000-4000-8000-000000000000/log?offset=0", 400, "attempt must be given"),
    (
        "runs/00000000-0000-4000-8000-000000000000/log?attempt=1&offset=-1",
        400,
        "offset must be given once",
    ),
    (
        "runs/00000000-0000-4000-8000-000000000000/log?attempt=1&offset=0&x=1",
        400,
        "unknown query parameter 'x' (expected attempt, offset)",
    ),
]


def test_bad_requests_get_a_clear_answer(conn: psycopg.Connection, console: str) -> None:
    before = table_fingerprint(conn)
    for path, status, message in BAD_REQUESTS:
        answer = fetch(console + path)
        assert answer.status == status, path
        assert Dom(answer.body).by_id("error").startswith(message), path
    assert table_fingerprint(conn) == before


def test_read_only_and_no_secret_on_any_page(
    conn: psycopg.Connection, console: str, scenario: Scenario
) -> None:
    before = table_fingerprint(conn)
    pages = [
        "",
        "runs",
        "workers",
        f"runs/{scenario.succeeded_run}",
        f"runs/{scenario.started_run}",
        f"runs/{scenario.failed_run}",
        "runs?state=starting",
        "static/console.js",
        "static/console.css",
    ]
    for path in pages:
        answer = fetch(console + path)
        assert answer.status == 200, path
        for secret in scenario.secrets:
            assert secret not in answer.body, (path, "shows a secret, token or digest")
        assert not re.search(r"(src|href)=\"(https?:)?//", answer.body), "an outside asset"
        assert "Content-Security-Policy" in answer.headers
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        for path in ("", "runs", f"runs/{scenario.queued_runs[0]}", "workers"):
            answer = fetch(console + path, method=method)
            assert answer.status == 405 and answer.headers["Allow"] == "GET, HEAD", (method, path)
    assert fetch(console, method="HEAD").status == 200
    assert table_fingerprint(conn) == before, "a console request changed the database"


def test_console_role_needs_only_ql_readonly(
    conn: psycopg.Connection, pg_cluster, db_name: str, scenario: Scenario
) -> None:
    """Every read of every page is allowed to ql_readonly; a role without it gets a 503."""
    from psycopg import sql

    role = f"ql_nobody_{db_name}"
    conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))
    conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    # It may connect (the database grants CONNECT to the project roles only), not read.
    conn.execute(
        sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(
            sql.Identifier(db_name), sql.Identifier(role)
        )
    )
    try:
        with console_process(pg_cluster.dsn(db_name, user=role)) as url:
            answer = fetch(url)
            assert answer.status == 503
            assert "grant it ql_readonly" in Dom(answer.body).by_id("error")
    finally:
        conn.execute(
            sql.SQL("REVOKE CONNECT ON DATABASE {} FROM {}").format(
                sql.Identifier(db_name), sql.Identifier(role)
            )
        )
        conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


def test_non_loopback_bind_needs_allow_remote(db_dsn: str) -> None:
    refused = subprocess.run(
        [
            sys.executable,
            "-m",
            "qinglong",
            "console",
            "--dsn",
            db_dsn,
            "--host",
            "0.0.0.0",
            "--port",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert refused.returncode == 2 and refused.stdout == ""
    assert "not a loopback address; pass --allow-remote" in refused.stderr
    with pytest.raises(RemoteBindRefused):
        ConsoleConfig(dsn=db_dsn, host="example.org")
    with pytest.raises(RemoteBindRefused, match="--allow-remote requires --tls-cert FILE"):
        ConsoleConfig(dsn=db_dsn, host="0.0.0.0", allow_remote=True)
    assert [is_loopback(h) for h in ("127.0.0.1", "::1", "localhost", "10.0.0.1", "host")] == [
        True,
        True,
        True,
        False,
        False,
    ]


def test_markup_escapes_every_value() -> None:
    html = el("td", "<b>&\"'", el("span", 3, title='x" onmouseover="y'))
    assert html == (
        '<td>&lt;b&gt;&amp;&quot;&#x27;<span title="x&quot; onmouseover=&quot;y">3</span></td>'
    )
    assert isinstance(html, Markup)


def test_reads_are_granted_to_ql_readonly(conn: psycopg.Connection) -> None:
    """The console's reads as the db api names them: each is a ql_readonly read."""
    names = [
        api.run_state_counts().function,
        api.throughput().function,
        api.waiting_runs().function,
        api.live_sessions().function,
        api.recent_denials().function,
        api.queue_depth().function,
        api.list_runs().function,
        api.show_run(run_id="x").function,
        api.list_workers().function,
        api.run_log(run_id="x").function,
    ]
    rows = conn.execute(
        "SELECT p.proname, has_function_privilege('ql_readonly', p.oid, 'EXECUTE')"
        " FROM pg_proc p WHERE p.pronamespace = 'ql'::regnamespace AND p.proname = ANY(%s)",
        (names,),
    ).fetchall()
    assert sorted(rows) == sorted((name, True) for name in names), json.dumps(rows)


@pytest.mark.parametrize(
    "host, status",
    [
        ("evil.example", 400),
        ("evil.example:{port}", 400),
        ("127.0.0.1.evil.example", 400),
        ("127.0.0.1:{port}", 200),
        ("localhost:{port}", 200),
        ("LOCALHOST", 200),
        ("[::1]:{port}", 200),
        ("127.0.0.1", 200),
    ],
)
def test_host_header_must_name_the_loopback_console(console: str, host: str, status: int) -> None:
    """DNS rebinding: a page whose domain now resolves to 127.0.0.1 sends its own
    name as Host; without --allow-remote the console answers it 400, never a page."""
    port = console.rstrip("/").rsplit(":", 1)[1]
    answer = fetch(console, headers={"Host": host.format(port=port)})
    assert answer.status == status, (host, answer.body[:300])
    if status == 400:
        assert Dom(answer.body).by_id("error").startswith("Host header names no loopback")
        assert "edge-1" not in answer.body and "Content-Security-Policy" in answer.headers


def test_host_allowed_rules(db_dsn: str) -> None:
    from qinglong.service.console.app import host_allowed, host_name

    assert [host_name(h) for h in ("a.example:80", "[::1]:8088", "[::1]", "::1", "LocalHost")] == [
        "a.example",
        "::1",
        "::1",
        "::1",
        "localhost",
    ]
    local = ConsoleConfig(dsn=db_dsn, host="127.0.0.2")
    assert host_allowed("127.0.0.2:8088", local) and not host_allowed("10.0.0.1", local)
    assert not host_allowed(None, local) and not host_allowed("", local)


def test_repeated_task_or_cursor_is_a_bad_request(console: str, scenario: Scenario) -> None:
    for query in (
        [("task", scenario.build_task), ("task", scenario.train_task)],
        [("after", "1"), ("after", "2")],
    ):
        answer = fetch(f"{console}runs?" + urlencode(query))
        assert answer.status == 400, query
        assert Dom(answer.body).by_id("error").endswith("may be given once")


def test_console_connection_is_read_only_even_as_superuser(
    conn: psycopg.Connection, db_dsn: str
) -> None:
    """Defence in depth: given a superuser's DSN, a write through the console's
    connections still fails (default_transaction_read_only) and changes nothing."""
    import asyncio

    from qinglong.service.console.reader import ConsoleError, Reader

    async def attempt() -> tuple[ConsoleError | None, dict[str, Any]]:
        reader = Reader(db_dsn, max_size=1)
        await reader.open()
        try:
            counts = (await reader.read(api.run_state_counts())).doc  # a read still works
            try:
                await reader.read(api.register_worker(name="written-by-console"))
            except ConsoleError as exc:
                return exc, counts
            return None, counts
        finally:
            await reader.close()

    assert conn.execute(
        "SELECT rolsuper FROM pg_roles WHERE rolname = current_user"
    ).fetchone() == (True,)
    before = table_fingerprint(conn)
    error, counts = asyncio.run(attempt())
    assert error is not None and error.status == 503, "a write went through the console"
    assert counts["states"], counts
    assert table_fingerprint(conn) == before
    assert conn.execute(
        "SELECT count(*) FROM ql_private.workers WHERE name = %s", ("written-by-console",)
    ).fetchone() == (0,)


def test_demo_console_role_is_a_readonly_login(
    conn: psycopg.Connection, db_dsn: str, db_name: str
) -> None:
    """`qinglong demo --dsn`: the console's login is made on the admin DSN and is
    only a ql_readonly member (not the admin); running it again resets it."""
    from qinglong.console_cli import ensure_console_role

    role = f"ql_demo_console_{db_name}"
    try:
        for _ in range(2):
            dsn = ensure_console_role(db_dsn, role)
            with psycopg.connect(dsn, autocommit=True) as console_conn:
                row = console_conn.execute(
                    "SELECT current_user, r.rolsuper, r.rolcreaterole,"
                    " pg_has_role(current_user, 'ql_readonly', 'MEMBER')"
                    " FROM pg_roles r WHERE r.rolname = current_user"
                ).fetchone()
                assert row == (role, False, False, True)
                api.run_state_counts().run(console_conn)  # a console read is granted
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    api.register_worker(name="nope").run(console_conn)
        assert "password=" in dsn
        stored = conn.execute(
            "SELECT rolpassword FROM pg_authid WHERE rolname = %s", (role,)
        ).fetchone()
        assert stored is not None and str(stored[0]).startswith("SCRAM-SHA-256$")
    finally:
        conn.execute(psycopg.sql.SQL("DROP ROLE IF EXISTS {}").format(psycopg.sql.Identifier(role)))


def test_an_unexpected_error_is_the_consoles_own_500_page(
    db_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug in a page (fault injected into the overview's load) is logged and
    answered as an error page with the console's headers, never aiohttp's own."""
    import asyncio

    from aiohttp.test_utils import TestClient, TestServer

    from qinglong.service.console import overview
    from qinglong.service.console.app import create_console_app

    async def broken(_reader: object) -> None:
        raise RuntimeError("injected fault with a secret-looking detail")

    monkeypatch.setattr(overview, "load", broken)

    async def get() -> tuple[int, str, dict[str, str]]:
        app = create_console_app(ConsoleConfig(dsn=db_dsn))
        async with TestClient(TestServer(app, host="127.0.0.1")) as client:
            response = await client.get("/", headers={"Host": "127.0.0.1"})
            return response.status, await response.text(), dict(response.headers)

    status, body, headers = asyncio.run(get())
    assert status == 500
    assert Dom(body).by_id("error").startswith("internal error")
    assert "injected fault" not in body
    assert headers["Cache-Control"] == "no-store"
    assert headers["Content-Security-Policy"].startswith("default-src 'none'")


def test_console_process_never_hangs_or_leaks() -> None:
    """The fixture's own guards: a silent child is not waited on forever, a child
    that ignores SIGTERM is killed, a console that cannot start says why."""
    import time

    from tests.py import console_scenario

    silent = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], stdout=subprocess.PIPE, text=True
    )
    started = time.monotonic()
    assert console_scenario._first_line(silent, 0.5) == ""
    assert time.monotonic() - started < 5
    stubborn = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import signal, time; signal.signal(signal.SIGTERM, "
            "signal.SIG_IGN); print('up', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert console_scenario._first_line(stubborn, 10) == "up\n"
    for proc in (silent, stubborn):
        console_scenario.stop_process(proc, timeout_s=1.0)
        assert proc.returncode is not None
    assert stubborn.returncode == -9, "SIGTERM was ignored: it must have been killed"
    with pytest.raises(AssertionError, match="not a loopback address"):
        with console_scenario.console_process("dbname=none", "--host", "10.0.0.1"):
            pass


def _demo(dsn: str, tmp_path) -> tuple[Any, io.StringIO]:
    from qinglong.demo import Demo

    out = io.StringIO()
    demo = Demo(workers=1, runs=1, dsn=dsn, timeout_s=10, keep=tmp_path, out=out)
    demo.admin_dsn, demo.console_port = dsn, 0
    demo.announce_console()
    return demo, out


def test_demo_with_dsn_serves_its_console_as_a_readonly_login(
    conn: psycopg.Connection, db_dsn: str, scenario: Scenario, tmp_path
) -> None:
    """`qinglong demo --dsn` (no throwaway cluster): the console reads as the
    ql_readonly login it makes, not as the admin DSN it was given."""
    from qinglong.demo import CONSOLE_ROLE

    demo, out = _demo(db_dsn, tmp_path)
    try:
        demo.start_console()
        assert demo.console is not None, out.getvalue()
        assert fetch(demo.console_url).status == 200
        dsn = (demo.root / "console.dsn").read_text()
        assert psycopg.conninfo.conninfo_to_dict(dsn)["user"] == CONSOLE_ROLE
        users = {
            r[0]
            for r in conn.execute(
                "SELECT usename FROM pg_stat_activity WHERE application_name = 'qinglong-console'"
            )
        }
        assert users == {CONSOLE_ROLE}, users
    finally:
        demo.cleanup()
        conn.execute(
            psycopg.sql.SQL("DROP ROLE IF EXISTS {}").format(psycopg.sql.Identifier(CONSOLE_ROLE))
        )


def test_demo_goes_on_when_its_console_cannot_start(tmp_path) -> None:
    demo, out = _demo("host=127.0.0.1 port=1 dbname=none connect_timeout=2", tmp_path)
    try:
        demo.start_console()  # no exception: a warning, and no console
    finally:
        demo.cleanup()
    assert demo.console is None
    assert "warning: the console did not start" in out.getvalue()
    assert "continuing without it" in out.getvalue()
