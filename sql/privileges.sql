--
-- privileges: who may do what.
--
-- Nothing in schema durable is granted to PUBLIC.  The README documents four
-- roles, each granted exactly what is below:
--   client    a bot: USAGE on the schema, EXECUTE on the inbox, outbox,
--             instance_start and permit functions (never writes on tables);
--   reader    dashboards: SELECT on durable.inbox and durable.outbox,
--             EXECUTE on metrics() and standing();
--   operator  people fixing things: replay, retry, discard, purge, sweep,
--             metrics_reset (grant it the reader role too, to see what to fix);
--   sessions  the gateway process: session_save and session_load, which hand
--             out secrets and are granted apart, and permit (Identify pacing).
-- Nobody but the extension owner can read durable.sessions.
--

-- SETUP
\set VERBOSITY terse
CREATE ROLE regress_durable_nobody NOLOGIN;
CREATE ROLE regress_durable_client NOLOGIN;
CREATE ROLE regress_durable_reader NOLOGIN;
CREATE ROLE regress_durable_operator NOLOGIN;
CREATE ROLE regress_durable_sessions NOLOGIN;

-- The README's client GRANTs
GRANT USAGE ON SCHEMA durable TO regress_durable_client;
GRANT EXECUTE ON FUNCTION
    durable.inbox_admit(text, text, text, jsonb, text, text, interval),
    durable.inbox_claim(text, integer, interval, interval),
    durable.inbox_heartbeat(bigint, bigint, interval),
    durable.inbox_complete(bigint, bigint),
    durable.inbox_complete(bigint[], bigint[]),
    durable.inbox_fail(bigint, bigint, text, interval),
    durable.inbox_release(bigint, bigint),
    durable.outbox_begin(text, text, jsonb, text, interval, bigint, bigint),
    durable.outbox_sent(text, bigint, text),
    durable.outbox_failed(text, bigint, text, boolean, interval),
    durable.outbox_enqueue(text, text, jsonb, timestamptz, bigint, bigint),
    durable.outbox_claim(text, integer, interval, interval),
    durable.outbox_heartbeat(text, bigint, interval),
    durable.instance_start(text),
    durable.permit(text, integer, interval)
  TO regress_durable_client;

-- The README's reader GRANTs
GRANT USAGE ON SCHEMA durable TO regress_durable_reader;
GRANT SELECT ON TABLE durable.inbox, durable.outbox TO regress_durable_reader;
GRANT EXECUTE ON FUNCTION durable.metrics(), durable.standing() TO regress_durable_reader;

-- The README's operator GRANTs
GRANT USAGE ON SCHEMA durable TO regress_durable_operator;
GRANT EXECUTE ON FUNCTION
    durable.inbox_replay(bigint),
    durable.outbox_retry(text),
    durable.outbox_discard(text),
    durable.purge(interval, integer),
    durable.sweep(),
    durable.metrics_reset()
  TO regress_durable_operator;

-- The README's session GRANTs
GRANT USAGE ON SCHEMA durable TO regress_durable_sessions;
GRANT EXECUTE ON FUNCTION
    durable.session_save(text, integer, text, bigint, text, integer),
    durable.session_load(text, integer, text, integer, interval),
    durable.permit(text, integer, interval)
  TO regress_durable_sessions;

-- try(sql): runs a statement as the current role, returns 'ok' or 'SQLSTATE message'
CREATE FUNCTION pg_temp.try(sql text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE sql;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ' ' || SQLERRM;
END
$$;

-- Every function of the extension, and a call of it with NULL arguments
CREATE TEMP TABLE api AS
SELECT p.oid::regprocedure::text AS function,
       p.oid AS fn,
       format('SELECT * FROM durable.%I(%s)', p.proname,
              (SELECT coalesce(string_agg('NULL::' || format_type(t, NULL), ', ' ORDER BY i), '')
                 FROM unnest(p.proargtypes::oid[]) WITH ORDINALITY AS a(t, i))) AS call
  FROM pg_proc p
  JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
  JOIN pg_extension e ON e.oid = d.refobjid AND d.refclassid = 'pg_extension'::regclass
 WHERE d.deptype = 'e' AND e.extname = 'durable';
GRANT SELECT ON pg_temp.api TO PUBLIC;

CREATE TEMP TABLE roles (role name, label text);
INSERT INTO roles VALUES
    ('regress_durable_client', 'client'), ('regress_durable_reader', 'reader'),
    ('regress_durable_operator', 'operator'), ('regress_durable_sessions', 'sessions'),
    ('regress_durable_nobody', 'nobody'), ('public', 'public');

-- TESTS: the catalog
-- PUBLIC has no privilege on the schema, any function, table, view or sequence of the extension (no row)
SELECT 'function' AS kind, function AS name FROM api WHERE has_function_privilege('public', fn, 'EXECUTE')
UNION ALL
SELECT 'schema', 'durable' WHERE has_schema_privilege('public', 'durable', 'USAGE')
                              OR has_schema_privilege('public', 'durable', 'CREATE')
UNION ALL
SELECT CASE c.relkind WHEN 'v' THEN 'view' ELSE 'table' END, c.oid::regclass::text
  FROM pg_class c
 WHERE c.relnamespace = 'durable'::regnamespace AND c.relkind IN ('r', 'v')
   AND has_table_privilege('public', c.oid, 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER')
UNION ALL
SELECT 'sequence', c.oid::regclass::text
  FROM pg_class c
 WHERE c.relnamespace = 'durable'::regnamespace AND c.relkind = 'S'
   AND CASE WHEN c.relkind = 'S' THEN has_sequence_privilege('public', c.oid, 'USAGE, SELECT, UPDATE') END;

-- The function matrix of the README: which role may EXECUTE which function (pg_monitor is granted
-- metrics() and standing() by the extension itself, for the stat_counters and stat_standing views)
SELECT a.function,
       has_function_privilege('regress_durable_client', a.fn, 'EXECUTE') AS client,
       has_function_privilege('regress_durable_reader', a.fn, 'EXECUTE') AS reader,
       has_function_privilege('regress_durable_operator', a.fn, 'EXECUTE') AS operator,
       has_function_privilege('regress_durable_sessions', a.fn, 'EXECUTE') AS sessions,
       has_function_privilege('regress_durable_nobody', a.fn, 'EXECUTE') AS nobody,
       has_function_privilege('pg_monitor', a.fn, 'EXECUTE') AS pg_monitor
  FROM api a ORDER BY a.function;

-- The table matrix: only the reader reads, and only the journals; nobody writes; nobody but the owner reads sessions
SELECT c.relname,
       r.label AS role,
       has_table_privilege(r.role, c.oid, 'SELECT') AS can_select,
       has_table_privilege(r.role, c.oid, 'INSERT, UPDATE, DELETE, TRUNCATE') AS can_write
  FROM pg_class c CROSS JOIN roles r
 WHERE c.relnamespace = 'durable'::regnamespace AND c.relkind = 'r'
   AND (has_table_privilege(r.role, c.oid, 'SELECT')
        OR has_table_privilege(r.role, c.oid, 'INSERT, UPDATE, DELETE, TRUNCATE'))
 ORDER BY c.relname, r.label;

-- durable.sessions holds secrets: no role but its owner can read it (no row)
SELECT r.label FROM roles r
 WHERE has_table_privilege(r.role, 'durable.sessions', 'SELECT')
    OR has_column_privilege(r.role, 'durable.sessions', 'session_id', 'SELECT');

-- Sequences: no role may use them directly (no row)
SELECT c.relname, r.label
  FROM pg_class c CROSS JOIN roles r
 WHERE c.relnamespace = 'durable'::regnamespace AND c.relkind = 'S'
   AND CASE WHEN c.relkind = 'S' THEN has_sequence_privilege(r.role, c.oid, 'USAGE, SELECT, UPDATE') END;

-- TESTS: a role granted nothing
-- Every function is refused (42501) for lack of USAGE on the schema
SET ROLE regress_durable_nobody;
SELECT function, pg_temp.try(call) AS result FROM api ORDER BY function;
-- ... and every table and sequence (42501)
SELECT pg_temp.try('SELECT * FROM durable.inbox') AS inbox,
       pg_temp.try('SELECT * FROM durable.outbox') AS outbox,
       pg_temp.try('SELECT * FROM durable.sessions') AS sessions,
       pg_temp.try('SELECT pg_catalog.nextval(''durable.token_seq'')') AS token_seq;
RESET ROLE;

-- ... nor can it make its own object depend on the extension: that would lock the
-- extension until its transaction ends, and the worker's every pass would wait (42501)
SET ROLE regress_durable_nobody;
CREATE FUNCTION pg_temp.mine() RETURNS int LANGUAGE sql AS 'SELECT 1';
\set VERBOSITY terse
ALTER FUNCTION pg_temp.mine() DEPENDS ON EXTENSION durable;
ALTER FUNCTION pg_temp.mine() NO DEPENDS ON EXTENSION durable;
\set VERBOSITY default
DROP FUNCTION pg_temp.mine();
RESET ROLE;

-- With USAGE on the schema only, every function is still refused (42501): EXECUTE is granted to nobody by default
GRANT USAGE ON SCHEMA durable TO regress_durable_nobody;
SET ROLE regress_durable_nobody;
SELECT function, pg_temp.try(call) AS result FROM api ORDER BY function;
-- ... and every table and sequence (42501)
SELECT relname, pg_temp.try(format('SELECT * FROM durable.%I', relname)) AS read,
       pg_temp.try(format('DELETE FROM durable.%I', relname)) AS write
  FROM pg_class WHERE relnamespace = 'durable'::regnamespace AND relkind IN ('r', 'S') ORDER BY relname;
RESET ROLE;

-- Runtime check of the function matrix: each role is refused (42501) exactly the functions it was not
-- granted, called with NULL arguments (a granted function then raises 22023 or runs) (no row)
CREATE TEMP TABLE outcome (label text, function text, granted boolean, result text);
GRANT INSERT ON pg_temp.outcome TO PUBLIC;
SET ROLE regress_durable_client;
INSERT INTO outcome SELECT 'client', a.function, has_function_privilege(a.fn, 'EXECUTE'), pg_temp.try(a.call) FROM api a;
SET ROLE regress_durable_reader;
INSERT INTO outcome SELECT 'reader', a.function, has_function_privilege(a.fn, 'EXECUTE'), pg_temp.try(a.call) FROM api a;
SET ROLE regress_durable_operator;
INSERT INTO outcome SELECT 'operator', a.function, has_function_privilege(a.fn, 'EXECUTE'), pg_temp.try(a.call) FROM api a;
SET ROLE regress_durable_sessions;
INSERT INTO outcome SELECT 'sessions', a.function, has_function_privilege(a.fn, 'EXECUTE'), pg_temp.try(a.call) FROM api a;
RESET ROLE;
SELECT label, function, granted, result FROM outcome
 WHERE granted = (result LIKE '42501 %')
    OR (NOT granted AND result NOT LIKE '42501 permission denied for function %')
 ORDER BY label, function;
-- How many functions each role may call
SELECT label, count(*) FILTER (WHERE granted) AS granted, count(*) FILTER (WHERE NOT granted) AS refused
  FROM outcome GROUP BY label ORDER BY label;

-- TESTS: the client role runs whole inbox and outbox cycles
SET ROLE regress_durable_client;
-- admit with an instance: journaled and leased at once
SELECT id AS in1, token AS tk1, token IS NOT NULL AS leased, duplicate, state
  FROM durable.inbox_admit(source => 'regress-priv', message_id => '1', chat_id => 'priv-1',
                           payload => '{"text":"hi"}', instance => 'priv-bot') \gset
\echo leased :leased, duplicate :duplicate, state :state
-- the same message again: a duplicate, no token (it is leased)
SELECT duplicate, token IS NULL AS no_token, state
  FROM durable.inbox_admit(source => 'regress-priv', message_id => '1', chat_id => 'priv-1',
                           payload => '{"text":"hi"}', instance => 'priv-bot');
-- heartbeat extends the lease
SELECT durable.inbox_heartbeat(:in1, :tk1, '2 min') > clock_timestamp() + interval '1 min' AS extended;
-- complete
SELECT durable.inbox_complete(:in1, :tk1);
-- a message admitted without an instance waits, pending
SELECT duplicate, token IS NULL AS no_token, state
  FROM durable.inbox_admit(source => 'regress-priv', message_id => '2', chat_id => 'priv-2');
-- claim leases it
SELECT id AS in2, token AS tk2, message_id, attempts FROM durable.inbox_claim(instance => 'priv-bot', max => 1) \gset
\echo claimed message :message_id, attempt :attempts
-- the handler fails: pending again, due in an hour
SELECT state, not_before > clock_timestamp() + interval '59 min' AS retry_later
  FROM durable.inbox_fail(:in2, :tk2, 'handler crashed', '1 hour');
-- a third message: claimed, released, claimed again under a new token, completed in a batch
SELECT state FROM durable.inbox_admit(source => 'regress-priv', message_id => '3', chat_id => 'priv-3');
SELECT id AS in3, token AS tk3 FROM durable.inbox_claim(instance => 'priv-bot') \gset
SELECT durable.inbox_release(:in3, :tk3);
SELECT id = :in3 AS same_record, token <> :tk3 AS new_token, token AS tk3b FROM durable.inbox_claim(instance => 'priv-bot') \gset
\echo same record :same_record, new token :new_token
SELECT durable.inbox_complete(ARRAY[:in3]::bigint[], ARRAY[:tk3b]::bigint[]) AS completed;
-- outbox: begin journals and leases the send; heartbeat; sent
SELECT action, key, token AS ok1 FROM durable.outbox_begin('priv-k1', 'priv-1', '{"text":"hello"}', 'priv-bot') \gset
\echo action :action for :key
SELECT durable.outbox_heartbeat('priv-k1', :ok1, '2 min') > clock_timestamp() AS extended;
SELECT durable.outbox_sent('priv-k1', :ok1, 'tg-1');
-- the same key again is answered from the journal
SELECT action, provider_message_id, state FROM durable.outbox_begin('priv-k1', 'priv-1', '{"text":"hello"}', 'priv-bot');
-- a send the provider refuses: failed, retry later
SELECT token AS ok2 FROM durable.outbox_begin('priv-k2', 'priv-2', '{"text":"fails"}', 'priv-bot') \gset
SELECT state, not_before > clock_timestamp() + interval '59 min' AS retry_later
  FROM durable.outbox_failed('priv-k2', :ok2, 'HTTP 502', true, '1 hour');
-- enqueue, claim and send
SELECT key, created, state FROM durable.outbox_enqueue('priv-k3', 'priv-3', '{"text":"later"}');
SELECT key, token AS ok3 FROM durable.outbox_claim(instance => 'priv-bot', max => 10) \gset
\echo claimed :key
SELECT durable.outbox_sent('priv-k3', :ok3, 'tg-3');
-- instance start: this instance holds nothing any more
SELECT * FROM durable.instance_start('priv-bot');
-- a shared permit
SELECT durable.permit('priv-bucket', 1, '1 min') AS wait;

-- The client cannot read or write the tables, nor use the sequences (42501)
SELECT count(*) FROM durable.inbox;
SELECT count(*) FROM durable.outbox;
INSERT INTO durable.inbox (source, message_id, chat_id, kind, payload, state, not_before, created_at)
VALUES ('regress-priv', 'forged', 'priv-9', 'message', '{}', 'pending', now(), now());
UPDATE durable.inbox SET state = 'done' WHERE source = 'regress-priv';
DELETE FROM durable.outbox WHERE key = 'priv-k2';
SELECT * FROM durable.sessions;
SELECT nextval('durable.token_seq');
-- ... nor call the session, operator or observing functions (42501)
SELECT durable.session_save('priv-bot', 0, 'secret', 1, 'wss://gw', 1);
SELECT * FROM durable.session_load('priv-bot', 0, 'wss://gw', 1);
SELECT durable.inbox_replay(:in1);
SELECT durable.outbox_retry('priv-k2');
SELECT durable.outbox_discard('priv-k2');
SELECT durable.purge();
SELECT * FROM durable.sweep();
SELECT durable.metrics_reset();
SELECT * FROM durable.metrics();
SELECT * FROM durable.standing();
RESET ROLE;

-- What the client did, as the owner sees it
SELECT message_id, state, attempts, error FROM durable.inbox WHERE source = 'regress-priv' ORDER BY message_id;
SELECT key, state, provider_message_id, error FROM durable.outbox WHERE key LIKE 'priv-%' ORDER BY key;

-- TESTS: the reader role
SET ROLE regress_durable_reader;
-- reads the journals (the dead-letter queues are their state = 'dead' rows)
SELECT message_id, state FROM durable.inbox WHERE source = 'regress-priv' ORDER BY message_id;
SELECT key, state FROM durable.outbox WHERE key LIKE 'priv-%' ORDER BY key;
-- calls metrics() and standing()
SELECT since IS NOT NULL AS has_since FROM durable.metrics();
SELECT inbox_pending >= 1 AS sees_pending, over_bound IS NOT NULL AS has_bound FROM durable.standing();
-- but cannot read sessions, write the journals, or call anything else (42501)
SELECT * FROM durable.sessions;
UPDATE durable.inbox SET state = 'done' WHERE source = 'regress-priv';
DELETE FROM durable.outbox WHERE key LIKE 'priv-%';
SELECT * FROM durable.inbox_admit('regress-priv', '4', 'priv-4');
SELECT * FROM durable.inbox_claim('priv-reader');
SELECT durable.inbox_replay(:in1);
SELECT durable.metrics_reset();
SELECT * FROM durable.session_load('priv-bot', 0, 'wss://gw', 1);
RESET ROLE;

-- TESTS: the operator role
SET ROLE regress_durable_operator;
-- replays a done record
SELECT durable.inbox_replay(:in1);
-- makes a failed send due now, then forgets it
SELECT durable.outbox_retry('priv-k2');
SELECT durable.outbox_discard('priv-k2') AS discarded;
-- sweeps, purges (nothing is older than the retention) and resets the counters
SELECT count(*) AS sweep_rows FROM durable.sweep();
SELECT durable.purge() AS purged;
SELECT durable.metrics_reset();
-- but cannot read the tables, call the client API or the session functions (42501)
SELECT count(*) FROM durable.inbox;
SELECT * FROM durable.sessions;
SELECT * FROM durable.inbox_claim('priv-operator');
SELECT * FROM durable.session_load('priv-bot', 0, 'wss://gw', 1);
RESET ROLE;

-- The operator's effects: record 1 pending again with attempts reset, send 2 gone
SELECT message_id, state, attempts FROM durable.inbox WHERE source = 'regress-priv' ORDER BY message_id;
SELECT key, state FROM durable.outbox WHERE key LIKE 'priv-%' ORDER BY key;

-- TESTS: the sessions role
SET ROLE regress_durable_sessions;
-- saves and loads a gateway session through the functions
SELECT durable.session_save('priv-bot', 0, 'secret-session', 42, 'wss://gw', 1);
SELECT session_id, sequence, ignored FROM durable.session_load('priv-bot', 0, 'wss://gw', 1);
-- but cannot read the table itself, nor call anything else (42501)
SELECT * FROM durable.sessions;
SELECT session_id FROM durable.sessions;
SELECT * FROM durable.inbox_admit('regress-priv', '5', 'priv-5');
SELECT * FROM durable.metrics();
RESET ROLE;

-- One owner for everything durable owns: even a superuser cannot give one of its objects
-- to another role (0A000; REASSIGN OWNED moves them all, the extension with them).
-- Giving one back to the extension's owner is allowed.
\set VERBOSITY default
ALTER TABLE durable.inbox OWNER TO regress_durable_operator;
ALTER VIEW durable.stat_counters OWNER TO regress_durable_operator;
ALTER SEQUENCE durable.token_seq OWNER TO regress_durable_operator;
ALTER FUNCTION durable.sweep() OWNER TO regress_durable_operator;
ALTER ROUTINE durable.purge(interval, integer) OWNER TO regress_durable_operator;
ALTER SCHEMA durable OWNER TO regress_durable_operator;
-- Nor rename durable's schema: its code names its tables durable.<table>.
ALTER SCHEMA durable RENAME TO durable_renamed;
-- Nor rename durable's own tables, sequences, views, their columns or its
-- functions, nor move them to another schema (0A000): every call that needs
-- one finds it by its name in schema durable.
ALTER TABLE durable.inbox RENAME TO inbox_renamed;
ALTER TABLE IF EXISTS durable.outbox RENAME TO outbox_renamed;
ALTER SEQUENCE durable.token_seq RENAME TO token_seq_renamed;
ALTER TABLE durable.token_seq RENAME TO token_seq_renamed;
ALTER VIEW durable.stat_counters RENAME TO counters;
ALTER INDEX durable.sessions RENAME TO sessions_renamed;
ALTER TABLE durable.inbox RENAME COLUMN chat_id TO chat;
ALTER VIEW durable.stat_standing RENAME COLUMN why TO reason;
ALTER TYPE durable.inbox RENAME ATTRIBUTE chat_id TO chat;
ALTER TYPE durable.stat_standing RENAME ATTRIBUTE why TO reason;
ALTER FUNCTION durable.sweep() RENAME TO sweep_now;
ALTER ROUTINE durable.purge(interval, integer) RENAME TO purge_now;
ALTER TABLE durable.outbox SET SCHEMA public;
ALTER SEQUENCE durable.inbox_id_seq SET SCHEMA public;
ALTER FUNCTION durable.metrics() SET SCHEMA public;
-- (a table that owns a sequence takes it along when it moves)
ALTER SEQUENCE durable.token_seq OWNED BY durable.inbox.id;
ALTER SEQUENCE durable.inbox_id_seq OWNED BY NONE;
-- Every column of every table and view of durable's is refused (a column
-- added to a later version is refused without a change to the guard).
DO $$
DECLARE
  col record;
  refused int := 0;
  total int := 0;
BEGIN
  FOR col IN SELECT c.relname, a.attname
               FROM pg_class c
               JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e'
               JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
              WHERE c.relkind IN ('r', 'v')
  LOOP
    total := total + 1;
    BEGIN
      EXECUTE format('ALTER TABLE durable.%I RENAME COLUMN %I TO renamed', col.relname, col.attname);
    EXCEPTION WHEN feature_not_supported THEN
      refused := refused + 1;
    END;
  END LOOP;
  RAISE NOTICE 'columns refused: % of %', refused, total;
  IF refused <> total OR total < 60 THEN
    RAISE EXCEPTION 'a column of durable''s was renamed';
  END IF;
END $$;
-- Indexes may be renamed (the repair of an index made under the name of one
-- of durable's); a column you added to a journal may not (durable cannot tell
-- it from its own), but a table of your own in the schema may.
BEGIN;
ALTER INDEX durable.inbox_done_at_idx RENAME TO inbox_done_at_idx_moved;
ALTER INDEX durable.inbox_done_at_idx_moved RENAME TO inbox_done_at_idx;
ALTER TABLE durable.inbox ADD COLUMN mine int;
ALTER TABLE durable.inbox RENAME COLUMN mine TO still_refused;
ROLLBACK;
BEGIN;
CREATE TABLE durable.scratch (n int);
CREATE SEQUENCE durable.scratch_seq OWNED BY durable.scratch.n;
ALTER SEQUENCE durable.scratch_seq OWNED BY NONE;
ALTER TYPE durable.scratch RENAME ATTRIBUTE n TO o;
ALTER TABLE durable.scratch RENAME COLUMN o TO n;
ALTER TABLE durable.scratch RENAME TO scratch_renamed;
ALTER TABLE durable.scratch_renamed RENAME COLUMN n TO m;
ALTER TABLE durable.scratch_renamed SET SCHEMA public;
ROLLBACK;
-- Nor change the security or the search_path of durable's functions (0A000): under the
-- caller's search_path an operator of the caller's would run as durable's owner, and the
-- session functions must see their caller.  Other settings are the DBA's (review,
-- 2026-12-05: RESET ALL, to drop jit = off, let a bot's own "=" run as durable's owner).
ALTER FUNCTION durable.sweep() RESET ALL;
ALTER FUNCTION durable.sweep() RESET search_path;
ALTER FUNCTION durable.sweep() SET search_path = public, pg_catalog;
ALTER FUNCTION durable.sweep() SET search_path FROM CURRENT;
ALTER FUNCTION durable.sweep() SET "SEARCH_PATH" = public;
ALTER FUNCTION durable.inbox_admit(text, text, text, jsonb, text, text, interval) SECURITY INVOKER;
ALTER FUNCTION durable.session_load(text, integer, text, integer, interval) SECURITY DEFINER;
BEGIN;
ALTER FUNCTION durable.sweep() RESET jit;
ALTER FUNCTION durable.sweep() COST 10;
ROLLBACK;
-- Nor replace one of durable's functions or views, or take one out of the extension to
-- replace it (0A000): whoever calls it would run the replacement with their own rights.
CREATE OR REPLACE FUNCTION durable.sweep() RETURNS TABLE (inbox_expired integer, outbox_ambiguous integer,
    outbox_due integer, purged bigint) LANGUAGE sql AS $$ SELECT 0, 0, 0, 0::bigint $$;
CREATE OR REPLACE VIEW durable.stat_standing AS SELECT 1 AS one;
ALTER EXTENSION durable DROP FUNCTION durable.sweep();
ALTER EXTENSION durable ADD TABLE public.nothing_of_durables;
CREATE OR REPLACE RULE "_RETURN" AS ON SELECT TO durable.stat_counters
    DO INSTEAD SELECT * FROM durable.stat_counters LIMIT 0;
CREATE RULE nothing AS ON INSERT TO durable.stat_standing DO INSTEAD NOTHING;
-- Nor a child table of any of durable's tables: its statements would reach the child's rows,
-- and run its triggers and deferred checks as durable's callers
CREATE TABLE public.kid () INHERITS (durable.permits);
-- A function or view of your own in the schema may be replaced, and a view of durable's
-- name created where the name leads (here public, first on search_path).
BEGIN;
SET LOCAL search_path = public, durable;
CREATE OR REPLACE VIEW stat_standing AS SELECT 1 AS one;
SELECT count(*) AS in_public FROM public.stat_standing;
ROLLBACK;
BEGIN;
CREATE FUNCTION durable.mine() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$;
CREATE OR REPLACE FUNCTION durable.mine() RETURNS int LANGUAGE sql AS $$ SELECT 2 $$;
CREATE VIEW durable.my_view AS SELECT 1 AS one;
CREATE OR REPLACE VIEW durable.my_view AS SELECT 1 AS one, 2 AS two;
ROLLBACK;
-- Nor a deferrable constraint trigger on durable's tables by a role that is not a superuser
-- (0A000): it would fire at the caller's commit, as the caller, not as durable's owner
-- (durable's owner, no longer a superuser, ran its code so as a superuser that called
-- permit()).  NOT DEFERRABLE is the writes' business (those on permits and sessions run; the
-- journals' direct writes refuse them).  A superuser's runs with no more than its caller's
-- rights.
CREATE FUNCTION pg_temp.nothing() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;
BEGIN;
GRANT USAGE ON SCHEMA durable TO regress_durable_operator;
GRANT TRIGGER ON durable.permit_buckets TO regress_durable_operator;
SET ROLE regress_durable_operator;
CREATE CONSTRAINT TRIGGER late AFTER INSERT OR UPDATE ON durable.permit_buckets
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION pg_temp.nothing();
ROLLBACK;
-- (a deferrable unique or exclusion constraint, checked at commit the same way, is refused to
-- an owner that is not a superuser: t/027_worker_as_owner.pl)
BEGIN;
GRANT USAGE ON SCHEMA durable TO regress_durable_operator;
GRANT TRIGGER ON durable.permit_buckets TO regress_durable_operator;
SET ROLE regress_durable_operator;
CREATE CONSTRAINT TRIGGER now_then AFTER INSERT ON durable.permit_buckets
    NOT DEFERRABLE FOR EACH ROW EXECUTE FUNCTION pg_temp.nothing();
ROLLBACK;
BEGIN;
CREATE CONSTRAINT TRIGGER by_superuser AFTER DELETE ON durable.outbox
    DEFERRABLE FOR EACH ROW EXECUTE FUNCTION pg_temp.nothing();
ROLLBACK;
SELECT extowner::regrole AS extension_owner FROM pg_extension WHERE extname = 'durable' \gset
ALTER TABLE durable.inbox OWNER TO :"extension_owner";
SELECT count(*) AS owned_by_another
  FROM pg_class c JOIN pg_extension e ON e.extname = 'durable'
 WHERE c.relnamespace = 'durable'::regnamespace AND c.relowner <> e.extowner;

-- CLEANUP
DELETE FROM durable.inbox WHERE source = 'regress-priv';
DELETE FROM durable.outbox WHERE key LIKE 'priv-%';
DELETE FROM durable.sessions WHERE bot = 'priv-bot';
DELETE FROM durable.permits WHERE bucket = 'priv-bucket';
DELETE FROM durable.permit_buckets WHERE bucket = 'priv-bucket';
DROP TABLE api, roles, outcome;
DROP FUNCTION pg_temp.try(text);
DROP OWNED BY regress_durable_nobody, regress_durable_client, regress_durable_reader,
              regress_durable_operator, regress_durable_sessions;
DROP ROLE regress_durable_nobody, regress_durable_client, regress_durable_reader,
          regress_durable_operator, regress_durable_sessions;
