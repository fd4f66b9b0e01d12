-- 0027 signed execution revisions (SPEC §16.1).
--
-- 1. ql_private.execution_revisions gains the detached compact JWS the
--    publisher signed the revision with (`admin task publish --sign-key`):
--    signature_jws `base64url(header)..base64url(signature)` (Ed25519, 64
--    bytes) and signature_kid, the `kid` of its protected header (copied out
--    by ql.publish_revision, so an offer never decodes the header). Both NULL
--    on an unsigned revision, both set on a signed one. The database stores
--    the signature, it does not verify it (it holds no trusted key; the worker
--    verifies against its own JWKS): a signature is worth something only
--    because the database cannot forge it.
-- 2. The row trigger execution_revisions_immutable (0001) already refuses
--    every UPDATE and DELETE of a revision row, so the signature columns are
--    as immutable as the content they sign: a signed re-publish of content an
--    unsigned revision already holds becomes a new revision.
-- 3. ql.publish_revision gains p_signature (text, DEFAULT NULL): the old
--    four-argument function is dropped here and recreated by
--    db/functions/publish_revision.sql with the new parameter list.
--
-- Runs as ql_owner. Immutable once landed: fix forward.

ALTER TABLE ql_private.execution_revisions
    ADD COLUMN signature_kid text
        CHECK (signature_kid IS NULL OR signature_kid ~ '^[A-Za-z0-9_-]{1,128}$'),
    ADD COLUMN signature_jws text
        CHECK (signature_jws IS NULL
               OR (length(signature_jws) <= 1456
                   AND signature_jws ~ '^[A-Za-z0-9_-]{2,}\.\.[A-Za-z0-9_-]{86}$')),
    ADD CONSTRAINT execution_revisions_signature_pair
        CHECK ((signature_kid IS NULL) = (signature_jws IS NULL));

DROP FUNCTION IF EXISTS ql.publish_revision(text, text, bytea, text);
