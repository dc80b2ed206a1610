/* durable--0.10--0.11.sql: sweep() by hand keeps its durable_ready window in the database */

\echo Use "ALTER EXTENSION durable UPDATE TO '0.11'" to load this file. \quit

/*
 * Why: each sweep pass announces (NOTIFY durable_ready) the deferred and
 * retried work that came due in its window, which starts where the
 * previous pass's ended.  The worker keeps that end in shared memory; a
 * sweep() called by hand kept it in its process, whose first pass looked
 * 30 s back.  Run from a scheduler that connects anew for every run (cron
 * with psql; pg_cron by default), every pass was a first pass: with runs a
 * minute apart, work that came due more than 30 s before a run was never
 * announced, and with runs seconds apart the same work was announced at
 * several runs.  From 0.11 sweep() keeps the window's end in this table, one
 * row per journal (sweep.c): a pass locks the rows (never waiting: a pass
 * that finds them locked by another pass in progress uses its process's
 * window, as before), announces from where the table says, and writes
 * where the next window starts; the write commits or rolls back with the
 * pass, and with its NOTIFY.  The worker keeps its window in shared memory
 * (a write per pass in every database would make WAL on idle servers).
 *
 * The table is UNLOGGED: what it holds is a hint's bookkeeping, not worth
 * WAL at every pass; logical replication leaves it out (a publication FOR ALL
 * TABLES whose subscriber has durable too would copy its rows onto the
 * subscriber's own, a duplicate key that stops the subscription); a crash
 * empties it, and the next pass looks 30 s back and writes the rows again.
 * Its rows are not in the dump either (NULL: "look 30 s back", as a restored
 * database's first pass does): a restore's CREATE EXTENSION makes them.
 *
 * The table is made by the role that runs this step.  It goes to durable's
 * owner (the owner of durable.inbox, as 0.9 gives the monitoring views)
 * when another superuser runs the update, and keeps no grant: the table is
 * new, so every grant it has came from the default privileges of that role
 * (ALTER DEFAULT PRIVILEGES ... ON TABLES), and is revoked; the owner's own
 * entry is all rights, which the GRANT below also records as the initial
 * privileges, as a fresh install's.
 *
 * Security notes (as for durable--0.1.sql): every name schema-qualified,
 * operators qualified; the DDL is built with format() from catalog names.
 */

CREATE UNLOGGED TABLE durable.sweep_windows (
    kind      pg_catalog.text COLLATE pg_catalog."C" NOT NULL,
    next_from pg_catalog.timestamptz,
    CONSTRAINT sweep_windows_pkey PRIMARY KEY (kind),
    CONSTRAINT sweep_windows_kind_check CHECK (kind OPERATOR(pg_catalog.=) ANY (ARRAY['inbox', 'outbox']::pg_catalog.text[]))
);
COMMENT ON TABLE durable.sweep_windows IS 'Where the next durable_ready window of sweep() called by hand starts, per journal';
COMMENT ON COLUMN durable.sweep_windows.next_from IS 'Work due after this time is announced by the next pass (NULL: that pass looks 30 s back)';
INSERT INTO durable.sweep_windows (kind) VALUES ('inbox'), ('outbox');

DO $give_sweep_windows_to_owner$
DECLARE
    owner_name pg_catalog.name;
    g record;
BEGIN
    SELECT pg_catalog.pg_get_userbyid(c.relowner) INTO owner_name
      FROM pg_catalog.pg_class c
     WHERE c.oid OPERATOR(pg_catalog.=) 'durable.inbox'::pg_catalog.regclass;
    IF owner_name OPERATOR(pg_catalog.<>) CURRENT_USER THEN
        EXECUTE pg_catalog.format('ALTER TABLE durable.sweep_windows OWNER TO %I', owner_name);
    END IF;
    FOR g IN
        SELECT DISTINCT CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                             ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(a.grantee)) END AS grantee
          FROM pg_catalog.pg_class c
         CROSS JOIN LATERAL pg_catalog.aclexplode(c.relacl) a
         WHERE c.oid OPERATOR(pg_catalog.=) 'durable.sweep_windows'::pg_catalog.regclass
           AND a.grantee OPERATOR(pg_catalog.<>) c.relowner
    LOOP
        EXECUTE pg_catalog.format('REVOKE ALL ON TABLE durable.sweep_windows FROM %s CASCADE', g.grantee);
    END LOOP;
    EXECUTE pg_catalog.format('GRANT ALL ON TABLE durable.sweep_windows TO %I', owner_name);
END
$give_sweep_windows_to_owner$;
