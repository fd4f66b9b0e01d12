"""Per-run isolation (SPEC §14.4), with real processes, real uids and real limits.

* Two concurrent runs of one worker's sandbox (``--run-as-range``): neither
  reads the other's ``/proc/<pid>/environ`` or ``/proc/<pid>/mem``, its files,
  nor signals it — ``kill -9 -1`` from one leaves the other running. The same
  probe against two runs sharing one ``--run-as`` user succeeds (the control:
  the probe can see a leak).
* Limits, small on purpose (this box is shared): a fork bomb stays at
  maxProcesses and ``exceeded`` says ``processes``; a memory hog spread over
  processes is killed at maxMemoryBytes and ``exceeded`` says ``memory``; one
  allocation past RLIMIT_DATA fails inside the process.
* Leftovers: files in ``/tmp``, ``/var/tmp``, ``/dev/shm``, the run directory
  and the runs directory do not survive the run — with a private mount
  namespace, and without one (swept as the run's uid); a process that escaped
  a killed supervisor is killed before the uid is leased again.
* The uid range at start (``qinglong worker run``): too narrow, holding a
  passwd entry, owning a worker file, readable secrets, conflicting with
  ``--run-as``; accepted, it prepares the runs directory and says what applies.

Root only (switching uids); the CI runs as root.
"""

from __future__ import annotations

import ctypes
import json
import mmap
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from qinglong.worker.config import ConfigError, load_config_file
from qinglong.worker.executor import CommandSpec, Process, StopReason, spawn
from qinglong.worker.process_tree import private_mounts_permitted
from qinglong.worker.run_as import RUNS_MODE_SHARED, Sandbox, resolve_user
from qinglong.worker.run_limits import Limits
from qinglong.worker.uid_pool import PRIVATE_PLACES, UidPool, UidRange, owners
from tests.py.test_worker_e2e import QL

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="switching uids needs root")

SMALL = Limits(max_processes=32, max_open_files=64, max_memory_bytes=64 << 20)
SECRET = "S3CRET-of-run-B-" + "x" * 8


def _free_range(size: int, start: int = 71000) -> UidRange:
    taken = {e.pw_uid for e in pwd.getpwall()}
    import grp

    taken |= {e.gr_gid for e in grp.getgrall()}
    first = start
    while any(uid in taken for uid in range(first, first + size)):
        first += size
    return UidRange(first, first + size - 1)


@dataclass(frozen=True)
class Box:
    base: Path

    @property
    def runs(self) -> Path:
        return self.base / "runs"

    @property
    def work(self) -> Path:
        return self.base / "work"

    def offer(self, name: str) -> str:
        path = self.work / name
        path.mkdir(mode=0o700, exist_ok=True)
        return str(path)


@pytest.fixture
def box() -> Iterator[Box]:
    base = Path(tempfile.mkdtemp(prefix="ql-runiso-"))
    base.chmod(0o711)
    b = Box(base)
    b.runs.mkdir()
    b.runs.chmod(RUNS_MODE_SHARED)
    b.work.mkdir(mode=0o700)
    yield b
    shutil.rmtree(base, ignore_errors=True)


def _sandbox(box: Box, uids: UidRange, *, private: bool, limits: Limits = SMALL) -> Sandbox:
    pool = UidPool.open(uids, str(box.runs), slots=2)
    places = PRIVATE_PLACES if private else ()
    return Sandbox(str(box.runs), pool=pool, limits=limits, private_places=places)


def _run(sandbox: Sandbox, box: Box, name: str, argv: tuple[str, ...], *,
         env: dict[str, str] | None = None, timeout_s: int = 30) -> Process:  # fmt: skip
    spec = CommandSpec(argv, env or {}, None, timeout_s)
    return spawn(spec, box.offer(name), output_limit=1 << 20, sandbox=sandbox)


def _finish(process: Process, timeout: float = 30.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while process.poll() is None:
        assert time.monotonic() < deadline, "the run did not end"
        time.sleep(0.02)
    process.join_output()
    return process.result()


def _wait_output(process: Process, text: str, timeout: float = 10.0) -> str:
    deadline = time.monotonic() + timeout
    while text not in (tail := process.tail.text()):
        assert time.monotonic() < deadline, tail
        assert process.poll() is None, tail
        time.sleep(0.02)
    return tail


# ------------------------------------------------------------------ runs cannot reach each other

_VICTIM = ("sh", "-c", 'echo "$MARK" > "$HOME/f"; chmod 644 "$HOME/f"; echo pid=$$ home=$HOME; '
           "sleep 60")  # fmt: skip

_ATTACKER = """
import os, signal, sys
pid, home = int(sys.argv[1]), sys.argv[2]
def environ(): return open(f"/proc/{pid}/environ", "rb").read()
def mem():
    with open(f"/proc/{pid}/mem", "rb") as f:
        f.seek(0x400000)
        return f.read(16)
def files(): return open(home + "/f", "rb").read()
def sig(): os.kill(pid, signal.SIGCONT)
for name, probe in (("environ", environ), ("mem", mem), ("file", files), ("signal", sig)):
    try:
        print(name, "LEAK", probe())
    except OSError as exc:
        print(name, "DENIED", exc.errno)
try:
    os.kill(-1, signal.SIGKILL)
    print("kill-1 sent")
except OSError as exc:
    print("kill-1", exc.errno)
"""


def _attack(box: Box, sandbox: Sandbox) -> tuple[dict[str, Any], dict[str, Any]]:
    """The attacker's result, and the victim's: still running after the attack
    (then cancelled: ``stoppedBy``), or dead of it."""
    victim = _run(sandbox, box, "victim", _VICTIM, env={"MARK": SECRET})
    line = _wait_output(victim, "home=")
    fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
    attacker = _run(sandbox, box, "attacker",
                    ("python3", "-c", _ATTACKER, fields["pid"], fields["home"]))  # fmt: skip
    attacked = _finish(attacker)
    time.sleep(0.2)  # a SIGKILL sent by the attack has landed by now
    survived = victim.poll() is None
    victim.terminate(StopReason.CANCELLED, kill_grace_s=0.5)
    result = _finish(victim)
    return attacked, dict(result, survived=survived)


def test_two_concurrent_runs_cannot_read_or_signal_each_other(box: Box) -> None:
    uids = _free_range(4)
    sandbox = _sandbox(box, uids, private=True)
    attacker, victim = _attack(box, sandbox)
    out = attacker["outputTail"]
    # EACCES from the ptrace access check and the 0700 directory, EPERM for the
    # signal: the victim was alive (not ENOENT/ESRCH) and out of reach.
    for probe, errno_ in (("environ", 13), ("mem", 13), ("file", 13), ("signal", 1)):
        assert f"{probe} DENIED {errno_}" in out, out
    assert SECRET not in out and "LEAK" not in out
    assert victim["survived"], victim  # the attacker's kill -9 -1 did not reach it
    assert attacker["limits"]["uid"] != victim["limits"]["uid"]
    assert {attacker["limits"]["uid"], victim["limits"]["uid"]} <= set(uids)
    assert not owners(uids)  # everything of both runs is gone


def test_the_control_one_shared_user_leaks_to_the_same_probe(
    box: Box, run_as_user: str | None
) -> None:
    """Without a uid of its own per run (one --run-as user for both), the very
    same probe reads the other run's environment and kills it: the assertions
    above can fail."""
    assert run_as_user is not None
    sandbox = Sandbox(str(box.runs), resolve_user(run_as_user), limits=SMALL)
    attacker, victim = _attack(box, sandbox)
    assert "environ LEAK" in attacker["outputTail"] and SECRET in attacker["outputTail"]
    assert not victim["survived"] and victim["exitCode"] == -signal.SIGKILL, victim


def test_a_leased_uid_is_the_whole_identity_of_the_run(box: Box) -> None:
    """uid and gid the leased number (real, effective, saved, fs), no groups,
    no capability — also after the leader took the worker's identity back
    for a moment to set its limits — and no_new_privs."""
    uids = _free_range(2)
    sandbox = _sandbox(box, uids, private=True)
    script = "grep -E '^(Uid|Gid|Groups|CapInh|CapPrm|CapEff|CapAmb|NoNewPrivs):' /proc/self/status"
    result = _finish(_run(sandbox, box, "who", ("sh", "-c", script)))
    fields = dict(line.split(":", 1) for line in result["outputTail"].splitlines())
    uid = result["limits"]["uid"]
    assert uid in uids
    assert fields["Uid"].split() == [str(uid)] * 4 and fields["Gid"].split() == [str(uid)] * 4
    assert fields["Groups"].split() == []
    for cap in ("CapInh", "CapPrm", "CapEff", "CapAmb"):
        assert int(fields[cap], 16) == 0, (cap, fields)
    assert fields["NoNewPrivs"].strip() == "1"


# ------------------------------------------------------------------ limits

_BOMB = """
import os, time
leader, end = os.getpid(), time.monotonic() + 2
while time.monotonic() < end:
    try:
        os.fork()
    except OSError:
        time.sleep(0.05)
if os.getpid() != leader:
    time.sleep(60)
"""


def test_a_fork_bomb_is_held_at_max_processes_and_reported(box: Box) -> None:
    uids = _free_range(4)
    sandbox = _sandbox(box, uids, private=True)
    process = _run(sandbox, box, "bomb", ("python3", "-c", _BOMB))
    result = _finish(process)
    assert result["limits"] == {"mechanism": "rlimit", "uid": result["limits"]["uid"],
                                "maxProcesses": 32, "maxOpenFiles": 64,
                                "maxMemoryBytes": 64 << 20, "exceeded": ["processes"]}  # fmt: skip
    assert result["exitCode"] == 0  # the leader ran its course; its forks were refused
    assert not owners(uids), "a fork of the bomb outlived the run"
    assert sandbox.pool is not None and sandbox.pool.free_count == len(uids)


_HOG = """
import sys, time
hold = []
for _ in range(40):
    hold.append(bytearray(1 << 20))
    time.sleep(0.02)
print("holding", flush=True)
time.sleep(30)
"""


def test_a_memory_hog_spread_over_processes_is_killed_and_reported(box: Box) -> None:
    """4 processes of 40 MiB each (each under the per-process RLIMIT_DATA of 64
    MiB): the run's sum crosses 64 MiB, the supervisor kills the run."""
    uids = _free_range(4)
    sandbox = _sandbox(box, uids, private=True)
    script = f"for i in 1 2 3 4; do python3 -c '{_HOG}' & done; wait"
    started = time.monotonic()
    result = _finish(_run(sandbox, box, "hog", ("sh", "-c", script)))
    assert time.monotonic() - started < 20
    assert result["limits"]["exceeded"] == ["memory"], result
    assert result["exitCode"] == -signal.SIGKILL
    assert not owners(uids)


def _resident_read_only(size: int) -> tuple[ctypes.CDLL, int]:
    """``size`` bytes of private anonymous memory, written (resident, copied
    into every fork's page tables) then made read-only: not RLIMIT_DATA's."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long)  # fmt: skip
    address = libc.mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE,
                        mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)  # fmt: skip
    assert address not in (None, ctypes.c_void_p(-1).value)
    ctypes.memset(address, 1, size)
    assert libc.mprotect(ctypes.c_void_p(address), ctypes.c_size_t(size), mmap.PROT_READ) == 0
    return libc, address


def test_the_worker_memory_copied_into_the_leader_before_exec_is_not_the_runs(box: Box) -> None:
    """Until it execs, the leader is a fork of the supervisor: a copy of the
    worker's memory (here 128 MiB more of it, resident), unreadable as PSS to
    the run-as supervisor. A PATH of 30000 missing directories keeps it there
    past the first sample; the run is not killed for the worker's memory."""
    size = 128 << 20
    libc, address = _resident_read_only(size)
    try:
        sandbox = _sandbox(box, _free_range(4), private=True)
        path = "/n:" * 30000 + "/usr/bin:/bin"
        result = _finish(_run(sandbox, box, "small", ("true",), env={"PATH": path}))
    finally:
        libc.munmap(ctypes.c_void_p(address), ctypes.c_size_t(size))
    assert result["limits"]["exceeded"] == [] and result["exitCode"] == 0, result


def test_one_allocation_past_the_limit_fails_inside_the_process(box: Box) -> None:
    """RLIMIT_DATA: 256 MiB at once is refused (MemoryError); not observable from
    outside, so not in `exceeded` (documented), but contained."""
    sandbox = _sandbox(box, _free_range(4), private=True)
    result = _finish(_run(sandbox, box, "big", ("python3", "-c", "bytearray(256 << 20)")))
    assert result["exitCode"] == 1 and "MemoryError" in result["outputTail"], result
    assert result["limits"]["exceeded"] == []


def test_open_files_are_limited_per_process(box: Box) -> None:
    sandbox = _sandbox(box, _free_range(4), private=True)
    script = "import resource; print(resource.getrlimit(resource.RLIMIT_NOFILE))"
    result = _finish(_run(sandbox, box, "nofile", ("python3", "-c", script)))
    assert result["outputTail"].strip() == "(64, 64)"


# ------------------------------------------------------------------ leftovers

_LITTER = (
    "sh",
    "-c",
    'for d in /tmp /var/tmp /dev/shm; do echo x > "$d/ql-litter-$1" && '
    'mkdir -p "$d/ql-litter-dir-$1/a" && echo in:$d; done; '
    'echo x > "$HOME/f"; echo x > "$HOME/../ql-litter-$1" && echo in:runs; '
    'test -e "/tmp/ql-host-$1" && echo sees-host-tmp; exit 0',
    "sh",
)


@pytest.mark.parametrize("private", [True, False], ids=["namespace", "swept"])
def test_files_left_in_shared_places_do_not_survive_the_run(box: Box, private: bool) -> None:
    if private and not private_mounts_permitted():
        pytest.skip("no private mount namespace here")
    uids = _free_range(4)
    sandbox = _sandbox(box, uids, private=private)
    tag = f"{os.getpid()}-{int(private)}"
    host = Path(f"/tmp/ql-host-{tag}")
    host.write_text("the host's /tmp")
    try:
        result = _finish(_run(sandbox, box, "litter", (*_LITTER, tag)))
    finally:
        host.unlink()
    out = result["outputTail"]
    assert ("sees-host-tmp" in out) is not private, out  # a fresh /tmp of its own
    for place in ("/tmp", "/var/tmp", "/dev/shm", "runs"):
        assert f"in:{place}" in out, out  # written, as the run saw it
    for place in PRIVATE_PLACES:
        assert not os.path.lexists(f"{place}/ql-litter-{tag}")
        assert not os.path.lexists(f"{place}/ql-litter-dir-{tag}")
    assert list(box.runs.iterdir()) == []


def test_home_below_a_private_place_stays_reachable_whatever_the_umask(box: Box) -> None:
    """The runs directory lies below /tmp here: inside the run's namespace it is
    bound back to its path through directories the run may search, even for a
    worker with umask 077."""
    if not private_mounts_permitted():
        pytest.skip("no private mount namespace here")
    sandbox = _sandbox(box, _free_range(2), private=True)
    old = os.umask(0o077)
    try:
        process = _run(sandbox, box, "home", ("sh", "-c", 'cd "$HOME" && touch f && echo home-ok'))
    finally:
        os.umask(old)
    result = _finish(process)
    assert "home-ok" in result["outputTail"], result


def test_a_process_that_escaped_a_killed_supervisor_dies_before_reuse(box: Box) -> None:
    """The supervisor SIGKILLed (its cleanup never runs): the leader dies with
    it, a `setsid` grandchild would live on — until the uid is reclaimed."""
    uids = _free_range(2)
    sandbox = _sandbox(box, uids, private=False)
    script = ("sh", "-c", "setsid sleep 300 & echo bg=$!; sleep 300")
    process = _run(sandbox, box, "escape", script)
    tail = _wait_output(process, "bg=")
    bg = int(tail.split("bg=")[1].split()[0])
    os.kill(process.pid, signal.SIGKILL)
    _finish(process)
    assert not Path(f"/proc/{bg}").exists() or "Z" in Path(f"/proc/{bg}/stat").read_text()
    assert not owners(uids)
    assert sandbox.pool is not None and sandbox.pool.free_count == len(uids)


def test_a_uid_busy_at_start_is_skipped_not_killed_then_used(box: Box) -> None:
    """Someone's process runs as a uid of the range when the worker starts: that
    uid is not leased (nor its process killed) until the process has ended."""
    from qinglong.worker.run_as import RunAsError

    uids = _free_range(3)
    busy = subprocess.Popen(["sleep", "30"], user=uids.first, group=uids.first,
                            extra_groups=[])  # fmt: skip
    try:
        with pytest.raises(RunAsError) as exc:
            UidPool.open(uids, str(box.runs), slots=3)
        assert exc.value.reason == "run_as_range_busy"
        pool = UidPool.open(uids, str(box.runs), slots=2)
        leased = [pool.lease(), pool.lease()]
        assert sorted(u.uid for u in leased if u is not None) == [uids.first + 1, uids.last]
        assert pool.lease() is None and busy.poll() is None  # skipped, still alive
    finally:
        busy.kill()
        busy.wait()
    again = pool.lease()
    assert again is not None and again.uid == uids.first


# ------------------------------------------------------------------ `worker run --run-as-range`


def _config(base: Path, **executor: Any) -> Path:
    secret = base / "secret"
    secret.mkdir(mode=0o700, exist_ok=True)
    for name in ("credential", "worker-key.pem"):
        path = secret / name
        if not path.exists():
            path.write_text("private")
            path.chmod(0o600)
    doc = {
        "ingressUrl": "https://127.0.0.1:9", "workerId": "00000000-0000-4000-8000-000000000001",
        "certFile": str(secret / "worker.pem"), "keyFile": str(secret / "worker-key.pem"),
        "caFile": str(secret / "ca.pem"), "credentialFile": str(secret / "credential"),
        "journal": str(base / "state" / "journal"), "executor": executor,
    }  # fmt: skip
    path = secret / "worker.json"
    path.write_text(json.dumps(doc))
    path.chmod(0o600)
    return path


def _worker_run(*args: str) -> tuple[int, list[dict[str, Any]]]:
    done = subprocess.run([*QL, "worker", "run", *args], capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip
    return done.returncode, [json.loads(x) for x in done.stderr.splitlines() if x.startswith("{")]


def _failed(events: list[dict[str, Any]]) -> dict[str, Any]:
    (failed,) = [e for e in events if e["event"] == "worker.failed"]
    return failed


def test_worker_run_refuses_a_range_it_cannot_own(box: Box, run_as_user: str | None) -> None:
    config = str(_config(box.base))
    free = _free_range(4)
    nobody = pwd.getpwnam("nobody").pw_uid
    cases = [
        (["--run-as-range", free.text(), "--slots", "5"], "run_as_range_too_small"),
        (["--run-as-range", f"{nobody - 1}-{nobody + 1}"], "run_as_range_taken"),
        (["--run-as-range", "0-3"], "invalid_run_as_range"),  # never uid 0
        (["--run-as-range", "9-3"], "invalid_run_as_range"),
        (["--run-as-range", "ten-twenty"], "invalid_run_as_range"),
        (["--run-as-range", free.text(), "--run-as", str(run_as_user)], "run_as_conflict"),
    ]
    for extra, reason in cases:
        code, events = _worker_run("--config", config, "--execute", *extra)
        failed = _failed(events)
        assert code == 2 and failed["reason"] == reason, (extra, failed)
        assert failed["error"] == "isolation_refused"
    code, events = _worker_run("--config", config, "--run-as-range", free.text())
    assert code == 2 and "--run-as-range needs --execute" in _failed(events)["detail"]
    code, events = _worker_run("--config", config, "--execute", "--run-as-range", free.text(),
                               "--max-processes", "3")  # fmt: skip
    assert code == 2 and _failed(events)["reason"] == "invalid_value"
    assert not (box.base / "state").exists()  # refused before anything was prepared


def test_worker_run_probes_the_range_and_its_files(box: Box) -> None:
    free = _free_range(4)
    config = _config(box.base)
    (box.base / "secret" / "credential").chmod(0o644)
    (box.base / "secret").chmod(0o711)
    code, events = _worker_run("--config", str(config), "--execute", "--run-as-range", free.text())
    failed = _failed(events)
    assert code == 2 and failed["reason"] == "readable_by_run_as", failed
    assert f"uid {free.first}" in failed["detail"]
    (box.base / "secret" / "credential").chmod(0o600)
    os.chown(box.base / "secret" / "worker-key.pem", free.last, 0)
    code, events = _worker_run("--config", str(config), "--execute", "--run-as-range", free.text())
    failed = _failed(events)
    assert failed["reason"] == "run_as_range_owns_worker_file", failed
    assert "worker-key.pem" in failed["detail"]


def test_worker_run_with_a_range_prepares_and_says_what_applies(box: Box) -> None:
    free = _free_range(4)
    config = _config(box.base, runAsRange=free.text(), limits={"maxProcesses": 64})
    _code, events = _worker_run("--config", str(config), "--execute", "--slots", "4",
                                "--max-memory", str(128 << 20))  # fmt: skip
    assert _failed(events)["reason"] == "credentials_unusable", events  # the next check
    (isolation,) = [e for e in events if e["event"] == "worker.isolation"]
    assert isolation["runAsRange"] == free.text()
    assert isolation["limits"] in ("cgroup", "rlimit")
    permitted = private_mounts_permitted()
    assert isolation["privatePlaces"] == (list(PRIVATE_PLACES) if permitted else [])
    (starting,) = [e for e in events if e["event"] == "worker.starting"]
    assert starting.get("runAs") is None and starting["runAsRange"] == free.text()
    assert starting["limits"]["maxProcesses"] == 64
    assert starting["limits"]["maxMemoryBytes"] == 128 << 20
    runs = Path(starting["runsDir"])
    assert runs.stat().st_mode & 0o7777 == RUNS_MODE_SHARED


def test_config_limits_are_checked(tmp_path: Path) -> None:
    doc = json.loads(_config(tmp_path).read_text())
    path = tmp_path / "w.json"
    path.write_text(json.dumps(dict(doc, executor={})))
    plain = load_config_file(str(path), journal=None, slots=None, execute=True)
    assert plain.executor.limits == Limits()  # the documented defaults
    assert plain.executor.run_as_range is None
    for bad in ({"limits": {"maxProcesses": 0}}, {"limits": {"maxOpenFiles": "many"}},
                {"limits": {"maxMemoryBytes": 1}}, {"limits": {"cpu": 1}},
                {"runAsRange": 7}, {"runAsRange": ""}):  # fmt: skip
        path.write_text(json.dumps(dict(doc, executor=bad)))
        with pytest.raises(ConfigError):
            load_config_file(str(path), journal=None, slots=None)


# ------------------------------------------------------------------ end to end (slow)

_E2E_VICTIM = ["sh", "-c", "MARK=$(cat /proc/sys/kernel/random/uuid); export MARK; "
               "echo mark=$MARK; "
               "exec python3 -c 'import time; time.sleep(8); print(\"survived\")'"]  # fmt: skip

_E2E_ATTACKER = """
import os, signal, time
def uids(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("Uid:"):
            return int(line.split()[1])
def victims():
    found = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            if uids(name) != os.getuid() and b"time.sleep(8)" in open(
                    f"/proc/{name}/cmdline", "rb").read():
                found.append(int(name))
        except OSError:
            pass
    return found
deadline = time.monotonic() + 30
while not victims() and time.monotonic() < deadline:
    time.sleep(0.1)
for pid in victims():
    print("victim", pid)
    for what in ("environ", "mem"):
        try:
            print(what, "LEAK", open(f"/proc/{pid}/{what}", "rb").read(64))
        except OSError as exc:
            print(what, "DENIED", exc.errno)
    try:
        os.kill(pid, signal.SIGKILL)
        print("signal LEAK")
    except OSError as exc:
        print("signal DENIED", exc.errno)
os.kill(-1, signal.SIGKILL)
"""


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from tests.py.run_as_support import searchable_tmp
    from tests.py.test_lifecycle_e2e import Env
    from tests.py.test_worker_e2e import _dev_up

    state_dir = tmp_path_factory.mktemp("dev")
    doc = _dev_up(state_dir)
    base = searchable_tmp("ql-runiso-e2e-")
    env = Env(doc, base)
    try:
        yield env
    finally:
        for worker in env.workers:
            worker.kill()
        subprocess.run([*QL, "dev", "down", "--state-dir", str(state_dir)], check=False,
                       capture_output=True, timeout=120)  # fmt: skip
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.slow
def test_end_to_end_two_runs_of_one_worker_with_a_uid_range(dev: Any) -> None:
    """`worker run --execute --run-as-range` with two slots: the attacker run
    finds the victim run (another uid of the range), is denied its environ,
    memory and signals, `kill -9 -1`s, and the victim still succeeds; each
    completion's result.limits names its own uid."""
    from tests.py.test_worker_e2e import Worker, _json_out

    uids = _free_range(2, start=72000)
    victim_task = dev.publish("iso-victim", _E2E_VICTIM)
    attacker_task = dev.publish("iso-attacker", ["python3", "-c", _E2E_ATTACKER])
    (victim,) = dev.enqueue(victim_task)
    (attacker,) = dev.enqueue(attacker_task)
    identity = dev.identity()
    journal = dev.directory / "journal"
    config = {
        "ingressUrl": dev.doc["ingressUrl"], "workerId": identity["workerId"],
        "certFile": identity["certFile"], "keyFile": identity["keyFile"],
        "caFile": dev.doc["caFile"], "credentialFile": identity["credentialFile"],
        "journal": str(journal), "execute": True,
        "executor": {"runAsRange": uids.text(),
                     "limits": {"maxProcesses": 64, "maxMemoryBytes": 256 << 20}},
        "capabilities": {"schema": "qinglong/worker-capabilities@v1",
                         "executors": ["remote-worker"], "runtimes": {}, "labels": {},
                         "slots": 2},
    }  # fmt: skip
    path = dev.directory / "range-worker.json"
    path.write_text(json.dumps(config))
    path.chmod(0o600)
    worker = Worker([*QL, "worker", "run", "--config", str(path), "--execute"])
    dev.workers.append(worker)
    try:
        final = dev.wait_runs([victim, attacker], timeout=90)
    except AssertionError:
        raise AssertionError(worker.lines) from None
    assert final == {victim: "succeeded", attacker: "succeeded"}, worker.lines
    results = {}
    for run_id in (victim, attacker):
        shown = _json_out([*QL, "admin", "run", "show", "--dsn-file", dev.dsn_file,
                           "--run", run_id])  # fmt: skip
        results[run_id] = shown["attempts"][0]["result"]
    out = results[attacker]["outputTail"]
    mark = results[victim]["outputTail"].split("mark=")[1].split()[0]
    assert "victim " in out and "LEAK" not in out and mark not in out, out
    for probe in ("environ", "mem", "signal"):
        assert f"{probe} DENIED" in out, out
    assert "survived" in results[victim]["outputTail"]
    limits = {run_id: r["limits"] for run_id, r in results.items()}
    assert {limits[victim]["uid"], limits[attacker]["uid"]} == set(uids), limits
    assert all(x["maxProcesses"] == 64 and x["exceeded"] == [] for x in limits.values())
    assert not owners(uids)


# ------------------------------------------------------------------ the mechanism


def _cgroup2_dir() -> Path | None:
    from qinglong.worker.run_limits import _cgroup2_mount

    mount = _cgroup2_mount()
    return None if mount is None or not os.access(mount, os.W_OK) else Path(mount)


def test_the_mechanism_is_cgroup_only_where_pids_and_memory_are_delegated(tmp_path: Path) -> None:
    from qinglong.worker.run_limits import Mechanism, choose

    assert choose(SMALL, str(tmp_path)).mechanism is Mechanism.RLIMIT  # not a cgroup at all
    (tmp_path / "cgroup.subtree_control").write_text("cpu pids\n")
    assert choose(SMALL, str(tmp_path)).mechanism is Mechanism.RLIMIT  # no memory controller
    (tmp_path / "cgroup.subtree_control").write_text("cpu pids memory\n")
    chosen = choose(SMALL, str(tmp_path))
    assert (chosen.mechanism, chosen.cgroup_parent) == (Mechanism.CGROUP, str(tmp_path))
    assert chosen.report(7, frozenset())["mechanism"] == "cgroup"
    mount = _cgroup2_dir()
    if mount is not None:  # a real cgroup2 mount: used only when it delegates both
        subtree = (mount / "cgroup.subtree_control").read_text().split()
        expected = Mechanism.CGROUP if {"pids", "memory"} <= set(subtree) else Mechanism.RLIMIT
        assert choose(SMALL, str(mount)).mechanism is expected


def test_a_run_cgroup_is_killed_and_removed(tmp_path: Path) -> None:
    """The end of a cgroup run, on a real cgroup2 mount (no controller needed):
    whatever is still inside dies (cgroup.kill) and the directory goes."""
    from qinglong.worker.run_limits import Cgroup

    mount = _cgroup2_dir()
    if mount is None:
        pytest.skip("no writable cgroup2 mount")
    group = Cgroup(str(mount / f"ql-run-test-{os.getpid()}"))
    os.mkdir(group.path)
    if not os.path.exists(os.path.join(group.path, "cgroup.kill")):
        os.rmdir(group.path)
        pytest.skip("a kernel without cgroup.kill")
    proc = subprocess.Popen(["sleep", "60"], preexec_fn=group.enter)
    try:
        members = Path(group.path, "cgroup.procs").read_text().split()
        assert members == [str(proc.pid)]
        assert group.exceeded() == frozenset()
        group.kill_and_remove()
        assert proc.wait(5) == -signal.SIGKILL
        assert not os.path.exists(group.path)
    finally:
        proc.kill()
        proc.wait()
        if os.path.exists(group.path):
            os.rmdir(group.path)
