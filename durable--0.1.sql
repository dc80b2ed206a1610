/* durable--0.1.sql: the journals, their indexes and the SQL API (thin wrappers over C) */

\echo Use "CREATE EXTENSION durable" to load this file. \quit

/*
 * Security notes for this script (see README, "Security"):
 *  - every object is created schema-qualified, with plain CREATE (never
 *    OR REPLACE or IF NOT EXISTS), so an object planted beforehand by another
 *    role makes the installation fail instead of being adopted;
 *  - every function is SECURITY DEFINER with search_path pinned to
 *    pg_catalog, pg_temp, and the C code schema-qualifies every name;
 *  - nothing is granted to PUBLIC (see the REVOKEs at the end).
 */

DO $guard$
BEGIN
    IF (SELECT n.nspowner FROM pg_catalog.pg_namespace n
         WHERE n.nspname = 'durable')
       IS DISTINCT FROM
       (SELECT r.oid FROM pg_catalog.pg_roles r
         WHERE r.rolname = pg_catalog.current_user()) THEN
        RAISE EXCEPTION 'schema "durable" exists and is not owned by the installing role'
            USING ERRCODE = '42501',
                  HINT = 'Drop or rename the schema "durable" first; durable must own its schema.';
    END IF;
END
$guard$;

/* ------------------------------------------------------------------------
 * Sequences.  Ids and fencing tokens are opaque to clients; tokens come from
 * one sequence shared by both journals so that a token is never issued twice.
 */
CREATE SEQUENCE durable.inbox_id_seq;
CREATE SEQUENCE durable.outbox_id_seq;
CREATE SEQUENCE durable.token_seq;

/* ------------------------------------------------------------------------
 * The inbox journal.
 *
 * fillfactor leaves room on each page so that heartbeats and takeovers
 * (which change only unindexed columns) are HOT updates.
 */
CREATE TABLE durable.inbox (
    id           pg_catalog.int8 NOT NULL DEFAULT pg_catalog.nextval('durable.inbox_id_seq'::pg_catalog.regclass),
    source       pg_catalog.text NOT NULL,
    message_id   pg_catalog.text,
    content_hash pg_catalog.bytea,
    chat_id      pg_catalog.text NOT NULL,
    kind         pg_catalog.text NOT NULL,
    payload      pg_catalog.jsonb NOT NULL,
    state        pg_catalog.text NOT NULL,
    attempts     pg_catalog.int4 NOT NULL DEFAULT 0,
    token        pg_catalog.int8,
    owner        pg_catalog.text,
    lease_until  pg_catalog.timestamptz,
    not_before   pg_catalog.timestamptz NOT NULL,
    error        pg_catalog.text,
    created_at   pg_catalog.timestamptz NOT NULL,
    done_at      pg_catalog.timestamptz,
    sends        pg_catalog.int4 NOT NULL DEFAULT 0,
    CONSTRAINT inbox_pkey PRIMARY KEY (id),
    CONSTRAINT inbox_state_check
        CHECK (state OPERATOR(pg_catalog.=) ANY (ARRAY['pending', 'leased', 'done', 'dead']::pg_catalog.text[])),
    CONSTRAINT inbox_dedupe_key_check
        CHECK ((message_id IS NULL) OPERATOR(pg_catalog.<>) (content_hash IS NULL))
) WITH (fillfactor = 80);

COMMENT ON TABLE durable.inbox IS 'Inbound messages, journaled before their handler runs; state dead is the inbox dead-letter queue';
COMMENT ON COLUMN durable.inbox.content_hash IS 'SHA-256 of (source, chat_id, kind, payload), the dedupe key of a message admitted without message_id';
COMMENT ON COLUMN durable.inbox.sends IS 'Sends derived from this record during its current lease (the n of outbox keys ''<id>:<n>'')';

/* Dedupe is a constraint: by message id, or by content hash when there is none. */
CREATE UNIQUE INDEX inbox_source_message_id_key ON durable.inbox (source, message_id)
    WHERE message_id IS NOT NULL;
CREATE UNIQUE INDEX inbox_source_content_hash_key ON durable.inbox (source, content_hash)
    WHERE message_id IS NULL;
/* Unfinished records in id order: the claim scan, oldest first. */
CREATE INDEX inbox_unfinished_idx ON durable.inbox (id)
    WHERE state OPERATOR(pg_catalog.=) ANY (ARRAY['pending', 'leased']::pg_catalog.text[]);
/* A chat's oldest unfinished record in one probe: per-chat order. */
CREATE INDEX inbox_chat_unfinished_idx ON durable.inbox (chat_id, id)
    WHERE state OPERATOR(pg_catalog.=) ANY (ARRAY['pending', 'leased']::pg_catalog.text[]);
/* Expired leases for the sweep and the claim's takeovers. */
CREATE INDEX inbox_lease_until_idx ON durable.inbox (lease_until)
    WHERE state OPERATOR(pg_catalog.=) 'leased';
/* Pending records coming due, for the sweep's durable_ready and waiting claims. */
CREATE INDEX inbox_not_before_idx ON durable.inbox (not_before)
    WHERE state OPERATOR(pg_catalog.=) 'pending';
/* Retention purge: finished records by finish time. */
CREATE INDEX inbox_done_at_idx ON durable.inbox (done_at)
    WHERE state OPERATOR(pg_catalog.=) 'done';
/* The dead-letter queue. */
CREATE INDEX inbox_dead_idx ON durable.inbox (id)
    WHERE state OPERATOR(pg_catalog.=) 'dead';

/* ------------------------------------------------------------------------
 * The outbox journal, keyed by idempotency key.
 */
CREATE TABLE durable.outbox (
    key                 pg_catalog.text NOT NULL,
    chat_id             pg_catalog.text NOT NULL,
    payload             pg_catalog.jsonb NOT NULL,
    state               pg_catalog.text NOT NULL,
    attempts            pg_catalog.int4 NOT NULL DEFAULT 0,
    token               pg_catalog.int8,
    owner               pg_catalog.text,
    lease_until         pg_catalog.timestamptz,
    not_before          pg_catalog.timestamptz NOT NULL,
    provider_message_id pg_catalog.text,
    error               pg_catalog.text,
    inbound_id          pg_catalog.int8,
    created_at          pg_catalog.timestamptz NOT NULL,
    sent_at             pg_catalog.timestamptz,
    id                  pg_catalog.int8 NOT NULL DEFAULT pg_catalog.nextval('durable.outbox_id_seq'::pg_catalog.regclass),
    CONSTRAINT outbox_pkey PRIMARY KEY (key),
    CONSTRAINT outbox_state_check
        CHECK (state OPERATOR(pg_catalog.=) ANY (ARRAY['pending', 'sending', 'sent', 'failed', 'dead', 'unknown']::pg_catalog.text[]))
) WITH (fillfactor = 80);

COMMENT ON TABLE durable.outbox IS 'Outbound sends, journaled before the provider is called; state dead is the outbox dead-letter queue, state unknown the ambiguous sends';
COMMENT ON COLUMN durable.outbox.id IS 'Journal order (oldest first for claims); opaque';

/* Sends waiting for a sender loop, oldest first. */
CREATE INDEX outbox_waiting_idx ON durable.outbox (id)
    WHERE state OPERATOR(pg_catalog.=) ANY (ARRAY['pending', 'failed']::pg_catalog.text[]);
/* A chat's oldest unfinished send in one probe: per-chat order. */
CREATE INDEX outbox_chat_unfinished_idx ON durable.outbox (chat_id, id)
    WHERE state OPERATOR(pg_catalog.=) ANY (ARRAY['pending', 'sending', 'failed']::pg_catalog.text[]);
/* Expired sending leases for the sweep (they become unknown). */
CREATE INDEX outbox_lease_until_idx ON durable.outbox (lease_until)
    WHERE state OPERATOR(pg_catalog.=) 'sending';
/* Deferred and retried sends coming due. */
CREATE INDEX outbox_not_before_idx ON durable.outbox (not_before)
    WHERE state OPERATOR(pg_catalog.=) ANY (ARRAY['pending', 'failed']::pg_catalog.text[]);
/* Retention purge. */
CREATE INDEX outbox_sent_at_idx ON durable.outbox (sent_at)
    WHERE state OPERATOR(pg_catalog.=) 'sent';
/* Dead and ambiguous sends. */
CREATE INDEX outbox_parked_idx ON durable.outbox (id)
    WHERE state OPERATOR(pg_catalog.=) ANY (ARRAY['dead', 'unknown']::pg_catalog.text[]);

/* ------------------------------------------------------------------------
 * Gateway sessions (secrets: readable by the extension owner alone) and
 * shared permits.
 */
CREATE TABLE durable.sessions (
    bot          pg_catalog.text NOT NULL,
    shard        pg_catalog.int4 NOT NULL,
    session_id   pg_catalog.text NOT NULL,
    sequence     pg_catalog.int8 NOT NULL,
    resume_url   pg_catalog.text NOT NULL,
    total_shards pg_catalog.int4 NOT NULL,
    saved_at     pg_catalog.timestamptz NOT NULL,
    CONSTRAINT sessions_pkey PRIMARY KEY (bot, shard)
);
COMMENT ON TABLE durable.sessions IS 'Resumable gateway sessions, one per (bot, shard); session ids are secrets: never grant this table';

CREATE TABLE durable.permit_buckets (
    bucket   pg_catalog.text NOT NULL,
    per      pg_catalog.interval NOT NULL,
    last_granted_at pg_catalog.timestamptz,
    CONSTRAINT permit_buckets_pkey PRIMARY KEY (bucket)
);
COMMENT ON TABLE durable.permit_buckets IS 'One row per rate-limit bucket: the row lock serialises its grants';
COMMENT ON COLUMN durable.permit_buckets.per IS 'The window of the bucket''s last call; the sweep drops a bucket once last_granted_at is older than it';

CREATE TABLE durable.permits (
    bucket     pg_catalog.text NOT NULL,
    granted_at pg_catalog.timestamptz NOT NULL
);
CREATE INDEX permits_bucket_granted_at_idx ON durable.permits (bucket, granted_at);
COMMENT ON TABLE durable.permits IS 'Permits granted within the current window of each bucket (older ones are deleted as they leave it)';

/* pg_dump keeps the journals, keys, tokens and sequences. */
SELECT pg_catalog.pg_extension_config_dump('durable.inbox', '');
SELECT pg_catalog.pg_extension_config_dump('durable.outbox', '');
SELECT pg_catalog.pg_extension_config_dump('durable.sessions', '');
SELECT pg_catalog.pg_extension_config_dump('durable.permit_buckets', '');
SELECT pg_catalog.pg_extension_config_dump('durable.permits', '');
SELECT pg_catalog.pg_extension_config_dump('durable.inbox_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('durable.outbox_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('durable.token_seq', '');

/* ------------------------------------------------------------------------
 * Inbox API
 */
CREATE FUNCTION durable.inbox_admit(
    source pg_catalog.text,
    message_id pg_catalog.text,
    chat_id pg_catalog.text,
    payload pg_catalog.jsonb DEFAULT '{}',
    kind pg_catalog.text DEFAULT 'message',
    instance pg_catalog.text DEFAULT NULL,
    lease pg_catalog.interval DEFAULT NULL)
RETURNS TABLE(id pg_catalog.int8, token pg_catalog.int8, duplicate pg_catalog.bool, state pg_catalog.text)
LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'durable_inbox_admit';
COMMENT ON FUNCTION durable.inbox_admit(pg_catalog.text, pg_catalog.text, pg_catalog.text, pg_catalog.jsonb, pg_catalog.text, pg_catalog.text, pg_catalog.interval)
    IS 'Journal one inbound message (deduplicated by source and message id); with instance, lease it at once';

CREATE FUNCTION durable.inbox_claim(
    instance pg_catalog.text,
    max pg_catalog.int4 DEFAULT 1,
    lease pg_catalog.interval DEFAULT NULL,
    wait pg_catalog.interval DEFAULT '0')
RETURNS TABLE(id pg_catalog.int8, token pg_catalog.int8, source pg_catalog.text, message_id pg_catalog.text,
              chat_id pg_catalog.text, kind pg_catalog.text, payload pg_catalog.jsonb, attempts pg_catalog.int4)
LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'durable_inbox_claim';
COMMENT ON FUNCTION durable.inbox_claim(pg_catalog.text, pg_catalog.int4, pg_catalog.interval, pg_catalog.interval)
    IS 'Lease up to max due records, oldest first, one per chat, never one another caller holds';

CREATE FUNCTION durable.inbox_heartbeat(
    id pg_catalog.int8,
    token pg_catalog.int8,
    lease pg_catalog.interval DEFAULT NULL)
RETURNS pg_catalog.timestamptz
LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'durable_inbox_heartbeat';
COMMENT ON FUNCTION durable.inbox_heartbeat(pg_catalog.int8, pg_catalog.int8, pg_catalog.interval)
    IS 'Extend a live inbox lease; returns the new lease_until';

CREATE FUNCTION durable.inbox_complete(
    id pg_catalog.int8,
    token pg_catalog.int8)
RETURNS pg_catalog.void
LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'durable_inbox_complete';
COMMENT ON FUNCTION durable.inbox_complete(pg_catalog.int8, pg_catalog.int8)
    IS 'Mark a leased record done; call it in the transaction of the handler''s effects';

CREATE FUNCTION durable.inbox_complete(
    ids pg_catalog.int8[],
    tokens pg_catalog.int8[])
RETURNS pg_catalog.int4
LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'durable_inbox_complete_batch';
COMMENT ON FUNCTION durable.inbox_complete(pg_catalog.int8[], pg_catalog.int8[])
    IS 'Mark a batch of leased records done, all or nothing';

CREATE FUNCTION durable.inbox_fail(
    id pg_catalog.int8,
    token pg_catalog.int8,
    error pg_catalog.text,
    retry_in pg_catalog.interval DEFAULT NULL)
RETURNS TABLE(state pg_catalog.text, not_before pg_catalog.timestamptz)
LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'durable_inbox_fail';
COMMENT ON FUNCTION durable.inbox_fail(pg_catalog.int8, pg_catalog.int8, pg_catalog.text, pg_catalog.interval)
    IS 'The handler failed: retry after backoff, or dead when out of attempts';

CREATE FUNCTION durable.inbox_release(
    id pg_catalog.int8,
    token pg_catalog.int8)
RETURNS pg_catalog.void
LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'durable_inbox_release';
COMMENT ON FUNCTION durable.inbox_release(pg_catalog.int8, pg_catalog.int8)
    IS 'Give a leased record back now, without counting the attempt';

CREATE FUNCTION durable.inbox_replay(
    id pg_catalog.int8)
RETURNS pg_catalog.void
LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'durable_inbox_replay';
COMMENT ON FUNCTION durable.inbox_replay(pg_catalog.int8)
    IS 'Process a dead or done record again';

/* ------------------------------------------------------------------------
 * Outbox API
 */
CREATE FUNCTION durable.outbox_begin(
    idempotency_key pg_catalog.text,
    chat_id pg_catalog.text,
    payload pg_catalog.jsonb,
    instance pg_catalog.text,
    lease pg_catalog.interval DEFAULT NULL,
    inbound_id pg_catalog.int8 DEFAULT NULL,
    inbound_token pg_catalog.int8 DEFAULT NULL)
RETURNS TABLE(action pg_catalog.text, key pg_catalog.text, token pg_catalog.int8,
              provider_message_id pg_catalog.text, state pg_catalog.text)
LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'durable_outbox_begin';
COMMENT ON FUNCTION durable.outbox_begin(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb, pg_catalog.text, pg_catalog.interval, pg_catalog.int8, pg_catalog.int8)
    IS 'Journal a send before calling the provider; a repeated key is answered from the journal';

CREATE FUNCTION durable.outbox_sent(
    key pg_catalog.text,
    token pg_catalog.int8,
    provider_message_id pg_catalog.text)
RETURNS pg_catalog.void
LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'durable_outbox_sent';
COMMENT ON FUNCTION durable.outbox_sent(pg_catalog.text, pg_catalog.int8, pg_catalog.text)
    IS 'Record the provider''s message id right after it answered';

CREATE FUNCTION durable.outbox_failed(
    key pg_catalog.text,
    token pg_catalog.int8,
    error pg_catalog.text,
    retryable pg_catalog.bool DEFAULT true,
    retry_in pg_catalog.interval DEFAULT NULL)
RETURNS TABLE(state pg_catalog.text, not_before pg_catalog.timestamptz)
LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'durable_outbox_failed';
COMMENT ON FUNCTION durable.outbox_failed(pg_catalog.text, pg_catalog.int8, pg_catalog.text, pg_catalog.bool, pg_catalog.interval)
    IS 'The provider refused: retry with backoff, or dead when not retryable or out of retries';

CREATE FUNCTION durable.outbox_enqueue(
    idempotency_key pg_catalog.text,
    chat_id pg_catalog.text,
    payload pg_catalog.jsonb,
    not_before pg_catalog.timestamptz DEFAULT pg_catalog.now(),
    inbound_id pg_catalog.int8 DEFAULT NULL)
RETURNS TABLE(key pg_catalog.text, created pg_catalog.bool, state pg_catalog.text)
LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'durable_outbox_enqueue';
COMMENT ON FUNCTION durable.outbox_enqueue(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb, pg_catalog.timestamptz, pg_catalog.int8)
    IS 'Journal a send for later or for a sender loop; a repeated key does nothing';

CREATE FUNCTION durable.outbox_claim(
    instance pg_catalog.text,
    max pg_catalog.int4 DEFAULT 10,
    lease pg_catalog.interval DEFAULT NULL,
    wait pg_catalog.interval DEFAULT '0')
RETURNS TABLE(key pg_catalog.text, token pg_catalog.int8, chat_id pg_catalog.text,
              payload pg_catalog.jsonb, attempts pg_catalog.int4)
LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'durable_outbox_claim';
COMMENT ON FUNCTION durable.outbox_claim(pg_catalog.text, pg_catalog.int4, pg_catalog.interval, pg_catalog.interval)
    IS 'Lease due pending and failed sends, oldest first, one per chat';

CREATE FUNCTION durable.outbox_heartbeat(
    key pg_catalog.text,
    token pg_catalog.int8,
    lease pg_catalog.interval DEFAULT NULL)
RETURNS pg_catalog.timestamptz
LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'durable_outbox_heartbeat';
COMMENT ON FUNCTION durable.outbox_heartbeat(pg_catalog.text, pg_catalog.int8, pg_catalog.interval)
    IS 'Extend a live sending lease; returns the new lease_until';

CREATE FUNCTION durable.outbox_retry(
    key pg_catalog.text)
RETURNS pg_catalog.void
LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'durable_outbox_retry';
COMMENT ON FUNCTION durable.outbox_retry(pg_catalog.text)
    IS 'Make a dead, failed or unknown send due again now';

CREATE FUNCTION durable.outbox_discard(
    key pg_catalog.text)
RETURNS pg_catalog.bool
LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'durable_outbox_discard';
COMMENT ON FUNCTION durable.outbox_discard(pg_catalog.text)
    IS 'Forget a send; returns whether it existed';

/* ------------------------------------------------------------------------
 * Instances, recovery and sweeping
 */
CREATE FUNCTION durable.instance_start(
    instance pg_catalog.text)
RETURNS TABLE(inbox_recovered pg_catalog.int4, outbox_ambiguous pg_catalog.int4)
LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'durable_instance_start';
COMMENT ON FUNCTION durable.instance_start(pg_catalog.text)
    IS 'Call once when a replica boots: recover the leases of its dead incarnation';

CREATE FUNCTION durable.sweep()
RETURNS TABLE(inbox_expired pg_catalog.int4, outbox_ambiguous pg_catalog.int4,
              outbox_due pg_catalog.int4, purged pg_catalog.int8)
LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'durable_sweep';
COMMENT ON FUNCTION durable.sweep()
    IS 'One pass of the background worker: expired leases, ambiguous sends, due work, retention';

CREATE FUNCTION durable.purge(
    older_than pg_catalog.interval DEFAULT NULL,
    batch pg_catalog.int4 DEFAULT 10000)
RETURNS pg_catalog.int8
LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'durable_purge';
COMMENT ON FUNCTION durable.purge(pg_catalog.interval, pg_catalog.int4)
    IS 'Delete up to batch done inbox and sent outbox records older than the retention';

/* ------------------------------------------------------------------------
 * Observing
 */
CREATE FUNCTION durable.metrics(
    OUT inbound_journaled pg_catalog.int8,
    OUT inbound_duplicates pg_catalog.int8,
    OUT inbound_replayed pg_catalog.int8,
    OUT inbound_dead pg_catalog.int8,
    OUT outbox_journaled pg_catalog.int8,
    OUT outbox_deduped pg_catalog.int8,
    OUT outbox_retried pg_catalog.int8,
    OUT outbox_deferred pg_catalog.int8,
    OUT outbox_dead pg_catalog.int8,
    OUT outbox_ambiguous pg_catalog.int8,
    OUT outbox_bypassed pg_catalog.int8,
    OUT stale_leases pg_catalog.int8,
    OUT outbox_diverged pg_catalog.int8,
    OUT since pg_catalog.timestamptz)
RETURNS record
LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'durable_metrics';
COMMENT ON FUNCTION durable.metrics()
    IS 'Event counters of this database since the last reset (shared memory; rolled-back work still counts)';

CREATE FUNCTION durable.metrics_reset()
RETURNS pg_catalog.void
LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'durable_metrics_reset';
COMMENT ON FUNCTION durable.metrics_reset()
    IS 'Zero this database''s counters and restart their since timestamp';

CREATE FUNCTION durable.standing(
    OUT inbox_pending pg_catalog.int8,
    OUT inbox_leased pg_catalog.int8,
    OUT inbox_dead pg_catalog.int8,
    OUT outbox_pending pg_catalog.int8,
    OUT outbox_sending pg_catalog.int8,
    OUT outbox_failed pg_catalog.int8,
    OUT outbox_dead pg_catalog.int8,
    OUT outbox_unknown pg_catalog.int8,
    OUT oldest_pending pg_catalog.timestamptz,
    OUT over_bound pg_catalog.bool,
    OUT why pg_catalog.text)
RETURNS record
LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'durable_standing';
COMMENT ON FUNCTION durable.standing()
    IS 'Gauges of the journals: records by state, the oldest waiting one, and whether the bounds are exceeded';

/* ------------------------------------------------------------------------
 * Gateway sessions and shared pacing
 */
CREATE FUNCTION durable.session_save(
    bot pg_catalog.text,
    shard pg_catalog.int4,
    session_id pg_catalog.text,
    sequence pg_catalog.int8,
    resume_url pg_catalog.text,
    total_shards pg_catalog.int4)
RETURNS pg_catalog.void
LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'durable_session_save';
COMMENT ON FUNCTION durable.session_save(pg_catalog.text, pg_catalog.int4, pg_catalog.text, pg_catalog.int8, pg_catalog.text, pg_catalog.int4)
    IS 'Store one shard''s resumable gateway session, replacing the last (a secret: grant apart)';

CREATE FUNCTION durable.session_load(
    bot pg_catalog.text,
    shard pg_catalog.int4,
    resume_url pg_catalog.text,
    total_shards pg_catalog.int4,
    max_age pg_catalog.interval DEFAULT '60s')
RETURNS TABLE(session_id pg_catalog.text, sequence pg_catalog.int8, saved_at pg_catalog.timestamptz,
              ignored pg_catalog.text)
LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'durable_session_load';
COMMENT ON FUNCTION durable.session_load(pg_catalog.text, pg_catalog.int4, pg_catalog.text, pg_catalog.int4, pg_catalog.interval)
    IS 'Load one shard''s resumable session if it is still usable (a secret: grant apart)';

CREATE FUNCTION durable.permit(
    bucket pg_catalog.text,
    max pg_catalog.int4,
    per pg_catalog.interval)
RETURNS pg_catalog.interval
LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'durable_permit';
COMMENT ON FUNCTION durable.permit(pg_catalog.text, pg_catalog.int4, pg_catalog.interval)
    IS 'Shared sliding-window rate limit: 0 and one permit consumed, or how long to wait';

/* ------------------------------------------------------------------------
 * Privileges: nothing for PUBLIC.  The README shows the GRANTs for a client
 * role, a reader role and the session functions.
 */
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA durable FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA durable FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA durable FROM PUBLIC;
REVOKE ALL ON SCHEMA durable FROM PUBLIC;
