-- ql.prune_audit(p_retain_s bigint, p_batch integer DEFAULT 1000,
--                p_dry_run boolean DEFAULT false) -> jsonb {securityAudit, more}
--
-- Purpose: retention of the authentication audit (SPEC §9.6), one batch per
--   call: security_audit rows whose occurred_at is older than now - p_retain_s,
--   oldest first (security_audit_time), are deleted. Callers loop, one
--   transaction per batch, while `more` (`qinglong runtime sweep
--   --retain-audit`, `admin prune`). With p_dry_run the batch is only counted.
--   A call that deleted rows leaves one audit row of its own (SPEC §13.6):
--   action `audit.pruned`, outcome allowed, reason retention, actor =
--   session_user (the login that called: the sweeper's, an operator's), detail
--   {securityAudit: rows deleted, retainS, cutoffMs, batch}. The newest
--   audit.pruned row is never deleted, so the last prune stays on record even
--   after a `--retain-audit 0s` (whoever deletes it must first leave a newer
--   one); a call that deleted only older audit.pruned rows leaves none, so
--   retention does not feed itself.
-- Inputs: p_retain_s 0..3153600000 seconds (0 = everything up to now),
--   p_batch 1..10000 rows (default 1000), p_dry_run (default false).
-- Fences: each row picked on its locked row; the newest audit.pruned row
--   (security_audit_pruned, one probe) is left out of the batch.
-- Writes: deletes of the batch's audit rows and, when any other than
--   audit.pruned rows went, one audit.pruned row; none in a dry run.
-- Locks: the batch's rows FOR UPDATE SKIP LOCKED (concurrent pruners split the
--   work; a denial being written is a new row nobody waits for).
-- Idempotency: deleted rows are gone; the next call takes the next batch.
-- Errors: QL006 p_retain_s out of bounds (COLUMN retainAudit), p_batch out of
--   1..10000 (COLUMN batch); nothing changed on error.
-- Caller: ql_runtime (`admin prune`), ql_sweeper (`qinglong runtime sweep`).
CREATE OR REPLACE FUNCTION ql.prune_audit(
    p_retain_s bigint,
    p_batch integer DEFAULT 1000,
    p_dry_run boolean DEFAULT false
)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    v_max_retain_s constant bigint := 3153600000;
    v_max_batch constant integer := 10000;
    v_cutoff timestamptz;
    v_keep bigint;
    v_count bigint;
    v_others bigint;
BEGIN
    IF p_retain_s IS NULL OR p_retain_s NOT BETWEEN 0 AND v_max_retain_s THEN
        RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'retainAudit',
            MESSAGE = format('retainAudit must be between 0 and %s seconds', v_max_retain_s);
    END IF;
    IF p_batch IS NULL OR p_batch NOT BETWEEN 1 AND v_max_batch THEN
        RAISE EXCEPTION USING ERRCODE = 'QL006', COLUMN = 'batch',
            MESSAGE = format('batch must be between 1 and %s', v_max_batch);
    END IF;
    v_cutoff := clock_timestamp() - make_interval(secs => p_retain_s);
    SELECT max(a.id) INTO v_keep FROM ql_private.security_audit a
     WHERE a.action = 'audit.pruned';

    IF coalesce(p_dry_run, false) THEN
        SELECT count(*) INTO v_count
          FROM (SELECT 1 FROM ql_private.security_audit a
                 WHERE a.occurred_at < v_cutoff AND a.id IS DISTINCT FROM v_keep
                 ORDER BY a.occurred_at
                 LIMIT p_batch) x;
    ELSE
        WITH batch AS MATERIALIZED (
            SELECT a.id FROM ql_private.security_audit a
             WHERE a.occurred_at < v_cutoff AND a.id IS DISTINCT FROM v_keep
             ORDER BY a.occurred_at
             LIMIT p_batch
               FOR UPDATE SKIP LOCKED
        ), gone AS (
            DELETE FROM ql_private.security_audit a USING batch b WHERE a.id = b.id
            RETURNING a.action
        )
        SELECT count(*), count(*) FILTER (WHERE g.action <> 'audit.pruned')
          INTO v_count, v_others FROM gone g;
        IF v_others > 0 THEN
            INSERT INTO ql_private.security_audit (action, outcome, reason, actor, detail)
            VALUES ('audit.pruned', 'allowed', 'retention', session_user::text,
                    jsonb_build_object('securityAudit', v_count, 'retainS', p_retain_s,
                                       'cutoffMs', ql_private.epoch_ms(v_cutoff),
                                       'batch', p_batch));
        END IF;
    END IF;
    RETURN jsonb_build_object('securityAudit', v_count, 'more', v_count >= p_batch);
END
$$;
REVOKE ALL ON FUNCTION ql.prune_audit(bigint, integer, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.prune_audit(bigint, integer, boolean) TO ql_runtime, ql_sweeper;
