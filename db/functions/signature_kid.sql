-- ql_private.signature_kid(p_signature text) -> text
--
-- Purpose: the shape check of a revision signature (SPEC §16.1) at the write
--   boundary, and the `kid` it names. A signature is the detached compact JWS
--   `base64url(header)..base64url(signature)`: the header part unpadded
--   base64url of a UTF-8 JSON object with exactly {alg: "EdDSA", kid} (no
--   duplicate key), kid ^[A-Za-z0-9_-]{1,128}$, and an Ed25519 signature of
--   64 bytes (86 base64url characters). The signature itself is not verified
--   here (the database holds no trusted key; the worker verifies).
-- Inputs: p_signature (NULL: unsigned, answers NULL).
-- Fences: the shape above. Writes: none. Locks: none. Pure.
-- Errors: QL001 (COLUMN signature) when malformed; the message never quotes it.
-- Caller: ql.publish_revision.
CREATE OR REPLACE FUNCTION ql_private.signature_kid(p_signature text)
RETURNS text
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_header_b64 text;
    v_header jsonb;
BEGIN
    IF p_signature IS NULL THEN
        RETURN NULL;
    END IF;
    -- header <= 1368 characters (a 1 KiB object) + '..' + 86: at most 1456.
    IF length(p_signature) > 1456
       OR p_signature !~ '^[A-Za-z0-9_-]{2,}\.\.[A-Za-z0-9_-]{86}$'
       OR length(split_part(p_signature, '.', 1)) % 4 = 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'signature',
            MESSAGE = 'signature must be a detached compact JWS: base64url(header)..base64url(signature)';
    END IF;
    v_header_b64 := translate(split_part(p_signature, '.', 1), '-_', '+/');
    v_header_b64 := v_header_b64 || repeat('=', (4 - length(v_header_b64) % 4) % 4);
    v_header := ql_private.json_object_from_bytes(
        decode(v_header_b64, 'base64'), 1024, 'signature header');
    IF (SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(v_header) k)
           IS DISTINCT FROM ARRAY['alg', 'kid']
       OR v_header -> 'alg' IS DISTINCT FROM '"EdDSA"'::jsonb
       OR jsonb_typeof(v_header -> 'kid') IS DISTINCT FROM 'string'
       OR (v_header ->> 'kid') !~ '^[A-Za-z0-9_-]{1,128}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'signature',
            MESSAGE = 'signature header must be exactly {"alg":"EdDSA","kid":"<kid>"}';
    END IF;
    RETURN v_header ->> 'kid';
END
$$;
REVOKE ALL ON FUNCTION ql_private.signature_kid(text) FROM PUBLIC;
