"""worker/executor.py: spawning and supervising one command, with real processes.

No network here; the lease side is covered by test_worker_executor_lifecycle.py.
Every command runs in a sandbox (SPEC §11): as the suite's unprivileged user when
the suite runs as root, in its own run directory; the isolation itself is
pinned by test_executor_isolation.py.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from qinglong.worker.executor import (
    DEFAULT_LANG,
    DEFAULT_PATH,
    OUTPUT_NAME,
    TAIL_BYTES,
    TAIL_JSON_BUDGET,
    CommandSpec,
    ExitStatus,
    OutputTail,
    Process,
    Sandbox,
    SpawnFailed,
    StopReason,
    kill_orphan_group,
    output_tail_text,
    process_start_ticks,
    spawn,
)
from qinglong.worker.lease_client import Outcome
from qinglong.worker.lifecycle import Completion
from qinglong.worker.run_as import RUNS_MODE_SHARED, resolve_user

# The command runs as the unprivileged user, who may not reach the test's own
# interpreter (e.g. under /root): any python3 on the sandbox's PATH will do.
PYTHON = "python3"


def spec(*argv: str, env: dict[str, str] | None = None, cwd: str | None = None,
         timeout_s: int = 30) -> CommandSpec:  # fmt: skip
    return CommandSpec(tuple(argv), env or {}, cwd, timeout_s)


def wait_exit(process: Process, timeout: float = 10.0) -> ExitStatus:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = process.poll()
        if status is not None:
            process.join_output()
            return status
        time.sleep(0.01)
    process.close()
    raise AssertionError("process did not exit")


@dataclass(frozen=True)
class Box:
    """A worker's view of one run: its own WORK/<offerId> and the runs directory."""

    root: Path
    sandbox: Sandbox

    @property
    def work(self) -> Path:
        return self.root / "work" / "offer-1"

    @property
    def run_dir(self) -> Path:
        return Path(self.sandbox.runs_dir) / "offer-1"

    def spawn(self, command: CommandSpec, limit: int = 1024) -> Process:
        return spawn(command, str(self.work), output_limit=limit, sandbox=self.sandbox)


@pytest.fixture
def box(tmp_path: Path, run_as_user: str | None) -> Box:
    work = tmp_path / "work" / "offer-1"
    work.mkdir(parents=True, mode=0o700)
    runs = tmp_path / "runs"
    runs.mkdir()
    runs.chmod(RUNS_MODE_SHARED)
    run_as = resolve_user(run_as_user) if run_as_user else None
    return Box(tmp_path, Sandbox(str(runs), run_as))


def output(box: Box) -> str:
    return (box.work / OUTPUT_NAME).read_text()


def printed_pid(box: Box, timeout: float = 5.0) -> int:
    """The first line the command printed (it echoes a pid there)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        first = (box.work / OUTPUT_NAME).read_text().split("\n", 1)
        if len(first) == 2 and first[0].strip():
            return int(first[0])
        time.sleep(0.02)
    raise AssertionError("the command printed no pid")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purpose (its parent just has not reaped it).
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"


def wait_gone(pid: int, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.02)
    return False


@pytest.mark.parametrize("code", [0, 1, 3, 255])
def test_exit_codes_are_reported(box: Box, code: int) -> None:
    status = wait_exit(box.spawn(spec("sh", "-c", f"exit {code}")))
    assert status == ExitStatus(code, None)
    expected = Outcome.SUCCEEDED if code == 0 else Outcome.FAILED
    assert Completion.of(status).outcome is expected
    if code:
        assert Completion.of(status) == Completion(Outcome.FAILED, code, "exit_nonzero")


def test_no_shell_semicolon_is_literal(box: Box) -> None:
    marker = box.root / "pwned"
    argv = ("echo", f"a; touch {marker}", "$(id)", "*")
    status = wait_exit(box.spawn(spec(*argv)))
    assert status.returncode == 0
    assert output(box) == f"a; touch {marker} $(id) *\n"
    assert not marker.exists()


def test_environment_is_not_inherited(box: Box, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QL_WORKER_SECRET_CANARY", "must-not-leak")
    code = "import os, json; print(json.dumps(dict(os.environ), sort_keys=True))"
    argv = (PYTHON, "-c", code)
    status = wait_exit(box.spawn(spec(*argv, env={"GREETING": "hi"}), 65536))
    assert status.returncode == 0
    env = json.loads(output(box))
    # Only the spec's variables plus PATH, HOME (the run's directory) and LANG
    # (and what the interpreter itself may add, e.g. LC_CTYPE coercion) —
    # nothing from the worker.
    assert env.get("GREETING") == "hi" and env.get("PATH") == DEFAULT_PATH
    assert env.get("HOME") == str(box.run_dir) and env.get("LANG") == DEFAULT_LANG
    assert "QL_WORKER_SECRET_CANARY" not in env
    assert set(env) - {"GREETING", "PATH", "HOME", "LANG", "LC_CTYPE"} == set()


def test_the_specs_home_and_lang_win(box: Box) -> None:
    argv = ("sh", "-c", 'echo "$HOME $LANG"')
    env = {"HOME": "/srv/elsewhere", "LANG": "de_DE.UTF-8"}
    assert wait_exit(box.spawn(spec(*argv, env=env))).returncode == 0
    assert output(box) == "/srv/elsewhere de_DE.UTF-8\n"


def test_spec_path_wins_and_default_cwd_is_the_run_dir(box: Box) -> None:
    argv = ("/bin/sh", "-c", 'echo "$PATH"; pwd')
    status = wait_exit(box.spawn(spec(*argv, env={"PATH": "/bin"})))
    assert status.returncode == 0
    path, cwd = output(box).splitlines()
    assert path == "/bin" and cwd == str(box.run_dir)


def test_relative_cwd_is_created_inside_the_run_dir(box: Box) -> None:
    status = wait_exit(box.spawn(spec("pwd", cwd="sub/./deeper/../deep")))
    assert output(box).strip() == str(box.run_dir / "sub" / "deep") and status.returncode == 0


@pytest.mark.parametrize("cwd", ["/", "/tmp", "..", "../offer-2", "sub/../../x", "a/../.."])
def test_a_cwd_outside_the_run_dir_fails_to_start(box: Box, cwd: str) -> None:
    with pytest.raises(SpawnFailed) as exc:
        box.spawn(spec("pwd", cwd=cwd))
    assert exc.value.reason == "cwd_outside_work_dir"
    assert not box.run_dir.exists()


def test_spawn_failures_have_low_cardinality_reasons(box: Box) -> None:
    with pytest.raises(SpawnFailed) as missing:
        box.spawn(spec("/nonexistent"))
    assert missing.value.reason == "executable_not_found"
    with pytest.raises(SpawnFailed) as unknown:
        box.spawn(spec("no-such-command-qinglong"))
    assert unknown.value.reason == "executable_not_found"
    script = box.root / "not-executable.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o644)  # exec needs an x bit, even for root
    with pytest.raises(SpawnFailed) as denied:
        box.spawn(spec(str(script)))
    assert denied.value.reason == "permission_denied"
    assert not box.run_dir.exists()  # a failed start leaves no run directory


def test_timeout_kills_the_whole_process_group(box: Box) -> None:
    # The shell ignores SIGTERM and its background grandchild would outlive it.
    script = "trap '' TERM; sleep 300 & echo $!; wait"
    process = box.spawn(spec("sh", "-c", script, timeout_s=1))
    grandchild = printed_pid(box)
    assert alive(grandchild)
    while not process.timed_out():
        assert process.poll() is None
        time.sleep(0.05)
    started = time.monotonic()
    process.terminate(StopReason.TIMEOUT, kill_grace_s=0.3)
    status = wait_exit(process)
    assert status.stopped_by is StopReason.TIMEOUT
    assert time.monotonic() - started < 5
    assert Completion.of(status) == Completion(Outcome.FAILED, None, "timeout")
    assert wait_gone(grandchild), "the grandchild sleep survived the group kill"


def test_leftover_group_members_die_with_the_leader(box: Box) -> None:
    script = "sleep 300 & echo $!; exit 0"
    status = wait_exit(box.spawn(spec("sh", "-c", script)))
    assert status == ExitStatus(0, None)
    assert wait_gone(int(output(box)))


def test_sigterm_is_enough_for_a_polite_command(box: Box) -> None:
    process = box.spawn(spec("sleep", "300"))
    process.terminate(StopReason.CANCELLED, kill_grace_s=30)
    status = wait_exit(process, timeout=5)
    assert status == ExitStatus(-signal.SIGTERM, StopReason.CANCELLED)
    assert Completion.of(status) == Completion(Outcome.CANCELLED)


def test_a_signal_death_is_failed_signaled(box: Box) -> None:
    status = wait_exit(box.spawn(spec("sh", "-c", "kill -KILL $$")))
    assert status.signal == signal.SIGKILL
    assert Completion.of(status) == Completion(Outcome.FAILED, -9, "signaled")


def test_output_is_bounded_and_the_command_never_blocks(box: Box) -> None:
    # 4 MiB through a 1 KiB budget: the pump keeps draining, the command finishes.
    code = "import sys; sys.stdout.write('x' * (4 << 20)); sys.stderr.write('tail')"
    status = wait_exit(box.spawn(spec(PYTHON, "-c", code)))
    assert status.returncode == 0
    data = (box.work / OUTPUT_NAME).read_bytes()
    assert data.startswith(b"x" * 1024) and b"output truncated after 1024 bytes" in data
    assert len(data) < 2048
    assert (box.work / OUTPUT_NAME).stat().st_mode & 0o777 == 0o600


def test_result_has_the_exit_code_duration_and_output_tail(box: Box) -> None:
    process = box.spawn(spec("sh", "-c", "echo MARK-out; echo MARK-err >&2; sleep 0.2; exit 3"))
    assert wait_exit(process).returncode == 3
    result = process.result()
    assert result["exitCode"] == 3 and result["durationMs"] >= 200
    assert sorted(result["outputTail"].split()) == ["MARK-err", "MARK-out"]
    assert result["outputBytes"] == len("MARK-out\nMARK-err\n")


def test_output_tail_is_the_last_8_kib_of_everything_printed(box: Box) -> None:
    # 4 MiB + a marker, with a head budget of 1 KiB: the tail still ends with the marker.
    code = ("import sys; sys.stdout.write('x' * (4 << 20)); sys.stdout.flush();"
            " sys.stderr.write('END-MARKER')")  # fmt: skip
    process = box.spawn(spec(PYTHON, "-c", code))
    assert wait_exit(process).returncode == 0
    result = process.result()
    assert result["outputBytes"] == (4 << 20) + len("END-MARKER")
    tail = result["outputTail"]
    assert tail.endswith("END-MARKER") and len(tail.encode()) == TAIL_BYTES
    assert set(tail[: -len("END-MARKER")]) == {"x"}


def test_a_killed_command_still_has_a_result(box: Box) -> None:
    process = box.spawn(spec("sh", "-c", "echo before; kill -KILL $$"))  # fmt: skip
    assert wait_exit(process).signal == signal.SIGKILL
    result = process.result()
    assert result["exitCode"] == -signal.SIGKILL and result["outputTail"] == "before\n"


def test_output_tail_ring_buffer_keeps_the_last_bytes_and_counts_all() -> None:
    tail = OutputTail(capacity=8)
    for chunk in (b"abc", b"defgh", b"ij", b"0123456789abcdef", b"Z"):
        tail.feed(chunk)
    assert tail.snapshot() == (b"9abcdefZ", 3 + 5 + 2 + 16 + 1)
    assert OutputTail().text() == ""


def test_output_tail_text_is_utf8_bounded_and_cut_on_a_character_boundary() -> None:
    # Invalid bytes and NUL are replaced (jsonb refuses NUL).
    assert output_tail_text(b"ok\xff\x00end") == "ok\ufffd\ufffdend"
    # A ring buffer that starts inside a character drops the partial character.
    euro = "€".encode()  # 3 bytes
    assert output_tail_text(euro[1:] + b"x" + euro, cut=True) == "x€"
    # 8 KiB of 3-byte characters, replacement-expanded: never over 8192 bytes.
    text = output_tail_text(euro * 4000)
    assert len(text.encode()) <= TAIL_BYTES and len(text.encode()) > TAIL_BYTES - 3
    assert set(text) == {"€"}
    # Invalid bytes grow into 3-byte U+FFFD: still at most 8192 bytes, cut whole.
    text = output_tail_text(b"\xff" * TAIL_BYTES, cut=True)
    assert len(text.encode()) <= TAIL_BYTES and set(text) == {"\ufffd"}
    # Control characters escape to 6 bytes in JSON: the escaped tail stays in budget.
    text = output_tail_text(b"\x01" * TAIL_BYTES + b"done")
    assert text.endswith("done")
    assert len(json.dumps(text, ensure_ascii=False).encode()) - 2 <= TAIL_JSON_BUDGET


def test_pidfd_becomes_readable_on_exit(box: Box) -> None:
    import select

    process = box.spawn(spec("sleep", "0.2"))
    assert process.pidfd is not None
    readable, _, _ = select.select([process.pidfd], [], [], 5)
    assert readable == [process.pidfd]
    assert wait_exit(process).returncode == 0
    assert process.pidfd is None  # closed once reaped


def test_orphan_group_is_killed_only_when_provably_the_same(box: Box) -> None:
    process = box.spawn(spec("sleep", "300"))
    ticks = process_start_ticks(process.pid)
    assert ticks is not None and ticks == process.start_ticks
    assert not kill_orphan_group(process.pid, ticks + 1)  # a recycled pid: left alone
    assert process.poll() is None
    assert kill_orphan_group(process.pid, ticks)
    assert wait_exit(process).returncode == -signal.SIGKILL
    assert not kill_orphan_group(process.pid, ticks)


def test_the_executor_loads_lazily_and_never_loads_server_code() -> None:
    """R-LAY-1: `worker`, `qinglong.worker.cli` and the run loop do not import the executor;
    the executor itself imports no server, database or network code."""
    import subprocess

    def loaded(code: str) -> set[str]:
        script = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                             check=True).stdout  # fmt: skip
        return set(json.loads(out.strip().splitlines()[-1]))

    def roots(modules: set[str]) -> set[str]:
        return {
            ".".join(m.split(".")[:2]) if m.startswith("qinglong.") else m.split(".")[0]
            for m in modules
        }

    forbidden = {"aiohttp", "psycopg", "psycopg_pool", "qinglong.db", "qinglong.service"}
    light = loaded(
        "import qinglong.worker, qinglong.worker.cli, qinglong.worker.runner, "
        "qinglong.worker.config, qinglong.worker.journal"
    )
    for lazy in ("lifecycle", "executor", "lease_client"):
        assert f"qinglong.worker.{lazy}" not in light, lazy
    heavy = loaded(
        "import qinglong.worker.lifecycle, qinglong.worker.executor, qinglong.worker.lease_client"
    )
    assert not roots(heavy) & forbidden
    assert "ssl" not in heavy and "http.client" not in heavy and "jsonschema" not in heavy
