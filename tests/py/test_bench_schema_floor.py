"""`bench sql`'s schema floor makes the claim's own writes: guard the mirror.

qlbench.floor_claim (tools/bench/schema_floor.py) repeats ql_private.claim_candidate's
lease insert on purpose — the floor is "what a claim must write", so if the claim
starts writing another column, a floor that does not is no longer a floor.
"""

from __future__ import annotations

import re
from pathlib import Path

from tools.bench import schema_floor

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

