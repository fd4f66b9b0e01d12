"""qinglong.client, `qinglong run …` and the curl line against the real producer API.

A real `qinglong api serve` process (tests/py/producer_harness.py: its own server
certificate, a login that is a member of ql_producer only) on a real database;
a task is published into project `dev` with the admin CLI and project tokens are
made with `admin token create`. Runs are enqueued, shown, listed, cancelled and
retried through the blocking client, the asyncio client, the CLI and the curl
line, with real tokens (a read-only one and a revoked one included) — no test
double anywhere. The last test takes the newcomer's path: `dev up`, then the
client and the CLI from dev-env.json's `api` section.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from qinglong import client as api
from qinglong.db.migrator import bootstrap
from qinglong.throwaway_postgres import ThrowawayPostgres
from tests.py.producer_harness import ALL_SCOPES, api_login, running_api

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PROJECT = "dev"
TASK = f"{PROJECT}/client-e2e"


def qinglong(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "qinglong", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@dataclass(frozen=True)
class DevApi:
    admin_dsn: str
    target: api.ApiTarget
    task_id: str
    directory: Path

    def client(self, **kw: Any) -> api.Client:
        return api.Client(
            self.target.url, token_file=self.target.token_file, ca_file=self.target.ca_file, **kw
        )

    def async_client(self, **kw: Any) -> api.AsyncClient:
        return api.AsyncClient(
            self.target.url, token_file=self.target.token_file, ca_file=self.target.ca_file, **kw
        )

    def flags(self) -> list[str]:
        return [
            "--api",
            self.target.url,
            "--token-file",
            str(self.target.token_file),
            "--ca-file",
            str(self.target.ca_file),
        ]


def make_token(admin_dsn: str, directory: Path, scope: str, name: str) -> tuple[str, Path]:
    """`admin token create` as a process; the token written to a 0600 file."""
    created = qinglong(
        "admin",
        "token",
        "create",
        "--dsn",
        admin_dsn,
        "--project",
        PROJECT,
        "--scope",
        scope,
        timeout=60,
    )
    assert created.returncode == 0, created.stderr
    doc = json.loads(created.stdout)
    path = directory / name
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(doc["token"] + "\n")
    return doc["tokenId"], path


@pytest.fixture(scope="module")
def dev_api(
    pg_cluster: ThrowawayPostgres, migrated_template: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DevApi]:
    directory = tmp_path_factory.mktemp("api")
    name = f"ql_client_e2e_{os.getpid()}"
    admin_dsn = pg_cluster.create_database(name, template=migrated_template)
    bootstrap(admin_dsn)
    try:
        with psycopg.connect(admin_dsn, autocommit=True) as conn:
            login = api_login(conn)
        command = directory / "command.json"
        command.write_text(
            json.dumps(
                {"schema": "qinglong/command@v1", "argv": ["true"], "env": {}, "timeoutS": 60}
            )
        )
        published = qinglong(
            "admin",
            "task",
            "publish",
            "--dsn",
            admin_dsn,
            "--project",
            PROJECT,
            "--name",
            TASK.split("/")[1],
            "--command-file",
            str(command),
            timeout=60,
        )
        assert published.returncode == 0, published.stderr
        _, token_file = make_token(admin_dsn, directory, ALL_SCOPES, "producer.token")
        with running_api(directory, pg_cluster.dsn(name, user=login)) as served:
            target = api.ApiTarget(served.url, token_file, served.ca_file)
            yield DevApi(admin_dsn, target, json.loads(published.stdout)["taskId"], directory)
    finally:
        pg_cluster.drop_database(name)


def test_the_blocking_client_enqueues_shows_lists_cancels_and_retries(dev_api):
    with dev_api.client() as producer:
        queued = producer.enqueue(TASK, count=2, priority=3)
        assert len(queued.run_ids) == 2 and queued.existing is False
        by_id = producer.enqueue(dev_api.task_id, delay_ms=3_600_000)
        first = producer.enqueue(TASK, key="client-e2e-key")
        again = producer.enqueue(TASK, key="client-e2e-key")
        assert again == api.EnqueueResult(run_ids=first.run_ids, existing=True)

        doc = producer.show(queued.run_ids[0])
        assert doc.run.run_id == queued.run_ids[0] and doc.run.task_id == dev_api.task_id
        assert doc.run.state == "queued" and doc.run.priority == 3
        assert [a.number for a in doc.attempts] == [1]
        assert any(e.type for e in doc.events)
        later = producer.show(by_id.run_ids[0]).run
        assert later.not_before_ms is not None and later.queued_at_ms is not None
        assert later.not_before_ms - later.queued_at_ms >= 3_500_000

        seen: list[str] = []
        page = producer.list(task=TASK, state="queued", limit=2)
        while True:
            seen += [r.run_id for r in page.runs]
            assert all(r.task_id == dev_api.task_id for r in page.runs)
            if page.next is None:
                break
            page = producer.list(task=TASK, state="queued", limit=2, after=page.next)
        assert set(queued.run_ids + by_id.run_ids + first.run_ids) <= set(seen)

        cancelled = producer.cancel(queued.run_ids[1])
        assert cancelled.run.run_id == queued.run_ids[1] and cancelled.run.state == "cancelled"
        retried = producer.retry(queued.run_ids[1])
        assert retried.run.state == "queued" and [a.number for a in retried.attempts] == [1, 2]
        with pytest.raises(api.Conflict) as conflict:
            producer.retry(queued.run_ids[0])  # a queued run cannot be retried
        assert conflict.value.status == 409 and conflict.value.reason == "illegal_transition"
        with pytest.raises(api.NotFound):
            producer.show(str(uuid.uuid4()))
        with pytest.raises(api.BadRequest) as bad:
            producer.enqueue(TASK, count=0)
        assert bad.value.detail == {"field": "count"}


def test_the_asyncio_client_does_the_same(dev_api):
    async def flow() -> None:
        async with dev_api.async_client() as producer:
            queued = await producer.enqueue(TASK)
            (run_id,) = queued.run_ids
            assert (await producer.show(run_id)).run.state == "queued"
            page = await producer.list(task=dev_api.task_id, state=["queued", "cancelled"])
            assert run_id in [r.run_id for r in page.runs]
            assert (await producer.cancel(run_id)).run.state == "cancelled"
            assert (await producer.retry(run_id)).run.state == "queued"
            with pytest.raises(api.NotFound):
                await producer.cancel(str(uuid.uuid4()))

    asyncio.run(flow())


def test_scopes_wrong_and_revoked_tokens_raise_their_classes(dev_api):
    token_id, read_only = make_token(
        dev_api.admin_dsn, dev_api.directory, "read", "read-only.token"
    )
    with dev_api.client() as producer:
        (run_id,) = producer.enqueue(TASK).run_ids
    with api.Client(
        dev_api.target.url, token_file=read_only, ca_file=dev_api.target.ca_file
    ) as reader:
        assert reader.show(run_id).run.run_id == run_id
        with pytest.raises(api.Forbidden):
            reader.enqueue(TASK)
        with pytest.raises(api.Forbidden):
            reader.cancel(run_id)
        revoked = qinglong(
            "admin",
            "token",
            "revoke",
            "--dsn",
            dev_api.admin_dsn,
            "--token-id",
            token_id,
            timeout=60,
        )
        assert revoked.returncode == 0, revoked.stderr
        deadline = time.monotonic() + 5
        while True:  # a revoked token stops working within 5 s
            try:
                reader.show(run_id)
            except api.Unauthorized as exc:
                assert exc.status == 401
                break
            assert time.monotonic() < deadline, "the revoked token still works"
            time.sleep(0.2)
    wrong = dev_api.directory / "wrong.token"
    wrong.touch(mode=0o600)
    real = dev_api.target.token_file.read_text().strip()
    wrong.write_text(real[:-1] + ("A" if real[-1] != "A" else "B"))
    with (
        api.Client(
            dev_api.target.url, token_file=wrong, ca_file=dev_api.target.ca_file
        ) as stranger,
        pytest.raises(api.Unauthorized),
    ):
        stranger.list()


def test_the_cli_enqueues_shows_lists_cancels_and_retries(dev_api):
    flags = dev_api.flags()
    done = qinglong("run", "enqueue", *flags, "--task", TASK, "--count", "1", "--key", "cli-k")
    assert done.returncode == 0, done.stderr
    enqueued = json.loads(done.stdout)
    (run_id,) = enqueued["runIds"]
    assert enqueued["existing"] is False
    shown = qinglong("run", "show", *flags, "--run", run_id)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["run"]["runId"] == run_id
    listed = qinglong("run", "list", *flags, "--task", TASK, "--state", "queued")
    assert run_id in [r["runId"] for r in json.loads(listed.stdout)["runs"]]
    cancelled = qinglong("run", "cancel", *flags, "--run", run_id)
    assert json.loads(cancelled.stdout)["run"]["state"] == "cancelled"
    retried = qinglong("run", "retry", *flags, "--run", run_id)
    assert json.loads(retried.stdout)["run"]["state"] == "queued"
    refused = qinglong("run", "retry", *flags, "--run", run_id)
    assert refused.returncode == 1 and refused.stdout == ""
    assert json.loads(refused.stderr)["status"] == 409
    missing = qinglong("run", "show", *flags, "--run", str(uuid.uuid4()))
    assert missing.returncode == 1 and json.loads(missing.stderr)["status"] == 404
    bad = qinglong("run", "enqueue", *flags, "--task", TASK, "--count", "0")
    assert bad.returncode == 2 and json.loads(bad.stderr)["detail"] == {"field": "count"}
    secret = dev_api.target.token_file.read_text().strip()
    for result in (done, shown, listed, cancelled, retried, refused, missing, bad):
        assert secret not in result.stdout + result.stderr


def test_the_curl_line_enqueues_like_the_client(dev_api):
    line = api.curl_enqueue(dev_api.target, TASK, priority=7, key="curl-k")
    secret = dev_api.target.token_file.read_text().strip()
    assert secret not in line and f"$(cat {dev_api.target.token_file})" in line
    done = subprocess.run(["bash", "-c", line], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["existing"] is False
    with dev_api.client() as producer:
        # The same enqueue through the client finds the run curl made (same key, same task).
        assert producer.enqueue(TASK, priority=7, key="curl-k") == api.EnqueueResult(
            run_ids=answer["runIds"], existing=True
        )
        assert producer.show(answer["runIds"][0]).run.priority == 7


def test_dev_up_api_works_with_the_client_and_the_cli(tmp_path):
    """The newcomer's path: `dev up`, then the client built from dev-env.json's `api`
    and `qinglong run` with its url, tokenFile and caFile enqueue into project dev."""
    state_dir = tmp_path / "dev"
    up = qinglong("dev", "up", "--state-dir", str(state_dir), timeout=240)
    try:
        assert up.returncode == 0, up.stderr
        env = json.loads((state_dir / "dev-env.json").read_text())
        target = api.ApiTarget.from_dev_env(state_dir / "dev-env.json")
        command = tmp_path / "command.json"
        command.write_text(
            json.dumps(
                {"schema": "qinglong/command@v1", "argv": ["true"], "env": {}, "timeoutS": 60}
            )
        )
        published = qinglong(
            "admin",
            "task",
            "publish",
            "--dsn",
            env["runtimeDsn"],
            "--project",
            PROJECT,
            "--name",
            "dev-up-client",
            "--command-file",
            str(command),
            timeout=60,
        )
        assert published.returncode == 0, published.stderr
        task_id = json.loads(published.stdout)["taskId"]
        with api.Client(
            target.url, token_file=target.token_file, ca_file=target.ca_file
        ) as producer:
            (run_id,) = producer.enqueue(f"{PROJECT}/dev-up-client").run_ids
            assert producer.show(run_id).run.task_id == task_id
        flags = ["--api", target.url, "--token-file", str(target.token_file)]
        if target.ca_file is not None:
            flags += ["--ca-file", str(target.ca_file)]
        listed = qinglong("run", "list", *flags, "--task", task_id)
        assert listed.returncode == 0, listed.stderr
        assert [r["runId"] for r in json.loads(listed.stdout)["runs"]] == [run_id]
        secret = target.token_file.read_text().strip()
        assert secret not in up.stdout + listed.stdout + listed.stderr
    finally:
        qinglong("dev", "down", "--state-dir", str(state_dir), timeout=120)
