"""A started attempt whose live log the tests write through the real append
function (ql.append_log, as the ingress calls it for `POST /v1/leases/log`),
and complete with a reported `logBytes` (tests/py/provision.py provisions the
rest through the SQL API)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

from qinglong.db import api
from tests.py.provision import Intent, Provisioner, Session

# After the starting ACK (version 1) the lease is at version 2.
STARTED_VERSION = 2


@dataclass
class LiveAttempt:
    prov: Provisioner
    session: Session
    intent: Intent
    run_id: str
    task_id: str
    stored: int = 0

    def append(self, text: str) -> dict[str, Any]:
        """Append `text` at the stored length; the function's answer."""
        answer = self.prov.call(
            api.append_log(
                **self.session.lease(self.intent),
                lease_version=STARTED_VERSION,
                offset=self.stored,
                chunk=text,
            )
        ).doc
        assert answer["status"] == "ok", answer
        self.stored = answer["storedBytes"]
        return answer

    def complete(self, log_bytes: int | None, outcome: str = "succeeded") -> None:
        exit_code = 0 if outcome == "succeeded" else 3
        result: dict[str, Any] = {
            "exitCode": exit_code,
            "durationMs": 5,
            "outputTail": "",
            "outputBytes": 0,
        }
        if log_bytes is not None:
            result["logBytes"] = log_bytes
        done = self.prov.call(
            api.complete_lease(
                **self.session.lease(self.intent),
                lease_version=STARTED_VERSION,
                outcome=outcome,
                exit_code=exit_code,
                result=result,
            )
        ).doc
        assert done["status"] == "ok", done


def start_attempt(
    conn: psycopg.Connection,
    *,
    project: str = "acme",
    task: str = "build",
    log_limit_bytes: int | None = None,
    prov: Provisioner | None = None,
) -> LiveAttempt:
    """A run of a new task, claimed and started (its starting ACK) by a new worker."""
    prov = prov or Provisioner(conn)
    task_id = prov.task(task, project=project)
    if log_limit_bytes is not None:
        prov.call(api.configure_task(task_id=task_id, log_limit_bytes=log_limit_bytes))
    (run_id,) = prov.enqueue(task_id)
    session = prov.session(prov.worker(f"{project}-{task}-worker"))
    intent = Intent()
    pulled = prov.pull(session, intent)
    assert pulled["status"] == "offered" and pulled["offer"]["candidate"]["runId"] == run_id, pulled
    ack = prov.call(api.ack_lease(**session.lease(intent), lease_version=1, phase="starting")).doc
    assert ack["status"] == "ok", ack
    return LiveAttempt(prov, session, intent, run_id, task_id)
