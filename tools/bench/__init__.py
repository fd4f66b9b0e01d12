"""`python -m tools.bench`: one module per sub-benchmark (sql, idle, depth, e2e, edge).

Each database benchmark exposes `run(ctx) -> list[Table]`; `e2e` and `edge`,
which start their own processes, expose `run_standalone(quick)`. See cli.py
for the report, docs/BENCHMARKS.md for the figures (run log: docs/BENCHMARKS-HISTORY.md).
"""
