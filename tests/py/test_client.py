"""qinglong.client and `qinglong run …` against a real TLS HTTP peer (SPEC §13.5).

The peer is a small aiohttp HTTPS server in this file that answers fixed documents
and error bodies (a test double of the producer API, speaking real TLS and real
HTTP): it records every request, so the tests check what the client sends —
method, path, query, headers, body bytes, schema ids — and how every answer is
mapped: typed results, one exception class per status (also for bodies that are
not `qinglong/error@v1`), timeouts, CA verification, the token file's mode, and
that the token never shows in a repr, exception message, log line or curl line.
The end-to-end test against the real `qinglong api serve` is test_client_e2e.py.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from qinglong import client as api
from qinglong.service import pki
from tests.py.ingress_harness import PkiSet, make_pki

ROOT = Path(__file__).resolve().parents[2]
RUN_ID = "0b6f5a0e-3c1d-4e8f-9a2b-1c2d3e4f5a6b"
TASK_ID = "7d9e8f00-1111-4222-8333-944455556666"
ATTEMPT_ID = "5e5e5e5e-1111-4222-8333-944455556666"

SHOW_DOC: dict[str, Any] = {
    "schema": "qinglong/run@v1",
    "run": {
        "runId": RUN_ID,
        "taskId": TASK_ID,
        "projectId": "p-1",
        "state": "failed",
        "priority": 5,
        "queuedAtMs": 1000,
        "notBeforeMs": 1000,
        "attempts": 1,
        "updatedAtMs": 2000,
        "finishedAtMs": 2000,
        "cancelRequested": False,
        "executionRevisionId": "r-1",
        "key": "nightly",
        "project": "proj",
        "taskName": "nightly",
        "pool": "proj/default",
    },
    "attempts": [
        {
            "attemptId": ATTEMPT_ID,
            "number": 1,
            "state": "failed",
            "workerId": "w-1",
            "sessionId": "s-1",
            "claimedAtMs": 1100,
            "startedAtMs": 1200,
            "finishedAtMs": 2000,
            "exitCode": 3,
            "reason": "exit_nonzero",
            "result": {"exitCode": 3, "durationMs": 800, "outputTail": "boom\n", "outputBytes": 5},
        }
    ],
    "events": [
        {"type": "run.enqueued", "atMs": 1000, "attemptId": None},
        {"type": "attempt.failed", "atMs": 2000, "attemptId": ATTEMPT_ID, "exitCode": 3},
    ],
}
LIST_DOC: dict[str, Any] = {
    "schema": "qinglong/run-page@v1",
    "runs": [
        {
            "runId": RUN_ID,
            "taskId": TASK_ID,
            "state": "queued",
            "priority": 0,
            "queuedAtMs": 1000,
            "notBeforeMs": 1000,
            "attempts": 1,
            "updatedAtMs": 1000,
        }
    ],
    "next": "cursor-2",
}
ERROR_STATUSES = {
    400: api.BadRequest,
    401: api.Unauthorized,
    403: api.Forbidden,
    404: api.NotFound,
    409: api.Conflict,
    413: api.PayloadTooLarge,
    429: api.RateLimited,
    503: api.Unavailable,
}


def make_token() -> str:
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
    token_id = "".join(secrets.choice(alphabet) for _ in range(16))
    return f"qlp_{token_id}_{secrets.token_urlsafe(32)}"


# ------------------------------------------------------------------ the peer


@dataclass
class Seen:
    method: str
    path: str
    query: list[tuple[str, str]]
    headers: dict[str, str]
    body: bytes


@dataclass
class Answer:
    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


class Peer:
    """An HTTPS server on 127.0.0.1 answering (method, path) from a table."""

    def __init__(self, server: pki.CertFiles) -> None:
        self.requests: list[Seen] = []
        self.answers: dict[tuple[str, str], Answer] = {}
        self._ready = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._ctx.load_cert_chain(server.cert_file, server.key_file)
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        assert self._ready.wait(10)

    @property
    def url(self) -> str:
        return f"https://localhost:{self.port}"

    def answer(
        self,
        method: str,
        path: str,
        status: int,
        doc: Any = None,
        *,
        raw: bytes | None = None,
        headers: dict[str, str] | None = None,
        delay_s: float = 0.0,
    ) -> None:
        body = raw if raw is not None else json.dumps(doc).encode()
        self.answers[(method, path)] = Answer(status, body, headers or {}, delay_s)

    async def _handle(self, request: web.Request) -> web.Response:
        self.requests.append(
            Seen(
                request.method,
                request.path,
                list(request.query.items()),
                dict(request.headers),
                await request.read(),
            )
        )
        found = self.answers.get((request.method, request.path))
        if found is None:
            return web.Response(status=599, body=b"no answer configured")
        if found.delay_s:
            await asyncio.sleep(found.delay_s)
        return web.Response(
            status=found.status,
            body=found.body,
            headers={"Content-Type": "application/json"} | found.headers,
        )

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app)
        self._loop.run_until_complete(self._runner.setup())
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=self._ctx)
        self._loop.run_until_complete(site.start())
        self.port = self._runner.addresses[0][1]
        self._ready.set()
        self._loop.run_forever()

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


@pytest.fixture(scope="module")
def pki_set(tmp_path_factory: pytest.TempPathFactory) -> PkiSet:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def peer(pki_set: PkiSet) -> Iterator[Peer]:
    server = Peer(pki_set.server)
    yield server
    server.close()


@pytest.fixture
def token() -> str:
    return make_token()


@pytest.fixture
def token_file(tmp_path: Path, token: str) -> Path:
    path = tmp_path / "producer.token"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(token + "\n")
    return path


def sync_client(peer: Peer, pki_set: PkiSet, token_file: Path, **kw: Any) -> api.Client:
    return api.Client(peer.url, token_file=token_file, ca_file=pki_set.ca_file, **kw)


def async_client(peer: Peer, pki_set: PkiSet, token_file: Path, **kw: Any) -> api.AsyncClient:
    return api.AsyncClient(peer.url, token_file=token_file, ca_file=pki_set.ca_file, **kw)


def call(
    peer: Peer, pki_set: PkiSet, token_file: Path, mode: str, method: str, *args: Any, **kwargs: Any
) -> Any:
    """`method` on a sync or async client (mode), one request, client closed after."""
    if mode == "sync":
        with sync_client(peer, pki_set, token_file) as producer:
            return getattr(producer, method)(*args, **kwargs)

    async def go() -> Any:
        async with async_client(peer, pki_set, token_file) as producer:
            return await getattr(producer, method)(*args, **kwargs)

    return asyncio.run(go())


MODES = ("sync", "async")


# ------------------------------------------------------------- requests sent


def assert_common_headers(seen: Seen, token: str) -> None:
    assert seen.headers["Authorization"] == f"Bearer {token}"
    assert seen.headers["Accept"] == "application/json"
    assert seen.headers["User-Agent"] == api.USER_AGENT


@pytest.mark.parametrize("mode", MODES)
def test_enqueue_sends_the_schema_document_and_returns_typed_ids(
    peer, pki_set, token_file, token, mode
):
    peer.answer(
        "POST",
        "/v1/runs",
        201,
        {"schema": "qinglong/run-enqueued@v1", "runIds": [RUN_ID], "existing": True},
    )
    result = call(
        peer,
        pki_set,
        token_file,
        mode,
        "enqueue",
        "proj/nightly",
        count=1,
        priority=-3,
        delay_ms=1500,
        key="k-1",
    )
    assert result == api.EnqueueResult(run_ids=[RUN_ID], existing=True)
    (seen,) = peer.requests
    assert (seen.method, seen.path, seen.query) == ("POST", "/v1/runs", [])
    assert_common_headers(seen, token)
    assert seen.headers["Content-Type"] == "application/json"
    assert json.loads(seen.body) == {
        "schema": "qinglong/run-enqueue-request@v1",
        "task": "proj/nightly",
        "count": 1,
        "priority": -3,
        "delayMs": 1500,
        "key": "k-1",
    }


@pytest.mark.parametrize("mode", MODES)
def test_enqueue_sends_only_what_was_given(peer, pki_set, token_file, mode):
    peer.answer("POST", "/v1/runs", 201, {"runIds": [RUN_ID, TASK_ID], "existing": False})
    result = call(peer, pki_set, token_file, mode, "enqueue", TASK_ID, not_before_ms=5)
    assert result.run_ids == [RUN_ID, TASK_ID] and result.existing is False
    assert json.loads(peer.requests[0].body) == {
        "schema": api.ENQUEUE_SCHEMA,
        "task": TASK_ID,
        "notBeforeMs": 5,
    }


@pytest.mark.parametrize("mode", MODES)
def test_show_parses_the_show_document(peer, pki_set, token_file, token, mode):
    peer.answer("GET", f"/v1/runs/{RUN_ID}", 200, SHOW_DOC)
    doc = call(peer, pki_set, token_file, mode, "show", RUN_ID.upper())
    (seen,) = peer.requests
    assert (seen.method, seen.path, seen.body) == ("GET", f"/v1/runs/{RUN_ID}", b"")
    assert_common_headers(seen, token)
    assert doc.run.run_id == RUN_ID and doc.run.state == "failed" and doc.run.key == "nightly"
    assert doc.run.cancel_requested is False and doc.run.priority == 5
    assert (doc.run.project, doc.run.task_name, doc.run.pool) == ("proj", "nightly", "proj/default")
    (attempt,) = doc.attempts
    assert attempt.number == 1 and attempt.exit_code == 3 and attempt.worker_id == "w-1"
    assert attempt.result == api.AttemptResult(
        duration_ms=800, output_tail="boom\n", output_bytes=5, exit_code=3
    )
    assert [e.type for e in doc.events] == ["run.enqueued", "attempt.failed"]
    assert doc.events[1].attempt_id == ATTEMPT_ID and doc.events[1].payload == {"exitCode": 3}
    assert doc.raw == SHOW_DOC


@pytest.mark.parametrize("mode", MODES)
def test_list_sends_the_filters_as_query_parameters(peer, pki_set, token_file, mode):
    peer.answer("GET", "/v1/runs", 200, LIST_DOC)
    page = call(
        peer,
        pki_set,
        token_file,
        mode,
        "list",
        task="proj/nightly",
        state=["queued", "failed"],
        after="cursor-1",
        limit=2,
    )
    (seen,) = peer.requests
    assert seen.query == [
        ("task", "proj/nightly"),
        ("state", "queued"),
        ("state", "failed"),
        ("after", "cursor-1"),
        ("limit", "2"),
    ]
    assert page.next == "cursor-2"
    assert page.runs == [
        api.RunSummary(
            run_id=RUN_ID,
            task_id=TASK_ID,
            state="queued",
            priority=0,
            queued_at_ms=1000,
            not_before_ms=1000,
            attempts=1,
            updated_at_ms=1000,
        )
    ]


@pytest.mark.parametrize("mode", MODES)
def test_list_without_filters_sends_no_query(peer, pki_set, token_file, mode):
    peer.answer("GET", "/v1/runs", 200, {"runs": [], "next": None})
    page = call(peer, pki_set, token_file, mode, "list")
    assert page.runs == [] and page.next is None and peer.requests[0].query == []


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("action", ["cancel", "retry"])
def test_cancel_and_retry_post_an_empty_object(peer, pki_set, token_file, token, mode, action):
    peer.answer("POST", f"/v1/runs/{RUN_ID}/{action}", 200, SHOW_DOC)
    doc = call(peer, pki_set, token_file, mode, action, RUN_ID)
    (seen,) = peer.requests
    assert (seen.method, seen.path, seen.body) == ("POST", f"/v1/runs/{RUN_ID}/{action}", b"{}")
    assert seen.headers["Content-Type"] == "application/json"
    assert_common_headers(seen, token)
    assert doc.run.run_id == RUN_ID


@pytest.mark.parametrize("bad", ["../admin", "not-a-uuid", RUN_ID + "/cancel", ""])
def test_a_malformed_run_id_is_refused_before_sending(peer, pki_set, token_file, bad):
    with sync_client(peer, pki_set, token_file) as producer:
        for method in (producer.show, producer.cancel, producer.retry):
            with pytest.raises(api.ClientInputError) as caught:
                method(bad)
            assert caught.value.field == "runId"
    assert peer.requests == []


def test_other_bad_arguments_are_refused_before_sending(peer, pki_set, token_file):
    with sync_client(peer, pki_set, token_file) as producer:
        cases = [
            (lambda: producer.enqueue("p/t", delay_ms=1, not_before_ms=2), "delayMs"),
            (lambda: producer.enqueue("p/t", count="3"), "count"),
            (lambda: producer.enqueue("p/t", priority=True), "priority"),
            (lambda: producer.enqueue(""), "task"),
            (lambda: producer.list(limit="10"), "limit"),
        ]
        for bad_call, field_name in cases:
            with pytest.raises(api.ClientInputError) as caught:
                bad_call()
            assert caught.value.field == field_name
            assert isinstance(caught.value, ValueError)
    assert peer.requests == []


# ---------------------------------------------------------------- answers


def error_body(status: int, reason: str, detail: dict[str, Any] | None = None) -> dict:
    doc: dict[str, Any] = {"schema": "qinglong/error@v1", "error": f"e{status}", "reason": reason}
    if detail is not None:
        doc["detail"] = detail
    return doc


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("status", sorted(ERROR_STATUSES))
def test_every_error_status_raises_its_class_from_the_error_body(
    peer, pki_set, token_file, token, mode, status
):
    detail = {"field": "count"} if status == 400 else None
    headers = {"Retry-After": "7"} if status in (429, 503) else None
    peer.answer(
        "POST", "/v1/runs", status, error_body(status, "some_reason", detail), headers=headers
    )
    with pytest.raises(api.ApiError) as caught:
        call(peer, pki_set, token_file, mode, "enqueue", "p/t")
    exc = caught.value
    assert type(exc) is ERROR_STATUSES[status]
    assert (exc.status, exc.error, exc.reason, exc.detail) == (
        status,
        f"e{status}",
        "some_reason",
        detail,
    )
    assert exc.retry_after_s == (7 if headers else None)
    assert token not in str(exc) and token not in repr(exc)
    assert token.split("_", 2)[2] not in str(exc.as_json())


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("status", sorted(ERROR_STATUSES))
@pytest.mark.parametrize(
    "body",
    [
        b"<html><body>502 Bad Gateway</body></html>",
        b'{"message": "not ours"}',
        b"",
        b'{"schema": "qinglong/error@v1", "error": 7}',
    ],
)
def test_a_body_that_is_not_an_error_document_still_raises_the_status_class(
    peer, pki_set, token_file, mode, status, body
):
    peer.answer(
        "GET", f"/v1/runs/{RUN_ID}", status, raw=body, headers={"Content-Type": "text/html"}
    )
    with pytest.raises(ERROR_STATUSES[status]) as caught:
        call(peer, pki_set, token_file, mode, "show", RUN_ID)
    assert caught.value.status == status and caught.value.reason == api.UNRECOGNIZED_BODY
    assert caught.value.detail is None


@pytest.mark.parametrize(
    "status,error", [(500, "internal_error"), (418, "bad_request"), (502, "unavailable")]
)
def test_an_unlisted_status_raises_the_base_class(peer, pki_set, token_file, status, error):
    peer.answer("GET", "/v1/runs", status, raw=b"oops")
    with pytest.raises(api.ApiError) as caught:
        call(peer, pki_set, token_file, "sync", "list")
    assert type(caught.value) is api.ApiError
    assert (caught.value.status, caught.value.error) == (status, error)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "answer",
    [
        (200, b"not json"),
        (200, b'{"runs": "nope", "next": null}'),
        (200, b'{"runs": [{"runId": 1, "taskId": "t", "state": "queued"}], "next": null}'),
        (200, b"[]"),
        (301, b"{}"),
        (200, b'{"schema": "qinglong/run@v1", "runs": [], "next": null}'),
    ],
)
def test_a_success_that_is_not_the_document_is_a_response_error(
    peer, pki_set, token_file, mode, answer
):
    status, body = answer
    peer.answer(
        "GET", "/v1/runs", status, raw=body, headers={"Location": "https://localhost/elsewhere"}
    )
    with pytest.raises(api.ResponseError):
        call(peer, pki_set, token_file, mode, "list")
    assert len(peer.requests) == 1  # a redirect is not followed


def test_enqueue_expects_201(peer, pki_set, token_file):
    peer.answer("POST", "/v1/runs", 200, {"runIds": [RUN_ID], "existing": False})
    with pytest.raises(api.ResponseError):
        call(peer, pki_set, token_file, "sync", "enqueue", "p/t")


# -------------------------------------------------------- transport and TLS


@pytest.mark.parametrize("mode", MODES)
def test_a_slow_answer_raises_request_timeout(peer, pki_set, token_file, mode):
    peer.answer("GET", "/v1/runs", 200, LIST_DOC, delay_s=3.0)
    if mode == "sync":
        with (
            sync_client(peer, pki_set, token_file, timeout_s=0.5) as producer,
            pytest.raises(api.RequestTimeout),
        ):
            producer.list()
    else:

        async def go() -> None:
            async with async_client(peer, pki_set, token_file, timeout_s=0.5) as producer:
                await producer.list()

        with pytest.raises(api.RequestTimeout):
            asyncio.run(go())


@pytest.mark.parametrize("mode", MODES)
def test_a_server_outside_the_ca_file_is_refused_before_any_request(
    peer, pki_set, token_file, mode
):
    foreign = str(pki_set.foreign_ca_dir / pki.CA_CERT_NAME)
    assert Path(foreign).exists()
    peer.answer("GET", "/v1/runs", 200, LIST_DOC)
    with pytest.raises(api.TlsVerificationError):
        if mode == "sync":
            with api.Client(peer.url, token_file=token_file, ca_file=foreign) as producer:
                producer.list()
        else:

            async def go() -> None:
                async with api.AsyncClient(
                    peer.url, token_file=token_file, ca_file=foreign
                ) as producer:
                    await producer.list()

            asyncio.run(go())
    assert peer.requests == []


def test_the_host_name_is_verified(pki_set, token_file, tmp_path):
    """A certificate of the right CA that names another host is refused."""
    other = pki.issue_server_cert(pki_set.ca_dir, tmp_path / "other", ("other.example",))
    stranger = Peer(other)
    try:
        stranger.answer("GET", "/v1/runs", 200, LIST_DOC)
        with (
            api.Client(stranger.url, token_file=token_file, ca_file=pki_set.ca_file) as producer,
            pytest.raises(api.TlsVerificationError),
        ):
            producer.list()
        assert stranger.requests == []
    finally:
        stranger.close()


def test_nothing_listening_is_a_transport_error(pki_set, token_file, tmp_path):
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with (
        api.Client(
            f"https://127.0.0.1:{port}", token_file=token_file, ca_file=pki_set.ca_file, timeout_s=2
        ) as producer,
        pytest.raises(api.TransportError) as caught,
    ):
        producer.list()
    assert caught.value.reason == "connect_failed"


@pytest.mark.parametrize(
    "url",
    [
        "http://localhost:1",
        "localhost:1",
        "ftp://x",
        "https://user:pw@localhost",
        "https://localhost/?a=1",
        "https://",
    ],
)
def test_only_https_urls_are_accepted(token_file, url):
    with pytest.raises(api.ClientSetupError) as caught:
        api.Client(url, token_file=token_file)
    assert caught.value.field == "api"


def test_a_missing_ca_file_is_a_setup_error(tmp_path, token_file):
    with pytest.raises(api.ClientSetupError) as caught:
        api.Client("https://localhost", token_file=token_file, ca_file=tmp_path / "none.pem")
    assert caught.value.field == "caFile"


def test_a_base_url_prefix_is_kept(peer, pki_set, token_file):
    peer.answer("GET", "/prefix/v1/runs", 200, LIST_DOC)
    with api.Client(
        peer.url + "/prefix/", token_file=token_file, ca_file=pki_set.ca_file
    ) as producer:
        assert producer.list().next == "cursor-2"
    assert peer.requests[0].path == "/prefix/v1/runs"


# ------------------------------------------------------------------ the token


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660, 0o606])
def test_a_token_file_others_can_read_or_write_is_refused(peer, pki_set, token_file, token, mode):
    os.chmod(token_file, mode)
    with pytest.raises(api.ClientSetupError) as caught:
        sync_client(peer, pki_set, token_file)
    assert caught.value.field == "tokenFile" and "chmod 600" in str(caught.value)
    assert token not in str(caught.value)
    assert peer.requests == []


@pytest.mark.parametrize("mode", [0o600, 0o400])
def test_an_owner_only_token_file_is_accepted(peer, pki_set, token_file, mode):
    os.chmod(token_file, mode)
    peer.answer("GET", "/v1/runs", 200, LIST_DOC)
    with sync_client(peer, pki_set, token_file) as producer:
        assert producer.list().next == "cursor-2"


def test_a_symlinked_missing_or_malformed_token_file_is_refused(tmp_path, token_file, token):
    link = tmp_path / "link.token"
    link.symlink_to(token_file)
    wrong = tmp_path / "wrong.token"
    wrong.write_text("Bearer " + token + "\n")
    wrong.chmod(0o600)
    two = tmp_path / "two.token"
    two.write_text(token + "\n" + token + "\n")
    two.chmod(0o600)
    for path in (link, tmp_path / "missing", wrong, two, tmp_path):
        with pytest.raises(api.ClientSetupError) as caught:
            api.Client("https://localhost", token_file=path)
        assert caught.value.field == "tokenFile"
        assert token not in str(caught.value)
        assert token.split("_", 2)[2] not in str(caught.value)


def test_a_malformed_token_argument_is_refused_without_echoing_it():
    secret = "qlp_short_" + "x" * 40
    with pytest.raises(api.ClientSetupError) as caught:
        api.Client("https://localhost", token=secret)
    assert secret not in str(caught.value) and "x" * 40 not in str(caught.value)
    with pytest.raises(api.ClientSetupError):
        api.Client("https://localhost")  # neither token nor token_file


def test_the_token_is_in_no_repr_exception_or_log_line(peer, pki_set, token_file, token, caplog):
    caplog.set_level(logging.DEBUG)  # httpx and httpcore log every request at DEBUG
    peer.answer("POST", "/v1/runs", 401, error_body(401, "invalid_token"))
    peer.answer("GET", "/v1/runs", 200, LIST_DOC, delay_s=2)
    texts: list[str] = []
    with sync_client(peer, pki_set, token_file, timeout_s=0.5) as producer:
        texts.append(repr(producer))
        for action in (lambda: producer.enqueue("p/t"), producer.list):
            with pytest.raises(api.ClientError) as caught:
                action()
            texts += [str(caught.value), repr(caught.value)]
    async_producer = api.AsyncClient(peer.url, token=token, ca_file=pki_set.ca_file)
    texts.append(repr(async_producer))
    asyncio.run(async_producer.close())
    logged = [record.getMessage() for record in caplog.records]
    assert any("HTTP Request" in line for line in logged)  # the logs were captured
    secret = token.split("_", 2)[2]
    for text in texts + logged:
        assert secret not in text, text


# ------------------------------------------------------------------ the CLI


def qinglong_run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "qinglong", "run", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def target_flags(peer: Peer, pki_set: PkiSet, token_file: Path) -> list[str]:
    return ["--api", peer.url, "--token-file", str(token_file), "--ca-file", pki_set.ca_file]


def test_cli_enqueue_prints_the_answer_and_sends_the_same_request(peer, pki_set, token_file, token):
    peer.answer("POST", "/v1/runs", 201, {"runIds": [RUN_ID], "existing": False})
    done = qinglong_run(
        "enqueue",
        *target_flags(peer, pki_set, token_file),
        "--task",
        "proj/nightly",
        "--count",
        "1",
        "--priority",
        "4",
        "--not-before-ms",
        "99",
        "--key",
        "k",
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"runIds": [RUN_ID], "existing": False}
    (seen,) = peer.requests
    assert seen.headers["Authorization"] == f"Bearer {token}"
    assert json.loads(seen.body) == {
        "schema": api.ENQUEUE_SCHEMA,
        "task": "proj/nightly",
        "count": 1,
        "priority": 4,
        "notBeforeMs": 99,
        "key": "k",
    }
    assert token not in done.stdout + done.stderr


def test_cli_show_list_cancel_retry_print_the_documents(peer, pki_set, token_file):
    flags = target_flags(peer, pki_set, token_file)
    peer.answer("GET", f"/v1/runs/{RUN_ID}", 200, SHOW_DOC)
    peer.answer("POST", f"/v1/runs/{RUN_ID}/cancel", 200, SHOW_DOC)
    peer.answer("POST", f"/v1/runs/{RUN_ID}/retry", 200, SHOW_DOC)
    peer.answer("GET", "/v1/runs", 200, LIST_DOC)
    for command in ("show", "cancel", "retry"):
        done = qinglong_run(command, *flags, "--run", RUN_ID)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == SHOW_DOC
    done = qinglong_run(
        "list",
        *flags,
        "--task",
        TASK_ID,
        "--state",
        "queued",
        "running",
        "--limit",
        "5",
        "--after",
        "c",
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == LIST_DOC
    assert [(s.method, s.path) for s in peer.requests] == [
        ("GET", f"/v1/runs/{RUN_ID}"),
        ("POST", f"/v1/runs/{RUN_ID}/cancel"),
        ("POST", f"/v1/runs/{RUN_ID}/retry"),
        ("GET", "/v1/runs"),
    ]
    assert peer.requests[-1].query == [
        ("task", TASK_ID),
        ("state", "queued"),
        ("state", "running"),
        ("after", "c"),
        ("limit", "5"),
    ]


@pytest.mark.parametrize(
    "status,code", [(400, 2), (413, 2), (401, 1), (403, 1), (404, 1), (409, 1), (429, 1), (503, 1)]
)
def test_cli_api_errors_are_one_json_object_on_stderr(peer, pki_set, token_file, status, code):
    peer.answer(
        "POST",
        f"/v1/runs/{RUN_ID}/retry",
        status,
        error_body(status, "illegal_transition", {"field": "runId"}),
    )
    done = qinglong_run("retry", *target_flags(peer, pki_set, token_file), "--run", RUN_ID)
    assert done.returncode == code
    assert done.stdout == ""
    assert json.loads(done.stderr) == {
        "error": f"e{status}",
        "reason": "illegal_transition",
        "status": status,
        "detail": {"field": "runId"},
    }


def test_cli_bad_input_exits_2_before_sending(peer, pki_set, token_file):
    flags = target_flags(peer, pki_set, token_file)
    cases = [
        (["enqueue", *flags, "--task", "p/t", "--count", "two"], "count"),
        (["enqueue", *flags, "--task", "p/t", "--delay-ms", "1.5"], "delayMs"),
        (["show", *flags, "--run", "../x"], "runId"),
        (["list", *flags, "--limit", "ten"], "limit"),
        (["list", *flags, "--timeout-s", "0"], "timeoutS"),
        (["list", "--api", "http://localhost:1", "--token-file", str(token_file)], "api"),
    ]
    for argv, field_name in cases:
        done = qinglong_run(*argv)
        assert done.returncode == 2, (argv, done.stderr)
        error = json.loads(done.stderr)
        assert (error["error"], error["field"]) == ("invalid_input", field_name), error
    assert peer.requests == []


def test_cli_refuses_a_token_file_others_can_read(peer, pki_set, token_file, token):
    os.chmod(token_file, 0o644)
    done = qinglong_run("list", *target_flags(peer, pki_set, token_file))
    assert done.returncode == 2
    assert json.loads(done.stderr)["field"] == "tokenFile"
    assert token not in done.stderr and peer.requests == []


def test_cli_transport_errors_exit_1(peer, pki_set, token_file):
    foreign = str(pki_set.foreign_ca_dir / pki.CA_CERT_NAME)
    done = qinglong_run(
        "list", "--api", peer.url, "--token-file", str(token_file), "--ca-file", foreign
    )
    assert done.returncode == 1
    assert json.loads(done.stderr)["reason"] == "tls_verify_failed"
    peer.answer("GET", "/v1/runs", 200, LIST_DOC, delay_s=3)
    done = qinglong_run("list", *target_flags(peer, pki_set, token_file), "--timeout-s", "0.5")
    assert done.returncode == 1
    assert json.loads(done.stderr) == {
        "error": "unavailable",
        "reason": "timeout",
        "detail": json.loads(done.stderr)["detail"],
    }


def test_cli_run_log_bad_input_exits_2_before_sending(peer, pki_set, token_file):
    flags = target_flags(peer, pki_set, token_file)
    for argv, field_name in (
        (["--run", "../x"], "runId"),
        (["--run", RUN_ID, "--attempt", "0"], "attempt"),
        (["--run", RUN_ID, "--attempt", "one"], "attempt"),
    ):
        done = qinglong_run("log", *flags, *argv)
        assert done.returncode == 2, (argv, done.stderr)
        assert json.loads(done.stderr)["field"] == field_name
    assert peer.requests == []


def test_follow_stream_lines_are_pages_or_the_error_that_ended_it():
    page = {
        "schema": "qinglong/run-log@v1",
        "runId": RUN_ID,
        "attemptNumber": 1,
        "offset": 3,
        "nextOffset": 10,
        "text": "añadé",
        "storedBytes": 10,
        "logBytes": 12,
        "truncated": False,
        "complete": False,
        "ended": True,
    }
    parsed = api.parse_log_line(json.dumps(page))
    assert (parsed.offset, parsed.next_offset, parsed.finished) == (3, 10, True)
    assert parsed.trailer() == "[qinglong: log incomplete: 10 of 12 bytes stored]"
    with pytest.raises(api.Unauthorized) as info:
        api.parse_log_line(
            '{"schema": "qinglong/error@v1", "error": "unauthorized", "reason": "token_invalid"}'
        )
    assert info.value.reason == "token_invalid"
    for bad in (
        "not json",
        json.dumps({**page, "schema": "qinglong/run@v1"}),
        json.dumps({**page, "storedBytes": "9"}),
    ):
        with pytest.raises(api.ResponseError):
            api.parse_log_line(bad)


# ---------------------------------------------------------------- curl line


def test_the_curl_line_sends_what_the_client_sends(peer, pki_set, token_file, token):
    peer.answer("POST", "/v1/runs", 201, {"runIds": [RUN_ID], "existing": False})
    target = api.ApiTarget(url=peer.url, token_file=token_file, ca_file=Path(pki_set.ca_file))
    options: dict[str, Any] = {"count": 2, "priority": 1, "delay_ms": 10, "key": "it's ok"}
    line = api.curl_enqueue(target, "proj/nightly", **options)
    assert token.split("_", 2)[2] not in line
    assert f"$(cat {token_file})" in line
    done = subprocess.run(["bash", "-c", line], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"runIds": [RUN_ID], "existing": False}
    with api.Client(target.url, token_file=token_file, ca_file=target.ca_file) as producer:
        producer.enqueue("proj/nightly", **options)
    by_curl, by_client = peer.requests
    assert (by_curl.method, by_curl.path, by_curl.query, by_curl.body) == (
        by_client.method,
        by_client.path,
        by_client.query,
        by_client.body,
    )
    for header in ("Authorization", "Content-Type"):
        assert by_curl.headers[header] == by_client.headers[header]
    assert by_curl.headers["Authorization"] == f"Bearer {token}"


def test_the_curl_line_quotes_paths_with_spaces(peer, pki_set, tmp_path, token):
    folder = tmp_path / "a dir $HOME"
    folder.mkdir()
    token_path = folder / "tok en"
    fd = os.open(token_path, os.O_WRONLY | os.O_CREAT, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(token)
    peer.answer("POST", "/v1/runs", 201, {"runIds": [RUN_ID], "existing": False})
    line = api.curl_enqueue(api.ApiTarget(peer.url, token_path, Path(pki_set.ca_file)), "p/t")
    done = subprocess.run(["bash", "-c", line], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert peer.requests[0].headers["Authorization"] == f"Bearer {token}"


def test_building_the_command_line_loads_no_http_client():
    """`qinglong --help` and every other command work without the client extra."""
    script = (
        "import sys\nfrom qinglong.cli import build_parser\n"
        "build_parser(['run', 'list']).parse_args(['run', 'list', '--api', 'https://x',"
        " '--token-file', 'f'])\nprint('httpx' in sys.modules, "
        "'qinglong.client' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.split() == ["False", "False"]


def test_the_target_is_read_from_dev_env_json(peer, pki_set, token_file, tmp_path):
    env = tmp_path / "dev-env.json"
    env.write_text(
        json.dumps(
            {
                "dsn": "x",
                "api": {"url": peer.url, "caFile": pki_set.ca_file, "tokenFile": str(token_file)},
            }
        )
    )
    target = api.ApiTarget.from_dev_env(env)
    assert target == api.ApiTarget(peer.url, token_file, Path(pki_set.ca_file))
    peer.answer("GET", "/v1/runs", 200, LIST_DOC)
    with api.Client(target.url, token_file=target.token_file, ca_file=target.ca_file) as producer:
        assert producer.list().next == "cursor-2"
    for broken in ('{"dsn": "x"}', '{"api": {"url": "https://x"}}', "not json"):
        env.write_text(broken)
        with pytest.raises(api.ClientSetupError) as caught:
            api.ApiTarget.from_dev_env(env)
        assert caught.value.field == "devEnv"
    with pytest.raises(api.ClientSetupError):
        api.ApiTarget.from_dev_env(tmp_path / "missing.json")


@pytest.mark.parametrize(
    "options,field_name",
    [
        ({"timeout_s": 0}, "timeoutS"),
        ({"timeout_s": -1.0}, "timeoutS"),
        ({"connect_timeout_s": 0}, "connectTimeoutS"),
    ],
)
def test_timeouts_must_be_positive(token_file, options, field_name):
    with pytest.raises(api.ClientSetupError) as caught:
        api.Client("https://localhost", token_file=token_file, **options)
    assert caught.value.field == field_name
