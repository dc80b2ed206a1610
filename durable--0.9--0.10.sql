/* durable--0.9--0.10.sql: a gateway session belongs to the role that saved it */

\echo Use "ALTER EXTENSION durable UPDATE TO '0.10'" to load this file. \quit

/*
 * Why: a session id is a secret -- whoever holds one can resume the gateway
 * session and receive the bot's events -- yet up to 0.9 every role granted
 * session_load could load the session of every bot, and every role granted
 * session_save could replace it.  Two gateways of two teams that share a
 * database could each take over (load) or break (save over) the other's
 * sessions.  From 0.10 a session belongs to the role that saved it first,
 * recorded in owned_by; a save or load by a role without that role's
 * privileges (neither the role, nor a member that inherits it, nor a
 * superuser) is refused with 42501 (sessions.c).
 *
 * Sessions saved before this step have no owner (NULL): they load and save
 * as before, and the first save after the step makes the session its
 * role's.  Gateways save on every sequence change, so that window closes
 * as soon as they run again.
 *
 * regrole, not the role's name: a renamed role keeps its sessions, and
 * pg_dump writes the name, which a restore maps to the role of that name.
 * A dropped role leaves its rows to superusers (and to durable's owner,
 * who may delete them).
 *
 * Security notes (as for durable--0.1.sql): every name schema-qualified.
 */

ALTER TABLE durable.sessions ADD COLUMN owned_by pg_catalog.regrole;

COMMENT ON COLUMN durable.sessions.owned_by IS 'The role the session belongs to: the role that saved it first (NULL: saved before durable 0.10, until its next save)';
