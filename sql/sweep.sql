--
-- sweep() and purge(): recovery of expired leases, due work, retention.
--
-- The background worker of this database sleeps (durable.naptime = 1h in
-- test/durable.conf), so records move here only when this file calls
-- durable.sweep() itself.
--

-- SETUP
-- sweep() acts on every record of the database: start from empty journals
TRUNCATE durable.inbox, durable.outbox;
SELECT durable.metrics_reset();

-- TESTS

-- 1. Expired leases

-- An inbound record whose lease expires at once, and one with a live lease
SELECT state, token IS NOT NULL AS leased
  FROM durable.inbox_admit('sweep', 'm1', 'sweep-chat-1', '{"n":1}', instance => 'sweep-a', lease => '30ms');
SELECT state, token IS NOT NULL AS leased
  FROM durable.inbox_admit('sweep', 'm2', 'sweep-chat-2', '{"n":2}', instance => 'sweep-a', lease => '1h');
-- A send whose lease expires at once, and one with a live lease
SELECT action, state FROM durable.outbox_begin('sweep-k1', 'sweep-chat-1', '{"t":"a"}', 'sweep-a', lease => '30ms');
SELECT action, state FROM durable.outbox_begin('sweep-k2', 'sweep-chat-2', '{"t":"b"}', 'sweep-a', lease => '1h');
CREATE TEMP TABLE leases AS SELECT id, token, attempts FROM durable.inbox;
SELECT pg_sleep(0.1);

-- One pass: the expired lease goes back to pending, the expired send becomes unknown
SELECT * FROM durable.sweep();
-- m1 is pending and due now; token, owner and attempts stay; the live lease m2 is untouched
SELECT i.message_id, i.state, i.owner, i.lease_until IS NULL AS lease_cleared,
       CASE WHEN i.state = 'pending' THEN i.not_before <= clock_timestamp() END AS due,
       i.token = l.token AS same_token, i.attempts = l.attempts AS same_attempts, i.error
  FROM durable.inbox i JOIN leases l USING (id) ORDER BY i.message_id;
-- sweep-k1 is unknown (never resent by itself), owner and attempts kept; sweep-k2 untouched
SELECT key, state, owner, attempts, lease_until IS NULL AS lease_cleared
  FROM durable.outbox ORDER BY key;
-- The ambiguous send is counted
SELECT outbox_ambiguous, inbound_dead FROM durable.metrics();
-- The recovered record is claimable again, under a new token
SELECT c.message_id, c.token > l.token AS new_token
  FROM durable.inbox_claim('sweep-b', max => 10) c JOIN leases l USING (id);
-- A second pass finds nothing left to recover
SELECT inbox_expired, outbox_ambiguous FROM durable.sweep();
DROP TABLE leases;

-- 2. An expired lease on the last attempt goes to dead

SET durable.inbox_max_attempts = 1;
SELECT state, token IS NOT NULL AS leased
  FROM durable.inbox_admit('sweep', 'm3', 'sweep-chat-3', '{"n":3}', instance => 'sweep-a', lease => '30ms');
SELECT pg_sleep(0.1);
-- The sweep counts it among the expired leases...
SELECT inbox_expired FROM durable.sweep();
-- ...and it is dead, with the reason, and no lease
SELECT state, attempts, error, lease_until IS NULL AS lease_cleared
  FROM durable.inbox WHERE message_id = 'm3';
-- Counted as a dead inbound record
SELECT inbound_dead FROM durable.metrics();
RESET durable.inbox_max_attempts;

-- 2b. One record whose recovery fails (here, a trigger of yours that raises
-- for it) does not stop the recovery of the others: the journal's batch is
-- rolled back, the records that fail are found by halving it, the others
-- are recovered, and a WARNING says why.  The same holds for each journal, and for
-- the worker's passes.
BEGIN;
CREATE TEMP SEQUENCE audit_refusals;
CREATE FUNCTION pg_temp.audit_inbox() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.message_id = 'r1' AND NEW.state <> OLD.state THEN
        PERFORM nextval('audit_refusals');
        RAISE EXCEPTION 'record r1 is under audit';
    END IF;
    RETURN NEW;
END $$;
CREATE FUNCTION pg_temp.audit_outbox() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.key = 'sweep-r-bad' AND NEW.state <> OLD.state THEN
        RAISE EXCEPTION 'send sweep-r-bad is under audit';
    END IF;
    RETURN NEW;
END $$;
-- (The triggers come after the records: an insert that leases refuses a
-- trigger on UPDATE, as every call of the lease's holder does.)
SELECT count(*) AS leased
  FROM unnest(ARRAY['r1', 'r2', 'r3']) m,
       durable.inbox_admit('sweep', m, 'sweep-r-' || m, instance => 'sweep-r', lease => '20ms') a;
SELECT count(*) AS sending
  FROM unnest(ARRAY['sweep-r-bad', 'sweep-r-ok']) k,
       durable.outbox_begin(k, k, '{}', 'sweep-r', lease => '20ms') b;
CREATE TRIGGER audit_inbox BEFORE UPDATE ON durable.inbox
    FOR EACH ROW EXECUTE FUNCTION pg_temp.audit_inbox();
CREATE TRIGGER audit_outbox BEFORE UPDATE ON durable.outbox
    FOR EACH ROW EXECUTE FUNCTION pg_temp.audit_outbox();
SELECT pg_sleep(0.1);
SELECT inbox_expired, outbox_ambiguous FROM durable.sweep();
SELECT message_id, state FROM durable.inbox WHERE message_id LIKE 'r_' ORDER BY message_id;
SELECT key, state FROM durable.outbox WHERE key LIKE 'sweep-r-%' ORDER BY key;
-- The batch met r1, then the search (r1 alone is the first half of three)
SELECT last_value AS refusals FROM audit_refusals;
-- This process passes over them for a minute: no WARNING, and neither the
-- batch nor a search tries r1 again
SELECT inbox_expired, outbox_ambiguous FROM durable.sweep();
SELECT last_value AS refusals FROM audit_refusals;
-- They are not lost: once the cause is gone, a sweep a minute later, or
-- instance_start() now, recovers them
DROP TRIGGER audit_inbox ON durable.inbox;
DROP TRIGGER audit_outbox ON durable.outbox;
SELECT inbox_recovered, outbox_ambiguous FROM durable.instance_start('sweep-r');
SELECT message_id, state FROM durable.inbox WHERE message_id LIKE 'r_' ORDER BY message_id;
SELECT key, state FROM durable.outbox WHERE key LIKE 'sweep-r-%' ORDER BY key;
ROLLBACK;

-- More failures than a process remembers one by one (1,000 per journal)
-- do not starve the other expired leases: the newest failure past them is
-- remembered as a mark, and the batches go round every lease that ran out
-- no later than it.  Here 2,100 expired leases refuse to move and 10 that
-- ran out later can: the third pass recovers the 10 (without the mark, it
-- would meet 1,000 unremembered failures again and stop there).
BEGIN;
CREATE FUNCTION pg_temp.audit_many() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.source = 'keep' AND NEW.state <> OLD.state THEN
        RAISE EXCEPTION 'record % is under audit', NEW.message_id;
    END IF;
    RETURN NEW;
END $$;
SELECT count(*) AS leased
  FROM generate_series(1, 2110) g,
       durable.inbox_admit(CASE WHEN g <= 2100 THEN 'keep' ELSE 'go' END, 'many-' || g,
                           'sweep-many-' || g, instance => 'sweep-many', lease => '1h') a;
CREATE TRIGGER audit_many BEFORE UPDATE ON durable.inbox
    FOR EACH ROW EXECUTE FUNCTION pg_temp.audit_many();
UPDATE durable.inbox SET lease_until = now() - interval '1 hour' + substr(message_id, 6)::int * interval '1 ms'
 WHERE message_id LIKE 'many-%';
SELECT inbox_expired FROM durable.sweep();
SELECT inbox_expired FROM durable.sweep();
SELECT inbox_expired FROM durable.sweep();
SELECT source, state, count(*) FROM durable.inbox WHERE message_id LIKE 'many-%'
 GROUP BY source, state ORDER BY source, state;
ROLLBACK;

-- 2c. A BEFORE UPDATE trigger of yours that returns NULL keeps a record
-- leased without an error.  The records it kept are remembered and passed
-- over like records whose recovery fails, with a WARNING, or the oldest of
-- them would fill every batch.  Here 1,000 expired leases (a whole batch)
-- are kept, and 5 that ran out later are not: the first pass meets the
-- 1,000 and says so, the second recovers the 5 (before 2026-12-03 every
-- pass met the same 1,000, recovered nothing and said nothing).  The same
-- for a send.  A new session: the mark of the failures above would hide
-- these leases.
\c
BEGIN;
CREATE FUNCTION pg_temp.hold_inbox() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.source = 'hold' AND NEW.state <> OLD.state THEN
        RETURN NULL;
    END IF;
    RETURN NEW;
END $$;
CREATE FUNCTION pg_temp.hold_outbox() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.key = 'sweep-hold' AND NEW.state <> OLD.state THEN
        RETURN NULL;
    END IF;
    RETURN NEW;
END $$;
SELECT count(*) AS leased
  FROM generate_series(1, 1005) g,
       durable.inbox_admit(CASE WHEN g <= 1000 THEN 'hold' ELSE 'go' END, 'held-' || g,
                           'sweep-held-' || g, instance => 'sweep-held', lease => '1h') a;
UPDATE durable.inbox SET lease_until = now() - interval '1 hour' + substr(message_id, 6)::int * interval '1 ms'
 WHERE message_id LIKE 'held-%';
SELECT count(*) AS sending
  FROM unnest(ARRAY['sweep-hold', 'sweep-go']) k,
       durable.outbox_begin(k, k, '{}', 'sweep-held', lease => '20ms') b;
CREATE TRIGGER hold_inbox BEFORE UPDATE ON durable.inbox
    FOR EACH ROW EXECUTE FUNCTION pg_temp.hold_inbox();
CREATE TRIGGER hold_outbox BEFORE UPDATE ON durable.outbox
    FOR EACH ROW EXECUTE FUNCTION pg_temp.hold_outbox();
SELECT pg_sleep(0.1);
\set VERBOSITY terse
SELECT inbox_expired, outbox_ambiguous FROM durable.sweep();
\set VERBOSITY default
SELECT inbox_expired, outbox_ambiguous FROM durable.sweep();
SELECT source, state, count(*) FROM durable.inbox WHERE message_id LIKE 'held-%'
 GROUP BY source, state ORDER BY source, state;
SELECT key, state FROM durable.outbox WHERE key IN ('sweep-hold', 'sweep-go') ORDER BY key;
ROLLBACK;

-- The records that fail are found by halving the batch, not by recovering
-- its records one at a time: every subtransaction that moves a record and
-- commits keeps an xid until the pass ends, and past 64 of them every other
-- session's snapshots overflow into pg_subtrans.  Here one of 256 expired
-- leases refuses to move: the pass recovers the 255 others with a few
-- dozen xids (one at a time took 258: one per record, the batch's, the sweep's).
-- The xids are counted between two committed transactions, so this part
-- commits its records and removes them at the end, and runs in a new
-- session (the records above are remembered by this one).
\c
CREATE FUNCTION pg_temp.audit_half() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.message_id = 'half-100' AND NEW.state <> OLD.state THEN
        RAISE EXCEPTION 'record half-100 is under audit';
    END IF;
    RETURN NEW;
END $$;
SELECT count(*) AS leased
  FROM generate_series(1, 256) g,
       durable.inbox_admit('half', 'half-' || g, 'sweep-half-' || g, instance => 'sweep-half',
                           lease => '1h') a;
UPDATE durable.inbox SET lease_until = now() - interval '1 hour' WHERE message_id LIKE 'half-%';
CREATE TRIGGER audit_half BEFORE UPDATE ON durable.inbox
    FOR EACH ROW EXECUTE FUNCTION pg_temp.audit_half();
SELECT pg_current_xact_id()::text::bigint AS xid_before \gset
SELECT inbox_expired FROM durable.sweep();
SELECT pg_current_xact_id()::text::bigint - :xid_before - 1 AS sweep_xids \gset
SELECT :sweep_xids BETWEEN 2 AND 64 AS few_xids;
SELECT state, count(*) FROM durable.inbox WHERE message_id LIKE 'half-%' GROUP BY state ORDER BY state;
DROP TRIGGER audit_half ON durable.inbox;
-- The purge searches the same way: one of 256 old done records refuses
-- its delete, and the pass deletes the others of the inbox's half of its
-- batch (124 of 125; DURABLE_PURGE_BATCH is 250) with a few dozen xids
SELECT count(durable.inbox_complete(id, token)) AS done
  FROM durable.inbox_claim('sweep-half', max => 300, lease => '1h');
UPDATE durable.inbox SET done_at = now() - interval '300 days' + substr(message_id, 6)::int * interval '1 ms',
                         finished_at = now() - interval '300 days'
 WHERE message_id LIKE 'half-%';
CREATE FUNCTION pg_temp.refuse_half() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.message_id = 'half-100' THEN RAISE EXCEPTION 'record half-100 is under audit'; END IF;
    RETURN OLD;
END $$;
CREATE TRIGGER refuse_half BEFORE DELETE ON durable.inbox
    FOR EACH ROW EXECUTE FUNCTION pg_temp.refuse_half();
SELECT pg_current_xact_id()::text::bigint AS xid_before \gset
SELECT purged FROM durable.sweep();
SELECT pg_current_xact_id()::text::bigint - :xid_before - 1 AS sweep_xids \gset
SELECT :sweep_xids BETWEEN 2 AND 64 AS few_xids;
-- The next pass goes round the record that failed and deletes the rest
SELECT purged FROM durable.sweep();
SELECT message_id, state FROM durable.inbox WHERE message_id LIKE 'half-%';
DROP TRIGGER refuse_half ON durable.inbox;
DELETE FROM durable.inbox WHERE message_id LIKE 'half-%';
-- Records that fail count against the pass's limit: the inbox's half of the
-- batch (125) fails whole here, so the outbox gets the other 125, not 250,
-- and a pass stays within DURABLE_PURGE_BATCH however its deletes end
SELECT count(*) AS done
  FROM generate_series(1, 125) g,
       durable.inbox_admit('limit', 'limit-' || g, 'sweep-limit-' || g, instance => 'sweep-limit') a,
       durable.inbox_complete(a.id, a.token) c;
SELECT count(*) AS sent
  FROM generate_series(1, 300) g,
       durable.outbox_begin('limit-' || g, 'sweep-limit-' || g, '{}', 'sweep-limit') b,
       durable.outbox_sent(b.key, b.token, 'provider-limit-' || g) s;
UPDATE durable.inbox SET done_at = now() - interval '300 days', finished_at = now() - interval '300 days'
 WHERE message_id LIKE 'limit-%';
UPDATE durable.outbox SET sent_at = now() - interval '300 days' WHERE key LIKE 'limit-%';
CREATE FUNCTION pg_temp.refuse_limit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.source = 'limit' THEN RAISE EXCEPTION 'record % is under audit', OLD.message_id; END IF;
    RETURN OLD;
END $$;
CREATE TRIGGER refuse_limit BEFORE DELETE ON durable.inbox
    FOR EACH ROW EXECUTE FUNCTION pg_temp.refuse_limit();
\set VERBOSITY terse
SELECT purged FROM durable.sweep();
\set VERBOSITY default
SELECT (SELECT count(*) FROM durable.inbox WHERE source = 'limit') AS inbox_left,
       (SELECT count(*) FROM durable.outbox WHERE key LIKE 'limit-%') AS outbox_left;
DROP TRIGGER refuse_limit ON durable.inbox;
DELETE FROM durable.inbox WHERE source = 'limit';
DELETE FROM durable.outbox WHERE key LIKE 'limit-%';
-- (a new session: this one remembers the 125 failures)
\c

-- A failure met in work that rolls back is forgotten with it.  Here its only
-- cause is a trigger created in the transaction rolled back, and the same
-- session's next sweep deletes the record (until 2026-12-07 the session
-- passed it over for 10 minutes, and an expired lease for one)
-- (three records of source 'rolled', done 300 days ago)
CREATE FUNCTION pg_temp.done_long_ago(prefix text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    done bigint;
BEGIN
    SELECT count(*) INTO done
      FROM generate_series(1, 3) g,
           durable.inbox_admit('rolled', prefix || g, 'sweep-rolled-' || g, instance => 'sweep-rolled') a,
           durable.inbox_complete(a.id, a.token) c;
    UPDATE durable.inbox SET done_at = now() - interval '300 days', finished_at = now() - interval '300 days'
     WHERE source = 'rolled';
    RETURN done;
END $$;
SELECT pg_temp.done_long_ago('rolled-') AS done;
CREATE FUNCTION pg_temp.refuse_rolled() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.message_id LIKE 'rolled-%2' THEN RAISE EXCEPTION 'record % is under audit', OLD.message_id; END IF;
    RETURN COALESCE(NEW, OLD);
END $$;
BEGIN;
CREATE TRIGGER refuse_rolled BEFORE DELETE ON durable.inbox
    FOR EACH ROW EXECUTE FUNCTION pg_temp.refuse_rolled();
SELECT purged FROM durable.sweep();
ROLLBACK;
SELECT purged FROM durable.sweep();
SELECT count(*) AS rolled_left FROM durable.inbox WHERE source = 'rolled';
-- The same in a savepoint rolled back, its transaction going on
SELECT pg_temp.done_long_ago('rolled-sp-') AS done;
BEGIN;
SAVEPOINT audit;
CREATE TRIGGER refuse_rolled BEFORE DELETE ON durable.inbox
    FOR EACH ROW EXECUTE FUNCTION pg_temp.refuse_rolled();
SELECT purged FROM durable.sweep();
ROLLBACK TO SAVEPOINT audit;
SELECT purged FROM durable.sweep();
COMMIT;
SELECT count(*) AS rolled_left FROM durable.inbox WHERE source = 'rolled';
-- ... and in a prepared transaction, which may yet roll back: what it met is
-- forgotten when it is prepared (here the cause is a row it wrote; until the
-- review of 2026-12-07, ROLLBACK PREPARED left the record passed over)
CREATE TABLE public.sweep_holds (message_id text PRIMARY KEY);
CREATE FUNCTION public.sweep_refuse_held() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT FROM public.sweep_holds h WHERE h.message_id = OLD.message_id) THEN
        RAISE EXCEPTION 'record % is on hold', OLD.message_id;
    END IF;
    RETURN OLD;
END $$;
CREATE TRIGGER sweep_refuse_held BEFORE DELETE ON durable.inbox
    FOR EACH ROW EXECUTE FUNCTION public.sweep_refuse_held();
SELECT pg_temp.done_long_ago('rolled-pr-') AS done;
BEGIN;
INSERT INTO public.sweep_holds VALUES ('rolled-pr-2');
SELECT purged FROM durable.sweep();
PREPARE TRANSACTION 'durable_sweep_rolled';
ROLLBACK PREPARED 'durable_sweep_rolled';
SELECT purged FROM durable.sweep();
SELECT count(*) AS rolled_left FROM durable.inbox WHERE source = 'rolled';
DROP TRIGGER sweep_refuse_held ON durable.inbox;
DROP FUNCTION public.sweep_refuse_held();
DROP TABLE public.sweep_holds;
-- ... and lease recovery: the expired lease the rolled-back trigger refused
-- to recover is recovered by the same session's next sweep
SELECT count(*) AS leased
  FROM generate_series(1, 3) g,
       durable.inbox_admit('rolled', 'rolled-lease-' || g, 'sweep-rolled-' || g, instance => 'sweep-rolled',
                           lease => '20ms') a;
SELECT pg_sleep(0.1);
BEGIN;
CREATE TRIGGER refuse_rolled BEFORE UPDATE ON durable.inbox
    FOR EACH ROW EXECUTE FUNCTION pg_temp.refuse_rolled();
SELECT inbox_expired FROM durable.sweep();
ROLLBACK;
SELECT inbox_expired FROM durable.sweep();
SELECT message_id, state FROM durable.inbox WHERE source = 'rolled' ORDER BY message_id;
DELETE FROM durable.inbox WHERE source = 'rolled';

-- Errors that are not about a record are not passed over record by record:
-- in a read-only transaction the sweep fails as a whole, as before, and
-- nothing is remembered (a sweep right after recovers the lease)
SELECT state FROM durable.inbox_admit('sweep', 'ro1', 'sweep-ro', instance => 'sweep-ro', lease => '20ms');
SELECT pg_sleep(0.1);
BEGIN READ ONLY;
\set VERBOSITY terse
SELECT inbox_expired FROM durable.sweep();
\set VERBOSITY default
ROLLBACK;
SELECT inbox_expired FROM durable.sweep();
-- A cancel (here a statement_timeout that fires in a slow trigger of yours)
-- ends the sweep, and the session goes on: nothing of the sweep's own
-- subtransactions is left open
CREATE FUNCTION pg_temp.slow() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM pg_sleep(5); RETURN NEW; END $$;
SELECT state FROM durable.inbox_admit('sweep', 'slow1', 'sweep-slow', instance => 'sweep-slow', lease => '20ms');
CREATE TRIGGER slow BEFORE UPDATE ON durable.inbox FOR EACH ROW EXECUTE FUNCTION pg_temp.slow();
SELECT pg_sleep(0.1);
SET statement_timeout = '300ms';
\set VERBOSITY terse
SELECT inbox_expired FROM durable.sweep();
\set VERBOSITY default
RESET statement_timeout;
SELECT 1 AS still_usable;
DROP TRIGGER slow ON durable.inbox;
SELECT inbox_expired FROM durable.sweep();
-- ...also when the trigger turns the cancel into an error of its own (as
-- PL/Python does): the statement_timeout fired, so the error is the call's
CREATE FUNCTION pg_temp.slow_catching() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    BEGIN
        PERFORM pg_sleep(5);
    EXCEPTION WHEN query_canceled THEN
        RAISE EXCEPTION 'audit gave up';
    END;
    RETURN NEW;
END $$;
SELECT state FROM durable.inbox_admit('sweep', 'slow2', 'sweep-slow-2', instance => 'sweep-slow', lease => '20ms');
CREATE TRIGGER slow BEFORE UPDATE ON durable.inbox FOR EACH ROW EXECUTE FUNCTION pg_temp.slow_catching();
SELECT pg_sleep(0.1);
SET statement_timeout = '2s';
\set VERBOSITY terse
SELECT inbox_expired FROM durable.sweep();
\set VERBOSITY default
RESET statement_timeout;
DROP TRIGGER slow ON durable.inbox;
SELECT inbox_expired FROM durable.sweep();
DELETE FROM durable.inbox WHERE message_id IN ('ro1', 'slow1', 'slow2');

-- 3. Deferred and retried work coming due (outbox_due; a pass that counts
-- some sends NOTIFY durable_ready, spec sweep_window shows it)

-- sweep()'s window is kept in the database (durable.sweep_windows), so
-- that a scheduler connecting anew for each call (cron with psql, pg_cron)
-- goes on where the previous call ended.  Runs two minutes apart: a send
-- that came due 90 s ago, after the previous run's window, is announced by
-- a new connection's first pass (a window kept per process looked 30 s back)
SELECT created FROM durable.outbox_enqueue('sweep-k7', 'sweep-chat-7', '{}',
                                           not_before => clock_timestamp() + interval '1 h');
UPDATE durable.outbox SET created_at = now() - interval '3 min', not_before = now() - interval '90 s'
 WHERE key = 'sweep-k7';
UPDATE durable.sweep_windows SET next_from = now() - interval '2 min';
\c
SELECT outbox_due FROM durable.sweep();
-- Runs seconds apart: the next connection's pass does not announce it again
-- (a window kept per process announced it at every run within 30 s)
UPDATE durable.outbox SET not_before = now() - interval '10 s' WHERE key = 'sweep-k7';
UPDATE durable.sweep_windows SET next_from = now() - interval '20 s';
\c
SELECT outbox_due FROM durable.sweep();
\c
SELECT outbox_due FROM durable.sweep();
-- A pass that rolls back takes its NOTIFY and its window with it: the next
-- pass announces that window again
UPDATE durable.sweep_windows SET next_from = now() - interval '20 s';
BEGIN;
SELECT outbox_due FROM durable.sweep();
ROLLBACK;
SELECT outbox_due FROM durable.sweep();
-- Each row is where that journal's next window starts
SELECT kind, next_from <= now() AS started FROM durable.sweep_windows ORDER BY kind;
-- Without its rows (deleted by hand; the unlogged table is emptied by a
-- crash) a pass uses its process's window -- a new connection's first pass
-- looks 30 s back -- and writes the rows again, from which the next goes on
DELETE FROM durable.sweep_windows;
\c
SELECT outbox_due FROM durable.sweep();
SELECT kind, next_from <= now() AS started FROM durable.sweep_windows ORDER BY kind;
\c
SELECT outbox_due FROM durable.sweep();
-- ... and when that pass rolls back, the rows it wrote go with it and its
-- process's window stays where it was: the next pass announces that window
-- again (until 2026-12-07 the process's window moved on with the rows, and
-- the rolled-back window was never announced; found by review)
UPDATE durable.outbox SET not_before = now() - interval '10 s' WHERE key = 'sweep-k7';
DELETE FROM durable.sweep_windows;
\c
BEGIN;
SELECT outbox_due FROM durable.sweep();
ROLLBACK;
SELECT count(*) AS rows_after_rollback FROM durable.sweep_windows;
SELECT outbox_due FROM durable.sweep();
DELETE FROM durable.outbox WHERE key = 'sweep-k7';

-- Deferred and retried work in one connection

-- A send deferred by 50 ms, and one due at once (not deferred, so not announced)
SELECT created, state FROM durable.outbox_enqueue('sweep-k3', 'sweep-chat-3', '{}',
                                                  not_before => clock_timestamp() + interval '50 ms');
SELECT created, state FROM durable.outbox_enqueue('sweep-k4', 'sweep-chat-4', '{}');
SELECT pg_sleep(0.1);
-- The deferred send came due since the last pass
SELECT outbox_due FROM durable.sweep();
-- The next pass does not count it again
SELECT outbox_due FROM durable.sweep();
-- A failed send whose retry comes due 200 ms later
SELECT f.state, f.not_before >= statement_timestamp() + interval '200 ms' AS later
  FROM durable.outbox o, durable.outbox_failed(o.key, o.token, 'provider 503', retry_in => '200 ms') f
 WHERE o.key = 'sweep-k2';
SELECT pg_sleep(0.3);
-- The retried send is counted when it comes due
SELECT outbox_due FROM durable.sweep();

-- 4. Retention

-- Finished records: three done inbound records and two sent sends
SELECT count(*) AS completed
  FROM (VALUES ('m4'), ('m5'), ('m6')) v(m),
       durable.inbox_admit('sweep', v.m, 'sweep-chat-' || v.m, '{}', instance => 'sweep-c') a,
       durable.inbox_complete(a.id, a.token) c;
SELECT count(*) AS sent
  FROM (VALUES ('sweep-k5'), ('sweep-k6')) v(k),
       durable.outbox_begin(v.k, 'sweep-chat-' || v.k, '{}', 'sweep-c') b,
       durable.outbox_sent(b.key, b.token, 'provider-' || v.k) s;
-- Age m4, m5 and sweep-k5 beyond the retention (7 days); age the dead m3 too
UPDATE durable.inbox SET done_at = done_at - interval '8 days' WHERE message_id IN ('m4', 'm5');
UPDATE durable.inbox SET created_at = created_at - interval '30 days' WHERE message_id = 'm3';
UPDATE durable.outbox SET sent_at = sent_at - interval '8 days' WHERE key = 'sweep-k5';
-- purge() with the default retention deletes the three aged records
SELECT durable.purge();
-- Fresh finished records, dead records and unfinished ones stay
SELECT message_id, state FROM durable.inbox ORDER BY message_id;
SELECT key, state FROM durable.outbox ORDER BY key;
-- A batch bounds one call; called again until it returns 0
SELECT durable.purge(older_than => '0', batch => 1);
SELECT durable.purge(older_than => '0', batch => 1);
SELECT durable.purge(older_than => '0', batch => 1);
-- NULL arguments mean the defaults (durable.retention, 10000): nothing is old enough
SELECT durable.purge(NULL, NULL);
-- The sweep's own retention step deletes what is older than durable.retention
SELECT count(*) AS done
  FROM durable.inbox_admit('sweep', 'm7', 'sweep-chat-7', '{}', instance => 'sweep-c') a,
       durable.inbox_complete(a.id, a.token) c;
UPDATE durable.inbox SET done_at = done_at - interval '8 days' WHERE message_id = 'm7';
SELECT purged FROM durable.sweep();
SELECT count(*) AS m7_left FROM durable.inbox WHERE message_id = 'm7';

-- The purge deletes directly, without triggers, so a journal with triggers on
-- DELETE is purged by the statement instead: a record that a foreign key
-- references is kept, without an error (4b below has more)
SELECT count(*) AS done
  FROM durable.inbox_admit('sweep', 'm8', 'sweep-chat-8', '{}', instance => 'sweep-c') a,
       durable.inbox_complete(a.id, a.token) c;
UPDATE durable.inbox SET done_at = done_at - interval '8 days' WHERE message_id = 'm8';
CREATE TABLE public.sweep_replies (inbox_id bigint REFERENCES durable.inbox (id));
INSERT INTO public.sweep_replies SELECT id FROM durable.inbox WHERE message_id = 'm8';
SELECT durable.purge();
SELECT count(*) AS m8_kept FROM durable.inbox WHERE message_id = 'm8';
DROP TABLE public.sweep_replies;
-- An index on the finish time that is not valid lacks entries: the statement
-- purges instead of the direct scan, which would miss records
BEGIN;
UPDATE pg_catalog.pg_index SET indisvalid = false
 WHERE indexrelid = 'durable.inbox_done_at_idx'::regclass;
SELECT pg_catalog.pg_stat_get_xact_numscans('durable.inbox_done_at_idx'::regclass) AS scans_before \gset
SELECT durable.purge();
SELECT pg_catalog.pg_stat_get_xact_numscans('durable.inbox_done_at_idx'::regclass) - :scans_before
       AS done_at_idx_scans;
ROLLBACK;
SELECT durable.purge();
SELECT count(*) AS m8_left FROM durable.inbox WHERE message_id = 'm8';
-- A text key of yours that references the outbox compares under your
-- column's collation (here "POSIX"; the outbox's keys are "C", see
-- durable--0.5--0.6.sql): the purge keeps the send it references and purges
-- the other (sent at '-infinity' by hand, which is older than any cutoff),
-- where comparing under two collations would fail
BEGIN;
CREATE TABLE public.delivered (send_key text COLLATE "POSIX" REFERENCES durable.outbox (key));
SELECT count(*) AS sent
  FROM unnest(ARRAY['fkk1', 'fkk2']) k,
       durable.outbox_begin(k, 'sweep-fkk', '{}', instance => 'sweep-o') b,
       durable.outbox_sent(b.key, b.token, 'p-' || k) s;
UPDATE durable.outbox SET sent_at = sent_at - interval '400 days' WHERE key = 'fkk1';
UPDATE durable.outbox SET sent_at = '-infinity' WHERE key = 'fkk2';
INSERT INTO public.delivered VALUES ('fkk1');
SELECT durable.purge();
SELECT key, state FROM durable.outbox WHERE key LIKE 'fkk%' ORDER BY key;
ROLLBACK;
-- A key column of an extension's type that an implicit binary-coercible
-- cast leads to the journal's type (citext to text) is compared as
-- PostgreSQL's own check compares it, relabelled to text: the purge keeps
-- the send it references without failing on it (the key's check would raise
-- 23503 and fail purge() by hand), and purges the other.  Creating such a
-- cast takes a superuser, and citext belongs to one, so no function of
-- another role's runs.
BEGIN;
CREATE EXTENSION citext SCHEMA public;
CREATE TABLE public.delivered (send_key public.citext REFERENCES durable.outbox (key));
SELECT count(*) AS sent
  FROM unnest(ARRAY['fkc1', 'fkc2']) k,
       durable.outbox_begin(k, 'sweep-fkc', '{}', instance => 'sweep-o') b,
       durable.outbox_sent(b.key, b.token, 'p-' || k) s;
UPDATE durable.outbox SET sent_at = sent_at - interval '400 days' WHERE key LIKE 'fkc%';
INSERT INTO public.delivered VALUES ('fkc1');
SELECT durable.purge();
SELECT key, state FROM durable.outbox WHERE key LIKE 'fkc%' ORDER BY key;
-- ...unless the type belongs to a role that is neither a superuser nor
-- durable's owner: the guard is parsed again at every batch, and that role
-- could drop the cast and create one calling a function of its own.  Such a
-- key gets no guard: its record fails the delete (here purge() by hand fails)
CREATE ROLE regress_durable_type_owner;
ALTER TYPE public.citext OWNER TO regress_durable_type_owner;
UPDATE durable.outbox SET sent_at = sent_at - interval '400 days' WHERE key = 'fkc1';
\set VERBOSITY terse
SELECT durable.purge();
\set VERBOSITY default
ROLLBACK;

-- 4b. Your tables may reference the journals.  A foreign key with ON DELETE
-- NO ACTION (the default) keeps the records it references: the purge skips
-- them and deletes the rest.  One with ON DELETE CASCADE lets the purge go
-- through, and deletes its rows with the record.  (A new session: no pass
-- of this one has a place to resume from, past these old records.)
\c
BEGIN;
TRUNCATE durable.inbox, durable.outbox;
CREATE TABLE public.handled (inbox_id bigint REFERENCES durable.inbox (id));
CREATE TABLE public.notes (inbox_id bigint REFERENCES durable.inbox (id) ON DELETE CASCADE);
SELECT durable.inbox_complete(a.id, a.token)
  FROM unnest(ARRAY['fk1', 'fk2', 'fk3']) m,
       durable.inbox_admit('sweep', m, 'sweep-fk-' || m, instance => 'sweep-a') a;
UPDATE durable.inbox SET done_at = now() - interval '400 days', finished_at = now() - interval '400 days';
INSERT INTO public.handled SELECT id FROM durable.inbox WHERE message_id = 'fk1';
INSERT INTO public.notes SELECT id FROM durable.inbox WHERE message_id = 'fk2';
-- and a lease that expired, for the recovery that runs in the same pass
SELECT state FROM durable.inbox_admit('sweep', 'fk4', 'sweep-fk-4', instance => 'sweep-a', lease => '20ms');
SELECT pg_sleep(0.1);
SELECT inbox_expired, purged FROM durable.sweep();
SELECT message_id, state FROM durable.inbox ORDER BY id;
SELECT count(*) AS notes_left FROM public.notes;
SELECT durable.purge(older_than => '1 day');
-- A delete that fails all the same (here, a trigger on DELETE that raises
-- for the oldest record) does not hold back the rest: the batch is rolled
-- back, the records that fail are found by halving it, the others are
-- deleted, a WARNING says why, and the pass's lease recovery still happens.  The
-- worker's passes do the same.
DELETE FROM public.handled;
SELECT durable.inbox_complete(a.id, a.token)
  FROM unnest(ARRAY['fk6', 'fk7']) m,
       durable.inbox_admit('sweep', m, 'sweep-fk-' || m, instance => 'sweep-a') a;
UPDATE durable.inbox SET done_at = now() - interval '300 days', finished_at = now() - interval '300 days'
 WHERE message_id IN ('fk6', 'fk7');
CREATE FUNCTION pg_temp.refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.message_id = 'fk1' THEN RAISE EXCEPTION 'record fk1 is under audit'; END IF;
    RETURN OLD;
END $$;
CREATE TRIGGER refuse_deletes BEFORE DELETE ON durable.inbox FOR EACH ROW EXECUTE FUNCTION pg_temp.refuse();
SELECT state FROM durable.inbox_admit('sweep', 'fk5', 'sweep-fk-5', instance => 'sweep-a', lease => '20ms');
SELECT pg_sleep(0.1);
SELECT inbox_expired, purged FROM durable.sweep();
SELECT message_id, state FROM durable.inbox ORDER BY id;
-- This process remembers the record it could not delete, and its next
-- passes go round it, for 10 minutes: no WARNING at every pass, no batch
-- searched again; other old records are purged
SELECT durable.inbox_complete(a.id, a.token)
  FROM durable.inbox_admit('sweep', 'fk8', 'sweep-fk-8', instance => 'sweep-a') a;
UPDATE durable.inbox SET done_at = now() - interval '300 days', finished_at = now() - interval '300 days'
 WHERE message_id = 'fk8';
SELECT inbox_expired, purged FROM durable.sweep();
SELECT message_id, state FROM durable.inbox ORDER BY id;
-- Once the cause is gone, purge() by hand deletes the record at once: it
-- does not go round what the passes remember
CREATE OR REPLACE FUNCTION pg_temp.refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RETURN OLD; END $$;
SELECT durable.purge(older_than => '1 day');
SELECT message_id, state FROM durable.inbox ORDER BY id;
-- A cancel is not a failure to skip: a statement_timeout that fires inside
-- the purge (here, a slow trigger deleting fk9) ends the sweep
SELECT durable.inbox_complete(a.id, a.token)
  FROM durable.inbox_admit('sweep', 'fk9', 'sweep-fk-9', instance => 'sweep-a') a;
UPDATE durable.inbox SET done_at = now() - interval '300 days', finished_at = now() - interval '300 days'
 WHERE message_id = 'fk9';
CREATE OR REPLACE FUNCTION pg_temp.refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM pg_sleep(5); RETURN OLD; END $$;
SET LOCAL statement_timeout = '300ms';
\set VERBOSITY terse
SELECT inbox_expired, purged FROM durable.sweep();
\set VERBOSITY default
ROLLBACK;

-- 4c. The other delete actions (found untested in review, 2026-12-05): ON
-- DELETE RESTRICT keeps what it references, as NO ACTION does; ON DELETE SET
-- NULL lets the purge go through and empties its column; on the outbox's key
-- too.
\c
BEGIN;
TRUNCATE durable.inbox, durable.outbox;
CREATE TABLE public.kept (inbox_id bigint REFERENCES durable.inbox (id) ON DELETE RESTRICT);
CREATE TABLE public.loose (inbox_id bigint REFERENCES durable.inbox (id) ON DELETE SET NULL, note text);
CREATE TABLE public.receipts (send_key text REFERENCES durable.outbox (key) ON DELETE SET NULL, note text);
CREATE TABLE public.audits (send_key text REFERENCES durable.outbox (key) ON DELETE RESTRICT);
SELECT durable.inbox_complete(a.id, a.token)
  FROM unnest(ARRAY['fk-r', 'fk-n', 'fk-x']) m,
       durable.inbox_admit('sweep', m, 'sweep-' || m, instance => 'sweep-a') a;
SELECT durable.outbox_sent(b.key, b.token, 'p-' || k)
  FROM unnest(ARRAY['send-r', 'send-n', 'send-x']) k,
       durable.outbox_begin(k, 'sweep-' || k, '{}', 'sweep-a') b;
UPDATE durable.inbox SET done_at = now() - interval '400 days', finished_at = now() - interval '400 days';
UPDATE durable.outbox SET sent_at = now() - interval '400 days';
INSERT INTO public.kept SELECT id FROM durable.inbox WHERE message_id = 'fk-r';
INSERT INTO public.loose SELECT id, 'fk-n' FROM durable.inbox WHERE message_id = 'fk-n';
INSERT INTO public.audits VALUES ('send-r');
INSERT INTO public.receipts VALUES ('send-n', 'send-n');
SELECT durable.purge(older_than => '1 day');
SELECT message_id, state FROM durable.inbox ORDER BY id;
SELECT key, state FROM durable.outbox ORDER BY id;
SELECT inbox_id IS NULL AS emptied, note FROM public.loose;
SELECT send_key IS NULL AS emptied, note FROM public.receipts;
ROLLBACK;

-- More failures than the passes remember one by one (1,000 per journal)
-- do not stall retention: the newest failure past them is remembered as a
-- mark, the passes go round everything finished no later than it, and the
-- newer records are purged.  Here 1,010 old records refuse to go, 10 newer
-- ones can; each pass tries 125 of the inbox's (half its 250 go to the
-- inbox first).  A failing inbox batch does not hold back the outbox's: its
-- old sent record goes in the first pass.
BEGIN;
SELECT count(durable.inbox_complete(a.id, a.token)) AS finished
  FROM generate_series(1, 1020) g,
       durable.inbox_admit(CASE WHEN g <= 1010 THEN 'keep' ELSE 'gone' END, 'many-' || g,
                           'sweep-many-' || g, instance => 'sweep-a') a;
UPDATE durable.inbox SET done_at = now() - interval '300 days' - (1020 - substr(message_id, 6)::int) * interval '1 s',
                         finished_at = now() - interval '300 days'
 WHERE message_id LIKE 'many-%';
SELECT action FROM durable.outbox_begin('sweep-many-send', 'sweep-many', '{}', 'sweep-a');
SELECT durable.outbox_sent('sweep-many-send', token, 'p-1') FROM durable.outbox WHERE key = 'sweep-many-send';
UPDATE durable.outbox SET sent_at = now() - interval '300 days' WHERE key = 'sweep-many-send';
CREATE FUNCTION pg_temp.refuse_kept() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.source = 'keep' THEN RAISE EXCEPTION 'record % is under audit', OLD.message_id; END IF;
    RETURN OLD;
END $$;
CREATE TRIGGER refuse_kept BEFORE DELETE ON durable.inbox FOR EACH ROW EXECUTE FUNCTION pg_temp.refuse_kept();
SET LOCAL client_min_messages = error;
SELECT purged FROM durable.sweep();
SELECT count(*) AS sent_left FROM durable.outbox WHERE key = 'sweep-many-send';
-- seven more passes meet the rest of the first 1,000 failures
SELECT purged FROM durable.sweep();
SELECT purged FROM durable.sweep();
SELECT purged FROM durable.sweep();
SELECT purged FROM durable.sweep();
SELECT purged FROM durable.sweep();
SELECT purged FROM durable.sweep();
SELECT purged FROM durable.sweep();
-- the ninth meets the last 10 (the newest becomes the mark) and purges the
-- 10 newer records
SELECT purged FROM durable.sweep();
SELECT source, count(*) AS left FROM durable.inbox WHERE message_id LIKE 'many-%' GROUP BY source ORDER BY source;
ROLLBACK;

-- n done records of source 'walk' that finished 7 days and `hours` hours
-- ago, 1 ms apart, for the tests of the purge's walks below
CREATE FUNCTION public.walk_records(n int, hours int DEFAULT 1) RETURNS bigint LANGUAGE sql AS $$
  SELECT count(durable.inbox_complete(a.id, a.token))
    FROM generate_series(1, n) g,
         durable.inbox_admit('walk', 'walk-' || g, 'sweep-walk-' || g, instance => 'sweep-a') a;
  UPDATE durable.inbox
     SET done_at = now() - interval '7 days' - hours * interval '1 hour'
                   + substr(message_id, 6)::int * interval '1 ms'
   WHERE source = 'walk';
  SELECT count(*) FROM durable.inbox WHERE source = 'walk';
$$;

-- A pass's purge resumes where its previous batch ended.  Behind a long
-- transaction (a pg_dump, say; here this one) vacuum cannot remove the index
-- entries of purged records, and a walk from the oldest would cross all of
-- them again at every pass.  Four passes of 250 over 1,000 old records each
-- read about 250 entries of the index, not 250, 500, 750 and 1,000.  (What
-- resumed walks pass by is found by a walk from the oldest, once a minute.
-- A new session: this one's passes remember the records that failed above,
-- and purge by statement while they do.)
\c
BEGIN;
SELECT public.walk_records(1000) AS finished;
CREATE TEMP TABLE walks (pass int, purged bigint, entries_read bigint);
DO $$
DECLARE
    before bigint;
    n bigint;
BEGIN
    FOR pass IN 1..4 LOOP
        before := pg_stat_get_xact_tuples_returned('durable.inbox_done_at_idx'::regclass);
        SELECT purged INTO n FROM durable.sweep();
        INSERT INTO walks
        VALUES (pass, n, pg_stat_get_xact_tuples_returned('durable.inbox_done_at_idx'::regclass) - before);
    END LOOP;
END $$;
-- (the first walks from the oldest, across what this file left in the index)
SELECT pass, purged,
       CASE WHEN pass = 1 THEN 'from the oldest'
            WHEN entries_read BETWEEN 250 AND 260 THEN 'about a batch'
            ELSE entries_read || ' entries' END AS walk
  FROM walks ORDER BY pass;
ROLLBACK;

-- The same with a foreign key to the inbox, which makes the passes purge by
-- statement: they resume too, so that the records the key keeps (here the
-- 500 oldest) are walked past by a walk from the oldest once a minute, not
-- by every pass (before 2026-12-04 every pass walked from the oldest, and
-- each kept record cost every pass, for good).  The second pass shows it:
-- ten of the kept records let go after the first are left for the next
-- walk from the oldest, while the pass deletes the next 250 after the first
-- pass's.
\c
BEGIN;
SELECT public.walk_records(1500) AS finished;
CREATE TABLE walk_keeps (inbox_id bigint REFERENCES durable.inbox (id));
INSERT INTO walk_keeps
SELECT id FROM durable.inbox WHERE source = 'walk' AND substr(message_id, 6)::int <= 500;
SELECT purged FROM durable.sweep();
DELETE FROM walk_keeps k USING durable.inbox i
 WHERE i.id = k.inbox_id AND i.source = 'walk'
   AND i.message_id = ANY (ARRAY(SELECT 'walk-' || g FROM generate_series(1, 10) g));
SELECT purged FROM durable.sweep();
SELECT count(*) FILTER (WHERE n <= 10) AS let_go_left,
       count(*) FILTER (WHERE n BETWEEN 501 AND 1000) AS purged_range_left,
       count(*) FILTER (WHERE n > 1000) AS newer_left
  FROM (SELECT substr(message_id, 6)::int AS n FROM durable.inbox WHERE source = 'walk') w;
ROLLBACK;

-- A resume point counts only once the deletes up to it committed: after a
-- pass that rolled back, the next pass walks from the oldest again, and
-- the oldest records go
SELECT public.walk_records(300) AS finished;
BEGIN;
SELECT purged FROM durable.sweep();
ROLLBACK;
SELECT purged FROM durable.sweep();
SELECT count(*) FILTER (WHERE message_id = 'walk-1') AS oldest_left, count(*) AS left
  FROM durable.inbox WHERE source = 'walk';
DELETE FROM durable.inbox WHERE source = 'walk';

-- purge() by hand resumes too, where the session's previous call ended: a
-- loop that calls it until it returns 0 reads about a batch of index entries
-- per call behind a long transaction, not everything the calls before it
-- deleted (before 2026-12-04: 250, 500, 750, ...).  A call that reaches the
-- cutoff from where it resumed walks from the oldest for the rest of its
-- batch, so that 0 still means nothing is left: here a record finished
-- earlier than the resume point (a completion that committed late, a
-- finish time edited by hand) is purged by the fourth call, which deletes
-- 249 records from where it resumed; without that walk, it would be left.  (Two hours
-- before the records of the tests above, whose index entries, rolled back,
-- are still there: entries that lay among these would be read too.)
BEGIN;
SELECT public.walk_records(1000, 3) AS finished;
CREATE TEMP TABLE calls (n int, purged bigint, entries_read bigint);
DO $$
DECLARE
    before bigint;
    deleted bigint;
BEGIN
    FOR i IN 1..5 LOOP
        IF i = 3 THEN
            -- (among the records the first two calls deleted)
            UPDATE durable.inbox SET done_at = done_at - interval '400.5 ms'
             WHERE source = 'walk' AND message_id = 'walk-900';
        END IF;
        before := pg_stat_get_xact_tuples_returned('durable.inbox_done_at_idx'::regclass);
        deleted := durable.purge(batch => 250);
        INSERT INTO calls
        VALUES (i, deleted, pg_stat_get_xact_tuples_returned('durable.inbox_done_at_idx'::regclass) - before);
    END LOOP;
END $$;
SELECT n AS call, purged,
       CASE WHEN n = 1 THEN 'from the oldest'
            WHEN entries_read BETWEEN 250 AND 260 THEN 'about a batch'
            WHEN entries_read >= 700 THEN 'to the cutoff, then from the oldest'
            ELSE entries_read || ' entries' END AS walk
  FROM calls ORDER BY n;
SELECT count(*) AS left FROM durable.inbox WHERE source = 'walk';
ROLLBACK;
DROP FUNCTION public.walk_records(int, int);

-- 4d. A BEFORE DELETE trigger that returns NULL keeps a record without an
-- error (a "legal hold").  A pass remembers the records kept, goes round them
-- for 10 minutes and says how many with a WARNING, as for records whose
-- delete fails: else the oldest kept ones would fill every batch and, once
-- there were a batch's worth (125 of the inbox's), stop its retention for
-- good.  Here 300 old records are held and 5 newer ones are not: the first
-- pass meets 248 held ones (and the outbox's one held, one purged), the
-- second the last 52 and purges the 5, the third has nothing to do and
-- says nothing.  (A new session: nothing
-- remembered from above.)
\c
BEGIN;
SELECT count(durable.inbox_complete(a.id, a.token)) AS finished
  FROM generate_series(1, 305) g,
       durable.inbox_admit(CASE WHEN g <= 300 THEN 'hold' ELSE 'free' END, 'held-' || g,
                           'sweep-held-' || g, instance => 'sweep-a') a;
UPDATE durable.inbox SET done_at = now() - interval '300 days' + substr(message_id, 6)::int * interval '1 s',
                         finished_at = now() - interval '300 days'
 WHERE source IN ('hold', 'free');
CREATE FUNCTION pg_temp.hold() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.source = 'hold' THEN RETURN NULL; END IF;
    RETURN OLD;
END $$;
CREATE TRIGGER legal_hold BEFORE DELETE ON durable.inbox FOR EACH ROW EXECUTE FUNCTION pg_temp.hold();
-- (and on the outbox, of two old sent sends, one held)
SELECT count(durable.outbox_sent(b.key, b.token, 'p-' || g))
  FROM generate_series(1, 2) g,
       durable.outbox_begin('held-send-' || g, 'sweep-held-send', '{}', 'sweep-a') b;
UPDATE durable.outbox SET sent_at = now() - interval '300 days' WHERE key LIKE 'held-send-%';
CREATE FUNCTION pg_temp.hold_send() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.key = 'held-send-1' THEN RETURN NULL; END IF;
    RETURN OLD;
END $$;
CREATE TRIGGER legal_hold BEFORE DELETE ON durable.outbox FOR EACH ROW EXECUTE FUNCTION pg_temp.hold_send();
SELECT purged FROM durable.sweep();
SELECT purged FROM durable.sweep();
SELECT purged FROM durable.sweep();
SELECT source, count(*) AS left FROM durable.inbox WHERE source IN ('hold', 'free') GROUP BY source ORDER BY source;
SELECT key FROM durable.outbox WHERE key LIKE 'held-send-%';
ROLLBACK;
-- A batch that fails (one record's trigger raises) is deleted by halves: there too the
-- records kept are told from the one that failed, and the rest go
BEGIN;
SELECT count(durable.inbox_complete(a.id, a.token)) AS finished
  FROM unnest(ARRAY['hold', 'raise', 'free']) AS g(source),
       durable.inbox_admit(g.source, 'mixed-' || g.source, 'sweep-mixed-' || g.source,
                           instance => 'sweep-a') a;
UPDATE durable.inbox SET done_at = now() - interval '300 days', finished_at = now() - interval '300 days'
 WHERE message_id LIKE 'mixed-%';
CREATE FUNCTION pg_temp.hold_or_raise() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.source = 'hold' THEN RETURN NULL; END IF;
    IF OLD.source = 'raise' THEN RAISE EXCEPTION 'record % is under audit', OLD.message_id; END IF;
    RETURN OLD;
END $$;
CREATE TRIGGER legal_hold BEFORE DELETE ON durable.inbox FOR EACH ROW EXECUTE FUNCTION pg_temp.hold_or_raise();
SELECT purged FROM durable.sweep();
SELECT purged FROM durable.sweep();
SELECT source FROM durable.inbox WHERE message_id LIKE 'mixed-%' ORDER BY source;
ROLLBACK;

-- A trigger on a journal that calls purge() or sweep() while the journal is purged is
-- refused (55006): the inner run would leave the outer one with its freed state (until
-- 2026-12-07, found by review)
BEGIN;
SELECT count(*) FROM generate_series(1, 2) g,
       durable.inbox_admit('sweep', 'nested-' || g, 'sweep-nested-' || g, instance => 'sweep-a') a,
       durable.inbox_complete(a.id, a.token) c;
CREATE FUNCTION pg_temp.call_in_purge() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE TG_ARGV[0];
    RETURN OLD;
END $$;
CREATE TRIGGER purge_again BEFORE DELETE ON durable.inbox FOR EACH ROW
    EXECUTE FUNCTION pg_temp.call_in_purge('SELECT durable.purge(older_than => ''0'')');
\set VERBOSITY terse
SAVEPOINT nested;
SELECT durable.purge(older_than => '0');
ROLLBACK TO nested;
DROP TRIGGER purge_again ON durable.inbox;
CREATE TRIGGER sweep_again BEFORE DELETE ON durable.inbox FOR EACH ROW
    EXECUTE FUNCTION pg_temp.call_in_purge('SELECT durable.sweep()');
SAVEPOINT nested;
SELECT durable.purge(older_than => '0');
ROLLBACK TO nested;
\set VERBOSITY default
DROP TRIGGER sweep_again ON durable.inbox;
-- The rest of a pass shares none of that state: a trigger that calls purge() during the
-- pass's lease recovery runs it, and the lease is recovered (a refusal there, for a few
-- hours of 2026-12-07, left it expired at every pass)
SELECT state FROM durable.inbox_admit('sweep', 'nested-recovered', 'sweep-nested-r', instance => 'sweep-a',
                                      lease => '20 ms');
SELECT pg_sleep(0.05);
CREATE TRIGGER purge_in_recovery AFTER UPDATE ON durable.inbox FOR EACH ROW
    EXECUTE FUNCTION pg_temp.call_in_purge('SELECT durable.purge()');
SELECT inbox_expired FROM durable.sweep();
SELECT state FROM durable.inbox WHERE message_id = 'nested-recovered';
ROLLBACK;
-- (a purge after those runs normally: the refusal left nothing behind)
SELECT durable.purge(older_than => '1000 years') AS purged;

-- 5. Bad arguments (22023)

\set VERBOSITY terse
-- batch below 1
SELECT durable.purge(batch => 0);
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
-- negative age
SELECT durable.purge(older_than => '-1 day');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
\set VERBOSITY default

-- CLEANUP
DELETE FROM durable.inbox WHERE source = 'sweep';
DELETE FROM durable.outbox WHERE key LIKE 'sweep-%';
