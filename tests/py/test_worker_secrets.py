"""The worker side of secrets (SPEC §14.3, §14.5), with real processes and files.

* The executor hands delivered values to the command's environment and masks
  them in everything it writes or keeps of the output (output.log, the output
  tail, the byte count), even when the command prints a value byte by byte.
* The lifecycle fetches the values after the journaled starting ACK and before
  the spawn, only for a command that names secrets; a 409 fails the start
  (nothing runs), a transient failure retries the fetch; the fetch does not
  change the lease version; no value ever reaches the journal, the work
  directory's files, the event log or the completion.
* The lease client's request body and answer handling.

The end-to-end test over real TLS with a real ingress is in
test_secrets_e2e.py.
"""

from __future__ import annotations

import copy
import hashlib
import io
import json
import shutil
import tempfile
import time
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from qinglong.schemas.contract import validate
from qinglong.worker.executor import (
    OUTPUT_NAME,
    ChildEnv,
    CommandSpec,
    SpawnFailed,
    _launch,
    spawn,
)
from qinglong.worker.journal import Journal
from qinglong.worker.lease_client import (
    LeaseClient,
    LeaseConflict,
    LeaseRef,
    LeaseUnavailable,
    SecretValues,
)
from qinglong.worker.masking import MASK
from qinglong.worker.run_as import Sandbox
from tests.py.test_worker_executor import Box, box, spec, wait_exit
from tests.py.test_worker_executor_lifecycle import (
    Bench,
    FakeLeases,
    command,
    entry_for,
    now_ms,
    sandbox_in,
)
from tests.py.test_worker_run import Resp, error

__all__ = ["box"]  # the fixture, shared with test_worker_executor.py

SECRET = "s3cr3t-Välue-0123456789"  # not ASCII: masked as its UTF-8 bytes
OTHER = "another-secret-value"
PYTHON = "python3"
SECRET_NAMES = {"API_KEY": "api-key", "DB_PASS": "db-pass"}  # ENV_NAME -> secret name

# Prints the value's digest (proof it reached the environment), then the value
# byte by byte with a flush and a pause after each (one pipe read per byte),
# then both values whole on stderr.
PRINT_SECRET = """
import hashlib, os, sys, time
value = os.environ["API_KEY"].encode()
print("sha256:" + hashlib.sha256(value).hexdigest(), flush=True)
out = sys.stdout.buffer
out.write(b"<")
for byte in value:
    out.write(bytes([byte])); out.flush(); time.sleep(0.01)
out.write(b">\\n"); out.flush()
sys.stderr.write("err " + os.environ["DB_PASS"] + " and " + os.environ["API_KEY"] + "\\n")
"""


def digest(value: str) -> str:
    return "sha256:" + hashlib.sha256(value.encode()).hexdigest()


def secret_command() -> CommandSpec:
    return replace(spec(PYTHON, "-c", PRINT_SECRET), secrets=dict(SECRET_NAMES))


# ------------------------------------------------------------------ executor


def test_a_printed_secret_is_masked_in_the_log_and_the_tail(box: Box) -> None:
    process = spawn(secret_command(), str(box.work), output_limit=1 << 20, sandbox=box.sandbox,
                    secret_env={"API_KEY": SECRET, "DB_PASS": OTHER})  # fmt: skip
    assert wait_exit(process).returncode == 0
    log = (box.work / OUTPUT_NAME).read_bytes()
    lines = log.decode().splitlines()
    assert digest(SECRET) in lines  # the value reached the command's environment
    assert "<[MASKED]>" in lines
    assert "err [MASKED] and [MASKED]" in lines
    for value in (SECRET, OTHER):
        assert value.encode() not in log
    result = process.result()
    assert SECRET not in result["outputTail"] and OTHER not in result["outputTail"]
    assert "<[MASKED]>" in result["outputTail"]
    assert result["outputBytes"] == len(log)  # counted after masking
    assert "s3cr3t" not in repr(process)


def test_a_secret_past_the_head_limit_is_masked_in_the_tail(box: Box) -> None:
    code = ("import os, sys; sys.stdout.write('x' * 5000); sys.stdout.flush();"
            " sys.stdout.write(os.environ['API_KEY'])")  # fmt: skip
    command_spec = replace(spec(PYTHON, "-c", code), secrets={"API_KEY": "k"})
    process = spawn(command_spec, str(box.work), output_limit=4096, sandbox=box.sandbox,
                    secret_env={"API_KEY": SECRET})  # fmt: skip
    assert wait_exit(process).returncode == 0
    result = process.result()
    assert result["outputTail"].endswith("x[MASKED]")
    assert result["outputBytes"] == 5000 + len(MASK)


def test_a_secret_value_with_nul_fails_the_spawn(box: Box) -> None:
    with pytest.raises(SpawnFailed) as failed:
        spawn(spec("true"), str(box.work), output_limit=1024, sandbox=box.sandbox,
              secret_env={"API_KEY": "abc\0defghij"})  # fmt: skip
    assert failed.value.reason == "secret_value_invalid"


def test_no_repr_shows_a_value(tmp_path: Path) -> None:
    launch = _launch(secret_command(), str(tmp_path), Sandbox(str(tmp_path)),
                     {"API_KEY": SECRET})  # fmt: skip
    assert isinstance(launch.env, ChildEnv) and launch.env["API_KEY"] == SECRET
    assert dict(launch.env)["API_KEY"] == SECRET  # what the supervisor execs with
    values = SecretValues({"API_KEY": SECRET})
    for shown in (repr(launch), str(launch.env), repr(values), str(values), f"{values}"):
        assert "s3cr3t" not in shown
    assert "API_KEY" in repr(values) and "API_KEY" in repr(launch.env)


# ------------------------------------------------------------------ lease client


def answer(values: dict[str, Any]) -> bytes:
    return json.dumps({"schema": "qinglong/lease-secrets@v1", "values": values}).encode()


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes
    retry_after_ms: int | None = None


def test_lease_client_secrets_request_and_answers() -> None:
    entry = entry_for(command("true"))
    ref = LeaseRef.from_lease(entry.lease)
    sent: list[tuple[str, dict, int]] = []
    replies: list[Any] = []

    def post(path: str, body: dict, limit: int) -> Any:
        sent.append((path, copy.deepcopy(body), limit))
        return replies.pop(0)

    client = LeaseClient(post)
    replies.append(Reply(200, answer({"API_KEY": SECRET})))
    values = client.secrets(ref, 3, ["API_KEY"])
    assert dict(values) == {"API_KEY": SECRET}
    path, body, limit = sent[-1]
    assert path == "/v1/leases/secrets" and limit >= 64 * 16 * 1024
    assert body == {"schema": "qinglong/lease-secrets-request@v1", "workerId": ref.worker_id,
                    "sessionId": ref.session_id, "generation": ref.generation,
                    "offerId": ref.offer_id, "leaseToken": entry.lease["leaseToken"],
                    "leaseVersion": 3}  # fmt: skip
    validate(body["schema"], body)

    replies.append(error(409, "lease_not_started"))
    with pytest.raises(LeaseConflict, match="lease_not_started"):
        client.secrets(ref, 3, ["API_KEY"])
    replies.append(Resp(503, b"{}", 1000))
    with pytest.raises(LeaseUnavailable):
        client.secrets(ref, 3, ["API_KEY"])
    for bad, reason in [
        (answer({}), "secrets_incomplete"),
        (answer({"API_KEY": SECRET, "EXTRA": SECRET}), "secrets_incomplete"),
        (answer({"API_KEY": 7}), "secrets_schema_invalid"),
        (answer({"API_KEY": "with\0nul-byte"}), "secrets_schema_invalid"),
        (json.dumps({"values": {"API_KEY": SECRET}}).encode(), "secrets_schema_invalid"),
        (
            b'{"schema": "qinglong/lease-secrets@v1", "values": {"API_KEY": "\\ud800-lone"}}',
            "secrets_invalid_json",
        ),
    ]:
        replies.append(Reply(200, bad))
        with pytest.raises(LeaseUnavailable) as unavailable:
            client.secrets(ref, 3, ["API_KEY"])
        assert unavailable.value.reason == reason and SECRET not in str(unavailable.value)


# ------------------------------------------------------------------ lifecycle


@dataclass
class SecretLeases(FakeLeases):
    """FakeLeases plus POST /v1/leases/secrets: answers only a started lease at
    its current version, and never changes the version."""

    values: dict[str, str] = field(default_factory=dict)
    refuse: str | None = None  # a 409 category for every fetch

    def secrets(self, ref: LeaseRef, version: int, names: Collection[str]) -> SecretValues:
        self.calls.append(("secrets", ref.offer_id, {"names": sorted(names)}))
        self.versions.append(("secrets", version))
        if self.on_call is not None:
            self.on_call("secrets", ref)
        failures = self.fail.get("secrets")
        if failures:
            raise failures.pop(0)
        if self.refuse is not None:
            raise LeaseConflict(self.refuse)
        lease = self.leases[ref.offer_id]
        if version != lease.version:
            raise LeaseConflict("stale_lease_version")
        if lease.started_at is None or lease.released is not None:
            raise LeaseConflict("lease_not_started")
        return SecretValues({name: self.values[SECRET_NAMES[name]] for name in names})


@pytest.fixture
def sbench(tmp_path: Path, run_as_user: str | None) -> Iterator[Bench]:
    journal = Journal.open(str(tmp_path / "journal"), refresher=False)
    reachable = Path(tempfile.mkdtemp(prefix="ql-bench-"))
    reachable.chmod(0o711)
    leases = SecretLeases(values={"api-key": SECRET, "db-pass": OTHER})
    b = Bench(tmp_path, journal, leases, io.StringIO(), sandbox_in(tmp_path, run_as_user),
              reachable)  # fmt: skip
    yield b
    if b.lifecycle is not None:
        b.lifecycle.abort()
    journal.close()
    shutil.rmtree(reachable, ignore_errors=True)


def secret_spec(code: str = PRINT_SECRET) -> dict[str, Any]:
    doc = command(PYTHON, "-c", code)
    doc["secrets"] = dict(SECRET_NAMES)
    return doc


def files_holding(root: Path, needles: list[bytes]) -> list[str]:
    """Every file under ``root`` whose bytes contain one of ``needles``."""
    found = []
    for path in root.rglob("*"):
        try:
            if path.is_file() and not path.is_symlink():
                data = path.read_bytes()
                if any(n in data for n in needles):
                    found.append(str(path))
        except OSError:
            continue
    return found


def run_watching(bench: Bench, needles: list[bytes], timeout: float = 20.0) -> list[str]:
    """Bench.run, scanning the journal and the work directory after every tick."""
    lc = bench.lifecycle
    assert lc is not None
    lc.sync()
    seen: set[str] = set()
    deadline = time.monotonic() + timeout
    while lc.jobs:
        assert time.monotonic() < deadline, bench.leases.calls
        lc.tick()
        seen.update(files_holding(bench.root / "journal", needles))
        seen.update(files_holding(bench.root / "work", needles))
        time.sleep(0.01)
    return sorted(seen)


def test_the_value_reaches_the_command_and_no_file_or_event_of_the_worker(sbench: Bench) -> None:
    entry = entry_for(secret_spec())
    sbench.admit(entry)
    sbench.make()
    needles = [SECRET.encode(), OTHER.encode()]
    assert run_watching(sbench, needles) == []
    leases = sbench.leases
    assert leases.kinds() == ["ack_starting", "secrets", "ack_running", "complete"]
    assert leases.detail("secrets") == {"names": ["API_KEY", "DB_PASS"]}
    # The fetch is fenced by the version the starting ACK answered, and does not
    # change it: the running ACK carries the same one.
    versions = dict((k, v) for k, v in leases.versions)
    assert versions["secrets"] == versions["ack_running"] == versions["ack_starting"] + 1
    assert leases.detail("complete") == {"outcome": "succeeded", "exitCode": 0, "reason": None}
    ((_, result),) = leases.results
    assert result is not None
    tail = result["outputTail"]
    assert digest(SECRET) in tail and "<[MASKED]>" in tail
    assert "err [MASKED] and [MASKED]" in tail
    assert SECRET not in json.dumps(result, ensure_ascii=False)
    work = sbench.root / "work" / entry.offer_id
    assert "<[MASKED]>" in (work / OUTPUT_NAME).read_text()
    assert files_holding(sbench.root, needles) == []
    events = sbench.out.getvalue()
    assert SECRET not in events and OTHER not in events
    assert "exec.secrets_delivered" in sbench.names()


def test_the_fetch_comes_after_the_journaled_starting_ack(sbench: Bench) -> None:
    entry = entry_for(secret_spec())
    states: list[str | None] = []

    def on_call(kind: str, ref: LeaseRef) -> None:
        if kind == "secrets":
            stored = sbench.journal.get(ref.offer_id)
            states.append(None if stored is None else stored.state)

    sbench.leases.on_call = on_call
    sbench.admit(entry)
    sbench.make()
    sbench.run()
    assert states == ["starting"]


def test_a_refused_fetch_fails_the_start_and_runs_nothing(sbench: Bench) -> None:
    leases = sbench.leases
    assert isinstance(leases, SecretLeases)
    leases.refuse = "pool_not_granted"
    marker = sbench.reachable / "ran"
    entry = entry_for(secret_spec(f"open({str(marker)!r}, 'w').write('x')"))
    sbench.admit(entry)
    sbench.make()
    sbench.run()
    assert leases.kinds() == ["ack_starting", "secrets", "ack_start_failed"]
    assert leases.detail("ack_start_failed") == {"reason": "secrets_unavailable"}
    assert not marker.exists()
    assert not (sbench.root / "work" / entry.offer_id / OUTPUT_NAME).exists()
    assert sbench.result(entry.offer_id) == {**sbench.result(entry.offer_id),
                                             "outcome": "start_failed",
                                             "reason": "secrets_unavailable"}  # fmt: skip
    failed = [e for e in sbench.events() if e["event"] == "exec.start_failed"]
    assert failed and failed[0]["category"] == "pool_not_granted"
    assert sbench.journal.offer_ids() == []


def test_a_transient_fetch_failure_is_retried_at_the_same_version(sbench: Bench) -> None:
    leases = sbench.leases
    leases.fail["secrets"] = [LeaseUnavailable("network"), LeaseUnavailable("http_503")]
    sbench.admit(entry_for(secret_spec()))
    sbench.make()
    sbench.run()
    assert leases.kinds() == ["ack_starting", "secrets", "secrets", "secrets", "ack_running",
                              "complete"]  # fmt: skip
    sent = [v for k, v in leases.versions if k == "secrets"]
    assert len(set(sent)) == 1
    assert leases.detail("complete")["outcome"] == "succeeded"
    retries = [e for e in sbench.events() if e["event"] == "exec.lease_retry"]
    assert [e["phase"] for e in retries] == ["spawn", "spawn"]


def test_a_command_without_secrets_never_fetches(sbench: Bench) -> None:
    sbench.admit(entry_for(command("true")))
    sbench.make()
    sbench.run()
    assert sbench.leases.kinds() == ["ack_starting", "ack_running", "complete"]


def test_shutdown_while_the_fetch_is_retried_fails_the_start(sbench: Bench) -> None:
    leases = sbench.leases
    leases.fail["secrets"] = [LeaseUnavailable("network")]
    entry = entry_for(secret_spec())
    sbench.admit(entry)
    lc = sbench.make()
    lc.sync()
    lc.tick()
    assert leases.kinds() == ["ack_starting", "secrets"]
    lc.shutdown()
    deadline = time.monotonic() + 10
    while lc.jobs and time.monotonic() < deadline:
        time.sleep(max(0, ((lc.next_due_ms() or now_ms()) - now_ms()) / 1000))
        lc.tick()
    assert leases.kinds() == ["ack_starting", "secrets", "ack_start_failed"]
    assert leases.detail("ack_start_failed") == {"reason": "worker_shutdown"}
