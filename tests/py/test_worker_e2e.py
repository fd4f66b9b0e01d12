"""`qinglong worker run` black-box against a real ingress + PostgreSQL (`qinglong dev up`).

Runs are provisioned with `qinglong admin task publish` / `run enqueue`; the
database is inspected as the dev-env superuser. Each test cancels the runs it
enqueued, so a later test's worker never sees them.

Covered: inbox admission and idle (a), the three ADR-0110 crash windows forced
by SIGKILL plus a crash before the first send (b), SIGTERM drain (c), retries on
a broken wire reusing one offer id (d), `--dev-env … --slots 2` (e), session
replacement and a second owner of the journal.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.py.dsn_files import dsn_file

QL = [sys.executable, "-m", "qinglong"]
WORKER_TIMEOUT_S = 60
COMMAND = {"schema": "qinglong/command@v1", "argv": ["echo", "hi"], "env": {}, "timeoutS": 60}


# ------------------------------------------------------------------ environment


def _json_out(args: list[str], timeout: float = 120) -> dict[str, Any]:
    result = subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _dev_up(state_dir: Path, environ: dict[str, str] | None = None) -> dict[str, Any]:
    """`dev up`, then its full description from DIR/dev-env.json: stdout shows
    the DSNs without their passwords."""
    result = subprocess.run(
        [*QL, "dev", "up", "--state-dir", str(state_dir)],
        env=environ,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return json.loads((state_dir / "dev-env.json").read_text())


@pytest.fixture(scope="module")
def dev_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    state_dir = tmp_path_factory.mktemp("dev")
    try:
        yield _dev_up(state_dir)
    finally:
        subprocess.run([*QL, "dev", "down", "--state-dir", str(state_dir)], check=False,
                       capture_output=True, timeout=120)  # fmt: skip


@dataclass
class Admin:
    env: dict[str, Any]
    directory: Path
    runs: list[str] = field(default_factory=list)

    @property
    def dsn(self) -> str:
        return self.env["dsn"]

    @property
    def dsn_file(self) -> str:  # the DSN holds dev up's password: never in argv
        return dsn_file(self.directory, "admin.dsn", self.dsn)

    def enqueue(self, count: int = 1) -> list[str]:
        command_file = self.directory / "command.json"
        command_file.write_text(json.dumps(COMMAND))
        publish = ["task", "publish", "--project", "worker-e2e", "--name", "echo"]
        task = _json_out([*QL, "admin", *publish, "--dsn-file", self.dsn_file,
                          "--command-file", str(command_file)])  # fmt: skip
        out = _json_out([*QL, "admin", "run", "enqueue", "--dsn-file", self.dsn_file, "--task",
                         task["taskId"], "--count", str(count)])  # fmt: skip
        self.runs.extend(out["runIds"])
        return out["runIds"]

    def cancel_all(self) -> None:
        for run in self.runs:
            _json_out([*QL, "admin", "run", "cancel", "--dsn-file", self.dsn_file, "--run", run])

    def query(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            return conn.execute(sql, params).fetchall()

    def leases(self, run_id: str) -> list[str]:
        rows = self.query(
            "SELECT offer_id::text FROM ql_private.run_leases WHERE run_id = %s ORDER BY id",
            run_id,
        )
        return [r[0] for r in rows]

    def lease_exists(self, offer_id: str) -> bool:
        sql = "SELECT count(*) FROM ql_private.run_leases WHERE offer_id = %s"
        return self.query(sql, offer_id)[0][0] == 1

    def dispatched(self, run_id: str) -> list[str]:
        rows = self.query(
            "SELECT payload->>'offerId' FROM ql_private.events"
            " WHERE run_id = %s AND type = 'run.dispatched' ORDER BY id",
            run_id,
        )
        return [r[0] for r in rows]

    def session(self, session_id: str) -> tuple[str, int]:
        sql = "SELECT state, slots FROM ql_private.worker_sessions WHERE session_id = %s"
        return self.query(sql, session_id)[0]


@pytest.fixture
def admin(dev_env: dict[str, Any], tmp_path: Path) -> Iterator[Admin]:
    helper = Admin(dev_env, tmp_path)
    try:
        yield helper
    finally:
        helper.cancel_all()  # never leave a candidate for the next test's worker


# ------------------------------------------------------------------ the worker


def dev_args(env: dict[str, Any], journal: Path, *extra: str) -> list[str]:
    return [*QL, "worker", "run", "--dev-env", env["_file"], "--journal", str(journal), *extra]


@pytest.fixture
def env_file(dev_env: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / "dev-env.json"
    path.write_text(json.dumps(dev_env))
    return dict(dev_env, _file=str(path))


def events(stderr: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]


def run(args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=WORKER_TIMEOUT_S,
                          check=False, env=os.environ | env)  # fmt: skip


class Worker:
    """A background worker whose JSON log lines are collected as they arrive."""

    def __init__(self, args: list[str], **env: str) -> None:
        self.proc = subprocess.Popen(args, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                     text=True, env=os.environ | env)  # fmt: skip
        self.lines: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self._cond:
                with contextlib.suppress(ValueError):
                    self.lines.append(json.loads(line))
                self._cond.notify_all()

    def named(self, name: str) -> list[dict[str, Any]]:
        with self._cond:
            return [e for e in self.lines if e["event"] == name]

    def wait_for(self, name: str, count: int = 1, timeout: float = 20) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while len([e for e in self.lines if e["event"] == name]) < count:
                left = deadline - time.monotonic()
                assert left > 0 and self.proc.poll() is None, (name, self.lines)
                self._cond.wait(min(left, 0.2))
        return self.named(name)

    def stop(self, signum: int = signal.SIGTERM) -> int:
        self.proc.send_signal(signum)
        code = self.proc.wait(timeout=WORKER_TIMEOUT_S)
        self._reader.join(timeout=5)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@contextlib.contextmanager
def worker(args: list[str], **env: str) -> Iterator[Worker]:
    proc = Worker(args, **env)
    try:
        yield proc
    finally:
        proc.kill()


def inbox(journal: Path) -> list[str]:
    return sorted(p.name[:-5] for p in (journal / "inbox").glob("*.json"))


def pending(journal: Path) -> dict[str, Any] | None:
    path = journal / "pending-claim.json"
    return json.loads(path.read_text()) if path.exists() else None


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# ------------------------------------------------------------------ (a) admission


def test_pull_admits_the_offer_into_the_inbox(env_file: dict, admin: Admin, tmp_path: Path):
    (run_id,) = admin.enqueue()
    journal = tmp_path / "journal"
    result = run(dev_args(env_file, journal, "--max-offers", "1"))
    assert result.returncode == 0, result.stderr
    (offer_id,) = inbox(journal)
    assert pending(journal) is None
    assert mode(journal) == 0o700 and mode(journal / "inbox") == 0o700
    entry_path = journal / "inbox" / f"{offer_id}.json"
    assert mode(entry_path) == 0o600 and mode(journal / "owner.lock") == 0o600
    entry = json.loads(entry_path.read_text())
    assert entry["offerId"] == offer_id and entry["offer"]["candidate"]["runId"] == run_id
    assert entry["lease"]["offerId"] == offer_id and len(entry["lease"]["leaseToken"]) == 43
    assert admin.leases(run_id) == [offer_id] and admin.dispatched(run_id) == [offer_id]
    # Nothing secret in the log: neither the lease token nor the ql3w credential.
    credential = Path(env_file["worker"]["credentialFile"]).read_text().strip()
    assert entry["lease"]["leaseToken"] not in result.stderr
    assert credential not in result.stderr and credential.split("_")[-1] not in result.stderr
    accepted = [e for e in events(result.stderr) if e["event"] == "claim.accepted"]
    assert [(e["offerId"], e["runId"]) for e in accepted] == [(offer_id, run_id)]


def test_idle_leaves_no_entry_and_no_pending(env_file: dict, admin: Admin, tmp_path: Path):
    journal = tmp_path / "journal"
    result = run(dev_args(env_file, journal, "--exit-when-idle"))
    assert result.returncode == 0, result.stderr
    assert inbox(journal) == [] and pending(journal) is None
    idle = [e for e in events(result.stderr) if e["event"] == "claim.idle"]
    assert idle and idle[0]["reason"] == "no_candidates"


# ------------------------------------------------------------------ (b) crash windows


@pytest.mark.parametrize(
    "point",
    [
        "after_pull_response",  # claim committed, response lost before anything is written
        "after_offer_response",  # the same, known to be an offer (the demo's flaky worker)
        "after_inbox_write",  # inbox written, pending claim not cleared
        "before_send",  # intent durable, nothing sent yet
    ],
)
def test_crash_window_converges_on_the_same_offer(
    env_file: dict, admin: Admin, tmp_path: Path, point: str
):
    (run_id,) = admin.enqueue()
    journal = tmp_path / "journal"
    crashed = run(dev_args(env_file, journal, "--max-offers", "1"), QL_WORKER_CRASH_AT=point)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    intent = pending(journal)
    assert intent is not None
    offer_id = intent["offerId"]
    assert inbox(journal) == ([offer_id] if point == "after_inbox_write" else [])
    assert admin.lease_exists(offer_id) is (point != "before_send")

    restarted = run(dev_args(env_file, journal, "--max-offers", "1"))
    assert restarted.returncode == 0, restarted.stderr
    assert inbox(journal) == [offer_id] and pending(journal) is None
    assert admin.leases(run_id) == [offer_id]
    assert admin.dispatched(run_id) == [offer_id]
    resumed = [e for e in events(restarted.stderr) if e["event"] == "session.resumed"]
    assert resumed and resumed[0]["offerId"] == offer_id
    assert resumed[0]["sessionId"] == intent["sessionId"]


# ------------------------------------------------------------------ (c) drain


def test_sigterm_when_idle_exits_0_and_closes_the_session(
    env_file: dict, admin: Admin, tmp_path: Path
):
    journal = tmp_path / "journal"
    with worker(dev_args(env_file, journal)) as w:
        w.wait_for("claim.idle")
        assert w.stop() == 0
    (opened,) = w.named("session.opened")
    assert admin.session(opened["sessionId"])[0] == "closed"
    assert w.named("session.closed") and pending(journal) is None
    assert w.named("worker.stopped")[0]["reason"] == "sigterm"


def test_sigterm_without_execute_leaves_the_inbox_offer_leased(
    env_file: dict, admin: Admin, tmp_path: Path
):
    """SPEC §7: the drain never releases the leases of offers in the inbox."""
    (run_id,) = admin.enqueue()
    journal = tmp_path / "journal"
    with worker(dev_args(env_file, journal)) as w:
        (accepted,) = w.wait_for("claim.accepted")
        assert w.stop() == 0
    offer_id = accepted["offerId"]
    assert inbox(journal) == [offer_id]
    (opened,) = w.named("session.opened")
    assert admin.session(opened["sessionId"])[0] == "active"  # left to expire
    assert w.named("session.left_open") and not w.named("session.closed")
    released = admin.query("SELECT released_at, release_reason FROM ql_private.run_leases"
                           " WHERE offer_id = %s", offer_id)  # fmt: skip
    assert released == [(None, None)]
    assert admin.query("SELECT state FROM ql_private.runs WHERE id = %s", run_id) == [
        ("dispatching",)]  # fmt: skip


def test_sigterm_mid_claim_keeps_the_pending_claim(env_file: dict, admin: Admin, tmp_path: Path):
    (run_id,) = admin.enqueue()
    journal = tmp_path / "journal"
    with worker(dev_args(env_file, journal), QL_WORKER_PAUSE_AT="before_send") as w:
        w.wait_for("fault.pause")
        intent = pending(journal)
        assert intent is not None
        assert w.stop() == 0
    after = pending(journal)
    assert after is not None and after["offerId"] == intent["offerId"]
    assert after["leaseToken"] == intent["leaseToken"]
    assert inbox(journal) == [] and admin.leases(run_id) == []  # never sent
    (opened,) = w.named("session.opened")
    assert admin.session(opened["sessionId"])[0] == "closed"
    assert w.named("worker.stopped")[0]["pendingOfferId"] == intent["offerId"]


# ------------------------------------------------------------------ (d) broken wire


class FlakyProxy:
    """TCP proxy to the ingress: `forward`, `swallow` (server->client bytes are
    dropped: requests arrive, responses are lost) or `refuse` (connections reset)."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream = ("127.0.0.1", upstream_port)
        self.mode = "forward"
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def set_mode(self, new_mode: str) -> None:
        self.mode = new_mode
        if new_mode == "refuse":
            self._drop_all()

    def _drop_all(self) -> None:
        with self._lock:
            conns, self._conns = self._conns, []
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        self._drop_all()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self.mode == "refuse":
                client.close()
                continue
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._conns += [client, server]
            threading.Thread(target=self._pump, args=(client, server), daemon=True).start()

    def _pump(self, client: socket.socket, server: socket.socket) -> None:
        pairs = {client: server, server: client}
        try:
            while True:
                readable, _, _ = select.select(list(pairs), [], [], 0.1)
                for sock in readable:
                    data = sock.recv(65536)
                    if not data:
                        return
                    if sock is server and self.mode == "swallow":
                        continue  # the response is lost on the way back
                    pairs[sock].sendall(data)
        except (OSError, ValueError):
            return
        finally:
            client.close()
            server.close()


def write_config(env: dict[str, Any], path: Path, ingress_url: str, journal: Path) -> Path:
    worker_doc = env["worker"]
    config = {
        "ingressUrl": ingress_url,
        "workerId": worker_doc["workerId"],
        "certFile": worker_doc["certFile"],
        "keyFile": worker_doc["keyFile"],
        "caFile": env["caFile"],
        "credentialFile": worker_doc["credentialFile"],
        "journal": str(journal),
        "requestTimeoutS": 1,
        "cadence": {"idlePollMs": 200, "jitterMs": 0},
    }
    path.write_text(json.dumps(config))
    return path


def test_lost_responses_and_resets_retry_with_the_same_offer_id(
    env_file: dict, admin: Admin, tmp_path: Path
):
    from urllib.parse import urlsplit

    proxy = FlakyProxy(urlsplit(env_file["ingressUrl"]).port or 443)
    journal = tmp_path / "journal"
    config = write_config(env_file, tmp_path / "worker.json", f"https://127.0.0.1:{proxy.port}",
                          journal)  # fmt: skip
    args = [*QL, "worker", "run", "--config", str(config)]
    try:
        with worker(args) as w:
            w.wait_for("claim.idle")  # session open, next pull a few seconds away
            proxy.set_mode("swallow")
            (run_id,) = admin.enqueue()
            retries = w.wait_for("claim.retry", count=2, timeout=30)
            offer_id = retries[0]["offerId"]
            assert {e["offerId"] for e in retries} == {offer_id}
            assert admin.leases(run_id) == [offer_id]  # claimed; the answer never arrived
            proxy.set_mode("refuse")
            w.wait_for("claim.retry", count=3, timeout=30)
            assert w.stop() == 0
        assert w.named("session.close_failed")  # best effort, the wire is down
        intent = pending(journal)
        assert intent is not None and intent["offerId"] == offer_id and intent["attempts"] >= 3
        assert inbox(journal) == []

        proxy.set_mode("forward")
        restarted = run([*args, "--max-offers", "1"])
        assert restarted.returncode == 0, restarted.stderr
    finally:
        proxy.close()
    assert inbox(journal) == [offer_id] and pending(journal) is None
    assert admin.leases(run_id) == [offer_id] and admin.dispatched(run_id) == [offer_id]


# ------------------------------------------------------------------ (e) --dev-env --slots


MODULES_PROBE = (
    "import json, sys\n"
    "from qinglong.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n"
    "sys.exit(code)\n"
)


def test_dev_env_with_slots_2_and_no_server_code_loaded(
    env_file: dict, admin: Admin, tmp_path: Path
):
    journal = tmp_path / "journal"
    args = [sys.executable, "-c", MODULES_PROBE, *dev_args(env_file, journal, "--slots", "2",
                                                           "--exit-when-idle")[3:]]  # fmt: skip
    result = subprocess.run(args, capture_output=True, text=True, timeout=WORKER_TIMEOUT_S,
                            check=False)  # fmt: skip
    assert result.returncode == 0, result.stderr
    (opened,) = [e for e in events(result.stderr) if e["event"] == "session.opened"]
    assert opened["slots"] == 2
    assert admin.session(opened["sessionId"]) == ("closed", 2)
    rows = admin.query(
        "SELECT capabilities FROM ql_private.worker_sessions WHERE session_id = %s",
        opened["sessionId"],
    )
    assert rows[0][0]["slots"] == 2
    loaded = set(json.loads(result.stdout.strip().splitlines()[-1]))
    assert not loaded & {"aiohttp", "psycopg", "psycopg_pool", "db", "service"}


# ------------------------------------------------------------------ sessions and owners


def test_replaced_session_is_reopened_and_a_second_owner_is_refused(
    env_file: dict, admin: Admin, tmp_path: Path
):
    journal = tmp_path / "journal"
    with worker(dev_args(env_file, journal)) as w:
        w.wait_for("claim.idle")
        # Same journal: the owner lock refuses a second process (fail closed).
        second = run(dev_args(env_file, journal, "--exit-when-idle"))
        assert second.returncode == 1
        assert events(second.stderr)[-1]["error"] == "journal_locked"
        # Same worker identity, another journal: its session replaces ours.
        other = run(dev_args(env_file, tmp_path / "other", "--exit-when-idle"))
        assert other.returncode == 0, other.stderr
        w.wait_for("session.opened", count=2, timeout=20)
        lost = w.named("session.lost")
        assert lost and lost[0]["reason"] in ("session_replaced", "session_closed")
        assert w.stop() == 0
    first, second_session = w.named("session.opened")
    assert second_session["generation"] > first["generation"]


# ------------------------------------------------------------------ restarts keep the inbox


def aside(journal: Path) -> list[str]:
    return sorted(p.name[:-5] for p in (journal / "aside").glob("*.json"))


def inbox_runs(journal: Path, directory: str = "inbox") -> dict[str, str]:
    """offer id -> run id of every entry under ``directory``."""
    out = {}
    for path in (journal / directory).glob("*.json"):
        doc = json.loads(path.read_text())
        out[doc["offerId"]] = doc["lease"]["runId"]
    return out


def idle_after_last_offer(w: Worker) -> bool:
    names = [e["event"] for e in list(w.lines)]
    last = max(i for i, name in enumerate(names) if name == "claim.accepted")
    return "claim.idle" in names[last:]


def fill_and_kill(env_file: dict, journal: Path, count: int) -> Worker:
    """A worker without --execute takes ``count`` offers, goes idle and is SIGKILLed
    with no claim in flight (the next pull is >= idlePollMs away)."""
    with worker(dev_args(env_file, journal, "--slots", "32")) as w:
        w.wait_for("claim.accepted", count=count, timeout=60)
        deadline = time.monotonic() + 30
        while not idle_after_last_offer(w):  # the idle that settled the last claim
            assert time.monotonic() < deadline and w.proc.poll() is None, w.lines
            time.sleep(0.01)
        w.proc.send_signal(signal.SIGKILL)
        w.proc.wait(timeout=WORKER_TIMEOUT_S)
    assert pending(journal) is None  # the restart must find the inbox, not a claim
    assert len(inbox(journal)) == count
    return w


def lease_rows(admin: Admin, runs: list[str]) -> list[tuple[str, str, Any]]:
    return admin.query(
        "SELECT run_id::text, offer_id::text, release_reason FROM ql_private.run_leases"
        " WHERE run_id = ANY(%s::uuid[]) ORDER BY id", runs)  # fmt: skip


def test_restart_without_execute_resumes_the_inbox_session(
    env_file: dict, admin: Admin, tmp_path: Path
):
    """SPEC §6.4: SIGKILL, restart, restart: the same 20 entries, the same 20 live
    leases, the same session — never a second lease per run."""
    runs = admin.enqueue(20)
    journal = tmp_path / "journal"
    first = fill_and_kill(env_file, journal, 20)
    (opened,) = first.named("session.opened")
    before = inbox_runs(journal)
    assert sorted(before.values()) == sorted(runs)
    for _ in range(2):
        with worker(dev_args(env_file, journal, "--slots", "32")) as w:
            w.wait_for("claim.idle", timeout=30)
            (resumed,) = w.named("session.resumed")
            assert (resumed["sessionId"], resumed["generation"]) == (
                opened["sessionId"], opened["generation"])  # fmt: skip
            assert resumed["source"] == "inbox"
            assert not w.named("session.opened") and not w.named("claim.accepted")
            w.proc.send_signal(signal.SIGKILL)
            w.proc.wait(timeout=WORKER_TIMEOUT_S)
        assert inbox_runs(journal) == before and aside(journal) == []
    rows = lease_rows(admin, runs)
    assert len(rows) == 20 and {r[1] for r in rows} == set(before)
    assert all(r[2] is None for r in rows)  # all 20 still leased, none released
    assert admin.session(opened["sessionId"])[0] == "active"


def test_restart_after_the_session_expired_moves_dead_entries_aside(
    env_file: dict, admin: Admin, tmp_path: Path
):
    """The session lapsed while the worker was down: its 20 entries can never be
    used; they go to aside/ (0600 in a 0700 directory, not counted), and the 20
    runs, released when the new session opens, are taken again."""
    runs = admin.enqueue(20)
    journal = tmp_path / "journal"
    first = fill_and_kill(env_file, journal, 20)
    (opened,) = first.named("session.opened")
    old = inbox_runs(journal)
    admin.query("UPDATE ql_private.worker_sessions SET expires_at = now() - interval '1 second'"
                " WHERE session_id = %s RETURNING 1", opened["sessionId"])  # fmt: skip
    with worker(dev_args(env_file, journal, "--slots", "32")) as w:
        w.wait_for("claim.accepted", count=20, timeout=60)
        w.wait_for("claim.idle", timeout=30)
        assert w.stop() == 0
    (failed,) = w.named("session.resume_failed")
    assert failed["reason"] == "session_expired"
    (reopened,) = w.named("session.opened")
    assert reopened["generation"] > opened["generation"]
    moved = w.named("inbox.set_aside")
    assert sorted(e["offerId"] for e in moved) == sorted(old)
    assert {e["reason"] for e in moved} == {"session_replaced"}
    assert aside(journal) == sorted(old)
    assert mode(journal / "aside") == 0o700
    assert all(mode(p) == 0o600 for p in (journal / "aside").iterdir())
    new = inbox_runs(journal)
    assert not set(new) & set(old)
    assert sorted(new.values()) == sorted(runs)  # one usable entry per run
    rows = lease_rows(admin, runs)
    live = {r[1] for r in rows if r[2] is None}
    assert live == set(new)
    assert {r[2] for r in rows if r[1] in old} == {"session_replaced"}


def test_a_run_claimed_again_after_its_lease_expired_keeps_one_inbox_entry(
    env_file: dict, admin: Admin, tmp_path: Path
):
    """A long-lived worker without --execute: its unstarted lease expires (TTL 5 s)
    and the run is claimed again, by the same worker; each older entry of the run
    moves aside (superseded, or lease_expired when the probe saw it first)."""
    run_id = _ttl5_run(admin, tmp_path)
    journal = tmp_path / "journal"
    with worker(dev_args(env_file, journal, "--slots", "4")) as w:
        w.wait_for("claim.accepted", count=3, timeout=60)
        w.wait_for("inbox.set_aside", count=2, timeout=30)
        assert w.stop() == 0
    offers = admin.leases(run_id)
    assert len(offers) >= 3
    assert inbox(journal) == [offers[-1]]  # the newest claim only
    assert aside(journal) == sorted(offers[:-1])
    moved = w.named("inbox.set_aside")
    assert {e["reason"] for e in moved} <= {"superseded", "lease_expired"}
    rows = lease_rows(admin, [run_id])
    assert [r[2] for r in rows[:-1]] == ["expired"] * (len(rows) - 1) and rows[-1][2] is None


def _ttl5_run(admin: Admin, tmp_path: Path) -> str:
    command_file = tmp_path / "command.json"
    command_file.write_text(json.dumps(COMMAND))
    task = _json_out(
        [
            *QL,
            "admin",
            "task",
            "publish",
            "--project",
            "worker-e2e",
            "--name",
            "ttl5",
            "--dsn-file",
            admin.dsn_file,
            "--command-file",
            str(command_file),
        ]
    )
    _json_out([*QL, "admin", "task", "configure", "--dsn-file", admin.dsn_file, "--task",
               task["taskId"], "--lease-ttl-s", "5"])  # fmt: skip
    (run_id,) = _json_out([*QL, "admin", "run", "enqueue", "--dsn-file", admin.dsn_file,
                           "--task", task["taskId"], "--count", "1"])["runIds"]  # fmt: skip
    admin.runs.append(run_id)
    return run_id


def test_the_fence_probe_reads_a_lease_without_changing_it(
    env_file: dict, admin: Admin, tmp_path: Path
):
    """The keeper's probe against the real ingress: a live unstarted lease answers
    stale_lease_version (usable), a cancelled one a dead category; nothing is
    written. A worker then moves the dead entry aside."""
    from qinglong.worker.config import load_dev_env
    from qinglong.worker.inbox_keeper import DEAD_CATEGORIES, PROBE_VERSION
    from qinglong.worker.lease_client import LeaseClient, LeaseConflict, LeaseRef
    from qinglong.worker.runner import _transport

    run_id = _ttl5_run(admin, tmp_path)
    journal = tmp_path / "journal"
    assert run(dev_args(env_file, journal, "--max-offers", "1")).returncode == 0
    (offer_id,) = inbox(journal)
    entry = json.loads((journal / "inbox" / f"{offer_id}.json").read_text())
    config = load_dev_env(env_file["_file"], journal=str(journal), slots=None)
    transport = _transport(config)
    leases = LeaseClient(lambda path, body, limit: transport.post_json(
        path, body, response_limit=limit))  # fmt: skip
    ref = LeaseRef.from_lease(entry["lease"])
    version_sql = "SELECT lease_version, expires_at FROM ql_private.run_leases WHERE offer_id = %s"
    before = admin.query(version_sql, offer_id)
    try:
        with pytest.raises(LeaseConflict) as live:
            leases.heartbeat(ref, PROBE_VERSION)
        assert live.value.reason == "stale_lease_version"
        admin.cancel_all()
        with pytest.raises(LeaseConflict) as dead:
            leases.heartbeat(ref, PROBE_VERSION)
        assert dead.value.reason in DEAD_CATEGORIES
    finally:
        transport.close()
    assert admin.query(version_sql, offer_id) == before  # never applied
    with worker(dev_args(env_file, journal)) as w:
        (moved,) = w.wait_for("inbox.set_aside", timeout=30)
        assert w.stop() == 0
    assert moved["offerId"] == offer_id and moved["reason"] in DEAD_CATEGORIES
    assert inbox(journal) == [] and aside(journal) == [offer_id]
    assert admin.query("SELECT state FROM ql_private.runs WHERE id = %s", run_id) == [
        ("cancelled",)]  # fmt: skip
