/* durable--0.11--0.12.sql: sessions from before 0.10 load again from a dump or a publisher */

\echo Use "ALTER EXTENSION durable UPDATE TO '0.12'" to load this file. \quit

/*
 * Why: 0.10 added durable.sessions.owned_by NOT NULL, with a default of ''
 * only while it filled the rows already there (they belong to no role).  A
 * dump of a database at 0.9 or older restores into the current version (a
 * dump names no extension version), and its COPY of durable.sessions has no
 * owned_by column: without a default every row broke the NOT NULL, so the
 * whole table's data was refused (one Identify per shard after the restore)
 * and the error's "Failing row contains (...)" wrote a session id, a secret,
 * into the server log and to the restoring client.  A subscription to a
 * publisher at 0.9 or older failed the same way at its initial copy and at
 * every insert, its apply worker restarting and logging the secret each
 * time, and every table of the subscription stopped replicating.  Found by
 * review (2026-12-06).
 *
 * With the default back such rows arrive as the update made the old ones:
 * owned_by '', saved before 0.10, belonging to no role.  Not the updates
 * and deletes of such a publisher: the subscriber finds rows by its key,
 * which holds owned_by, a column the publisher does not send, and stops
 * ("publisher did not send replica identity column"); update the
 * publisher first, or leave durable.sessions out of the publication.  durable's own
 * statements always name owned_by, so the default never applies to them.
 * No table changes shape: the 0.12 library serves 0.11 databases too.
 *
 * Security notes (as for durable--0.1.sql): every name schema-qualified.
 */

ALTER TABLE durable.sessions ALTER COLUMN owned_by SET DEFAULT ''::pg_catalog.name;
