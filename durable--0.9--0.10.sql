/* durable--0.9--0.10.sql: gateway sessions are kept per role */

\echo Use "ALTER EXTENSION durable UPDATE TO '0.10'" to load this file. \quit

/*
 * Why: a session id is a secret -- whoever holds one can resume the gateway
 * session and receive the bot's events -- yet up to 0.9 every role granted
 * session_load could load the session of every bot, and every role granted
 * session_save could replace it.  Two gateways of two teams that share a
 * database could take over (load) or break (save over) each other's
 * sessions.  From 0.10 each role has sessions of its own: a row is keyed by
 * the role that saved it (owned_by) with the bot and shard, a save writes
 * its caller's row and a load reads its caller's row, so no role can read,
 * replace or block another's (sessions.c).  (A design that gave a session
 * to the first role that saved it was dropped in review: another role could
 * claim a shard first, and lock its gateway out.)
 *
 * The caller is the current user when the function is called, as every
 * identity switch of PostgreSQL's has set it: the owner of a SECURITY
 * DEFINER function of another role that calls it, the table's owner when
 * ANALYZE runs an index expression that calls it.  A SECURITY DEFINER
 * function cannot see that user (it sees its own owner), so the two
 * functions become SECURITY INVOKER and switch to durable's owner
 * themselves, for their statements only; their search_path stays pinned.
 * The rule "granted EXECUTE, nothing else" is unchanged.
 *
 * The role is kept by name, not regrole: a dump restored, or a table
 * replicated, where a role is missing loads its rows as they are instead of
 * failing on every row of the table (a renamed role starts with no
 * sessions, as a new one does).  Sessions saved before this step belong to
 * no role (owned_by ''), which no role can be named: any role granted
 * session_load still loads them, as before, until the first save of their
 * bot and shard by any role replaces them with that role's row (a save
 * skips, rather than waits for, such a row another save is replacing).
 *
 * Security notes (as for durable--0.1.sql): every name schema-qualified.
 */

ALTER TABLE durable.sessions ADD COLUMN owned_by pg_catalog.name NOT NULL DEFAULT '';
ALTER TABLE durable.sessions ALTER COLUMN owned_by DROP DEFAULT;
ALTER TABLE durable.sessions DROP CONSTRAINT sessions_pkey;
ALTER TABLE durable.sessions ADD CONSTRAINT sessions_pkey PRIMARY KEY (owned_by, bot, shard);

COMMENT ON TABLE durable.sessions IS 'Resumable gateway sessions, one per (role, bot, shard); session ids are secrets: never grant this table';
COMMENT ON COLUMN durable.sessions.owned_by IS 'The role that saved the session, whose session it is (empty: saved before durable 0.10)';

ALTER FUNCTION durable.session_save(pg_catalog.text, pg_catalog.int4, pg_catalog.text, pg_catalog.int8, pg_catalog.text, pg_catalog.int4) SECURITY INVOKER;
ALTER FUNCTION durable.session_load(pg_catalog.text, pg_catalog.int4, pg_catalog.text, pg_catalog.int4, pg_catalog.interval) SECURITY INVOKER;
