--
-- test/pgtap/schema.sql: the installed schema is the contract of api.md (the
-- project's SQL contract, ../shared/design/api.md beside this repository).
--
-- Run with pg_prove against a database holding CREATE EXTENSION pgtap and
-- CREATE EXTENSION durable:  pg_prove -d <db> test/pgtap/schema.sql
--
-- Tables: the columns api.md lists, and those of the tables it leaves to
-- us (sessions, permits, sweep windows), with their types (more columns may
-- exist).  Functions: every signature exactly (argument names, types,
-- defaults, result columns), SECURITY DEFINER (the session functions
-- INVOKER) with a pinned search_path,
-- not STRICT, C, volatile, no EXECUTE for PUBLIC.  Indexes: exactly those of
-- durable--0.1.sql, predicates included.
--
\set ON_ERROR_STOP 1
\pset format unaligned
\pset tuples_only true
\pset pager off

BEGIN;
SELECT plan(466);

-- ---------------------------------------------------------------------------
-- The extension and its schema
-- ---------------------------------------------------------------------------
SELECT has_extension('durable', 'durable is installed');
SELECT has_schema('durable', 'schema durable exists');
SELECT schema_privs_are('durable', 'public', ARRAY[]::name[], 'PUBLIC has no privilege on schema durable');
SELECT is((SELECT extrelocatable FROM pg_extension WHERE extname = 'durable'), false, 'durable is not relocatable');
SELECT is((SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'durable'),
          'durable'::name, 'durable lives in schema durable');
SELECT tables_are('durable', ARRAY['inbox', 'outbox', 'sessions', 'permit_buckets', 'permits', 'sweep_windows'],
                  'schema durable holds exactly the journals, sessions, permits and sweep() windows');
SELECT sequences_are('durable', ARRAY['inbox_id_seq', 'outbox_id_seq', 'token_seq'],
                     'schema durable holds exactly the id and token sequences');
SELECT views_are('durable', ARRAY['stat_counters', 'stat_standing'],
                 'schema durable holds exactly the monitoring views of 0.2');
SELECT table_privs_are('durable', v, 'public', ARRAY[]::name[], format('PUBLIC has no privilege on view durable.%s', v))
  FROM unnest(ARRAY['stat_counters', 'stat_standing']::name[]) AS v;
SELECT functions_are('durable',
                     ARRAY['inbox_admit', 'inbox_claim', 'inbox_heartbeat', 'inbox_complete', 'inbox_fail',
                           'inbox_release', 'inbox_replay', 'outbox_begin', 'outbox_sent', 'outbox_failed',
                           'outbox_enqueue', 'outbox_claim', 'outbox_heartbeat', 'outbox_retry', 'outbox_discard',
                           'instance_start', 'sweep', 'purge', 'metrics', 'metrics_reset', 'standing',
                           'session_save', 'session_load', 'permit'],
                     'schema durable holds exactly the functions of the contract');
SELECT is((SELECT count(*)::integer FROM pg_proc WHERE pronamespace = 'durable'::regnamespace), 25,
          'with inbox_complete overloaded, 25 functions in all');

-- ---------------------------------------------------------------------------
-- Tables and the columns of the contract
-- ---------------------------------------------------------------------------
CREATE TEMP TABLE tap_cols (tbl name, col name, typ text, n serial);
INSERT INTO tap_cols (tbl, col, typ) VALUES
    ('inbox', 'id', 'bigint'),
    ('inbox', 'source', 'text'),
    ('inbox', 'message_id', 'text'),
    ('inbox', 'chat_id', 'text'),
    ('inbox', 'kind', 'text'),
    ('inbox', 'payload', 'jsonb'),
    ('inbox', 'state', 'text'),
    ('inbox', 'attempts', 'integer'),
    ('inbox', 'token', 'bigint'),
    ('inbox', 'owner', 'text'),
    ('inbox', 'lease_until', 'timestamp with time zone'),
    ('inbox', 'not_before', 'timestamp with time zone'),
    ('inbox', 'error', 'text'),
    ('inbox', 'created_at', 'timestamp with time zone'),
    ('inbox', 'done_at', 'timestamp with time zone'),
    ('inbox', 'finished_at', 'timestamp with time zone'),
    ('outbox', 'key', 'text'),
    ('outbox', 'chat_id', 'text'),
    ('outbox', 'payload', 'jsonb'),
    ('outbox', 'state', 'text'),
    ('outbox', 'attempts', 'integer'),
    ('outbox', 'token', 'bigint'),
    ('outbox', 'owner', 'text'),
    ('outbox', 'lease_until', 'timestamp with time zone'),
    ('outbox', 'not_before', 'timestamp with time zone'),
    ('outbox', 'provider_message_id', 'text'),
    ('outbox', 'error', 'text'),
    ('outbox', 'inbound_id', 'bigint'),
    ('outbox', 'created_at', 'timestamp with time zone'),
    ('outbox', 'sent_at', 'timestamp with time zone'),
    ('sessions', 'bot', 'text'),
    ('sessions', 'shard', 'integer'),
    ('sessions', 'session_id', 'text'),
    ('sessions', 'sequence', 'bigint'),
    ('sessions', 'resume_url', 'text'),
    ('sessions', 'total_shards', 'integer'),
    ('sessions', 'saved_at', 'timestamp with time zone'),
    ('sessions', 'owned_by', 'name'),
    ('permit_buckets', 'bucket', 'text'),
    ('permit_buckets', 'per', 'interval'),
    ('permit_buckets', 'last_granted_at', 'timestamp with time zone'),
    ('permits', 'bucket', 'text'),
    ('permits', 'granted_at', 'timestamp with time zone'),
    ('sweep_windows', 'kind', 'text'),
    ('sweep_windows', 'next_from', 'timestamp with time zone');

SELECT has_table('durable', t, format('table durable.%s exists', t))
  FROM unnest(ARRAY['inbox', 'outbox', 'sessions', 'permit_buckets', 'permits', 'sweep_windows']::name[]) AS t;
SELECT has_column('durable', tbl, col, format('durable.%s has column %s', tbl, col)) FROM tap_cols ORDER BY n;
SELECT col_type_is('durable', tbl, col, typ, format('durable.%s.%s is %s', tbl, col, typ)) FROM tap_cols ORDER BY n;
SELECT col_not_null('durable', tbl, col, format('durable.%s.%s is NOT NULL', tbl, col))
  FROM (VALUES ('inbox', 'id'), ('inbox', 'source'), ('inbox', 'chat_id'), ('inbox', 'kind'), ('inbox', 'payload'),
               ('inbox', 'state'), ('inbox', 'attempts'), ('inbox', 'not_before'), ('inbox', 'created_at'),
               ('outbox', 'key'), ('outbox', 'chat_id'), ('outbox', 'payload'), ('outbox', 'state'),
               ('outbox', 'attempts'), ('outbox', 'not_before'), ('outbox', 'created_at'),
               ('sessions', 'session_id'), ('sessions', 'saved_at'), ('sessions', 'owned_by')) AS v(tbl, col);
SELECT col_default_is('durable', 'sessions', 'owned_by', ''::name,
                      'durable.sessions.owned_by defaults to no role: rows of a dump or a publisher from before 0.10 load (every save names its role)');
SELECT col_is_pk('durable', 'inbox', 'id', 'durable.inbox is keyed by id');
SELECT col_is_pk('durable', 'outbox', 'key', 'durable.outbox is keyed by its idempotency key');
SELECT col_is_pk('durable', 'sessions', ARRAY['owned_by', 'bot', 'shard']::name[], 'durable.sessions holds one row per role, bot and shard');
SELECT col_is_pk('durable', 'permit_buckets', 'bucket', 'durable.permit_buckets holds one row per bucket');
SELECT col_is_pk('durable', 'sweep_windows', 'kind', 'durable.sweep_windows holds one row per journal');
SELECT results_eq($$SELECT kind::text COLLATE "default", next_from FROM durable.sweep_windows ORDER BY kind$$,
                  $$VALUES ('inbox'::text, NULL::timestamptz), ('outbox', NULL)$$,
                  'a fresh install has both journals'' sweep() windows, unset (the first pass looks 30 s back)');
-- Identifiers compare as bytes (durable--0.5--0.6.sql says why): the text
-- columns named here have collation "C", and so does every text column that
-- an index of durable keys on, so that no index depends on the operating
-- system's collation tables (a column an index only includes has no order:
-- outbox_parked_idx includes state since 0.14).
SELECT set_eq($$SELECT c.relname::text, a.attname::text
                 FROM pg_attribute a
                 JOIN pg_class c ON c.oid = a.attrelid
                WHERE c.relnamespace = 'durable'::regnamespace AND c.relkind = 'r'
                  AND a.attnum > 0 AND NOT a.attisdropped
                  AND a.attcollation = 'pg_catalog."C"'::regcollation$$,
              $$VALUES ('inbox', 'source'), ('inbox', 'message_id'), ('inbox', 'chat_id'),
                       ('outbox', 'key'), ('outbox', 'chat_id'), ('sessions', 'bot'), ('sessions', 'owned_by'),
                       ('permit_buckets', 'bucket'), ('permits', 'bucket'), ('sweep_windows', 'kind')$$,
              'the identifier columns of durable''s tables have collation "C"');
SELECT is_empty($$SELECT format('%s.%s', i.indexrelid::regclass, a.attname)
                    FROM pg_index i
                    JOIN pg_class c ON c.oid = i.indrelid
                    JOIN pg_attribute a ON a.attrelid = i.indrelid
                                       AND a.attnum = ANY ((i.indkey::int2[])[0:i.indnkeyatts - 1])
                   WHERE c.relnamespace = 'durable'::regnamespace
                     AND a.atttypid = 'pg_catalog.text'::regtype
                     AND a.attcollation <> 'pg_catalog."C"'::regcollation$$,
                'no index of durable keys on a text column under a locale''s collation');
-- No CHECK constraint on the journals (durable--0.2--0.3.sql says why).
SELECT is_empty($$SELECT conname FROM pg_constraint
                   WHERE conrelid = 'durable.inbox'::regclass AND contype = 'c'$$,
                'durable.inbox has no CHECK constraint (re-planned by every statement)');
SELECT is_empty($$SELECT conname FROM pg_constraint
                   WHERE conrelid = 'durable.outbox'::regclass AND contype = 'c'$$,
                'durable.outbox has no CHECK constraint (re-planned by every statement)');
SELECT table_privs_are('durable', t, 'public', ARRAY[]::name[], format('PUBLIC has no privilege on durable.%s', t))
  FROM unnest(ARRAY['inbox', 'outbox', 'sessions', 'permit_buckets', 'permits', 'sweep_windows']::name[]) AS t;
SELECT sequence_privs_are('durable', s, 'public', ARRAY[]::name[], format('PUBLIC has no privilege on durable.%s', s))
  FROM unnest(ARRAY['inbox_id_seq', 'outbox_id_seq', 'token_seq']::name[]) AS s;
SELECT set_eq($$SELECT oid::regclass::text FROM pg_class
                 WHERE relnamespace = 'durable'::regnamespace AND relpersistence <> 'p'$$,
              $$VALUES ('durable.sweep_windows'), ('durable.sweep_windows_pkey')$$,
              'no table, index or sequence of durable is unlogged or temporary but sweep() windows (a hint''s bookkeeping)');
SELECT is((SELECT array_agg(c::regclass::text ORDER BY c::regclass::text)
             FROM pg_extension e, unnest(e.extconfig) c WHERE e.extname = 'durable'),
          ARRAY['durable.inbox', 'durable.inbox_id_seq', 'durable.outbox', 'durable.outbox_id_seq',
                'durable.permit_buckets', 'durable.permits', 'durable.sessions', 'durable.token_seq'],
          'every table and sequence but sweep() windows is dumped by pg_dump (pg_extension_config_dump)');

-- ---------------------------------------------------------------------------
-- Functions: exact signatures, security and privileges
-- ---------------------------------------------------------------------------
CREATE TEMP TABLE tap_fns (fn name, args name[], arguments text, result text, returns text, n serial);
INSERT INTO tap_fns (fn, args, arguments, result, returns) VALUES
    ('inbox_admit', ARRAY['text', 'text', 'text', 'jsonb', 'text', 'text', 'interval'],
     $$source text, message_id text, chat_id text, payload jsonb DEFAULT '{}'::jsonb, kind text DEFAULT 'message'::text, instance text DEFAULT NULL::text, lease interval DEFAULT NULL::interval$$,
     'TABLE(id bigint, token bigint, duplicate boolean, state text)', 'setof record'),
    ('inbox_claim', ARRAY['text', 'integer', 'interval', 'interval'],
     $$instance text, max integer DEFAULT 1, lease interval DEFAULT NULL::interval, wait interval DEFAULT '00:00:00'::interval$$,
     'TABLE(id bigint, token bigint, source text, message_id text, chat_id text, kind text, payload jsonb, attempts integer)', 'setof record'),
    ('inbox_heartbeat', ARRAY['bigint', 'bigint', 'interval'],
     'id bigint, token bigint, lease interval DEFAULT NULL::interval',
     'timestamp with time zone', 'timestamp with time zone'),
    ('inbox_complete', ARRAY['bigint', 'bigint'],
     'id bigint, token bigint', 'void', 'void'),
    ('inbox_complete', ARRAY['bigint[]', 'bigint[]'],
     'ids bigint[], tokens bigint[]', 'integer', 'integer'),
    ('inbox_fail', ARRAY['bigint', 'bigint', 'text', 'interval'],
     'id bigint, token bigint, error text, retry_in interval DEFAULT NULL::interval',
     'TABLE(state text, not_before timestamp with time zone)', 'setof record'),
    ('inbox_release', ARRAY['bigint', 'bigint'],
     'id bigint, token bigint', 'void', 'void'),
    ('inbox_replay', ARRAY['bigint'],
     'id bigint', 'void', 'void'),
    ('outbox_begin', ARRAY['text', 'text', 'jsonb', 'text', 'interval', 'bigint', 'bigint'],
     'idempotency_key text, chat_id text, payload jsonb, instance text, lease interval DEFAULT NULL::interval, inbound_id bigint DEFAULT NULL::bigint, inbound_token bigint DEFAULT NULL::bigint',
     'TABLE(action text, key text, token bigint, provider_message_id text, state text, journaled_chat_id text, journaled_payload jsonb)', 'setof record'),
    ('outbox_sent', ARRAY['text', 'bigint', 'text'],
     'key text, token bigint, provider_message_id text', 'void', 'void'),
    ('outbox_failed', ARRAY['text', 'bigint', 'text', 'boolean', 'interval'],
     'key text, token bigint, error text, retryable boolean DEFAULT true, retry_in interval DEFAULT NULL::interval',
     'TABLE(state text, not_before timestamp with time zone)', 'setof record'),
    ('outbox_enqueue', ARRAY['text', 'text', 'jsonb', 'timestamp with time zone', 'bigint', 'bigint'],
     'idempotency_key text, chat_id text, payload jsonb, not_before timestamp with time zone DEFAULT now(), inbound_id bigint DEFAULT NULL::bigint, inbound_token bigint DEFAULT NULL::bigint',
     'TABLE(key text, created boolean, state text)', 'setof record'),
    ('outbox_claim', ARRAY['text', 'integer', 'interval', 'interval'],
     $$instance text, max integer DEFAULT 10, lease interval DEFAULT NULL::interval, wait interval DEFAULT '00:00:00'::interval$$,
     'TABLE(key text, token bigint, chat_id text, payload jsonb, attempts integer)', 'setof record'),
    ('outbox_heartbeat', ARRAY['text', 'bigint', 'interval'],
     'key text, token bigint, lease interval DEFAULT NULL::interval',
     'timestamp with time zone', 'timestamp with time zone'),
    ('outbox_retry', ARRAY['text'],
     'key text', 'void', 'void'),
    ('outbox_discard', ARRAY['text'],
     'key text', 'boolean', 'boolean'),
    ('instance_start', ARRAY['text'],
     'instance text', 'TABLE(inbox_recovered integer, outbox_ambiguous integer)', 'setof record'),
    ('sweep', ARRAY[]::name[],
     '', 'TABLE(inbox_expired integer, outbox_ambiguous integer, outbox_due integer, purged bigint)', 'setof record'),
    ('purge', ARRAY['interval', 'integer'],
     'older_than interval DEFAULT NULL::interval, batch integer DEFAULT 10000', 'bigint', 'bigint'),
    ('metrics', ARRAY[]::name[],
     'OUT inbound_journaled bigint, OUT inbound_duplicates bigint, OUT inbound_replayed bigint, OUT inbound_dead bigint, OUT outbox_journaled bigint, OUT outbox_deduped bigint, OUT outbox_retried bigint, OUT outbox_deferred bigint, OUT outbox_dead bigint, OUT outbox_ambiguous bigint, OUT outbox_bypassed bigint, OUT stale_leases bigint, OUT outbox_diverged bigint, OUT since timestamp with time zone',
     'record', 'record'),
    ('metrics_reset', ARRAY[]::name[],
     '', 'void', 'void'),
    ('standing', ARRAY[]::name[],
     'OUT inbox_pending bigint, OUT inbox_leased bigint, OUT inbox_dead bigint, OUT outbox_pending bigint, OUT outbox_sending bigint, OUT outbox_failed bigint, OUT outbox_dead bigint, OUT outbox_unknown bigint, OUT oldest_pending timestamp with time zone, OUT over_bound boolean, OUT why text',
     'record', 'record'),
    ('session_save', ARRAY['text', 'integer', 'text', 'bigint', 'text', 'integer'],
     'bot text, shard integer, session_id text, sequence bigint, resume_url text, total_shards integer', 'void', 'void'),
    ('session_load', ARRAY['text', 'integer', 'text', 'integer', 'interval'],
     $$bot text, shard integer, resume_url text, total_shards integer, max_age interval DEFAULT '00:01:00'::interval$$,
     'TABLE(session_id text, sequence bigint, saved_at timestamp with time zone, ignored text)', 'setof record'),
    ('permit', ARRAY['text', 'integer', 'interval'],
     'bucket text, max integer, per interval', 'interval', 'interval');

CREATE TEMP VIEW tap_fn_oids AS
SELECT f.*, format('durable.%s(%s)', f.fn, array_to_string(f.args, ', ')) AS sig,
       to_regprocedure(format('durable.%s(%s)', f.fn, array_to_string(f.args, ', '))) AS oid
  FROM tap_fns f;

SELECT has_function('durable', fn, args, format('%s exists', sig)) FROM tap_fn_oids ORDER BY n;
SELECT is(pg_get_function_arguments(oid), arguments, format('%s: argument names, order and defaults', sig))
  FROM tap_fn_oids ORDER BY n;
SELECT is(pg_get_function_result(oid), result, format('%s returns %s', sig, result)) FROM tap_fn_oids ORDER BY n;
SELECT function_returns('durable', fn, args, returns, format('%s returns %s', sig, returns)) FROM tap_fn_oids ORDER BY n;
-- (the session functions are SECURITY INVOKER since 0.10 and switch to durable's owner
-- themselves: they read and write the caller's sessions, sessions.c)
SELECT CASE WHEN fn IN ('session_save', 'session_load')
            THEN isnt_definer('durable', fn, args, format('%s is SECURITY INVOKER', sig))
            ELSE is_definer('durable', fn, args, format('%s is SECURITY DEFINER', sig)) END
  FROM tap_fn_oids ORDER BY n;
SELECT is((SELECT proconfig[1] FROM pg_proc WHERE pg_proc.oid = t.oid), 'search_path=pg_catalog, pg_temp',
          format('%s pins search_path to pg_catalog, pg_temp', sig))
  FROM tap_fn_oids t ORDER BY n;
-- The functions that scan a growing number of records run without JIT
-- (durable--0.3--0.4.sql says why); no other setting is changed.
SELECT is((SELECT proconfig[2:] FROM pg_proc WHERE pg_proc.oid = t.oid),
          CASE WHEN fn IN ('inbox_claim', 'outbox_claim', 'instance_start', 'sweep', 'purge', 'standing')
               THEN ARRAY['jit=off'] ELSE ARRAY[]::text[] END,
          format('%s: JIT setting', sig))
  FROM tap_fn_oids t ORDER BY n;
SELECT isnt_strict('durable', fn, args, format('%s is not STRICT (so that a NULL argument reaches the C code, which raises 22023: sql/bad_input.sql)', sig))
  FROM tap_fn_oids ORDER BY n;
SELECT function_lang_is('durable', fn, args, 'c', format('%s is written in C', sig)) FROM tap_fn_oids ORDER BY n;
SELECT volatility_is('durable', fn, args, 'volatile', format('%s is volatile', sig)) FROM tap_fn_oids ORDER BY n;
SELECT function_privs_are('durable', fn, args, 'public', ARRAY[]::name[], format('PUBLIC may not execute %s', sig))
  FROM tap_fn_oids ORDER BY n;

-- ---------------------------------------------------------------------------
-- Indexes: exactly those of the default version (durable--0.2--0.3.sql, durable--0.3--0.4.sql)
-- ---------------------------------------------------------------------------
CREATE TEMP TABLE tap_idx (tbl name, idx name, def text, n serial);
INSERT INTO tap_idx (tbl, idx, def) VALUES
    ('inbox', 'inbox_pkey', 'CREATE UNIQUE INDEX inbox_pkey ON durable.inbox USING btree (id)'),
    ('inbox', 'inbox_source_message_id_key', 'CREATE UNIQUE INDEX inbox_source_message_id_key ON durable.inbox USING btree (source, message_id) WHERE (message_id IS NOT NULL)'),
    ('inbox', 'inbox_source_content_hash_key', 'CREATE UNIQUE INDEX inbox_source_content_hash_key ON durable.inbox USING btree (source, content_hash) WHERE (message_id IS NULL)'),
    ('inbox', 'inbox_unfinished_idx', $$CREATE INDEX inbox_unfinished_idx ON durable.inbox USING btree (id) WHERE ((finished_at IS NULL) AND (id > 0))$$),
    ('inbox', 'inbox_chat_unfinished_idx', $$CREATE INDEX inbox_chat_unfinished_idx ON durable.inbox USING btree (chat_id, id) WHERE (finished_at IS NULL)$$),
    ('inbox', 'inbox_done_at_idx', $$CREATE INDEX inbox_done_at_idx ON durable.inbox USING btree (done_at) WHERE (done_at IS NOT NULL)$$),
    ('inbox', 'inbox_dead_idx', $$CREATE INDEX inbox_dead_idx ON durable.inbox USING btree (id) WHERE ((finished_at IS NOT NULL) AND (done_at IS NULL))$$),
    ('outbox', 'outbox_pkey', 'CREATE UNIQUE INDEX outbox_pkey ON durable.outbox USING btree (key)'),
    ('outbox', 'outbox_waiting_idx', $$CREATE INDEX outbox_waiting_idx ON durable.outbox USING btree (id) WHERE (state = ANY (ARRAY['pending'::text, 'failed'::text]))$$),
    ('outbox', 'outbox_chat_unfinished_idx', $$CREATE INDEX outbox_chat_unfinished_idx ON durable.outbox USING btree (chat_id, id) WHERE (state = ANY (ARRAY['pending'::text, 'sending'::text, 'failed'::text]))$$),
    ('outbox', 'outbox_not_before_idx', $$CREATE INDEX outbox_not_before_idx ON durable.outbox USING btree (not_before) WHERE (state = ANY (ARRAY['pending'::text, 'failed'::text]))$$),
    ('outbox', 'outbox_sent_at_idx', $$CREATE INDEX outbox_sent_at_idx ON durable.outbox USING btree (sent_at) WHERE (state = 'sent'::text)$$),
    ('outbox', 'outbox_parked_idx', $$CREATE INDEX outbox_parked_idx ON durable.outbox USING btree (id) INCLUDE (state) WHERE (state = ANY (ARRAY['dead'::text, 'unknown'::text]))$$),
    ('sessions', 'sessions_pkey', 'CREATE UNIQUE INDEX sessions_pkey ON durable.sessions USING btree (owned_by, bot, shard)'),
    ('permit_buckets', 'permit_buckets_pkey', 'CREATE UNIQUE INDEX permit_buckets_pkey ON durable.permit_buckets USING btree (bucket)'),
    ('permits', 'permits_bucket_granted_at_idx', 'CREATE INDEX permits_bucket_granted_at_idx ON durable.permits USING btree (bucket, granted_at)'),
    ('sweep_windows', 'sweep_windows_pkey', 'CREATE UNIQUE INDEX sweep_windows_pkey ON durable.sweep_windows USING btree (kind)');

SELECT indexes_are('durable', t, (SELECT array_agg(idx) FROM tap_idx WHERE tbl = t),
                   format('durable.%s has exactly the indexes of the default version', t))
  FROM unnest(ARRAY['inbox', 'outbox', 'sessions', 'permit_buckets', 'permits', 'sweep_windows']::name[]) AS t;
SELECT has_index('durable', tbl, idx, format('index %s exists on durable.%s', idx, tbl)) FROM tap_idx ORDER BY n;
SELECT is(pg_get_indexdef(format('durable.%I', idx)::regclass), def, format('index %s: columns and predicate', idx))
  FROM tap_idx ORDER BY n;
SELECT index_is_unique('durable', tbl, idx, format('%s is unique: dedupe is a constraint', idx))
  FROM tap_idx WHERE idx IN ('inbox_source_message_id_key', 'inbox_source_content_hash_key') ORDER BY n;

SELECT * FROM finish();
ROLLBACK;
