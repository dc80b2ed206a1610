-- durable's cached plans use their indexes, also when they are built on a
-- journal of a page (planner.c).  A backend keeps a statement's plan until
-- a VACUUM, ANALYZE or DDL of its table; a plan that read a one-page
-- journal whole was kept while the journal grew (until 2026-12-07 every
-- inbox_fail(), instance_start() and sweep of such a backend then read a
-- backlog of a million records once per call).
-- This file works in a database of its own, durable_plans.

-- SETUP
\set regress_db :DBNAME
SET client_min_messages = warning;
DROP DATABASE IF EXISTS durable_plans WITH (FORCE);
RESET client_min_messages;
CREATE DATABASE durable_plans;
\c durable_plans
CREATE EXTENSION durable;
-- A few records, and a VACUUM that tells the planner the journals are a page each.
SELECT count(*) AS admitted
  FROM generate_series(1, 5) g, durable.inbox_admit('seed', 'm' || g, 'chat-' || g, '{}');
SELECT count(*) AS journaled
  FROM generate_series(1, 5) g, durable.outbox_enqueue('seed-' || g, 'chat-' || g, '{}');
SELECT durable.session_save('seed-bot', 0, 'sid', 1, 'wss://gateway.example', 1);
SELECT durable.permit('seed-bucket', 5, '1 min') = '0' AS granted;
VACUUM durable.inbox, durable.outbox, durable.sessions, durable.permits, durable.permit_buckets;
SELECT relname, relpages FROM pg_class
 WHERE relnamespace = 'durable'::regnamespace AND relname IN ('inbox', 'outbox')
 ORDER BY relname;

-- TESTS

-- A new backend: every statement below is planned now, on one-page journals.
\c durable_plans
BEGIN;
-- The bot path, and a duplicate.
SELECT id AS a1, token AS t1 FROM durable.inbox_admit('p', 'm1', 'c1', '{}', instance => 'bot') \gset
SELECT durable.inbox_heartbeat(:a1, :t1) > now() AS extended;
SELECT durable.inbox_complete(:a1, :t1) AS completed;
SELECT duplicate FROM durable.inbox_admit('p', 'm1', 'c1', '{}', instance => 'bot');
-- The queue path: claim, release, claim again, fail (to a retry), fail for good.
SET LOCAL durable.inbox_max_attempts = 2;
SELECT FROM durable.inbox_admit('p', 'm2', 'c2', '{}');
SELECT id AS a2, token AS t2 FROM durable.inbox_claim('bot') \gset
SELECT durable.inbox_release(:a2, :t2) AS released;
SELECT token AS t2 FROM durable.inbox_claim('bot', max => 10) WHERE id = :a2 \gset
SELECT (durable.inbox_fail(:a2, :t2, 'boom', retry_in => '0')).state AS failed;
SELECT token AS t2 FROM durable.inbox_claim('bot', max => 10) WHERE id = :a2 \gset
SELECT (durable.inbox_fail(:a2, :t2, 'boom again')).state AS failed;
SELECT durable.inbox_replay(:a1) AS replayed;
SELECT count(*) AS completed
  FROM durable.inbox_claim('bot', max => 10) c, durable.inbox_complete(ARRAY[c.id], ARRAY[c.token]);
-- The send path, a send answered from the journal, a dead send retried.
SELECT key AS k1, token AS s1 FROM durable.outbox_begin('k1', 'c1', '{}', 'bot') \gset
SELECT durable.outbox_sent(:'k1', :s1, 'provider-1') AS sent;
SELECT state FROM durable.outbox_begin('k1', 'c1', '{}', 'bot');
SELECT key AS k2, token AS s2 FROM durable.outbox_begin('k2', 'c2', '{}', 'bot') \gset
SELECT durable.outbox_heartbeat(:'k2', :s2) > now() AS extended;
SELECT (durable.outbox_failed(:'k2', :s2, 'refused', retryable => false)).state AS failed;
SELECT durable.outbox_retry('k2') AS retried;
SELECT count(*) AS claimed FROM durable.outbox_claim('bot', max => 10);
-- A restart (the sends it held are unknown now), the worker's passes run by
-- hand, the gauges, a session, a permit.
SELECT count(*) >= 0 AS started FROM durable.instance_start('bot');
SELECT durable.outbox_discard('seed-1') AS discarded;
SELECT count(*) >= 0 AS swept FROM durable.sweep();
SELECT count(*) >= 0 AS purged FROM durable.purge();
SELECT inbox_dead FROM durable.standing();
SELECT count(*) > 0 AS counted FROM durable.metrics();
SELECT durable.session_save('seed-bot', 0, 'sid-2', 2, 'wss://gateway.example', 1);
SELECT session_id, sequence FROM durable.session_load('seed-bot', 0, 'wss://gateway.example', 1);
SELECT durable.permit('seed-bucket', 5, '1 min') = '0' AS granted;
-- Not one sequential scan of a table with an index, in this transaction.
SELECT relname, seq_scan, idx_scan > 0 AS indexed
  FROM pg_stat_xact_user_tables
 WHERE schemaname = 'durable' AND relname IN ('inbox', 'outbox', 'sessions', 'permits', 'permit_buckets')
 ORDER BY relname;
-- The journal grows, in this transaction (the plans stay): a batch
-- completion and its refusal of a stale token each look up the record they
-- name through the primary key, not the whole journal (until the review of
-- 2026-12-07, a plan built on a one-page journal walked all of it per call)
SELECT count(*) AS admitted
  FROM generate_series(1, 2000) g, durable.inbox_admit('p', 'grown-' || g, 'grown-' || g, '{}');
SELECT id AS a3, token AS t3 FROM durable.inbox_admit('p', 'm3', 'c3', '{}', instance => 'bot') \gset
SELECT set_config('plans.a3', :'a3', true), set_config('plans.t3', :'t3', true) \gset
SELECT idx_tup_fetch AS fetched FROM pg_stat_xact_user_tables WHERE relid = 'durable.inbox'::regclass \gset
DO $$
BEGIN
    PERFORM durable.inbox_complete(ARRAY[current_setting('plans.a3')::int8],
                                   ARRAY[current_setting('plans.t3')::int8 - 1]);
EXCEPTION WHEN sqlstate 'DR001' THEN NULL;
END $$;
SELECT durable.inbox_complete(ARRAY[:a3], ARRAY[:t3]) AS completed;
SELECT idx_tup_fetch - :fetched < 20 AS looked_up
  FROM pg_stat_xact_user_tables WHERE relid = 'durable.inbox'::regclass;
ROLLBACK;

-- A statement of your own on the journal is planned as PostgreSQL plans it:
-- a one-page table is read whole.
\c durable_plans
BEGIN;
SELECT count(*) AS seed FROM durable.inbox WHERE source = 'seed';
SELECT seq_scan FROM pg_stat_xact_user_tables WHERE relid = 'durable.inbox'::regclass;
ROLLBACK;

-- CLEANUP
\c :regress_db
DROP DATABASE durable_plans WITH (FORCE);
