"""The committed db/schema.sql equals what all migrations + functions produce."""

from __future__ import annotations

import difflib

from tools.schema_dump import SCHEMA_FILE, dump_schema


def test_committed_schema_matches_migrations(db_dsn: str) -> None:
    fresh = dump_schema(db_dsn)
    committed = SCHEMA_FILE.read_text(encoding="utf-8")
    if fresh != committed:
        diff = "".join(
            difflib.unified_diff(
                committed.splitlines(True),
                fresh.splitlines(True),
                "db/schema.sql",
                "fresh",
                n=2,
            )
        )
        raise AssertionError(
            "db/schema.sql is stale: run `python -m tools.schema_dump`\n" + diff[:6000]
        )
