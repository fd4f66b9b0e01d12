"""`GET /v1/runs/{id}/log` of the producer API (SPEC §13.4, §15.3) end to end: a
real `qinglong api serve` over TLS with a login that is only a member of
ql_producer; the page, the follow stream (a running attempt's new line within
3 s, the end after the attempt ended, the caps), the scope `log` and the
project; `qinglong.client`'s run_log / log_pages / follow_log (sync and async)
and `qinglong run log`. Log data goes in through ql.append_log."""

from __future__ import annotations

import asyncio
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import requests

from qinglong import client as api_client
from qinglong.log_text import LogPage
from qinglong.schemas.contract import default_contract
from qinglong.throwaway_postgres import ThrowawayPostgres
from tests.py.log_support import LiveAttempt, start_attempt
from tests.py.producer_harness import ApiProcess, api_login, make_token, running_api

FOLLOW_DEADLINE_S = 3.0


@pytest.fixture
def conn(db_dsn: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(db_dsn, autocommit=True) as connection:
        yield connection


@pytest.fixture
def api(
    tmp_path: Path, pg_cluster: ThrowawayPostgres, db_name: str, conn: psycopg.Connection
) -> Iterator[ApiProcess]:
    role = api_login(conn)
    try:
        # One follow stream per token, streams of at most 4 s: the caps under test.
        with running_api(
            tmp_path, pg_cluster.dsn(db_name, user=role), logFollowersPerToken=1, logFollowMaxS=4
        ) as process:
            yield process
    finally:
        conn.execute(f"DROP OWNED BY {role}")
        conn.execute(f"DROP ROLE {role}")


def _error(reply: requests.Response, status: int, reason: str, field: str | None = None) -> None:
    assert reply.status_code == status, (reply.status_code, reply.text)
    doc = reply.json()
    default_contract().validate("qinglong/error@v1", doc)
    assert doc["reason"] == reason, doc
    if field is not None:
        assert doc["detail"] == {"field": field}, doc


def _client(api: ApiProcess, tmp_path: Path, token: str) -> api_client.Client:
    token_file = tmp_path / f"token-{token[4:20]}"
    token_file.write_text(token + "\n")
    token_file.chmod(0o600)
    return api_client.Client(api.url, token_file=token_file, ca_file=api.ca_file)


def test_the_page_and_its_checks(api: ApiProcess, db_dsn: str, conn: psycopg.Connection) -> None:
    live = start_attempt(conn)
    other = start_attempt(conn, project="other")
    live.append("hello ✓\n")
    live.append("world\n")
    token = make_token(db_dsn, "acme")["token"]
    path = f"/v1/runs/{live.run_id}/log"

    reply = api.request("GET", path, token)
    assert reply.status_code == 200, reply.text
    doc = reply.json()
    default_contract().validate("qinglong/run-log@v1", doc)
    assert doc == {
        "schema": "qinglong/run-log@v1",
        "runId": live.run_id,
        "attemptNumber": 1,
        "offset": 0,
        "nextOffset": live.stored,
        "text": "hello ✓\nworld\n",
        "storedBytes": live.stored,
        "logBytes": None,
        "truncated": False,
        "complete": False,
        "ended": False,
    }
    tail = api.request("GET", path, token, params={"offset": "10", "attempt": "1"}).json()
    assert (tail["offset"], tail["text"], tail["nextOffset"]) == (10, "world\n", live.stored)

    read_only = make_token(db_dsn, "acme", scopes="read")["token"]
    _error(api.request("GET", path, read_only), 403, "scope_missing")
    _error(api.request("GET", f"/v1/runs/{other.run_id}/log", token), 404, "not_found", "runId")
    _error(
        api.request("GET", "/v1/runs/00000000-0000-4000-8000-000000000000/log", token),
        404,
        "not_found",
        "runId",
    )
    _error(api.request("GET", path, token, params={"attempt": "2"}), 404, "not_found", "attempt")
    _error(api.request("GET", path, token, params={"offset": "-1"}), 400, "invalid_input", "offset")
    _error(api.request("GET", path, token, params={"offset": "99"}), 400, "out_of_bounds", "offset")
    _error(
        api.request("GET", path, token, params={"offset": "7"}), 400, "out_of_bounds", "offset"
    )  # inside the three bytes of ✓
    _error(
        api.request("GET", path, token, params={"follow": "yes"}), 400, "invalid_input", "follow"
    )
    _error(api.request("GET", path, token, params={"tail": "1"}), 400, "invalid_input", "tail")
    _error(api.request("GET", path), 401, "token_missing")


def _follow_lines(
    api: ApiProcess, token: str, run_id: str, out: queue.Queue[Any], **params: str
) -> None:
    """Each line of one follow stream, as it arrives, then None (or the exception)."""
    try:
        with requests.get(
            f"{api.url}/v1/runs/{run_id}/log",
            params={"follow": "1", **params},
            headers={"Authorization": f"Bearer {token}"},
            verify=str(api.ca_file),
            stream=True,
            timeout=30,
        ) as reply:
            out.put(reply)
            for line in reply.iter_lines():
                if line:
                    out.put(json.loads(line))
        out.put(None)
    except Exception as exc:  # handed to the test
        out.put(exc)


def _next(lines: queue.Queue[Any], timeout_s: float) -> Any:
    item = lines.get(timeout=timeout_s)
    if isinstance(item, Exception):
        raise item
    return item


def _until_text(lines: queue.Queue[Any], text: str, timeout_s: float) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout_s
    while not any(text in d["text"] for d in seen):
        seen.append(_next(lines, max(0.01, deadline - time.monotonic())))
        assert seen[-1] is not None, "the stream ended"
    return seen


def test_follow_streams_until_the_attempt_ends(
    api: ApiProcess, db_dsn: str, conn: psycopg.Connection
) -> None:
    live = start_attempt(conn)
    live.append("first\n")
    token = make_token(db_dsn, "acme")["token"]
    lines: queue.Queue[Any] = queue.Queue()
    thread = threading.Thread(target=_follow_lines, args=(api, token, live.run_id, lines))
    thread.start()
    try:
        reply = _next(lines, 30)
        assert reply.status_code == 200
        assert reply.headers["Content-Type"].startswith("application/x-ndjson")
        first = _next(lines, 30)
        default_contract().validate("qinglong/run-log@v1", first)
        assert (first["text"], first["ended"]) == ("first\n", False)

        # One stream per token (log_followers_per_token 1): a second is 429.
        refused = api.request("GET", f"/v1/runs/{live.run_id}/log", token, params={"follow": "1"})
        _error(refused, 429, "too_many_followers")
        assert int(refused.headers["Retry-After"]) >= 1

        written = time.monotonic()
        live.append("second ✓\n")
        _until_text(lines, "second ✓\n", FOLLOW_DEADLINE_S)
        assert time.monotonic() - written <= FOLLOW_DEADLINE_S
        live.complete(live.stored)
        rest = []
        while (item := _next(lines, 30)) is not None:
            rest.append(item)
        last = rest[-1]
        assert last["ended"] is True and last["complete"] is True
        assert last["nextOffset"] == last["storedBytes"] == live.stored
        assert all(not d["text"] for d in rest), "no text twice"
    finally:
        thread.join(timeout=30)


def test_a_stream_ends_at_its_time_cap_and_a_revoked_token_ends_it(
    api: ApiProcess, db_dsn: str, conn: psycopg.Connection
) -> None:
    live = start_attempt(conn)
    live.append("x\n")
    made = make_token(db_dsn, "acme")
    lines: queue.Queue[Any] = queue.Queue()
    started = time.monotonic()
    _follow_lines(api, made["token"], live.run_id, lines)  # log_follow_max_s is 4
    items = []
    while not lines.empty():
        items.append(lines.get())
    assert items[-1] is None and 3.5 <= time.monotonic() - started <= 15
    pages = items[1:-1]
    assert pages[0]["text"] == "x\n" and pages[-1]["ended"] is False, (
        "the stream ended early: the last line is not ended (reconnect from nextOffset)"
    )
    assert pages[-1]["nextOffset"] == live.stored

    thread = threading.Thread(target=_follow_lines, args=(api, made["token"], live.run_id, lines))
    thread.start()
    try:
        assert _next(lines, 30).status_code == 200 and _next(lines, 30)["text"] == "x\n"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "qinglong",
                "admin",
                "token",
                "revoke",
                "--dsn",
                db_dsn,
                "--token-id",
                made["tokenId"],
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )
        revoked_at = time.monotonic()
        while True:
            item = _next(lines, 10)
            assert item is not None, "ended without an error line"
            if item.get("schema") == "qinglong/error@v1":
                break
        assert item == {
            "schema": "qinglong/error@v1",
            "error": "unauthorized",
            "reason": "token_invalid",
        }
        assert time.monotonic() - revoked_at <= 5
        assert _next(lines, 10) is None
    finally:
        thread.join(timeout=30)


def test_client_and_run_log_command(
    api: ApiProcess, db_dsn: str, conn: psycopg.Connection, tmp_path: Path
) -> None:
    live = start_attempt(conn, log_limit_bytes=1024)
    token = make_token(db_dsn, "acme")["token"]
    live.append("line 1\n")
    with _client(api, tmp_path, token) as producer:
        page = producer.run_log(live.run_id)
        assert isinstance(page, LogPage) and page.text == "line 1\n" and not page.ended
        assert [p.text for p in producer.log_pages(live.run_id)] == ["line 1\n"]

        followed: queue.Queue[Any] = queue.Queue()
        with _client(api, tmp_path, token) as other:
            thread = threading.Thread(target=lambda: _drain(other, live, followed))
            thread.start()
            try:
                assert _next(followed, 30).text == "line 1\n"
                written = time.monotonic()
                live.append("line 2\n")
                while (item := _next(followed, FOLLOW_DEADLINE_S)).text != "line 2\n":
                    pass
                assert time.monotonic() - written <= FOLLOW_DEADLINE_S
                live.append("y" * 2000)  # past the 1 KiB cap: truncated
                live.complete(2014)
                while (item := _next(followed, 30)) is not None:
                    last = item
            finally:
                thread.join(timeout=30)
        assert (
            last.ended
            and last.truncated
            and last.trailer() == "[qinglong: log truncated at 1024 bytes]"
        )
        with pytest.raises(api_client.NotFound):
            producer.run_log(live.run_id, attempt=2)
        with pytest.raises(api_client.ClientInputError):
            producer.run_log("nope")

    async def in_async() -> tuple[LogPage, list[LogPage], list[LogPage]]:
        token_file = tmp_path / "async-token"
        token_file.write_text(token)
        token_file.chmod(0o600)
        async with api_client.AsyncClient(
            api.url, token_file=token_file, ca_file=api.ca_file
        ) as producer:
            one = await producer.run_log(live.run_id, offset=7)
            pages = [p async for p in producer.log_pages(live.run_id)]
            streamed = [p async for p in producer.follow_log(live.run_id)]
            return one, pages, streamed

    one, pages, streamed = asyncio.run(in_async())
    stored = "line 1\nline 2\n" + "y" * (1024 - 14)
    assert one.text == stored[7:] and one.offset == 7
    assert "".join(p.text for p in pages) == stored
    assert "".join(p.text for p in streamed) == stored and streamed[-1].finished

    token_file = tmp_path / "cli-token"
    token_file.write_text(token)
    token_file.chmod(0o600)
    base = [
        sys.executable,
        "-m",
        "qinglong",
        "run",
        "log",
        "--api",
        api.url,
        "--token-file",
        str(token_file),
        "--ca-file",
        str(api.ca_file),
        "--run",
        live.run_id,
    ]
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    for extra in ([], ["--follow"]):
        done = subprocess.run([*base, *extra], capture_output=True, timeout=60, env=env)
        assert done.returncode == 0, done.stderr
        assert done.stdout == stored.encode() + b"\n[qinglong: log truncated at 1024 bytes]\n"
    done = subprocess.run([*base, "--json"], capture_output=True, timeout=60, env=env)
    assert json.loads(done.stdout) == {
        "runId": live.run_id,
        "attemptNumber": 1,
        "text": stored,
        "storedBytes": 1024,
        "logBytes": 2014,
        "truncated": True,
        "complete": False,
    }
    missing = subprocess.run([*base, "--attempt", "2"], capture_output=True, timeout=60, env=env)
    assert missing.returncode == 1 and missing.stdout == b""
    assert json.loads(missing.stderr)["status"] == 404


def _drain(producer: api_client.Client, live: LiveAttempt, out: queue.Queue[Any]) -> None:
    try:
        for item in producer.follow_log(live.run_id):
            out.put(item)
        out.put(None)
    except Exception as exc:  # handed to the test
        out.put(exc)


def test_stopping_the_api_ends_its_follow_streams(
    api: ApiProcess, db_dsn: str, conn: psycopg.Connection
) -> None:
    """SIGTERM: a follow stream ends at once with a last line not ended (the client
    reconnects elsewhere), not after the shutdown timeout."""
    live = start_attempt(conn)
    live.append("x\n")
    token = make_token(db_dsn, "acme")["token"]
    lines: queue.Queue[Any] = queue.Queue()
    thread = threading.Thread(target=_follow_lines, args=(api, token, live.run_id, lines))
    thread.start()
    try:
        assert _next(lines, 30).status_code == 200
        pages = [_next(lines, 30)]
        assert pages[0]["text"] == "x\n"
        stopped = time.monotonic()
        api.process.send_signal(signal.SIGTERM)
        while (item := _next(lines, 10)) is not None:
            pages.append(item)
        # Well before the stream's own 4 s cap would have ended it.
        assert time.monotonic() - stopped <= 2
        assert pages and pages[-1]["ended"] is False and pages[-1]["nextOffset"] == live.stored
        assert api.process.wait(timeout=20) == 0
    finally:
        thread.join(timeout=30)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("LOG_FOLLOW_POLL_S", "0"),
        ("LOG_FOLLOW_POLL_S", "1.5"),
        ("LOG_FOLLOW_MAX_S", "0.5"),
        ("LOG_FOLLOWERS_MAX", "0"),
        ("LOG_FOLLOWERS_PER_TOKEN", "65"),
    ],
)
def test_follow_caps_out_of_bounds_are_refused(key: str, value: str) -> None:
    from qinglong.service.config import ConfigError
    from qinglong.service.producer_config import load_producer_config

    base = {"QL_API_DSN": "host=x", "QL_API_CERT_FILE": "c", "QL_API_KEY_FILE": "k"}
    assert load_producer_config(None, base).log_follow_poll_s == 0.5
    with pytest.raises(ConfigError, match=key.lower()[:12]):
        load_producer_config(None, {**base, f"QL_API_{key}": value})


def test_the_clients_follow_reconnects_after_a_capped_stream(
    api: ApiProcess, db_dsn: str, conn: psycopg.Connection, tmp_path: Path
) -> None:
    """The API ends a stream after log_follow_max_s (4 s here) with the attempt still
    running: follow_log goes on from the last nextOffset, nothing lost or twice."""
    live = start_attempt(conn)
    live.append("before\n")
    made = make_token(db_dsn, "acme")
    pages: queue.Queue[Any] = queue.Queue()
    with _client(api, tmp_path, made["token"]) as producer:
        thread = threading.Thread(target=lambda: _drain(producer, live, pages))
        thread.start()
        try:
            assert _next(pages, 30).text == "before\n"
            time.sleep(5)  # past the first stream's cap
            live.append("after\n")
            text = "before\n"
            while "after\n" not in text:
                text += _next(pages, FOLLOW_DEADLINE_S).text
            live.complete(live.stored)
            while (item := _next(pages, 30)) is not None:
                text += item.text
                last = item
        finally:
            thread.join(timeout=30)
    assert text == "before\nafter\n" and last.finished
    streams = [
        line
        for line in api.logs().splitlines()
        if '"action":"run.log"' in line and made["tokenId"] in line and '"reason":"ok"' in line
    ]
    assert len(streams) >= 2, "the client did not open a second stream"


def test_line_breaking_characters_in_the_log_survive_the_stream(
    api: ApiProcess, db_dsn: str, conn: psycopg.Connection, tmp_path: Path
) -> None:
    """U+2028, U+2029 and NEL split lines for httpx's line reader: the stream's JSON
    is ASCII (escaped), so only the newline ending each document splits it."""
    live = start_attempt(conn)
    text = "a\u2028b\u2029c\x85d\r\ne\x0bf\n"
    live.append(text)
    live.complete(live.stored)
    with _client(api, tmp_path, make_token(db_dsn, "acme")["token"]) as producer:
        streamed = list(producer.follow_log(live.run_id))
    assert "".join(p.text for p in streamed) == text and streamed[-1].finished


def test_the_openapi_document_describes_the_log_endpoint() -> None:
    validator = pytest.importorskip("openapi_spec_validator")
    from qinglong.service.producer_openapi import build_document

    document = build_document()
    validator.validate(document)
    operation = document["paths"]["/v1/runs/{run_id}/log"]["get"]
    assert "scope `log`" in operation["summary"]
    assert [p["name"] for p in operation["parameters"]] == ["run_id", "offset", "attempt", "follow"]
    ok = operation["responses"]["200"]["content"]
    ref = {"$ref": "#/components/schemas/qinglong.run-log.v1"}
    assert ok["application/json"]["schema"] == ok["application/x-ndjson"]["schema"] == ref
    assert "qinglong.run-log.v1" in document["components"]["schemas"]
    assert {"400", "401", "403", "404", "429", "503"} <= set(operation["responses"])
