"""`bench e2e`: offers through the real path vs PgQueuer's own consumer — NOT
MEASURED in this build.

The intended measurement: offers/s and p50/p99 through two ingress processes
(HTTPS, mTLS, one `ql.pull_offer` per pull), with 8 and 32 concurrent worker
processes validating each offer and fsyncing it into their inbox, against
PgQueuer's consumer (installed with pip into the bench environment only, never
a runtime dependency) dequeuing an equal number of jobs from the same
PostgreSQL. It is not implemented yet; this module reports that plainly so
the report never suggests a figure that was not taken.
"""

from __future__ import annotations

import importlib.util

from qinglong.bench.common import Table

REASON = ("not measured: the real-path harness (2 ingress processes, 8/32 worker processes, "
          "PgQueuer consumer) is not implemented in this build")


def run_standalone(quick: bool) -> list[Table]:
    del quick  # same answer either way
    pgqueuer = "installed" if importlib.util.find_spec("pgqueuer") else "not installed"
    table = Table("e2e: real path vs PgQueuer", ["measure", "value"])
    table.rows = [["offers/s, p50/p99 at 8 and 32 workers; ratio to PgQueuer", "not measured"]]
    table.notes.append(f"{REASON} (PgQueuer {pgqueuer} here)")
    table.data = {"measured": False, "reason": REASON}
    return [table]
