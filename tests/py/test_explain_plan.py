"""The candidate query is a keyset index range scan with no sort (R-CAND).

Checked on a seeded database through the same auto_explain capture that writes
docs/EXPLAIN.md, so the committed document and this test read the same plan.
"""

from __future__ import annotations

import re

import psycopg

from tools.explain_plans import (
    DOC,
    candidate_page_plans,
    class_page_plans,
    lease_read_plans,
    next_page_plans,
    seed,
)

SORT_ROWS = re.compile(r"->  Sort  \(cost=[^)]*\) \(actual time=[^ ]+ rows=(\d+)")


def test_candidate_page_uses_the_keyset_index(db_dsn: str) -> None:
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        seed(conn, 20_000)
        for captured in (candidate_page_plans(conn), next_page_plans(conn)):
            assert len(captured.plans) == 1, captured
            plan = captured.plans[0]
            assert "Index Scan using runs_candidate_keyset" in plan
            assert "Index Cond: (ROW((- (priority)::integer), queue_seq, id) >" in plan
            assert "rows=9 loops=1" in plan
            # Sorts only ever order a page's worth of rows, never the queue.
            sorted_rows = [int(m) for m in SORT_ROWS.findall(plan)]
            assert sorted_rows and max(sorted_rows) <= 18, sorted_rows


def test_committed_explain_document_shows_index_use() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert "100,000 queued runs" in text
    # The first and second keyset pages, the steady-state ready-runs page and
    # the page of the pull while a scheduled run is due.
    assert text.count("Index Scan using runs_candidate_keyset on runs") == 4
    assert "run_leases_unstarted_expiry" in text
    assert "2,000 offers are in flight" in text


def test_class_page_uses_the_class_keyset_index(db_dsn: str) -> None:
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        seed(conn, 20_000)
        captured = class_page_plans(conn)
        assert len(captured.plans) == 1, captured
        plan = captured.plans[0]
        assert "Index Scan using runs_class_keyset" in plan
        assert "placement_class = k.class_id" in plan
        assert "ROW((- (priority)::integer), queue_seq, id) >" in plan
        sorted_rows = [int(m) for m in SORT_ROWS.findall(plan)]
        assert max(sorted_rows, default=0) <= 18, sorted_rows


def test_committed_explain_document_shows_the_class_index() -> None:
    assert "Index Scan using runs_class_keyset on runs" in DOC.read_text(encoding="utf-8")


def test_lease_read_is_index_lookups_only(db_dsn: str) -> None:
    """The read of every lease ACK, heartbeat and completion: the lease by its
    offer id, each other row by primary key, one row each; no scan of a table."""
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        seed(conn, 2_000)
        captured = lease_read_plans(conn)
        assert len(captured.plans) == 1, captured
        plan = captured.plans[0]
        assert "Index Scan using run_leases_offer_id_key on run_leases rl" in plan
        for pkey in (
            "attempts_pkey",
            "runs_pkey",
            "worker_sessions_pkey",
            "execution_revisions_pkey",
        ):
            assert f"using {pkey} on" in plan, (pkey, plan)
        # The lease TTL is pinned on the lease at claim (SPEC 9.1): no task read.
        assert "tasks_pkey" not in plan, plan
        assert "Seq Scan" not in plan
        assert "Sort" not in plan


def test_committed_explain_document_shows_the_lease_read() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert "## Lease lifecycle read (ACK, heartbeat, completion)" in text
    assert "Index Scan using run_leases_offer_id_key on run_leases rl" in text


def test_pool_page_uses_the_pool_keyset_index(db_dsn: str) -> None:
    """SPEC 13.3: a worker granted one pool of many reads that pool's keyset alone."""
    from tools.explain_plans import pool_page_plans, seed_other_pools

    with psycopg.connect(db_dsn, autocommit=True) as conn:
        seed(conn, 5_000)
        seed_other_pools(conn, pools=50, runs_each=20)
        captured = pool_page_plans(conn)
        assert len(captured.plans) == 1, captured
        plan = captured.plans[0]
        assert "Index Scan using runs_pool_keyset" in plan
        assert "pool_id = k.pool_id" in plan
        assert "ROW((- (priority)::integer), queue_seq, id) >" in plan
        assert "rows=9 loops=1" in plan
        sorted_rows = [int(m) for m in SORT_ROWS.findall(plan)]
        assert max(sorted_rows, default=0) <= 18, sorted_rows


def test_committed_explain_document_shows_the_pool_index() -> None:
    assert "Index Scan using runs_pool_keyset on runs" in DOC.read_text(encoding="utf-8")
