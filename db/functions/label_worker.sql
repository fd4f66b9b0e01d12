-- ql.label_worker(p_worker_id text, p_labels jsonb DEFAULT '{}',
--                 p_remove text[] DEFAULT '{}', p_self_labels boolean DEFAULT NULL)
--   -> jsonb {workerId, labels, selfLabels, sessionsDraining, leasesReleased}
--
-- Purpose: record the labels an operator vouches for (SPEC §13.2, `admin worker
--   create|label --label k=v`, `--remove k`, `--self-labels`). ql.open_session
--   accepts a session's declared labels only when each is granted here (same
--   key, same value, byte for byte), unless the worker has self_labels.
--   p_labels grants (or re-grants with a new value) each key -> value; p_remove
--   takes the named grants away (a key not granted is ignored); p_self_labels
--   true/false switches self-labels on/off, NULL leaves it as it is.
--   A change takes effect at the next session open, and also at once for the
--   worker's ACTIVE sessions: when self_labels is off after the change, each
--   active session whose declared labels are no longer all granted drains
--   (ql_private.drain_session, as `admin session close --drain`: no new offer,
--   unstarted leases released `session_closed` and re-queued at once, started
--   runs may finish; the session closes with its last lease). Its worker then
--   has to open a new session, which is checked against the grants.
--   One `worker.labels_changed` event (events.worker_id; payload workerId,
--   granted and removed keys (no values), selfLabels, sessionsDraining,
--   leasesReleased, actor = session_user) when anything changed.
-- Inputs: p_worker_id (lowercase canonical UUID); p_labels a JSON object (NULL =
--   {}) of keys ^[a-z0-9][a-z0-9._/-]{0,62}$ to string values of 1..128
--   characters without control or invisible characters (the capabilities'
--   label rules, SPEC §4.4); p_remove keys (NULL = none); a key may not be both
--   granted and removed; at most 32 labels granted to a worker after the call.
-- Fences: the worker exists.
-- Writes: worker_labels rows (deleted, inserted, updated), the worker row
--   (self_labels), drained sessions and their released leases, one event.
--   NOTIFY 's:<workerId>' at commit by the session trigger when one drains.
-- Locks: the worker row FOR NO KEY UPDATE (which serializes with ql.open_session
--   of the worker: an open sees the grants before or after the change, never a
--   part of it), then each active session FOR UPDATE (waits for a claim holding
--   the session's fence lock), then drain_session's locks.
-- Idempotency: repeating a call changes nothing, writes no event and answers the
--   same labels and selfLabels (sessionsDraining 0, leasesReleased 0).
-- Errors (nothing changed): QL001 malformed worker id (COLUMN workerId), labels
--   not an object / bad key / value not a string, empty or with a control
--   character (COLUMN labels), bad key in p_remove or a key both granted and
--   removed (COLUMN remove); QL002 a value over 128 characters, more than 32
--   labels (COLUMN labels); QL004 unknown worker (COLUMN workerId).
-- Caller: ql_runtime (control plane).
CREATE OR REPLACE FUNCTION ql.label_worker(
    p_worker_id text,
    p_labels jsonb DEFAULT '{}'::jsonb,
    p_remove text[] DEFAULT '{}'::text[],
    p_self_labels boolean DEFAULT NULL
)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_key_pattern constant text := '^[a-z0-9][a-z0-9._/-]{0,62}$';
    v_worker_id uuid := ql_private.parse_uuid(p_worker_id, 'workerId');
    v_labels jsonb := coalesce(p_labels, '{}'::jsonb);
    v_remove text[] := coalesce(p_remove, '{}'::text[]);
    v_worker ql_private.workers;
    v_key text;
    v_value jsonb;
    v_text text;
    v_granted text[] := '{}'::text[];
    v_removed text[];
    v_self_labels boolean;
    v_session ql_private.worker_sessions;
    v_drained record;
    v_draining integer := 0;
    v_released integer := 0;
    v_result jsonb;
BEGIN
    IF jsonb_typeof(v_labels) <> 'object' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'labels',
            MESSAGE = 'labels must be a JSON object';
    END IF;
    IF (SELECT count(*) FROM jsonb_object_keys(v_labels)) > 32 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL002', COLUMN = 'labels',
            MESSAGE = 'a worker has at most 32 granted labels';
    END IF;
    FOR v_key, v_value IN SELECT e.key, e.value FROM jsonb_each(v_labels) e ORDER BY e.key LOOP
        IF v_key !~ v_key_pattern THEN
            RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'labels', MESSAGE = format(
                'labels: key %s must match ^[a-z0-9][a-z0-9._/-]{0,62}$',
                quote_literal(left(regexp_replace(v_key, '[^ -~]', '?', 'g'), 64)));
        END IF;
        IF jsonb_typeof(v_value) <> 'string' THEN
            RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'labels',
                MESSAGE = format('labels["%s"] must be a string', v_key);
        END IF;
        v_text := v_value #>> '{}';
        IF char_length(v_text) > 128 THEN
            RAISE EXCEPTION USING ERRCODE = 'QL002', COLUMN = 'labels',
                MESSAGE = format('labels["%s"] is longer than 128 characters', v_key);
        ELSIF v_text = '' THEN
            RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'labels',
                MESSAGE = format('labels["%s"] must not be empty', v_key);
        ELSIF v_text ~ '[\u0001-\u001f\u007f-\u009f\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]' THEN
            RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'labels',
                MESSAGE = format('labels["%s"] contains a control or invisible character', v_key);
        END IF;
    END LOOP;
    SELECT r INTO v_key FROM unnest(v_remove) AS r
     WHERE r IS NULL OR r !~ v_key_pattern LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'remove', MESSAGE = format(
            'remove: key %s must match ^[a-z0-9][a-z0-9._/-]{0,62}$',
            coalesce(quote_literal(left(regexp_replace(v_key, '[^ -~]', '?', 'g'), 64)), 'NULL'));
    END IF;
    SELECT r INTO v_key FROM unnest(v_remove) AS r WHERE v_labels ? r LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'remove',
            MESSAGE = format('remove: key %s is also granted in labels', quote_literal(v_key));
    END IF;

    SELECT w.* INTO v_worker FROM ql_private.workers w WHERE w.id = v_worker_id
       FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'QL004', COLUMN = 'workerId', MESSAGE = 'worker not found';
    END IF;

    IF (SELECT count(*) FROM (
            SELECT g.key FROM ql_private.worker_labels g
             WHERE g.worker_id = v_worker_id AND g.key <> ALL (v_remove)
            UNION
            SELECT k FROM jsonb_object_keys(v_labels) AS k) AS after_change) > 32 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL002', COLUMN = 'labels',
            MESSAGE = 'a worker has at most 32 granted labels';
    END IF;

    WITH gone AS (
        DELETE FROM ql_private.worker_labels g
         WHERE g.worker_id = v_worker_id AND g.key = ANY (v_remove)
        RETURNING g.key)
    SELECT coalesce(array_agg(gone.key ORDER BY gone.key), '{}'::text[]) INTO v_removed FROM gone;
    WITH put AS (
        INSERT INTO ql_private.worker_labels AS g (worker_id, key, value)
        SELECT v_worker_id, e.key, e.value FROM jsonb_each_text(v_labels) e
        ON CONFLICT (worker_id, key) DO UPDATE
           SET value = excluded.value, granted_at = clock_timestamp()
         WHERE g.value IS DISTINCT FROM excluded.value
        RETURNING g.key)
    SELECT coalesce(array_agg(put.key ORDER BY put.key), '{}'::text[]) INTO v_granted FROM put;
    v_self_labels := coalesce(p_self_labels, v_worker.self_labels);
    IF v_self_labels IS DISTINCT FROM v_worker.self_labels THEN
        UPDATE ql_private.workers w SET self_labels = v_self_labels WHERE w.id = v_worker_id;
    END IF;

    IF NOT v_self_labels THEN
        FOR v_session IN
            SELECT ws.* FROM ql_private.worker_sessions ws
             WHERE ws.worker_id = v_worker_id AND ws.state = 'active'
             ORDER BY ws.generation
               FOR UPDATE
        LOOP
            CONTINUE WHEN NOT EXISTS (
                SELECT 1 FROM jsonb_each_text(v_session.capabilities -> 'labels') d
                 WHERE NOT EXISTS (SELECT 1 FROM ql_private.worker_labels g
                                    WHERE g.worker_id = v_worker_id
                                      AND g.key = d.key AND g.value = d.value));
            SELECT * INTO v_drained FROM ql_private.drain_session(v_session.session_id);
            v_released := v_released + v_drained.released;
            v_draining := v_draining + 1;
        END LOOP;
    END IF;

    IF cardinality(v_granted) > 0 OR cardinality(v_removed) > 0
       OR v_self_labels IS DISTINCT FROM v_worker.self_labels OR v_draining > 0 THEN
        INSERT INTO ql_private.events (type, worker_id, payload)
        VALUES ('worker.labels_changed', v_worker_id, jsonb_build_object(
            'workerId', v_worker_id, 'granted', to_jsonb(v_granted),
            'removed', to_jsonb(v_removed), 'selfLabels', v_self_labels,
            'sessionsDraining', v_draining, 'leasesReleased', v_released,
            'actor', session_user));
    END IF;

    SELECT jsonb_build_object(
               'workerId', v_worker_id,
               'labels', coalesce(jsonb_object_agg(g.key, g.value), '{}'::jsonb),
               'selfLabels', v_self_labels,
               'sessionsDraining', v_draining,
               'leasesReleased', v_released)
      INTO v_result
      FROM ql_private.worker_labels g WHERE g.worker_id = v_worker_id;
    RETURN v_result;
END
$$;
REVOKE ALL ON FUNCTION ql.label_worker(text, jsonb, text[], boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.label_worker(text, jsonb, text[], boolean) TO ql_runtime;
