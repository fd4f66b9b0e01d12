"""The floor of a worker's claim journal, for `bench e2e`.

Per delivered offer a worker must, by SPEC §6.1/§6.3/§6.4: persist the claim
intent (`pending-claim.json`: temp file, fsync, atomic rename, directory
fsync), publish the validated offer into its inbox (temp file, fsync, hard
link, directory fsync) and then clear the intent (unlink, and a directory
fsync — ours, not the SPEC's: without it a crash could replay an answered
intent). `journal_floor` makes exactly those file operations — the worker's own
`qinglong.worker.fsio` functions, real files, real fsync — in N processes at
once (one private journal root each, as N workers on one host have), with no
network, no TLS, no validation and no database: the CPU per offer and the
offers/s the durable inbox alone costs this host's kernel and disk. Next to
the whole box's CPU per job of `bench e2e` it says how much of the clients'
side no implementation of the worker can avoid without giving up what the
journal guarantees.

Bench-only (tools/ is not in the wheel).
"""

from __future__ import annotations

import multiprocessing
import os
import resource
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from qinglong.worker import fsio
from qinglong.worker.journal import PENDING_NAME, PendingClaim, dump_json

INBOX = "inbox"


@dataclass(frozen=True)
class FloorRun:
    """What one process measured over its offers."""

    offers: int
    wall_s: float
    user_s: float
    sys_s: float


def pending_bytes(worker_id: str = "e2e-0") -> bytes:
    """A real claim intent's bytes (the worker's own document and encoder)."""
    claim = PendingClaim(
        offer_id=str(uuid.uuid4()),
        lease_token="A" * 42 + "Q",
        worker_id=worker_id,
        session_id=str(uuid.uuid4()),
        generation=1,
        capabilities_digest="sha256:" + "0" * 64,
        attempts=0,
        next_attempt_at_ms=int(time.time() * 1000),
        created_at_ms=int(time.time() * 1000),
    )
    return dump_json(claim.to_doc())


def _one(root: str, offers: int, entry_bytes: int, start: Any, out: Any) -> None:
    fs = fsio.FileSystem()
    inbox = os.path.join(root, INBOX)
    os.mkdir(inbox, 0o700)
    intent, entry = pending_bytes(), b"x" * entry_bytes
    start.wait()
    before = resource.getrusage(resource.RUSAGE_SELF)
    started = time.perf_counter()
    for _ in range(offers):
        fsio.update_file(fs, root, PENDING_NAME, intent)  # the intent, before the pull
        fsio.publish_new(fs, inbox, f"{uuid.uuid4()}.json", entry)  # the offer, accepted
        fsio.remove_file(fs, root, PENDING_NAME)  # only then the intent is cleared
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_SELF)
    out.put(
        FloorRun(offers, wall, after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime)
    )


def journal_floor(workers: int, offers: int, entry_bytes: int,
                  parent: Path | None = None) -> dict[str, Any]:  # fmt: skip
    """`offers` spread over `workers` processes, each on its own journal root."""
    per_worker = max(1, offers // workers)
    ctx = multiprocessing.get_context("spawn")  # no state inherited from the bench
    start, out = ctx.Barrier(workers), ctx.Queue()
    with tempfile.TemporaryDirectory(prefix="qinglong-journal-floor-", dir=parent) as tmp:
        roots = [os.path.join(tmp, f"w{i}") for i in range(workers)]
        for root in roots:
            os.mkdir(root, 0o700)
        procs = [ctx.Process(target=_one, args=(root, per_worker, entry_bytes, start, out))
                 for root in roots]  # fmt: skip
        for proc in procs:
            proc.start()
        runs = [out.get(timeout=600) for _ in procs]
        for proc in procs:
            proc.join()
            if proc.exitcode != 0:
                raise RuntimeError(f"journal floor process exited {proc.exitcode}")
    total = sum(r.offers for r in runs)
    wall = max(r.wall_s for r in runs)
    user, system = sum(r.user_s for r in runs), sum(r.sys_s for r in runs)
    return {"workers": workers, "offers": total, "entryBytes": entry_bytes,
            "perS": total / wall if wall > 0 else float("nan"),
            "userMsPerOffer": 1000 * user / total, "sysMsPerOffer": 1000 * system / total,
            "cpuMsPerOffer": 1000 * (user + system) / total,
            "runs": [asdict(r) for r in runs]}  # fmt: skip
