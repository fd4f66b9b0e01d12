"""Chaos soak and offline checker (docs/RELIABILITY.md).

`soak` runs the real system on loopback — a throwaway PostgreSQL, three ingress
processes behind a fault-injecting TCP proxy, a dozen worker processes and the
lease sweeper — while a nemesis kills processes, restarts PostgreSQL and drops
responses. It records a JSON-lines history; `checker` then verifies that history
against a database snapshot and the workers' journals, offline.

Modules: `history` (the history format and how worker logs map onto it),
`snapshot` (database and journal snapshots), `checker` (the anomaly classes),
`facts` (the checker's indexes), `judge` (each failure against its cause),
`invariants` (run/lease state invariants), `evidence` (digests recomputed
independently), `proxy` (the TCP proxy), `procs` (supervised child processes),
`env` (cluster, PKI, identities, configs), `soak` (the orchestrator), `mutate`
(mutants under `mutants/` applied to copies, each soaked).
"""
