"""`bench sql`'s batch-10 floor on a real throwaway cluster: every phase drains
exactly its own rows, the floor makes the claim's three writes for every run it
takes (and its variants only theirs), and each phase's WAL is its own."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from tools.bench import batch_floor, sql_batch
from tools.bench.common import Api, BenchContext, prepare_context, vacuum

RUNS = 40
THREADS = 2
ROWS = RUNS + sql_batch.WARMUP * sql_batch.BATCH * THREADS


@pytest.fixture(scope="module")
def ctx() -> Iterator[BenchContext]:
    context = prepare_context(quick=True, workers=4)
    try:
        yield context
    finally:
        context.cluster.cleanup()


def _counts(dsn: str) -> tuple[int, int, int, int]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM ql_private.run_leases),"
            " (SELECT count(*) FROM ql_private.events WHERE type = 'run.dispatched'),"
            " (SELECT count(*) FROM ql_private.runs WHERE state = 'dispatching'),"
            " (SELECT count(*) FROM ql_private.runs WHERE state = 'queued')"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1]), int(row[2]), int(row[3])


@pytest.mark.timeout(120)
def test_floor_variants_write_what_they_name(ctx: BenchContext) -> None:
    expected = {  # (leases, events) per run taken
        "floor": (1, 1),
        "floorLocks": (1, 1),
        "noEvent": (1, 0),
        "noLease": (0, 1),
        "runOnly": (0, 0),
    }
    assert set(expected) == {v.key for v in batch_floor.VARIANTS}
    with ctx.fresh_db() as dsn:
        with psycopg.connect(dsn, autocommit=True) as conn:
            batch_floor.install(conn)
        for variant in batch_floor.VARIANTS:
            leases, events, dispatching, _ = _counts(dsn)
            with psycopg.connect(dsn, autocommit=True) as conn:
                Api(conn).enqueue(ctx.tasks["plain"], ROWS)
            vacuum(dsn)
            timings = sql_batch._floor(dsn, THREADS, variant)
            assert timings.count == RUNS, variant.key  # warm-up batches not counted
            now = _counts(dsn)
            per_lease, per_event = expected[variant.key]
            assert now == (
                leases + per_lease * ROWS,
                events + per_event * ROWS,
                dispatching + ROWS,
                0,
            ), variant.key


@pytest.mark.timeout(180)
def test_level_drains_every_phase_side_by_side_with_its_wal(ctx: BenchContext) -> None:
    level = sql_batch._level(ctx, THREADS, RUNS, reverse=True)
    assert level["order"] == list(sql_batch.PHASES[::-1])
    for key in sql_batch.PHASES:
        assert level[key]["count"] == RUNS, key
        assert level["wal"][key]["bytes"] > 0 and level["wal"][key]["records"] > 0, key
    # The floor writes the lease and the event the raw claim does not: several
    # times its WAL per claim (measured ~4x); ours writes at least the floor's.
    wal = {key: level["wal"][key]["bytes"] for key in sql_batch.PHASES}
    assert wal["floor"] > 2 * wal["raw"]
    assert wal["ours"] >= 0.9 * wal["floor"]
    assert wal["runOnly"] < wal["noLease"] < wal["floor"]
    assert wal["noEvent"] < wal["floor"]
    assert level["floorRatio"] > 0 and level["oursFloorRatio"] > 0
