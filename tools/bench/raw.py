"""The baseline of `bench sql`: a plain FOR UPDATE SKIP LOCKED claim transaction.

What a hand-written queue does in one call: pick the first queued job in
priority/FIFO order with SKIP LOCKED, mark it running, append one event.
It lives in a bench-only schema (`qlbench`) of the same database, so both
systems share the server, its settings and its WAL; it is never installed
outside the benchmark's throwaway cluster.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import psycopg

from tools.bench.common import Timings, run_threads

SCHEMA_SQL = """
CREATE SCHEMA IF NOT EXISTS qlbench;
CREATE TABLE IF NOT EXISTS qlbench.jobs (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    priority    smallint NOT NULL DEFAULT 0,
    state       text NOT NULL DEFAULT 'queued',
    payload     jsonb NOT NULL DEFAULT '{}'::jsonb,
    worker      text,
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    claimed_at  timestamptz
);
CREATE INDEX IF NOT EXISTS jobs_queued ON qlbench.jobs (priority DESC, id) WHERE state = 'queued';
CREATE TABLE IF NOT EXISTS qlbench.events (
    id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id   bigint NOT NULL REFERENCES qlbench.jobs(id),
    type     text NOT NULL,
    payload  jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
-- What a hand-written queue's worker does with a job it claimed, one call each:
-- report it started, then finished (the exchange for ql.ack_lease and
-- ql.complete_lease on the other side).
CREATE OR REPLACE FUNCTION qlbench.start(p_id bigint, p_worker text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE qlbench.jobs SET state = 'started'
     WHERE id = p_id AND worker = p_worker AND state = 'running';
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    INSERT INTO qlbench.events (job_id, type, payload)
    VALUES (p_id, 'job.started', jsonb_build_object('worker', p_worker));
    RETURN true;
END
$$;
CREATE OR REPLACE FUNCTION qlbench.finish(p_id bigint, p_worker text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE qlbench.jobs SET state = 'done'
     WHERE id = p_id AND worker = p_worker AND state = 'started';
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    INSERT INTO qlbench.events (job_id, type, payload)
    VALUES (p_id, 'job.finished', jsonb_build_object('worker', p_worker));
    RETURN true;
END
$$;
CREATE OR REPLACE FUNCTION qlbench.claim(p_worker text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_id bigint;
BEGIN
    SELECT j.id INTO v_id FROM qlbench.jobs j
     WHERE j.state = 'queued'
     ORDER BY j.priority DESC, j.id
     LIMIT 1
       FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    UPDATE qlbench.jobs SET state = 'running', worker = p_worker, claimed_at = clock_timestamp()
     WHERE id = v_id;
    INSERT INTO qlbench.events (job_id, type, payload)
    VALUES (v_id, 'job.claimed', jsonb_build_object('worker', p_worker));
    RETURN v_id;
END
$$;
"""


def install(conn: psycopg.Connection) -> None:
    conn.execute(SCHEMA_SQL)


def enqueue(conn: psycopg.Connection, count: int) -> None:
    conn.execute(
        "INSERT INTO qlbench.jobs (priority, payload)"
        " SELECT 0, jsonb_build_object('argv', jsonb_build_array('true'), 'n', g)"
        " FROM generate_series(1, %s) g",
        (count,),
    )


def drain(
    dsn: str,
    clients: int,
    warmup: int = 2,
    lifecycle: bool = False,
    on_drained: Callable[[], None] | None = None,
    claim: str = "qlbench.claim",
) -> Timings:
    """`clients` threads, each on its own connection with a server-side prepared
    statement, call qlbench.claim until the queue is empty (as `bench sql` does);
    every connection first makes `warmup` unmeasured claims (plpgsql plans are
    cached per connection), so enqueue `clients * warmup` extra jobs. With
    `lifecycle`, each claimed job is then reported started and finished
    (qlbench.start, qlbench.finish: one call each), as a worker would.
    `on_drained` runs once the last thread found the queue empty, before any
    connection closes (e.g. to read the backends' CPU time while they live).
    `claim` names the claim function (one text argument, the client's name; NULL
    once nothing is left): the raw claim, or `bench sql`'s schema floor."""
    statement = f"SELECT {claim}(%s)"  # a function name of ours, never input
    results: list[tuple[int, list[float]]] = []
    lock = threading.Lock()
    done: set[int] = set()
    drained = threading.Event()

    def finished_and_wait() -> None:
        with lock:
            done.add(threading.get_ident())
            last = len(done) == clients
        if last:
            try:
                if on_drained is not None:
                    on_drained()
            finally:
                drained.set()
        drained.wait()

    def finished() -> None:
        # A thread that failed before its queue ran dry must not hold the others.
        with lock:
            done.add(threading.get_ident())
            if len(done) == clients:
                drained.set()

    def work(index: int, barrier: threading.Barrier) -> None:
        try:
            claim(index, barrier)
        finally:
            finished()

    def claim(index: int, barrier: threading.Barrier) -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            name = f"raw-{index}"
            for _ in range(warmup):
                conn.execute(statement, (name,), prepare=True).fetchone()
            times: list[float] = []
            barrier.wait()
            while True:
                started = time.perf_counter()
                row = conn.execute(statement, (name,), prepare=True).fetchone()
                elapsed = time.perf_counter() - started
                if row is None or row[0] is None:
                    break
                times.append(elapsed)
                if lifecycle:
                    _finish(conn, row[0], name)
            with lock:
                results.append((len(times), times))
            # The connection stays open until every thread is done (`finished`).
            finished_and_wait()

    timings = Timings(wall_s=run_threads(clients, work))
    for claimed, times in results:
        timings.count += claimed
        timings.latencies += times
    return timings


def _finish(conn: psycopg.Connection, job_id: int, name: str) -> None:
    for step in ("start", "finish"):
        row = conn.execute(
            f"SELECT qlbench.{step}(%s, %s)", (job_id, name), prepare=True
        ).fetchone()
        if row is None or row[0] is not True:
            raise RuntimeError(f"qlbench.{step} refused job {job_id}")
