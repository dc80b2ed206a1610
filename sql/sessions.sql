-- Gateway sessions: session_save() and session_load().
-- This file uses bot names 'regress-sessions%' only.

-- SETUP
DELETE FROM durable.sessions WHERE bot LIKE 'regress-sessions%';

-- TESTS

-- Nothing saved yet: no row at all.
SELECT count(*) AS rows
  FROM durable.session_load('regress-sessions', 0, 'wss://gateway.example/?v=10', 2);

-- Save shard 0 of a 2-shard bot.
SELECT durable.session_save(bot => 'regress-sessions', shard => 0, session_id => 'sid-a',
                            sequence => 41, resume_url => 'wss://gateway.example/?v=10',
                            total_shards => 2);

-- Load it back: usable (ignored NULL), saved just now by the wall clock.
SELECT session_id, sequence, ignored,
       saved_at <= clock_timestamp() AND saved_at > clock_timestamp() - interval '10 s' AS saved_now
  FROM durable.session_load(bot => 'regress-sessions', shard => 0,
                            resume_url => 'wss://gateway.example/?v=10', total_shards => 2);

-- Another shard of the same bot, and the same shard of another bot: nothing saved.
SELECT count(*) AS rows
  FROM durable.session_load('regress-sessions', 1, 'wss://gateway.example/?v=10', 2);
SELECT count(*) AS rows
  FROM durable.session_load('regress-sessions-other', 0, 'wss://gateway.example/?v=10', 2);

-- A second save replaces the first: one row per (bot, shard), with the new values.
SELECT durable.session_save('regress-sessions', 0, 'sid-b', 7, 'wss://gateway.example/?v=10', 2);
SELECT session_id, sequence, ignored
  FROM durable.session_load('regress-sessions', 0, 'wss://gateway.example/?v=10', 2);
SELECT count(*) AS rows FROM durable.sessions WHERE bot = 'regress-sessions' AND shard = 0;

-- Sequence 0 (nothing received yet) and the last shard are accepted.
SELECT durable.session_save('regress-sessions', 1, 'sid-c', 0, 'wss://gateway.example/?v=10', 2);
SELECT session_id, sequence, ignored
  FROM durable.session_load('regress-sessions', 1, 'wss://gateway.example/?v=10', 2);

-- Another resume_url: ignored 'resume_url', session_id and sequence NULL, saved_at kept.
SELECT session_id IS NULL AS no_session, sequence IS NULL AS no_sequence,
       saved_at IS NOT NULL AS has_saved_at, ignored
  FROM durable.session_load('regress-sessions', 0, 'wss://other.example/?v=10', 2);

-- The URL is compared byte for byte (no case folding, no normalisation).
SELECT ignored
  FROM durable.session_load('regress-sessions', 0, 'WSS://gateway.example/?v=10', 2);

-- Another total_shards (the bot was resharded): ignored 'total_shards'.
SELECT session_id IS NULL AS no_session, sequence IS NULL AS no_sequence, ignored
  FROM durable.session_load('regress-sessions', 0, 'wss://gateway.example/?v=10', 4);

-- Both differ: 'resume_url' comes before 'total_shards'.
SELECT ignored
  FROM durable.session_load('regress-sessions', 0, 'wss://other.example/?v=10', 4);

-- Older than max_age: ignored 'expired' (saved, then 0.1 s passes; max_age 50 ms).
SELECT durable.session_save('regress-sessions', 0, 'sid-d', 8, 'wss://gateway.example/?v=10', 2);
SELECT pg_sleep(0.1);
SELECT session_id IS NULL AS no_session, sequence IS NULL AS no_sequence, ignored
  FROM durable.session_load('regress-sessions', 0, 'wss://gateway.example/?v=10', 2, '50ms');

-- The same snapshot with a larger max_age is still usable.
SELECT session_id, sequence, ignored
  FROM durable.session_load('regress-sessions', 0, 'wss://gateway.example/?v=10', 2, '1h');

-- max_age 0 means only a snapshot of this very microsecond: expired.
SELECT ignored
  FROM durable.session_load('regress-sessions', 0, 'wss://gateway.example/?v=10', 2, '0');

-- Expired and for another URL and shard count: 'expired' comes first.
SELECT ignored
  FROM durable.session_load('regress-sessions', 0, 'wss://other.example/?v=10', 4, '50ms');

-- The default max_age is 60 s (saved_at is set directly for the test).
UPDATE durable.sessions SET saved_at = clock_timestamp() - interval '55 s'
 WHERE bot = 'regress-sessions' AND shard = 0;
SELECT session_id, ignored
  FROM durable.session_load('regress-sessions', 0, 'wss://gateway.example/?v=10', 2);
UPDATE durable.sessions SET saved_at = clock_timestamp() - interval '61 s'
 WHERE bot = 'regress-sessions' AND shard = 0;
SELECT session_id, ignored
  FROM durable.session_load('regress-sessions', 0, 'wss://gateway.example/?v=10', 2);

-- max_age NULL also means 60 s: expired at 61 s, returned at 55 s.
SELECT session_id, ignored
  FROM durable.session_load('regress-sessions', 0, 'wss://gateway.example/?v=10', 2, NULL);
UPDATE durable.sessions SET saved_at = clock_timestamp() - interval '55 s'
 WHERE bot = 'regress-sessions' AND shard = 0;
SELECT session_id, ignored
  FROM durable.session_load('regress-sessions', 0, 'wss://gateway.example/?v=10', 2, NULL);

-- Saved up to 5 s in the future (clock skew between servers) is tolerated.
UPDATE durable.sessions SET saved_at = clock_timestamp() + interval '4 s'
 WHERE bot = 'regress-sessions' AND shard = 0;
SELECT session_id, ignored
  FROM durable.session_load('regress-sessions', 0, 'wss://gateway.example/?v=10', 2);

-- Saved more than 5 s in the future: ignored 'future'.
UPDATE durable.sessions SET saved_at = clock_timestamp() + interval '1 min'
 WHERE bot = 'regress-sessions' AND shard = 0;
SELECT session_id IS NULL AS no_session, sequence IS NULL AS no_sequence,
       saved_at > now() AS saved_at_kept, ignored
  FROM durable.session_load('regress-sessions', 0, 'wss://gateway.example/?v=10', 2);

-- In the future and for another URL: 'future' comes first.
SELECT ignored
  FROM durable.session_load('regress-sessions', 0, 'wss://other.example/?v=10', 2);

-- An infinite saved_at (a superuser's edit) is classified without overflow:
-- '-infinity' is expired, 'infinity' is in the future.
UPDATE durable.sessions SET saved_at = '-infinity'
 WHERE bot = 'regress-sessions' AND shard = 0;
SELECT ignored
  FROM durable.session_load('regress-sessions', 0, 'wss://gateway.example/?v=10', 2);
UPDATE durable.sessions SET saved_at = 'infinity'
 WHERE bot = 'regress-sessions' AND shard = 0;
SELECT ignored
  FROM durable.session_load('regress-sessions', 0, 'wss://gateway.example/?v=10', 2);

-- A new save stamps the wall clock again: usable.
SELECT durable.session_save('regress-sessions', 0, 'sid-e', 9, 'wss://gateway.example/?v=10', 2);
SELECT session_id, sequence, ignored
  FROM durable.session_load('regress-sessions', 0, 'wss://gateway.example/?v=10', 2);

-- The wall clock, not the transaction's start: a save inside a transaction
-- that started long ago still counts from its own moment.
BEGIN;
SELECT pg_sleep(0.1);
SELECT durable.session_save('regress-sessions', 0, 'sid-f', 10, 'wss://gateway.example/?v=10', 2);
SELECT saved_at > now() AS stamped_after_transaction_start
  FROM durable.session_load('regress-sessions', 0, 'wss://gateway.example/?v=10', 2);
COMMIT;

-- Limits: a resume_url of 2048 bytes and ids of 512 bytes are accepted.
SELECT durable.session_save(repeat('b', 512), 16383, repeat('s', 512), 9223372036854775807,
                            repeat('u', 2048), 16384);
SELECT length(session_id) AS session_id_bytes, sequence, ignored
  FROM durable.session_load(repeat('b', 512), 16383, repeat('u', 2048), 16384);
DELETE FROM durable.sessions WHERE bot = repeat('b', 512);

-- Invalid input: every argument is checked (22023), nothing is saved.
\set VERBOSITY terse
-- bot NULL, empty, over 512 bytes.
SELECT durable.session_save(NULL, 0, 'sid', 1, 'wss://g', 1);
SELECT durable.session_save('', 0, 'sid', 1, 'wss://g', 1);
SELECT durable.session_save(repeat('b', 513), 0, 'sid', 1, 'wss://g', 1);
-- shard NULL, negative, not below total_shards.
SELECT durable.session_save('regress-sessions-bad', NULL, 'sid', 1, 'wss://g', 1);
SELECT durable.session_save('regress-sessions-bad', -1, 'sid', 1, 'wss://g', 1);
SELECT durable.session_save('regress-sessions-bad', 2, 'sid', 1, 'wss://g', 2);
-- session_id NULL, empty, over 512 bytes.
SELECT durable.session_save('regress-sessions-bad', 0, NULL, 1, 'wss://g', 1);
SELECT durable.session_save('regress-sessions-bad', 0, '', 1, 'wss://g', 1);
SELECT durable.session_save('regress-sessions-bad', 0, repeat('s', 513), 1, 'wss://g', 1);
-- sequence NULL, negative.
SELECT durable.session_save('regress-sessions-bad', 0, 'sid', NULL, 'wss://g', 1);
SELECT durable.session_save('regress-sessions-bad', 0, 'sid', -1, 'wss://g', 1);
-- resume_url NULL, empty, over 2048 bytes.
SELECT durable.session_save('regress-sessions-bad', 0, 'sid', 1, NULL, 1);
SELECT durable.session_save('regress-sessions-bad', 0, 'sid', 1, '', 1);
SELECT durable.session_save('regress-sessions-bad', 0, 'sid', 1, repeat('u', 2049), 1);
-- total_shards NULL, 0, over 16384.
SELECT durable.session_save('regress-sessions-bad', 0, 'sid', 1, 'wss://g', NULL);
SELECT durable.session_save('regress-sessions-bad', 0, 'sid', 1, 'wss://g', 0);
SELECT durable.session_save('regress-sessions-bad', 0, 'sid', 1, 'wss://g', 16385);
-- The same checks on load, plus a negative max_age.
SELECT * FROM durable.session_load(NULL, 0, 'wss://g', 1);
SELECT * FROM durable.session_load('', 0, 'wss://g', 1);
SELECT * FROM durable.session_load('regress-sessions', NULL, 'wss://g', 1);
SELECT * FROM durable.session_load('regress-sessions', -1, 'wss://g', 1);
SELECT * FROM durable.session_load('regress-sessions', 1, 'wss://g', 1);
SELECT * FROM durable.session_load('regress-sessions', 0, NULL, 1);
SELECT * FROM durable.session_load('regress-sessions', 0, '', 1);
SELECT * FROM durable.session_load('regress-sessions', 0, repeat('u', 2049), 1);
SELECT * FROM durable.session_load('regress-sessions', 0, 'wss://g', NULL);
SELECT * FROM durable.session_load('regress-sessions', 0, 'wss://g', 16385);
SELECT * FROM durable.session_load('regress-sessions', 0, 'wss://g', 1, '-1 s');
\set VERBOSITY default
-- None of the rejected saves stored anything.
SELECT count(*) AS rows FROM durable.sessions WHERE bot = 'regress-sessions-bad';

-- Session ids are secrets: no error ever shows one.  An over-long session id
-- made of a marker, and a valid one sent with a bad total_shards, are refused
-- with messages (and detail, hint, context) that do not contain the marker.
DO $$
DECLARE
    marker text := 'SECRET-7f3a9c';
    long_id text := repeat('SECRET-7f3a9c', 40);
    msg text; detail text; hint text; ctx text; state text;
BEGIN
    BEGIN
        PERFORM durable.session_save('regress-sessions', 0, long_id, 1, 'wss://g', 1);
    EXCEPTION WHEN others THEN
        GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT, detail = PG_EXCEPTION_DETAIL,
                                hint = PG_EXCEPTION_HINT, ctx = PG_EXCEPTION_CONTEXT,
                                state = RETURNED_SQLSTATE;
        RAISE NOTICE 'too long: sqlstate %, message "%", shows the marker: %', state, msg,
            strpos(concat_ws(' ', msg, detail, hint, ctx), marker) > 0;
    END;
    BEGIN
        PERFORM durable.session_save('regress-sessions', 0, marker, 1, 'wss://g', 0);
    EXCEPTION WHEN others THEN
        GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT, detail = PG_EXCEPTION_DETAIL,
                                hint = PG_EXCEPTION_HINT, ctx = PG_EXCEPTION_CONTEXT,
                                state = RETURNED_SQLSTATE;
        RAISE NOTICE 'bad shards: sqlstate %, message "%", shows the marker: %', state, msg,
            strpos(concat_ws(' ', msg, detail, hint, ctx), marker) > 0;
    END;
END
$$;

-- Session ids are secrets: only the owner holds any privilege on the table
-- and on the two session functions (nothing for PUBLIC or any other role).
SELECT c.relname, coalesce(bool_and(a.grantee = c.relowner), true) AS owner_only
  FROM pg_class c LEFT JOIN LATERAL aclexplode(c.relacl) a ON true
 WHERE c.oid = 'durable.sessions'::regclass
 GROUP BY c.relname;
SELECT p.proname, coalesce(bool_and(a.grantee = p.proowner), true) AS owner_only
  FROM pg_proc p LEFT JOIN LATERAL aclexplode(p.proacl) a ON true
 WHERE p.pronamespace = 'durable'::regnamespace
   AND p.proname IN ('session_save', 'session_load')
 GROUP BY p.proname ORDER BY p.proname;

-- A client role granted the schema and permit() (as the README shows) can
-- neither read the table nor call the session functions (42501).
CREATE ROLE regress_sessions_client;
GRANT USAGE ON SCHEMA durable TO regress_sessions_client;
GRANT EXECUTE ON FUNCTION durable.permit(text, integer, interval) TO regress_sessions_client;
SET ROLE regress_sessions_client;
\set VERBOSITY terse
SELECT session_id FROM durable.sessions;
SELECT * FROM durable.session_load('regress-sessions', 0, 'wss://gateway.example/?v=10', 2);
SELECT durable.session_save('regress-sessions', 0, 'stolen', 1, 'wss://gateway.example/?v=10', 2);
\set VERBOSITY default
RESET ROLE;

-- Granted apart, the session functions work for that role, the table still
-- does not.  Each role has sessions of its own (0.10): the role does not see
-- the session this test's superuser saved for the same bot and shard, and
-- its save makes a row of its own beside it, which the superuser's load
-- does not see either.
GRANT EXECUTE ON FUNCTION durable.session_save(text, integer, text, bigint, text, integer),
                          durable.session_load(text, integer, text, integer, interval)
   TO regress_sessions_client;
SET ROLE regress_sessions_client;
SELECT session_id, ignored
  FROM durable.session_load('regress-sessions', 0, 'wss://gateway.example/?v=10', 2);
\set VERBOSITY terse
SELECT count(*) FROM durable.sessions;
\set VERBOSITY default
SELECT durable.session_save('regress-sessions', 0, 'sid-client', 1, 'wss://gateway.example/?v=10', 2);
SELECT session_id, sequence, ignored
  FROM durable.session_load('regress-sessions', 0, 'wss://gateway.example/?v=10', 2);
RESET ROLE;
SELECT session_id, sequence
  FROM durable.session_load('regress-sessions', 0, 'wss://gateway.example/?v=10', 2);
SELECT bot, shard, session_id, sequence,
       CASE WHEN owned_by = current_user THEN 'this superuser' ELSE owned_by::text END AS owned_by
  FROM durable.sessions WHERE bot LIKE 'regress-sessions%' ORDER BY bot, shard, owned_by;

-- A member of the role, even one that inherits it, has its own sessions;
-- SET ROLE to the role shares them.
CREATE ROLE regress_sessions_member IN ROLE regress_sessions_client;
GRANT USAGE ON SCHEMA durable TO regress_sessions_member;
GRANT EXECUTE ON FUNCTION durable.session_save(text, integer, text, bigint, text, integer),
                          durable.session_load(text, integer, text, integer, interval)
   TO regress_sessions_member;
SET ROLE regress_sessions_member;
SELECT count(*) AS rows
  FROM durable.session_load('regress-sessions', 0, 'wss://gateway.example/?v=10', 2);
SELECT durable.session_save('regress-sessions', 0, 'sid-member', 3, 'wss://gateway.example/?v=10', 2);
SET ROLE regress_sessions_client;
SELECT session_id, sequence
  FROM durable.session_load('regress-sessions', 0, 'wss://gateway.example/?v=10', 2);
RESET ROLE;

-- The caller is the current user at the call: a SECURITY DEFINER function of
-- the member's that loads a session reads the member's session, whoever
-- calls it -- the client role, the superuser -- never the caller's (nor the
-- session's role's: code of another role that ANALYZE or autovacuum runs
-- reads that role's own).
CREATE FUNCTION public.regress_member_loads() RETURNS text
    LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $$SELECT coalesce((SELECT session_id FROM durable.session_load('regress-sessions', 0,
                  'wss://gateway.example/?v=10', 2)), 'no session')$$;
ALTER FUNCTION public.regress_member_loads() OWNER TO regress_sessions_member;
SET ROLE regress_sessions_client;
SELECT public.regress_member_loads();
RESET ROLE;
SELECT public.regress_member_loads();
DROP FUNCTION public.regress_member_loads();

-- A session saved before 0.10 belongs to no role (owned_by ''): any role
-- granted the functions loads it, and the first save of its bot and shard,
-- by any role, replaces it with that role's row.  The row is written as the
-- COPY of a dump (or a subscription to a publisher) from before 0.10 writes
-- it, without owned_by: the column's default makes it such a row (since 0.12;
-- before, the NOT NULL refused the table's rows, and its error printed one).
INSERT INTO durable.sessions (bot, shard, session_id, sequence, resume_url, total_shards, saved_at)
VALUES ('regress-sessions-old', 0, 'sid-old', 5, 'wss://gateway.example/?v=10', 1, clock_timestamp());
SET ROLE regress_sessions_member;
SELECT session_id, sequence, ignored
  FROM durable.session_load('regress-sessions-old', 0, 'wss://gateway.example/?v=10', 1);
SELECT durable.session_save('regress-sessions-old', 0, 'sid-new', 6, 'wss://gateway.example/?v=10', 1);
RESET ROLE;
SELECT session_id, sequence, owned_by FROM durable.sessions WHERE bot = 'regress-sessions-old';
SET ROLE regress_sessions_client;
SELECT count(*) AS rows
  FROM durable.session_load('regress-sessions-old', 0, 'wss://gateway.example/?v=10', 1);
RESET ROLE;

-- A trigger of the DBA's that skips the row: refused (55000), not an internal error
BEGIN;
CREATE FUNCTION pg_temp.skip_row() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NULL; END$$;
CREATE TRIGGER regress_skip BEFORE INSERT OR UPDATE ON durable.sessions
    FOR EACH ROW EXECUTE FUNCTION pg_temp.skip_row();
SELECT durable.session_save('regress-skip', 0, 'sess-skip', 1, 'wss://gw', 1);
ROLLBACK;

-- CLEANUP
REVOKE ALL ON FUNCTION durable.session_save(text, integer, text, bigint, text, integer),
                       durable.session_load(text, integer, text, integer, interval),
                       durable.permit(text, integer, interval)
  FROM regress_sessions_client;
REVOKE USAGE ON SCHEMA durable FROM regress_sessions_client, regress_sessions_member;
REVOKE ALL ON FUNCTION durable.session_save(text, integer, text, bigint, text, integer),
                       durable.session_load(text, integer, text, integer, interval)
  FROM regress_sessions_member;
DROP ROLE regress_sessions_member, regress_sessions_client;
DELETE FROM durable.sessions WHERE bot LIKE 'regress-sessions%';
