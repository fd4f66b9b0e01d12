"""Executing workers, judged (checker class h, `execution`; SPEC §7, §9.1).

Part of the soak's fleet runs its offers (`--execute`): leases are started,
heartbeated, completed, lost under kills and PostgreSQL restarts, and rescued by
the sweeper's retry policy. Checked over the final snapshot and the history:

1. once per attempt: at most one lease of an attempt was ever started, and at
   most one command was started for it (the workers' `exec.started`);
2. one ending per attempt: an attempt that ended has exactly one event of its
   ending (succeeded: `run.succeeded`, failed: `attempt.failed`, lost:
   `attempt.lost`, cancelled: `run.cancelled`), an attempt that has not ended
   has none of them, and a worker that reports a completion acknowledged
   (`exec.completed`) finds its attempt in exactly that state;
3. the truth of an outcome: an attempt of a task whose command always succeeds
   never failed with `exit_nonzero`, one whose command always fails never
   succeeded, and failed with the command's own exit code;
4. retries within the policy (the manifest's task settings, set through
   `configure_task`): attempts numbered 1..n with n <= maxAttempts, each one
   but the last ended failed or lost, attempt k+1 scheduled by exactly one
   `run.retry_scheduled` no later than min(retryCapMs, retryBaseMs * 2^(k-1))
   after it was created, a run `failed` only once its attempts are used up, a
   live run never left with an ended attempt;
5. cancellation: a run whose cancel answered `cancelled` ends cancelled and no
   lease of it is claimed after the answer; a run whose cancel was requested
   while its command ran is not reported succeeded by a command that was still
   running a lease TTL (+ slack) after the cancel was answered — a heartbeat
   within that TTL must have carried `cancelRequested` to the worker.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator
from itertools import pairwise
from typing import Any

from tools.chaos.facts import Anomaly, Facts, op_us
from tools.chaos.history import CLIENT, INFO, OK

DONE = frozenset({"succeeded", "failed", "cancelled"})
ENDED_ATTEMPT = frozenset({"succeeded", "failed", "lost", "cancelled"})
ENDING_EVENT = {"succeeded": "run.succeeded", "failed": "attempt.failed",
                "lost": "attempt.lost", "cancelled": "run.cancelled"}  # fmt: skip
# exec.completed outcome -> the attempt state it leaves (start_failed: failed).
COMPLETED_STATE = {"succeeded": "succeeded", "failed": "failed", "cancelled": "cancelled",
                   "start_failed": "failed"}  # fmt: skip
RETRY_SLACK_US = 50_000  # not_before vs created_at: one transaction's clock reads
CANCEL_SLACK_US = 1_500_000  # a heartbeat's trip + SIGTERM + exit, after the TTL

__all__ = ["check_execution"]


def check_execution(facts: Facts) -> Iterator[Anomaly]:
    yield from _started_once(facts)
    yield from _ended_once(facts)
    yield from _completions_agree(facts)
    yield from _outcomes_true(facts)
    yield from _retries(facts)
    yield from _cancels(facts)


def _attempts(facts: Facts) -> dict[str, dict[str, Any]]:
    return {a["id"]: a for a in facts.inputs.snapshot["attempts"]}


def _task_of_run(facts: Facts) -> dict[str, dict[str, Any]]:
    """run id -> its task's manifest entry (tasks the manifest knows only)."""
    by_id = {t["taskId"]: t for t in facts.inputs.manifest.get("tasks", {}).values()}
    return {r["id"]: by_id[r["taskId"]] for r in facts.inputs.snapshot["runs"]
            if r.get("taskId") in by_id}  # fmt: skip


def _started_once(facts: Facts) -> Iterator[Anomaly]:
    for attempt_id, leases in facts.leases_by_attempt.items():
        started = [lease["offerId"] for lease in leases if lease["startedAtUs"] is not None]
        if len(started) > 1:
            yield Anomaly(
                "h", f"attempt {attempt_id}: {len(started)} leases started ({', '.join(started)})"
            )
    commands: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for op in facts.inputs.ops:
        if op.f == "exec" and op.value == "started" and op.extra.get("attemptId"):
            commands[str(op.extra["attemptId"])].add((op.process, str(op.offer_id)))
    for attempt_id, starts in commands.items():
        if len(starts) > 1:
            yield Anomaly(
                "h",
                f"attempt {attempt_id}: a command was started {len(starts)} "
                f"times ({sorted(starts)})",
            )


def _ended_once(facts: Facts) -> Iterator[Anomaly]:
    events: Counter[tuple[str, str]] = Counter(
        (str(e.get("attemptId")), e["type"]) for e in facts.inputs.snapshot.get("runEvents", [])
    )
    for attempt in facts.inputs.snapshot["attempts"]:
        state = attempt["state"]
        if state in ENDED_ATTEMPT:
            found = events[(attempt["id"], ENDING_EVENT[state])]
            if found != 1:
                yield Anomaly(
                    "h", f"attempt {attempt['id']} ({state}): {found} {ENDING_EVENT[state]} events"
                )
        else:
            for kind in ("run.succeeded", "attempt.failed", "attempt.lost"):
                if events[(attempt["id"], kind)]:
                    yield Anomaly("h", f"attempt {attempt['id']} still {state} after {kind}")


def _completions_agree(facts: Facts) -> Iterator[Anomaly]:
    attempts = _attempts(facts)
    for op in facts.inputs.ops:
        if op.f != "exec" or op.value != "completed":
            continue
        wanted = COMPLETED_STATE.get(str(op.extra.get("outcome")))
        attempt = attempts.get(str(op.extra.get("attemptId")))
        if wanted is None or attempt is None:
            yield Anomaly(
                "h",
                f"{op.process}: offer {op.offer_id} completed "
                f"{op.extra.get('outcome')} for an unknown attempt/outcome",
            )
        elif attempt["state"] != wanted:
            yield Anomaly(
                "h",
                f"{op.process}: offer {op.offer_id} completed "
                f"{op.extra.get('outcome')}, attempt {attempt['id']} is "
                f"{attempt['state']}",
            )


def _outcomes_true(facts: Facts) -> Iterator[Anomaly]:
    tasks = _task_of_run(facts)
    for attempt in facts.inputs.snapshot["attempts"]:
        task = tasks.get(attempt["runId"])
        if task is None:
            continue
        where = f"attempt {attempt['id']} of a command that always {task['expect']}"
        if attempt["state"] == "succeeded" and task["expect"] != "succeeded":
            yield Anomaly("h", f"{where}: succeeded")
        if (
            attempt["state"] == "failed"
            and attempt.get("reason") == "exit_nonzero"
            and (task["expect"] != "failed" or attempt.get("exitCode") != task["exitCode"])
        ):
            yield Anomaly("h", f"{where}: failed with exit code {attempt.get('exitCode')}")


def _retries(facts: Facts) -> Iterator[Anomaly]:
    tasks = _task_of_run(facts)
    by_run: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for attempt in facts.inputs.snapshot["attempts"]:
        by_run[attempt["runId"]].append(attempt)
    scheduled = Counter(
        str(e.get("attemptId"))
        for e in facts.inputs.snapshot.get("runEvents", [])
        if e["type"] == "run.retry_scheduled"
    )
    for run in facts.inputs.snapshot["runs"]:
        task = tasks.get(run["id"])
        if task is None:
            continue
        chain = sorted(by_run.get(run["id"], []), key=lambda a: a["attemptNo"])
        yield from _chain(run, chain, task, scheduled)


def _chain(run: dict[str, Any], chain: list[dict[str, Any]], task: dict[str, Any],
           scheduled: Counter[str]) -> Iterator[Anomaly]:  # fmt: skip
    where = f"run {run['id']}"
    numbers = [a["attemptNo"] for a in chain]
    if numbers != list(range(1, len(chain) + 1)):
        yield Anomaly("h", f"{where}: attempts numbered {numbers}")
    if len(chain) > task["maxAttempts"]:
        yield Anomaly("h", f"{where}: {len(chain)} attempts, policy allows {task['maxAttempts']}")
    for before, after in pairwise(chain):
        if before["state"] not in ("failed", "lost"):
            yield Anomaly(
                "h",
                f"{where}: attempt {after['attemptNo']} after an attempt "
                f"that ended {before['state']}",
            )
        if scheduled[after["id"]] != 1:
            yield Anomaly(
                "h",
                f"{where}: attempt {after['attemptNo']} with "
                f"{scheduled[after['id']]} run.retry_scheduled events",
            )
        cap = min(task["retryCapMs"], task["retryBaseMs"] * 2 ** (before["attemptNo"] - 1))
        delay = after["notBeforeUs"] - after["createdAtUs"]
        if not -RETRY_SLACK_US <= delay <= cap * 1000 + RETRY_SLACK_US:
            yield Anomaly(
                "h",
                f"{where}: attempt {after['attemptNo']} due {delay / 1e6:.3f}s "
                f"after it was scheduled, policy allows 0..{cap / 1000:.3f}s",
            )
    last = chain[-1] if chain else None
    if last is None:
        return
    if run["state"] == "failed" and (last["state"] not in ("failed", "lost")
                                     or len(chain) < task["maxAttempts"]):  # fmt: skip
        yield Anomaly(
            "h",
            f"{where}: failed after {len(chain)} of {task['maxAttempts']} "
            f"attempts (last {last['state']})",
        )
    if run["state"] == "succeeded" and last["state"] != "succeeded":
        yield Anomaly("h", f"{where}: succeeded, its last attempt {last['state']}")
    if run["state"] not in DONE and last["state"] in ENDED_ATTEMPT:
        yield Anomaly("h", f"{where}: {run['state']} with its last attempt {last['state']}")


def _cancels(facts: Facts) -> Iterator[Anomaly]:
    runs = {r["id"]: r for r in facts.inputs.snapshot["runs"]}
    attempts = _attempts(facts)
    tasks = _task_of_run(facts)
    for op in facts.inputs.ops:
        if op.process != CLIENT or op.f != "cancel" or op.type != OK or op.run_id is None:
            continue
        run, answered = runs.get(op.run_id), op_us(op)
        if run is None:
            continue
        where = f"run {op.run_id}: cancel answered {op.value}"
        if op.value == "cancelled" and run["state"] != "cancelled":
            yield Anomaly("h", f"{where}, the run ended {run['state']}")
        for lease in facts.leases_by_run.get(op.run_id, []):
            if lease["claimedAtUs"] > answered:
                yield Anomaly(
                    "h",
                    f"{where}, lease {lease['offerId']} claimed "
                    f"{(lease['claimedAtUs'] - answered) / 1e6:.1f}s later",
                )
        if op.value in DONE or op.value == "cancelled" or run["id"] not in tasks:
            continue
        ttl_us = int(tasks[run["id"]]["leaseTtlS"]) * 1_000_000
        for lease in facts.leases_by_run.get(op.run_id, []):
            attempt = attempts.get(lease["attemptId"]) or {}
            duration = attempt.get("durationMs")
            if (
                attempt.get("state") != "succeeded"
                or lease["startedAtUs"] is None
                or not isinstance(duration, int)
            ):
                continue
            ran_until = lease["startedAtUs"] + duration * 1000
            if ran_until > answered + ttl_us + CANCEL_SLACK_US:
                yield Anomaly(
                    "h",
                    f"{where}, its command ran on for "
                    f"{(ran_until - answered) / 1e6:.1f}s and succeeded "
                    f"(lease TTL {ttl_us / 1e6:.0f}s)",
                )


def exec_counts(facts: Facts) -> dict[str, int]:
    """What the executing workers did, for the report."""
    found = Counter(op.value for op in facts.inputs.ops if op.f == "exec" and op.type == INFO)
    attempts = Counter(a["state"] for a in facts.inputs.snapshot["attempts"])
    return {"execStarted": found.get("started", 0), "execCompleted": found.get("completed", 0),
            "execAbandoned": found.get("abandoned", 0),
            "execRecovered": found.get("recovered", 0),
            "execCancelSeen": found.get("cancel_seen", 0),
            "leasesStarted": sum(1 for lease in facts.inputs.snapshot["leases"]
                                 if lease["startedAtUs"] is not None),
            "attemptsRetried": sum(1 for a in facts.inputs.snapshot["attempts"]
                                   if a["attemptNo"] > 1),
            **{f"attempts{k.capitalize()}": v for k, v in sorted(attempts.items())}}  # fmt: skip
