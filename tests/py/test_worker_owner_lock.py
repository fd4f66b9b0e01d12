"""Owner lock: flock authority, stale records, identity checks, real contending processes."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest

from qinglong.worker.owner_lock import (
    LOCK_NAME,
    LockCompromised,
    LockHeld,
    LockRecord,
    OwnerLock,
    UnsafePermissions,
)

SPEED = 10  # child processes run a 10x clock: stale 5 s == 0.5 s real


@pytest.fixture
def root(tmp_path) -> str:
    path = tmp_path / "root"
    path.mkdir(mode=0o700)
    return str(path)


def write_record(root: str, record: LockRecord) -> None:
    path = os.path.join(root, LOCK_NAME)
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
    os.write(fd, record.to_bytes())
    os.close(fd)


def now_ms() -> int:
    return int(time.time() * 1000)


def test_acquire_check_release_reacquire(root):
    lock = OwnerLock.acquire(root)
    lock.check()
    with pytest.raises(LockHeld):
        OwnerLock.acquire(root)
    lock.release()
    with pytest.raises(LockCompromised):
        lock.check()
    # A released record allows an immediate takeover.
    with OwnerLock.acquire(root) as again:
        again.check()


@pytest.mark.parametrize("stale_ms", [4_999, 300_001, 0])
def test_stale_period_range(root, stale_ms):
    with pytest.raises(ValueError):
        OwnerLock.acquire(root, stale_ms=stale_ms)


def test_unsafe_lock_file_refused(root):
    write_record(root, LockRecord(1, "x", "h", 0, released=True))
    os.chmod(os.path.join(root, LOCK_NAME), 0o644)
    with pytest.raises(UnsafePermissions):
        OwnerLock.acquire(root)


def test_fresh_record_of_live_process_waits_for_stale(root):
    # The flock is free but a live process (our parent) claims the root: only
    # when its record goes stale may we take over.
    t0 = now_ms()
    write_record(root, LockRecord(os.getppid(), str(uuid.uuid4()), os.uname().nodename, t0))
    with pytest.raises(LockHeld):
        OwnerLock.acquire(root, stale_ms=5_000, clock=lambda: t0 + 4_999)
    with OwnerLock.acquire(root, stale_ms=5_000, clock=lambda: t0 + 5_000) as lock:
        lock.check()


def test_fresh_record_of_dead_process_is_taken_over(root):
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    write_record(root, LockRecord(child.pid, str(uuid.uuid4()), os.uname().nodename, now_ms()))
    with OwnerLock.acquire(root) as lock:
        lock.check()


def test_fresh_record_from_another_host_waits(root):
    write_record(root, LockRecord(1, str(uuid.uuid4()), "some-other-host", now_ms()))
    with pytest.raises(LockHeld):
        OwnerLock.acquire(root)


def test_torn_record_counts_as_dead(root):
    path = os.path.join(root, LOCK_NAME)
    fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
    os.write(fd, b'{"pid": 12')
    os.close(fd)
    with OwnerLock.acquire(root) as lock:
        lock.check()


def test_acquire_installs_new_inode(root):
    write_record(root, LockRecord(1, "old", "h", 0, released=True))
    before = os.stat(os.path.join(root, LOCK_NAME)).st_ino
    with OwnerLock.acquire(root) as lock:
        assert os.stat(lock.path).st_ino != before
        record = LockRecord.from_bytes(open(lock.path, "rb").read())
        assert record.owner_id == lock.owner_id and record.pid == os.getpid()


def test_replaced_lock_file_is_detected_and_sticky(root):
    a = OwnerLock.acquire(root)
    os.unlink(a.path)  # an operator "cleans up"
    b = OwnerLock.acquire(root)  # the new file has no flock holder: b owns it
    with pytest.raises(LockCompromised):
        a.check()
    with pytest.raises(LockCompromised):
        a.refresh()
    b.check()
    a.release()  # must not touch b's file
    b.check()
    b.release()


def test_foreign_owner_id_is_detected(root):
    lock = OwnerLock.acquire(root)
    fd = os.open(lock.path, os.O_WRONLY | os.O_TRUNC)
    os.write(fd, LockRecord(os.getpid(), "someone-else", "h", now_ms()).to_bytes())
    os.close(fd)
    with pytest.raises(LockCompromised):
        lock.check()
    lock.release()


def _same_size_foreign_record(lock: OwnerLock) -> bytes:
    """Another owner's record of exactly our record's length (same st_size)."""
    ours = open(lock.path, "rb").read()
    theirs = LockRecord.from_bytes(ours)
    assert theirs is not None
    forged = LockRecord(theirs.pid, "x" * len(theirs.owner_id), theirs.host,
                        theirs.refreshed_at_ms).to_bytes()  # fmt: skip
    assert len(forged) == len(ours)
    return forged


# Past the file system's timestamp granularity (a jiffy, up to 10 ms, on kernels
# without fine-grained timestamps): a write in the same tick as the one a check
# verified is the window test_refresh_always_rereads_the_record covers.
TICK_S = 0.02


def test_foreign_record_after_a_verified_check_is_detected(root):
    """check() skips re-reading an unchanged inode; any write changes its stamp."""
    lock = OwnerLock.acquire(root)
    lock.check()  # verified: the stamp is cached
    lock.check()
    time.sleep(TICK_S)
    fd = os.open(lock.path, os.O_WRONLY)
    os.pwrite(fd, _same_size_foreign_record(lock), 0)
    os.close(fd)
    with pytest.raises(LockCompromised):
        lock.check()
    lock.release()


def test_foreign_record_with_mtime_put_back_is_detected(root):
    """Restoring the mtime does not hide a write: the ctime moves and cannot be set."""
    lock = OwnerLock.acquire(root)
    lock.check()
    before = os.stat(lock.path)
    time.sleep(TICK_S)
    fd = os.open(lock.path, os.O_WRONLY)
    os.pwrite(fd, _same_size_foreign_record(lock), 0)
    os.close(fd)
    os.utime(lock.path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(lock.path)
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    with pytest.raises(LockCompromised):
        lock.check()
    lock.release()


def test_refresh_always_rereads_the_record(root):
    """A foreign write the stamp could not show (the same timestamp tick as the
    write we verified, same size) is found by the next refresh, which re-reads."""
    lock = OwnerLock.acquire(root, stale_ms=5_000)
    lock.check()
    fd = os.open(lock.path, os.O_WRONLY)
    os.pwrite(fd, _same_size_foreign_record(lock), 0)
    os.close(fd)
    st = os.stat(lock.path)
    lock._verified_stamp = (st.st_size, st.st_mtime_ns, st.st_ctime_ns)  # the tick collision
    lock.check()  # the documented window: the cached stamp matches
    with pytest.raises(LockCompromised):
        lock.refresh()
    with pytest.raises(LockCompromised):
        lock.check()  # sticky
    lock.release()


def test_checks_of_an_unchanged_lock_read_it_once(root, monkeypatch):
    """The promise behind the cache: ~9 checks per delivered offer cost a
    stat pair each, not a read and a JSON parse."""
    import qinglong.worker.owner_lock as owner_lock

    reads = []
    real = owner_lock._read_record
    monkeypatch.setattr(owner_lock, "_read_record", lambda fd: reads.append(fd) or real(fd))
    with OwnerLock.acquire(root) as lock:
        reads.clear()  # acquiring read the previous record
        for _ in range(100):
            lock.check()
        assert len(reads) == 1
        lock.refresh()  # writes our record: the next check reads it once more
        for _ in range(100):
            lock.check()
        assert len(reads) == 3  # refresh's own read + one after its write


def test_refresher_thread_advances_record(root):
    with OwnerLock.acquire(root, stale_ms=5_000) as lock:
        first = LockRecord.from_bytes(open(lock.path, "rb").read()).refreshed_at_ms
        lock.start_refresher(interval_s=0.02)
        time.sleep(0.15)
        later = LockRecord.from_bytes(open(lock.path, "rb").read()).refreshed_at_ms
        assert later > first
        assert not lock.compromised


def test_refresher_notices_compromise(root):
    lock = OwnerLock.acquire(root, stale_ms=5_000)
    lock.start_refresher(interval_s=0.02)
    os.unlink(lock.path)
    deadline = time.time() + 2
    while not lock.compromised and time.time() < deadline:
        time.sleep(0.01)
    assert lock.compromised
    with pytest.raises(LockCompromised):
        lock.check()
    lock.release()


# -- real processes ---------------------------------------------------------

HOLDER = textwrap.dedent(
    """
    import sys, time
    from qinglong.worker.owner_lock import OwnerLock
    clock = lambda: int(time.time() * 1000 * __SPEED__)
    lock = OwnerLock.acquire(sys.argv[1], stale_ms=5000, clock=clock)
    lock.start_refresher(interval_s=0.05)
    print("held", flush=True)
    for line in sys.stdin:
        lock.check()
        print("ok", flush=True)
    """
).replace("__SPEED__", str(SPEED))


def spawn_holder(root: str) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, root],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline().strip() == "held"
    return proc


def fast_clock() -> int:
    return int(time.time() * 1000 * SPEED)


def test_sigkilled_holder_releases_immediately(root):
    proc = spawn_holder(root)
    with pytest.raises(LockHeld):
        OwnerLock.acquire(root, stale_ms=5000, clock=fast_clock)
    proc.kill()
    proc.wait()
    with OwnerLock.acquire(root, stale_ms=5000, clock=fast_clock) as lock:
        lock.check()


def test_sigstopped_holder_is_never_taken_over(root):
    proc = spawn_holder(root)
    try:
        os.kill(proc.pid, signal.SIGSTOP)
        time.sleep(0.8)  # 8 s on the fast clock: its record is stale by now
        record = LockRecord.from_bytes(open(os.path.join(root, LOCK_NAME), "rb").read())
        assert fast_clock() - record.refreshed_at_ms > 5000
        with pytest.raises(LockHeld):
            OwnerLock.acquire(root, stale_ms=5000, clock=fast_clock)
        os.kill(proc.pid, signal.SIGCONT)
        proc.stdin.write("check\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "ok"  # still the one owner
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        proc.stdin.close()
        proc.wait(timeout=10)
    assert proc.returncode == 0


CONTENDER = textwrap.dedent(
    """
    import os, random, sys, time
    from qinglong.worker.owner_lock import LockHeld, OwnerLock
    root, sentinel, violations, deadline = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    clock = lambda: int(time.time() * 1000 * __SPEED__)

    def dead(pid):
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                return f.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
        except FileNotFoundError:
            return True

    def take_sentinel():
        # link() never replaces: the sentinel appears atomically, with our pid in it.
        tmp = f"{sentinel}.{os.getpid()}"
        with open(tmp, "w") as f:
            f.write(str(os.getpid()))
        while True:
            try:
                os.link(tmp, sentinel)
                os.unlink(tmp)
                return
            except FileExistsError:
                try:
                    holder = int(open(sentinel).read())
                except FileNotFoundError:
                    continue
                if dead(holder):  # left behind by a SIGKILLed owner
                    os.unlink(sentinel)
                    continue
                with open(violations, "a") as f:
                    f.write(f"{os.getpid()} found live owner {holder}\\n")
                sys.exit(3)

    owned = 0
    while time.time() < deadline:
        try:
            lock = OwnerLock.acquire(root, stale_ms=5000, clock=clock)
        except LockHeld:
            time.sleep(random.uniform(0.001, 0.01))
            continue
        lock.start_refresher(interval_s=0.05)
        take_sentinel()
        for _ in range(random.randint(2, 6)):
            lock.check()
            time.sleep(0.01)
        os.unlink(sentinel)
        lock.release()
        owned += 1
    print(owned, flush=True)
    """
).replace("__SPEED__", str(SPEED))


def _holder(sentinel: str) -> int | None:
    try:
        return int(open(sentinel).read())
    except (FileNotFoundError, ValueError):
        return None


def test_contending_processes_never_two_owners(tmp_path, root):
    sentinel = str(tmp_path / "sentinel")
    violations = str(tmp_path / "violations")
    # 7 s: each contender spends its first few hundred ms starting Python and
    # importing the lock module, and on a busy 2-core box 5 s left too few
    # completed ownerships for the liveness check below.
    deadline = time.time() + 7.0
    rng = random.Random(1234)

    def spawn() -> subprocess.Popen:
        argv = [sys.executable, "-c", CONTENDER, root, sentinel, violations, str(deadline)]
        return subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)

    procs = [spawn() for _ in range(5)]
    killed = stopped = 0
    while time.time() < deadline - 0.8:
        time.sleep(rng.uniform(0.1, 0.25))
        try:
            holder = int(open(sentinel).read())
        except (FileNotFoundError, ValueError):
            continue
        victim = next((p for p in procs if p.pid == holder), None)
        if victim is None or victim.poll() is not None:
            continue
        if rng.random() < 0.5:
            victim.kill()
            victim.wait()
            killed += 1
            procs.append(spawn())
        else:
            os.kill(victim.pid, signal.SIGSTOP)
            if _holder(sentinel) != victim.pid:
                # It let go between our read and the stop: it holds nothing now,
                # so there is no ownership to watch over.
                os.kill(victim.pid, signal.SIGCONT)
                continue
            time.sleep(rng.uniform(0.55, 0.7))  # past the stale period on the fast clock
            assert int(open(sentinel).read()) == victim.pid  # nobody took over
            os.kill(victim.pid, signal.SIGCONT)
            stopped += 1
    owned = 0
    for p in procs:
        out, _ = p.communicate(timeout=30)
        if p.returncode == 0:
            owned += int(out.strip())
        else:
            assert p.returncode == -signal.SIGKILL, (p.returncode, out)
    assert not os.path.exists(violations), open(violations).read()
    assert killed >= 1 and stopped >= 1
    # The lock changed hands many times (completed ownerships; killed ones not counted).
    assert owned >= 8, (owned, killed, stopped)
