--
-- security: what the extension installs is safe to call from any search_path.
--
-- Part 1 audits the catalogs: every query there must return no row.
-- Part 2 calls the API as a client whose own schema, first in its
-- search_path, holds trojans (lookalike functions, a text "=" operator,
-- nextval/now/count...) and whose session holds temporary relations named
-- like the journals: the results equal those of a clean search_path and the
-- trojans' canary table stays empty.
--

-- SETUP
-- The extension's members, as pg_depend records them
CREATE TEMP VIEW members AS
SELECT d.classid, d.objid
  FROM pg_depend d
  JOIN pg_extension e ON e.oid = d.refobjid
 WHERE d.refclassid = 'pg_extension'::regclass
   AND d.deptype = 'e'
   AND e.extname = 'durable';

-- TESTS: catalog audit
-- The audits below are not vacuous: the extension has 25 functions and 11 relations (6 tables, 3 sequences, 2 views)
SELECT count(*) FILTER (WHERE classid = 'pg_proc'::regclass) AS functions,
       count(*) FILTER (WHERE classid = 'pg_class'::regclass) AS relations,
       count(*) AS members
  FROM members;

-- Every function has search_path pinned to pg_catalog, pg_temp, and is SECURITY DEFINER
-- but the two session functions (no row): since 0.10 they are SECURITY INVOKER, to know
-- whose sessions to read and write (the current user at the call, which a SECURITY
-- DEFINER function cannot see), and switch to durable's owner for their statements
-- themselves (sessions.c).
SELECT p.oid::regprocedure AS function, p.prosecdef, p.proconfig
  FROM pg_proc p JOIN members m ON m.classid = 'pg_proc'::regclass AND m.objid = p.oid
 WHERE p.prosecdef = (p.proname IN ('session_save', 'session_load'))
    OR p.proconfig IS NULL
    OR NOT ('search_path=pg_catalog, pg_temp' = ANY (p.proconfig));

-- No function is STRICT: a NULL argument must raise 22023, not return NULL (no row)
SELECT p.oid::regprocedure AS function
  FROM pg_proc p JOIN members m ON m.classid = 'pg_proc'::regclass AND m.objid = p.oid
 WHERE p.proisstrict;

-- Every object in schema durable belongs to the extension: nothing stray (no row)
SELECT 'function' AS kind, p.oid::regprocedure::text AS name
  FROM pg_proc p
 WHERE p.pronamespace = 'durable'::regnamespace
   AND p.oid NOT IN (SELECT objid FROM members WHERE classid = 'pg_proc'::regclass)
UNION ALL
SELECT 'relation', c.oid::regclass::text
  FROM pg_class c
 WHERE c.relnamespace = 'durable'::regnamespace
   AND c.relkind IN ('r', 'p', 'S', 'v', 'm', 'f')
   AND c.oid NOT IN (SELECT objid FROM members WHERE classid = 'pg_class'::regclass);

-- Every object of the extension, and its schema, is owned by a superuser (no row)
SELECT 'function' AS kind, p.oid::regprocedure::text AS name
  FROM pg_proc p JOIN pg_roles r ON r.oid = p.proowner
 WHERE p.pronamespace = 'durable'::regnamespace AND NOT r.rolsuper
UNION ALL
SELECT 'relation', c.oid::regclass::text
  FROM pg_class c JOIN pg_roles r ON r.oid = c.relowner
 WHERE c.relnamespace = 'durable'::regnamespace AND NOT r.rolsuper
UNION ALL
SELECT 'schema', n.nspname::text
  FROM pg_namespace n JOIN pg_roles r ON r.oid = n.nspowner
 WHERE n.nspname = 'durable' AND NOT r.rolsuper;

-- No table, index or sequence of the extension is UNLOGGED or TEMPORARY: the journals survive
-- a crash; but sweep()'s announcement windows, a hint's bookkeeping, which a crash may empty
-- (and logical replication leaves out) (two rows)
SELECT c.oid::regclass AS relation, c.relkind, c.relpersistence
  FROM pg_class c
 WHERE c.relnamespace = 'durable'::regnamespace
   AND c.relpersistence <> 'p'
 ORDER BY 1;

-- Every table and sequence of the extension is registered with pg_extension_config_dump,
-- but durable.sweep_windows (sweep()'s announcement windows: a restore's CREATE EXTENSION
-- makes its rows) (one row)
SELECT c.oid::regclass AS relation
  FROM pg_class c JOIN members m ON m.classid = 'pg_class'::regclass AND m.objid = c.oid,
       pg_extension e
 WHERE e.extname = 'durable'
   AND c.relkind IN ('r', 'p', 'S')
   AND NOT (c.oid = ANY (e.extconfig));

-- ... and they dump whole: no WHERE filter that would leave rows out of a dump (no row)
SELECT c.oid::regclass AS relation, x.cond
  FROM pg_extension e,
       unnest(e.extconfig, e.extcondition) AS x(cfg, cond)
  JOIN pg_class c ON c.oid = x.cfg
 WHERE e.extname = 'durable' AND x.cond <> '';

-- No ACL entry for PUBLIC on the schema, the functions, the tables or the sequences (no row);
-- a NULL ACL means the built-in default, which grants functions to PUBLIC, so it counts too
SELECT o.kind, o.name, a.privilege_type
  FROM (SELECT 'schema' AS kind, n.nspname::text AS name,
               coalesce(n.nspacl, acldefault('n', n.nspowner)) AS acl
          FROM pg_namespace n WHERE n.nspname = 'durable'
        UNION ALL
        SELECT 'function', p.oid::regprocedure::text,
               coalesce(p.proacl, acldefault('f', p.proowner))
          FROM pg_proc p WHERE p.pronamespace = 'durable'::regnamespace
        UNION ALL
        SELECT CASE c.relkind WHEN 'S' THEN 'sequence' ELSE 'table' END, c.oid::regclass::text,
               coalesce(c.relacl, acldefault(CASE c.relkind WHEN 'S' THEN 's' ELSE 'r' END::"char", c.relowner))
          FROM pg_class c WHERE c.relnamespace = 'durable'::regnamespace AND c.relkind IN ('r', 'p', 'S', 'v')
       ) o,
       LATERAL aclexplode(o.acl) a
 WHERE a.grantee = 0;

-- No column-level grant to anybody either (no row)
SELECT a.attrelid::regclass AS relation, a.attname
  FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
 WHERE c.relnamespace = 'durable'::regnamespace AND a.attacl IS NOT NULL;

-- The control file pins the schema: durable lives in schema durable and cannot be relocated
SELECT e.extname, n.nspname AS schema, e.extrelocatable
  FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
 WHERE e.extname = 'durable';

-- TESTS: a hostile search_path at run time
-- SETUP: mallory is a bot role with exactly the README's client grants, and a schema of its own
CREATE ROLE regress_durable_mallory NOLOGIN;
GRANT USAGE ON SCHEMA durable TO regress_durable_mallory;
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
  TO regress_durable_mallory;
CREATE SCHEMA regress_trojan AUTHORIZATION regress_durable_mallory;

-- The scenario a bot runs, recorded as jsonb; it names every function and operator it
-- uses with its schema, so that only the API's own name resolution is under test
SET ROLE regress_durable_mallory;
CREATE TEMP TABLE runs (run text, step integer, result jsonb);
CREATE FUNCTION pg_temp.scenario(tag text) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    bot text := pg_catalog.concat(tag, '-bot');
    a record;
    b record;
    c record;
    k text;
BEGIN
    -- admit with an instance: journaled and leased at once
    SELECT * INTO a FROM durable.inbox_admit(source => tag, message_id => 'm1', chat_id => pg_catalog.concat(tag, '-c1'),
                                             payload => '{"text":"hi"}', instance => bot);
    INSERT INTO pg_temp.runs VALUES (tag, 1, pg_catalog.to_jsonb(a));
    -- the same message again: a duplicate
    INSERT INTO pg_temp.runs
    SELECT tag, 2, pg_catalog.to_jsonb(r)
      FROM durable.inbox_admit(source => tag, message_id => 'm1', chat_id => pg_catalog.concat(tag, '-c1'),
                               payload => '{"text":"hi"}', instance => bot) r;
    -- heartbeat, then complete
    INSERT INTO pg_temp.runs
    SELECT tag, 3, pg_catalog.jsonb_build_object('lease_until', durable.inbox_heartbeat(a.id, a.token, '5 min'));
    PERFORM durable.inbox_complete(a.id, a.token);
    INSERT INTO pg_temp.runs VALUES (tag, 4, '"completed"');
    -- a pending record, claimed, failed with a retry in an hour
    INSERT INTO pg_temp.runs
    SELECT tag, 5, pg_catalog.to_jsonb(r)
      FROM durable.inbox_admit(source => tag, message_id => 'm2', chat_id => pg_catalog.concat(tag, '-c2'),
                               payload => '{"n":2}') r;
    SELECT * INTO b FROM durable.inbox_claim(instance => bot, max => 1);
    INSERT INTO pg_temp.runs VALUES (tag, 6, pg_catalog.to_jsonb(b));
    INSERT INTO pg_temp.runs
    SELECT tag, 7, pg_catalog.to_jsonb(r) FROM durable.inbox_fail(b.id, b.token, 'boom', '1 hour') r;
    -- a third record: claimed, released, recovered by instance_start, claimed again, completed in a batch
    PERFORM durable.inbox_admit(source => tag, message_id => 'm3', chat_id => pg_catalog.concat(tag, '-c3'));
    SELECT * INTO c FROM durable.inbox_claim(instance => bot, max => 1, lease => '5 min');
    PERFORM durable.inbox_release(c.id, c.token);
    SELECT * INTO c FROM durable.inbox_claim(instance => bot, max => 1, lease => '5 min');
    INSERT INTO pg_temp.runs VALUES (tag, 8, pg_catalog.to_jsonb(c));
    INSERT INTO pg_temp.runs
    SELECT tag, 9, pg_catalog.to_jsonb(r) FROM durable.instance_start(bot) r;
    SELECT * INTO c FROM durable.inbox_claim(instance => bot, max => 1, lease => '5 min');
    INSERT INTO pg_temp.runs
    SELECT tag, 10, pg_catalog.jsonb_build_object('completed', durable.inbox_complete(ARRAY[c.id], ARRAY[c.token]));
    -- outbox: begin, sent, the same key answered from the journal
    k := pg_catalog.concat(tag, '-k1');
    SELECT * INTO a FROM durable.outbox_begin(k, pg_catalog.concat(tag, '-c1'), '{"text":"hello"}', bot);
    INSERT INTO pg_temp.runs VALUES (tag, 11, pg_catalog.to_jsonb(a));
    PERFORM durable.outbox_heartbeat(k, a.token, '5 min');
    PERFORM durable.outbox_sent(k, a.token, 'p-1');
    INSERT INTO pg_temp.runs
    SELECT tag, 12, pg_catalog.to_jsonb(r)
      FROM durable.outbox_begin(k, pg_catalog.concat(tag, '-c1'), '{"text":"hello"}', bot) r;
    -- outbox: enqueue twice, claim, fail, retry later
    k := pg_catalog.concat(tag, '-k2');
    INSERT INTO pg_temp.runs
    SELECT tag, 13, pg_catalog.to_jsonb(r) FROM durable.outbox_enqueue(k, pg_catalog.concat(tag, '-c2'), '{"n":2}') r;
    INSERT INTO pg_temp.runs
    SELECT tag, 14, pg_catalog.to_jsonb(r) FROM durable.outbox_enqueue(k, pg_catalog.concat(tag, '-c2'), '{"n":2}') r;
    SELECT * INTO b FROM durable.outbox_claim(instance => bot, max => 1);
    INSERT INTO pg_temp.runs VALUES (tag, 15, pg_catalog.to_jsonb(b));
    INSERT INTO pg_temp.runs
    SELECT tag, 16, pg_catalog.to_jsonb(r) FROM durable.outbox_failed(b.key, b.token, 'HTTP 502', true, '1 hour') r;
    -- a shared rate limit of 2 a minute
    INSERT INTO pg_temp.runs
    SELECT tag, 17, pg_catalog.jsonb_build_object('p1', durable.permit(pg_catalog.concat(tag, '-bucket'), 2, '1 min'),
                                                  'p2', durable.permit(pg_catalog.concat(tag, '-bucket'), 2, '1 min'),
                                                  'p3_waits', durable.permit(pg_catalog.concat(tag, '-bucket'), 2, '1 min')
                                                               OPERATOR(pg_catalog.>) '0'::interval);
END
$fn$;

-- Baseline: the scenario under an ordinary search_path succeeds
SELECT pg_temp.scenario('sec-base');

-- SETUP: plant the trojans; each one writes to a canary table when it runs
CREATE TABLE regress_trojan.canary (what text, by_role name DEFAULT current_user);
CREATE FUNCTION regress_trojan.tripped(what text) RETURNS void
LANGUAGE sql AS $$ INSERT INTO regress_trojan.canary (what) VALUES (what) $$;
-- operators on text, bigint, timestamptz and jsonb
CREATE FUNCTION regress_trojan.text_eq(text, text) RETURNS boolean
LANGUAGE plpgsql AS $$ BEGIN PERFORM regress_trojan.tripped('text = text'); RETURN pg_catalog.texteq($1, $2); END $$;
CREATE OPERATOR regress_trojan.= (LEFTARG = text, RIGHTARG = text, FUNCTION = regress_trojan.text_eq);
CREATE FUNCTION regress_trojan.int8_eq(bigint, bigint) RETURNS boolean
LANGUAGE plpgsql AS $$ BEGIN PERFORM regress_trojan.tripped('bigint = bigint'); RETURN pg_catalog.int8eq($1, $2); END $$;
CREATE OPERATOR regress_trojan.= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = regress_trojan.int8_eq);
CREATE FUNCTION regress_trojan.int48_eq(integer, bigint) RETURNS boolean
LANGUAGE plpgsql AS $$ BEGIN PERFORM regress_trojan.tripped('integer = bigint'); RETURN pg_catalog.int48eq($1, $2); END $$;
CREATE OPERATOR regress_trojan.= (LEFTARG = integer, RIGHTARG = bigint, FUNCTION = regress_trojan.int48_eq);
CREATE FUNCTION regress_trojan.ts_lt(timestamptz, timestamptz) RETURNS boolean
LANGUAGE plpgsql AS $$ BEGIN PERFORM regress_trojan.tripped('timestamptz < timestamptz'); RETURN pg_catalog.timestamptz_lt($1, $2); END $$;
CREATE OPERATOR regress_trojan.< (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = regress_trojan.ts_lt);
CREATE FUNCTION regress_trojan.ts_le(timestamptz, timestamptz) RETURNS boolean
LANGUAGE plpgsql AS $$ BEGIN PERFORM regress_trojan.tripped('timestamptz <= timestamptz'); RETURN pg_catalog.timestamptz_le($1, $2); END $$;
CREATE OPERATOR regress_trojan.<= (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = regress_trojan.ts_le);
CREATE FUNCTION regress_trojan.ts_pl(timestamptz, interval) RETURNS timestamptz
LANGUAGE plpgsql AS $$ BEGIN PERFORM regress_trojan.tripped('timestamptz + interval'); RETURN pg_catalog.timestamptz_pl_interval($1, $2); END $$;
CREATE OPERATOR regress_trojan.+ (LEFTARG = timestamptz, RIGHTARG = interval, FUNCTION = regress_trojan.ts_pl);
CREATE FUNCTION regress_trojan.jsonb_eq(jsonb, jsonb) RETURNS boolean
LANGUAGE plpgsql AS $$ BEGIN PERFORM regress_trojan.tripped('jsonb = jsonb'); RETURN pg_catalog.jsonb_eq($1, $2); END $$;
CREATE OPERATOR regress_trojan.= (LEFTARG = jsonb, RIGHTARG = jsonb, FUNCTION = regress_trojan.jsonb_eq);
-- functions an implementation might call unqualified
CREATE FUNCTION regress_trojan.nextval(regclass) RETURNS bigint
LANGUAGE plpgsql AS $$ BEGIN PERFORM regress_trojan.tripped('nextval(regclass)'); RETURN 1; END $$;
CREATE FUNCTION regress_trojan.nextval(text) RETURNS bigint
LANGUAGE plpgsql AS $$ BEGIN PERFORM regress_trojan.tripped('nextval(text)'); RETURN 1; END $$;
CREATE FUNCTION regress_trojan.now() RETURNS timestamptz
LANGUAGE plpgsql AS $$ BEGIN PERFORM regress_trojan.tripped('now()'); RETURN '2000-01-01'; END $$;
CREATE FUNCTION regress_trojan.clock_timestamp() RETURNS timestamptz
LANGUAGE plpgsql AS $$ BEGIN PERFORM regress_trojan.tripped('clock_timestamp()'); RETURN '2000-01-01'; END $$;
CREATE FUNCTION regress_trojan.gen_random_uuid() RETURNS uuid
LANGUAGE plpgsql AS $$ BEGIN PERFORM regress_trojan.tripped('gen_random_uuid()'); RETURN '00000000-0000-0000-0000-000000000000'; END $$;
CREATE FUNCTION regress_trojan.sha256(bytea) RETURNS bytea
LANGUAGE plpgsql AS $$ BEGIN PERFORM regress_trojan.tripped('sha256(bytea)'); RETURN '\x00'; END $$;
CREATE FUNCTION regress_trojan.pg_notify(text, text) RETURNS void
LANGUAGE plpgsql AS $$ BEGIN PERFORM regress_trojan.tripped('pg_notify(text, text)'); END $$;
CREATE FUNCTION regress_trojan.count_sf(bigint) RETURNS bigint
LANGUAGE plpgsql AS $$ BEGIN PERFORM regress_trojan.tripped('count(*)'); RETURN $1 + 1; END $$;
CREATE AGGREGATE regress_trojan.count(*) (SFUNC = regress_trojan.count_sf, STYPE = bigint, INITCOND = '0');
-- lookalikes of the API itself, exact same signatures
CREATE FUNCTION regress_trojan.inbox_admit(source text, message_id text, chat_id text, payload jsonb DEFAULT '{}',
                                           kind text DEFAULT 'message', instance text DEFAULT NULL, lease interval DEFAULT NULL)
RETURNS TABLE(id bigint, token bigint, duplicate boolean, state text)
LANGUAGE plpgsql AS $$ BEGIN PERFORM regress_trojan.tripped('inbox_admit lookalike'); END $$;
CREATE FUNCTION regress_trojan.inbox_complete(id bigint, token bigint) RETURNS void
LANGUAGE plpgsql AS $$ BEGIN PERFORM regress_trojan.tripped('inbox_complete lookalike'); END $$;
CREATE FUNCTION regress_trojan.durable(text) RETURNS void
LANGUAGE plpgsql AS $$ BEGIN PERFORM regress_trojan.tripped('durable(text)'); END $$;
-- relations named like the journals: in the trojan schema, and temporary ones in this
-- session (pg_temp is always searched, and first, for relations)
CREATE VIEW regress_trojan.inbox AS SELECT 1 AS id FROM regress_trojan.tripped('regress_trojan.inbox');
CREATE VIEW regress_trojan.outbox AS SELECT 1 AS id FROM regress_trojan.tripped('regress_trojan.outbox');
CREATE TEMP VIEW inbox AS SELECT 1 AS id FROM regress_trojan.tripped('pg_temp.inbox');
CREATE TEMP VIEW outbox AS SELECT 1 AS id FROM regress_trojan.tripped('pg_temp.outbox');
CREATE TEMP VIEW sessions AS SELECT 1 AS id FROM regress_trojan.tripped('pg_temp.sessions');
CREATE TEMP VIEW permits AS SELECT 1 AS id FROM regress_trojan.tripped('pg_temp.permits');
CREATE TEMP VIEW permit_buckets AS SELECT 1 AS id FROM regress_trojan.tripped('pg_temp.permit_buckets');
CREATE TEMP VIEW token_seq AS SELECT 1 AS id FROM regress_trojan.tripped('pg_temp.token_seq');
CREATE TEMP VIEW inbox_id_seq AS SELECT 1 AS id FROM regress_trojan.tripped('pg_temp.inbox_id_seq');
CREATE TEMP VIEW outbox_id_seq AS SELECT 1 AS id FROM regress_trojan.tripped('pg_temp.outbox_id_seq');
SET search_path = regress_trojan, pg_catalog, public;

-- The trojans are live: unqualified names in mallory's own queries run them
SELECT 'a'::text = 'a'::text AS eq, extract(year FROM now()) AS fake_year, count(*) AS fake_count
  FROM (VALUES (1), (2)) v(x);
SELECT DISTINCT what FROM regress_trojan.canary ORDER BY what;
TRUNCATE regress_trojan.canary;

-- The same scenario under the hostile search_path succeeds
SELECT pg_temp.scenario('sec-evil');

-- No trojan ran inside the API (no row)
SELECT * FROM regress_trojan.canary;

RESET search_path;
RESET ROLE;

-- The hostile run's results, step by step (ids and tokens shown as set or not, times as past or future)
CREATE FUNCTION pg_temp.normalized(j jsonb, tag text) RETURNS jsonb
LANGUAGE sql AS $$
    SELECT CASE jsonb_typeof(j)
           WHEN 'object' THEN
               (SELECT jsonb_object_agg(k,
                         CASE WHEN k IN ('id', 'token') THEN to_jsonb(v <> 'null'::jsonb)
                              WHEN k IN ('lease_until', 'not_before') THEN
                                  to_jsonb(CASE WHEN v = 'null'::jsonb THEN 'null'
                                                WHEN (v #>> '{}')::timestamptz > clock_timestamp() THEN 'future'
                                                ELSE 'past' END)
                              WHEN jsonb_typeof(v) = 'string' THEN to_jsonb(replace(v #>> '{}', tag, 'TAG'))
                              ELSE v END)
                  FROM jsonb_each(j) AS e(k, v))
           ELSE j END
$$;
SELECT step, pg_temp.normalized(result, run) AS result
  FROM pg_temp.runs WHERE run = 'sec-evil' ORDER BY step;

-- Identical to the baseline, step by step (no row)
SELECT step
  FROM pg_temp.runs
 GROUP BY step
HAVING count(*) <> 2 OR count(DISTINCT pg_temp.normalized(result, run)) <> 1;

-- Both runs left the journals as they should: done, pending (retry in an hour), done; sent, failed
SELECT source, message_id, state, attempts
  FROM durable.inbox WHERE source IN ('sec-base', 'sec-evil') ORDER BY source, message_id;
SELECT key, state, attempts, provider_message_id
  FROM durable.outbox WHERE key LIKE 'sec-%' ORDER BY key;

-- CLEANUP
DROP VIEW pg_temp.inbox, pg_temp.outbox, pg_temp.sessions, pg_temp.permits, pg_temp.permit_buckets,
          pg_temp.token_seq, pg_temp.inbox_id_seq, pg_temp.outbox_id_seq;
SET client_min_messages = warning;
DROP SCHEMA regress_trojan CASCADE;
RESET client_min_messages;
DROP FUNCTION pg_temp.scenario(text);
DROP FUNCTION pg_temp.normalized(jsonb, text);
DROP TABLE pg_temp.runs;
DROP VIEW members;
DELETE FROM durable.inbox WHERE source IN ('sec-base', 'sec-evil');
DELETE FROM durable.outbox WHERE key LIKE 'sec-%';
DELETE FROM durable.permits WHERE bucket LIKE 'sec-%';
DELETE FROM durable.permit_buckets WHERE bucket LIKE 'sec-%';
DROP OWNED BY regress_durable_mallory;
DROP ROLE regress_durable_mallory;

-- TESTS: commands that lock a table before they check the role's right
-- A role with USAGE on the schema and no right on the tables is refused,
-- before any lock, what PostgreSQL checks only once it holds the table's
-- lock (spec lock_guard shows the lock queue this avoids)
CREATE ROLE regress_durable_lurker;
GRANT USAGE ON SCHEMA durable TO regress_durable_lurker;
SET ROLE regress_durable_lurker;
CREATE RULE lurk AS ON INSERT TO durable.outbox DO INSTEAD NOTHING;
CREATE TEMP TABLE lurk (send_key text REFERENCES durable.outbox (key));
COMMENT ON TABLE durable.sessions IS 'lurking';
-- What PostgreSQL would skip or refuse on its own is left to it: a CREATE
-- TABLE IF NOT EXISTS of a table there is, an ALTER TABLE IF EXISTS of one
-- there is not
CREATE TEMP TABLE lurk (send_key text);
CREATE TEMP TABLE IF NOT EXISTS lurk (send_key text REFERENCES durable.outbox (key));
ALTER TABLE IF EXISTS pg_temp.no_such_table ADD FOREIGN KEY (send_key) REFERENCES durable.outbox (key);
RESET ROLE;
-- ... and so is a role without USAGE on schema durable
REVOKE USAGE ON SCHEMA durable FROM regress_durable_lurker;
SET ROLE regress_durable_lurker;
CREATE TEMP TABLE IF NOT EXISTS lurk (send_key text REFERENCES durable.outbox (key));
CREATE RULE lurk AS ON INSERT TO durable.outbox DO INSTEAD NOTHING;
RESET ROLE;
DROP OWNED BY regress_durable_lurker;
DROP ROLE regress_durable_lurker;
-- A database without the extension may have a schema called durable: the
-- hook leaves it alone
SELECT pg_catalog.current_database() AS regress_db \gset
CREATE DATABASE regress_durable_elsewhere;
\c regress_durable_elsewhere
CREATE SCHEMA durable;
CREATE TABLE durable.inbox (id bigint);
ALTER TABLE durable.inbox ADD COLUMN note text DEFAULT 'mine', ALTER COLUMN id SET NOT NULL,
    ALTER COLUMN id TYPE numeric;
\c :regress_db
DROP DATABASE regress_durable_elsewhere;
-- TESTS: a role granted REFERENCES on the journals
-- durable deletes journal records with the privileges of its owner (a
-- superuser).  A key with ON DELETE CASCADE from a table of another role
-- would fire that role's triggers with them; a query over such a table
-- (the purge's guard for a NO ACTION key) would plan it as durable's user,
-- evaluating the role's index expressions and implicit casts.  durable
-- deletes nothing from a journal while a table of another role takes part
-- in its deletes.
-- SETUP: trudy owns a schema and may reference both journals
CREATE ROLE regress_durable_trudy;
GRANT USAGE ON SCHEMA durable TO regress_durable_trudy;
GRANT REFERENCES ON durable.inbox, durable.outbox TO regress_durable_trudy;
CREATE SCHEMA regress_trudy AUTHORIZATION regress_durable_trudy;
SET ROLE regress_durable_trudy;
CREATE TABLE regress_trudy.ran (who name, what text);
GRANT INSERT ON regress_trudy.ran TO PUBLIC;
CREATE FUNCTION regress_trudy.log(what text) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO regress_trudy.ran VALUES (current_user, what);
    RETURN 0;
END $$;
-- a cascading key to the outbox, with a trigger on the rows it deletes
CREATE FUNCTION regress_trudy.log_cascade() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM regress_trudy.log('cascade trigger'); RETURN NULL; END $$;
CREATE TABLE regress_trudy.replies (send_key text REFERENCES durable.outbox (key) ON DELETE CASCADE);
CREATE TRIGGER log_cascade AFTER DELETE ON regress_trudy.replies
    FOR EACH ROW EXECUTE FUNCTION regress_trudy.log_cascade();
-- a NO ACTION key to the inbox, on a table with an index expression that
-- the planner evaluates as whoever plans a query over the table
CREATE FUNCTION regress_trudy.zero() RETURNS bigint IMMUTABLE LANGUAGE plpgsql AS $$
BEGIN RETURN regress_trudy.log('index expression'); END $$;
CREATE TABLE regress_trudy.notes (inbox_id bigint REFERENCES durable.inbox (id));
CREATE INDEX ON regress_trudy.notes ((inbox_id + regress_trudy.zero()));
RESET ROLE;
TRUNCATE regress_trudy.ran;
-- An old sent send that trudy's table references, and an old done inbox record
SELECT count(*) AS sent
  FROM durable.outbox_begin('sec-ref', 'sec-ref', '{}', 'sec-ref') b,
       durable.outbox_sent(b.key, b.token, 'p-sec-ref') s;
UPDATE durable.outbox SET sent_at = sent_at - interval '400 days' WHERE key = 'sec-ref';
INSERT INTO regress_trudy.replies VALUES ('sec-ref');
SELECT count(durable.inbox_complete(a.id, a.token)) AS done
  FROM durable.inbox_admit('sec-ref', 'r1', 'sec-ref', instance => 'sec-ref') a;
UPDATE durable.inbox SET done_at = done_at - interval '400 days' WHERE source = 'sec-ref';
TRUNCATE regress_trudy.ran;
-- purge() by hand refuses, naming the first journal's key
\set VERBOSITY terse
SELECT durable.purge(older_than => '1 day');
\set VERBOSITY default
-- So does outbox_discard()
SELECT durable.outbox_discard('sec-ref');
-- A sweep pass warns and purges nothing from either journal
SELECT purged FROM durable.sweep();
SELECT key, state FROM durable.outbox WHERE key = 'sec-ref';
SELECT count(*) AS inbox_left FROM durable.inbox WHERE source = 'sec-ref';
-- Nothing of trudy's ran as anybody but trudy, and she is no superuser (no row)
SELECT who, what FROM regress_trudy.ran WHERE who <> 'regress_durable_trudy';
SELECT rolname FROM pg_roles WHERE rolname = 'regress_durable_trudy' AND rolsuper;
-- Nor through a table of a superuser's that a delete cascades to: trudy's
-- key to that table would act on the cascade
DROP TABLE regress_trudy.replies, regress_trudy.notes;
CREATE TABLE public.sec_deliveries (send_key text PRIMARY KEY REFERENCES durable.outbox (key) ON DELETE CASCADE);
GRANT REFERENCES ON public.sec_deliveries TO regress_durable_trudy;
SET ROLE regress_durable_trudy;
CREATE TABLE regress_trudy.receipts (send_key text REFERENCES public.sec_deliveries ON DELETE CASCADE);
CREATE TRIGGER log_cascade AFTER DELETE ON regress_trudy.receipts
    FOR EACH ROW EXECUTE FUNCTION regress_trudy.log_cascade();
RESET ROLE;
INSERT INTO public.sec_deliveries VALUES ('sec-ref');
INSERT INTO regress_trudy.receipts VALUES ('sec-ref');
\set VERBOSITY terse
SELECT durable.purge(older_than => '1 day');
\set VERBOSITY default
SELECT who, what FROM regress_trudy.ran WHERE who <> 'regress_durable_trudy';
-- The inbox, which no table of trudy's references any more, is purged (the
-- pass warned about the outbox above: a process warns once in 10 minutes)
SELECT purged FROM durable.sweep();
SELECT count(*) AS inbox_left FROM durable.inbox WHERE source = 'sec-ref';
-- Tables of a superuser's cascade as before
ALTER TABLE regress_trudy.receipts OWNER TO CURRENT_USER;
DROP TRIGGER log_cascade ON regress_trudy.receipts;
SELECT durable.purge(older_than => '1 day');
SELECT (SELECT count(*) FROM public.sec_deliveries) AS deliveries_left,
       (SELECT count(*) FROM regress_trudy.receipts) AS receipts_left;
-- A partition of a superuser's referencing table that trudy owns counts as
-- her table: the key's check would run there
CREATE TABLE public.sec_parts (inbox_id bigint REFERENCES durable.inbox (id)) PARTITION BY RANGE (inbox_id);
CREATE TABLE public.sec_parts_1 PARTITION OF public.sec_parts FOR VALUES FROM (MINVALUE) TO (MAXVALUE);
ALTER TABLE public.sec_parts_1 OWNER TO regress_durable_trudy;
SELECT count(durable.inbox_complete(a.id, a.token)) AS done
  FROM durable.inbox_admit('sec-ref', 'r2', 'sec-ref', instance => 'sec-ref') a;
UPDATE durable.inbox SET done_at = done_at - interval '400 days' WHERE source = 'sec-ref';
\set VERBOSITY terse
SELECT durable.purge(older_than => '1 day');
\set VERBOSITY default
DROP TABLE public.sec_parts;
-- An inheritance child of a superuser's referencing table is no part of the
-- key (PostgreSQL's own check reads ONLY the parent), and the purge's guard
-- does not read it either: trudy's index expression there is not planned
CREATE TABLE public.sec_orders (inbox_id bigint REFERENCES durable.inbox (id));
CREATE TABLE regress_trudy.orders_child () INHERITS (public.sec_orders);
ALTER TABLE regress_trudy.orders_child OWNER TO regress_durable_trudy;
SET ROLE regress_durable_trudy;
CREATE INDEX ON regress_trudy.orders_child ((inbox_id + regress_trudy.zero()));
RESET ROLE;
TRUNCATE regress_trudy.ran;
SELECT durable.purge(older_than => '1 day');
SELECT count(*) AS inbox_left FROM durable.inbox WHERE source = 'sec-ref';
SELECT who, what FROM regress_trudy.ran WHERE who <> 'regress_durable_trudy';
DROP TABLE public.sec_orders CASCADE;
-- CLEANUP
DROP TABLE public.sec_deliveries, regress_trudy.receipts;
SET client_min_messages = warning;
DROP SCHEMA regress_trudy CASCADE;
RESET client_min_messages;
DROP OWNED BY regress_durable_trudy;
DROP ROLE regress_durable_trudy;
