"""The producer API in `qinglong dev up|down` (SPEC §13.4).

`up` starts `qinglong api serve` detached, as a login that is a member of
`ql_producer` only (`qinglong_api`), with the dev ingress's server certificate
(issued by the dev CA, SANs localhost and 127.0.0.1) on an ephemeral port; makes
a token of the project `dev` with every scope (`admin token create`'s code: only
its digest reaches the database) into `DIR/api.token` (0600); and returns the
`api: {url, caFile, tokenFile}` section of dev-env.json. `down` stops it like the
ingress (the pid is checked against its start time and its config file).

    api.json      the API's config (0600: it holds the login's DSN);  api.pid
    api.token     the dev project's token (0600)
    logs/         api.log, api-audit.log
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from qinglong.local_stack import LocalStack

PROJECT = "dev"
CONFIG_FILE = "api.json"
TOKEN_FILE = "api.token"
READY_FILE = "api-ready.json"
START_TIMEOUT_S = 60.0


def _write_private(path: Path, text: str) -> None:
    """0600 from creation, replacing any previous file."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)


def start_dev_api(stack: LocalStack) -> dict[str, Any]:
    """Start the API (stack.launch records its pid before we wait), make the dev
    token; -> dev-env.json's `api` section."""
    from qinglong.admin_tokens import create_token
    from qinglong.service.producer_token import SCOPES

    state_dir = stack.root
    ready = state_dir / READY_FILE
    ready.unlink(missing_ok=True)
    config = {
        "dsn": stack.dsns.login("producer"),
        "certFile": str(stack.pki.cert_file),
        "keyFile": str(stack.pki.key_file),
        "host": "127.0.0.1",
        "port": 0,
        "adminPort": 0,
        "poolMaxSize": 4,
        "auditLog": str(state_dir / "logs" / "api-audit.log"),
        "readyFile": str(ready),
    }
    _write_private(state_dir / CONFIG_FILE, json.dumps(config, indent=2) + "\n")
    service = stack.launch(
        "api",
        [
            sys.executable,
            "-m",
            "qinglong",
            "api",
            "serve",
            "--processes",
            "1",
            "--config",
            str(state_dir / CONFIG_FILE),
        ],
        marker=state_dir / CONFIG_FILE,
    )
    try:
        found = stack.wait_ready(
            service, lambda: True if ready.exists() else None, START_TIMEOUT_S, 0.05
        )
    except TimeoutError:
        found = None
    if found is None:
        raise RuntimeError("the producer API did not start (see logs/api.log)")
    url = json.loads(ready.read_text(encoding="utf-8"))["apiUrl"]
    token = create_token(stack.dsns.login("runtime"), PROJECT, list(SCOPES), None)
    _write_private(state_dir / TOKEN_FILE, token["token"] + "\n")
    return {"url": url, "caFile": str(stack.pki.ca_file), "tokenFile": str(state_dir / TOKEN_FILE)}
