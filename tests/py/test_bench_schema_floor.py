"""`bench sql`'s schema floor makes the claim's own writes: guard the mirror.

qlbench.floor_claim (tools/bench/schema_floor.py) repeats ql_private.claim_candidate's
lease insert on purpose — the floor is "what a claim must write", so if the claim
starts writing another column, a floor that does not is no longer a floor.
"""

from __future__ import annotations

import re
from pathlib import Path

from tools.bench import batch_floor, schema_floor

ROOT = Path(__file__).resolve().parents[2]
_INSERT = re.compile(r"INSERT INTO ql_private\.(\w+)\s*\(([^)]*)\)", re.S)


def _inserts(sql: str) -> dict[str, list[str]]:
    return {table: [c.strip() for c in cols.split(",")] for table, cols in _INSERT.findall(sql)}


def test_floor_writes_the_claims_lease_and_event_columns() -> None:
    claim = _inserts((ROOT / "db" / "functions" / "claim_candidate.sql").read_text())
    floor = _inserts(schema_floor.SCHEMA_SQL)
    assert set(claim) == set(floor) == {"run_leases", "events"}
    assert floor["run_leases"] == claim["run_leases"]
    assert floor["events"] == claim["events"]


def _event_payload_keys(sql: str) -> list[str]:
    """The keys of the run.dispatched payload's jsonb_build_object, in order."""
    start = sql.index("'run.dispatched'")
    body = sql[sql.index("jsonb_build_object(", start) :]
    body = body[: body.index(";")]
    return re.findall(r"'(\w+)',", body)


def test_batch_floor_writes_the_claims_lease_and_event_columns_and_payload() -> None:
    claim_sql = (ROOT / "db" / "functions" / "claim_candidate.sql").read_text()
    claim = _inserts(claim_sql)
    floor = _inserts(batch_floor.SCHEMA_SQL)
    assert set(floor) == {"run_leases", "events"}
    assert floor["run_leases"] == claim["run_leases"]
    assert floor["events"] == claim["events"]
    # The event is the claim's in size too: the same payload keys, in order.
    keys = _event_payload_keys(claim_sql)
    assert keys and _event_payload_keys(batch_floor.SCHEMA_SQL) == keys
