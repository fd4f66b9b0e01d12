"""Black-box: `qinglong dev up` -> admin publish + enqueue -> a pull over HTTPS using
only what dev-env.json names -> `qinglong dev down` leaves nothing running."""

from __future__ import annotations

import http.client
import json
import os
import socket
import ssl
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from qinglong.schemas.contract import validate
from tests.py.provision import new_token

COMMAND = {"schema": "qinglong/command@v1", "argv": ["echo", "hello"], "env": {}, "timeoutS": 30}
CAPABILITIES = {
    "schema": "qinglong/worker-capabilities@v1",
    "executors": ["remote-worker"],
    "labels": {},
    "runtimes": {},
    "slots": 1,
}


def qinglong(
    *args: str, timeout: float = 240, dsn: str | None = None
) -> subprocess.CompletedProcess[str]:
    # A DSN (dev up's hold passwords) goes through the environment, never argv.
    env = None if dsn is None else os.environ | {"QINGLONG_DSN": dsn}
    return subprocess.run(
        [sys.executable, "-m", "qinglong", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=env,
    )


def admin(*args: str, dsn: str) -> dict[str, Any]:
    result = qinglong("admin", *args, timeout=60, dsn=dsn)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


class EnvClient:
    """A stdlib HTTPS client configured from dev-env.json and nothing else."""

    def __init__(self, env: dict[str, Any]) -> None:
        url = urlsplit(env["ingressUrl"])
        assert url.scheme == "https" and url.hostname and url.port
        self.host, self.port = url.hostname, url.port
        worker = env["worker"]
        self.worker_id = worker["workerId"]
        self.credential = Path(worker["credentialFile"]).read_text().strip()
        self.context = ssl.create_default_context(cafile=env["caFile"])
        self.context.minimum_version = ssl.TLSVersion.TLSv1_3
        self.context.load_cert_chain(worker["certFile"], worker["keyFile"])

    def post(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        conn = http.client.HTTPSConnection(self.host, self.port, context=self.context, timeout=15)
        try:
            conn.request(
                "POST",
                path,
                body=json.dumps(body).encode(),
                headers={
                    "Content-Type": "application/json",
                    "Authorization": f"Bearer {self.credential}",
                },
            )
            response = conn.getresponse()
            return response.status, json.loads(response.read())
        finally:
            conn.close()


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _pull(env: dict[str, Any]) -> dict[str, Any]:
    client = EnvClient(env)
    status, session = client.post(
        "/v1/sessions",
        {
            "schema": "qinglong/session-open-request@v1",
            "workerId": client.worker_id,
            "capabilities": CAPABILITIES,
        },
    )
    assert status == 201, session
    status, offer = client.post(
        "/v1/offers/pull",
        {
            "schema": "qinglong/offer-pull-request@v1",
            "workerId": client.worker_id,
            "sessionId": session["sessionId"],
            "generation": session["generation"],
            "offerId": str(uuid.uuid4()),
            "leaseToken": new_token(),
        },
    )
    assert status == 200, offer
    return offer


def test_dev_env_publish_enqueue_pull_down(tmp_path: Path) -> None:
    state_dir = tmp_path / "dev"
    up = qinglong("dev", "up", "--state-dir", str(state_dir))
    pids: list[int] = []
    ports: list[int] = []
    try:
        assert up.returncode == 0, up.stderr
        env = json.loads((state_dir / "dev-env.json").read_text())
        state = json.loads((state_dir / "dev-state.json").read_text())
        pids = [int(state["ingressPid"]), int(state["pgPid"])]
        ports = [int(urlsplit(env[k]).port or 0) for k in ("ingressUrl", "adminUrl")]
        ports.append(int(state["pgPort"]))
        command_file = tmp_path / "command.json"
        command_file.write_text(json.dumps(COMMAND))
        task = admin(
            "task",
            "publish",
            "--project",
            "demo",
            "--name",
            "hello",
            "--command-file",
            str(command_file),
            dsn=env["dsn"],
        )
        runs = admin("run", "enqueue", "--task", task["taskId"], dsn=env["dsn"])
        offer = _pull(env)
        validate("qinglong/remote-execution-offer@v1", offer)
        assert offer["status"] == "offered"
        assert offer["candidate"]["runId"] == runs["runIds"][0]
        assert offer["contentDigest"] == task["contentDigest"]
    finally:
        down = qinglong("dev", "down", "--state-dir", str(state_dir), timeout=120)
    assert down.returncode == 0, down.stderr
    deadline = time.monotonic() + 10
    while (any(map(_alive, pids)) or any(map(_listening, ports))) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [pid for pid in pids if _alive(pid)] == []
    assert [port for port in ports if _listening(port)] == []
