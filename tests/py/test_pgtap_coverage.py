"""Every function file `db/functions/<name>.sql` has a pgTAP file of its own.

`tests/sql/<name>.sql` (run by tests/py/test_pgtap.py) must exist for each
function file, name the function it tests and declare a plan. Only the
functions in TRIVIAL may go without: each is judged to hold no logic a test of
its own could catch breaking that its callers' tests do not already catch.
Keep it short; a function that gains a branch leaves the list.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FUNCTIONS = ROOT / "db" / "functions"
SQL_TESTS = ROOT / "tests" / "sql"

# Function files without a pgTAP file of their own, each with why.
TRIVIAL: dict[str, str] = {
    # Constants only (no branch); its numbers are pinned by tests/sql/pull_bounds.sql.
    "settings": "the protocol constants, assignments only",
    # One jsonb_build_object of its arguments; the envelope is pinned field by field
    # in tests/sql/scan_and_claim.sql and tests/sql/pull_offer.sql.
    "idle_result": "the idle envelope, a single jsonb_build_object",
}


def function_names() -> set[str]:
    return {path.stem for path in FUNCTIONS.glob("*.sql")}


def test_every_function_file_has_its_own_pgtap_file() -> None:
    missing = sorted(name for name in function_names() - TRIVIAL.keys()
                     if not (SQL_TESTS / f"{name}.sql").is_file())  # fmt: skip
    assert not missing, (
        f"function files without tests/sql/<name>.sql: {missing} — add a pgTAP file "
        "(plan, throws_ok by SQLSTATE, SET LOCAL ROLE where privileges matter)"
    )


def test_trivial_list_is_current() -> None:
    names = function_names()
    gone = sorted(TRIVIAL.keys() - names)
    assert not gone, f"TRIVIAL names functions that have no file: {gone}"
    tested = sorted(name for name in TRIVIAL if (SQL_TESTS / f"{name}.sql").is_file())
    assert not tested, f"TRIVIAL names functions that have their own pgTAP file now: {tested}"
    assert all(reason.strip() for reason in TRIVIAL.values()), "every TRIVIAL entry says why"


def test_each_pgtap_file_names_its_function_and_plans() -> None:
    wrong: list[str] = []
    for name in sorted(function_names()):
        path = SQL_TESTS / f"{name}.sql"
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8")
        if not re.search(rf"\bql(?:_private)?\.{re.escape(name)}\b", text):
            wrong.append(f"{path.name}: never names ql[_private].{name}")
        if "plan(" not in text:
            wrong.append(f"{path.name}: no plan()")
    assert not wrong, wrong
