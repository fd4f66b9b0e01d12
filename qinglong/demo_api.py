"""The producer API in `qinglong demo` (SPEC §13.4, §13.5): the demo enqueues its
runs the way an application would — through `qinglong api serve` with a project
token, using `qinglong.client` — and prints the curl line that does the same.

The API runs as a login that is a member of `ql_producer` only, with the demo's
dev-CA server certificate; its config (holding that login's DSN) and the token
file are 0600 in the demo's working directory, and the token is never printed.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from qinglong.client import ApiTarget, Client
    from qinglong.demo import Demo

PRODUCER_ROLE = "qinglong_demo_producer"  # member of ql_producer only
API_START_S = 30.0
# What the demo's token may do: enqueue its runs and read them back.
SCOPES = ["enqueue", "read"]


@dataclass
class DemoApi:
    target: ApiTarget
    client: Client

    def close(self) -> None:
        self.client.close()


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)


def producer_dsn(demo: Demo) -> str:
    if demo.cluster is not None:
        return str(demo.cluster.ensure_login_role(PRODUCER_ROLE, "ql_producer", demo.database))
    from qinglong.console_cli import ensure_console_role

    return ensure_console_role(demo.admin_dsn, PRODUCER_ROLE, group="ql_producer")


def start_api(demo: Demo) -> DemoApi:
    """`qinglong api serve` (one process) and a token of the demo's project."""
    from qinglong.admin_tokens import create_token
    from qinglong.client import ApiTarget, Client
    from qinglong.demo import PROJECT

    pki = demo.stack.pki
    ready_file = demo.root / "api.ready.json"
    config: dict[str, Any] = {
        "dsn": producer_dsn(demo),
        "certFile": str(pki.cert_file),
        "keyFile": str(pki.key_file),
        "port": 0,
        "adminPort": 0,
        "poolMaxSize": 2,
        "auditLog": str(demo.root / "logs" / "api-audit.log"),
        "readyFile": str(ready_file),
        "logLevel": "WARNING",
    }
    config_path = demo.root / "api.json"
    _write_private(config_path, json.dumps(config))  # holds the producer login's DSN
    argv = [sys.executable, "-m", "qinglong", "api", "serve", "--config", str(config_path)]
    demo.api_child = demo.stack.launch("api", argv, marker=config_path)
    url = str(demo._wait_file(ready_file, demo.api_child, API_START_S)["apiUrl"])
    token_file = demo.root / "producer.token"
    token = create_token(demo.admin_dsn, PROJECT, SCOPES, None)
    _write_private(token_file, token["token"] + "\n")
    target = ApiTarget(url=url, token_file=token_file, ca_file=pki.ca_file)
    client = Client(target.url, token_file=target.token_file, ca_file=target.ca_file)
    demo.say(
        f"producer API {url} (project token {token['tokenId']} with scopes "
        f"{','.join(SCOPES)} in {token_file.name}, 0600); the runs are enqueued "
        "through it with qinglong.client"
    )
    return DemoApi(target, client)


def curl_line(api: DemoApi, task: str) -> str:
    from qinglong.client import curl_enqueue

    return curl_enqueue(api.target, task, count=1)
