"""Developer tooling, run from a checkout; not part of the wheel.

`python -m tools.bench …`, `python -m tools.chaos …`, `python -m tools.explain_plans`,
`python -m tools.schema_dump`.
"""
