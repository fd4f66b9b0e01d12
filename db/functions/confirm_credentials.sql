-- ql.confirm_credentials(p_credential_ids, p_secret_digests, p_worker_ids) -> text[]
--
-- Purpose: re-confirm, in one read-only statement, the credentials an ingress
--   replica's idle view holds in its cache (service/idle_view.py). SPEC §5 lets
--   a replica trust a confirmed credential for at most 5 s; without this, every
--   cached worker's next pull after 5 s went to the database only to
--   re-authenticate, which at the default cadence (a pull every 2-3 s) was about
--   every second idle pull. The replica sends the aging entries of its cache
--   together, at most a few times a second, on its LISTEN connection.
-- Inputs: three arrays of equal length 0..1024, position i describing one cache
--   entry: p_credential_ids[i] (^[a-z0-9]{16}$), p_secret_digests[i] (the
--   SHA-256 the replica holds, 32 bytes), p_worker_ids[i] (the worker the
--   replica authenticated by certificate, lowercase canonical UUID).
-- Returns: the credential ids (a subset of p_credential_ids, in input order)
--   that ql_private.authenticate would allow for their worker right now: the
--   credential exists, its digest matches (ql_private.digest_equal, constant
--   time), it is not revoked nor expired (SPEC §16.2), it belongs to that
--   worker, and the worker is not disabled. Every other entry is simply left out: the replica drops it and
--   the worker's next request meets the full check (which audits a denial).
-- Fences: the same credential facts as ql_private.authenticate.
-- Writes: none (no audit row either: nothing is denied here; zero WAL).
-- Locks: none (plain reads of worker_credentials and workers by primary key).
-- Idempotency: read-only.
-- Errors: QL001 arrays NULL, of different lengths or longer than 1024, or an
--   element NULL or malformed (a caller bug: the replica only sends what the
--   database confirmed before).
-- Caller: ql_worker_ingress.
CREATE OR REPLACE FUNCTION ql.confirm_credentials(
    p_credential_ids text[],
    p_secret_digests bytea[],
    p_worker_ids text[]
)
RETURNS text[]
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_count integer := coalesce(cardinality(p_credential_ids), -1);
BEGIN
    IF v_count < 0 OR v_count > 1024
       OR v_count <> coalesce(cardinality(p_secret_digests), -1)
       OR v_count <> coalesce(cardinality(p_worker_ids), -1) THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = 'credential, digest and worker arrays must have the same length 0..1024';
    END IF;
    IF EXISTS (SELECT 1
                 FROM unnest(p_credential_ids, p_secret_digests, p_worker_ids)
                      AS entry(credential_id, digest, worker_id)
                WHERE entry.credential_id IS NULL
                   OR entry.credential_id !~ '^[a-z0-9]{16}$'
                   OR entry.digest IS NULL OR octet_length(entry.digest) <> 32
                   OR entry.worker_id IS NULL
                   OR entry.worker_id
                      !~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$') THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = 'every element must be a credential id, a 32-byte digest and a worker UUID';
    END IF;
    RETURN coalesce((
        SELECT array_agg(entry.credential_id ORDER BY entry.input_order)
          FROM unnest(p_credential_ids, p_secret_digests, p_worker_ids)
               WITH ORDINALITY AS entry(credential_id, digest, worker_id, input_order)
          JOIN ql_private.worker_credentials cred ON cred.credential_id = entry.credential_id
          JOIN ql_private.workers wk ON wk.id = cred.worker_id
         WHERE ql_private.digest_equal(entry.digest, cred.secret_digest)
           AND cred.revoked_at IS NULL
           AND (cred.expires_at IS NULL OR cred.expires_at > clock_timestamp())
           AND cred.worker_id = entry.worker_id::uuid
           AND wk.disabled_at IS NULL), ARRAY[]::text[]);
END
$$;
REVOKE ALL ON FUNCTION ql.confirm_credentials(text[], bytea[], text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.confirm_credentials(text[], bytea[], text[]) TO ql_worker_ingress;
