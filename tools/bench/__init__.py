"""`python -m tools.bench`: one module per sub-benchmark (sql, idle, depth, ops,
e2e, edge, soak).

Each database benchmark exposes `run(ctx) -> list[Table]`; `e2e`, `edge` and
`soak`, which start their own processes, expose `run_standalone(quick, **options)`. See cli.py
for the report, docs/BENCHMARKS.md for the figures (run log: docs/BENCHMARKS-HISTORY.md).
"""
