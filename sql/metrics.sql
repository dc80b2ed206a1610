--
-- metrics: the counters of metrics() and the gauges of standing().
--
-- Each operation below runs right after durable.metrics_reset(), and the
-- view `moved` lists the counters that are not zero: so each step shows
-- exactly which counters the operation counts.  The gauges of standing() are
-- compared with a snapshot taken before this file's records were created,
-- so that records of other files do not matter.
--

-- SETUP
\set VERBOSITY terse
-- The counters of metrics() as (counter, n) rows, in the contract's column order
CREATE TEMP VIEW counters AS
SELECT c.key AS counter, c.value::text::bigint AS n
  FROM durable.metrics() m, json_each(row_to_json(m)) c
 WHERE c.key <> 'since';
CREATE TEMP VIEW moved AS SELECT counter, n FROM counters WHERE n <> 0;
-- The gauges of standing() as (gauge, n) rows
CREATE TEMP VIEW gauges AS
SELECT g.key AS gauge, g.value::text::bigint AS n
  FROM durable.standing() s, json_each(row_to_json(s)) g
 WHERE g.key NOT IN ('oldest_pending', 'over_bound', 'why');
CREATE TEMP TABLE gauges_before AS SELECT * FROM gauges;

-- TESTS: metrics() and metrics_reset()
-- metrics() returns the contract's columns, in order
SELECT a.name, format_type(a.type, NULL) AS type
  FROM pg_proc p,
       unnest(p.proargnames, p.proallargtypes::oid[]) WITH ORDINALITY AS a(name, type, n)
 WHERE p.oid = 'durable.metrics()'::regprocedure
 ORDER BY a.n;

-- metrics_reset() zeroes every counter and moves since to now
SELECT since AS since_before FROM durable.metrics() \gset
SELECT pg_sleep(0.01);
SELECT durable.metrics_reset();
SELECT count(*) AS counters, count(*) FILTER (WHERE n = 0) AS zero FROM counters;
SELECT since > :'since_before'::timestamptz AS since_moved, since <= clock_timestamp() AS since_not_future
  FROM durable.metrics();

-- TESTS: what each operation counts
-- a stale confirmation after a lease takeover: DR001 (its message names the record: shown as
-- the SQLSTATE only), and stale_leases
SELECT id AS m0_id, token AS m0_old FROM durable.inbox_admit('regress-metrics', 'm0', 'met-0', instance => 'met-bot', lease => '30ms') \gset
SELECT pg_sleep(0.1);
SELECT token AS m0_new FROM durable.inbox_claim('met-bot-2', 10) WHERE id = :m0_id \gset
SELECT durable.metrics_reset();
\set VERBOSITY sqlstate
SELECT durable.inbox_complete(:m0_id, :m0_old);
\set VERBOSITY terse
SELECT * FROM moved;

-- a stale confirmation inside a transaction that rolls back still counts: stale_leases
SELECT durable.metrics_reset();
\set VERBOSITY sqlstate
BEGIN;
SELECT durable.inbox_heartbeat(:m0_id, :m0_old);
ROLLBACK;
BEGIN;
SELECT durable.inbox_complete(ARRAY[:m0_id]::bigint[], ARRAY[:m0_old]::bigint[]);
ROLLBACK;
\set VERBOSITY terse
SELECT * FROM moved;
-- the holder of the new token completes: no counter
SELECT durable.metrics_reset();
SELECT durable.inbox_complete(:m0_id, :m0_new);
SELECT * FROM moved;

-- admitting a new message: inbound_journaled
SELECT durable.metrics_reset();
SELECT duplicate, state FROM durable.inbox_admit('regress-metrics', 'm1', 'met-1', '{"n":1}');
SELECT * FROM moved;

-- admitting it again: inbound_duplicates, nothing journaled
SELECT durable.metrics_reset();
SELECT duplicate, state FROM durable.inbox_admit('regress-metrics', 'm1', 'met-1', '{"n":1}');
SELECT * FROM moved;

-- admitting and leasing at once: inbound_journaled only
SELECT durable.metrics_reset();
SELECT id AS m2_id, token AS m2_tok FROM durable.inbox_admit('regress-metrics', 'm2', 'met-2', instance => 'met-bot') \gset
SELECT * FROM moved;

-- a failure with attempts left: no counter (the record is retried, not dead)
SELECT durable.metrics_reset();
SELECT state FROM durable.inbox_fail(:m2_id, :m2_tok, 'first failure', '1 hour');
SELECT * FROM moved;

-- a failure on the last attempt: inbound_dead
SET durable.inbox_max_attempts = 1;
SELECT id AS m3_id, token AS m3_tok FROM durable.inbox_admit('regress-metrics', 'm3', 'met-3', instance => 'met-bot') \gset
SELECT durable.metrics_reset();
SELECT state FROM durable.inbox_fail(:m3_id, :m3_tok, 'last failure');
SELECT * FROM moved;

-- replaying the dead record: inbound_replayed
SELECT durable.metrics_reset();
SELECT durable.inbox_replay(:m3_id);
SELECT * FROM moved;

-- a lease that expires on the last attempt, found by the sweep: inbound_dead
SELECT state FROM durable.inbox_admit('regress-metrics', 'm4', 'met-4', instance => 'met-bot', lease => '30ms');
SELECT pg_sleep(0.1);
SELECT durable.metrics_reset();
SELECT inbox_expired >= 1 AS expired FROM durable.sweep();
SELECT * FROM moved;
SELECT state, attempts FROM durable.inbox WHERE source = 'regress-metrics' AND message_id = 'm4';
RESET durable.inbox_max_attempts;

-- outbox_begin of a new key: outbox_journaled
SELECT durable.metrics_reset();
SELECT action, token AS k1_tok FROM durable.outbox_begin('met-k1', 'met-1', '{"text":"one"}', 'met-bot') \gset
\echo action :action
SELECT * FROM moved;

-- the same key again after it was sent: answered from the journal, outbox_deduped
SELECT durable.outbox_sent('met-k1', :k1_tok, 'tg-1');
SELECT durable.metrics_reset();
SELECT action, provider_message_id FROM durable.outbox_begin('met-k1', 'met-1', '{"text":"one"}', 'met-bot');
SELECT * FROM moved;

-- the same key with another payload: a WARNING, outbox_deduped and outbox_diverged; the journaled send stands
SELECT durable.metrics_reset();
SELECT action, provider_message_id FROM durable.outbox_begin('met-k1', 'met-1', '{"text":"other"}', 'met-bot');
SELECT * FROM moved;
SELECT payload FROM durable.outbox WHERE key = 'met-k1';

-- enqueue of a new key: outbox_journaled, and outbox_deferred (an enqueued send waits for a sender loop)
SELECT durable.metrics_reset();
SELECT key, created, state FROM durable.outbox_enqueue('met-k2', 'met-2', '{"text":"two"}');
SELECT * FROM moved;

-- enqueue of the same key again: outbox_deduped
SELECT durable.metrics_reset();
SELECT key, created, state FROM durable.outbox_enqueue('met-k2', 'met-2', '{"text":"two"}');
SELECT * FROM moved;

-- enqueue for later: outbox_journaled and outbox_deferred
SELECT durable.metrics_reset();
SELECT key, created, state FROM durable.outbox_enqueue('met-k3', 'met-3', '{"text":"three"}', now() + interval '1 hour');
SELECT * FROM moved;

-- a retryable failure: no counter yet (failed, due again later)
SELECT key, token AS k2_tok FROM durable.outbox_claim('met-bot', 10) WHERE key = 'met-k2' \gset
SELECT durable.metrics_reset();
SELECT state, not_before >= statement_timestamp() + interval '30 ms' AS later FROM durable.outbox_failed('met-k2', :k2_tok, 'HTTP 502', true, '30ms');
SELECT * FROM moved;

-- the failed send leased again once due: outbox_retried
SELECT pg_sleep(0.1);
SELECT durable.metrics_reset();
SELECT key, attempts, token AS k2_tok FROM durable.outbox_claim('met-bot', 10) WHERE key = 'met-k2' \gset
\echo claimed :key, attempt :attempts
SELECT * FROM moved;
SELECT state FROM durable.outbox_failed('met-k2', :k2_tok, 'HTTP 502', true, '1 hour');

-- a failure that is not retryable: outbox_dead
SELECT token AS k4_tok FROM durable.outbox_begin('met-k4', 'met-4', '{"text":"four"}', 'met-bot') \gset
SELECT durable.metrics_reset();
SELECT state FROM durable.outbox_failed('met-k4', :k4_tok, 'HTTP 403 blocked by user', false);
SELECT * FROM moved;

-- retrying the dead send by hand: outbox_retried
SELECT durable.metrics_reset();
SELECT durable.outbox_retry('met-k4');
SELECT * FROM moved;

-- a send whose lease expired, found by the sweep: outbox_ambiguous
SELECT action FROM durable.outbox_begin('met-k5', 'met-5', '{"text":"five"}', 'met-bot', lease => '30ms');
SELECT pg_sleep(0.1);
SELECT durable.metrics_reset();
SELECT outbox_ambiguous >= 1 AS found FROM durable.sweep();
SELECT * FROM moved;
SELECT state FROM durable.outbox WHERE key = 'met-k5';

-- a send held by a dead incarnation, found by instance_start: outbox_ambiguous
SELECT action FROM durable.outbox_begin('met-k6', 'met-6', '{"text":"six"}', 'met-bot-6');
SELECT durable.metrics_reset();
SELECT * FROM durable.instance_start('met-bot-6');
SELECT * FROM moved;

-- a payload over durable.max_payload_bytes: bypass, a WARNING, outbox_bypassed, nothing journaled
SET durable.max_payload_bytes = 1024;
SELECT durable.metrics_reset();
SELECT action, state FROM durable.outbox_begin('met-k7', 'met-7', jsonb_build_object('text', repeat('x', 2000)), 'met-bot');
SELECT * FROM moved;
SELECT count(*) AS journaled FROM durable.outbox WHERE key = 'met-k7';
RESET durable.max_payload_bytes;

-- Counters of journal changes count when their transaction commits: an
-- enqueue rolled back, or in a savepoint rolled back, was never journaled.
SELECT durable.metrics_reset();
BEGIN;
SELECT created FROM durable.outbox_enqueue('met-k8', 'met-8', '{"text":"eight"}');
ROLLBACK;
SELECT * FROM moved;
SELECT count(*) AS journaled FROM durable.outbox WHERE key = 'met-k8';
BEGIN;
SAVEPOINT a;
SELECT created FROM durable.outbox_enqueue('met-k8', 'met-8', '{"text":"eight"}');
ROLLBACK TO SAVEPOINT a;
SAVEPOINT b;
SELECT created FROM durable.outbox_enqueue('met-k8b', 'met-8', '{"text":"eight b"}');
SAVEPOINT c;
SELECT created FROM durable.outbox_enqueue('met-k8c', 'met-8', '{"text":"eight c"}');
RELEASE SAVEPOINT c;
RELEASE SAVEPOINT b;
SAVEPOINT d;
SELECT created FROM durable.outbox_enqueue('met-k8d', 'met-8', '{"text":"eight d"}');
ROLLBACK TO SAVEPOINT d;
-- nothing yet: the transaction has not committed
SELECT * FROM moved;
COMMIT;
SELECT * FROM moved;
SELECT key FROM durable.outbox WHERE key LIKE 'met-k8%' ORDER BY key;
-- The inbox's too (found untested in review, 2026-12-05): an admit, a
-- failure on the last attempt and a replay rolled back count nothing.
SELECT durable.metrics_reset();
BEGIN;
SELECT state FROM durable.inbox_admit('met', 'met-rb', 'met-rb', instance => 'met-bot');
SET LOCAL durable.inbox_max_attempts = 1;
SELECT f.state FROM durable.inbox i, durable.inbox_fail(i.id, i.token, 'x') f
 WHERE i.source = 'met' AND i.message_id = 'met-rb';
SELECT durable.inbox_replay(i.id) FROM durable.inbox i WHERE i.source = 'met' AND i.message_id = 'met-rb';
ROLLBACK;
SELECT * FROM moved;
-- A prepared transaction counts at PREPARE TRANSACTION, and a ROLLBACK
-- PREPARED does not take it back: the counters say what was journaled
-- at some moment, not what stands.
SELECT durable.metrics_reset();
BEGIN;
SELECT created FROM durable.outbox_enqueue('met-k8p', 'met-8', '{"text":"prepared"}');
PREPARE TRANSACTION 'met-prepared';
SELECT * FROM moved;
ROLLBACK PREPARED 'met-prepared';
SELECT * FROM moved;
SELECT count(*) AS journaled FROM durable.outbox WHERE key = 'met-k8p';
-- Counters of calls count at once: a repeated key answered from the
-- journal in a transaction that rolls back still counts (outbox_deduped).
SELECT durable.metrics_reset();
BEGIN;
SELECT created FROM durable.outbox_enqueue('met-k8b', 'met-8', '{"text":"eight b"}');
ROLLBACK;
SELECT * FROM moved;
DELETE FROM durable.outbox WHERE key LIKE 'met-k8%';

-- more records for the gauges: an inbox record leased, a send leased, a dead send
SELECT state FROM durable.inbox_admit('regress-metrics', 'm5', 'met-5', instance => 'met-bot');
SELECT action FROM durable.outbox_begin('met-k9', 'met-9', '{"text":"nine"}', 'met-bot');
SELECT state FROM durable.outbox_failed('met-k10',
    (SELECT token FROM durable.outbox_begin('met-k10', 'met-10', '{"text":"ten"}', 'met-bot')), 'HTTP 400', false);

-- TESTS: standing()
-- standing() returns the contract's columns, in order
SELECT a.name, format_type(a.type, NULL) AS type
  FROM pg_proc p,
       unnest(p.proargnames, p.proallargtypes::oid[]) WITH ORDINALITY AS a(name, type, n)
 WHERE p.oid = 'durable.standing()'::regprocedure
 ORDER BY a.n;

-- This file's records by state, as the journal says
SELECT state, count(*) FROM durable.inbox WHERE source = 'regress-metrics' GROUP BY state ORDER BY state;
SELECT state, count(*) FROM durable.outbox WHERE key LIKE 'met-%' GROUP BY state ORDER BY state;

-- The gauges moved by exactly these counts since the snapshot
SELECT g.gauge, g.n - b.n AS change
  FROM gauges g JOIN gauges_before b USING (gauge)
 ORDER BY g.gauge;

-- oldest_pending is set while something waits, never in the future
SELECT oldest_pending IS NOT NULL AS has_oldest, oldest_pending <= clock_timestamp() AS not_future
  FROM durable.standing();

-- Within the bounds: over_bound false, why NULL
SET durable.bound_count = 1000000;
SET durable.bound_age = '1000h';
SELECT over_bound, why FROM durable.standing();

-- Over durable.bound_count: over_bound, and why names the setting
SET durable.bound_count = 0;
SELECT over_bound, regexp_replace(why, '[0-9]+', 'N', 'g') AS why FROM durable.standing();

-- Over durable.bound_age: over_bound, and why names the setting
SET durable.bound_count = 1000000;
SET durable.bound_age = 0;
SELECT pg_sleep(1.1);
SELECT over_bound, regexp_replace(why, '[0-9]+', 'N', 'g') AS why FROM durable.standing();

-- Over both: why gives both reasons
SET durable.bound_count = 0;
SELECT over_bound, regexp_replace(why, '[0-9]+', 'N', 'g') AS why FROM durable.standing();
RESET durable.bound_count;
RESET durable.bound_age;

-- Deferred work is not waiting: a send enqueued for tomorrow and an inbox
-- record failed with a day's delay count in their states but not against
-- the bounds, and oldest_pending stays NULL.  Due work waits from its due
-- time: a send journaled an hour ago but due only now has waited 0 s.
BEGIN;
DELETE FROM durable.inbox WHERE finished_at IS NULL;
DELETE FROM durable.outbox WHERE state IN ('pending', 'failed');
SELECT created FROM durable.outbox_enqueue('met-later', 'met-l', '{}', now() + interval '1 day');
SELECT id AS later_id, token AS later_token
  FROM durable.inbox_admit('regress-metrics', 'm-later', 'met-l', instance => 'met-bot') \gset
SELECT state FROM durable.inbox_fail(:later_id, :later_token, 'busy', retry_in => '1 day');
SET LOCAL durable.bound_count = 0;
SET LOCAL durable.bound_age = 0;
SELECT inbox_pending, outbox_pending, oldest_pending, over_bound, why FROM durable.standing();
SELECT created FROM durable.outbox_enqueue('met-now', 'met-n', '{}');
UPDATE durable.outbox SET created_at = created_at - interval '1 hour' WHERE key = 'met-now';
SET LOCAL durable.bound_count = 1;
SET LOCAL durable.bound_age = '30min';
SELECT outbox_pending, oldest_pending = (SELECT not_before FROM durable.outbox WHERE key = 'met-now') AS waits_from_due_time,
       over_bound, why
  FROM durable.standing();
SET LOCAL durable.bound_count = 0;
SELECT over_bound, regexp_replace(why, '[0-9]+', 'N', 'g') AS why FROM durable.standing();
ROLLBACK;

-- An inbox lease that ran out, and that no sweep has moved yet, is waiting
-- too (a claim would take it over), from the end of its lease: a fleet that
-- died holding its records, with no worker to sweep them, shows as over
-- bound, not as nothing waiting.  A live lease is not waiting: one waiting
-- record is not over a bound_count of 1.
BEGIN;
DELETE FROM durable.inbox WHERE finished_at IS NULL;
DELETE FROM durable.outbox WHERE state IN ('pending', 'failed');
SELECT id AS gone_id
  FROM durable.inbox_admit('regress-metrics', 'm-gone', 'met-g', instance => 'gone-bot', lease => '20ms') \gset
SELECT token IS NOT NULL AS leased
  FROM durable.inbox_admit('regress-metrics', 'm-live', 'met-v', instance => 'live-bot', lease => '1h');
SELECT pg_sleep(0.1);
SET LOCAL durable.bound_count = 0;
SET LOCAL durable.bound_age = '30min';
SELECT inbox_pending, inbox_leased,
       oldest_pending = (SELECT lease_until FROM durable.inbox WHERE id = :gone_id) AS waits_from_lease_end,
       over_bound, regexp_replace(why, '[0-9]+', 'N', 'g') AS why
  FROM durable.standing();
SET LOCAL durable.bound_count = 1;
SELECT over_bound FROM durable.standing();
-- On its last attempt the same lease is the sweep's to make dead (no claim
-- takes it over): not waiting
SET LOCAL durable.bound_count = 0;
SET LOCAL durable.inbox_max_attempts = 1;
SELECT inbox_leased, oldest_pending, over_bound FROM durable.standing();
SELECT count(*) AS claimed FROM durable.inbox_claim('met-other', 10);
ROLLBACK;

-- CLEANUP
DELETE FROM durable.inbox WHERE source = 'regress-metrics';
DELETE FROM durable.outbox WHERE key LIKE 'met-%';
DROP VIEW moved, counters, gauges;
DROP TABLE gauges_before;
SELECT durable.metrics_reset();

-- The dead inbox records are counted from their index alone (an index-only
-- scan of inbox_dead_idx, whose predicate says dead: finished, not done), not
-- by reading each record: until 2026-12-07 the count also tested the state,
-- which the index does not hold, and read 0.7 s warm (seconds to a minute
-- cold) of heap for 200,000 dead records behind 5,000,000 done ones (found by
-- review).  Here: no page of records is read for the count (a new backend, whose
-- plan is made with sequential and bitmap scans off, as a large journal
-- would make it; VACUUM sets the visibility map an index-only scan relies on)
DELETE FROM durable.inbox WHERE finished_at IS NULL;
SET durable.inbox_max_attempts = 1;
SELECT count(*) AS dead_made
  FROM generate_series(1, 300) g,
       durable.inbox_admit('regress-metrics', 'm-dead-' || g, 'met-dead-' || g, instance => 'met-bot') a,
       durable.inbox_fail(a.id, a.token, 'gave up', retry_in => NULL) f
 WHERE f.state = 'dead';
RESET durable.inbox_max_attempts;
-- ... and so are the dead and unknown sends, by state (outbox_parked_idx
-- holds the state since 0.14; before, each count read every parked send)
DELETE FROM durable.outbox WHERE state IN ('pending', 'sending', 'failed');
SELECT count(*) AS dead_sends_made
  FROM generate_series(1, 300) g,
       durable.outbox_begin('met-dead-' || g, 'met-dead-' || g, '{}', 'met-bot') b,
       durable.outbox_failed(b.key, b.token, 'chat not found', retryable => false) f;
VACUUM durable.inbox;
VACUUM durable.outbox;
\c
SET enable_seqscan = off;
SET enable_bitmapscan = off;
BEGIN;
SELECT inbox_dead >= 300 AS counted FROM durable.standing();
-- (what it reads of the table: the visibility map, not the pages of records:
-- 16 of them before)
SELECT pg_stat_get_xact_blocks_fetched('durable.inbox'::regclass)
       < (SELECT relpages / 2 FROM pg_class WHERE oid = 'durable.inbox'::regclass) AS records_not_read;
COMMIT;
BEGIN;
SELECT outbox_dead >= 300 AS counted FROM durable.standing();
-- (24 pages before)
SELECT pg_stat_get_xact_blocks_fetched('durable.outbox'::regclass)
       < (SELECT relpages / 2 FROM pg_class WHERE oid = 'durable.outbox'::regclass) AS sends_not_read;
COMMIT;
RESET enable_seqscan;
RESET enable_bitmapscan;
DELETE FROM durable.inbox WHERE source = 'regress-metrics';
DELETE FROM durable.outbox WHERE key LIKE 'met-dead-%';
