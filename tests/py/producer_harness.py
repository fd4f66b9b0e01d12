"""A real producer API process (`qinglong api serve`) for tests: its own server
certificate, a login that is a member of ql_producer only, the audit and app
logs captured, and project tokens made through `admin token create`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

from qinglong.service import pki

ALL_SCOPES = "enqueue,read,cancel,retry,log"


@dataclass
class ApiProcess:
    url: str
    ca_file: Path
    log_file: Path
    process: subprocess.Popen[bytes]

    def request(
        self,
        method: str,
        path: str,
        token: str | None = None,
        *,
        body: Any = None,
        data: bytes | None = None,
        params: Any = None,
    ) -> requests.Response:
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        return requests.request(
            method,
            self.url + path,
            headers=headers,
            json=body,
            data=data,
            params=params,
            verify=str(self.ca_file),
            timeout=10,
        )

    def logs(self) -> str:
        return self.log_file.read_text(encoding="utf-8", errors="replace")


def api_login(conn: Any, group: str = "ql_producer") -> str:
    role = f"api_{uuid.uuid4().hex[:12]}"
    conn.execute(f"CREATE ROLE {role} LOGIN IN ROLE {group}")
    return role


def make_cert(directory: Path) -> tuple[Path, pki.CertFiles]:
    ca = pki.init_ca(directory / "ca")
    return ca.cert_file, pki.issue_server_cert(directory / "ca", directory / "server")


@contextmanager
def running_api(
    directory: Path, dsn: str, processes: int = 1, **extra: Any
) -> Iterator[ApiProcess]:
    ca_file, cert = make_cert(directory)
    ready = directory / "api-ready.json"
    config = directory / "api.json"
    config.write_text(
        json.dumps(
            {
                "dsn": dsn,
                "certFile": str(cert.cert_file),
                "keyFile": str(cert.key_file),
                "port": 0,
                "readyFile": str(ready),
                "logLevel": "DEBUG",
                **extra,
            }
        )
    )
    config.chmod(0o600)
    log_file = directory / "api.log"
    with log_file.open("wb") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "qinglong",
                "api",
                "serve",
                "--config",
                str(config),
                "--processes",
                str(processes),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 30
        while not ready.exists():
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError("api did not start: " + log_file.read_text())
            time.sleep(0.05)
        url = json.loads(ready.read_text())["apiUrl"]
        yield ApiProcess(url.replace("127.0.0.1", "localhost"), ca_file, log_file, process)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def admin(*args: str) -> dict[str, Any]:
    """`qinglong admin …` as a process; its one JSON line."""
    done = subprocess.run(
        [sys.executable, "-m", "qinglong", "admin", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def make_token(
    dsn: str, project: str, scopes: str = ALL_SCOPES, expires_in: str | None = None
) -> dict[str, Any]:
    args = ["token", "create", "--dsn", dsn, "--project", project, "--scope", scopes]
    if expires_in is not None:
        args += ["--expires-in", expires_in]
    return admin(*args)
