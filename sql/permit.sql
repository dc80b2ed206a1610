-- Shared pacing: permit(bucket, max, per), a sliding-window rate limit.
-- This file uses buckets named 'regress-permit%' only.

-- SETUP
DELETE FROM durable.permits WHERE bucket LIKE 'regress-permit%';
DELETE FROM durable.permit_buckets WHERE bucket LIKE 'regress-permit%';

-- TESTS

-- A free permit: the call returns a zero interval and consumes it.
SELECT durable.permit(bucket => 'regress-permit:a', max => 3, per => '1h');

-- Two more are free (max 3 per hour)...
SELECT n, durable.permit('regress-permit:a', 3, '1h') = '0' AS granted
  FROM generate_series(2, 3) n;

-- ...and the fourth must wait until the oldest grant leaves the window,
-- just under an hour from now.
SELECT w > '59 min' AND w <= '1h' AS waits_for_oldest
  FROM durable.permit('regress-permit:a', 3, '1h') w;

-- A refusal consumes nothing: still exactly 3 grants recorded.
SELECT count(*) AS grants FROM durable.permits WHERE bucket = 'regress-permit:a';

-- The bucket row remembers the window (for the sweep) and the last grant.
SELECT per, last_granted_at <= clock_timestamp() AND last_granted_at > now() - interval '1 min' AS stamped
  FROM durable.permit_buckets WHERE bucket = 'regress-permit:a';

-- Buckets are independent, and named exactly: another name has its own permits.
SELECT durable.permit('regress-permit:b', 1, '1h') = '0' AS granted;
SELECT durable.permit('regress-permit:A', 1, '1h') = '0' AS granted;
SELECT durable.permit('regress-permit:b', 1, '1h') > '0' AS must_wait;

-- A rolled-back grant is not consumed: the permit is free again afterwards.
BEGIN;
SELECT durable.permit('regress-permit:c', 1, '1h') = '0' AS granted;
ROLLBACK;
SELECT durable.permit('regress-permit:c', 1, '1h') = '0' AS granted;
SELECT durable.permit('regress-permit:c', 1, '1h') > '0' AS must_wait;

-- The window slides: grant at t0, 2 s later grant at t1 (max 2 per 4 s; the
-- steps between have 2 s to spare on a slow machine).
SELECT durable.permit('regress-permit:slide', 2, '4s') = '0' AS granted;
SELECT pg_sleep(2);
SELECT durable.permit('regress-permit:slide', 2, '4s') = '0' AS granted;
-- The third waits until t0 leaves (at most 2 s), not a whole window.
SELECT durable.permit('regress-permit:slide', 2, '4s') AS wait \gset
SELECT :'wait'::interval > '0' AND :'wait'::interval <= '2s' AS waits_for_t0;
-- After that wait exactly one permit is free again (t1 is still in the window).
SELECT pg_sleep(extract(epoch FROM :'wait'::interval));
SELECT durable.permit('regress-permit:slide', 2, '4s') = '0' AS granted;
SELECT durable.permit('regress-permit:slide', 2, '4s') > '0' AS must_wait;

-- A bucket trims its own old grants: 3 grants with a 50 ms window, 0.1 s
-- later a fourth call finds them gone and leaves only its own.
SELECT durable.permit('regress-permit:trim', 5, '50ms') = '0' AS granted
  FROM generate_series(1, 3);
SELECT pg_sleep(0.1);
SELECT durable.permit('regress-permit:trim', 5, '50ms') = '0' AS granted;
SELECT count(*) AS grants FROM durable.permits WHERE bucket = 'regress-permit:trim';

-- When max is lowered, the wait is until enough grants leave: with 3 grants
-- at g0, then g1 and g2 0.2 s later, max 2 waits for g1 (not g0).
SELECT durable.permit('regress-permit:lower', 3, '10s') = '0' AS granted;
SELECT pg_sleep(0.2);
SELECT durable.permit('regress-permit:lower', 3, '10s') = '0' AS granted
  FROM generate_series(1, 2);
SELECT clock_timestamp() AS before, durable.permit('regress-permit:lower', 2, '10s') AS wait \gset
SELECT :'wait'::interval <= g[2] + '10s' - :'before'::timestamptz
       AND :'wait'::interval > g[1] + '10s' - :'before'::timestamptz AS waits_for_g1
  FROM (SELECT array_agg(granted_at ORDER BY granted_at) g
          FROM durable.permits WHERE bucket = 'regress-permit:lower') s;

-- Time is the wall clock of the call, not the start of the transaction.
BEGIN;
SELECT pg_sleep(0.1);
SELECT durable.permit('regress-permit:clock', 1, '1h') = '0' AS granted;
SELECT granted_at > now() AS stamped_after_transaction_start
  FROM durable.permits WHERE bucket = 'regress-permit:clock';
COMMIT;

-- After the clock stepped back, grants stamped before the step lie ahead of now
-- (simulated by stamping two of them a day ahead): the next call counts them in the
-- window and brings them back to its own time, so the bucket waits at most its `per`
-- from then, not the day the clock was ahead (nor does its bucket wait that day for the sweep).
INSERT INTO durable.permit_buckets (bucket, per, last_granted_at)
VALUES ('regress-permit:ahead', '10s', clock_timestamp() + '1 day');
INSERT INTO durable.permits (bucket, granted_at)
SELECT 'regress-permit:ahead', clock_timestamp() + '1 day' FROM generate_series(1, 2);
SELECT clock_timestamp() AS before \gset
SELECT durable.permit('regress-permit:ahead', 2, '10s') AS wait \gset
SELECT :'wait'::interval > '9s' AND :'wait'::interval <= '10s' AS waits_one_window;
SELECT count(*) AS grants, bool_and(granted_at BETWEEN :'before' AND clock_timestamp()) AS restamped
  FROM durable.permits WHERE bucket = 'regress-permit:ahead';
SELECT last_granted_at BETWEEN :'before' AND clock_timestamp() AS bucket_restamped
  FROM durable.permit_buckets WHERE bucket = 'regress-permit:ahead';
-- A third grant is still refused: both grants count in the window.
SELECT durable.permit('regress-permit:ahead', 2, '10s') > '9s' AS still_refused;

-- Buckets no longer used are dropped by the sweep, with their grants, once
-- their last grant has left the window; buckets still in their window stay.
SELECT durable.permit('regress-permit:idle', 5, '30ms') = '0' AS granted
  FROM generate_series(1, 3);
SELECT durable.permit('regress-permit:busy', 5, '1h') = '0' AS granted;
SELECT pg_sleep(0.1);
SELECT count(*) AS passes FROM durable.sweep();
SELECT b.bucket, (SELECT count(*) FROM durable.permits p WHERE p.bucket = b.bucket) AS grants
  FROM (VALUES ('regress-permit:idle'), ('regress-permit:busy')) b(bucket)
 WHERE EXISTS (SELECT FROM durable.permit_buckets k WHERE k.bucket = b.bucket)
 ORDER BY 1;
SELECT count(*) AS idle_grants_left FROM durable.permits WHERE bucket = 'regress-permit:idle';

-- A pass reads a bounded number of buckets (5,000), going on where the previous pass of the
-- same process stopped: 12,000 buckets in use with 120 idle ones spread among them are gone
-- round in three windows, the first pass dropping only idle buckets of its window. (Before
-- 2026-12-04 every pass read every bucket: 37 ms a pass with 300,000 in use.) A window whose
-- idle buckets hold more old grants than a pass deletes (1,000) is read again by the next
-- pass: the first idle bucket's 2,500 grants take three passes, five in all.
INSERT INTO durable.permit_buckets (bucket, per, last_granted_at)
SELECT pg_catalog.format('regress-permit-walk:%s', pg_catalog.lpad(i::text, 5, '0')), '1 day',
       CASE WHEN i % 100 = 0 THEN pg_catalog.now() - interval '2 days' ELSE pg_catalog.now() END
  FROM pg_catalog.generate_series(0, 11999) i;
INSERT INTO durable.permits (bucket, granted_at)
SELECT 'regress-permit-walk:00000', pg_catalog.now() - interval '2 days'
  FROM pg_catalog.generate_series(1, 2500);
SELECT count(*) AS passes FROM durable.sweep();
SELECT count(*) > 0 AND count(*) < 120 AS first_pass_dropped_some_not_all
  FROM (SELECT pg_catalog.generate_series(0, 11999, 100) i) idle
 WHERE NOT EXISTS (SELECT FROM durable.permit_buckets b
                    WHERE b.bucket = pg_catalog.format('regress-permit-walk:%s', pg_catalog.lpad(i::text, 5, '0')));
SELECT count(*) AS grants_left FROM durable.permits WHERE bucket = 'regress-permit-walk:00000';
SELECT count(*) AS passes FROM durable.sweep();
SELECT count(*) AS passes FROM durable.sweep();
SELECT count(*) AS passes FROM durable.sweep();
SELECT count(*) AS passes FROM durable.sweep();
SELECT count(*) FILTER (WHERE last_granted_at < pg_catalog.now() - interval '1 day') AS idle_left,
       count(*) FILTER (WHERE last_granted_at >= pg_catalog.now() - interval '1 day') AS in_use
  FROM durable.permit_buckets WHERE bucket LIKE 'regress-permit-walk:%';
SELECT count(*) AS grants_left FROM durable.permits WHERE bucket = 'regress-permit-walk:00000';
DELETE FROM durable.permit_buckets WHERE bucket LIKE 'regress-permit-walk:%';

-- An idle bucket whose drop fails alone (here a foreign key of the DBA's that references
-- it, NO ACTION; a trigger that raises on one does the same) is passed over, with a WARNING,
-- and the other idle buckets of the pass are dropped.  (Until 2026-12-07 one such bucket
-- rolled back every drop of its window, pass after pass, and the walk stayed on it: no idle
-- bucket was dropped again while it was idle.)  Passed over for 10 minutes, it is left out
-- of the next passes without a WARNING.
INSERT INTO durable.permit_buckets (bucket, per, last_granted_at)
SELECT pg_catalog.format('regress-permit-held:%s', i), '1 s', pg_catalog.now() - interval '1 hour'
  FROM pg_catalog.generate_series(1, 40) i;
INSERT INTO durable.permits (bucket, granted_at)
SELECT pg_catalog.format('regress-permit-held:%s', i), pg_catalog.now() - interval '1 hour'
  FROM pg_catalog.generate_series(1, 40) i;
CREATE TABLE public.regress_permit_config (bucket text REFERENCES durable.permit_buckets (bucket));
INSERT INTO public.regress_permit_config VALUES ('regress-permit-held:17');
SELECT count(*) AS passes FROM durable.sweep();
SELECT bucket, (SELECT count(*) FROM durable.permits p WHERE p.bucket = b.bucket) AS grants
  FROM durable.permit_buckets b WHERE bucket LIKE 'regress-permit-held:%';
SELECT count(*) AS passes FROM durable.sweep();
DELETE FROM public.regress_permit_config;
DROP TABLE public.regress_permit_config;
DELETE FROM durable.permits WHERE bucket LIKE 'regress-permit-held:%';
DELETE FROM durable.permit_buckets WHERE bucket LIKE 'regress-permit-held:%';

-- Old grants that a trigger of the DBA's keeps from the drop (it returns NULL for them) fail
-- their bucket the same way: chosen first at every pass, they would take the pass's limit
-- (1,000 grants) and no other idle bucket would go (until 2026-12-07; found by review).
INSERT INTO durable.permit_buckets (bucket, per, last_granted_at)
SELECT pg_catalog.format('regress-permit-kept:%s', i), '1 s', pg_catalog.now() - interval '1 hour'
  FROM pg_catalog.generate_series(0, 20) i;
INSERT INTO durable.permits (bucket, granted_at)
SELECT 'regress-permit-kept:0', pg_catalog.now() - interval '1 hour' FROM pg_catalog.generate_series(1, 1500);
INSERT INTO durable.permits (bucket, granted_at)
SELECT pg_catalog.format('regress-permit-kept:%s', i), pg_catalog.now() - interval '1 hour'
  FROM pg_catalog.generate_series(1, 20) i;
CREATE FUNCTION public.regress_keep_grants() RETURNS trigger LANGUAGE plpgsql AS
$$BEGIN RETURN CASE WHEN OLD.bucket = 'regress-permit-kept:0' THEN NULL ELSE OLD END; END$$;
CREATE TRIGGER regress_keep BEFORE DELETE ON durable.permits
    FOR EACH ROW EXECUTE FUNCTION public.regress_keep_grants();
SELECT count(*) AS passes FROM durable.sweep();
SELECT count(*) AS passes FROM durable.sweep();
SELECT bucket, (SELECT count(*) FROM durable.permits p WHERE p.bucket = b.bucket) AS grants
  FROM durable.permit_buckets b WHERE bucket LIKE 'regress-permit-kept:%';
DROP TRIGGER regress_keep ON durable.permits;
DROP FUNCTION public.regress_keep_grants();
DELETE FROM durable.permits WHERE bucket LIKE 'regress-permit-kept:%';
DELETE FROM durable.permit_buckets WHERE bucket LIKE 'regress-permit-kept:%';

-- Past the 1,000 buckets it passes over by name, the process passes over every idle bucket
-- whose last grant is not after the newest failure's, also buckets never granted (no last
-- grant: until 2026-12-07 those were searched for and warned about again at every pass).
INSERT INTO durable.permit_buckets (bucket, per)
SELECT pg_catalog.format('regress-permit-never:%s', pg_catalog.lpad(i::text, 4, '0')), '1 s'
  FROM pg_catalog.generate_series(1, 1100) i;
CREATE FUNCTION public.regress_refuse_drop() RETURNS trigger LANGUAGE plpgsql AS
$$BEGIN IF OLD.bucket LIKE 'regress-permit-never:%' THEN RAISE 'kept %', OLD.bucket; END IF; RETURN OLD; END$$;
CREATE TRIGGER regress_refuse BEFORE DELETE ON durable.permit_buckets
    FOR EACH ROW EXECUTE FUNCTION public.regress_refuse_drop();
\set VERBOSITY terse
SELECT count(*) AS passes FROM durable.sweep();
SELECT count(*) AS passes FROM durable.sweep();
SELECT count(*) AS passes FROM durable.sweep();
\set VERBOSITY default
SELECT count(*) AS never_granted_left FROM durable.permit_buckets WHERE bucket LIKE 'regress-permit-never:%';
DROP TRIGGER regress_refuse ON durable.permit_buckets;
DROP FUNCTION public.regress_refuse_drop();
DELETE FROM durable.permit_buckets WHERE bucket LIKE 'regress-permit-never:%';

-- A dropped bucket starts afresh on its next call.
SELECT durable.permit('regress-permit:idle', 5, '30ms') = '0' AS granted;

-- Limits: max 1000000 and per 7 days are accepted; a day counts 24 hours.
SELECT durable.permit('regress-permit:limits', 1000000, '7 days') = '0' AS granted;
SELECT per FROM durable.permit_buckets WHERE bucket = 'regress-permit:limits';

-- Invalid input (22023), nothing consumed.
\set VERBOSITY terse
-- bucket NULL, empty, over 512 bytes.
SELECT durable.permit(NULL, 1, '1s');
SELECT durable.permit('', 1, '1s');
SELECT durable.permit(repeat('x', 513), 1, '1s');
-- max NULL, 0, negative, over 1000000.
SELECT durable.permit('regress-permit:bad', NULL, '1s');
SELECT durable.permit('regress-permit:bad', 0, '1s');
SELECT durable.permit('regress-permit:bad', -1, '1s');
SELECT durable.permit('regress-permit:bad', 1000001, '1s');
-- per NULL, zero, negative, under 1 ms, over 7 days (a month counts 30 days).
SELECT durable.permit('regress-permit:bad', 1, NULL);
SELECT durable.permit('regress-permit:bad', 1, '0');
SELECT durable.permit('regress-permit:bad', 1, '-1s');
SELECT durable.permit('regress-permit:bad', 1, '0.5ms');
SELECT durable.permit('regress-permit:bad', 1, '7 days 1 second');
SELECT durable.permit('regress-permit:bad', 1, '1 mon');
-- The limits apply to the sum of the parts, also when the parts themselves
-- overflow 64 bits of microseconds: this one is 1 hour (refused until 2026-12-06).
SELECT durable.permit('regress-permit:parts', 1, '4000000 mons -120000000 days 1 hour') AS granted;
SELECT durable.permit('regress-permit:bad', 1, '4000000 mons -119000000 days 1 hour');
\set VERBOSITY default
SELECT count(*) AS rows FROM durable.permit_buckets WHERE bucket = 'regress-permit:bad';

-- A publication of every table (logical replication, change data capture) publishes
-- durable.permits too.  A published table needs a replica identity for its DELETEs, and
-- permits has no key, so its identity is the whole row: permit() and the sweep's drop of
-- idle buckets work under such a publication.
SELECT relreplident FROM pg_class WHERE oid = 'durable.permits'::regclass;
SET client_min_messages = error;
CREATE PUBLICATION regress_durable_everything FOR ALL TABLES;
RESET client_min_messages;
SELECT durable.permit('regress-permit:published', 1, '1ms') = '0' AS granted;
SELECT pg_sleep(0.01);
SELECT durable.permit('regress-permit:published', 1, '1ms') = '0' AS granted_again;
SELECT pg_sleep(0.01);
SELECT purged >= 0 AS swept FROM durable.sweep();
SELECT count(*) = 0 AS idle_bucket_dropped FROM durable.permit_buckets WHERE bucket = 'regress-permit:published';

-- The sweep drops idle buckets in a subtransaction: when that fails (here the replica
-- identity is taken away by hand under the publication) it warns, and its lease recovery
-- goes on (the record leased for 20 ms is pending again).
-- (The buckets above are dropped first: idle by now or not yet, they would make the count
-- of the WARNING depend on the timing.)
DELETE FROM durable.permits WHERE bucket LIKE 'regress-permit%';
DELETE FROM durable.permit_buckets WHERE bucket LIKE 'regress-permit%';
ALTER TABLE durable.permits REPLICA IDENTITY DEFAULT;
INSERT INTO durable.permit_buckets (bucket, per, last_granted_at)
VALUES ('regress-permit:idle-published', '1 ms', now() - interval '1 s');
INSERT INTO durable.permits (bucket, granted_at) VALUES ('regress-permit:idle-published', now() - interval '1 s');
SELECT id AS expiring FROM durable.inbox_admit('regress-permit', 'expiring', 'chat-permit',
                                               instance => 'bot-x', lease => '20ms') \gset
SELECT pg_sleep(0.05);
SELECT purged >= 0 AS swept FROM durable.sweep();
SELECT state FROM durable.inbox WHERE id = :expiring;
ALTER TABLE durable.permits REPLICA IDENTITY FULL;
DROP PUBLICATION regress_durable_everything;
DELETE FROM durable.inbox WHERE source = 'regress-permit';

-- A trigger of the DBA's that skips a grant's row would let every later call through
-- (the window would not count it): refused, 55000, naming the table; nothing granted
BEGIN;
CREATE FUNCTION pg_temp.skip_row() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NULL; END$$;
CREATE TRIGGER regress_skip BEFORE INSERT ON durable.permits
    FOR EACH ROW EXECUTE FUNCTION pg_temp.skip_row();
SAVEPOINT granted;
SELECT durable.permit('regress-permit:skipped', 1, '1 minute');
ROLLBACK TO granted;
DROP TRIGGER regress_skip ON durable.permits;
CREATE TRIGGER regress_skip BEFORE INSERT OR UPDATE ON durable.permit_buckets
    FOR EACH ROW EXECUTE FUNCTION pg_temp.skip_row();
SAVEPOINT granted;
SELECT durable.permit('regress-permit:skipped', 1, '1 minute');
ROLLBACK TO granted;
SELECT count(*) AS granted FROM durable.permits WHERE bucket = 'regress-permit:skipped';
ROLLBACK;

-- An idle bucket whose drop failed only in work that rolled back is dropped by
-- the same session's next sweep (until 2026-12-07 the session passed it over
-- for 10 minutes).  In a new session: this one passes over the buckets above.
\c
SELECT count(*) FILTER (WHERE durable.permit('regress-permit-rolled:' || g, 1, '30ms') = '0') AS granted
  FROM generate_series(1, 3) g;
SELECT pg_sleep(0.1);
CREATE FUNCTION pg_temp.refuse_rolled() RETURNS trigger LANGUAGE plpgsql AS
$$BEGIN IF OLD.bucket = 'regress-permit-rolled:2' THEN RAISE 'kept %', OLD.bucket; END IF; RETURN OLD; END$$;
BEGIN;
CREATE TRIGGER regress_refuse_rolled BEFORE DELETE ON durable.permit_buckets
    FOR EACH ROW EXECUTE FUNCTION pg_temp.refuse_rolled();
\set VERBOSITY terse
SELECT count(*) AS passes FROM durable.sweep();
\set VERBOSITY default
ROLLBACK;
SELECT count(*) AS passes FROM durable.sweep();
SELECT count(*) AS rolled_left FROM durable.permit_buckets WHERE bucket LIKE 'regress-permit-rolled:%';

-- CLEANUP
DELETE FROM durable.permits WHERE bucket LIKE 'regress-permit%';
DELETE FROM durable.permit_buckets WHERE bucket LIKE 'regress-permit%';
