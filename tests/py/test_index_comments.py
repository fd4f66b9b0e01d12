"""Every index on the claim path names the query it serves (SPEC §18.4).

Read from the catalog of a migrated database (the comments of migration 0030)
and from docs/EXPLAIN.md, which tools/explain_plans.py writes: every index on
runs, run_leases, attempts and events has a comment saying what it serves
(`Serves:`) or the rule it enforces (`Rule:`); every function a comment names
exists; every `Plan: "<section>"` names a section of docs/EXPLAIN.md whose
captured plan reads the index; each index a pull or a lease call reads names
such a section; and the document's index table lists every index.

A pytest rather than a pgTAP file: the check reads docs/EXPLAIN.md, which a
pgTAP file run by pg_prove cannot open.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import psycopg

from tools.explain_plans import DOC

TABLES = ("runs", "run_leases", "attempts", "events")
FUNCTION = re.compile(r"\b(ql|ql_private)\.([a-z_][a-z0-9_]*)\b")
PLAN = re.compile(r'Plan: "([^"]+)"')
# The indexes a pull (ql.pull_offer, ql.pull_offers) or a lease call (ACK,
# heartbeat, completion) reads, as docs/EXPLAIN.md's captured plans show them.
CLAIM_PATH = frozenset(
    {
        "runs_pkey",
        "runs_candidate_keyset",
        "runs_due",
        "runs_class_keyset",
        "runs_class_due",
        "runs_pool_keyset",
        "runs_pool_due",
        "runs_pool_class_keyset",
        "runs_pool_class_due",
        "run_leases_offer_id_key",
        "run_leases_attempt_id_lease_generation_key",
        "run_leases_one_live",
        "run_leases_session_live_counted",
        "run_leases_unstarted_expiry",
        "attempts_pkey",
    }
)


@dataclass(frozen=True)
class Index:
    table: str
    name: str
    comment: str | None


def _indexes(conn: psycopg.Connection) -> list[Index]:
    rows = conn.execute(
        "SELECT c.relname, i.relname, obj_description(i.oid, 'pg_class')"
        "  FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid"
        "  JOIN pg_class c ON c.oid = x.indrelid"
        " WHERE c.relnamespace = 'ql_private'::regnamespace AND c.relname = ANY (%s)"
        " ORDER BY 1, 2",
        (list(TABLES),),
    ).fetchall()
    return [Index(*row) for row in rows]


def _functions(conn: psycopg.Connection) -> set[tuple[str, str]]:
    rows = conn.execute(
        "SELECT n.nspname, p.proname FROM pg_proc p"
        "  JOIN pg_namespace n ON n.oid = p.pronamespace"
        " WHERE n.nspname IN ('ql', 'ql_private')"
    ).fetchall()
    return {(schema, name) for schema, name in rows}


def _sections(text: str) -> dict[str, str]:
    """docs/EXPLAIN.md's `## ` sections by title."""
    parts = re.split(r"^## (.+)$", text, flags=re.MULTILINE)
    return {title.strip(): body for title, body in zip(parts[1::2], parts[2::2], strict=True)}


def _reads(plan_text: str, index: str) -> bool:
    return (
        re.search(rf"(?:using|Bitmap Index Scan on) {re.escape(index)} on ", plan_text) is not None
    )


def test_every_index_names_what_it_serves(db_dsn: str) -> None:
    with psycopg.connect(db_dsn) as conn:
        indexes = _indexes(conn)
        functions = _functions(conn)
    assert {index.table for index in indexes} == set(TABLES)
    missing = [index.name for index in indexes if not index.comment]
    assert not missing, f"indexes without a comment: {missing}"
    for index in indexes:
        assert index.comment is not None
        assert "Serves:" in index.comment or "Rule:" in index.comment, index
        named = set(FUNCTION.findall(index.comment))
        assert named or "Rule:" in index.comment, index
        unknown = sorted(f"{schema}.{name}" for schema, name in named - functions)
        assert not unknown, f"{index.name} names functions that do not exist: {unknown}"


def test_claim_path_indexes_show_in_their_plans(db_dsn: str) -> None:
    with psycopg.connect(db_dsn) as conn:
        indexes = {index.name: index for index in _indexes(conn)}
    sections = _sections(DOC.read_text(encoding="utf-8"))
    assert CLAIM_PATH <= indexes.keys()
    for index in indexes.values():
        titles = PLAN.findall(index.comment or "")
        if index.name in CLAIM_PATH:
            assert titles, f"{index.name} is read on the claim path but names no plan"
        for title in titles:
            assert title in sections, f"{index.name}: no section {title!r} in {DOC.name}"
            assert _reads(sections[title], index.name), (
                f"{index.name}: the plan of {title!r} does not read it"
            )


def test_the_explain_document_lists_every_index(db_dsn: str) -> None:
    with psycopg.connect(db_dsn) as conn:
        names = [index.name for index in _indexes(conn)]
    table = _sections(DOC.read_text(encoding="utf-8")).get("Indexes on the claim path", "")
    assert "### Which updates are HOT" in table
    unlisted = [name for name in names if f"| `{name}` |" not in table]
    assert not unlisted, f"indexes missing from {DOC.name}'s index table: {unlisted}"
