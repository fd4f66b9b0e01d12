"""Executor isolation (SPEC §11), with real processes, real users and a real worker.

* The acceptance: a command that ``cat``\\s the worker's credential file, its key
  and ``inbox/*.json``, then starts ``setsid sleep 300 &``: permission denied for
  each, none of the secrets in the stored output, and no ``sleep 300`` left —
  when it exits, on timeout and on cancel. Once against the executor (fast),
  once end to end through ``qinglong worker run --execute --run-as`` (slow).
* What the sandbox is: the run-as identity (uid, gid, no supplementary groups,
  no capabilities — also for a non-root worker holding ambient CAP_SETUID/
  CAP_SETGID —, ``no_new_privs``), the run directory (0700, owned by the user,
  its usable HOME, removed afterwards, at any depth), the environment, file
  descriptors, double forks, and the worker's death (SIGKILL) ending it all.
* The start-time refusals of ``qinglong worker run`` (exit 2, one JSON line):
  any worker without ``--run-as``, unknown users, no privilege to switch (real
  capability sets of real processes), a secret readable by the run-as user
  (probed as that user), a runs directory the user cannot reach, ``--run-as``
  without ``--execute``.

The suite runs as root in CI; as another user the tests that need root skip.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from qinglong.worker import process_tree
from qinglong.worker.executor import OUTPUT_NAME, CommandSpec, Process, StopReason, spawn
from qinglong.worker.process_tree import SpawnFailed
from qinglong.worker.run_as import (
    CAP_SETGID,
    CAP_SETUID,
    RUNS_MODE_SHARED,
    RunAs,
    RunAsError,
    Sandbox,
    decide,
    effective_capabilities,
    may_switch,
    readable_by,
    resolve_user,
)
from tests.py.run_as_support import searchable_tmp
from tests.py.test_lifecycle_e2e import Env
from tests.py.test_worker_e2e import QL, _dev_up, _json_out

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")

CREDENTIAL = "ql3w_" + "S3CRETcredential" * 3
KEY = "-----BEGIN PRIVATE KEY-----\nS3CRETkeymaterialS3CRETkeymaterial\n-----END PRIVATE KEY-----\n"
LEASE_TOKEN = "S3CRETleaseTOKEN" * 2
BG_PID = re.compile(r"^bg=(\d+)$", re.M)


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_gone(pid: int, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]
    except OSError:
        return []


def wait_exit(process: Process, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while process.poll() is None:
        assert time.monotonic() < deadline, "the run did not end"
        time.sleep(0.02)
    process.join_output()


# ------------------------------------------------------------------ a worker's secrets


@dataclass(frozen=True)
class Secrets:
    """A worker's files as deployed: traversable parent, private files."""

    base: Path

    @property
    def credential(self) -> Path:
        return self.base / "credential"

    @property
    def key(self) -> Path:
        return self.base / "worker-key.pem"

    @property
    def journal(self) -> Path:
        return self.base / "journal"

    @property
    def work(self) -> Path:
        return self.base / "journal.work"

    @property
    def runs(self) -> Path:
        return self.base / "journal.runs"

    def script(self, then: str) -> str:
        return (f"cat {self.credential}; cat {self.key}; cat {self.journal}/inbox/*.json; "
                f"setsid sleep 300 & echo bg=$!; {then}")  # fmt: skip


@pytest.fixture
def secrets() -> Iterator[Secrets]:
    # Not pytest's tmp_path: its 0700 ancestors would deny everything by
    # themselves. Here only the files' own modes stand between the user and them.
    base = Path(tempfile.mkdtemp(prefix="ql-iso-"))
    base.chmod(0o711)
    s = Secrets(base)
    _private(s.credential, CREDENTIAL)
    _private(s.key, KEY)
    (s.journal / "inbox").mkdir(parents=True, mode=0o700)
    s.journal.chmod(0o700)
    _private(s.journal / "inbox" / "offer-0.json", json.dumps({"leaseToken": LEASE_TOKEN}))
    (s.work / "offer-1").mkdir(parents=True, mode=0o700)
    s.runs.mkdir()
    s.runs.chmod(RUNS_MODE_SHARED)
    yield s
    shutil.rmtree(base, ignore_errors=True)


def _private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)


def _user(run_as_user: str | None) -> RunAs:
    assert run_as_user is not None
    return resolve_user(run_as_user)


def _start(secrets: Secrets, user: RunAs, script: str, timeout_s: int = 30) -> Process:
    spec = CommandSpec(("sh", "-c", script), {}, None, timeout_s)
    return spawn(spec, str(secrets.work / "offer-1"), output_limit=1 << 20,
                 sandbox=Sandbox(str(secrets.runs), user))  # fmt: skip


def _assert_contained(output: str) -> None:
    denied = [line for line in output.splitlines() if line.endswith("Permission denied")]
    assert len(denied) == 3, output
    assert any("credential" in line for line in denied)
    assert any("worker-key.pem" in line for line in denied)
    assert any("inbox/*.json" in line for line in denied)
    for secret in (CREDENTIAL, "S3CRETkeymaterial", LEASE_TOKEN, "ql3w_"):
        assert secret not in output
    (pid,) = BG_PID.findall(output)
    assert wait_gone(int(pid)), f"`setsid sleep 300` ({pid}) survived: {cmdline(int(pid))}"


@needs_root
@pytest.mark.parametrize("ending", ["exit", "timeout", "cancel"])
def test_acceptance_secrets_unreadable_and_nothing_survives(
    secrets: Secrets, run_as_user: str | None, ending: str
) -> None:
    then = "exit 0" if ending == "exit" else "trap '' TERM; sleep 100"
    process = _start(secrets, _user(run_as_user), secrets.script(then), timeout_s=1)
    if ending != "exit":
        deadline = time.monotonic() + 5
        while "bg=" not in (secrets.work / "offer-1" / OUTPUT_NAME).read_text():
            assert time.monotonic() < deadline
            time.sleep(0.02)
        reason = StopReason.TIMEOUT if ending == "timeout" else StopReason.CANCELLED
        if ending == "timeout":
            while not process.timed_out():
                time.sleep(0.05)
        process.terminate(reason, kill_grace_s=0.3)  # the shell ignores SIGTERM
    wait_exit(process)
    result = process.result()
    _assert_contained(result["outputTail"])
    _assert_contained((secrets.work / "offer-1" / OUTPUT_NAME).read_text())
    assert not (secrets.runs / "offer-1").exists()  # the run's directory is gone


@needs_root
def test_the_command_has_the_run_as_identity_and_nothing_else(
    secrets: Secrets, run_as_user: str | None
) -> None:
    user = _user(run_as_user)
    script = (
        "grep -E '^(Uid|Gid|Groups|CapInh|CapPrm|CapEff|CapAmb|CapBnd|NoNewPrivs):' "
        "/proc/self/status; ls /proc/self/fd; stat -c '%u %a' .; echo HOME=$HOME; "
        'test -w "$HOME" && cd "$HOME" && touch home-file && echo home-usable'
    )
    process = _start(secrets, user, script)
    wait_exit(process)
    out = (secrets.work / "offer-1" / OUTPUT_NAME).read_text()
    fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    assert fields["Uid"].split() == [str(user.uid)] * 4
    assert fields["Gid"].split() == [str(user.gid)] * 4
    assert fields["Groups"].split() == []
    for cap in ("CapInh", "CapPrm", "CapEff", "CapAmb", "CapBnd"):  # root may empty all
        assert int(fields[cap], 16) == 0, (cap, fields[cap])
    assert fields["NoNewPrivs"].strip() == "1"
    lines = out.splitlines()
    # stdin, stdout, stderr and ls's own directory descriptor: nothing of the worker's.
    fds = [line for line in lines if line.isdigit()]
    assert fds[:3] == ["0", "1", "2"] and len(fds) <= 4, fds
    assert f"{user.uid} 700" in lines
    assert f"HOME={secrets.runs / 'offer-1'}" in lines
    assert "home-usable" in lines, out


@needs_root
def test_a_double_fork_and_a_setsid_grandchild_die_with_the_leader(
    secrets: Secrets, run_as_user: str | None
) -> None:
    script = (
        "(setsid sh -c 'sleep 300 & echo bg=$!; sleep 300' &) ; "
        "(sh -c 'sleep 300 & echo bg=$!' &) ; sleep 0.3; exit 0"
    )
    process = _start(secrets, _user(run_as_user), script)
    wait_exit(process)
    pids = [int(p) for p in BG_PID.findall(process.result()["outputTail"])]
    assert len(pids) == 2
    assert all(wait_gone(pid) for pid in pids), [cmdline(p) for p in pids]


@needs_root
def test_the_run_directory_is_removed_even_when_made_read_only(
    secrets: Secrets, run_as_user: str | None
) -> None:
    script = "mkdir -p a/b && touch a/b/f && chmod 0 a/b && chmod 500 a && exit 0"
    process = _start(secrets, _user(run_as_user), script)
    wait_exit(process)
    assert process.status is not None and process.status.returncode == 0
    assert list(secrets.runs.iterdir()) == []


@needs_root
def test_a_run_directory_deeper_than_the_recursion_limit_is_removed(
    secrets: Secrets, run_as_user: str | None
) -> None:
    depth = sys.getrecursionlimit() + 200
    script = (
        f"import os\nfor i in range({depth}):\n    os.mkdir('d')\n    os.chdir('d')\n"
        "    open('f', 'w').close()\n    os.chmod('..', 0o500 if i % 7 else 0o700)"
    )
    spec = CommandSpec(("/usr/bin/python3", "-c", script), {}, None, 60)
    process = spawn(spec, str(secrets.work / "offer-1"), output_limit=4096,
                    sandbox=Sandbox(str(secrets.runs), _user(run_as_user)))  # fmt: skip
    wait_exit(process)
    assert process.status is not None and process.status.returncode == 0, process.result()
    assert list(secrets.runs.iterdir()) == []


@needs_root
def test_a_leftover_run_directory_is_replaced_with_its_symlinks(
    secrets: Secrets, run_as_user: str | None
) -> None:
    # A leftover run directory (a killed supervisor's) with a symlink where cwd
    # wants a directory: it is the user's, so it is removed, and cwd is created
    # fresh inside the new one (never through the link).
    user = _user(run_as_user)
    leftover = secrets.runs / "offer-1"
    leftover.mkdir()
    (leftover / "out").symlink_to("/etc")
    os.chown(leftover, user.uid, user.gid)
    os.lchown(leftover / "out", user.uid, user.gid)
    spec = CommandSpec(("pwd",), {}, "out", 30)
    process = spawn(spec, str(secrets.work / "offer-1"), output_limit=1024,
                    sandbox=Sandbox(str(secrets.runs), user))  # fmt: skip
    wait_exit(process)
    assert (secrets.work / "offer-1" / OUTPUT_NAME).read_text().strip() == str(leftover / "out")
    assert not leftover.exists()


@needs_root
def test_a_leftover_owned_by_someone_else_fails_the_start(
    secrets: Secrets, run_as_user: str | None
) -> None:
    (secrets.runs / "offer-1").mkdir()  # root's: the run-as user cannot clear it
    (secrets.runs / "offer-1" / "keep").write_text("x")
    with pytest.raises(SpawnFailed) as exc:
        _start(secrets, _user(run_as_user), "exit 0")
    assert exc.value.reason == "work_dir_unusable"
    assert (secrets.runs / "offer-1" / "keep").exists()


# ------------------------------------------------------------------ who may switch


def test_refusal_rules_of_decide() -> None:
    both = (1 << CAP_SETUID) | (1 << CAP_SETGID)
    me = resolve_user("nobody")
    for euid, caps in ((0, 0), (1000, 0), (1000, both)):  # no worker runs commands unasked
        with pytest.raises(RunAsError) as exc:
            decide(None, euid=euid, capabilities=caps)
        assert exc.value.reason == "run_as_required"
        assert "--run-as USER" in exc.value.detail
    assert decide("root", euid=0, capabilities=0) is None  # explicit: tasks run as root
    assert decide("0", euid=0, capabilities=0) is None
    # Explicit: a non-root worker's own user, no isolation (warned at start).
    assert decide("nobody", euid=me.uid, capabilities=0) is None
    assert decide(str(me.uid), euid=me.uid, capabilities=both) is None
    cases = [
        ("root", 1000, both, "run_as_root_refused"),
        ("nobody", 1000, 0, "no_privilege_to_switch"),
        ("nobody", 1000, 1 << CAP_SETUID, "no_privilege_to_switch"),
        ("no-such-user-ql", 0, 0, "unknown_user"),
        ("4294967296", 0, 0, "unknown_user"),
    ]
    for run_as, euid, caps, reason in cases:
        with pytest.raises(RunAsError) as exc:
            decide(run_as, euid=euid, capabilities=caps)
        assert exc.value.reason == reason, (run_as, euid, caps)
    assert decide("nobody", euid=1000, capabilities=both) == me
    assert decide(str(me.uid), euid=0, capabilities=0) == me


@needs_root
@pytest.mark.parametrize("caps, expected", [(None, False), ("+setuid,+setgid", True),
                                            ("+setuid", False)])  # fmt: skip
def test_the_capability_check_reads_real_processes(
    run_as_user: str | None, tmp_path: Path, caps: str | None, expected: bool
) -> None:
    """A worker started as an unprivileged user, with or without the systemd
    unit's ambient capabilities: what /proc says it may do."""
    argv = ["setpriv", f"--reuid={run_as_user}", f"--regid={run_as_user}", "--clear-groups"]
    if caps is not None:
        argv += [f"--inh-caps={caps}", f"--ambient-caps={caps}"]
    proc = subprocess.Popen([*argv, "sleep", "30"])
    try:
        status = Path(f"/proc/{proc.pid}/status")
        deadline = time.monotonic() + 5
        while "sleep" not in Path(f"/proc/{proc.pid}/comm").read_text():
            assert time.monotonic() < deadline
            time.sleep(0.01)
        euid = int(status.read_text().split("Uid:")[1].split()[1])
        assert euid == _user(run_as_user).uid
        assert may_switch(euid, effective_capabilities(str(status))) is expected
    finally:
        proc.kill()
        proc.wait()


@needs_root
def test_readable_by_probes_as_the_user(secrets: Secrets, run_as_user: str | None) -> None:
    user = _user(run_as_user)
    open_file = secrets.base / "public.txt"
    open_file.write_text("x")
    open_file.chmod(0o644)
    paths = [str(secrets.credential), str(open_file), str(secrets.journal),
             str(secrets.base / "missing")]  # fmt: skip
    assert readable_by(user, paths) == [str(open_file)]
    secrets.credential.chmod(0o604)
    assert readable_by(user, paths) == [str(secrets.credential), str(open_file)]


# ------------------------------------------------------------------ `worker run` refusals


def _config(secrets: Secrets, **extra: Any) -> Path:
    doc = {
        "ingressUrl": "https://127.0.0.1:9", "workerId": "00000000-0000-4000-8000-000000000001",
        "certFile": str(secrets.base / "worker.pem"), "keyFile": str(secrets.key),
        "caFile": str(secrets.base / "ca.pem"), "credentialFile": str(secrets.credential),
        "journal": str(secrets.base / "new" / "fresh-journal"), **extra,
    }  # fmt: skip
    path = secrets.base / "worker.json"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(doc, handle)
    return path


def _worker_run(*args: str) -> tuple[int, list[dict[str, Any]]]:
    done = subprocess.run([*QL, "worker", "run", *args], capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip
    events = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    return done.returncode, events


def _failure(events: list[dict[str, Any]]) -> dict[str, Any]:
    (failed,) = [e for e in events if e["event"] == "worker.failed"]
    return failed


@needs_root
def test_execute_as_root_without_run_as_refuses_to_start(secrets: Secrets) -> None:
    code, events = _worker_run("--config", str(_config(secrets)), "--execute")
    assert code == 2
    failed = _failure(events)
    assert (failed["error"], failed["reason"]) == ("isolation_refused", "run_as_required")
    assert not (secrets.base / "new").exists()  # refused before anything else


@needs_root
def test_execute_refusals_name_the_problem(secrets: Secrets, run_as_user: str | None) -> None:
    config = str(_config(secrets))
    code, events = _worker_run("--config", config, "--execute", "--run-as", "no-such-user-ql")
    assert code == 2 and _failure(events)["reason"] == "unknown_user"
    code, events = _worker_run("--config", config, "--run-as", str(run_as_user))
    assert code == 2 and _failure(events)["reason"] == "missing_argument"
    assert "--run-as needs --execute" in _failure(events)["detail"]


@needs_root
@pytest.mark.parametrize("what", ["credential", "key", "inbox entry", "configuration"])
def test_a_secret_readable_by_the_run_as_user_refuses_the_start(
    secrets: Secrets, run_as_user: str | None, what: str
) -> None:
    journal = secrets.base / "new" / "fresh-journal"
    (journal / "inbox").mkdir(parents=True, mode=0o700)
    journal.chmod(0o700)
    entry = journal / "inbox" / "offer-9.json"
    _private(entry, json.dumps({"leaseToken": LEASE_TOKEN}))
    config = _config(secrets)
    leak = {"credential": secrets.credential, "key": secrets.key, "configuration": config,
            "inbox entry": entry}[what]  # fmt: skip
    leak.chmod(0o644)
    if what == "inbox entry":
        journal.chmod(0o711)  # the journal refuses this too, but the probe comes first
        (journal / "inbox").chmod(0o711)
    code, events = _worker_run("--config", str(config), "--execute", "--run-as", str(run_as_user))
    assert code == 2
    failed = _failure(events)
    assert failed["reason"] == "readable_by_run_as"
    assert str(leak) in failed["detail"] and "mode 0644" in failed["detail"]
    assert LEASE_TOKEN not in json.dumps(events) and CREDENTIAL not in json.dumps(events)


@needs_root
def test_run_as_passes_the_checks_and_prepares_the_runs_directory(
    secrets: Secrets, run_as_user: str | None
) -> None:
    """All private: the isolation checks pass and the worker goes on (to fail on
    the made-up certificate, which is the next thing it checks)."""
    config = _config(secrets)
    code, events = _worker_run("--config", str(config), "--execute", "--run-as", str(run_as_user))
    failed = _failure(events)
    assert failed["error"] == "config_error" and failed["reason"] == "credentials_unusable"
    (starting,) = [e for e in events if e["event"] == "worker.starting"]
    assert starting["runAs"] == run_as_user
    runs = Path(starting["runsDir"])
    assert runs == secrets.base / "new" / "fresh-journal.runs"  # parents made as needed
    st = runs.stat()
    assert st.st_uid == 0 and st.st_mode & 0o7777 == RUNS_MODE_SHARED
    code, events = _worker_run("--config", str(config), "--execute", "--run-as", "root")
    assert code == 2 and _failure(events)["reason"] == "credentials_unusable"
    assert [e for e in events if e["event"] == "worker.run_as_root"]
    (starting,) = [e for e in events if e["event"] == "worker.starting"]
    assert starting["runAs"] == "root"
    assert runs.stat().st_mode & 0o7777 == 0o700  # nobody else creates run directories


# ------------------------------------------------------------------ output cap


@needs_root
def test_the_output_on_disk_is_capped_and_the_tail_still_comes_back(
    secrets: Secrets, run_as_user: str | None
) -> None:
    spec = CommandSpec(("sh", "-c", "head -c 300000 /dev/zero | tr '\\0' x; echo END"), {}, None,
                       30)  # fmt: skip
    process = spawn(spec, str(secrets.work / "offer-1"), output_limit=4096,
                    sandbox=Sandbox(str(secrets.runs), _user(run_as_user)))  # fmt: skip
    wait_exit(process)
    data = (secrets.work / "offer-1" / OUTPUT_NAME).read_bytes()
    assert data.startswith(b"x" * 4096) and b"output truncated after 4096 bytes" in data
    assert len(data) < 4096 + 100
    result = process.result()
    assert result["outputBytes"] == 300000 + 4 and result["outputTail"].endswith("xxxEND\n")


# ------------------------------------------------------------------ end to end (slow)


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    state_dir = tmp_path_factory.mktemp("dev")
    doc = _dev_up(state_dir)
    # Not pytest's tmp_path (0700 ancestors would deny everything by themselves):
    # the worker's identity and journal sit in a directory others may only
    # search, so only the files' own modes keep the command out.
    base = searchable_tmp("ql-iso-e2e-")
    env = Env(doc, base)
    try:
        yield env
    finally:
        for worker in env.workers:
            worker.kill()
        subprocess.run([*QL, "dev", "down", "--state-dir", str(state_dir)], check=False,
                       capture_output=True, timeout=120)  # fmt: skip
        shutil.rmtree(base, ignore_errors=True)


@needs_root
@pytest.mark.slow
def test_acceptance_end_to_end_through_worker_run(dev: Env, run_as_user: str | None) -> None:
    """`worker run --execute --run-as`: the stored output of a command that goes
    for the worker's secrets (its real credential, key and inbox), on exit,
    timeout and cancel."""
    identity = dev.identity()
    journal = dev.directory / "journal"

    def script(then: str) -> list[str]:
        return ["sh", "-c", f"cat {identity['credentialFile']}; cat {identity['keyFile']}; "
                f"cat {journal}/inbox/*.json; setsid sleep 300 & echo bg=$!; {then}"]  # fmt: skip

    exits = dev.publish("iso-exit", script("exit 0"))
    times_out = dev.publish("iso-timeout", script("trap '' TERM; sleep 100"), timeout_s=3)
    cancelled = dev.publish("iso-cancel", script("sleep 100"), lease_ttl_s=6)
    runs = {name: dev.enqueue(task)[0] for name, task in
            (("exit", exits), ("timeout", times_out), ("cancel", cancelled))}  # fmt: skip
    worker = dev.worker(identity, journal, "--slots", "3")
    try:
        dev.wait_runs([runs["cancel"]], ("running",), timeout=60)
    except AssertionError:
        raise AssertionError(worker.lines) from None  # what the worker said
    dev.cancel(runs["cancel"])
    final = dev.wait_runs(list(runs.values()), timeout=60)
    assert final == {runs["exit"]: "succeeded", runs["timeout"]: "failed",
                     runs["cancel"]: "cancelled"}  # fmt: skip
    assert dev.attempts(runs["timeout"])[0][3] == "timeout"
    credential = Path(identity["credentialFile"]).read_text().strip()
    key_body = Path(identity["keyFile"]).read_text().splitlines()[1]
    for run_id in runs.values():
        shown = _json_out([*QL, "admin", "run", "show", "--dsn-file", dev.dsn_file,
                           "--run", run_id])  # fmt: skip
        tail = shown["attempts"][0]["result"]["outputTail"]
        denied = [line for line in tail.splitlines() if line.endswith("Permission denied")]
        assert len(denied) == 3, tail
        for secret in (credential, key_body, "leaseToken", "ql3w_"):
            assert secret not in tail
        (pid,) = BG_PID.findall(tail)
        assert wait_gone(int(pid)), f"`setsid sleep 300` survived run {run_id}"


def test_config_runs_dir_and_output_cap(tmp_path: Path) -> None:
    from qinglong.worker.config import OUTPUT_LIMIT_DEFAULT, ConfigError, load_config_file

    doc = {
        "ingressUrl": "https://127.0.0.1:8443",
        "workerId": "00000000-0000-4000-8000-000000000001",
        "certFile": "c.pem",
        "keyFile": "k.pem",
        "caFile": "ca.pem",
        "credentialFile": "cred",
        "journal": "j",
    }
    path = tmp_path / "w.json"
    path.write_text(json.dumps(doc))
    plain = load_config_file(str(path), journal=None, slots=None, execute=True)
    assert plain.runs_dir == str(tmp_path / "j") + ".runs"
    assert plain.executor.output_limit_bytes == OUTPUT_LIMIT_DEFAULT == 64 << 20
    assert plain.executor.sandbox is None  # only `worker run` decides it, never a file
    path.write_text(json.dumps(dict(doc, executor={"runsDir": "r", "outputLimitBytes": 1 << 30})))
    tuned = load_config_file(str(path), journal=None, slots=None, execute=True)
    assert tuned.runs_dir == str(tmp_path / "r") and tuned.executor.output_limit_bytes == 1 << 30
    for bad in ({"runsDir": ""}, {"outputLimitBytes": (1 << 30) + 1}, {"sandbox": {}}):
        path.write_text(json.dumps(dict(doc, executor=bad)))
        with pytest.raises(ConfigError):
            load_config_file(str(path), journal=None, slots=None)


@needs_root
def test_without_a_sandbox_root_never_spawns(secrets: Secrets) -> None:
    """Fail closed: the executor's call without a sandbox keeps the worker's
    identity, which for root would run the task as root: refused."""
    with pytest.raises(SpawnFailed) as exc:
        spawn(CommandSpec(("true",), {}, None, 30), str(secrets.work / "offer-1"), output_limit=1)
    assert exc.value.reason == "run_as_required"


@needs_root
def test_a_runs_directory_the_run_as_user_cannot_reach_refuses_the_start(
    secrets: Secrets, run_as_user: str | None
) -> None:
    """systemd's default StateDirectoryMode=0700 above the runs directory: the
    run's directory (its HOME) would be out of the user's reach."""
    (secrets.base / "new").mkdir(mode=0o700)
    config = _config(secrets)
    code, events = _worker_run("--config", str(config), "--execute", "--run-as", str(run_as_user))
    assert code == 2
    failed = _failure(events)
    assert (failed["error"], failed["reason"]) == ("isolation_refused", "runs_dir_unreachable")
    assert str(secrets.base / "new" / "fresh-journal.runs") in failed["detail"]
    assert "0711" in failed["detail"]
    (secrets.base / "new").chmod(0o711)  # as documented: the start goes on
    code, events = _worker_run("--config", str(config), "--execute", "--run-as", str(run_as_user))
    assert _failure(events)["reason"] == "credentials_unusable"


@needs_root
def test_a_runs_directory_that_is_not_the_workers_refuses_the_start(
    secrets: Secrets, run_as_user: str | None
) -> None:
    config = _config(secrets)
    runs = secrets.base / "new" / "fresh-journal.runs"
    runs.parent.mkdir()
    runs.symlink_to(secrets.base)  # the credential's directory: not apart at all
    code, events = _worker_run("--config", str(config), "--execute", "--run-as", str(run_as_user))
    assert code == 2 and _failure(events)["reason"] == "runs_dir_not_apart"
    runs.unlink()
    (secrets.base / "elsewhere").mkdir()
    runs.symlink_to(secrets.base / "elsewhere")
    code, events = _worker_run("--config", str(config), "--execute", "--run-as", str(run_as_user))
    assert code == 2 and _failure(events)["reason"] == "runs_dir_unusable"
    runs.unlink()
    runs.mkdir()
    user = _user(run_as_user)
    os.chown(runs, user.uid, user.gid)  # the run-as user's own: it could plant anything
    code, events = _worker_run("--config", str(config), "--execute", "--run-as", str(run_as_user))
    assert code == 2 and _failure(events)["reason"] == "runs_dir_unusable"
    assert str(runs) in _failure(events)["detail"]


# ------------------------------------------------------------------ the worker's death


_DYING_WORKER = """
import sys, time
from qinglong.worker.executor import CommandSpec, spawn
from qinglong.worker.run_as import Sandbox, resolve_user
runs, work, user = sys.argv[1:4]
spec = CommandSpec(("sh", "-c", "sleep 300 & echo bg=$!; sleep 300"), {}, None, 600)
process = spawn(spec, work, output_limit=4096, sandbox=Sandbox(runs, resolve_user(user)))
print(process.pid, flush=True)
time.sleep(600)
"""


@needs_root
def test_the_supervisor_and_its_tree_die_with_the_worker(
    secrets: Secrets, run_as_user: str | None
) -> None:
    """A worker SIGKILLed mid-run: the parent-death signal, armed after the
    supervisor took the run-as identity (a uid change clears it), ends the
    supervisor and everything the command started."""
    work = secrets.work / "offer-1"
    worker = subprocess.Popen(
        [sys.executable, "-c", _DYING_WORKER, str(secrets.runs), str(work), str(run_as_user)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert worker.stdout is not None
        supervisor = int(worker.stdout.readline())
        deadline = time.monotonic() + 10
        while not BG_PID.search((work / OUTPUT_NAME).read_text()):
            assert time.monotonic() < deadline, "the command did not start"
            time.sleep(0.02)
        (bg,) = BG_PID.findall((work / OUTPUT_NAME).read_text())
    finally:
        worker.kill()
        worker.wait()
    assert wait_gone(supervisor), f"the supervisor outlived the worker: {cmdline(supervisor)}"
    assert wait_gone(int(bg)), f"`sleep 300` outlived the worker: {cmdline(int(bg))}"


# ------------------------------------------------------------------ a non-root worker


_CAPABLE_WORKER = """
import sys
sys.path.insert(0, sys.argv[1])
from process_tree import Launch, start
script = "grep -E '^(Uid|Cap(Inh|Prm|Eff|Amb)):' /proc/self/status"
handle = start(Launch(argv=("sh", "-c", script), env={"PATH": "/usr/bin:/bin"},
                      runs_dir=sys.argv[2], run_name="r1", cwd_parts=(),
                      uid=int(sys.argv[3]), gid=int(sys.argv[4])))
sys.stdout.write(handle.stdout.read().decode())
sys.exit(handle.wait(30))
"""


def _unused_uid() -> int:
    import pwd

    taken = {entry.pw_uid for entry in pwd.getpwall()}
    return next(uid for uid in range(61000, 62000) if uid not in taken)


@needs_root
@pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) is missing")
def test_a_worker_with_ambient_capabilities_leaves_none_to_the_command(
    secrets: Secrets, run_as_user: str | None
) -> None:
    """The documented systemd unit: a non-root worker with CAP_SETUID and
    CAP_SETGID (ambient). Its uid changes never pass through 0, so the kernel
    clears nothing by itself: the command must still start with no capability.
    The worker here is the system python with a readable copy of the supervisor
    module (the suite's own interpreter may sit in a directory only root reads)."""
    user = _user(run_as_user)
    worker_uid = _unused_uid()
    module_dir = secrets.base / "module"
    module_dir.mkdir(mode=0o755)
    shutil.copy(Path(process_tree.__file__), module_dir / "process_tree.py")
    (module_dir / "process_tree.py").chmod(0o644)
    os.chown(secrets.runs, worker_uid, worker_uid)  # the worker's own runs directory
    done = subprocess.run(
        ["setpriv", f"--reuid={worker_uid}", f"--regid={worker_uid}", "--clear-groups",
         "--inh-caps=+setuid,+setgid", "--ambient-caps=+setuid,+setgid",
         "/usr/bin/python3", "-c", _CAPABLE_WORKER, str(module_dir), str(secrets.runs),
         str(user.uid), str(user.gid)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    fields = dict(line.split(":", 1) for line in done.stdout.splitlines())
    assert fields["Uid"].split() == [str(user.uid)] * 4, done.stdout
    for cap in ("CapInh", "CapPrm", "CapEff", "CapAmb"):
        assert int(fields[cap], 16) == 0, (cap, done.stdout)


# ------------------------------------------------------------------ cleanup in batches


_LEFTOVERS = """
import json, subprocess, sys
from qinglong.worker.process_tree import PR_SET_CHILD_SUBREAPER, _Prctl, descendants, kill_tree
assert _Prctl()(PR_SET_CHILD_SUBREAPER, 1)
pids_file, count = sys.argv[1], int(sys.argv[2])
# The command's leader leaves `count` double-forked, setsid sleepers and exits.
leader = subprocess.Popen(["sh", "-c", f'for i in $(seq {count}); do '
                           f'setsid sh -c "sleep 600 & echo \\\\$!" >> {pids_file}; done'])
leader.wait()
scans = []
def counting(root):
    found = descendants(root)
    scans.append(len(found))
    return found
print(json.dumps({"scans": kill_tree(__import__("os").getpid(), counting), "found": scans}))
"""


def test_cleanup_kills_and_reaps_every_leftover_of_one_scan(tmp_path: Path) -> None:
    """The supervisor's cleanup after its leader exited: ~300 orphans (setsid,
    double fork, re-parented to the subreaper) are all killed and reaped from
    one /proc scan, not one scan per process; none survives."""
    pids_file = tmp_path / "pids"
    done = subprocess.run([sys.executable, "-c", _LEFTOVERS, str(pids_file), "300"],
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    pids = [int(p) for p in pids_file.read_text().split()]
    assert len(pids) == 300
    assert out["found"][0] >= 300  # the first scan saw them all
    assert out["scans"] <= 3 and len(out["found"]) == out["scans"], out  # was 301 scans
    assert all(wait_gone(pid) for pid in pids)


# ------------------------------------------------------------------ runsDir apart, probes last


def _apart_doc(base: Path, **executor: str) -> dict[str, Any]:
    """Config in base/conf, journal and work directory in base/state, credential in
    base/secret, key in base/keys (absolute paths)."""
    return {
        "ingressUrl": "https://127.0.0.1:8443",
        "workerId": "00000000-0000-4000-8000-000000000001",
        "certFile": str(base / "keys" / "c.pem"), "keyFile": str(base / "keys" / "k.pem"),
        "caFile": str(base / "ca.pem"), "credentialFile": str(base / "secret" / "cred"),
        "journal": str(base / "state" / "j"),
        "executor": {"workDir": str(base / "state" / "work"),
                     **{k: str(base / v) for k, v in executor.items()}},
    }  # fmt: skip


@pytest.mark.parametrize(("runs_dir", "relation", "what"), [
    ("state/j", "is", "journal"),
    ("state/j/runs", "lies inside", "journal"),
    ("state", "contains", "journal"),
    ("state/work", "is", "work directory"),
    ("state/work/runs", "lies inside", "work directory"),
    ("conf", "is", "configuration directory"),
    ("secret", "is", "credential directory"),
    ("keys", "is", "key directory"),
    (".", "contains", "configuration directory"),
])  # fmt: skip
def test_runs_dir_must_lie_apart_from_the_workers_files(
    tmp_path: Path, runs_dir: str, relation: str, what: str
) -> None:
    from qinglong.worker.config import ConfigError, load_config_file

    (tmp_path / "conf").mkdir()
    path = tmp_path / "conf" / "w.json"
    doc = _apart_doc(tmp_path, runsDir=runs_dir)
    if runs_dir == ".":  # only the configuration's directory below it
        doc.update(journal="/var/lib/ql-elsewhere/j", credentialFile="/etc/ql-elsewhere/cred",
                   keyFile="/etc/ql-elsewhere/k.pem")  # fmt: skip
        doc["executor"]["workDir"] = "/var/lib/ql-elsewhere/work"
    path.write_text(json.dumps(doc))
    with pytest.raises(ConfigError) as exc:
        load_config_file(str(path), journal=None, slots=None, execute=True)
    assert exc.value.reason == "runs_dir_not_apart"
    assert exc.value.detail.startswith(f"executor.runsDir {os.path.normpath(tmp_path / runs_dir)} ")
    assert f" {relation} the {what} " in exc.value.detail
    load_config_file(str(path), journal=None, slots=None)  # unused without the executor


def test_runs_dir_apart_accepts_the_deployed_layouts(tmp_path: Path) -> None:
    """Beside the journal (the default), or inside the directory that holds the
    configuration or the credential (a state directory: its files stay private,
    and the readability probe checks them)."""
    from qinglong.worker.config import load_config_file, load_dev_env

    (tmp_path / "conf").mkdir()
    path = tmp_path / "conf" / "w.json"
    for executor in ({}, {"runsDir": "state/runs"}, {"runsDir": "secret/runs"},
                     {"runsDir": "conf/runs"}):  # fmt: skip
        path.write_text(json.dumps(_apart_doc(tmp_path, **executor)))
        load_config_file(str(path), journal=None, slots=None, execute=True)
    dev = tmp_path / "dev-env.json"
    dev.write_text(json.dumps({
        "ingressUrl": "https://127.0.0.1:8443", "caFile": "ca.pem",
        "worker": {"workerId": "00000000-0000-4000-8000-000000000001", "certFile": "c.pem",
                   "keyFile": "k.pem", "credentialFile": str(tmp_path / "cred")},
    }))  # fmt: skip
    config = load_dev_env(str(dev), journal=str(tmp_path / "j"), slots=None, execute=True)
    assert config.runs_dir == str(tmp_path / "j.runs")


@needs_root
def test_the_probes_judge_the_final_permissions(secrets: Secrets, run_as_user: str | None) -> None:
    """The work directory is tightened (as the executor does) before the
    readability probe, not after it: a 0755 one left by a umask is made 0700 and
    the start goes on, instead of being refused for a mode it would not keep."""
    work = secrets.base / "new" / "fresh-journal.work"
    work.mkdir(parents=True)
    work.chmod(0o755)
    (secrets.base / "new").chmod(0o711)
    code, events = _worker_run("--config", str(_config(secrets)), "--execute",
                               "--run-as", str(run_as_user))  # fmt: skip
    assert code == 2 and _failure(events)["reason"] == "credentials_unusable", events
    assert work.stat().st_mode & 0o7777 == 0o700
    runs = secrets.base / "new" / "fresh-journal.runs"
    assert runs.stat().st_mode & 0o7777 == RUNS_MODE_SHARED
