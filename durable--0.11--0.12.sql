/* durable--0.11--0.12.sql: PUBLIC may no longer use durable's row types */

\echo Use "ALTER EXTENSION durable UPDATE TO '0.12'" to load this file. \quit

/*
 * Why: every table and view has a row type, and PostgreSQL lets PUBLIC use
 * a new type (USAGE) unless it is revoked.  Any role with USAGE on schema
 * durable (bots, readers, every pg_monitor member) could make a column of a
 * journal's row type — in a temporary table, so no CREATE right on any
 * schema was needed — and while it stood, DROP EXTENSION durable failed
 * and so did an update step that changes a journal's columns (found by a
 * review on 2026-12-06: a pg_monitor member held back 0.5 -> 0.6).  Nothing
 * was read or written through it, but "nothing in schema durable is granted
 * to PUBLIC" did not hold for types.  USAGE on a type only governs creating
 * objects that depend on it (columns, functions, casts); querying the
 * journals and calling durable's functions do not need it.
 *
 * Every type of the schema but array types (which follow their element
 * type) loses PUBLIC's USAGE; a grant to a role made by hand stays.  A table
 * or view added by a later version must do the same.
 *
 * Security notes (as for durable--0.1.sql): every name schema-qualified,
 * operators qualified; the DDL is built with format() from catalog names.
 */

DO $revoke_types_from_public$
DECLARE
    t pg_catalog.name;
BEGIN
    FOR t IN
        SELECT ty.typname
          FROM pg_catalog.pg_type ty
         WHERE ty.typnamespace OPERATOR(pg_catalog.=) 'durable'::pg_catalog.regnamespace
           AND ty.typcategory OPERATOR(pg_catalog.<>) 'A'
         ORDER BY ty.typname
    LOOP
        EXECUTE pg_catalog.format('REVOKE USAGE ON TYPE durable.%I FROM PUBLIC', t);
    END LOOP;
END
$revoke_types_from_public$;
