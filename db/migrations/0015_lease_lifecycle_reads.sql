-- 0015 lease lifecycle reads: one statement per read, one fence expression.
--
-- Why (measured per ACK and completion, docs/BENCHMARKS.md): a lease ACK,
-- heartbeat or completion reads its lease twice (unlocked to decide, then again
-- after its row locks), and each read was a set-returning plpgsql call
-- (ql_private.lease_state) whose fence function (ql_private.lease_fence ->
-- ql_private.recover_fence) read the session, attempt, run and revision with
-- four statements of its own: ten statements of reads per call, plus a fifth to
-- find the rows to lock. The fences are now one pure SQL expression,
-- ql_private.lease_verdict, inlined into the single statement that reads the
-- lease with its attempt, run, session and revision digest; ql_private.lease_open
-- runs that statement itself and returns one row (OUT parameters, no
-- set-returning call), and takes the rows to lock from the lease its caller's
-- first read returned (p_seen: a lease's id, attempt and run never change once
-- written). ql_private.recover_fence (offer replays) reads its rows in one
-- statement and asks the same expression.
--
-- What changes in the catalog: ql_private.lease_open gains p_seen and returns a
-- row instead of a set (both need a DROP: CREATE OR REPLACE can change neither);
-- ql_private.lease_state and ql_private.lease_fence have no caller left and are
-- dropped (db/functions no longer creates them). As in 0012, the migrator
-- re-applies every db/functions/*.sql right after the migrations in this same
-- transaction, so lease_open comes back at once with its REVOKE and COMMENT.
-- IF EXISTS: on a fresh database they do not exist yet here.
--
-- Runs as ql_owner. Immutable once landed: fix forward.

DROP FUNCTION IF EXISTS ql_private.lease_open(uuid, uuid, uuid, bigint, bytea, bigint, text, text);
DROP FUNCTION IF EXISTS ql_private.lease_state(uuid, uuid, uuid, bigint, bytea);
DROP FUNCTION IF EXISTS ql_private.lease_fence(ql_private.run_leases, uuid, uuid, bigint, bytea);
