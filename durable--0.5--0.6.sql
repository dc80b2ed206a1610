/* durable--0.5--0.6.sql: the journals' identifiers compare as bytes (collation "C") */

\echo Use "ALTER EXTENSION durable UPDATE TO '0.6'" to load this file. \quit

/*
 * Why: source, message_id, chat_id, idempotency keys and bucket and bot
 * names are opaque identifiers that durable compares for equality and keeps
 * in btree indexes (the dedupe keys, the per-chat order indexes, the
 * outbox's primary key).  Under the database's collation (en_US.UTF-8,
 * C.UTF-8 ...) every comparison inside those indexes went through the C
 * library's strcoll, and the indexes depended on the operating system's
 * collation tables: a glibc upgrade that changes them (glibc 2.28 did, for
 * most locales) leaves such indexes mis-sorted, and a mis-sorted dedupe
 * index can miss a key it holds, admitting a message twice or sending a
 * reply twice, the two things durable exists to prevent.  Under "C" a
 * comparison is memcmp, the same on every machine and every release, and
 * equality is what it was (every deterministic collation's equality is
 * byte equality).  What changes for a reader: ORDER BY on these columns
 * sorts by bytes.
 *
 * Cost of this step: the table data is not rewritten, but every index on
 * these columns is rebuilt, under an ACCESS EXCLUSIVE lock on its table
 * (README, "Packaging and supported versions"): purge first on a large
 * journal.  A view, rule or policy of yours that uses one of these columns
 * makes the step fail ("cannot alter type of a column used by a view or
 * rule"): drop it first, create it again after.  A foreign key of yours
 * that references outbox.key is rebuilt, which locks your table (its rows
 * are not checked again).
 * Changing a column's type drops its statistics: the tables are analyzed
 * again at the end.
 *
 * Security notes (as for durable--0.1.sql): every name schema-qualified.
 */

/*
 * A CHECK constraint over a column this step changes is validated again,
 * by the role that runs the step -- a superuser -- on every row: a
 * constraint that durable's owner (perhaps no longer a superuser) put on
 * one of its tables, or on a table that inherits from one, would run its
 * functions as that superuser.  Refuse, as for a view or policy over these
 * columns: drop it (or detach the table) first.
 */
-- (first, so that the checks below see a constraint or a child added by a transaction that was open)
LOCK TABLE durable.inbox, durable.outbox, durable.sessions, durable.permit_buckets, durable.permits
    IN ACCESS EXCLUSIVE MODE;
DO $refuse_check_constraints$
DECLARE
    c record;
BEGIN
    FOR c IN
        SELECT con.conname, cls.relname
          FROM pg_catalog.pg_constraint con
          JOIN pg_catalog.pg_class cls ON cls.oid OPERATOR(pg_catalog.=) con.conrelid
          JOIN pg_catalog.pg_attribute att
            ON att.attrelid OPERATOR(pg_catalog.=) con.conrelid
           AND att.attnum OPERATOR(pg_catalog.=) ANY (con.conkey)
         WHERE con.contype OPERATOR(pg_catalog.=) 'c'
           AND cls.relnamespace OPERATOR(pg_catalog.=) 'durable'::pg_catalog.regnamespace
           AND (cls.relname OPERATOR(pg_catalog.||) '.' OPERATOR(pg_catalog.||) att.attname)
               OPERATOR(pg_catalog.=) ANY (ARRAY['inbox.source', 'inbox.message_id', 'inbox.chat_id',
                                                 'outbox.key', 'outbox.chat_id', 'sessions.bot',
                                                 'permit_buckets.bucket', 'permits.bucket']::pg_catalog.text[])
         LIMIT 1
    LOOP
        RAISE EXCEPTION 'CHECK constraint "%" on durable.% stands in the way of the update to 0.6', c.conname, c.relname
            USING ERRCODE = '55000',
                  DETAIL = 'This step changes the collation of the column it checks, and the update would evaluate it again on every row as the role that runs it.',
                  HINT = 'Drop the constraint first, and add it again after the update.';
    END LOOP;
    /* The change reaches the tables that inherit from these, and their constraints. */
    FOR c IN
        SELECT pg_catalog.format('%I.%I', kn.nspname, kid.relname) AS child,
               pg_catalog.format('durable.%I', par.relname) AS parent
          FROM pg_catalog.pg_inherits i
          JOIN pg_catalog.pg_class kid ON kid.oid OPERATOR(pg_catalog.=) i.inhrelid
          JOIN pg_catalog.pg_namespace kn ON kn.oid OPERATOR(pg_catalog.=) kid.relnamespace
          JOIN pg_catalog.pg_class par ON par.oid OPERATOR(pg_catalog.=) i.inhparent
         WHERE i.inhparent OPERATOR(pg_catalog.=) ANY (ARRAY['durable.inbox', 'durable.outbox', 'durable.sessions',
                                                             'durable.permit_buckets', 'durable.permits']::pg_catalog.regclass[])
         LIMIT 1
    LOOP
        RAISE EXCEPTION 'table % inherits from % and stands in the way of the update to 0.6', c.child, c.parent
            USING ERRCODE = '55000',
                  DETAIL = 'This step changes the collation of columns that the tables inheriting from durable''s reach, and would check their constraints on every row as the role that runs the update.',
                  HINT = pg_catalog.format('Detach it first (ALTER TABLE ... NO INHERIT %s), and attach it again after the update.', c.parent);
    END LOOP;
END
$refuse_check_constraints$;

ALTER TABLE durable.inbox
    ALTER COLUMN source TYPE pg_catalog.text COLLATE pg_catalog."C",
    ALTER COLUMN message_id TYPE pg_catalog.text COLLATE pg_catalog."C",
    ALTER COLUMN chat_id TYPE pg_catalog.text COLLATE pg_catalog."C";

ALTER TABLE durable.outbox
    ALTER COLUMN key TYPE pg_catalog.text COLLATE pg_catalog."C",
    ALTER COLUMN chat_id TYPE pg_catalog.text COLLATE pg_catalog."C";

ALTER TABLE durable.sessions
    ALTER COLUMN bot TYPE pg_catalog.text COLLATE pg_catalog."C";

ALTER TABLE durable.permit_buckets
    ALTER COLUMN bucket TYPE pg_catalog.text COLLATE pg_catalog."C";

ALTER TABLE durable.permits
    ALTER COLUMN bucket TYPE pg_catalog.text COLLATE pg_catalog."C";

ANALYZE durable.inbox, durable.outbox, durable.sessions, durable.permit_buckets, durable.permits;
